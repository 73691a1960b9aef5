"""The OpenAI codec: record live results from the real SDK, stop the server, rebuild, compare.

The live half runs once per module against the local LLM server. Every recording goes through
``json.dumps``/``json.loads`` so that only plain JSON survives, then the server is stopped, and the
rebuilding half runs with the network closed (any send raises).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import given as given_
from hypothesis import settings
from hypothesis import strategies as st
from openai._legacy_response import LegacyAPIResponse
from openai.resources.chat.completions import Completions
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ParsedChatCompletion
from openai.types.responses import ParsedResponse, Response

from examples.llm_server import serve
from tests.sdk.providers._helpers import FORMS, Weather, given, plain, rebuilt_alike, user
from tests.sdk.providers._helpers import same_model as same
from tracely_sdk.providers import _openai_codec as codec

ROOT = Path(__file__).resolve().parents[3]

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


class Live:
    """What the live half saw (``values``) and recorded (``recorded``)."""

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
        live.base_url = server.openai_base_url
        client = openai.OpenAI(api_key="test-key", base_url=server.openai_base_url, max_retries=0)

        completion = client.chat.completions.create(model="gpt-4o", messages=user("Hello there"))
        live.keep("chat", completion, codec.record_response(completion))

        tool_call = client.chat.completions.create(
            model="gpt-4o", messages=user("Weather in Paris?"), tools=[WEATHER_TOOL]
        )
        live.keep("chat_tool", tool_call, codec.record_response(tool_call))

        parsed = client.chat.completions.parse(
            model="gpt-4o", messages=user("Weather for Oslo"), response_format=Weather
        )
        live.keep("chat_parsed", parsed, codec.record_response(parsed))

        chunks = list(
            client.chat.completions.create(
                model="gpt-4o",
                messages=user("stream " + " ".join(f"w{i}" for i in range(44))),
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        live.keep("chat_stream", chunks, [codec.record_chunk(c) for c in chunks])

        with client.chat.completions.stream(
            model="gpt-4o", messages=user("Weather for Oslo"), response_format=Weather
        ) as helper:
            events = list(helper)
            final = helper.get_final_completion()
        raw_chunks = [e.chunk for e in events if e.type == "chunk"]
        live.keep("chat_helper", (events, final), [codec.record_chunk(c) for c in raw_chunks])

        tool_chunks = list(
            client.chat.completions.create(
                model="gpt-4o",
                messages=user("Weather in Lisbon?"),
                tools=[WEATHER_TOOL],
                stream=True,
            )
        )
        live.keep("chat_tool_stream", tool_chunks, [codec.record_chunk(c) for c in tool_chunks])

        response = client.responses.create(model="gpt-4o", input="Hello responses")
        live.keep("response", response, codec.record_response(response))

        response_parsed = client.responses.parse(
            model="gpt-4o", input="Weather for Oslo", text_format=Weather
        )
        live.keep("response_parsed", response_parsed, codec.record_response(response_parsed))

        response_events = list(
            client.responses.create(model="gpt-4o", input="Stream responses", stream=True)
        )
        live.keep(
            "response_stream", response_events, [codec.record_chunk(e) for e in response_events]
        )

        with client.responses.stream(
            model="gpt-4o", input="Weather for Oslo", text_format=Weather
        ) as helper:
            helper_events = list(helper)
            helper_final = helper.get_final_response()
        live.keep(
            "response_helper",
            (helper_events, helper_final),
            # The helper's events are its own; a recording keeps what came off the wire.
            None,
        )

        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=user("raw please")
        )
        raw_parsed = raw.parse()
        live.keep(
            "chat_raw",
            (raw, raw_parsed),
            {
                "result": codec.record_response(raw_parsed),
                "headers": codec.record_headers(raw.headers),
            },
        )

        raw_stream = client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=user("raw stream"), stream=True
        )
        raw_stream_chunks = list(raw_stream.parse())
        live.keep(
            "chat_raw_stream",
            (raw_stream, raw_stream_chunks),
            {
                "chunks": [codec.record_chunk(c) for c in raw_stream_chunks],
                "headers": codec.record_headers(raw_stream.headers),
            },
        )

        with client.chat.completions.with_streaming_response.create(
            model="gpt-4o", messages=user("streaming response")
        ) as streaming:
            streaming_parsed = streaming.parse()
            live.keep(
                "chat_streaming_response",
                (streaming, streaming_parsed),
                {
                    "result": codec.record_response(streaming_parsed),
                    "headers": codec.record_headers(streaming.headers),
                },
            )

        for fault in ("429", "500", "cut"):
            try:
                client.chat.completions.create(
                    model="gpt-4o", messages=user("x"), extra_headers={"x-test-fault": fault}
                )
            except openai.APIError as error:
                live.keep(f"error_{fault}", error, codec.record_error(error))

        async def run_async() -> None:
            async with openai.AsyncOpenAI(
                api_key="test-key", base_url=server.openai_base_url, max_retries=0
            ) as aclient:
                stream = await aclient.chat.completions.create(
                    model="gpt-4o", messages=user("async stream"), stream=True
                )
                achunks = [c async for c in stream]
                live.keep("chat_async_stream", achunks, [codec.record_chunk(c) for c in achunks])
                events = [
                    e
                    async for e in await aclient.responses.create(
                        model="gpt-4o", input="async", stream=True
                    )
                ]
                live.keep("response_async_stream", events, [codec.record_chunk(e) for e in events])

        asyncio.run(run_async())
        client.close()
        live.values["requests"] = len(server.requests)
    return live


@pytest.fixture(scope="module")
def live() -> Live:
    return record_live()


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No HTTP request can be sent while rebuilding."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a replayed object tried to use the network")

    monkeypatch.setattr(httpx2.Client, "send", refuse)
    monkeypatch.setattr(httpx2.AsyncClient, "send", refuse)


@pytest.fixture
def client(live: Live, offline: None) -> Iterator[openai.OpenAI]:
    # Pointed at the stopped server: nothing listens there any more.
    with openai.OpenAI(api_key="test-key", base_url=live.base_url, max_retries=0) as replay_client:
        yield replay_client


@pytest.fixture
def aclient(live: Live, offline: None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="test-key", base_url=live.base_url, max_retries=0)


def test_server_is_gone(live: Live) -> None:
    assert live.values["requests"] >= 15
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(live.base_url)


def test_importing_the_codec_imports_no_sdk() -> None:
    code = (
        "import sys; import tracely_sdk.providers._openai_codec; "
        "import tracely_sdk.providers._anthropic_codec; "
        "print(sorted(m for m in ('openai', 'anthropic', 'httpx2', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------------------------- recordings


def test_recordings_are_plain_wire_json(live: Live) -> None:
    recorded = live.recorded["chat"]
    assert recorded["object"] == "chat.completion"
    assert recorded["request_id"] == live.values["chat"]._request_id
    assert recorded["body"] == live.values["chat"].to_dict(mode="json")
    # Only what the API sent: no fields the model merely defaults.
    assert "metadata" not in recorded["body"]
    chunk = live.recorded["chat_stream"][0]
    assert chunk == {"event": None, "data": live.values["chat_stream"][0].to_dict(mode="json")}
    event = live.recorded["response_stream"][0]
    assert event["event"] == "response.created" == event["data"]["type"]


def test_a_parsed_result_is_recorded_as_the_completion_the_api_sent(live: Live) -> None:
    message = live.recorded["chat_parsed"]["body"]["choices"][0]["message"]
    assert "parsed" not in message
    assert json.loads(message["content"]) == {"city": "Oslo", "temperature": 3}
    output = live.recorded["response_parsed"]["body"]["output"][0]["content"][0]
    assert "parsed" not in output


def test_a_body_seen_on_the_wire_is_recorded_as_is(live: Live) -> None:
    completion = live.values["chat"]
    wire = {"id": completion.id, "object": "chat.completion", "from": "the server"}
    assert codec.record_response(completion, wire)["body"] is wire
    # A body of another kind is not this object's: the object is dumped instead.
    dumped = codec.record_response(completion, {"object": "response"})
    assert dumped == codec.record_response(completion)
    assert dumped["body"]["id"] == completion.id


def test_a_chunk_or_event_seen_on_the_wire_is_recorded_as_is(live: Live) -> None:
    chunk = live.values["chat_stream"][0]
    wire = {"id": chunk.id, "object": "chat.completion.chunk", "from": "the server"}
    assert codec.record_chunk(chunk, wire) == {"event": None, "data": wire}
    assert codec.record_chunk(chunk, wire)["data"] is wire
    event = live.values["response_stream"][0]
    wire = {"type": event.type, "from": "the server"}
    assert codec.record_chunk(event, wire) == {"event": event.type, "data": wire}
    # Data of another kind is not this item's: the item is dumped instead.
    assert codec.record_chunk(chunk, {"object": "chat.completion"}) == codec.record_chunk(chunk)
    assert codec.record_chunk(event, {"type": "response.other"}) == codec.record_chunk(event)
    assert codec.record_chunk(event)["data"]["type"] == event.type


def test_record_rejects_what_it_cannot_rebuild() -> None:
    with pytest.raises(TypeError):
        codec.record_response({"object": "chat.completion"})
    with pytest.raises(TypeError):
        codec.record_chunk(Weather(city="x", temperature=1))


def test_record_headers_keeps_only_safe_ones() -> None:
    kept = codec.record_headers(
        {
            "X-Request-ID": "req_1",
            "openai-organization": "acme",
            "openai-project": "proj_1",
            "set-cookie": "a=b",
            "x-ratelimit-remaining-requests": "9",
            "retry-after": "2",
        }
    )
    assert kept == {
        "x-request-id": "req_1",
        "x-ratelimit-remaining-requests": "9",
        "retry-after": "2",
    }


# --------------------------------------------------------------------------------------------- responses


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", ["chat", "chat_tool"])
def test_chat_completion_round_trip(live: Live, offline: None, name: str, form: str) -> None:
    rebuilt = codec.rebuild_response("chat.completion", given(live.recorded[name], form))
    same(rebuilt, live.values[name])
    assert rebuilt._request_id == live.values[name]._request_id


@pytest.mark.parametrize("form", FORMS)
def test_tool_call_arguments_stay_json_text(live: Live, offline: None, form: str) -> None:
    rebuilt = codec.rebuild_response("chat.completion", given(live.recorded["chat_tool"], form))
    [call] = rebuilt.choices[0].message.tool_calls or []
    assert call.type == "function"
    assert call.function.arguments == '{"city":"Paris"}'


@pytest.mark.parametrize("form", FORMS)
def test_parsed_chat_completion_round_trip(live: Live, offline: None, form: str) -> None:
    rebuilt = codec.rebuild_response(
        "chat.completion.parsed", given(live.recorded["chat_parsed"], form), response_format=Weather
    )
    original = live.values["chat_parsed"]
    same(rebuilt, original)
    assert isinstance(rebuilt, ParsedChatCompletion)
    assert rebuilt.choices[0].message.parsed == Weather(city="Oslo", temperature=3)
    assert type(rebuilt.choices[0].message.parsed) is Weather
    # Without the response format nothing is parsed, as the SDK would do.
    unparsed = codec.rebuild_response("chat.completion.parsed", live.recorded["chat_parsed"])
    assert unparsed.choices[0].message.parsed is None


@pytest.mark.parametrize("form", FORMS)
def test_response_round_trip(live: Live, offline: None, form: str) -> None:
    rebuilt = codec.rebuild_response("response", given(live.recorded["response"], form))
    same(rebuilt, live.values["response"])
    assert rebuilt.output_text == "You said: Hello responses"


@pytest.mark.parametrize("form", FORMS)
def test_parsed_response_round_trip(live: Live, offline: None, form: str) -> None:
    rebuilt = codec.rebuild_response(
        "response.parsed", given(live.recorded["response_parsed"], form), text_format=Weather
    )
    same(rebuilt, live.values["response_parsed"])
    assert isinstance(rebuilt, ParsedResponse)
    assert (
        rebuilt.output_parsed
        == live.values["response_parsed"].output_parsed
        == Weather(city="Oslo", temperature=3)
    )


@pytest.mark.parametrize("form", FORMS)
def test_rebuild_checks_the_recording_against_the_kind(live: Live, form: str) -> None:
    with pytest.raises(ValueError, match="not a 'response'"):
        codec.rebuild_response("response", given(live.recorded["chat"], form))
    with pytest.raises(ValueError, match="has no body"):
        codec.rebuild_response("chat.completion", given({"object": "chat.completion"}, form))
    mislabelled = {**live.recorded["chat"], "object": "response"}
    with pytest.raises(ValueError, match=r"not a 'chat\.completion'"):
        codec.rebuild_response("chat.completion", given(mislabelled, form))
    with pytest.raises(ValueError):
        codec.rebuild_response("embedding", given(live.recorded["chat"], form))  # type: ignore[call-overload]


@pytest.mark.parametrize("form", FORMS)
def test_a_recording_the_schema_no_longer_accepts_is_built_as_the_sdk_would_live(
    live: Live, form: str
) -> None:
    recorded = json.loads(json.dumps(live.recorded["chat"]))
    recorded["body"]["choices"][0]["finish_reason"] = "a_reason_from_the_future"
    rebuilt = codec.rebuild_response("chat.completion", given(recorded, form))
    assert type(rebuilt) is ChatCompletion
    assert rebuilt.choices[0].finish_reason == "a_reason_from_the_future"
    assert rebuilt._request_id == live.values["chat"]._request_id


def test_a_served_response_is_a_fresh_object_each_time(live: Live) -> None:
    text = given(live.recorded["chat"], "json")
    first = codec.rebuild_response("chat.completion", text)
    first.choices[0].message.content = "changed by the agent"
    assert codec.rebuild_response("chat.completion", text).choices[0].message.content != (
        "changed by the agent"
    )


# --------------------------------------------------------------------------------------------- streams


@pytest.mark.parametrize("name", ["chat_stream", "chat_tool_stream"])
def test_chat_stream_round_trip(live: Live, client: openai.OpenAI, name: str) -> None:
    stream = codec.rebuild_stream("chat.completion", live.recorded[name], client=client)
    assert type(stream) is openai.Stream
    rebuilt = list(stream)
    original = live.values[name]
    assert len(rebuilt) == len(original)
    for a, b in zip(rebuilt, original, strict=True):
        same(a, b)
    assert type(rebuilt[0]) is ChatCompletionChunk
    assert stream.response.is_closed


def test_stream_chunk_boundaries_are_kept(live: Live, client: openai.OpenAI) -> None:
    recorded = live.recorded["chat_stream"]
    pieces = codec.sse_pieces("chat.completion", recorded)
    assert len(pieces) == len(recorded) + 1
    assert pieces[-1] == b"data: [DONE]\n\n"
    assert all(p.startswith(b"data: {") and p.endswith(b"\n\n") for p in pieces[:-1])
    stream = codec.rebuild_stream("chat.completion", recorded, client=client)
    assert list(stream.response.stream) == pieces  # type: ignore[call-overload]
    events = codec.sse_pieces("response", live.recorded["response_stream"])
    assert events[0].startswith(b"event: response.created\ndata: {")


def test_chat_stream_async_round_trip(live: Live, aclient: openai.AsyncOpenAI) -> None:
    async def run() -> list[Any]:
        async with aclient:
            stream = codec.rebuild_stream(
                "chat.completion", live.recorded["chat_async_stream"], client=aclient
            )
            assert type(stream) is openai.AsyncStream
            return [c async for c in stream]

    rebuilt = asyncio.run(run())
    for a, b in zip(rebuilt, live.values["chat_async_stream"], strict=True):
        same(a, b)


def test_chat_stream_manager_round_trip(live: Live, client: openai.OpenAI) -> None:
    live_events, live_final = live.values["chat_helper"]
    manager = codec.rebuild_chat_stream_manager(
        live.recorded["chat_helper"], client=client, response_format=Weather
    )
    assert type(manager).__name__ == "ChatCompletionStreamManager"
    with manager as stream:
        events = list(stream)
        final = stream.get_final_completion()
    assert [e.type for e in events] == [e.type for e in live_events]
    for a, b in zip(events, live_events, strict=True):
        assert a.model_dump(warnings=False) == b.model_dump(warnings=False)
    same(final, live_final)
    assert final.choices[0].message.parsed == Weather(city="Oslo", temperature=3)


def test_chat_stream_manager_async_with_tools(live: Live, aclient: openai.AsyncOpenAI) -> None:
    async def run() -> Any:
        async with aclient:
            manager = codec.rebuild_chat_stream_manager(
                live.recorded["chat_tool_stream"], client=aclient, input_tools=[WEATHER_TOOL]
            )
            async with manager as stream:  # type: ignore[union-attr]
                return await stream.get_final_completion()

    final = asyncio.run(run())
    [call] = final.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"city": "Lisbon"}


def test_response_stream_round_trip(live: Live, client: openai.OpenAI) -> None:
    stream = codec.rebuild_stream("response", live.recorded["response_stream"], client=client)
    rebuilt = list(stream)
    for a, b in zip(rebuilt, live.values["response_stream"], strict=True):
        same(a, b)


def test_response_stream_async_round_trip(live: Live, aclient: openai.AsyncOpenAI) -> None:
    async def run() -> list[Any]:
        async with aclient:
            return [
                e
                async for e in codec.rebuild_stream(
                    "response", live.recorded["response_async_stream"], client=aclient
                )
            ]

    for a, b in zip(asyncio.run(run()), live.values["response_async_stream"], strict=True):
        same(a, b)


def test_responses_stream_manager_round_trip(live: Live, client: openai.OpenAI) -> None:
    # The helper's final response is made from the wire events: replay them through the SDK's own helper.
    manager = codec.rebuild_responses_stream_manager(
        live.recorded["response_stream"], client=client
    )
    with manager as stream:  # type: ignore[union-attr]
        events = list(stream)
        final = stream.get_final_response()
    assert final.output_text == "You said: Stream responses"
    assert final.id == live.values["response_stream"][-1].response.id
    assert [e.type for e in events] == [e.type for e in live.values["response_stream"]]


# --------------------------------------------------------------------------------------------- raw responses


def test_raw_response_round_trip(live: Live, client: openai.OpenAI) -> None:
    live_raw, live_parsed = live.values["chat_raw"]
    recorded = live.recorded["chat_raw"]
    raw = codec.rebuild_raw_response(
        "chat.completion", recorded["result"], client=client, headers=recorded["headers"]
    )
    assert type(raw) is type(live_raw) is LegacyAPIResponse
    assert isinstance(raw.http_response, httpx2.Response)
    assert raw.status_code == live_raw.status_code == 200
    assert raw.headers["x-request-id"] == live_raw.headers["x-request-id"]
    assert raw.request_id == live_raw.request_id
    assert raw.headers["content-type"] == "application/json"
    assert raw.http_request.method == "POST"
    assert str(raw.url).endswith("/v1/chat/completions")
    parsed = raw.parse()
    same(parsed, live_parsed)
    assert parsed._request_id == live_parsed._request_id
    assert raw.parse() is parsed
    assert json.loads(raw.text) == recorded["result"]["body"]
    assert raw.elapsed.total_seconds() == 0


def test_raw_streamed_response_round_trip(live: Live, client: openai.OpenAI) -> None:
    live_raw, live_chunks = live.values["chat_raw_stream"]
    recorded = live.recorded["chat_raw_stream"]
    raw = codec.rebuild_raw_response(
        "chat.completion", client=client, chunks=recorded["chunks"], headers=recorded["headers"]
    )
    assert type(raw) is type(live_raw) is LegacyAPIResponse
    assert raw.headers["content-type"].startswith("text/event-stream")
    stream = raw.parse()
    assert type(stream) is openai.Stream
    for a, b in zip(stream, live_chunks, strict=True):
        same(a, b)


def test_with_streaming_response_round_trip(
    live: Live, client: openai.OpenAI, aclient: openai.AsyncOpenAI
) -> None:
    live_response, live_parsed = live.values["chat_streaming_response"]
    recorded = live.recorded["chat_streaming_response"]
    raw = codec.rebuild_raw_response(
        "chat.completion",
        recorded["result"],
        client=client,
        mode="stream",
        headers=recorded["headers"],
    )
    assert type(raw) is type(live_response) is openai.APIResponse
    same(raw.parse(), live_parsed)
    assert raw.read() == raw.http_response.content

    async def run() -> Any:
        async with aclient:
            araw = codec.rebuild_raw_response(
                "chat.completion", recorded["result"], client=aclient, mode="stream"
            )
            assert type(araw) is openai.AsyncAPIResponse
            return await araw.parse()

    same(asyncio.run(run()), live_parsed)


def test_raw_parsed_response_applies_the_parser(live: Live, client: openai.OpenAI) -> None:
    raw = codec.rebuild_raw_response(
        "chat.completion.parsed",
        live.recorded["chat_parsed"],
        client=client,
        response_format=Weather,
    )
    parsed = raw.parse()
    same(parsed, live.values["chat_parsed"])


def test_raw_response_mode_reads_the_wrappers_header() -> None:
    assert codec.raw_response_mode({"X-Stainless-Raw-Response": "true"}) == "raw"
    assert codec.raw_response_mode({"x-stainless-raw-response": "stream"}) == "stream"
    assert codec.raw_response_mode({"other": "x"}) is None
    assert codec.raw_response_mode(None) is None


# --------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("fault", ["429", "500"])
def test_error_round_trip(live: Live, offline: None, fault: str) -> None:
    original = live.values[f"error_{fault}"]
    recorded = live.recorded[f"error_{fault}"]
    assert recorded["status"] == int(fault)
    assert recorded["type"] == type(original).__name__
    rebuilt = codec.error_for_status(recorded["status"], recorded["body"], recorded["headers"])
    assert type(rebuilt) is type(original)
    assert rebuilt.status_code == original.status_code
    assert str(rebuilt) == str(original)
    assert rebuilt.message == original.message
    assert rebuilt.body == original.body
    assert rebuilt.code == original.code and rebuilt.type == original.type
    assert rebuilt.request_id == original.request_id
    assert rebuilt.response.status_code == int(fault)
    assert type(codec.rebuild_error(recorded)) is type(original)
    if fault == "429":
        assert rebuilt.response.headers["retry-after"] == "1"


def test_connection_failure_round_trip(live: Live, offline: None) -> None:
    original = live.values["error_cut"]
    recorded = live.recorded["error_cut"]
    assert recorded["status"] is None and recorded["timeout"] is False
    rebuilt = codec.rebuild_error(recorded)
    assert type(rebuilt) is type(original) is openai.APIConnectionError
    assert str(rebuilt) == str(original)
    assert type(codec.rebuild_error({"status": None, "timeout": True})) is openai.APITimeoutError


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (403, openai.PermissionDeniedError),
        (404, openai.NotFoundError),
        (409, openai.ConflictError),
        (422, openai.UnprocessableEntityError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
        (418, openai.APIStatusError),
        (402, openai.APIStatusError),
    ],
)
def test_error_class_comes_from_the_status_table(status: int, expected: type[Exception]) -> None:
    body = {"error": {"message": "boom", "type": "NotFoundError", "code": None}}
    error = codec.error_for_status(status, body, {"x-request-id": "req_9"})
    assert type(error) is expected
    assert error.status_code == status
    assert error.request_id == "req_9"
    assert str(error) == f"Error code: {status} - boom"


def test_error_for_status_with_a_text_body() -> None:
    error = codec.error_for_status(502, "Bad gateway", {})
    assert type(error) is openai.InternalServerError
    assert error.body == "Bad gateway" and str(error) == "Error code: 502"
    with pytest.raises(ValueError):
        codec.error_for_status(200, {}, {})


# --------------------------------------------------------------------------------------------- plain text entries


def test_recording_from_text(client: openai.OpenAI) -> None:
    completion = codec.rebuild_response(
        "chat.completion",
        codec.recording_from_text("chat.completion", "Hello", model="gpt-4o", usage=(812, 96)),
    )
    assert type(completion) is ChatCompletion
    assert completion.choices[0].message.content == "Hello"
    assert completion.usage is not None and completion.usage.total_tokens == 908
    response = codec.rebuild_response(
        "response", codec.recording_from_text("response", "Hi there", model="gpt-4o", usage=(1, 2))
    )
    assert type(response) is Response and response.output_text == "Hi there"
    chunks = codec.chunks_from_text(
        "chat.completion", "one two three", model="gpt-4o", usage=(3, 3)
    )
    streamed = list(codec.rebuild_stream("chat.completion", chunks, client=client))
    assert (
        "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == "one two three"
    )
    assert streamed[-1].usage is not None and streamed[-1].usage.total_tokens == 6


# --------------------------------------------------------------------------------------------- how the SDK binds


def test_with_raw_response_binds_create_when_first_used(
    monkeypatch: pytest.MonkeyPatch, live: Live, offline: None
) -> None:
    """``with_raw_response`` is a ``cached_property`` per resource that captures the bound ``create`` on first
    access: a class patch is seen through it only if the wrapper is made after the patch."""
    seen: list[dict[str, Any]] = []

    class Patched:
        def close(self) -> None:
            pass

    patched = Patched()

    def spy(self: Completions, **kwargs: Any) -> Patched:
        seen.append(kwargs)
        return patched

    early = openai.OpenAI(api_key="k", base_url=live.base_url, max_retries=0)
    bound_before = early.chat.completions.with_raw_response
    monkeypatch.setattr(Completions, "create", spy)
    late = openai.OpenAI(api_key="k", base_url=live.base_url, max_retries=0)

    assert late.chat.completions.create(model="m", messages=[]) is patched
    assert late.chat.completions.with_raw_response.create(model="m", messages=[]) is patched
    assert codec.raw_response_mode(seen[-1]["extra_headers"]) == "raw"
    with late.chat.completions.with_streaming_response.create(model="m", messages=[]) as value:
        assert value is patched
    assert codec.raw_response_mode(seen[-1]["extra_headers"]) == "stream"
    # `.stream()` calls `create` late, through the instance: it sees the patch.
    manager = late.chat.completions.stream(model="m", messages=[])
    assert manager._ChatCompletionStreamManager__api_request() is patched  # type: ignore[attr-defined]

    # The wrapper made before the patch still holds the original method, and would go to the network.
    with pytest.raises(AssertionError, match="network"):
        bound_before.create(model="m", messages=[])
    assert len(seen) == 4
    early.close()
    late.close()


def test_parse_does_not_go_through_create(
    monkeypatch: pytest.MonkeyPatch, live: Live, offline: None
) -> None:
    monkeypatch.setattr(
        Completions, "create", lambda self, **kwargs: pytest.fail("parse called create")
    )
    client = openai.OpenAI(api_key="k", base_url=live.base_url, max_retries=0)
    # It posts by itself (and here meets the closed network instead of the patch).
    with pytest.raises(AssertionError, match="network"):
        client.chat.completions.parse(model="m", messages=user("x"), response_format=Weather)
    client.close()


def test_replay_through_an_azure_client(offline: None) -> None:
    azure = openai.AzureOpenAI(
        api_key="k", api_version="2024-10-21", azure_endpoint="https://x.openai.azure.com"
    )
    chunks = codec.chunks_from_text("chat.completion", "from azure", model="gpt-4o")
    streamed = codec.rebuild_stream("chat.completion", chunks, client=azure)
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == "from azure"
    with pytest.raises(TypeError):
        codec.rebuild_stream("chat.completion", chunks, client=object())  # type: ignore[call-overload]
    azure.close()


# --------------------------------------------------------------------------------------------- both forms agree

_texts = st.text(max_size=40)
_finish = st.sampled_from(["stop", "length", "tool_calls", "content_filter"]) | _texts
_tool_calls = st.lists(
    st.fixed_dictionaries(
        {
            "id": _texts,
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": _texts, "arguments": _texts}),
        }
    ),
    max_size=2,
)
_choices = st.lists(
    st.builds(
        lambda index, text, calls, finish: {
            "index": index,
            "finish_reason": finish,
            "logprobs": None,
            "message": {"role": "assistant", "content": text, "tool_calls": calls or None},
        },
        st.integers(0, 3),
        st.none() | _texts,
        _tool_calls,
        _finish,
    ),
    max_size=3,
)
_bodies = st.builds(
    lambda id_, choices, created, usage, extra: {
        "id": id_,
        "object": "chat.completion",
        "created": created,
        "model": "gpt-4o",
        "choices": choices,
        "usage": usage,
        **extra,
    },
    _texts,
    _choices,
    st.integers(0, 2**40) | st.floats(allow_nan=False, allow_infinity=False),
    st.none()
    | st.fixed_dictionaries(
        {"prompt_tokens": st.integers(0, 10**6), "completion_tokens": st.integers(0, 10**6)}
    ),
    st.dictionaries(st.sampled_from(["service_tier", "x_extra"]), st.none() | _texts, max_size=2),
)


@settings(max_examples=150, deadline=None)
@given_(body=_bodies, request_id=st.none() | _texts | st.integers())
def test_a_recording_rebuilds_alike_from_its_json_text_and_its_mapping(
    body: dict[str, Any], request_id: Any
) -> None:
    rebuilt_alike(
        codec,
        "chat.completion",
        {"object": "chat.completion", "body": body, "request_id": request_id},
    )
