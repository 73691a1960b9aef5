"""Model calls sent through httpx and httpx2 clients: recorded as the wire carried them, served
to the same client on replay (``tracely_sdk.providers.http``)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import httpx2
import openai
import pytest

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.providers._helpers import (
    capturing_content,
    closed_url,
    instrumented_fixture,
    llm_spans,
    replays_the_story,
)
from tracely_sdk import providers
from tracely_sdk.errors import MissingDependency

MODEL = "gpt-4o"
CLAUDE = "claude-3-5-haiku"
LIBRARIES = [httpx, httpx2]


instrumented = instrumented_fixture(["httpx", "httpx2"])


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], **extra}


def message(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": CLAUDE,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


def sse_data(lines: list[str]) -> list[Any]:
    """The data of an SSE stream's ``data:`` lines, parsed when JSON."""
    out: list[Any] = []
    for line in lines:
        if line.startswith("data: "):
            data = line[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


class Live:
    def __init__(self, value: Any, bundle: dict[str, Any], requests: int) -> None:
        self.value = value
        self.bundle = json.loads(json.dumps(bundle))
        self.requests = requests


def record(capture: Any, scenario: Callable[[str], Any]) -> Live:
    """``scenario(base_url)`` run live against the stand-in, inside an agent run."""
    with serve() as (server, _):
        with tracely.agent("agent", input="q"):
            value = scenario(server.base_url)
        requests = len(server.requests)
    return Live(value, capture.last_bundle, requests)


def replay(
    bundle: Any, scenario: Callable[[str], Any], *, strict: bool = True
) -> tuple[Any, tracely.ReplayReport]:
    """``scenario`` run under the recording, against a port where nothing listens."""
    with tracely.fixtures(bundle, strict=strict) as rep, tracely.agent("agent", input="q"):
        value = scenario(closed_url())
    return value, rep


# --------------------------------------------------------------------------- plain calls


@pytest.mark.parametrize("http", LIBRARIES, ids=lambda m: m.__name__)
def test_a_chat_completion_is_recorded_as_the_wire_carried_it_and_served_to_the_client(
    capture: Any, instrumented: None, http: ModuleType
) -> None:
    def scenario(base: str) -> Any:
        with http.Client() as client:
            response = client.post(f"{base}/v1/chat/completions", json=chat("Hello there"))
        return response

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["provider"] == f"{http.__name__}.Client.send"
    assert entry["output_type"] == "http.response"
    assert entry["input"] == {
        "method": "POST",
        "path": "/v1/chat/completions",
        "body": chat("Hello there"),
    }
    output = entry["output"]
    assert output["status"] == 200
    assert output["body"] == live.value.json()
    assert output["headers"]["content-type"] == "application/json"
    assert output["headers"]["x-request-id"] == live.value.headers["x-request-id"]
    assert entry["usage"] == [2, 4]
    (span,) = llm_spans(capture)
    assert span.name == f"chat {MODEL}"
    assert span.attributes["gen_ai.provider.name"] == "openai"
    assert span.attributes["server.address"] == "127.0.0.1"
    assert span.attributes["gen_ai.response.model"] == MODEL
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert span.attributes["gen_ai.usage.input_tokens"] == 2

    replayed, rep = replay(live.bundle, scenario)
    assert type(replayed) is http.Response
    assert replayed.status_code == 200
    assert replayed.json() == live.value.json()
    assert replayed.headers["x-request-id"] == live.value.headers["x-request-id"]
    assert rep.served == [f"llm:{MODEL}"] and rep.clean
    assert f"{http.__name__}.Client.send" in rep.providers


@pytest.mark.parametrize("http", LIBRARIES, ids=lambda m: m.__name__)
def test_an_async_client_stream_of_messages_is_recorded_event_by_event(
    capture: Any, instrumented: None, http: ModuleType
) -> None:
    async def ask(base: str) -> list[str]:
        async with http.AsyncClient() as client:
            body = message("Hello streamed world", stream=True)
            async with client.stream("POST", f"{base}/v1/messages", json=body) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                return [line async for line in response.aiter_lines()]

    def scenario(base: str) -> list[str]:
        return asyncio.run(ask(base))

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][CLAUDE]
    assert entry["provider"] == f"{http.__name__}.AsyncClient.send"
    events = entry["output"]["events"]
    assert [e["event"] for e in events][:2] == ["message_start", "content_block_start"]
    assert "ping" in [e["event"] for e in events]
    assert [e["data"] for e in events] == sse_data(live.value)
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.provider.name"] == "anthropic"
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert "gen_ai.response.time_to_first_chunk" in span.attributes

    replayed, rep = replay(live.bundle, scenario)
    assert sse_data(replayed) == sse_data(live.value)
    assert [line[len("event: ") :] for line in replayed if line.startswith("event: ")] == [
        e["event"] for e in events
    ]
    assert rep.served == [f"llm:{CLAUDE}"] and rep.clean


def test_a_streamed_chat_completion_keeps_its_usage_chunk_and_done(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> list[str]:
        body = chat("one two three", stream=True, stream_options={"include_usage": True})
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=body) as response:
            return list(response.iter_lines())

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output"]["events"][-1] == {"text": "[DONE]"}
    assert entry["usage"] == [3, 5]
    replayed, rep = replay(live.bundle, scenario)
    assert sse_data(replayed) == sse_data(live.value)
    assert sse_data(replayed)[-1] == "[DONE]"
    assert rep.clean


@pytest.mark.parametrize("http", LIBRARIES, ids=lambda m: m.__name__)
def test_a_served_body_has_the_length_of_its_own_bytes_and_no_recorded_encoding(
    capture: Any, instrumented: None, http: ModuleType
) -> None:
    def scenario(base: str) -> Any:
        with http.Client() as client:
            return client.post(f"{base}/v1/chat/completions", json=chat("Hello there"))

    live = record(capture, scenario)
    del live.bundle["checksum"]  # edited by hand
    (entry,) = live.bundle["llm"][MODEL]
    # A recording that kept the framing of the wire it came from (a server that indented its
    # JSON and compressed it): the body is served compact and uncompressed.
    entry["output"]["headers"].update(
        {
            "content-length": str(len(json.dumps(entry["output"]["body"], indent=2))),
            "content-encoding": "gzip",
            "transfer-encoding": "chunked",
        }
    )
    replayed, rep = replay(live.bundle, scenario)
    assert replayed.json() == live.value.json() and rep.clean
    assert replayed.headers["content-length"] == str(len(replayed.content))
    assert "content-encoding" not in replayed.headers
    assert "transfer-encoding" not in replayed.headers


def test_a_served_stream_has_no_recorded_length(capture: Any, instrumented: None) -> None:
    def scenario(base: str) -> tuple[Any, list[str]]:
        with httpx.Client() as client:
            body = chat("Hi", stream=True)
            with client.stream("POST", f"{base}/v1/chat/completions", json=body) as response:
                return response.headers, list(response.iter_lines())

    live = record(capture, scenario)
    del live.bundle["checksum"]  # edited by hand
    (entry,) = live.bundle["llm"][MODEL]
    entry["output"]["headers"]["content-length"] = "3"
    (headers, lines), rep = replay(live.bundle, scenario)
    assert sse_data(lines) == sse_data(live.value[1]) and rep.clean
    assert "content-length" not in headers


def test_an_async_plain_call_is_served_with_the_recorded_status_and_body(
    capture: Any, instrumented: None
) -> None:
    async def ask(base: str) -> tuple[int, Any]:
        async with httpx2.AsyncClient() as client:
            response = await client.post(f"{base}/v1/messages", json=message("Hi"))
            return response.status_code, response.json()

    def scenario(base: str) -> tuple[int, Any]:
        return asyncio.run(ask(base))

    live = record(capture, scenario)
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.clean


def test_messages_are_on_the_span_only_when_content_is_captured(
    capture: Any, instrumented: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def scenario(base: str) -> Any:
        body = message("Hello there", system="Be brief.")
        return httpx.post(f"{base}/v1/messages", json=body).json()

    record(capture, scenario)
    (span,) = llm_spans(capture)
    assert "gen_ai.input.messages" not in span.attributes
    assert "gen_ai.output.messages" not in span.attributes
    capture.exporter.clear()
    with capturing_content(monkeypatch, "httpx"):
        record(capture, scenario)
    (span,) = llm_spans(capture)
    # The system prompt goes where the GenAI conventions put it, not among the messages.
    assert json.loads(span.attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be brief."}
    ]
    assert json.loads(span.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Hello there"}]},
    ]
    (output,) = json.loads(span.attributes["gen_ai.output.messages"])
    assert output["parts"] == [{"type": "text", "content": "You said: Hello there"}]
    assert output["finish_reason"] == "stop"


def test_a_stream_closed_early_records_the_events_that_were_read(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> list[str]:
        body = chat("one two three four five six", stream=True)
        with (
            httpx.Client() as client,
            client.stream("POST", f"{base}/v1/chat/completions", json=body) as response,
        ):
            lines = response.iter_lines()
            return [next(lines)]

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][MODEL]
    assert 1 <= len(entry["output"]["events"]) < 8
    assert entry["output"]["events"][0]["data"] == sse_data(live.value)[0]
    replayed, rep = replay(live.bundle, scenario)
    assert sse_data(replayed) == sse_data(live.value) and rep.clean


# --------------------------------------------------------------------------- failures


def test_an_error_status_is_recorded_and_served_as_the_same_response(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> tuple[int, Any, str | None]:
        response = httpx.post(
            f"{base}/v1/chat/completions", json=chat("hi"), headers={"x-test-fault": "429"}
        )
        return response.status_code, response.json(), response.headers.get("retry-after")

    live = record(capture, scenario)
    assert live.value[0] == 429
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output"]["status"] == 429
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.clean


def test_a_connection_failure_is_recorded_and_raised_as_the_client_error(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> str:
        try:
            httpx.post(f"{closed_url()}/v1/chat/completions", json=chat("hi"))
        except httpx.ConnectError as exc:
            return type(exc).__name__
        return "answered"

    live = record(capture, scenario)
    assert live.value == "ConnectError"
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["error"]["type"] == "ConnectError"
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == "ConnectError" and rep.served == [f"llm:{MODEL}"]


def test_a_changed_prompt_is_served_and_reported_with_where_it_differs(
    capture: Any, instrumented: None
) -> None:
    live = record(
        capture, lambda base: httpx.post(f"{base}/v1/chat/completions", json=chat("Hello")).json()
    )
    replayed, rep = replay(
        live.bundle,
        lambda base: httpx.post(f"{base}/v1/chat/completions", json=chat("Hello, changed")).json(),
    )
    assert replayed == live.value
    assert rep.diverged == [f"llm:{MODEL}"] and not rep.clean
    (divergence,) = rep.divergences
    (difference,) = divergence["differences"]
    assert "body" in str(difference["path"]) and "messages" in str(difference["path"])
    assert difference["actual"] == "Hello, changed"


def test_a_call_the_recording_lacks_raises_under_strict_replay(
    capture: Any, instrumented: None
) -> None:
    with serve() as (server, _):
        with tracely.fixtures({}) as rep, pytest.raises(tracely.ReplayError, match=f"llm:{MODEL}"):
            httpx.post(f"{server.base_url}/v1/chat/completions", json=chat("not recorded"))
        assert server.requests == []  # nothing reached the network
    assert len(rep.errors) == 1


def test_a_request_to_an_unknown_endpoint_is_not_a_model_call(
    capture: Any, instrumented: None
) -> None:
    with serve() as (server, _):
        with tracely.agent("agent", input="q"):
            httpx.post(f"{server.base_url}/v1/moderations", json={"model": MODEL, "input": "x"})
            httpx.get(f"{server.base_url}/v1/chat/completions")
        assert len(server.requests) == 2
    assert llm_spans(capture) == []
    assert capture.last_bundle.get("llm", {}) == {}


# --------------------------------------------------------------------------- one interception point


def test_an_sdk_call_is_recorded_once_at_its_client_with_the_sdk_instrumented_too(
    capture: Any, instrumented: None
) -> None:
    providers.instrument("openai")  # switches on the same client hook: still one entry
    try:

        def scenario(base: str) -> Any:
            client = openai.OpenAI(api_key="test-key", base_url=f"{base}/v1", max_retries=0)
            return client.chat.completions.create(**chat("Hello"))

        live = record(capture, scenario)
        (_span,) = llm_spans(capture)
        (entry,) = live.bundle["llm"][MODEL]
        assert entry["provider"] == "httpx2.Client.send"
        replayed, rep = replay(live.bundle, scenario)
        assert "httpx2.Client.send" in rep.providers
        assert type(replayed) is type(live.value)
        assert replayed.model_dump() == live.value.model_dump()
        assert rep.served == [f"llm:{MODEL}"] and rep.clean
    finally:
        providers.uninstrument("openai")


def test_a_client_call_inside_call_llm_is_the_call_llm_call(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> Any:
        return tracely.call_llm(
            MODEL,
            lambda: httpx.post(f"{base}/v1/chat/completions", json=chat("Hello")).json(),
            input=chat("Hello")["messages"],
        )

    live = record(capture, scenario)
    (_span,) = llm_spans(capture)
    (entry,) = live.bundle["llm"][MODEL]
    assert "provider" not in entry and entry["output"] == live.value
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.clean


# --------------------------------------------------------------------------- the story


def _ask(base_url: str, question: str, *, twice: bool = False) -> str:
    with tracely.agent("http-agent", input=question) as agent_run:
        body = chat(question, stream=True)
        with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body) as response:
            answer = "".join(
                chunk["choices"][0]["delta"].get("content") or ""
                for chunk in sse_data(list(response.iter_lines()))
                if chunk != "[DONE]" and chunk["choices"]
            )
        if twice:
            again = httpx.post(f"{base_url}/v1/chat/completions", json=chat(question + " again"))
            answer = again.json()["choices"][0]["message"]["content"]
        agent_run.output = answer
    return answer


def test_a_recorded_case_passes_fails_on_a_changed_prompt_and_is_incomplete_on_an_extra_call(
    capture: Any, instrumented: None, tmp_path: Path
) -> None:
    with serve() as (server, _):
        live = _ask(server.base_url, "Paris weather?")
    assert live == "You said: Paris weather?"
    replays_the_story(capture.last_bundle, tmp_path, _ask, f"llm:{MODEL}")


def test_a_client_library_that_is_not_installed_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "httpx2", None)  # as if it were not installed
    with pytest.raises(MissingDependency, match=r"tracely-replay\[httpx2\]"):
        providers.instrument("httpx2")
