"""Model calls sent through aiohttp's ``ClientSession``: recorded as the wire carried them, and
served on replay as a genuine ``ClientResponse`` read the same ways (``tracely_sdk.providers.http``)."""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.parse
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from botocore.eventstream import EventStreamBuffer

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.providers._helpers import closed_url, llm_spans, replays_the_story
from tracely_sdk import providers
from tracely_sdk.errors import MissingDependency

MODEL = "gpt-4o"
CLAUDE = "claude-3-5-haiku"
PROVIDER = "aiohttp.ClientSession._request"


@pytest.fixture
def instrumented() -> Iterator[None]:
    names = providers.instrument("aiohttp")
    assert PROVIDER in names
    yield
    providers.uninstrument("aiohttp")


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], **extra}


def sse_data(lines: list[bytes]) -> list[Any]:
    out: list[Any] = []
    for raw in lines:
        line = raw.decode().strip()
        if line.startswith("data: "):
            data = line[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


Scenario = Callable[[str], Coroutine[Any, Any, Any]]


class Live:
    def __init__(self, value: Any, bundle: dict[str, Any], requests: int) -> None:
        self.value = value
        self.bundle = json.loads(json.dumps(bundle))
        self.requests = requests


def record(capture: Any, scenario: Scenario) -> Live:
    """``scenario(base_url)`` run live against the stand-in, inside an agent run."""
    with serve() as (server, _):
        with tracely.agent("agent", input="q"):
            value = asyncio.run(scenario(server.base_url))
        requests = len(server.requests)
    return Live(value, capture.last_bundle, requests)


def replay(bundle: Any, scenario: Scenario) -> tuple[Any, tracely.ReplayReport]:
    """``scenario`` run under the recording, against a port where nothing listens."""
    with tracely.fixtures(bundle) as rep, tracely.agent("agent", input="q"):
        value = asyncio.run(scenario(closed_url()))
    return value, rep


# --------------------------------------------------------------------------- plain calls


def test_a_chat_completion_is_recorded_as_the_wire_carried_it_and_served_as_a_client_response(
    capture: Any, instrumented: None
) -> None:
    async def scenario(base: str) -> dict[str, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{base}/v1/chat/completions", json=chat("Hello there")) as response,
        ):
            return {
                "type": type(response),
                "status": response.status,
                "ok": response.ok,
                "request-id": response.headers["x-request-id"],
                "json": await response.json(),
                "read": await response.read(),
                "text": await response.text(),
                "closed": response.closed,  # its whole body is in: released, as live
                "reason": response.reason,
            }

    live = record(capture, scenario)
    assert live.requests == 1
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["provider"] == PROVIDER
    assert entry["output_type"] == "http.response"
    assert entry["input"] == {
        "method": "POST",
        "path": "/v1/chat/completions",
        "body": chat("Hello there"),
    }
    assert entry["output"]["status"] == 200
    assert entry["output"]["body"] == live.value["json"]
    assert entry["output"]["headers"]["x-request-id"] == live.value["request-id"]
    assert entry["usage"] == [2, 4]
    (span,) = llm_spans(capture)
    assert span.name == f"chat {MODEL}"
    assert span.attributes["gen_ai.provider.name"] == "openai"
    assert span.attributes["server.address"] == "127.0.0.1"
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)

    replayed, rep = replay(live.bundle, scenario)
    assert replayed["type"] is aiohttp.ClientResponse
    # The body is the recorded JSON written compactly: the same data, not the same spacing.
    as_data = {
        **replayed,
        "read": json.loads(replayed["read"]),
        "text": json.loads(replayed["text"]),
    }
    assert as_data == {
        **live.value,
        "read": json.loads(live.value["read"]),
        "text": json.loads(live.value["text"]),
    }
    assert rep.served == [f"llm:{MODEL}"] and rep.clean
    assert PROVIDER in rep.providers


def test_a_served_body_has_the_length_of_its_own_bytes_and_no_recorded_encoding(
    capture: Any, instrumented: None
) -> None:
    async def scenario(base: str) -> tuple[Any, bytes]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{base}/v1/chat/completions", json=chat("Hello there")) as response,
        ):
            return response.headers, await response.read()

    live = record(capture, scenario)
    del live.bundle["checksum"]  # edited by hand
    (entry,) = live.bundle["llm"][MODEL]
    # A recording that kept the framing of the wire it came from (a server that indented its
    # JSON and compressed it): the body is served compact and uncompressed.
    entry["output"]["headers"].update(
        {
            "content-length": str(len(json.dumps(entry["output"]["body"], indent=2))),
            "content-encoding": "gzip",
        }
    )
    (headers, data), rep = replay(live.bundle, scenario)
    assert json.loads(data) == json.loads(live.value[1]) and rep.clean
    assert headers["content-length"] == str(len(data))
    assert "content-encoding" not in headers


def test_a_stream_is_recorded_as_it_arrives_and_served_to_every_way_of_reading_content(
    capture: Any, instrumented: None
) -> None:
    body = chat("one two three", stream=True, stream_options={"include_usage": True})

    async def scenario(base: str) -> tuple[list[bytes], list[bytes], str]:
        url = f"{base}/v1/chat/completions"
        async with aiohttp.ClientSession() as session:
            async with session.post(url, json=body) as response:
                content_type = response.headers["content-type"]
                lines = [line async for line in response.content]
            async with session.post(url, json=body) as response:
                chunks = [chunk async for chunk in response.content.iter_chunked(7)]
        return lines, chunks, content_type

    live = record(capture, scenario)
    first, second = live.bundle["llm"][MODEL]
    assert first["output"]["events"][-1] == {"text": "[DONE]"}
    assert first["output"]["headers"]["content-type"].startswith("text/event-stream")
    assert first["usage"] == second["usage"] == [3, 5]
    spans = llm_spans(capture)
    assert len(spans) == 2
    assert spans[0].attributes["gen_ai.request.stream"] is True
    assert "gen_ai.response.time_to_first_chunk" in spans[0].attributes

    replayed, rep = replay(live.bundle, scenario)
    lines, chunks, content_type = replayed
    assert sse_data(lines) == sse_data(live.value[0])
    assert all(len(chunk) <= 7 for chunk in chunks)
    assert sse_data(b"".join(chunks).split(b"\n")) == sse_data(b"".join(live.value[1]).split(b"\n"))
    assert content_type == live.value[2]
    assert rep.served == [f"llm:{MODEL}"] * 2 and rep.clean


def test_a_stream_closed_early_records_what_arrived_and_replays_alike(
    capture: Any, instrumented: None
) -> None:
    async def scenario(base: str) -> bytes:
        body = chat("one two three four five six", stream=True)
        async with aiohttp.ClientSession() as session:
            response = await session.post(f"{base}/v1/chat/completions", json=body)
            first = await response.content.readline()
            response.close()
        return first

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][MODEL]
    assert sse_data([live.value]) == [entry["output"]["events"][0]["data"]]
    replayed, rep = replay(live.bundle, scenario)
    assert sse_data([replayed]) == sse_data([live.value]) and rep.clean


def test_an_anthropic_message_sent_as_bytes_is_a_model_call_too(
    capture: Any, instrumented: None
) -> None:
    message = {
        "model": CLAUDE,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Hi"}],
    }

    async def scenario(base: str) -> Any:
        async with aiohttp.ClientSession(base_url=base) as session:
            response = await session.request(
                "post", "/v1/messages", data=json.dumps(message).encode()
            )
            return await response.json()

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][CLAUDE]
    assert entry["input"]["body"] == message
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.provider.name"] == "anthropic"
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.clean


# --------------------------------------------------------------------------- failures


def test_an_error_status_is_served_as_recorded_and_raise_for_status_raises_alike(
    capture: Any, instrumented: None
) -> None:
    async def scenario(base: str) -> tuple[int, Any, Any]:
        headers = {"x-test-fault": "429"}
        async with aiohttp.ClientSession() as session:
            response = await session.post(
                f"{base}/v1/chat/completions", json=chat("hi"), headers=headers
            )
            answered = (response.status, await response.json())
        async with aiohttp.ClientSession(raise_for_status=True) as session:
            try:
                await session.post(f"{base}/v1/chat/completions", json=chat("hi"), headers=headers)
            except aiohttp.ClientResponseError as exc:
                return (*answered, (type(exc).__name__, exc.status))
        return (*answered, None)

    live = record(capture, scenario)
    assert live.value[0] == 429 and live.value[2] == ("ClientResponseError", 429)
    recorded = live.bundle["llm"][MODEL]
    assert [e["output"]["status"] for e in recorded] == [429, 429]
    assert recorded[1]["output"]["body"] == live.value[1]  # read before it was raised
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.served == [f"llm:{MODEL}"] * 2


def test_a_connection_failure_is_recorded_and_raised_as_aiohttps_error(
    capture: Any, instrumented: None
) -> None:
    async def scenario(base: str) -> str:
        async with aiohttp.ClientSession() as session:
            try:
                await session.post(f"{closed_url()}/v1/chat/completions", json=chat("hi"))
            except aiohttp.ClientConnectorError as exc:
                return type(exc).__name__
        return "answered"

    live = record(capture, scenario)
    assert live.value == "ClientConnectorError"
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["error"]["type"] == "ClientConnectorError"
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == "ClientConnectorError" and rep.served == [f"llm:{MODEL}"]


def test_a_call_the_recording_lacks_is_refused_and_never_reaches_the_server(
    capture: Any, instrumented: None
) -> None:
    async def ask(base: str) -> None:
        async with aiohttp.ClientSession() as session:
            await session.post(f"{base}/v1/chat/completions", json=chat("not recorded"))

    with serve() as (server, _):
        with tracely.fixtures({}) as rep, pytest.raises(tracely.ReplayError, match=f"llm:{MODEL}"):
            asyncio.run(ask(server.base_url))
        assert server.requests == []
    assert len(rep.errors) == 1


def test_a_request_that_is_no_model_call_goes_on_and_strict_replay_refuses_its_connection(
    capture: Any, instrumented: None
) -> None:
    async def ask(base: str) -> list[int]:
        async with aiohttp.ClientSession() as session:
            first = await session.post(
                f"{base}/v1/moderations", json={"model": MODEL, "input": "x"}
            )
            second = await session.get(f"{base}/v1/chat/completions")
            return [first.status, second.status]

    with serve() as (server, _):
        with tracely.agent("agent", input="q"):
            assert asyncio.run(ask(server.base_url)) == [404, 404]
        assert len(server.requests) == 2
        assert llm_spans(capture) == []
        with tracely.fixtures({}) as rep, pytest.raises(tracely.ReplayError):
            asyncio.run(ask(server.base_url))
        assert len(server.requests) == 2
    (refusal,) = rep.refused
    assert refusal["event"] == "socket.connect" and refusal["port"] == server.port
    assert "aiohttp" in refusal["library"]


def test_a_changed_prompt_is_served_and_reported(capture: Any, instrumented: None) -> None:
    def asking(text: str) -> Scenario:
        async def scenario(base: str) -> Any:
            async with aiohttp.ClientSession() as session:
                response = await session.post(f"{base}/v1/chat/completions", json=chat(text))
                return await response.json()

        return scenario

    live = record(capture, asking("Hello"))
    replayed, rep = replay(live.bundle, asking("Hello, changed"))
    assert replayed == live.value
    assert rep.diverged == [f"llm:{MODEL}"] and not rep.clean


def test_a_client_call_inside_call_llm_is_recorded_once_by_call_llm(
    capture: Any, instrumented: None
) -> None:
    async def scenario(base: str) -> Any:
        async def send() -> Any:
            async with aiohttp.ClientSession() as session:
                response = await session.post(f"{base}/v1/chat/completions", json=chat("Hello"))
                return await response.json()

        return await tracely.acall_llm(MODEL, send, input=chat("Hello")["messages"])

    live = record(capture, scenario)
    (_span,) = llm_spans(capture)
    (entry,) = live.bundle["llm"][MODEL]
    assert "provider" not in entry and entry["output"] == live.value


# --------------------------------------------------------------------------- formats that name the model in the path

BEDROCK = "anthropic.claude-3-haiku-20240307-v1:0"


def test_a_bedrock_converse_stream_names_its_model_in_the_path_and_is_served_as_an_event_stream(
    capture: Any, instrumented: None
) -> None:
    """aiobotocore's way: the model id URL-encoded in the path, answered by an AWS event stream,
    recorded message by message and written back as messages botocore reads."""
    path = f"/model/{urllib.parse.quote(BEDROCK, safe='')}/converse-stream"
    body = {"messages": [{"role": "user", "content": [{"text": "Hello there"}]}]}

    async def scenario(base: str) -> dict[str, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{base}{path}", json=body) as response,
        ):
            stream = EventStreamBuffer()  # botocore's own reader, as aiobotocore's
            stream.add_data(await response.read())
            return {
                "type": response.headers["content-type"],
                "messages": [(m.headers[":event-type"], json.loads(m.payload)) for m in stream],
            }

    live = record(capture, scenario)
    assert live.requests == 1
    assert live.value["type"] == "application/vnd.amazon.eventstream"
    (entry,) = live.bundle["llm"][BEDROCK]
    assert entry["provider"] == PROVIDER
    assert entry["input"]["path"] == f"/model/{BEDROCK}/converse-stream"
    events = entry["output"]["events"]
    assert [(e["headers"][":event-type"], e["data"]) for e in events] == live.value["messages"]
    assert live.value["messages"][0][0] == "messageStart"
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.provider.name"] == "aws.bedrock"
    assert span.attributes["gen_ai.request.model"] == BEDROCK

    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value
    assert rep.served == [f"llm:{BEDROCK}"] and not rep.errors


# --------------------------------------------------------------------------- the story


def _ask(base_url: str, question: str, *, twice: bool = False) -> str:
    async def run() -> str:
        async with aiohttp.ClientSession() as session:
            body = chat(question, stream=True)
            async with session.post(f"{base_url}/v1/chat/completions", json=body) as response:
                answer = "".join(
                    chunk["choices"][0]["delta"].get("content") or ""
                    for chunk in sse_data([line async for line in response.content])
                    if chunk != "[DONE]" and chunk["choices"]
                )
            if twice:
                again = await session.post(
                    f"{base_url}/v1/chat/completions", json=chat(question + " again")
                )
                answer = (await again.json())["choices"][0]["message"]["content"]
        return answer

    with tracely.agent("aiohttp-agent", input=question) as agent_run:
        agent_run.output = asyncio.run(run())
    return str(agent_run.output)


def test_a_recorded_case_passes_fails_on_a_changed_prompt_and_is_incomplete_on_an_extra_call(
    capture: Any, instrumented: None, tmp_path: Path
) -> None:
    with serve() as (server, _):
        live = _ask(server.base_url, "Paris weather?")
    assert live == "You said: Paris weather?"
    replays_the_story(capture.last_bundle, tmp_path, _ask, f"llm:{MODEL}")


# --------------------------------------------------------------------------- google-genai's async client


def _gemini_client(base: str) -> Any:
    from google import genai
    from google.genai import types

    options = types.HttpOptions(base_url=base, api_version="v1beta")
    return genai.Client(api_key="test-key", http_options=options)


async def _ask_gemini(base: str) -> list[Any]:
    client = _gemini_client(base)
    reply = await client.aio.models.generate_content(model="gemini-2.0-flash", contents="Hello")
    stream = await client.aio.models.generate_content_stream(
        model="gemini-2.0-flash", contents="Hello streamed"
    )
    chunks = [chunk async for chunk in stream]
    # The response headers a recording keeps are a few (content-type): the rest is compared.
    unkept = {"sdk_http_response"}
    return [
        reply.model_dump(mode="json", exclude=unkept),
        [c.model_dump(mode="json", exclude=unkept) for c in chunks],
    ]


def test_google_genais_async_client_sends_through_aiohttp_and_is_served_a_client_response(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, _ask_gemini)
    assert live.requests == 2
    entries = live.bundle["llm"]["gemini-2.0-flash"]
    assert [e["provider"] for e in entries] == [PROVIDER, PROVIDER]
    assert entries[0]["input"]["path"] == "/v1beta/models/gemini-2.0-flash:generateContent"
    assert len(entries[1]["output"]["events"]) == len(live.value[1]) > 1
    replayed, rep = replay(live.bundle, _ask_gemini)
    assert PROVIDER in rep.providers
    assert replayed == live.value
    assert rep.served == ["llm:gemini-2.0-flash"] * 2 and rep.clean


def test_google_genais_async_call_is_recorded_once_at_aiohttp_with_the_sdk_instrumented_too(
    capture: Any, instrumented: None
) -> None:
    providers.instrument("google")  # switches on the same client hook: still one entry a call
    try:
        live = record(capture, _ask_gemini)
    finally:
        providers.uninstrument("google")
    entries = live.bundle["llm"]["gemini-2.0-flash"]
    assert [e["provider"] for e in entries] == [PROVIDER, PROVIDER]
    assert len(llm_spans(capture)) == 2


def test_a_stream_the_server_cuts_is_recorded_as_the_failure_and_raised_at_the_call_on_replay(
    capture: Any, instrumented: None
) -> None:
    async def scenario(base: str) -> str:
        body = chat("one two three four five six", stream=True)
        async with aiohttp.ClientSession() as session:
            try:
                response = await session.post(
                    f"{base}/v1/chat/completions", json=body, headers={"x-test-fault": "cut"}
                )
                await response.read()
            except aiohttp.ClientPayloadError as exc:
                return type(exc).__name__
        return "read whole"

    live = record(capture, scenario)
    assert live.value == "ClientPayloadError"
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["error"]["type"] == "ClientPayloadError"
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == "ClientPayloadError" and rep.served == [f"llm:{MODEL}"]


def test_aiohttp_not_installed_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # as if it were not installed
    with pytest.raises(MissingDependency, match=r"tracely-replay\[aiohttp\]"):
        providers.instrument("aiohttp")
