"""The ollama Python client's native API (``/api/chat``, ``/api/generate``), recorded and
served at the httpx client beneath it (``providers.http._ollama_chat``, ``_ollama_generate``):
plain with ``stream=False``, else as newline-delimited JSON, one object per line."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import ollama
import pytest

import tracely_sdk as tracely
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

MODEL = "llama3.2"


instrumented = instrumented_fixture("httpx")


def test_a_chat_streamed_as_ndjson_is_recorded_line_by_line_and_served_as_the_same_bytes(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> list[Any]:
        return list(ollama.Client(host=base).chat(MODEL, messages=user("one two"), stream=True))

    live, bundle = record(capture, scenario)
    assert "".join(part.message.content for part in live) == "You said: one two"
    (entry,) = bundle["llm"][MODEL]
    assert entry["provider"] == "httpx.Client.send"
    output = entry["output"]
    assert output["headers"]["content-type"] == "application/x-ndjson"
    assert "events" not in output and "body" not in output
    lines = output["lines"]
    assert [line["data"] for line in lines] == [part.model_dump(exclude_none=True) for part in live]
    assert lines[-1]["data"]["done"] is True and lines[-1]["data"]["done_reason"] == "stop"
    assert entry["usage"] == [2, 4]
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.provider.name"] == "ollama"
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.response.model"] == MODEL
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert span.attributes["gen_ai.usage.output_tokens"] == 4

    replayed, rep = replay(bundle, scenario)
    assert replayed == live
    assert rep.served == [f"llm:{MODEL}"] and rep.clean


def test_the_served_stream_is_the_bytes_the_server_sent(capture: Any, instrumented: None) -> None:
    def scenario(base: str) -> bytes:
        body = {"model": MODEL, "messages": user("Hello there")}  # streamed: Ollama's default
        with httpx.stream("POST", f"{base}/api/chat", json=body) as response:
            return response.read()

    live, bundle = record(capture, scenario)
    assert live.count(b"\n") == len(bundle["llm"][MODEL][0]["output"]["lines"])
    replayed, rep = replay(bundle, scenario)
    assert replayed == live and rep.clean


def test_a_plain_chat_and_options_are_recorded_with_their_request_attributes(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> Any:
        return ollama.Client(host=base).chat(
            MODEL, messages=user("Hello"), stream=False, options={"temperature": 0.1, "top_p": 0.9}
        )

    live, bundle = record(capture, scenario)
    (entry,) = bundle["llm"][MODEL]
    assert entry["input"]["body"]["stream"] is False
    assert entry["output"]["body"]["message"]["content"] == "You said: Hello"
    (span,) = llm_spans(capture)
    assert "gen_ai.request.stream" not in span.attributes
    assert span.attributes["gen_ai.request.temperature"] == 0.1
    assert span.attributes["gen_ai.request.top_p"] == 0.9
    replayed, rep = replay(bundle, scenario)
    assert replayed == live and rep.clean


def test_generate_streamed_and_plain_by_the_async_client(capture: Any, instrumented: None) -> None:
    async def ask(base: str) -> list[str | None]:
        client = ollama.AsyncClient(host=base)
        plain = await client.generate(MODEL, prompt="Hello", system="Be brief.", stream=False)
        stream = await client.generate(MODEL, prompt="streamed words", stream=True)
        return [plain.response, "".join([part.response async for part in stream])]

    def scenario(base: str) -> list[str | None]:
        return asyncio.run(ask(base))

    live, bundle = record(capture, scenario)
    assert live == ["You said: Hello", "You said: streamed words"]
    plain, streamed = bundle["llm"][MODEL]
    assert plain["input"]["path"] == streamed["input"]["path"] == "/api/generate"
    assert plain["provider"] == "httpx.AsyncClient.send"
    assert plain["usage"] == [3, 3]
    assert streamed["output"]["lines"][-1]["data"]["done"] is True
    replayed, rep = replay(bundle, scenario)
    assert replayed == live
    assert len(rep.served) == 2 and rep.clean


def test_a_tool_call_is_expected_and_on_the_span_when_content_is_captured(
    capture: Any, instrumented: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def scenario(base: str) -> Any:
        stream = ollama.Client(host=base).chat(
            MODEL, messages=user("Weather in Paris?"), tools=[WEATHER], stream=True
        )
        return [part.message.tool_calls for part in stream if part.message.tool_calls]

    with capturing_content(monkeypatch, "httpx"):
        live, bundle = record(capture, scenario)
    ((call,),) = live
    assert call.function.name == "get_weather"
    (span,) = llm_spans(capture)
    assert json.loads(span.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}
    ]
    (output,) = json.loads(span.attributes["gen_ai.output.messages"])
    (part,) = output["parts"]
    assert part["type"] == "tool_call" and part["name"] == "get_weather"
    assert part["arguments"] == {"city": "Paris"}
    assert output["finish_reason"] == "tool_call"
    replayed, rep = replay(bundle, scenario)
    assert replayed == live and rep.clean


def test_answers_written_by_hand_are_served_as_lines_or_as_one_body(instrumented: None) -> None:
    bundle = {
        "llm": {
            MODEL: [
                {"output": "Streamed by hand", "usage": [2, 3]},
                {"output": "Plain by hand"},
                {"output": "Generated by hand"},
            ]
        }
    }
    client = ollama.Client(host=closed_url())
    with tracely.fixtures(bundle) as rep:
        streamed = list(client.chat(MODEL, messages=user("Hi"), stream=True))
        plain = client.chat(MODEL, messages=user("Hi"), stream=False)
        generated = list(client.generate(MODEL, prompt="Hi", stream=True))
    assert "".join(part.message.content for part in streamed) == "Streamed by hand"
    assert streamed[-1].done and streamed[-1].eval_count == 3
    assert plain.message.content == "Plain by hand" and plain.done
    assert "".join(part.response for part in generated) == "Generated by hand"
    assert len(rep.served) == 3 and not rep.errors


def test_a_stream_cut_short_is_served_as_the_same_failure(capture: Any, instrumented: None) -> None:
    def scenario(base: str) -> tuple[list[str], str]:
        body = {"model": MODEL, "messages": user("one two three four five six seven eight")}
        lines: list[str] = []
        try:
            with httpx.stream(
                "POST", f"{base}/api/chat", json=body, headers={"x-test-fault": "cut"}
            ) as response:
                lines.extend(response.iter_lines())
        except httpx.HTTPError as exc:
            return lines, type(exc).__name__
        return lines, "whole"

    live, bundle = record(capture, scenario)
    lines, ending = live
    assert ending == "RemoteProtocolError" and 1 <= len(lines) < 10
    replayed, rep = replay(bundle, scenario)
    assert replayed[1] == "RemoteProtocolError"
    assert rep.served == [f"llm:{MODEL}"]


def test_ndjson_lines_are_kept_in_order_and_a_line_cut_short_as_its_text() -> None:
    from tracely_sdk.providers.http._exchange import ndjson_lines, ndjson_pieces

    wire = b'{"message":{"content":"a"},"done":false}\n\n{"done":true,"eval_count":1}\n'
    lines = ndjson_lines(wire)
    assert lines == [
        {"data": {"message": {"content": "a"}, "done": False}},
        {"data": {"done": True, "eval_count": 1}},
    ]
    assert b"".join(ndjson_pieces(lines)) == wire.replace(b"\n\n", b"\n")
    cut = ndjson_lines(b'{"done":false}\n{"don')
    assert cut == [{"data": {"done": False}}, {"text": '{"don'}]
    assert ndjson_pieces(cut) == [b'{"done":false}\n', b'{"don\n']


def test_a_recording_whose_lines_are_not_lines_is_refused_with_the_reason(
    instrumented: None,
) -> None:
    output = {"status": 200, "headers": {"content-type": "application/x-ndjson"}, "lines": [7]}
    entry = {"provider": "httpx.Client.send", "output_type": "http.response", "output": output}
    with (
        tracely.fixtures({"llm": {MODEL: [entry]}}),
        pytest.raises(tracely.ReplayError, match=f"llm:{MODEL}"),
    ):
        list(ollama.Client(host=closed_url()).chat(MODEL, messages=user("Hi"), stream=True))
