"""The Anthropic codec: record live results from the real SDK, stop the server, rebuild, compare.

The live half runs once per module against the local LLM server. Every recording goes through
``json.dumps``/``json.loads`` so that only plain JSON survives, then the server is stopped, and the
rebuilding half runs with the network closed (any send raises).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.resources.messages import Messages
from anthropic.types import Message, ParsedMessage, RawMessageStartEvent
from hypothesis import given as given_
from hypothesis import settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from examples.llm_server import serve
from tests.sdk.providers._helpers import FORMS, Weather, given, plain, rebuilt_alike, user
from tests.sdk.providers._helpers import same_model as same
from tracely_sdk.providers import _anthropic_codec as codec

CLAUDE = "claude-sonnet-4-5"
TOOL: Any = {
    "name": "get_weather",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


class Live:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.recorded: dict[str, Any] = {}
        self.base_url = ""

    def keep(self, name: str, value: Any, recording: Any) -> None:
        self.values[name] = value
        self.recorded[name] = plain(recording)


def record_live() -> Live:
    live = Live()
    with serve() as (server, _):
        live.base_url = server.anthropic_base_url
        client = anthropic.Anthropic(
            api_key="test-key", base_url=server.anthropic_base_url, max_retries=0
        )

        message = client.messages.create(model=CLAUDE, max_tokens=64, messages=user("Hi Claude"))
        live.keep("message", message, codec.record_response(message))

        tool_use = client.messages.create(
            model=CLAUDE, max_tokens=64, messages=user("Weather in Berlin?"), tools=[TOOL]
        )
        live.keep("tool_use", tool_use, codec.record_response(tool_use))

        parsed = client.messages.parse(
            model=CLAUDE, max_tokens=64, messages=user("Weather for Oslo"), output_format=Weather
        )
        live.keep("parsed", parsed, codec.record_response(parsed))

        events = list(
            client.messages.create(
                model=CLAUDE,
                max_tokens=64,
                stream=True,
                messages=user("stream " + " ".join(f"w{i}" for i in range(42))),
            )
        )
        live.keep("stream", events, [codec.record_chunk(e) for e in events])

        # The helper, recorded from the raw events it was made from.
        with client.messages.stream(
            model=CLAUDE, max_tokens=64, messages=user("Hi streaming Claude")
        ) as helper:
            helper_events = list(helper)
            final = helper.get_final_message()
        raw = [
            e
            for e in helper_events
            if e.type not in ("text", "citation", "thinking", "signature", "input_json")
        ]
        live.keep(
            "helper",
            (helper_events, final),
            [codec.record_chunk(e) for e in raw],
        )

        with client.messages.stream(
            model=CLAUDE, max_tokens=64, messages=user("Weather in Berlin?"), tools=[TOOL]
        ) as helper:
            tool_events = list(helper)
            tool_final = helper.get_final_message()
        raw_tool = [e for e in tool_events if e.type not in ("text", "input_json")]
        live.keep(
            "tool_helper", (tool_events, tool_final), [codec.record_chunk(e) for e in raw_tool]
        )

        raw_response = client.messages.with_raw_response.create(
            model=CLAUDE, max_tokens=64, messages=user("raw Claude")
        )
        raw_parsed = raw_response.parse()
        live.keep(
            "raw",
            (raw_response, raw_parsed),
            {
                "result": codec.record_response(raw_parsed),
                "headers": codec.record_headers(raw_response.headers),
            },
        )

        for fault in ("429", "500", "cut"):
            try:
                client.messages.create(
                    model=CLAUDE,
                    max_tokens=8,
                    messages=user("x"),
                    extra_headers={"x-test-fault": fault},
                )
            except anthropic.APIError as error:
                live.keep(f"error_{fault}", error, codec.record_error(error))

        async def run_async() -> None:
            aclient = anthropic.AsyncAnthropic(
                api_key="test-key", base_url=server.anthropic_base_url, max_retries=0
            )
            try:
                async with aclient.messages.stream(
                    model=CLAUDE, max_tokens=64, messages=user("async Claude")
                ) as s:
                    texts = [t async for t in s.text_stream]
                    final = await s.get_final_message()
                stream = await aclient.messages.create(
                    model=CLAUDE, max_tokens=64, messages=user("async Claude"), stream=True
                )
                aevents = [e async for e in stream]
                live.keep(
                    "async", (aevents, texts, final), [codec.record_chunk(e) for e in aevents]
                )
            finally:
                await aclient.close()

        asyncio.run(run_async())
        client.close()
    return live


@pytest.fixture(scope="module")
def live() -> Live:
    return record_live()


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a replayed object tried to use the network")

    monkeypatch.setattr(httpx2.Client, "send", refuse)
    monkeypatch.setattr(httpx2.AsyncClient, "send", refuse)


@pytest.fixture
def client(live: Live, offline: None) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        api_key="test-key", base_url=live.base_url, max_retries=0
    ) as replay_client:
        yield replay_client


@pytest.fixture
def aclient(live: Live, offline: None) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key="test-key", base_url=live.base_url, max_retries=0)


def test_server_is_gone(live: Live) -> None:
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(live.base_url)


# --------------------------------------------------------------------------------------------- recordings


def test_recordings_are_plain_wire_json(live: Live) -> None:
    recorded = live.recorded["message"]
    assert recorded == {
        "object": "message",
        "body": live.values["message"].to_dict(mode="json"),
        "request_id": live.values["message"]._request_id,
    }
    names = [c["event"] for c in live.recorded["stream"]]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    assert all(c["event"] == c["data"]["type"] for c in live.recorded["stream"])
    # The SDK drops pings before anything can record them.
    assert "ping" not in names


def test_record_headers_keeps_only_safe_ones() -> None:
    kept = codec.record_headers(
        {
            "request-id": "req_1",
            "anthropic-organization-id": "org_1",
            "anthropic-workspace-id": "ws_1",
            "anthropic-ratelimit-requests-remaining": "9",
            "x-api-key": "secret",
        }
    )
    assert kept == {"request-id": "req_1", "anthropic-ratelimit-requests-remaining": "9"}


def test_a_body_seen_on_the_wire_is_recorded_as_is(live: Live) -> None:
    message = live.values["message"]
    wire = {"id": message.id, "type": "message", "from": "the server"}
    assert codec.record_response(message, wire)["body"] is wire
    # A body of another kind is not this object's: the object is dumped instead.
    dumped = codec.record_response(message, {"type": "error"})
    assert dumped == codec.record_response(message)
    assert dumped["body"]["id"] == message.id


def test_an_event_seen_on_the_wire_is_recorded_as_is(live: Live) -> None:
    event = live.values["stream"][0]
    wire = {"type": event.type, "from": "the server"}
    assert codec.record_chunk(event, wire) == {"event": event.type, "data": wire}
    assert codec.record_chunk(event, wire)["data"] is wire
    # Data of another type is not this event's: the event is dumped instead.
    assert codec.record_chunk(event, {"type": "ping"}) == codec.record_chunk(event)
    assert codec.record_chunk(event)["data"]["type"] == event.type


def test_record_rejects_what_it_cannot_rebuild() -> None:
    with pytest.raises(TypeError):
        codec.record_response({"type": "message"})
    with pytest.raises(TypeError):
        codec.record_chunk(Weather(city="x", temperature=1))


# --------------------------------------------------------------------------------------------- messages


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", ["message", "tool_use"])
def test_message_round_trip(live: Live, offline: None, name: str, form: str) -> None:
    rebuilt = codec.rebuild_response("message", given(live.recorded[name], form))
    same(rebuilt, live.values[name])
    assert type(rebuilt) is Message
    assert rebuilt._request_id == live.values[name]._request_id


def test_tool_use_input_is_an_object(live: Live, offline: None) -> None:
    [block] = codec.rebuild_response("message", live.recorded["tool_use"]).content
    assert block.type == "tool_use"
    assert block.input == {"city": "Berlin"}


@pytest.mark.parametrize("form", FORMS)
def test_parsed_message_round_trip(live: Live, offline: None, form: str) -> None:
    rebuilt = codec.rebuild_response(
        "message.parsed", given(live.recorded["parsed"], form), output_format=Weather
    )
    original = live.values["parsed"]
    same(rebuilt, original)
    assert isinstance(rebuilt, ParsedMessage)
    # `parsed_output` is excluded from dumps, so compare it on its own.
    assert rebuilt.parsed_output == original.parsed_output == Weather(city="Oslo", temperature=3)
    assert type(rebuilt.parsed_output) is Weather
    assert codec.rebuild_response("message.parsed", live.recorded["parsed"]).parsed_output is None


@pytest.mark.parametrize("form", FORMS)
def test_rebuild_checks_the_recording(live: Live, form: str) -> None:
    with pytest.raises(ValueError, match="not a 'message'"):
        codec.rebuild_response("message", given({"object": "chat.completion", "body": {}}, form))
    with pytest.raises(ValueError, match="has no body"):
        codec.rebuild_response("message", given({"object": "message"}, form))
    mislabelled = {**live.recorded["message"], "object": "chat.completion"}
    with pytest.raises(ValueError, match="not a 'message'"):
        codec.rebuild_response("message", given(mislabelled, form))
    with pytest.raises(ValueError):
        codec.rebuild_response("completion", given(live.recorded["message"], form))  # type: ignore[call-overload]


def test_a_recording_the_schema_no_longer_accepts_is_built_as_the_sdk_would_live(
    live: Live,
) -> None:
    recorded = json.loads(json.dumps(live.recorded["message"]))
    recorded["body"]["stop_reason"] = "a_reason_from_the_future"
    rebuilt = codec.rebuild_response("message", given(recorded, "json"))
    assert type(rebuilt) is Message
    assert rebuilt.stop_reason == "a_reason_from_the_future"


# --------------------------------------------------------------------------------------------- streams


def test_raw_stream_round_trip(live: Live, client: anthropic.Anthropic) -> None:
    stream = codec.rebuild_stream("message", live.recorded["stream"], client=client)
    assert type(stream) is anthropic.Stream
    rebuilt = list(stream)
    for a, b in zip(rebuilt, live.values["stream"], strict=True):
        same(a, b)
    assert type(rebuilt[0]) is RawMessageStartEvent


def test_stream_pieces_are_named_events(live: Live) -> None:
    recorded = live.recorded["stream"]
    pieces = codec.sse_pieces("message", recorded)
    assert len(pieces) == len(recorded)
    for piece, chunk in zip(pieces, recorded, strict=True):
        assert piece.startswith(f"event: {chunk['event']}\ndata: {{".encode())
        assert piece.endswith(b"\n\n")
    with pytest.raises(ValueError):
        codec.sse_pieces("message", [{"event": None, "data": {}}])


def test_message_stream_manager_round_trip(live: Live, client: anthropic.Anthropic) -> None:
    live_events, live_final = live.values["helper"]
    manager = codec.rebuild_message_stream_manager(live.recorded["helper"], client=client)
    assert type(manager) is anthropic.MessageStreamManager
    with manager as stream:
        events = list(stream)
    assert [e.type for e in events] == [e.type for e in live_events]
    for a, b in zip(events, live_events, strict=True):
        assert a.model_dump(warnings=False) == b.model_dump(warnings=False)
    same(stream.get_final_message(), live_final)
    assert stream.request_id == "req_000005" or stream.request_id is None

    with codec.rebuild_message_stream_manager(live.recorded["helper"], client=client) as again:
        texts = list(again.text_stream)
        assert texts == [e.text for e in live_events if e.type == "text"]
        assert again.get_final_text() == live_final.content[0].text
        same(again.get_final_message(), live_final)


def test_message_stream_manager_with_tool_use(live: Live, client: anthropic.Anthropic) -> None:
    _, live_final = live.values["tool_helper"]
    with codec.rebuild_message_stream_manager(
        live.recorded["tool_helper"], client=client
    ) as stream:  # type: ignore[union-attr]
        final = stream.get_final_message()
    same(final, live_final)
    assert final.content[0].input == {"city": "Berlin"}  # type: ignore[union-attr]


def test_async_stream_and_manager_round_trip(live: Live, aclient: anthropic.AsyncAnthropic) -> None:
    live_events, live_texts, live_final = live.values["async"]

    async def run() -> tuple[list[Any], list[str], Any]:
        try:
            stream = codec.rebuild_stream("message", live.recorded["async"], client=aclient)
            assert type(stream) is anthropic.AsyncStream
            events = [e async for e in stream]
            manager = codec.rebuild_message_stream_manager(live.recorded["async"], client=aclient)
            assert type(manager) is anthropic.AsyncMessageStreamManager
            async with manager as s:  # type: ignore[union-attr]
                texts = [t async for t in s.text_stream]
                final = await s.get_final_message()
            return events, texts, final
        finally:
            await aclient.close()

    events, texts, final = asyncio.run(run())
    for a, b in zip(events, live_events, strict=True):
        same(a, b)
    assert texts == live_texts
    # The helper's message and the raw stream's came from two calls: compare what does not carry an id.
    assert final.content == live_final.content and final.usage == live_final.usage


# --------------------------------------------------------------------------------------------- raw responses


def test_raw_response_round_trip(
    live: Live, client: anthropic.Anthropic, aclient: anthropic.AsyncAnthropic
) -> None:
    live_raw, live_parsed = live.values["raw"]
    recorded = live.recorded["raw"]
    raw = codec.rebuild_raw_response(
        "message", recorded["result"], client=client, headers=recorded["headers"]
    )
    assert type(raw) is type(live_raw) is anthropic.APIResponse
    assert isinstance(raw.http_response, httpx2.Response)
    assert raw.status_code == 200
    assert raw.request_id == live_raw.request_id
    assert raw.headers["request-id"] == live_raw.headers["request-id"]
    same(raw.parse(), live_parsed)
    assert raw.parse()._request_id == live_parsed._request_id
    assert json.loads(raw.text()) == recorded["result"]["body"]

    async def run() -> Any:
        try:
            araw = codec.rebuild_raw_response("message", recorded["result"], client=aclient)
            assert type(araw) is anthropic.AsyncAPIResponse
            return await araw.parse()
        finally:
            await aclient.close()

    same(asyncio.run(run()), live_parsed)


def test_raw_streamed_and_parsed_responses(live: Live, client: anthropic.Anthropic) -> None:
    raw = codec.rebuild_raw_response("message", client=client, chunks=live.recorded["stream"])
    stream = raw.parse()
    assert type(stream) is anthropic.Stream
    for a, b in zip(stream, live.values["stream"], strict=True):
        same(a, b)
    parsed = codec.rebuild_raw_response(
        "message.parsed", live.recorded["parsed"], client=client, output_format=Weather
    ).parse()
    same(parsed, live.values["parsed"])
    assert parsed.parsed_output == Weather(city="Oslo", temperature=3)


def test_raw_response_mode_reads_the_wrappers_header() -> None:
    assert codec.raw_response_mode({"X-Stainless-Raw-Response": "raw"}) == "raw"
    assert codec.raw_response_mode({"X-Stainless-Raw-Response": "stream"}) == "stream"
    assert codec.raw_response_mode({}) is None


# --------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("fault", ["429", "500"])
def test_error_round_trip(live: Live, offline: None, fault: str) -> None:
    original = live.values[f"error_{fault}"]
    recorded = live.recorded[f"error_{fault}"]
    assert recorded["status"] == int(fault)
    rebuilt = codec.error_for_status(recorded["status"], recorded["body"], recorded["headers"])
    assert type(rebuilt) is type(original)
    assert rebuilt.status_code == original.status_code
    assert str(rebuilt) == str(original)
    assert rebuilt.body == original.body
    assert rebuilt.type == original.type
    assert rebuilt.api_message == original.api_message
    assert rebuilt.request_id == original.request_id
    assert type(codec.rebuild_error(recorded)) is type(original)


def test_connection_failure_round_trip(live: Live, offline: None) -> None:
    original = live.values["error_cut"]
    rebuilt = codec.rebuild_error(live.recorded["error_cut"])
    assert type(rebuilt) is type(original) is anthropic.APIConnectionError
    assert type(codec.rebuild_error({"status": None, "timeout": True})) is anthropic.APITimeoutError


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, anthropic.BadRequestError),
        (401, anthropic.AuthenticationError),
        (403, anthropic.PermissionDeniedError),
        (404, anthropic.NotFoundError),
        (409, anthropic.ConflictError),
        (422, anthropic.UnprocessableEntityError),
        (429, anthropic.RateLimitError),
        (500, anthropic.InternalServerError),
        (418, anthropic.APIStatusError),
        # The SDK's own status-level classes: subclasses of what the base table gives.
        (529, anthropic.OverloadedError),
        (503, anthropic.ServiceUnavailableError),
        (402, anthropic.PaymentRequiredError),
    ],
)
def test_error_class_comes_from_the_status_table(status: int, expected: type[Exception]) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    error = codec.error_for_status(status, body, {"request-id": "req_9"})
    assert type(error) is expected
    assert error.status_code == status and error.request_id == "req_9"
    assert isinstance(
        error, anthropic.InternalServerError if status >= 500 else anthropic.APIStatusError
    )
    live = _made_live(status, body, {"request-id": "req_9"})
    assert (type(error), str(error), error.body) == (type(live), str(live), live.body)


def _made_live(status: int, body: Any, headers: dict[str, str]) -> anthropic.APIStatusError:
    """The error the installed SDK's client makes of that response, as it does live."""
    client = anthropic.Anthropic(api_key="test", base_url="https://api.anthropic.com")
    response = codec.http_response(status=status, body=body, headers=headers)
    return client._make_status_error_from_response(response)


def test_error_class_follows_the_sdk_not_the_recording() -> None:
    # An SDK that narrows a class by `error.details.error_code` does so from its own fixed table,
    # live and on replay alike; an error code it does not know gives the status-level class.
    body = {
        "type": "error",
        "error": {
            "type": "not_found_error",
            "message": "x",
            "details": {"error_code": "file_expired"},
        },
    }
    error = codec.error_for_status(404, body, {})
    assert type(error) is type(_made_live(404, body, {}))
    assert isinstance(error, anthropic.NotFoundError)
    body["error"]["details"] = {"error_code": "anthropic.Anthropic"}
    assert type(codec.error_for_status(404, body, {})) is anthropic.NotFoundError


# --------------------------------------------------------------------------------------------- plain text entries


def test_recording_from_text(client: anthropic.Anthropic) -> None:
    message = codec.rebuild_response(
        "message", codec.recording_from_text("Hello", model=CLAUDE, usage=(812, 96))
    )
    assert type(message) is Message
    assert message.content[0].text == "Hello"  # type: ignore[union-attr]
    assert (message.usage.input_tokens, message.usage.output_tokens) == (812, 96)
    chunks = codec.chunks_from_text("one two three", model=CLAUDE, usage=(3, 3))
    with codec.rebuild_message_stream_manager(chunks, client=client) as stream:  # type: ignore[union-attr]
        assert list(stream.text_stream) == ["one", " two", " three"]
        assert stream.get_final_message().usage.output_tokens == 3


# --------------------------------------------------------------------------------------------- how the SDK binds


def test_stream_and_parse_do_not_go_through_create(
    monkeypatch: pytest.MonkeyPatch, live: Live, offline: None
) -> None:
    """``messages.stream`` and ``messages.parse`` post by themselves: patching ``Messages.create`` alone
    leaves them live. ``with_raw_response`` binds ``create`` on first access, like openai's."""
    calls: list[dict[str, Any]] = []

    def spy(self: Messages, **kwargs: Any) -> str:
        calls.append(kwargs)
        return "patched"

    early = anthropic.Anthropic(api_key="k", base_url=live.base_url, max_retries=0)
    bound_before = early.messages.with_raw_response
    monkeypatch.setattr(Messages, "create", spy)
    client = anthropic.Anthropic(api_key="k", base_url=live.base_url, max_retries=0)
    assert client.messages.create(model=CLAUDE, max_tokens=1, messages=[]) == "patched"
    assert (
        client.messages.with_raw_response.create(model=CLAUDE, max_tokens=1, messages=[])
        == "patched"
    )
    assert codec.raw_response_mode(calls[-1]["extra_headers"]) == "raw"
    # anthropic wraps whatever the transport raises in APIConnectionError; the cause is the closed network.
    went_live = []
    for attempt in (
        lambda: bound_before.create(model=CLAUDE, max_tokens=1, messages=[]),
        lambda: client.messages.stream(model=CLAUDE, max_tokens=1, messages=user("x")).__enter__(),
        lambda: client.messages.parse(
            model=CLAUDE, max_tokens=1, messages=user("x"), output_format=Weather
        ),
    ):
        with pytest.raises(anthropic.APIConnectionError) as caught:
            attempt()
        went_live.append("network" in str(caught.value.__cause__))
    assert went_live == [True, True, True]
    assert len(calls) == 2
    early.close()
    client.close()


def test_the_sdk_span_wraps_the_http_call_and_replay_makes_none(live: Live) -> None:
    """anthropic 2.x starts its own CLIENT span, ``anthropic.messages.create``, in ``SyncAPIClient.request``
    (below ``Messages.create``); a replayed object never reaches it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with serve() as (server, _):
        client = anthropic.Anthropic(
            api_key="k",
            base_url=server.anthropic_base_url,
            max_retries=0,
            open_telemetry={"tracer_provider": provider},
        )
        client.messages.create(model=CLAUDE, max_tokens=64, messages=user("traced"))
        with client.messages.stream(
            model=CLAUDE, max_tokens=64, messages=user("traced stream")
        ) as stream:
            stream.until_done()
        traceparents = [r.headers.get("traceparent") for r in server.requests]
        off = anthropic.Anthropic(
            api_key="k", base_url=server.anthropic_base_url, max_retries=0, open_telemetry=False
        )
        off.messages.create(model=CLAUDE, max_tokens=64, messages=user("untraced"))
        untraced = server.requests[-1].headers.get("traceparent")
        off.close()
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["anthropic.messages.create", "anthropic.messages.create"]
    first, streamed = spans
    assert first.kind is SpanKind.CLIENT
    attributes = dict(first.attributes or {})
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == CLAUDE
    assert attributes["gen_ai.response.id"] == "msg_000001"
    assert attributes["gen_ai.usage.output_tokens"] == 3
    assert attributes["http.response.status_code"] == 200
    assert attributes["anthropic.request.id"] == "req_000001"
    assert dict(streamed.attributes or {})["gen_ai.request.stream"] is True
    # The SDK propagates its span's context to the server, unless its spans are off.
    assert all(
        t and t.split("-")[2] in (f"{s.context.span_id:016x}" for s in spans) for t in traceparents
    )
    assert untraced is None

    exporter.clear()
    with codec.rebuild_message_stream_manager(live.recorded["helper"], client=client) as replayed:  # type: ignore[union-attr]
        replayed.until_done()
    codec.rebuild_response("message", live.recorded["message"])
    assert exporter.get_finished_spans() == ()
    client.close()


def test_replay_through_a_bedrock_client(offline: None) -> None:
    """Bedrock's client decodes AWS event-stream framing; a replayed stream is standard SSE whatever the client."""
    # The Bedrock client needs botocore: the dev extras install it, a lighter install skips here.
    pytest.importorskip("botocore", reason="anthropic's Bedrock client needs botocore")
    bedrock = anthropic.AnthropicBedrock(
        aws_region="us-east-1", aws_access_key="a", aws_secret_key="b"
    )
    chunks = codec.chunks_from_text("from bedrock", model=CLAUDE)
    with codec.rebuild_message_stream_manager(chunks, client=bedrock) as stream:  # type: ignore[union-attr]
        assert list(stream.text_stream) == ["from", " bedrock"]
    with pytest.raises(TypeError):
        codec.rebuild_stream("message", chunks, client=object())  # type: ignore[call-overload]


# --------------------------------------------------------------------------------------------- both forms agree

_texts = st.text(max_size=40)
_blocks = st.lists(
    st.one_of(
        st.builds(lambda text: {"type": "text", "text": text}, _texts),
        st.builds(
            lambda id_, name, input_: {
                "type": "tool_use",
                "id": id_,
                "name": name,
                "input": input_,
            },
            _texts,
            _texts,
            st.dictionaries(_texts, st.none() | _texts | st.integers(), max_size=3),
        ),
    ),
    max_size=3,
)
_bodies = st.builds(
    lambda id_, content, stop, usage: {
        "id": id_,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    },
    _texts,
    _blocks,
    st.none() | st.sampled_from(["end_turn", "max_tokens", "tool_use"]) | _texts,
    st.fixed_dictionaries(
        {"input_tokens": st.integers(0, 10**6), "output_tokens": st.integers(0, 10**6)}
    ),
)


@settings(max_examples=150, deadline=None)
@given_(body=_bodies, request_id=st.none() | _texts | st.integers())
def test_a_recording_rebuilds_alike_from_its_json_text_and_its_mapping(
    body: dict[str, Any], request_id: Any
) -> None:
    rebuilt_alike(codec, "message", {"object": "message", "body": body, "request_id": request_id})
