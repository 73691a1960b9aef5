"""The OpenAI-compatible formats beside chat completions, recorded and served at the HTTP
client: the Responses API (``POST .../responses``, plain and its named SSE events) and
embeddings (``POST .../embeddings``), sent by plain httpx/httpx2 and by litellm."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any

import httpx
import httpx2
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of prices at import

import litellm

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.providers._helpers import (
    capturing_content,
    closed_url,
    instrumented_fixture,
    llm_spans,
)
from tracely_sdk import providers

litellm.suppress_debug_info = True

MODEL = "gpt-4o"
EMBEDDER = "text-embedding-3-small"


instrumented = instrumented_fixture(["httpx", "httpx2"])


def record(capture: Any, scenario: Callable[[str], Any]) -> tuple[Any, dict[str, Any]]:
    """``scenario(base_url)`` run live against the stand-in inside an agent run, and the
    recording it made."""
    with serve() as (server, _), tracely.agent("agent", input="q"):
        value = scenario(server.base_url)
    return value, json.loads(json.dumps(capture.last_bundle))


def replay(bundle: Any, scenario: Callable[[str], Any]) -> tuple[Any, tracely.ReplayReport]:
    """``scenario`` under the recording, against a port where nothing listens."""
    with tracely.fixtures(bundle) as rep, tracely.agent("agent", input="q"):
        value = scenario(closed_url())
    return value, rep


def sse_events(lines: list[str]) -> list[tuple[str, Any]]:
    """An SSE stream's (event name, data) pairs."""
    out: list[tuple[str, Any]] = []
    name = ""
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            out.append((name, json.loads(line[len("data: ") :])))
    return out


# --------------------------------------------------------------------------- the Responses API


def test_a_response_is_recorded_as_the_wire_carried_it_and_served_to_the_client(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> Any:
        body = {"model": MODEL, "input": "Hello there", "instructions": "Be brief."}
        return httpx.post(f"{base}/v1/responses", json=body)

    live, bundle = record(capture, scenario)
    (entry,) = bundle["llm"][MODEL]
    assert entry["provider"] == "httpx.Client.send"
    assert entry["input"]["path"] == "/v1/responses"
    assert entry["output"]["body"] == live.json()
    assert entry["usage"] == [live.json()["usage"]["input_tokens"], 4]
    (span,) = llm_spans(capture)
    assert span.name == f"chat {MODEL}"
    assert span.attributes["gen_ai.response.id"] == live.json()["id"]
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)

    replayed, rep = replay(bundle, scenario)
    assert replayed.json() == live.json()
    assert rep.served == [f"llm:{MODEL}"] and rep.clean


def test_a_streamed_response_keeps_its_named_events_in_order(
    capture: Any, instrumented: None
) -> None:
    async def ask(base: str) -> list[str]:
        body = {"model": MODEL, "input": "one two three", "stream": True}
        async with (
            httpx2.AsyncClient() as client,
            client.stream("POST", f"{base}/v1/responses", json=body) as response,
        ):
            return [line async for line in response.aiter_lines()]

    def scenario(base: str) -> list[str]:
        return asyncio.run(ask(base))

    live, bundle = record(capture, scenario)
    (entry,) = bundle["llm"][MODEL]
    assert entry["provider"] == "httpx2.AsyncClient.send"
    events = entry["output"]["events"]
    assert [(e["event"], e["data"]) for e in events] == sse_events(live)
    assert events[0]["event"] == "response.created"
    assert events[-1]["event"] == "response.completed"
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.response.id"] == events[-1]["data"]["response"]["id"]
    assert span.attributes["gen_ai.usage.output_tokens"] == 5  # "You said: one two three"

    replayed, rep = replay(bundle, scenario)
    assert sse_events(replayed) == sse_events(live)
    assert rep.clean


def test_a_function_call_asked_for_in_a_response_is_on_the_span_when_content_is_captured(
    capture: Any, instrumented: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }

    def scenario(base: str) -> Any:
        body = {"model": MODEL, "input": "Weather in Paris?", "tools": [tool]}
        return httpx.post(f"{base}/v1/responses", json=body).json()

    with capturing_content(monkeypatch, "httpx"):
        record(capture, scenario)
    (span,) = llm_spans(capture)
    assert json.loads(span.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}
    ]
    (output,) = json.loads(span.attributes["gen_ai.output.messages"])
    (part,) = output["parts"]
    assert part["type"] == "tool_call" and part["name"] == "get_weather"
    assert part["arguments"] == {"city": "Paris"}
    assert output["finish_reason"] == "tool_call"


def test_litellm_responses_plain_and_streamed_replay_without_the_server(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> list[Any]:
        api = {"api_base": f"{base}/v1", "api_key": "test-key"}
        plain = litellm.responses(model=f"openai/{MODEL}", input="Hello there", **api)
        stream = litellm.responses(model=f"openai/{MODEL}", input="Hi", stream=True, **api)
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        return [plain.output[0].content[0].text, "".join(deltas)]

    live, bundle = record(capture, scenario)
    assert live == ["You said: Hello there", "You said: Hi"]
    assert [e["provider"] for e in bundle["llm"][MODEL]] == ["httpx.Client.send"] * 2
    replayed, rep = replay(bundle, scenario)
    assert replayed == live
    assert len(rep.served) == 2 and rep.clean, (rep.errors, rep.divergences)


def test_responses_written_by_hand_or_recorded_by_the_openai_sdk_are_served_at_the_client(
    capture: Any, instrumented: None
) -> None:
    openai_sdk = __import__("openai")
    providers.instrument("openai")
    try:
        with serve() as (server, _), tracely.agent("agent", input="q"):
            client = openai_sdk.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
            live = client.responses.create(model=MODEL, input="Hello")
    finally:
        providers.uninstrument("openai")
    (recorded,) = capture.last_bundle["llm"][MODEL]
    assert recorded["provider"] == "httpx2.Client.send"  # the OpenAI SDK's own client
    bundle = {"llm": {MODEL: [recorded, {"output": "Streamed by hand", "usage": [2, 3]}]}}
    url = f"{closed_url()}/v1/responses"
    with tracely.fixtures(bundle) as rep:
        plain = httpx.post(url, json={"model": MODEL, "input": "Hello"}).json()
        body = {"model": MODEL, "input": "Hi", "stream": True}
        with httpx.stream("POST", url, json=body) as response:
            events = sse_events(list(response.iter_lines()))
    assert plain == live.model_dump(mode="json", exclude_unset=True)
    assert "".join(d["delta"] for n, d in events if n == "response.output_text.delta") == (
        "Streamed by hand"
    )
    assert events[-1][0] == "response.completed"
    assert events[-1][1]["response"]["usage"]["output_tokens"] == 3
    assert len(rep.served) == 2 and not rep.errors


def test_fetching_a_stored_response_is_not_a_model_call() -> None:
    from tracely_sdk.providers.http import answers

    assert answers("POST", "https://api.openai.com/v1/responses")
    assert not answers("GET", "https://api.openai.com/v1/responses/resp_1")
    assert not answers("POST", "https://api.openai.com/v1/responses/resp_1/cancel")


# --------------------------------------------------------------------------- embeddings


def test_an_embeddings_call_is_an_embeddings_span_and_is_served_to_the_client(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> Any:
        body = {"model": EMBEDDER, "input": ["hello world", "Paris"]}
        with httpx2.Client() as client:
            return client.post(f"{base}/v1/embeddings", json=body).json()

    live, bundle = record(capture, scenario)
    assert len(live["data"]) == 2
    (entry,) = bundle["llm"][EMBEDDER]
    assert entry["provider"] == "httpx2.Client.send"
    assert entry["output"]["body"] == live
    assert entry["usage"] == [3, 0]
    (span,) = llm_spans(capture)
    assert span.name == f"embeddings {EMBEDDER}"
    assert span.attributes["gen_ai.operation.name"] == "embeddings"
    assert span.attributes["gen_ai.provider.name"] == "openai"
    assert span.attributes["gen_ai.response.model"] == EMBEDDER
    assert span.attributes["gen_ai.usage.input_tokens"] == 3
    assert "gen_ai.response.finish_reasons" not in span.attributes

    replayed, rep = replay(bundle, scenario)
    assert replayed == live and rep.served == [f"llm:{EMBEDDER}"] and rep.clean
    (_, served) = llm_spans(capture)
    assert served.name == f"embeddings {EMBEDDER}"
    assert served.attributes["tracely.replay.served"] is True


def test_embeddings_by_litellm_and_the_openai_sdk_replay_without_the_server(
    capture: Any, instrumented: None
) -> None:
    openai_sdk = __import__("openai")

    def scenario(base: str) -> list[list[float]]:
        reply = litellm.embedding(
            model=f"openai/{EMBEDDER}", input=["hello world"], api_base=f"{base}/v1", api_key="k"
        )
        client = openai_sdk.OpenAI(api_key="k", base_url=f"{base}/v1", max_retries=0)
        vectors = client.embeddings.create(model=EMBEDDER, input="Paris")  # as base64
        return [reply.data[0]["embedding"], vectors.data[0].embedding]

    live, bundle = record(capture, scenario)
    assert all(len(vector) == 4 for vector in live)
    litellm_entry, sdk_entry = bundle["llm"][EMBEDDER]
    assert litellm_entry["provider"] == "httpx.Client.send"
    assert sdk_entry["provider"] == "httpx2.Client.send"  # no SDK method of embeddings is patched
    assert sdk_entry["input"]["body"]["encoding_format"] == "base64"
    assert isinstance(sdk_entry["output"]["body"]["data"][0]["embedding"], str)
    replayed, rep = replay(bundle, scenario)  # the block patches the OpenAI SDK too
    assert replayed == live
    assert len(rep.served) == 2 and rep.clean, (rep.errors, rep.divergences)


def test_a_changed_text_to_embed_is_served_and_reported(capture: Any, instrumented: None) -> None:
    def ask(text: str) -> Callable[[str], Any]:
        def scenario(base: str) -> Any:
            return httpx.post(f"{base}/v1/embeddings", json={"model": EMBEDDER, "input": text})

        return scenario

    live, bundle = record(capture, ask("hello"))
    replayed, rep = replay(bundle, ask("hello, changed"))
    assert replayed.json() == live.json()
    assert rep.diverged == [f"llm:{EMBEDDER}"]


def test_an_embedding_written_by_hand_as_text_names_why_it_cannot_be_served(
    instrumented: None,
) -> None:
    bundle = {"llm": {EMBEDDER: [{"output": "hello"}]}}
    url = f"{closed_url()}/v1/embeddings"
    with (
        tracely.fixtures(bundle),
        pytest.raises(tracely.ReplayError, match="cannot serve as a plain") as raised,
    ):
        httpx.post(url, json={"model": EMBEDDER, "input": "hello"})
    assert "openai_embeddings" in str(raised.value) and "re-record" in str(raised.value)
