"""The Gemini API's wire format at the HTTP client: ``:generateContent`` and
``:streamGenerateContent`` (SSE with ``alt=sse``, one JSON array without), on ``v1`` and
``v1beta``, the model read from the path (``tracely_sdk.providers.http._gemini``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import httpx
import pytest

import tracely_sdk as tracely
from tests.sdk.providers._helpers import (
    capturing_content,
    closed_url,
    instrumented_fixture,
    llm_spans,
    record,
    replay,
)
from tracely_sdk.providers.http import answers

GEMINI = "gemini-2.0-flash"


instrumented = instrumented_fixture(["httpx", "aiohttp"])


def content(text: str, **extra: Any) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}], **extra}


def sse_chunks(text: str) -> list[Any]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("version", ["v1", "v1beta"])
def test_generate_content_is_a_model_call_named_by_its_path(
    capture: Any, instrumented: None, version: str
) -> None:
    def scenario(base: str) -> Any:
        url = f"{base}/{version}/models/{GEMINI}:generateContent"
        body = content("Hello there", generationConfig={"maxOutputTokens": 32, "temperature": 0.5})
        return httpx.post(url, json=body, headers={"x-goog-api-key": "test-key"}).json()

    live, bundle = record(capture, scenario)
    assert live["candidates"][0]["content"]["parts"] == [{"text": "You said: Hello there"}]
    (entry,) = bundle["llm"][GEMINI]
    assert entry["provider"] == "httpx.Client.send"
    assert entry["input"]["path"] == f"/{version}/models/{GEMINI}:generateContent"
    assert entry["output"]["body"] == live
    assert entry["usage"] == [2, 4]
    (span,) = llm_spans(capture)
    assert span.name == f"chat {GEMINI}"
    assert span.attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert span.attributes["gen_ai.request.max_tokens"] == 32
    assert span.attributes["gen_ai.request.temperature"] == 0.5
    assert span.attributes["gen_ai.response.model"] == GEMINI
    assert span.attributes["gen_ai.response.id"] == live["responseId"]
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert span.attributes["gen_ai.usage.input_tokens"] == 2
    assert span.attributes["gen_ai.usage.output_tokens"] == 4

    replayed, rep = replay(bundle, scenario)
    assert replayed == live
    assert rep.served == [f"llm:{GEMINI}"] and rep.clean


def test_an_sse_stream_is_recorded_chunk_by_chunk_and_added_up_on_the_span(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> str:
        url = f"{base}/v1beta/models/{GEMINI}:streamGenerateContent?alt=sse"
        with httpx.stream("POST", url, json=content("one two three")) as response:
            return response.read().decode()

    live, bundle = record(capture, scenario)
    (entry,) = bundle["llm"][GEMINI]
    assert [e["data"] for e in entry["output"]["events"]] == sse_chunks(live)
    assert len(entry["output"]["events"]) == 5
    assert entry["usage"] == [3, 5]
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)

    replayed, rep = replay(bundle, scenario)
    assert sse_chunks(replayed) == sse_chunks(live) and rep.clean


def test_a_json_array_stream_is_recorded_as_the_array_and_served_an_item_at_a_time(
    capture: Any, instrumented: None
) -> None:
    async def read(base: str) -> tuple[list[bytes], str]:
        url = f"{base}/v1/models/{GEMINI}:streamGenerateContent"
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, json=content("one two three")) as response,
        ):
            return [line async for line in response.content], response.headers["content-type"]

    def scenario(base: str) -> tuple[list[bytes], str]:
        return asyncio.run(read(base))

    live, bundle = record(capture, scenario)
    (entry,) = bundle["llm"][GEMINI]
    assert entry["provider"] == "aiohttp.ClientSession._request"
    array = json.loads(b"".join(live[0]))
    assert entry["output"]["body"] == array and len(array) == 5
    assert entry["usage"] == [3, 5]
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)

    (lines, content_type), rep = replay(bundle, scenario)
    assert json.loads(b"".join(lines)) == array
    assert content_type == live[1]
    assert rep.clean


def test_messages_are_read_from_the_apis_camel_case(
    capture: Any, instrumented: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def scenario(base: str) -> Any:
        body = content("Hello there", systemInstruction={"parts": [{"text": "Be brief."}]})
        url = f"{base}/v1beta/models/{GEMINI}:generateContent"
        return httpx.post(url, json=body).json()

    with capturing_content(monkeypatch, "httpx"):
        record(capture, scenario)
    (span,) = llm_spans(capture)
    # The system instruction goes where the GenAI conventions put it, not among the messages.
    assert json.loads(span.attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be brief."}
    ]
    assert json.loads(span.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Hello there"}]},
    ]
    (output,) = json.loads(span.attributes["gen_ai.output.messages"])
    assert output["parts"] == [{"type": "text", "content": "You said: Hello there"}]
    assert output["finish_reason"] == "stop"


def test_a_tool_call_is_expected_from_the_recorded_answer(capture: Any, instrumented: None) -> None:
    tools = [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                }
            ]
        }
    ]

    def scenario(base: str) -> Any:
        body = content("What is the weather in Paris?", tools=tools)
        url = f"{base}/v1beta/models/{GEMINI}:generateContent"
        return httpx.post(url, json=body).json()

    live, bundle = record(capture, scenario)
    (part,) = live["candidates"][0]["content"]["parts"]
    assert part["functionCall"] == {"name": "get_weather", "args": {"city": "Paris"}}
    replayed, rep = replay(bundle, scenario)
    assert replayed == live and rep.clean


def test_entries_written_by_hand_are_served_as_gemini_answers(instrumented: None) -> None:
    bundle = {
        "llm": {GEMINI: [{"output": "Written by hand", "usage": [3, 2]}, {"output": "Streamed"}]}
    }
    base = closed_url()
    with tracely.fixtures(bundle) as rep:
        plain = httpx.post(
            f"{base}/v1beta/models/{GEMINI}:generateContent", json=content("Hi")
        ).json()
        url = f"{base}/v1beta/models/{GEMINI}:streamGenerateContent?alt=sse"
        with httpx.stream("POST", url, json=content("Hi")) as response:
            chunks = sse_chunks(response.read().decode())
    assert plain["candidates"][0]["content"]["parts"] == [{"text": "Written by hand"}]
    assert plain["usageMetadata"]["promptTokenCount"] == 3
    streamed = "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks)
    assert streamed == "Streamed"
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert len(rep.served) == 2 and not rep.errors


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("POST", f"/v1beta/models/{GEMINI}:generateContent", True),
        ("POST", f"/v1/models/{GEMINI}:streamGenerateContent", True),
        ("POST", "/v1/projects/p/locations/us/publishers/google/models/g:generateContent", True),
        ("POST", f"/v1beta/models/{GEMINI}:countTokens", False),
        ("POST", f"/v1beta/models/{GEMINI}:embedContent", False),
        ("GET", f"/v1beta/models/{GEMINI}:generateContent", False),
    ],
)
def test_which_requests_are_gemini_model_calls(method: str, path: str, expected: bool) -> None:
    assert answers(method, path) is expected
