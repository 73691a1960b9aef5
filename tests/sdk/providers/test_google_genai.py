"""The google-genai patches: record live with the real SDK, stop the server, replay with no network.

As for OpenAI and Anthropic: each test records against a fresh local stand-in of the Gemini API
(``examples/llm_server.py``, reached through the SDK's ``HttpOptions(base_url=...)``) inside an
agent run, takes the bundle the real FixtureSpanProcessor extracted, stops the server and
replays against a closed port.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import errors, types
from google.genai.models import AsyncModels, Models
from opentelemetry.trace import SpanKind

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.providers._helpers import (
    Weather,
    capturing_content,
    closed_url,
    instrumented_fixture,
    llm_spans,
    replays_the_story,
)
from tracely_sdk import providers

MODEL = "gemini-2.5-flash"
SEND = "httpx2.Client.send"  # the SDK's sync client

Scenario = Callable[[Any], Any]


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def client_for(base_url: str) -> genai.Client:
    return genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=base_url))


def run(value: Any) -> Any:
    return asyncio.run(value) if inspect.iscoroutine(value) else value


class Live:
    def __init__(self, value: Any, bundle: dict[str, Any], paths: list[str]) -> None:
        self.value = value
        self.bundle = json.loads(json.dumps(bundle))
        self.paths = paths


def record(capture: Any, scenario: Scenario) -> Live:
    with serve() as (server, _):
        with tracely.agent("agent", input="q"):
            value = run(scenario(client_for(server.gemini_base_url)))
        paths = server.paths()
    return Live(value, capture.last_bundle, paths)


def replay(
    bundle: Any, scenario: Scenario, *, strict: bool = True
) -> tuple[Any, tracely.ReplayReport]:
    with tracely.fixtures(bundle, strict=strict) as rep:
        value = run(scenario(client_for(closed_url())))
    return value, rep


instrumented = instrumented_fixture("google")


def _generate(client: Any, text: str = "Hello there", **config: Any) -> Any:
    return client.models.generate_content(model=MODEL, contents=text, config=config or None)


def _stream(client: Any, text: str = "Hello streamed world") -> list[Any]:
    return list(client.models.generate_content_stream(model=MODEL, contents=text))


async def _agenerate(client: Any, text: str = "Hello there") -> Any:
    return await client.aio.models.generate_content(model=MODEL, contents=text)


async def _astream(client: Any, text: str = "Hello streamed world") -> list[Any]:
    stream = await client.aio.models.generate_content_stream(model=MODEL, contents=text)
    return [chunk async for chunk in stream]


def same(replayed: Any, live: Any) -> None:
    """The replayed response is the live one's type and dumps the same; of the HTTP response it
    keeps the content type, as recorded (the other headers are the server's, not the answer)."""
    assert type(replayed) is type(live)
    unrecorded = {"sdk_http_response"}
    assert replayed.model_dump(exclude=unrecorded) == live.model_dump(exclude=unrecorded)
    # The SDK's async client is aiohttp where it is installed, which keeps the server's case of
    # header names; a recording keeps names lowercased.
    live_headers = {k.lower(): v for k, v in live.sdk_http_response.headers.items()}
    replayed_headers = {k.lower(): v for k, v in replayed.sdk_http_response.headers.items()}
    assert replayed_headers["content-type"] == live_headers["content-type"]


def same_chunks(replayed: list[Any], live: list[Any]) -> None:
    assert len(replayed) == len(live) > 1
    for a, b in zip(replayed, live, strict=True):
        same(a, b)


# --------------------------------------------------------------------------- plain calls


def test_a_response_is_recorded_and_replayed_as_the_sdk_type(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, lambda c: _generate(c, system_instruction="Be brief."))
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output_type"] == "http.response"
    assert entry["provider"] == SEND
    assert entry["input"]["path"].endswith(f"/models/{MODEL}:generateContent")
    assert entry["input"]["body"] == {
        "contents": [{"role": "user", "parts": [{"text": "Hello there"}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": "Be brief."}]},
        "generationConfig": {},
    }
    assert entry["usage"] == [4, 4]
    replayed, rep = replay(live.bundle, lambda c: _generate(c, system_instruction="Be brief."))
    assert isinstance(replayed, types.GenerateContentResponse)
    same(replayed, live.value)
    assert replayed.text == "You said: Hello there"
    assert replayed.sdk_http_response.headers["content-type"] == "application/json"
    assert rep.clean and rep.served == [f"llm:{MODEL}"]
    assert SEND in rep.providers


def test_the_span_has_the_genai_attributes_live_and_replayed(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, lambda c: _generate(c, temperature=0.5, max_output_tokens=64))
    (span,) = llm_spans(capture)
    attrs = span.attributes
    assert span.name == f"chat {MODEL}" and span.kind is SpanKind.CLIENT
    assert attrs["gen_ai.provider.name"] == "gcp.gemini"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == MODEL
    assert attrs["gen_ai.request.temperature"] == 0.5
    assert attrs["gen_ai.request.max_tokens"] == 64
    assert attrs["gen_ai.response.model"] == MODEL
    assert attrs["gen_ai.response.id"] == "resp_000001"
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (2, 4)
    assert attrs["server.address"] == "127.0.0.1" and isinstance(attrs["server.port"], int)
    assert "gen_ai.request.stream" not in attrs
    capture.exporter.clear()
    replay(live.bundle, lambda c: _generate(c, temperature=0.5, max_output_tokens=64))
    (served,) = llm_spans(capture)
    for key in (
        "gen_ai.response.id",
        "gen_ai.response.finish_reasons",
        "gen_ai.usage.input_tokens",
    ):
        assert served.attributes[key] == attrs[key]
    assert served.attributes["tracely.replay.served"] is True


def test_captured_content_follows_the_genai_conventions(
    capture: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with capturing_content(monkeypatch, "google"):
        config = types.GenerateContentConfig(
            system_instruction="Be brief.",
            tools=[get_weather],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        record(
            capture,
            lambda c: c.models.generate_content(
                model=MODEL, contents="Weather in Oslo?", config=config
            ),
        )
    (span,) = llm_spans(capture)
    assert json.loads(span.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Oslo?"}]}
    ]
    assert json.loads(span.attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be brief."}
    ]
    assert json.loads(span.attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": None,
                    "name": "get_weather",
                    "arguments": {"city": "Oslo"},
                }
            ],
            "finish_reason": "stop",
        }
    ]


def test_an_async_response_round_trips(capture: Any, instrumented: None) -> None:
    live = record(capture, _agenerate)
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["provider"] == "aiohttp.ClientSession._request"  # the SDK's async client
    replayed, rep = replay(live.bundle, _agenerate)
    same(replayed, live.value)
    assert rep.clean


# --------------------------------------------------------------------------- streams


@pytest.mark.parametrize("scenario", [_stream, _astream], ids=["sync", "async"])
def test_a_stream_is_recorded_chunk_by_chunk_and_replayed_as_the_sdks_chunks(
    capture: Any, instrumented: None, scenario: Scenario
) -> None:
    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output_type"] == "http.response"
    assert len(entry["output"]["events"]) == len(live.value) == 5
    assert entry["usage"] == [3, 5]
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert "gen_ai.response.time_to_first_chunk" in span.attributes
    replayed, rep = replay(live.bundle, scenario)
    same_chunks(replayed, live.value)
    assert "".join(c.text for c in replayed) == "You said: Hello streamed world"
    assert rep.clean


def test_a_replayed_stream_is_a_generator_like_the_live_one(
    capture: Any, instrumented: None
) -> None:
    def scenario(client: Any) -> Any:
        # What the public generate_content_stream iterates: one request's stream.
        stream = client.models._generate_content_stream(model=MODEL, contents="hi")
        assert inspect.isgenerator(stream)
        return [chunk.text for chunk in stream]

    live = record(capture, scenario)
    assert live.value == ["You", " said:", " hi"]
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.clean


def test_a_stream_read_halfway_records_what_the_agent_read(
    capture: Any, instrumented: None
) -> None:
    def scenario(client: Any) -> Any:
        stream = client.models.generate_content_stream(model=MODEL, contents="one two three")
        first = next(stream)
        stream.close()
        return first

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][MODEL]
    # What the client read off the wire before the close: at least the chunk the agent read.
    assert len(entry["output"]["events"]) >= 1
    replayed, rep = replay(live.bundle, scenario)
    same(replayed, live.value)
    assert rep.clean


def test_a_foreign_entry_is_served_and_another_sdks_recording_is_refused() -> None:
    messages = {
        "messages": [
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "f", "arguments": {"x": 1}}],
                "finish_reason": "tool_call",
            }
        ],
        "model": MODEL,
        "id": "resp_x",
    }
    bundle = {
        "llm": {
            MODEL: [
                {"output": messages, "output_type": "gen_ai.messages", "usage": [5, 1]},
                {"output": {"body": {}}, "output_type": "anthropic.message"},
            ]
        }
    }
    client = client_for(closed_url())
    with tracely.fixtures(bundle, strict=False):
        response = _generate(client)
        (call,) = response.function_calls
        assert (call.id, call.name, call.args) == ("c1", "f", {"x": 1})
        assert response.response_id == "resp_x"
        assert response.usage_metadata.prompt_token_count == 5
        with pytest.raises(tracely.ReplayError, match="cannot serve as a plain gemini response"):
            _generate(client)


# --------------------------------------------------------------------------- function calling, chats


def test_automatic_function_calling_records_each_request_and_replays_the_loop(
    capture: Any, instrumented: None
) -> None:
    calls: list[str] = []

    def weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"sunny in {city}"

    def scenario(client: Any) -> Any:
        config = types.GenerateContentConfig(tools=[weather])
        return client.models.generate_content(
            model=MODEL, contents="What is the weather in Paris?", config=config
        )

    live = record(capture, scenario)
    assert live.value.text == "According to weather: sunny in Paris"
    assert calls == ["Paris"] and len(live.paths) == 2
    first, second = live.bundle["llm"][MODEL]
    assert first["input"]["body"]["tools"][0]["functionDeclarations"][0]["name"] == "weather"
    part = first["output"]["body"]["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"] == {"name": "weather", "args": {"city": "Paris"}}
    sent = second["input"]["body"]["contents"][-1]["parts"][0]
    assert sent["functionResponse"]["response"] == {"result": "sunny in Paris"}
    (span, _) = llm_spans(capture)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    calls.clear()
    replayed, rep = replay(live.bundle, scenario)
    assert replayed.text == live.value.text and calls == ["Paris"]
    assert len(replayed.automatic_function_calling_history) == 3
    assert rep.clean and rep.served == [f"llm:{MODEL}", f"llm:{MODEL}"]


def test_a_manual_function_call_round_trip(capture: Any, instrumented: None) -> None:
    tool = types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="get_weather",
                parameters_json_schema={
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                },
            )
        ]
    )
    config = types.GenerateContentConfig(tools=[tool])

    def scenario(client: Any) -> Any:
        asked = types.Content(role="user", parts=[types.Part(text="Weather in Oslo?")])
        first = client.models.generate_content(model=MODEL, contents=[asked], config=config)
        (call,) = first.function_calls
        answer = types.Part.from_function_response(
            name=call.name, response={"output": get_weather(**call.args)}
        )
        contents = [asked, first.candidates[0].content, types.Content(role="user", parts=[answer])]
        return client.models.generate_content(model=MODEL, contents=contents, config=config)

    live = record(capture, scenario)
    assert live.value.text == "According to get_weather: sunny in Oslo"
    replayed, rep = replay(live.bundle, scenario)
    same(replayed, live.value)
    assert rep.clean


def test_a_chat_session_round_trips(capture: Any, instrumented: None) -> None:
    def scenario(client: Any) -> Any:
        chat = client.chats.create(model=MODEL)
        answers = [chat.send_message("hi chat").text, chat.send_message("again").text]
        return answers, [c.model_dump(exclude_none=True) for c in chat.get_history()]

    live = record(capture, scenario)
    second = live.bundle["llm"][MODEL][1]
    assert [c["role"] for c in second["input"]["body"]["contents"]] == ["user", "model", "user"]
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.clean


def test_an_async_streamed_chat_round_trips(capture: Any, instrumented: None) -> None:
    async def scenario(client: Any) -> Any:
        chat = client.aio.chats.create(model=MODEL)
        texts = []
        for message in ("first", "second"):
            stream = await chat.send_message_stream(message)
            texts.append("".join([chunk.text async for chunk in stream]))
        return texts

    live = record(capture, scenario)
    assert live.value == ["You said: first", "You said: second"]
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.clean


def test_structured_output_is_parsed_again_by_the_sdk(capture: Any, instrumented: None) -> None:
    def scenario(client: Any) -> Any:
        config = types.GenerateContentConfig(
            response_mime_type="application/json", response_schema=Weather
        )
        return client.models.generate_content(
            model=MODEL, contents="Weather in Rome?", config=config
        )

    live = record(capture, scenario)
    assert isinstance(live.value.parsed, Weather)
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["input"]["body"]["generationConfig"]["responseMimeType"] == "application/json"
    assert "parsed" not in entry["output"]["body"]
    replayed, rep = replay(live.bundle, scenario)
    assert replayed.parsed == live.value.parsed and isinstance(replayed.parsed, Weather)
    assert rep.clean


def test_a_call_asking_for_the_http_response_is_served_its_body(
    capture: Any, instrumented: None
) -> None:
    def scenario(client: Any) -> Any:
        config = types.GenerateContentConfig(should_return_http_response=True)
        return client.models.generate_content(model=MODEL, contents="raw", config=config)

    live = record(capture, scenario)
    assert json.loads(live.value.sdk_http_response.body)["responseId"] == "resp_000001"
    replayed, rep = replay(live.bundle, scenario)
    # The same JSON, written compactly as a recording is served.
    assert json.loads(replayed.sdk_http_response.body) == json.loads(
        live.value.sdk_http_response.body
    )
    assert rep.clean


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("fault", "cls", "code", "status"),
    [
        ("429", errors.ClientError, 429, "RESOURCE_EXHAUSTED"),
        ("500", errors.ServerError, 500, "INTERNAL"),
    ],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "stream"])
def test_a_recorded_error_replays_as_the_sdks_error(
    capture: Any,
    instrumented: None,
    fault: str,
    cls: type[errors.APIError],
    code: int,
    status: str,
    streamed: bool,
) -> None:
    def scenario(client: Any) -> Any:
        config = {"http_options": {"headers": {"x-test-fault": fault}}}
        try:
            if streamed:
                list(
                    client.models.generate_content_stream(model=MODEL, contents="x", config=config)
                )
            else:
                client.models.generate_content(model=MODEL, contents="x", config=config)
        except errors.APIError as exc:
            return exc
        raise AssertionError("no error")

    live = record(capture, scenario)
    assert type(live.value) is cls
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output"]["status"] == code  # the error response, as the wire carried it
    replayed, rep = replay(live.bundle, scenario)
    assert type(replayed) is cls
    assert (replayed.code, replayed.status, replayed.message, replayed.details, str(replayed)) == (
        live.value.code,
        status,
        live.value.message,
        live.value.details,
        str(live.value),
    )
    assert rep.clean


# --------------------------------------------------------------------------- divergence, safety net


def test_divergence_strict_miss_and_lenient(capture: Any, instrumented: None) -> None:
    live = record(capture, lambda c: _generate(c, "the prompt"))
    _, rep = replay(live.bundle, lambda c: _generate(c, "a changed prompt"))
    assert rep.diverged == [f"llm:{MODEL}"]
    client = client_for(closed_url())
    with tracely.fixtures(live.bundle) as rep:
        _generate(client, "the prompt")
        with pytest.raises(tracely.ReplayError, match=f"llm:{MODEL}"):
            _generate(client, "one call too many")
    assert len(rep.errors) == 1


def test_a_request_that_is_no_model_call_is_refused_by_the_network_guard() -> None:
    client = client_for(closed_url())
    with tracely.fixtures({"llm": {MODEL: [{"output": "Hello"}]}}) as rep:
        for unserved in (
            lambda: client.models.count_tokens(model=MODEL, contents="hi"),
            lambda: client.models.embed_content(model="text-embedding-004", contents="hi"),
        ):
            with pytest.raises(tracely.ReplayError, match="strict replay refused a connection"):
                unserved()
        assert _generate(client).text == "Hello"
    assert len(rep.errors) == 2


def test_instrumenting_twice_wraps_the_clients_once_and_leaves_the_sdk_alone() -> None:
    providers.uninstrument(["google", "httpx2", "aiohttp"])
    names = ("_generate_content", "_generate_content_stream")
    originals = {name: Models.__dict__[name] for name in names}
    async_original = AsyncModels.__dict__["_generate_content"]
    providers.instrument("google")
    providers.instrument("google")
    assert {name: Models.__dict__[name] for name in names} == originals
    assert AsyncModels.__dict__["_generate_content"] is async_original
    assert {SEND, "aiohttp.ClientSession._request"} <= set(providers.patched_methods())
    providers.uninstrument("google")
    assert SEND not in providers.patched_methods()


# --------------------------------------------------------------------------- the story


def _ask(base_url: str, question: str, *, twice: bool = False) -> str:
    with tracely.agent("gemini-agent", input=question) as agent_run:
        client = client_for(base_url)
        answer = "".join(
            chunk.text or ""
            for chunk in client.models.generate_content_stream(model=MODEL, contents=question)
        )
        if twice:
            answer = asyncio.run(_agenerate(client, question + " again")).text
        agent_run.output = answer
    return answer


def test_a_recorded_case_passes_fails_on_a_changed_prompt_and_is_incomplete_on_an_extra_call(
    capture: Any, instrumented: None, tmp_path: Path
) -> None:
    with serve() as (server, _):
        live = _ask(server.gemini_base_url, "Paris weather?")
    assert live == "You said: Paris weather?"
    bundle = capture.last_bundle
    replays_the_story(bundle, tmp_path, _ask, f"llm:{MODEL}")


def test_a_stream_cut_short_live_replays_its_failure_at_the_call(
    capture: Any, instrumented: None
) -> None:
    def scenario(client: Any) -> Any:
        config = {"http_options": {"headers": {"x-test-fault": "cut"}}}
        read: list[str] = []
        try:
            for chunk in client.models.generate_content_stream(
                model=MODEL, contents="one two three four five six", config=config
            ):
                read.append(chunk.text)
        except Exception as exc:
            return read, exc
        raise AssertionError("the stream was not cut")

    live = record(capture, scenario)
    read, error = live.value
    assert read  # the agent had the first chunks, then the failure
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["error"]["type"] == type(error).__qualname__
    (replayed_read, replayed), rep = replay(live.bundle, scenario)
    # Served at the client, the cut comes as the client's own error, at the call, as recorded.
    assert replayed_read == [] and type(replayed) is type(error)
    assert rep.clean
