"""The Anthropic SDK, recorded and served at its HTTP client: record live with the real SDK, stop
the server, replay with no network.

As for OpenAI: each test records against a fresh local server inside an agent run, takes the
bundle the real FixtureSpanProcessor extracted, stops the server and replays against a closed
port. The session's global tracer provider is set, so the anthropic SDK makes its own
``anthropic.messages.create`` spans live, as it does in an instrumented application.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest
import wrapt
from anthropic.resources.messages.messages import AsyncMessages, Messages
from anthropic.types import Message, RawMessageStreamEvent
from opentelemetry.trace import SpanKind

import tracely_sdk as tracely
from examples.llm_server import serve
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
from tracely_sdk import providers

MODEL = "claude-sonnet-4-5"
SEND = "httpx2.Client.send"
TOOL: Any = {
    "name": "get_weather",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


Scenario = Callable[[Any], Any]


class Live:
    def __init__(self, value: Any, bundle: dict[str, Any]) -> None:
        self.value = value
        self.bundle = json.loads(json.dumps(bundle))


def record(capture: Any, scenario: Scenario, *, client_cls: Any = anthropic.Anthropic) -> Live:
    with serve() as (server, _):
        client = client_cls(api_key="test-key", base_url=server.anthropic_base_url, max_retries=0)
        with tracely.agent("agent", input="q"):
            value = run(scenario(client))
    return Live(value, capture.last_bundle)


def replay(
    bundle: Any, scenario: Scenario, *, client_cls: Any = anthropic.Anthropic, strict: bool = True
) -> tuple[Any, tracely.ReplayReport]:
    client = client_cls(api_key="test-key", base_url=closed_url(), max_retries=0)
    with tracely.fixtures(bundle, strict=strict) as rep:
        value = run(scenario(client))
    return value, rep


instrumented = instrumented_fixture("anthropic")


def _create(client: Any, text: str = "Hello there", **kwargs: Any) -> Any:
    return client.messages.create(model=MODEL, max_tokens=256, messages=user(text), **kwargs)


# --------------------------------------------------------------------------- plain calls


def test_a_message_is_recorded_and_replayed_as_the_sdk_type(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, lambda c: _create(c, system="Be brief."))
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output_type"] == "http.response"
    assert entry["input"]["path"].endswith("/v1/messages")
    assert entry["input"]["body"] == {
        "max_tokens": 256,
        "messages": user("Hello there"),
        "model": MODEL,
        "system": "Be brief.",
    }
    assert entry["provider"] == SEND
    replayed, rep = replay(live.bundle, lambda c: _create(c, system="Be brief."))
    assert isinstance(replayed, Message)
    same(replayed, live.value)
    assert replayed.content[0].text == "You said: Hello there"
    assert replayed._request_id == live.value._request_id
    assert rep.clean and SEND in rep.providers


def test_a_message_is_recorded_as_the_response_the_server_sent(
    capture: Any, instrumented: None
) -> None:
    live = record(
        capture,
        lambda c: c.messages.with_raw_response.create(
            model=MODEL, max_tokens=256, messages=user("Hello there")
        ),
    )
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output"]["status"] == 200
    assert entry["output"]["body"] == json.loads(live.value.http_response.content)


def test_tracelys_span_is_a_child_of_the_sdks_own_and_makes_no_second_entry(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, lambda c: (_create(c), list(_create(c, "stream it", stream=True))))
    ours = llm_spans(capture)
    sdk = [s for s in capture.spans if s.name == "anthropic.messages.create"]
    assert len(ours) == 2 and len(sdk) == 2
    # Recorded at the client beneath the SDK: inside the SDK's own span.
    assert {s.parent.span_id for s in ours} == {s.context.span_id for s in sdk}
    assert len(live.bundle["llm"][MODEL]) == 2 and "incomplete" not in live.bundle
    attrs = ours[0].attributes
    assert ours[0].name == f"chat {MODEL}" and ours[0].kind is SpanKind.CLIENT
    assert attrs["gen_ai.provider.name"] == "anthropic"
    assert attrs["gen_ai.response.id"] == "msg_000001"
    assert attrs["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert attrs["gen_ai.request.max_tokens"] == 256
    # Replayed calls are served beneath the SDK too: still one tracely span per call.
    capture.exporter.clear()
    replay(live.bundle, lambda c: (_create(c), list(_create(c, "stream it", stream=True))))
    assert len(llm_spans(capture)) == 2


def test_captured_content_follows_the_genai_conventions(
    capture: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with capturing_content(monkeypatch, "anthropic"):
        record(capture, lambda c: _create(c, "Weather in Oslo?", system="Be brief.", tools=[TOOL]))
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
                    "id": "toolu_000001",
                    "name": "get_weather",
                    "arguments": {"city": "Oslo"},
                }
            ],
            "finish_reason": "tool_call",
        }
    ]


def test_an_async_message_round_trips(capture: Any, instrumented: None) -> None:
    async def scenario(client: anthropic.AsyncAnthropic) -> Any:
        return await client.messages.create(model=MODEL, max_tokens=64, messages=user("async"))

    live = record(capture, scenario, client_cls=anthropic.AsyncAnthropic)
    replayed, rep = replay(live.bundle, scenario, client_cls=anthropic.AsyncAnthropic)
    same(replayed, live.value)
    assert rep.clean


# --------------------------------------------------------------------------- streams


def test_a_stream_keeps_its_event_names_and_replays_as_the_sdk_stream(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, lambda c: list(_create(c, "stream these words", stream=True)))
    (entry,) = live.bundle["llm"][MODEL]
    assert entry["output_type"] == "http.response"
    names = [event["event"] for event in entry["output"]["events"]]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    seen: list[Any] = []

    def scenario(client: Any) -> list[Any]:
        stream = _create(client, "stream these words", stream=True)
        seen.append(stream)
        with stream:
            return list(stream)

    replayed, rep = replay(live.bundle, scenario)
    assert isinstance(seen[0], anthropic.Stream)
    assert [e.model_dump() for e in replayed] == [e.model_dump() for e in live.value]
    assert rep.clean


def test_a_stream_is_recorded_as_the_events_the_server_sent(
    capture: Any, instrumented: None
) -> None:
    async def scenario(client: anthropic.AsyncAnthropic) -> list[Any]:
        stream = await _create(client, "stream these words", stream=True)
        return [event async for event in stream]

    live = record(capture, scenario, client_cls=anthropic.AsyncAnthropic)
    (entry,) = live.bundle["llm"][MODEL]
    events = [e for e in entry["output"]["events"] if e["event"] != "ping"]
    assert len(events) == len(live.value)
    assert [e["event"] for e in events] == [e.type for e in live.value]
    assert [e["data"]["type"] for e in events] == [e.type for e in live.value]


def test_the_stream_helper_replays_text_stream_and_final_message(
    capture: Any, instrumented: None
) -> None:
    def scenario(client: Any) -> Any:
        with client.messages.stream(
            model=MODEL, max_tokens=64, messages=user("helper words")
        ) as stream:
            texts = list(stream.text_stream)
            return texts, stream.get_final_message(), stream.get_final_text()

    live = record(capture, scenario)
    assert live.bundle["llm"][MODEL][0]["provider"] == SEND
    (texts, final, text), rep = replay(live.bundle, scenario)
    assert texts == live.value[0] and text == live.value[2] == "You said: helper words"
    same(final, live.value[1])
    assert rep.clean


def test_the_async_stream_helper_round_trips(capture: Any, instrumented: None) -> None:
    async def scenario(client: anthropic.AsyncAnthropic) -> Any:
        async with client.messages.stream(
            model=MODEL, max_tokens=64, messages=user("async helper")
        ) as stream:
            events = [event.type async for event in stream]
            return events, await stream.get_final_message()

    live = record(capture, scenario, client_cls=anthropic.AsyncAnthropic)
    (events, final), rep = replay(live.bundle, scenario, client_cls=anthropic.AsyncAnthropic)
    assert events == live.value[0]
    same(final, live.value[1])
    assert rep.clean


def test_a_stream_manager_never_entered_makes_no_call(capture: Any, instrumented: None) -> None:
    with serve() as (server, _):
        client = anthropic.Anthropic(
            api_key="test-key", base_url=server.anthropic_base_url, max_retries=0
        )
        client.messages.stream(model=MODEL, max_tokens=64, messages=user("never entered"))
        assert not server.requests
    assert not llm_spans(capture)


def test_a_replayed_stream_the_agent_never_reads_is_closed_when_the_block_ends(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, lambda c: list(_create(c, "unread", stream=True)))
    client = anthropic.Anthropic(api_key="test-key", base_url=closed_url(), max_retries=0)
    with tracely.fixtures(live.bundle):
        stream = _create(client, "unread", stream=True)
        assert not stream.response.is_closed
    assert stream.response.is_closed


# --------------------------------------------------------------------------- parse, tools, raw


def test_parse_replays_the_parsed_message(capture: Any, instrumented: None) -> None:
    def scenario(client: Any) -> Any:
        return client.messages.parse(
            model=MODEL, max_tokens=64, messages=user("Weather for Oslo"), output_format=Weather
        )

    live = record(capture, scenario)
    sent = live.bundle["llm"][MODEL][0]["input"]["body"]
    assert sent["output_config"]["format"]["type"] == "json_schema"
    replayed, rep = replay(live.bundle, scenario)
    assert type(replayed) is type(live.value)
    assert replayed.parsed_output == live.value.parsed_output == Weather(city="Oslo", temperature=3)
    assert rep.clean


def _tool_turns(client: Any) -> Any:
    messages: list[Any] = user("What is the weather in Lisbon?")
    first = client.messages.create(model=MODEL, max_tokens=256, messages=messages, tools=[TOOL])
    call = next(block for block in first.content if block.type == "tool_use")
    messages.append({"role": "assistant", "content": first.content})  # the SDK's blocks
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": '{"temp_c": 24}'}
            ],
        }
    )
    second = client.messages.create(model=MODEL, max_tokens=256, messages=messages, tools=[TOOL])
    return first, second


def test_a_tool_use_turn_then_the_tool_result_turn(capture: Any, instrumented: None) -> None:
    live = record(capture, _tool_turns)
    (first, second), rep = replay(live.bundle, _tool_turns)
    same(first, live.value[0])
    same(second, live.value[1])
    assert first.stop_reason == "tool_use" and first.content[0].input == {"city": "Lisbon"}
    assert second.content[0].text == 'According to get_weather: {"temp_c": 24}'
    assert rep.clean


@pytest.mark.parametrize(
    ("fault", "cls"), [("429", anthropic.RateLimitError), ("500", anthropic.InternalServerError)]
)
def test_a_recorded_error_replays_as_the_sdks_exception(
    capture: Any, instrumented: None, fault: str, cls: type
) -> None:
    def scenario(client: Any) -> Any:
        try:
            _create(client, "x", extra_headers={"x-test-fault": fault})
        except anthropic.APIStatusError as exc:
            return exc
        raise AssertionError("no error")

    live = record(capture, scenario)
    assert type(live.value) is cls
    replayed, rep = replay(live.bundle, scenario)
    assert type(replayed) is cls
    assert (str(replayed), replayed.status_code, replayed.body) == (
        str(live.value),
        live.value.status_code,
        live.value.body,
    )
    assert rep.clean


def test_with_raw_response_is_served(capture: Any, instrumented: None) -> None:
    def scenario(client: Any) -> Any:
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, messages=user("raw")
        )
        with client.messages.with_streaming_response.create(
            model=MODEL, max_tokens=64, messages=user("raw stream"), stream=True
        ) as streaming:
            events = list(streaming.parse())
        return raw.headers.get("request-id"), raw.parse(), events

    live = record(capture, scenario)
    (request_id, message, events), rep = replay(live.bundle, scenario)
    assert request_id == live.value[0] == "req_000001"
    same(message, live.value[1])
    assert [e.model_dump() for e in events] == [e.model_dump() for e in live.value[2]]
    assert rep.clean


def test_a_raw_wrapper_bound_before_anything_was_patched_is_served() -> None:
    providers.uninstrument("anthropic")
    client = anthropic.Anthropic(api_key="test-key", base_url=closed_url(), max_retries=0)
    stale = client.messages.with_raw_response
    with tracely.fixtures({"llm": {MODEL: [{"output": "Hello"}]}}) as rep:
        raw = stale.create(model=MODEL, max_tokens=64, messages=user("hi"))
        assert raw.parse().content[0].text == "Hello"
        # Not a model call, and never live in recorded mode: the SDK wraps the refusal in its
        # own connection error; the report keeps it.
        with pytest.raises(anthropic.APIConnectionError):
            client.messages.count_tokens(model=MODEL, messages=user("hi"))
    (refused,) = rep.errors
    assert "strict replay refused a connection" in str(refused)


# --------------------------------------------------------------------------- replay semantics


def test_divergence_strict_miss_and_lenient(capture: Any, instrumented: None) -> None:
    live = record(capture, lambda c: _create(c, "the prompt"))
    replayed, rep = replay(live.bundle, lambda c: _create(c, "a changed prompt"))
    same(replayed, live.value)
    assert rep.diverged == [f"llm:{MODEL}"]
    client = anthropic.Anthropic(api_key="test-key", base_url=closed_url(), max_retries=0)
    with tracely.fixtures(live.bundle) as rep:
        _create(client, "the prompt")
        # Refused at the client: the SDK wraps the ReplayError in its own connection error.
        with pytest.raises(anthropic.APIConnectionError) as miss:
            _create(client, "one call too many")
        assert isinstance(miss.value.__cause__, tracely.ReplayError)
        with pytest.raises(anthropic.APIConnectionError):
            client.messages.stream(
                model=MODEL, max_tokens=64, messages=user("nor a stream")
            ).__enter__()
    assert len(rep.errors) == 2
    with serve() as (server, _):
        client = anthropic.Anthropic(
            api_key="test-key", base_url=server.anthropic_base_url, max_retries=0
        )
        with tracely.fixtures({}, strict=False) as rep:
            assert _create(client, "live").content[0].text == "You said: live"
        assert len(server.requests) == 1
    assert rep.live == [f"llm:{MODEL}"]


def test_hand_written_and_foreign_entries_are_served_as_messages_and_streams() -> None:
    foreign = {
        "output": {
            "messages": [
                {
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool_call",
                            "id": "toolu_x",
                            "name": "get_weather",
                            "arguments": {"city": "Oslo"},
                        }
                    ],
                    "finish_reason": "tool_call",
                }
            ],
            "model": "claude-3-5-sonnet",
            "id": "msg_foreign",
        },
        "output_type": "gen_ai.messages",
        "usage": [9, 4],
    }
    bundle = {
        "llm": {
            MODEL: [{"output": "Hello", "usage": [3, 1]}, {"output": "Hello"}, foreign, foreign]
        }
    }

    def scenario(client: Any) -> Any:
        text = _create(client, "hi")
        with client.messages.stream(model=MODEL, max_tokens=64, messages=user("hi")) as stream:
            streamed = stream.get_final_text()
        tool = _create(client, "weather", tools=[TOOL])
        events = list(_create(client, "weather", tools=[TOOL], stream=True))
        return text, streamed, tool, events

    (text, streamed, tool, events), rep = replay(bundle, scenario)
    assert isinstance(text, Message) and text.content[0].text == "Hello"
    assert (text.usage.input_tokens, text.usage.output_tokens) == (3, 1)
    assert streamed == "Hello"
    assert (tool.id, tool.model, tool.stop_reason) == (
        "msg_foreign",
        "claude-3-5-sonnet",
        "tool_use",
    )
    assert tool.content[0].type == "tool_use" and tool.content[0].input == {"city": "Oslo"}
    assert all(isinstance(e, RawMessageStreamEvent.__args__) for e in events)  # type: ignore[attr-defined]
    assert len(rep.served) == 4


# --------------------------------------------------------------------------- patching


def test_instrumenting_twice_wraps_the_client_once_and_leaves_the_sdk_alone() -> None:
    providers.uninstrument(["anthropic", "httpx2"])
    originals = {name: Messages.__dict__[name] for name in ("create", "stream", "parse")}
    async_create = AsyncMessages.__dict__["create"]
    send = httpx2.AsyncClient.__dict__["send"]
    providers.instrument("anthropic")
    providers.instrument("anthropic")
    assert {name: Messages.__dict__[name] for name in originals} == originals
    assert AsyncMessages.__dict__["create"] is async_create
    wrapper = httpx2.AsyncClient.__dict__["send"]
    assert isinstance(wrapper, wrapt.FunctionWrapper) and wrapper.__wrapped__ is send
    providers.uninstrument("anthropic")
    assert httpx2.AsyncClient.__dict__["send"] is send


@pytest.mark.parametrize("tracely_outermost", [True, False], ids=["tracely-outer", "other-outer"])
def test_with_another_instrumentor_active_each_call_is_one_entry(
    capture: Any, tracely_outermost: bool
) -> None:
    """OpenLLMetry's span is not made current: with it outermost, tracely's span of the same
    call is its sibling, and the two are still one entry."""
    module = pytest.importorskip("opentelemetry.instrumentation.anthropic")
    other = module.AnthropicInstrumentor()
    with stacked_with(other, "anthropic", tracely_outermost=tracely_outermost):
        live = record(capture, lambda c: (_create(c), list(_create(c, "streamed", stream=True))))
        spans = [s for s in capture.spans if s.name.startswith("anthropic.chat")]
        assert len(spans) == 2  # the other instrumentor recorded both calls too
        assert "incomplete" not in live.bundle
        assert [e["provider"] for e in live.bundle["llm"][MODEL]] == [SEND] * 2
        (message, events), rep = replay(
            live.bundle, lambda c: (_create(c), list(_create(c, "streamed", stream=True)))
        )
        same(message, live.value[0])
        assert [e.model_dump() for e in events] == [e.model_dump() for e in live.value[1]]
        assert rep.clean
