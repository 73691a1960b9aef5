"""The cohere SDK's v2 chat (``ClientV2``, ``AsyncClientV2``), which tracely does not patch:
recorded and served at the httpx client beneath it (``providers.http._cohere_chat``), plain and
as its server-sent-event stream."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import cohere
import httpx
import pytest

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.providers._helpers import (
    WEATHER,
    capturing_content,
    closed_url,
    instrumented_fixture,
    llm_spans,
    record,
    replay,
    user,
)

MODEL = "command-a-03-2025"


instrumented = instrumented_fixture("httpx")


def client(base: str) -> cohere.ClientV2:
    return cohere.ClientV2(api_key="test-key", base_url=base)


def test_a_chat_is_recorded_at_the_client_and_replayed_as_the_sdks_response(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> Any:
        return client(base).chat(model=MODEL, messages=user("Hello there"), temperature=0.2)

    live, bundle = record(capture, scenario)
    assert live.message.content[0].text == "You said: Hello there"
    (entry,) = bundle["llm"][MODEL]
    assert entry["provider"] == "httpx.Client.send"
    assert entry["input"]["path"] == "/v2/chat"
    assert entry["input"]["body"]["messages"] == user("Hello there")
    assert entry["output"]["body"]["finish_reason"] == "COMPLETE"
    assert entry["usage"] == [2, 4]
    (span,) = llm_spans(capture)
    assert span.name == f"chat {MODEL}"
    assert span.attributes["gen_ai.provider.name"] == "cohere"
    assert span.attributes["gen_ai.request.temperature"] == 0.2
    assert span.attributes["gen_ai.response.id"] == live.id
    assert span.attributes["gen_ai.response.finish_reasons"] == ("COMPLETE",)

    replayed, rep = replay(bundle, scenario)
    assert type(replayed) is type(live)
    assert replayed.model_dump() == live.model_dump()
    assert rep.served == [f"llm:{MODEL}"] and rep.clean


def stream_of(base: str, text: str, **extra: Any) -> list[Any]:
    return list(client(base).chat_stream(model=MODEL, messages=user(text), **extra))


def test_a_chat_stream_is_recorded_event_by_event_and_replayed_as_the_sdks_events(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> list[Any]:
        return stream_of(base, "one two three")

    live, bundle = record(capture, scenario)
    text = "".join(e.delta.message.content.text for e in live if e.type == "content-delta")
    assert text == "You said: one two three"
    (entry,) = bundle["llm"][MODEL]
    assert entry["input"]["body"]["stream"] is True
    events = entry["output"]["events"]
    assert [e["event"] for e in events] == [e.type for e in live]
    assert [e["data"]["type"] for e in events][-1] == "message-end"
    assert entry["usage"] == [3, 5]
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.response.finish_reasons"] == ("COMPLETE",)
    assert span.attributes["gen_ai.usage.output_tokens"] == 5

    replayed, rep = replay(bundle, scenario)
    assert [e.model_dump() for e in replayed] == [e.model_dump() for e in live]
    assert rep.clean


def test_a_tool_call_streamed_by_the_async_client_adds_up_to_the_call_it_asks_for(
    capture: Any, instrumented: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def ask(base: str) -> list[Any]:
        async_client = cohere.AsyncClientV2(api_key="test-key", base_url=base)
        stream = async_client.chat_stream(
            model=MODEL, messages=user("Weather in Paris?"), tools=[WEATHER]
        )
        return [event async for event in stream]

    def scenario(base: str) -> list[Any]:
        return asyncio.run(ask(base))

    with capturing_content(monkeypatch, "httpx"):
        live, bundle = record(capture, scenario)
    assert "tool-call-start" in [e.type for e in live]
    (entry,) = bundle["llm"][MODEL]
    assert entry["provider"] == "httpx.AsyncClient.send"
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("TOOL_CALL",)
    (output,) = json.loads(span.attributes["gen_ai.output.messages"])
    reasoning, call = output["parts"]
    assert reasoning == {"type": "reasoning", "content": "I will call get_weather."}
    assert call["type"] == "tool_call" and call["name"] == "get_weather"
    assert call["arguments"] == {"city": "Paris"}
    assert output["finish_reason"] == "tool_call"

    replayed, rep = replay(bundle, scenario)
    assert [e.model_dump() for e in replayed] == [e.model_dump() for e in live]
    assert rep.clean


def test_a_chat_written_by_hand_is_served_plain_and_streamed(instrumented: None) -> None:
    bundle = {
        "llm": {MODEL: [{"output": "Written by hand", "usage": [3, 3]}, {"output": "Streamed too"}]}
    }
    base = closed_url()
    with tracely.fixtures(bundle) as rep:
        plain = client(base).chat(model=MODEL, messages=user("Hi"))
        streamed = stream_of(base, "Hi")
    assert plain.message.content[0].text == "Written by hand"
    assert plain.usage.tokens.output_tokens == 3
    text = "".join(e.delta.message.content.text for e in streamed if e.type == "content-delta")
    assert text == "Streamed too"
    assert streamed[-1].delta.finish_reason == "COMPLETE"
    assert len(rep.served) == 2 and not rep.errors


def test_a_chat_the_recording_lacks_never_reaches_the_server(
    capture: Any, instrumented: None
) -> None:
    with serve() as (server, _):
        with (
            tracely.fixtures({}) as rep,
            pytest.raises(tracely.ReplayError, match=f"no recorded call for llm:{MODEL}"),
        ):
            client(server.base_url).chat(model=MODEL, messages=user("not recorded"))
        assert server.requests == []
    assert len(rep.errors) == 1


def test_a_rate_limited_chat_is_served_as_the_same_error(capture: Any, instrumented: None) -> None:
    def scenario(base: str) -> tuple[int, Any]:
        response = httpx.post(
            f"{base}/v2/chat",
            json={"model": MODEL, "messages": user("hi")},
            headers={"x-test-fault": "429"},
        )
        return response.status_code, response.headers.get("retry-after")

    live, bundle = record(capture, scenario)
    assert live == (429, "1")
    replayed, rep = replay(bundle, scenario)
    assert replayed == live and rep.clean
