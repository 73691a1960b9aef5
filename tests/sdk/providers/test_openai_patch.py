"""The OpenAI SDK, recorded and served at its HTTP client: record live with the real SDK, stop
the server, replay with no network.

Each test records its calls against a fresh local server (``examples.llm_server``) inside an
agent run, takes the bundle the real FixtureSpanProcessor extracted, stops the server, and
replays against a closed port: a call that reached the network would fail (and under strict
replay the network guard raises ReplayError before it even tries).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import httpx2
import openai
import pytest
import wrapt
from openai.resources.chat.completions.completions import Completions
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response
from opentelemetry.trace import SpanKind

import tracely_sdk as tracely
from examples.llm_server import LLMServer, serve
from tests.sdk.providers._helpers import (
    Weather,
    capturing_content,
    closed_url,
    instrumented_fixture,
    llm_spans,
    run,
    same,
    stacked_with,
    user,
)
from tracely_otel.diagnostics import RAISE_INTERNAL_ERRORS
from tracely_sdk import providers
from tracely_sdk.providers import _patching, _settings
from tracely_sdk.providers.http import _exchange, _openai_chat

MODEL = "gpt-4o"
WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


Scenario = Callable[[Any], Any]
SEND = "httpx2.Client.send"
ASEND = "httpx2.AsyncClient.send"
REFUSED = "strict replay refused a connection"


def chunks(entry: Any) -> list[Any]:
    """The recorded events of a streamed call that carry a JSON chunk (not ``[DONE]``)."""
    return [e for e in entry["output"]["events"] if isinstance(e.get("data"), dict)]


class Live:
    def __init__(self, value: Any, bundle: dict[str, Any], server: LLMServer) -> None:
        self.value = value
        self.bundle = json.loads(json.dumps(bundle))  # only plain JSON survives
        self.server = server


def record(capture: Any, scenario: Scenario, *, client_cls: Any = openai.OpenAI) -> Live:
    """Run ``scenario(client)`` live against a fresh server, inside an agent run."""
    with serve() as (server, _):
        client = client_cls(api_key="test-key", base_url=server.openai_base_url, max_retries=0)
        with tracely.agent("agent", input="q"):
            value = run(scenario(client))
    return Live(value, capture.last_bundle, server)


def replay(
    bundle: Any, scenario: Scenario, *, client_cls: Any = openai.OpenAI, strict: bool = True
) -> tuple[Any, tracely.ReplayReport]:
    """Run ``scenario(client)`` under ``fixtures(bundle)`` with a client aimed at a closed port."""
    client = client_cls(api_key="test-key", base_url=closed_url("/v1"), max_retries=0)
    with tracely.fixtures(bundle, strict=strict) as rep:
        value = run(scenario(client))
    return value, rep


instrumented = instrumented_fixture("openai")


# --------------------------------------------------------------------------- plain calls


def test_a_completion_is_recorded_and_replayed_as_the_sdk_type(
    capture: Any, instrumented: None
) -> None:
    live = record(
        capture, lambda c: c.chat.completions.create(model=MODEL, messages=user("Hello there"))
    )
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output_type"] == "http.response"
    assert entry["input"]["method"] == "POST"
    assert entry["input"]["path"].endswith("/chat/completions")
    assert entry["input"]["body"] == {"messages": user("Hello there"), "model": MODEL}
    assert entry["provider"] == SEND
    assert entry["usage"] == [2, 4]

    replayed, rep = replay(
        live.bundle, lambda c: c.chat.completions.create(model=MODEL, messages=user("Hello there"))
    )
    assert isinstance(replayed, ChatCompletion)
    same(replayed, live.value)
    assert replayed.choices[0].message.content == "You said: Hello there"
    assert replayed._request_id == live.value._request_id
    assert rep.clean and rep.served == [f"llm:{MODEL}"]
    assert SEND in rep.providers and ASEND in rep.providers


def test_the_live_span_carries_the_genai_attributes(capture: Any, instrumented: None) -> None:
    record(
        capture,
        lambda c: c.chat.completions.create(
            model=MODEL, messages=user("Hi"), max_tokens=50, temperature=0.5
        ),
    )
    (span,) = llm_spans(capture)
    attrs = span.attributes
    assert span.name == f"chat {MODEL}"
    assert span.kind is SpanKind.CLIENT
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == MODEL
    assert attrs["gen_ai.response.model"] == MODEL
    assert attrs["gen_ai.response.id"] == "chatcmpl-000001"
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (1, 3)
    assert attrs["gen_ai.request.max_tokens"] == 50
    assert attrs["gen_ai.request.temperature"] == 0.5
    assert attrs["server.address"] == "127.0.0.1"
    assert "tracely.input" in attrs and "tracely.output" in attrs
    # Message content goes to the plain gen_ai attributes only when capture is enabled.
    assert "gen_ai.input.messages" not in attrs
    assert "gen_ai.output.messages" not in attrs


RESPONSE_ATTRIBUTES = (
    "gen_ai.response.model",
    "gen_ai.response.id",
    "gen_ai.response.finish_reasons",
)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_served_span_carries_the_response_attributes_of_its_entry(
    capture: Any, instrumented: None, stream: bool
) -> None:
    def scenario(client: Any) -> Any:
        reply = client.chat.completions.create(model=MODEL, messages=user("Hi"), stream=stream)
        return list(reply) if stream else reply

    live = record(capture, scenario)
    (live_span,) = llm_spans(capture)
    capture.exporter.clear()
    _, rep = replay(live.bundle, scenario)
    (served,) = llm_spans(capture)
    assert rep.clean and served.attributes["tracely.replay.served"] is True
    for key in RESPONSE_ATTRIBUTES:
        assert served.attributes[key] == live_span.attributes[key]


def test_captured_content_follows_the_genai_conventions(
    capture: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with capturing_content(monkeypatch, "openai"):
        record(
            capture,
            lambda c: c.chat.completions.create(
                model=MODEL,
                messages=user("Weather in Paris? key sk-abcdefghijklmnopqrstuvwx"),
                tools=[WEATHER_TOOL],
            ),
        )
    (span,) = llm_spans(capture)
    inputs = json.loads(span.attributes["gen_ai.input.messages"])
    assert inputs == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris? key [REDACTED]"}]}
    ]
    outputs = json.loads(span.attributes["gen_ai.output.messages"])
    assert outputs == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_000001_0",
                    "name": "get_weather",
                    "arguments": {"city": "Paris"},
                }
            ],
            "finish_reason": "tool_call",
        }
    ]
    assert span.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    # tracely's own recording is redacted too.
    assert "sk-abc" not in span.attributes["tracely.input"]


def test_the_newer_capture_modes_are_understood(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expected in (
        ("span_only", True),
        ("span_and_event", True),
        ("no_content", False),
        ("false", False),
    ):
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value)
        _patching.refresh_settings()
        assert _patching.settings.capture_content is expected
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    _patching.refresh_settings()


def test_an_async_completion_round_trips(capture: Any, instrumented: None) -> None:
    async def scenario(client: openai.AsyncOpenAI) -> Any:
        return await client.chat.completions.create(model=MODEL, messages=user("async hello"))

    live = record(capture, scenario, client_cls=openai.AsyncOpenAI)
    assert live.bundle["llm"][MODEL][0]["provider"] == ASEND
    replayed, rep = replay(live.bundle, scenario, client_cls=openai.AsyncOpenAI)
    same(replayed, live.value)
    assert rep.clean


def test_a_completion_is_recorded_as_the_response_the_server_sent(
    capture: Any, instrumented: None
) -> None:
    live = record(
        capture,
        lambda c: c.chat.completions.with_raw_response.create(
            model=MODEL, messages=user("wire body")
        ),
    )
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output"]["status"] == 200
    assert entry["output"]["headers"]["x-request-id"] == live.value.headers["x-request-id"]
    assert entry["output"]["body"] == json.loads(live.value.content)
    assert list(entry["output"]["body"]) == list(json.loads(live.value.content))  # key order


def test_concurrent_async_calls_each_record_their_own_body(
    capture: Any, instrumented: None
) -> None:
    async def scenario(client: openai.AsyncOpenAI) -> Any:
        return await asyncio.gather(
            *(
                client.chat.completions.create(model=MODEL, messages=user(f"call {i}"))
                for i in range(4)
            )
        )

    live = record(capture, scenario, client_cls=openai.AsyncOpenAI)
    entries = live.bundle["llm"][MODEL]
    recorded = {e["output"]["body"]["id"]: e for e in entries}
    assert len(recorded) == 4
    for completion in live.value:
        entry = recorded[completion.id]
        assert entry["output"]["body"]["choices"][0]["message"]["content"] == (
            completion.choices[0].message.content
        )
        assert (
            entry["input"]["body"]["messages"][0]["content"]
            == completion.choices[0].message.content[len("You said: ") :]
        )


def _bracketed(client: Any, text: str) -> list[Any]:
    """A stream read by an agent that changes each chunk's content in place as it reads it."""
    read = []
    for chunk in client.chat.completions.create(model=MODEL, messages=user(text), stream=True):
        for choice in chunk.choices:
            if choice.delta.content:
                choice.delta.content = f"[{choice.delta.content}]"  # not idempotent
        read.append(chunk.choices[0].delta.content if chunk.choices else None)
    return read


def _sent_text(entry: Any) -> str:
    deltas = [c["data"]["choices"][0]["delta"] for c in chunks(entry)]
    return "".join(filter(None, (delta.get("content") for delta in deltas)))


# --------------------------------------------------------------------------- streams


def _stream(client: Any, text: str = "stream these words please") -> list[Any]:
    return list(
        client.chat.completions.create(
            model=MODEL, messages=user(text), stream=True, stream_options={"include_usage": True}
        )
    )


def test_a_stream_is_recorded_chunk_by_chunk_and_replayed_as_the_sdk_stream(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, _stream)
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output_type"] == "http.response"
    assert entry["output"]["headers"]["content-type"].startswith("text/event-stream")
    assert len(chunks(entry)) == len(live.value)
    assert entry["output"]["events"][-1] == {"text": "[DONE]"}
    assert entry["usage"] == [4, 6]

    seen: list[Any] = []

    def scenario(client: Any) -> Any:
        stream = client.chat.completions.create(
            model=MODEL,
            messages=user("stream these words please"),
            stream=True,
            stream_options={"include_usage": True},
        )
        seen.append(stream)
        with stream:
            return list(stream)

    replayed, rep = replay(live.bundle, scenario)
    assert isinstance(seen[0], openai.Stream)
    assert [type(c) for c in replayed] == [ChatCompletionChunk] * len(live.value)
    assert [c.model_dump() for c in replayed] == [c.model_dump() for c in live.value]
    assert rep.clean


def test_a_stream_is_recorded_as_the_chunks_and_events_the_server_sent(
    capture: Any, instrumented: None
) -> None:
    def scenario(client: Any) -> Any:
        chunks = _stream(client)
        events = list(client.responses.create(model=MODEL, input="Stream events", stream=True))
        return chunks, events

    live = record(capture, scenario)
    chat, responses = live.bundle["llm"][MODEL]
    recorded = chunks(chat) + chunks(responses)
    assert len(recorded) == len(live.value[0]) + len(live.value[1])
    assert [c["event"] for c in chunks(responses)] == [e.type for e in live.value[1]]
    assert [c["data"]["id"] for c in chunks(chat)] == [c.id for c in live.value[0]]


def test_chunks_the_agent_changes_are_recorded_as_the_server_sent_them(
    capture: Any, instrumented: None
) -> None:
    def scenario(client: Any) -> list[Any]:
        return _bracketed(client, "bracket these words")

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][MODEL]
    assert _sent_text(entry) == "You said: bracket these words"
    # Replayed, the agent changes the server's chunks once, as it did live.
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value
    assert rep.clean


@pytest.mark.parametrize("client_cls", [openai.OpenAI, openai.AsyncOpenAI])
def test_a_result_that_cannot_be_recorded_still_reaches_the_agent(
    capture: Any,
    instrumented: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    client_cls: Any,
) -> None:
    def unrecordable(body: Any) -> Any:
        raise TypeError("not a response this codec knows")

    codec = dataclasses.replace(_openai_chat.CODEC, usage=unrecordable)
    monkeypatch.setattr(_exchange, "FORMATS", (codec, *_exchange.FORMATS))
    monkeypatch.delenv(RAISE_INTERNAL_ERRORS)  # the failure is the test's: logged, as in production
    _settings.warn_once.forget()
    live = record(
        capture,
        lambda c: c.chat.completions.create(model=MODEL, messages=user("Hello there")),
        client_cls=client_cls,
    )
    assert live.value.choices[0].message.content == "You said: Hello there"
    assert MODEL not in live.bundle["llm"]
    (incomplete,) = live.bundle["incomplete"]
    assert incomplete["label"] == f"llm:{MODEL}"
    assert "could not record the result of" in caplog.text
    (span,) = llm_spans(capture)
    assert span.end_time is not None


def test_interleaved_async_streams_each_record_their_own_chunks(
    capture: Any, instrumented: None
) -> None:
    async def scenario(client: openai.AsyncOpenAI) -> list[list[Any]]:
        streams = [
            await client.chat.completions.create(
                model=MODEL, messages=user(f"stream {i} of two"), stream=True
            )
            for i in range(2)
        ]
        read: list[list[Any]] = [[], []]
        iterators = [s.__aiter__() for s in streams]
        while iterators:  # one chunk of each in turn
            for i, iterator in list(enumerate(iterators)):
                try:
                    read[i].append(await iterator.__anext__())
                except StopAsyncIteration:
                    iterators.remove(iterator)
        return read

    live = record(capture, scenario, client_cls=openai.AsyncOpenAI)
    entries = live.bundle["llm"][MODEL]
    by_id = {chunks(e)[0]["data"]["id"]: e for e in entries}
    for read in live.value:
        recorded = chunks(by_id[read[0].id])
        assert [c["data"]["id"] for c in recorded] == [c.id for c in read]
        assert [c["data"] for c in recorded] == [c.to_dict(mode="json") for c in read]
    replayed, rep = replay(live.bundle, scenario, client_cls=openai.AsyncOpenAI)
    assert [[c.model_dump() for c in s] for s in replayed] == [
        [c.model_dump() for c in s] for s in live.value
    ]
    assert rep.clean


def test_the_span_of_a_live_stream_ends_when_the_stream_is_exhausted(
    capture: Any, instrumented: None
) -> None:
    with serve() as (server, _):
        client = openai.OpenAI(api_key="test-key", base_url=server.openai_base_url, max_retries=0)
        stream = client.chat.completions.create(
            model=MODEL, messages=user("one two three"), stream=True
        )
        first = next(stream)
        assert first.choices[0].delta.role == "assistant"
        assert not llm_spans(capture)  # still streaming
        rest = list(stream)
    (span,) = llm_spans(capture)
    recorded = json.loads(span.attributes["tracely.output"])
    assert len(chunks({"output": recorded})) == 1 + len(rest)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)


def test_a_stream_closed_early_records_what_was_read(capture: Any, instrumented: None) -> None:
    def scenario(client: Any) -> list[Any]:
        stream = client.chat.completions.create(
            model=MODEL, messages=user("a b c d e f g"), stream=True
        )
        read = [next(stream), next(stream)]
        stream.close()
        return read

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][MODEL]
    # What the client read off the wire before the close: at least the two chunks read.
    assert len(chunks(entry)) >= 2
    replayed, _ = replay(
        live.bundle,
        lambda c: list(
            c.chat.completions.create(model=MODEL, messages=user("a b c d e f g"), stream=True)
        ),
    )
    assert [c.model_dump() for c in replayed] == [c.model_dump() for c in live.value]


def test_async_streams_round_trip(capture: Any, instrumented: None) -> None:
    async def scenario(client: openai.AsyncOpenAI) -> list[Any]:
        stream = await client.chat.completions.create(
            model=MODEL, messages=user("async stream"), stream=True
        )
        async with stream:
            return [chunk async for chunk in stream]

    live = record(capture, scenario, client_cls=openai.AsyncOpenAI)
    replayed, rep = replay(live.bundle, scenario, client_cls=openai.AsyncOpenAI)
    assert [c.model_dump() for c in replayed] == [c.model_dump() for c in live.value]
    assert rep.clean


def test_the_stream_helper_replays_its_events_and_final_completion(
    capture: Any, instrumented: None
) -> None:
    def scenario(client: Any) -> Any:
        with client.chat.completions.stream(
            model=MODEL, messages=user("Weather for Oslo"), response_format=Weather
        ) as helper:
            events = [(e.type, getattr(e, "delta", None)) for e in helper]
            return events, helper.get_final_completion()

    live = record(capture, scenario)
    sent = live.bundle["llm"][MODEL][0]["input"]["body"]
    assert sent["response_format"]["json_schema"]["name"] == "Weather"
    (events, final), rep = replay(live.bundle, scenario)
    assert events == live.value[0]
    same(final, live.value[1])
    assert final.choices[0].message.parsed == Weather(city="Oslo", temperature=3)
    assert rep.clean


def test_the_async_stream_helper_round_trips(capture: Any, instrumented: None) -> None:
    async def scenario(client: openai.AsyncOpenAI) -> Any:
        async with client.chat.completions.stream(
            model=MODEL, messages=user("async helper")
        ) as helper:
            texts = [e.delta async for e in helper if e.type == "content.delta"]
            return texts, await helper.get_final_completion()

    live = record(capture, scenario, client_cls=openai.AsyncOpenAI)
    (texts, final), rep = replay(live.bundle, scenario, client_cls=openai.AsyncOpenAI)
    assert texts == live.value[0]
    same(final, live.value[1])
    assert rep.clean


def test_a_replayed_stream_the_agent_never_reads_is_closed_when_the_block_ends(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, _stream)
    client = openai.OpenAI(api_key="test-key", base_url=closed_url("/v1"), max_retries=0)
    with tracely.fixtures(live.bundle):
        stream = client.chat.completions.create(
            model=MODEL,
            messages=user("stream these words please"),
            stream=True,
            stream_options={"include_usage": True},
        )
        assert not stream.response.is_closed
    assert stream.response.is_closed


# --------------------------------------------------------------------------- parse and Responses


def test_parse_replays_the_parsed_completion(capture: Any, instrumented: None) -> None:
    def scenario(client: Any) -> Any:
        return client.chat.completions.parse(
            model=MODEL, messages=user("Weather for Oslo"), response_format=Weather
        )

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["provider"] == SEND
    assert "parsed" not in json.dumps(entry["output"])  # the API's answer, parsed again on replay
    replayed, rep = replay(live.bundle, scenario)
    assert type(replayed) is type(live.value)
    assert replayed.model_dump(warnings=False) == live.value.model_dump(warnings=False)
    assert replayed.choices[0].message.parsed == Weather(city="Oslo", temperature=3)
    assert rep.clean


def test_the_responses_api_round_trips_plain_streamed_parsed_and_helped(
    capture: Any, instrumented: None
) -> None:
    def scenario(client: Any) -> Any:
        plain = client.responses.create(
            model=MODEL, input="Hello responses", instructions="Be brief."
        )
        events = list(client.responses.create(model=MODEL, input="Stream responses", stream=True))
        parsed = client.responses.parse(model=MODEL, input="Weather for Oslo", text_format=Weather)
        with client.responses.stream(
            model=MODEL, input="Weather for Lisbon", text_format=Weather
        ) as helper:
            helper_events = [e.type for e in helper]
            final = helper.get_final_response()
        return plain, events, parsed, helper_events, final

    live = record(capture, scenario)
    entries = live.bundle["llm"][MODEL]
    assert [e["output_type"] for e in entries] == ["http.response"] * 4
    assert [bool(e["output"].get("events")) for e in entries] == [False, True, False, True]
    assert entries[0]["input"]["body"] == {
        "input": "Hello responses",
        "instructions": "Be brief.",
        "model": MODEL,
    }
    assert entries[3]["input"]["body"]["text"]["format"]["name"] == "Weather"
    (plain, events, parsed, helper_events, final), rep = replay(live.bundle, scenario)
    assert isinstance(plain, Response)
    same(plain, live.value[0])
    assert [e.model_dump() for e in events] == [e.model_dump() for e in live.value[1]]
    assert (
        parsed.output_parsed == Weather(city="Oslo", temperature=3) == live.value[2].output_parsed
    )
    assert helper_events == live.value[3]
    assert final.output_parsed == live.value[4].output_parsed
    assert rep.clean


def test_async_responses_round_trip(capture: Any, instrumented: None) -> None:
    async def scenario(client: openai.AsyncOpenAI) -> Any:
        plain = await client.responses.create(model=MODEL, input="async responses")
        stream = await client.responses.create(model=MODEL, input="async stream", stream=True)
        return plain, [e async for e in stream]

    live = record(capture, scenario, client_cls=openai.AsyncOpenAI)
    (plain, events), rep = replay(live.bundle, scenario, client_cls=openai.AsyncOpenAI)
    same(plain, live.value[0])
    assert [e.model_dump() for e in events] == [e.model_dump() for e in live.value[1]]
    assert rep.clean


def test_a_retrieve_or_a_resumed_stream_is_not_a_model_call_and_is_refused(
    capture: Any, instrumented: None
) -> None:
    """Fetching a stored response, or resuming its stream (``responses.stream(response_id=)``),
    is a GET of a stored object, not a model call: under strict replay it is refused."""
    live = record(capture, lambda c: c.responses.create(model=MODEL, input="Stored"))
    (entry,) = live.bundle["llm"][MODEL]
    for later in (
        lambda c: c.responses.retrieve(live.value.id),
        lambda c: c.responses.stream(response_id=live.value.id).__enter__(),
    ):
        with pytest.raises(tracely.ReplayError, match=REFUSED):
            replay(
                {"llm": {MODEL: [entry]}},
                lambda c, later=later: (c.responses.create(model=MODEL, input="Stored"), later(c)),
            )


# --------------------------------------------------------------------------- a tool-using turn


def _tool_turns(client: Any) -> Any:
    messages: list[Any] = user("What is the weather in Paris?")
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
    call = first.choices[0].message.tool_calls[0]
    messages.append(first.choices[0].message)  # the SDK object itself, as agents do
    messages.append(
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp_c": 18})}
    )
    second = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
    return first, second


def test_a_tool_call_turn_then_the_tool_result_turn(capture: Any, instrumented: None) -> None:
    live = record(capture, _tool_turns)
    first_entry, second_entry = live.bundle["llm"][MODEL]
    assert first_entry["input"]["body"]["tools"] == [WEATHER_TOOL]
    assert second_entry["input"]["body"]["messages"][-1]["role"] == "tool"
    (first, second), rep = replay(live.bundle, _tool_turns)
    same(first, live.value[0])
    same(second, live.value[1])
    assert first.choices[0].message.tool_calls[0].function.arguments == '{"city":"Paris"}'
    assert second.choices[0].message.content == 'According to get_weather: {"temp_c": 18}'
    assert rep.clean  # the SDK message object in the second prompt compares equal on replay


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("fault", "cls"), [("429", openai.RateLimitError), ("500", openai.InternalServerError)]
)
def test_a_recorded_error_replays_as_the_sdks_exception(
    capture: Any, instrumented: None, fault: str, cls: type
) -> None:
    def scenario(client: Any) -> Any:
        try:
            client.chat.completions.create(
                model=MODEL, messages=user("x"), extra_headers={"x-test-fault": fault}
            )
        except openai.APIStatusError as exc:
            return exc
        raise AssertionError("no error")

    live = record(capture, scenario)
    assert type(live.value) is cls
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output"]["status"] == int(fault)  # the error response, as the wire carried it
    replayed, rep = replay(live.bundle, scenario)
    assert type(replayed) is cls
    assert str(replayed) == str(live.value)
    assert replayed.status_code == live.value.status_code
    assert replayed.body == live.value.body
    assert replayed.request_id == live.value.request_id
    assert rep.clean


def test_a_stream_cut_mid_way_is_recorded_as_the_calls_error(
    capture: Any, instrumented: None
) -> None:
    def scenario(client: Any) -> Any:
        try:
            stream = client.chat.completions.create(
                model=MODEL,
                messages=user("one two three four five six"),
                stream=True,
                extra_headers={"x-test-fault": "cut"},
            )
            chunks = list(stream)  # live, the cut surfaces here; replayed, at create()
        except openai.APIConnectionError as exc:
            return exc
        raise AssertionError(f"the stream was not cut: {chunks}")

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][MODEL]
    # The client's own transport error, which the SDK turns into APIConnectionError again.
    assert entry["error"]["type"] == httpx2.RemoteProtocolError.__qualname__
    replayed, rep = replay(live.bundle, scenario)
    assert type(replayed) is openai.APIConnectionError
    assert rep.clean


def test_a_recorded_answer_cut_at_the_length_limit_is_refused_by_parse_again() -> None:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "length",
                "logprobs": None,
                "message": {"role": "assistant", "content": '{"city": "Os', "refusal": None},
            }
        ],
    }
    entry = {
        "output": {"object": "chat.completion", "body": body},
        "output_type": "openai.chat.completion",
    }
    with pytest.raises(openai.LengthFinishReasonError):
        replay(
            {"llm": {MODEL: [entry]}},
            lambda c: c.chat.completions.parse(
                model=MODEL, messages=user("x"), response_format=Weather
            ),
        )


def test_a_live_non_sdk_failure_replays_as_a_recorded_llm_error(
    capture: Any, instrumented: None
) -> None:
    bundle = {
        "llm": {
            MODEL: [
                {
                    "input": {"messages": user("x")},
                    "error": {"type": "ValueError", "message": "bad", "repr": "ValueError('bad')"},
                }
            ]
        }
    }
    with pytest.raises(tracely.LLMError, match="bad") as info:
        replay(bundle, lambda c: c.chat.completions.create(model=MODEL, messages=user("x")))
    assert repr(info.value) == "ValueError('bad')"


# --------------------------------------------------------------------------- replay semantics


def test_a_changed_prompt_is_served_and_reported_as_divergence(
    capture: Any, instrumented: None
) -> None:
    live = record(
        capture, lambda c: c.chat.completions.create(model=MODEL, messages=user("Hello there"))
    )
    replayed, rep = replay(
        live.bundle,
        lambda c: c.chat.completions.create(model=MODEL, messages=user("Hello, changed")),
    )
    same(replayed, live.value)
    assert rep.diverged == [f"llm:{MODEL}"]
    assert not rep.clean


def test_a_strict_miss_raises_at_the_call_site(capture: Any, instrumented: None) -> None:
    live = record(capture, lambda c: c.chat.completions.create(model=MODEL, messages=user("once")))
    client = openai.OpenAI(api_key="test-key", base_url=closed_url("/v1"), max_retries=0)
    with tracely.fixtures(live.bundle) as rep:
        client.chat.completions.create(model=MODEL, messages=user("once"))
        with pytest.raises(tracely.ReplayError, match=f"no recorded call for llm:{MODEL}"):
            client.chat.completions.create(model=MODEL, messages=user("twice"))
    assert len(rep.errors) == 1
    with tracely.fixtures({}) as rep, pytest.raises(tracely.ReplayError):
        client.chat.completions.create(model=MODEL, messages=user("nothing recorded"))


def test_lenient_mode_falls_through_to_the_live_call(capture: Any, instrumented: None) -> None:
    with serve() as (server, _):
        client = openai.OpenAI(api_key="test-key", base_url=server.openai_base_url, max_retries=0)
        with tracely.fixtures({}, strict=False) as rep:
            live = client.chat.completions.create(model=MODEL, messages=user("fall through"))
            # The safety net lets an unpatched resource through too.
            with pytest.raises(openai.NotFoundError):
                client.moderations.create(model="omni-moderation-latest", input="x")
        assert len(server.requests) == 2
    assert live.choices[0].message.content == "You said: fall through"
    assert rep.mode == "lenient" and rep.live == [f"llm:{MODEL}"]
    (span,) = llm_spans(capture)
    assert span.attributes["tracely.replay.live"] is True


def test_a_request_that_is_no_model_call_never_reaches_the_network_in_recorded_mode() -> None:
    client = openai.OpenAI(api_key="test-key", base_url=closed_url("/v1"), max_retries=0)
    with tracely.fixtures({}) as rep, pytest.raises(tracely.ReplayError, match=REFUSED):
        client.models.list()
    assert len(rep.errors) == 1


def test_with_raw_response_and_streaming_response_are_served(
    capture: Any, instrumented: None
) -> None:
    def scenario(client: Any) -> Any:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=user("raw please")
        )
        raw_stream = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=user("raw stream"), stream=True
        )
        with client.chat.completions.with_streaming_response.create(
            model=MODEL, messages=user("streaming")
        ) as streaming:
            streamed = streaming.parse()
        return (raw.headers.get("x-request-id"), raw.parse()), list(raw_stream.parse()), streamed

    live = record(capture, scenario)
    (request_id, completion), chunks, streamed = live.value
    assert request_id == "req_000001"
    ((replayed_id, replayed), replayed_chunks, replayed_streamed), rep = replay(
        live.bundle, scenario
    )
    assert replayed_id == request_id
    same(replayed, completion)
    assert [c.model_dump() for c in replayed_chunks] == [c.model_dump() for c in chunks]
    same(replayed_streamed, streamed)
    assert rep.clean


def test_a_raw_wrapper_bound_before_anything_was_patched_is_served() -> None:
    providers.uninstrument("openai")  # as in a process that never patched
    client = openai.OpenAI(api_key="test-key", base_url=closed_url("/v1"), max_retries=0)
    stale = client.chat.completions.with_raw_response  # bound before any fixtures() block
    bundle = {"llm": {MODEL: [{"output": "Hello"}]}}
    with tracely.fixtures(bundle) as rep:
        raw = stale.create(model=MODEL, messages=user("hi"))
        assert raw.parse().choices[0].message.content == "Hello"
    assert rep.clean and not rep.errors


# --------------------------------------------------------------------------- entries tracely did not record


def test_a_hand_written_entry_is_served_as_a_completion_a_stream_and_a_response() -> None:
    bundle = {"llm": {MODEL: [{"output": "Hello", "usage": [812, 96]}] * 4}}

    def scenario(client: Any) -> Any:
        completion = client.chat.completions.create(model=MODEL, messages=user("hi"))
        chunks = list(client.chat.completions.create(model=MODEL, messages=user("hi"), stream=True))
        response = client.responses.create(model=MODEL, input="hi")
        events = list(client.responses.create(model=MODEL, input="hi", stream=True))
        return completion, chunks, response, events

    (completion, chunks, response, events), rep = replay(bundle, scenario)
    assert isinstance(completion, ChatCompletion)
    assert completion.choices[0].message.content == "Hello"
    assert completion.usage is not None and completion.usage.prompt_tokens == 812
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello"
    assert response.output_text == "Hello"
    assert events[-1].type == "response.completed"
    assert rep.served == [f"llm:{MODEL}"] * 4


def test_a_hand_written_json_answer_is_parsed_by_the_sdk() -> None:
    bundle = {"llm": {MODEL: [{"output": {"city": "Oslo", "temperature": 3}}]}}
    parsed, _ = replay(
        bundle,
        lambda c: c.chat.completions.parse(
            model=MODEL, messages=user("x"), response_format=Weather
        ),
    )
    assert parsed.choices[0].message.parsed == Weather(city="Oslo", temperature=3)


GENAI_ENTRY = {
    "input": [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}],
    "output": {
        "messages": [
            {
                "role": "assistant",
                "parts": [
                    {"type": "text", "content": "Let me check."},
                    {
                        "type": "tool_call",
                        "id": "call_1",
                        "name": "get_weather",
                        "arguments": {"city": "Paris"},
                    },
                ],
                "finish_reason": "tool_call",
            }
        ],
        "model": "gpt-4o-2024-08-06",
        "id": "chatcmpl-foreign",
    },
    "output_type": "gen_ai.messages",
    "usage": [10, 5],
    "provider": "otel-genai",
}


def test_an_entry_from_another_instrumentors_span_is_served_with_its_tool_calls() -> None:
    bundle = {"llm": {MODEL: [GENAI_ENTRY] * 4}}

    def scenario(client: Any) -> Any:
        completion = client.chat.completions.create(
            model=MODEL, messages=user("Weather in Paris?"), tools=[WEATHER_TOOL]
        )
        chunks = list(
            client.chat.completions.create(
                model=MODEL, messages=user("Weather in Paris?"), stream=True
            )
        )
        response = client.responses.create(model=MODEL, input="Weather in Paris?")
        with client.responses.stream(model=MODEL, input="Weather in Paris?") as helper:
            final = helper.get_final_response()
        return completion, chunks, response, final

    (completion, chunks, response, final), rep = replay(bundle, scenario)
    message = completion.choices[0].message
    assert (completion.id, completion.model) == ("chatcmpl-foreign", "gpt-4o-2024-08-06")
    assert message.content == "Let me check."
    assert message.tool_calls[0].function.name == "get_weather"
    assert json.loads(message.tool_calls[0].function.arguments) == {"city": "Paris"}
    assert completion.choices[0].finish_reason == "tool_calls"
    tool_deltas = [
        c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls
    ]
    assert tool_deltas[0][0].id == "call_1"
    call = next(i for i in response.output if i.type == "function_call")
    assert (call.call_id, call.name) == ("call_1", "get_weather")
    assert final.output_text == "Let me check."
    assert len(rep.served) == 4


# --------------------------------------------------------------------------- patching


def test_instrumenting_twice_wraps_the_client_once_and_leaves_the_sdk_alone() -> None:
    providers.uninstrument(["openai", "httpx2"])
    original = Completions.__dict__["create"]
    original_send = httpx2.Client.__dict__["send"]
    providers.instrument("openai")
    providers.instrument(["openai"])
    assert Completions.__dict__["create"] is original  # nothing of the SDK is patched
    wrapper = httpx2.Client.__dict__["send"]
    assert isinstance(wrapper, wrapt.FunctionWrapper)
    assert wrapper.__wrapped__ is original_send
    assert SEND in providers.patched_methods()
    providers.uninstrument("openai")
    assert httpx2.Client.__dict__["send"] is original_send
    assert SEND not in providers.patched_methods()


def test_outside_fixtures_and_instrumentation_the_patches_pass_through(capture: Any) -> None:
    providers.uninstrument(["openai", "httpx2"])
    with tracely.fixtures({}):
        pass  # the block installs the patches, which then stay
    assert SEND in providers.patched_methods()
    with serve() as (server, _):
        client = openai.OpenAI(api_key="test-key", base_url=server.openai_base_url, max_retries=0)
        assert client.chat.completions.create(model=MODEL, messages=user("plain")).choices
    assert not llm_spans(capture)


# --------------------------------------------------------------------------- other instrumentors


def _contrib() -> Any:
    contrib = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
    return contrib.OpenAIInstrumentor()


@pytest.mark.parametrize("tracely_first", [True, False])
def test_with_the_contrib_instrumentor_active_each_call_is_one_entry(
    capture: Any, tracely_first: bool
) -> None:
    contrib = _contrib()
    providers.uninstrument("openai")
    original = Completions.__dict__["create"]
    with stacked_with(contrib, "openai", tracely_outermost=not tracely_first):
        live = record(
            capture,
            lambda c: (c.chat.completions.create(model=MODEL, messages=user("hi")), _stream(c)),
        )
        names = [s.name for s in capture.spans]
        assert names.count(f"chat {MODEL}") == 4  # tracely's and the contrib's, for each call
        entries = live.bundle["llm"][MODEL]
        assert [e["output_type"] for e in entries] == ["http.response"] * 2
        assert [bool(e["output"].get("events")) for e in entries] == [False, True]
        assert "incomplete" not in live.bundle
        (completion, chunks), rep = replay(
            live.bundle,
            lambda c: (c.chat.completions.create(model=MODEL, messages=user("hi")), _stream(c)),
        )
        same(completion, live.value[0])
        assert [c.model_dump() for c in chunks] == [c.model_dump() for c in live.value[1]]
        assert rep.clean
    assert Completions.__dict__["create"] is original


def test_a_request_wrapper_of_another_instrumentor_does_not_bypass_the_network_guard() -> None:
    oi = pytest.importorskip("openinference.instrumentation.openai").OpenAIInstrumentor()
    providers.uninstrument("openai")
    oi.instrument()  # wraps OpenAI.request, around the original, before tracely patches
    try:
        client = openai.OpenAI(api_key="test-key", base_url=closed_url("/v1"), max_retries=0)
        with (
            tracely.fixtures({}),
            pytest.raises(tracely.ReplayError, match=REFUSED),
        ):
            client.models.list()
    finally:
        oi.uninstrument()
        providers.uninstrument("openai")
    with tracely.fixtures({}), pytest.raises(tracely.ReplayError, match=REFUSED):
        client.models.list()


def test_a_prompt_cache_key_made_per_run_is_no_part_of_the_compared_input(
    capture: Any, instrumented: None
) -> None:
    # The OpenAI Agents SDK sends "agents-sdk:run:<id>", a new id each run.
    def asked(key: str) -> Scenario:
        return lambda c: c.chat.completions.create(
            model=MODEL, messages=user("cache me"), prompt_cache_key=key
        )

    live = record(capture, asked("run-1"))
    (entry,) = live.bundle["llm"][MODEL]
    assert "prompt_cache_key" not in entry["input"]["body"]
    replayed, rep = replay(live.bundle, asked("run-2"))
    same(replayed, live.value)
    assert rep.clean and rep.diverged == []
