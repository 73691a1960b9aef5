"""The local LLM server, driven by the real OpenAI, Anthropic and google-genai SDKs over real HTTP.

Every client here validates responses strictly (``_strict_response_validation=True``), so a body that did
not match the SDK's own pydantic types would fail the call.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from pydantic import BaseModel

from examples.llm_server import LLMServer, serve, start

ROOT = Path(__file__).resolve().parents[2]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
RESPONSES_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
CLAUDE = "claude-sonnet-4-5"


class Weather(BaseModel):
    city: str
    temperature: int
    sunny: bool


@pytest.fixture(scope="module")
def running() -> Iterator[LLMServer]:
    with serve() as (server, _):
        yield server


@pytest.fixture
def server(running: LLMServer) -> LLMServer:
    running.reset()
    return running


@pytest.fixture
def oai(server: LLMServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        api_key="test-key",
        base_url=server.openai_base_url,
        max_retries=0,
        _strict_response_validation=True,
    ) as client:
        yield client


@pytest.fixture
def claude(server: LLMServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        api_key="test-key",
        base_url=server.anthropic_base_url,
        max_retries=0,
        _strict_response_validation=True,
    ) as client:
        yield client


def async_openai(server: LLMServer, **kwargs: object) -> openai.AsyncOpenAI:
    options: dict[str, object] = {"max_retries": 0, "_strict_response_validation": True, **kwargs}
    return openai.AsyncOpenAI(api_key="test-key", base_url=server.openai_base_url, **options)  # type: ignore[arg-type]


def async_anthropic(server: LLMServer) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="test-key",
        base_url=server.anthropic_base_url,
        max_retries=0,
        _strict_response_validation=True,
    )


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


# --------------------------------------------------------------------------------------------- basics


def test_base_urls_and_start_stop() -> None:
    server, base_url = start()
    try:
        assert (
            base_url
            == server.base_url
            == server.anthropic_base_url
            == f"http://127.0.0.1:{server.port}"
        )
        assert server.openai_base_url == f"{base_url}/v1"
        assert httpx2.get(f"{base_url}/v1/models").status_code == 404
        assert server.paths() == ["/v1/models"]
    finally:
        server.stop()
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(f"{base_url}/v1/models")


def test_requests_are_recorded_with_path_headers_and_parsed_body(
    server: LLMServer, oai: openai.OpenAI
) -> None:
    oai.chat.completions.create(model="gpt-4o", messages=user("one"))
    oai.chat.completions.create(model="gpt-4o-mini", messages=user("two"), temperature=0)
    assert len(server.requests) == 2
    first, second = server.requests
    assert first.path == first["path"] == "/v1/chat/completions"
    assert first.method == "POST"
    assert first.body["messages"] == user("one")
    assert second.body == {"model": "gpt-4o-mini", "messages": user("two"), "temperature": 0}
    assert first.headers["authorization"] == "Bearer test-key"


def test_keep_alive_calls_are_fast(oai: openai.OpenAI) -> None:
    oai.chat.completions.create(model="gpt-4o", messages=user("warm up"))
    durations = []
    for _ in range(10):
        started = time.perf_counter()
        oai.chat.completions.create(model="gpt-4o", messages=user("again"))
        durations.append(time.perf_counter() - started)
    # Without TCP_NODELAY every call on a kept-alive connection waits for a delayed ACK (~40 ms).
    assert statistics.median(durations) < 0.035


def test_standalone_module_prints_base_url() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "examples.llm_server", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        client = openai.OpenAI(api_key="test-key", base_url=f"{base_url}/v1", max_retries=0)
        completion = client.chat.completions.create(model="gpt-4o", messages=user("standalone"))
        assert completion.choices[0].message.content == "You said: standalone"
        client.close()
    finally:
        process.terminate()
        process.wait(timeout=10)


# --------------------------------------------------------------------------------------------- chat completions


def test_chat_plain(server: LLMServer, oai: openai.OpenAI) -> None:
    completion = oai.chat.completions.create(model="gpt-4o", messages=user("Hello there, model"))
    assert type(completion) is openai.types.chat.ChatCompletion
    assert completion.model == "gpt-4o"
    assert completion.choices[0].message.content == "You said: Hello there, model"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (3, 5)
    assert completion.usage.total_tokens == 8
    assert completion._request_id == "req_000001"
    # Deterministic: the same request gets the same answer.
    again = oai.chat.completions.create(model="gpt-4o", messages=user("Hello there, model"))
    assert again.choices == completion.choices


def test_chat_stream_sync_with_usage_chunk(oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model="gpt-4o",
        messages=user("stream these words"),
        stream=True,
        stream_options={"include_usage": True},
    )
    assert isinstance(stream, openai.Stream)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: stream these words"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
    assert all(c.usage is None for c in chunks[:-1])


def test_chat_stream_without_include_usage_has_no_usage(oai: openai.OpenAI) -> None:
    chunks = list(oai.chat.completions.create(model="gpt-4o", messages=user("a b"), stream=True))
    assert all(c.usage is None and c.choices for c in chunks)


def test_chat_stream_async(server: LLMServer) -> None:
    async def run() -> str:
        async with async_openai(server) as client:
            stream = await client.chat.completions.create(
                model="gpt-4o", messages=user("async words"), stream=True
            )
            assert isinstance(stream, openai.AsyncStream)
            return "".join([c.choices[0].delta.content or "" async for c in stream])

    assert asyncio.run(run()) == "You said: async words"


def test_chat_tool_call_then_tool_result(server: LLMServer, oai: openai.OpenAI) -> None:
    messages: list[dict[str, object]] = [
        {"role": "user", "content": "What is the weather in Paris?"}
    ]
    first = oai.chat.completions.create(model="gpt-4o", messages=messages, tools=[WEATHER_TOOL])  # type: ignore[arg-type]
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls or []
    assert call.type == "function"
    assert call.function.name == "get_weather"
    assert isinstance(call.function.arguments, str)
    assert json.loads(call.function.arguments) == {"city": "Paris"}

    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21C"})
    second = oai.chat.completions.create(model="gpt-4o", messages=messages, tools=[WEATHER_TOOL])  # type: ignore[arg-type]
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "According to get_weather: sunny, 21C"
    assert len(server.requests) == 2


def test_chat_streamed_tool_call(oai: openai.OpenAI) -> None:
    with oai.chat.completions.stream(
        model="gpt-4o",
        messages=user("Weather in Lisbon please"),
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    ) as stream:
        final = stream.get_final_completion()
    [call] = final.choices[0].message.tool_calls or []
    assert json.loads(call.function.arguments) == {"city": "Lisbon"}
    assert final.choices[0].finish_reason == "tool_calls"


def test_chat_parse_with_pydantic_response_format(server: LLMServer, oai: openai.OpenAI) -> None:
    completion = oai.chat.completions.parse(
        model="gpt-4o", messages=user("Weather report for Oslo"), response_format=Weather
    )
    parsed = completion.choices[0].message.parsed
    assert parsed == Weather(city="Oslo", temperature=4, sunny=True)
    sent = server.requests[0].body["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Weather"


def test_chat_stream_helper_parses(oai: openai.OpenAI) -> None:
    with oai.chat.completions.stream(
        model="gpt-4o", messages=user("Weather report for Oslo"), response_format=Weather
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_completion()
    assert "content.delta" in events and "content.done" in events
    assert final.choices[0].message.parsed == Weather(city="Oslo", temperature=4, sunny=True)


# --------------------------------------------------------------------------------------------- responses


def test_responses_plain(oai: openai.OpenAI) -> None:
    response = oai.responses.create(model="gpt-4o", input="Hello responses")
    assert type(response) is openai.types.responses.Response
    assert response.output_text == "You said: Hello responses"
    assert response.status == "completed"
    assert response.usage is not None and response.usage.output_tokens == 4


def test_responses_stream_sync_has_typed_events(oai: openai.OpenAI) -> None:
    events = list(oai.responses.create(model="gpt-4o", input="Stream responses", stream=True))
    types = [e.type for e in events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert types[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "You said: Stream responses"
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == deltas


def test_responses_stream_helper_sync_and_async(server: LLMServer, oai: openai.OpenAI) -> None:
    with oai.responses.stream(
        model="gpt-4o", input="Weather report for Oslo", text_format=Weather
    ) as stream:
        final = stream.get_final_response()
    assert final.output_parsed == Weather(city="Oslo", temperature=4, sunny=True)

    async def run() -> str:
        async with (
            async_openai(server) as client,
            client.responses.stream(model="gpt-4o", input="async responses") as s,
        ):
            return (await s.get_final_response()).output_text

    assert asyncio.run(run()) == "You said: async responses"


def test_responses_tool_call_then_result(oai: openai.OpenAI) -> None:
    first = oai.responses.create(
        model="gpt-4o", input="What is the weather in Rome?", tools=[RESPONSES_TOOL]
    )  # type: ignore[list-item]
    [call] = first.output
    assert call.type == "function_call"
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Rome"}
    second = oai.responses.create(
        model="gpt-4o",
        input=[
            {"role": "user", "content": "What is the weather in Rome?"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "rainy, 12C"},
        ],
        tools=[RESPONSES_TOOL],  # type: ignore[list-item]
    )
    assert second.output_text == "According to get_weather: rainy, 12C"


def test_responses_parse(oai: openai.OpenAI) -> None:
    parsed = oai.responses.parse(
        model="gpt-4o", input="Weather report for Oslo", text_format=Weather
    )
    assert parsed.output_parsed == Weather(city="Oslo", temperature=4, sunny=True)


# --------------------------------------------------------------------------------------------- anthropic


def test_anthropic_plain(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(model=CLAUDE, max_tokens=64, messages=user("Hi Claude"))
    assert type(message) is anthropic.types.Message
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "You said: Hi Claude"  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (2, 4)
    assert message._request_id == "req_000001"


def test_anthropic_wire_events_are_named(server: LLMServer) -> None:
    with httpx2.stream(
        "POST",
        f"{server.anthropic_base_url}/v1/messages",
        json={"model": CLAUDE, "max_tokens": 64, "stream": True, "messages": user("raw events")},
    ) as response:
        body = response.read().decode()
    names = [line.split(": ", 1)[1] for line in body.splitlines() if line.startswith("event: ")]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names) == {
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    }


def test_anthropic_raw_stream_sync(claude: anthropic.Anthropic) -> None:
    stream = claude.messages.create(
        model=CLAUDE, max_tokens=64, messages=user("stream Claude"), stream=True
    )
    assert isinstance(stream, anthropic.Stream)
    events = list(stream)
    # The SDK drops `ping`.
    assert [e.type for e in events][:2] == ["message_start", "content_block_start"]
    assert "ping" not in [e.type for e in events]
    text = "".join(
        e.delta.text
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )
    assert text == "You said: stream Claude"


def test_anthropic_messages_stream_sync_and_async(
    server: LLMServer, claude: anthropic.Anthropic
) -> None:
    with claude.messages.stream(
        model=CLAUDE, max_tokens=64, messages=user("Hi streaming Claude")
    ) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert pieces == ["You", " said:", " Hi", " streaming", " Claude"]
    assert final.content[0].text == "".join(pieces)  # type: ignore[union-attr]
    assert final.usage.output_tokens == 5

    async def run() -> tuple[list[str], str]:
        client = async_anthropic(server)
        try:
            async with client.messages.stream(
                model=CLAUDE, max_tokens=64, messages=user("async Claude")
            ) as s:
                texts = [t async for t in s.text_stream]
                return texts, await s.get_final_text()
        finally:
            await client.close()

    assert asyncio.run(run()) == (["You", " said:", " async", " Claude"], "You said: async Claude")


def test_anthropic_tool_use_then_tool_result(
    server: LLMServer, claude: anthropic.Anthropic
) -> None:
    question = {"role": "user", "content": "What is the weather in Berlin?"}
    first = claude.messages.create(
        model=CLAUDE, max_tokens=64, messages=[question], tools=[ANTHROPIC_TOOL]
    )  # type: ignore[list-item]
    assert first.stop_reason == "tool_use"
    [block] = first.content
    assert block.type == "tool_use"
    assert block.name == "get_weather" and block.input == {"city": "Berlin"}
    second = claude.messages.create(
        model=CLAUDE,
        max_tokens=64,
        tools=[ANTHROPIC_TOOL],  # type: ignore[list-item]
        messages=[
            question,  # type: ignore[list-item]
            {"role": "assistant", "content": [block.model_dump(exclude_none=True)]},  # type: ignore[list-item]
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": block.id, "content": "cloudy, 15C"}
                ],
            },
        ],
    )
    assert second.stop_reason == "end_turn"
    assert second.content[0].text == "According to get_weather: cloudy, 15C"  # type: ignore[union-attr]

    with claude.messages.stream(
        model=CLAUDE, max_tokens=64, messages=[question], tools=[ANTHROPIC_TOOL]
    ) as s:  # type: ignore[list-item]
        streamed = s.get_final_message()
    assert streamed.content[0].input == {"city": "Berlin"}  # type: ignore[union-attr]
    assert len(server.requests) == 3


def test_anthropic_parse(claude: anthropic.Anthropic) -> None:
    message = claude.messages.parse(
        model=CLAUDE, max_tokens=64, messages=user("Weather for Oslo"), output_format=Weather
    )
    assert message.parsed_output == Weather(city="Oslo", temperature=3, sunny=True)


# --------------------------------------------------------------------------------------------- faults


@pytest.mark.parametrize("fault", ["429", "500"])
def test_openai_errors_arrive_as_sdk_exceptions(
    server: LLMServer, oai: openai.OpenAI, fault: str
) -> None:
    expected = {"429": openai.RateLimitError, "500": openai.InternalServerError}[fault]
    with pytest.raises(expected) as caught:
        oai.chat.completions.create(
            model="gpt-4o", messages=user("x"), extra_headers={"x-test-fault": fault}
        )
    error = caught.value
    assert error.status_code == int(fault)
    assert error.request_id == "req_000001"
    assert isinstance(error.body, dict) and error.body["message"]
    if fault == "429":
        assert error.response.headers["retry-after"] == "1"
        assert error.code == "rate_limit_exceeded"
    with pytest.raises(expected):
        oai.responses.create(model="gpt-4o", input="x", extra_headers={"x-test-fault": fault})
    assert server.requests[0].fault == fault


@pytest.mark.parametrize("fault", ["429", "500"])
def test_anthropic_errors_arrive_as_sdk_exceptions(claude: anthropic.Anthropic, fault: str) -> None:
    expected = {"429": anthropic.RateLimitError, "500": anthropic.InternalServerError}[fault]
    with pytest.raises(expected) as caught:
        claude.messages.create(
            model=CLAUDE, max_tokens=8, messages=user("x"), extra_headers={"x-test-fault": fault}
        )
    error = caught.value
    assert error.status_code == int(fault)
    assert error.request_id == "req_000001"
    assert error.type == {"429": "rate_limit_error", "500": "api_error"}[fault]
    if fault == "429":
        assert error.response.headers["retry-after"] == "1"


def test_async_errors(server: LLMServer) -> None:
    async def run() -> None:
        async with async_openai(server) as client:
            with pytest.raises(openai.RateLimitError):
                await client.chat.completions.create(
                    model="gpt-4o", messages=user("x"), extra_headers={"x-test-fault": "429"}
                )
        claude = async_anthropic(server)
        try:
            with pytest.raises(anthropic.InternalServerError):
                await claude.messages.create(
                    model=CLAUDE,
                    max_tokens=8,
                    messages=user("x"),
                    extra_headers={"x-test-fault": "500"},
                )
        finally:
            await claude.close()

    asyncio.run(run())


def test_retries_are_visible_as_requests(server: LLMServer) -> None:
    server.fail_next("429")
    with openai.OpenAI(
        api_key="test-key", base_url=server.openai_base_url, max_retries=2
    ) as client:
        completion = client.chat.completions.create(model="gpt-4o", messages=user("retry me"))
    assert completion.choices[0].message.content == "You said: retry me"
    assert [r.fault for r in server.requests] == ["429", None]
    # Each attempt says which retry it is.
    assert [r.headers.get("x-stainless-retry-count") for r in server.requests] == ["0", "1"]

    server.reset()
    server.fail_next("500")
    with anthropic.Anthropic(
        api_key="test-key", base_url=server.anthropic_base_url, max_retries=2
    ) as claude:
        message = claude.messages.create(model=CLAUDE, max_tokens=8, messages=user("retry"))
    assert message.stop_reason == "end_turn"
    assert [r.fault for r in server.requests] == ["500", None]


def test_cut_drops_the_connection_midway(
    server: LLMServer, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    with pytest.raises(openai.APIConnectionError):
        oai.chat.completions.create(
            model="gpt-4o", messages=user("x"), extra_headers={"x-test-fault": "cut"}
        )

    received: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in oai.chat.completions.create(
            model="gpt-4o",
            messages=user("one two three four five six"),
            stream=True,
            extra_headers={"x-test-fault": "cut"},
        ):
            received.append(chunk.choices[0].delta.content or "")
    assert 0 < len(received) < 8

    events: list[str] = []
    # anthropic 2.x does not wrap a transport error in the middle of a stream.
    with pytest.raises((anthropic.APIConnectionError, httpx2.TransportError)):
        for event in claude.messages.create(
            model=CLAUDE,
            max_tokens=8,
            messages=user("one two three four five six"),
            stream=True,
            extra_headers={"x-test-fault": "cut"},
        ):
            events.append(event.type)
    assert events and "message_stop" not in events
    assert [r.fault for r in server.requests] == ["cut", "cut", "cut"]


def test_unknown_route_is_provider_shaped_404(server: LLMServer, oai: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        oai.moderations.create(model="omni-moderation-latest", input="x")
    assert server.paths() == ["/v1/moderations"]


def test_fail_next_rejects_unknown_faults(server: LLMServer) -> None:
    with pytest.raises(ValueError):
        server.fail_next("418")


# --------------------------------------------------------------------------------------------- gemini

GEMINI = "gemini-2.5-flash"


@pytest.fixture
def gemini(server: LLMServer) -> Any:
    from google import genai
    from google.genai import types

    return genai.Client(
        api_key="test-key", http_options=types.HttpOptions(base_url=server.gemini_base_url)
    )


def test_gemini_plain_and_streamed(server: LLMServer, gemini: Any) -> None:
    response = gemini.models.generate_content(model=GEMINI, contents="Hello there")
    assert response.text == "You said: Hello there"
    assert response.model_version == GEMINI and response.response_id == "resp_000001"
    assert response.candidates[0].finish_reason == "STOP"
    usage = response.usage_metadata
    assert (usage.prompt_token_count, usage.candidates_token_count) == (2, 4)
    chunks = list(gemini.models.generate_content_stream(model=GEMINI, contents="one two"))
    assert [c.text for c in chunks] == ["You", " said:", " one", " two"]
    assert [c.candidates[0].finish_reason for c in chunks][-2:] == [None, "STOP"]
    assert server.paths() == [
        f"/v1/models/{GEMINI}:generateContent",
        f"/v1/models/{GEMINI}:streamGenerateContent?alt=sse",
    ]


def test_gemini_async(gemini: Any) -> None:
    async def run() -> list[str]:
        first = await gemini.aio.models.generate_content(model=GEMINI, contents="hi")
        stream = await gemini.aio.models.generate_content_stream(model=GEMINI, contents="hi")
        return [first.text, "".join([c.text async for c in stream])]

    assert asyncio.run(run()) == ["You said: hi", "You said: hi"]


def test_gemini_function_call_then_function_response(server: LLMServer, gemini: Any) -> None:
    from google.genai import types

    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    config = types.GenerateContentConfig(tools=[get_weather])
    response = gemini.models.generate_content(
        model=GEMINI, contents="What is the weather in Paris?", config=config
    )
    assert response.text == "According to get_weather: sunny in Paris"
    first, second = (r.body for r in server.requests)
    assert "functionDeclarations" in first["tools"][0]
    assert second["contents"][1]["parts"][0]["functionCall"] == {
        "name": "get_weather",
        "args": {"city": "Paris"},
    }


def test_gemini_json_schema_answer(gemini: Any) -> None:
    from google.genai import types

    class City(BaseModel):
        name: str

    config = types.GenerateContentConfig(
        response_mime_type="application/json", response_schema=City
    )
    response = gemini.models.generate_content(model=GEMINI, contents="Rome?", config=config)
    assert response.parsed == City(name="Rome")


@pytest.mark.parametrize(("fault", "status"), [("429", "RESOURCE_EXHAUSTED"), ("500", "INTERNAL")])
def test_gemini_errors_arrive_as_sdk_exceptions(gemini: Any, fault: str, status: str) -> None:
    from google.genai import errors

    expected = errors.ClientError if fault == "429" else errors.ServerError
    config = {"http_options": {"headers": {"x-test-fault": fault}}}
    with pytest.raises(expected) as caught:
        gemini.models.generate_content(model=GEMINI, contents="x", config=config)
    assert (caught.value.code, caught.value.status) == (int(fault), status)
    with pytest.raises(expected):
        list(gemini.models.generate_content_stream(model=GEMINI, contents="x", config=config))
