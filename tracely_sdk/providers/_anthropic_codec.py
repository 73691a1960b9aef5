"""Recorded JSON to and from Anthropic SDK objects: pure functions, with no patching and no network.

Importing this module imports neither ``anthropic`` nor ``httpx2``; each function imports what it needs.

What a recording holds (all plain JSON)::

    record_response(message)    -> {"object": "message", "body": {...}, "request_id": "req_..."}
    record_chunk(event[, wire]) -> {"event": "content_block_delta", "data": {...}}
    record_error(exc)           -> {"type": "RateLimitError", "message": "...", "status": 429,
                                    "body": {"type": "error", "error": {...}}, "headers": {"retry-after": "1"},
                                    "timeout": False}

``body`` and ``data`` are the objects as the API sent them (``to_dict()``), and a chunk keeps the name of
the server-sent event that carried it, so a stream is replayed as the same sequence of named events (the
SDK itself drops ``ping`` events, so a recording never has them). ``type`` is for people reading the
recording: nothing here chooses a class from anything in a recording. The caller says what to rebuild,
and errors are classed by status code from a fixed table.

Rebuilding::

    rebuild_response("message", recorded)                                  -> Message
    rebuild_response("message.parsed", recorded, output_format=Model)      -> ParsedMessage[Model]
    rebuild_stream("message", chunks, client=client)                       -> Stream / AsyncStream[RawMessageStreamEvent]
    rebuild_message_stream_manager(chunks, client=client, output_format=)  -> (Async)MessageStreamManager
    rebuild_raw_response("message", recorded, client=client)               -> APIResponse / AsyncAPIResponse
    error_for_status(529, body, headers)                                   -> anthropic.OverloadedError

A replayed stream is the SDK's own ``Stream``/``AsyncStream`` over an in-memory ``httpx2.Response`` whose body
is the recorded events serialised back to server-sent events, one body piece per event, so the SDK's own
decoder builds the events and ``messages.stream()``'s ``text_stream`` / ``get_final_message()`` run unchanged.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from tracely_otel.genai import OutputMessage, content_parts, genai_finish_reason
from tracely_sdk.providers import _wire
from tracely_sdk.providers._patching import Reply, json_text, json_value, pieces

if TYPE_CHECKING:
    import httpx2
    from anthropic import Anthropic, AsyncAnthropic
    from anthropic._exceptions import APIError, APIStatusError
    from anthropic._response import APIResponse, AsyncAPIResponse
    from anthropic.lib.streaming import AsyncMessageStreamManager, MessageStreamManager
    from anthropic.types import Message, ParsedMessage

ResponseKind = Literal["message", "message.parsed"]
"""What a call returns: ``messages.create`` (a ``Message``) or ``messages.parse`` (a ``ParsedMessage``)."""

StreamKind = Literal["message"]
"""What a streamed call streams: ``RawMessageStreamEvent``s."""

SAFE_HEADERS = frozenset(
    {
        "content-type",
        "request-id",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
    }
)
"""Response headers a recording may keep, besides ``anthropic-ratelimit-*``: nothing that names an account
(``anthropic-organization-id`` and ``anthropic-workspace-id`` are left out)."""

_DEFAULT_BASE_URL = "https://api.anthropic.com/"


# --------------------------------------------------------------------------------------------- recording


def record_response(obj: Any, wire: dict[str, Any] | None = None) -> dict[str, Any]:
    """The recording of a non-streamed result: a ``Message`` or a ``ParsedMessage``.

    A parsed message is recorded as the message the API sent (its ``parsed_output`` is not part of its
    dump); the parsed value is made again on rebuild, by the SDK, with the caller's ``output_format``.
    ``wire`` is the JSON body the SDK made ``obj`` from, when the caller saw it: it is recorded as is (the
    server's own words, and no dump of ``obj`` to pay for), provided it is a message.
    """
    if not isinstance(obj, _types().message):  # imported once: this runs on every live call
        raise TypeError(f"cannot record {type(obj).__name__}: expected an anthropic Message")
    return message_recording(obj, wire)


def message_recording(obj: Any, wire: dict[str, Any] | None = None) -> dict[str, Any]:
    """The recording of a message already known to be one, of the Messages API or its beta: the
    wire body when it is a message, else the dump without the parsed values."""
    if wire is not None and wire.get("type") == "message":
        return {"object": "message", "body": wire, "request_id": getattr(obj, "_request_id", None)}
    body: dict[str, Any] = obj.to_dict(mode="json", warnings=False)
    for block in body.get("content") or []:
        if isinstance(block, dict):
            block.pop("parsed_output", None)
    return {"object": "message", "body": body, "request_id": getattr(obj, "_request_id", None)}


def record_chunk(chunk: Any, wire: dict[str, Any] | None = None) -> dict[str, Any]:
    """The recording of one streamed event, with the name of the server-sent event that carried it.

    ``wire`` is the JSON data the SDK made ``chunk`` of, when the caller saw it: it is recorded as is (no dump of
    ``chunk`` to pay for on every event of a stream), provided it is data of ``chunk``'s type.
    """
    from anthropic import BaseModel

    if not isinstance(chunk, BaseModel):
        raise TypeError(f"cannot record {type(chunk).__name__}: not a message stream event")
    fits = wire is not None and wire.get("type") == getattr(chunk, "type", None)
    data = wire if fits else chunk.to_dict(mode="json")
    event = data.get("type") if isinstance(data, dict) else None
    if not isinstance(event, str):
        raise TypeError(f"cannot record {type(chunk).__name__}: not a message stream event")
    return {"event": event, "data": data}


def record_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers of a response that a recording may keep (``SAFE_HEADERS`` and ``anthropic-ratelimit-*``)."""
    return _wire.kept_headers(headers, SAFE_HEADERS, "anthropic-ratelimit-")


def record_error(exc: BaseException) -> dict[str, Any]:
    """The recording of a failed call (see :func:`_wire.error_record`)."""
    import anthropic

    return _wire.error_record(exc, anthropic, record_headers, lambda e: e.body)


# --------------------------------------------------------------------------------------------- rebuilding


class _Types:
    """The SDK names the hot paths use, imported once, on first use."""

    def __init__(self) -> None:
        import pydantic
        from anthropic._models import add_response_ids
        from anthropic.types import Message

        self.validation_error = pydantic.ValidationError
        self.add_response_ids = add_response_ids
        self.message = Message


@functools.cache
def _types() -> _Types:
    return _Types()


def _body(recorded: Mapping[str, Any]) -> Mapping[str, Any]:
    return _wire.recorded_body(recorded, "message", "message", "type")


def _given(value: Any) -> Any:
    from anthropic import NOT_GIVEN

    return NOT_GIVEN if value is None else value


def _add_ids(message: Any, request_id: Any) -> None:
    # Set whether or not one was recorded: the live SDK always sets them (None when absent).
    request_id = request_id if isinstance(request_id, str) else None
    _types().add_response_ids(message, request_id=request_id, workspace_id=None)


@overload
def rebuild_response(kind: Literal["message"], recorded: Mapping[str, Any] | bytes) -> Message: ...
@overload
def rebuild_response(
    kind: Literal["message.parsed"],
    recorded: Mapping[str, Any] | bytes,
    *,
    output_format: Any = ...,
) -> ParsedMessage[Any]: ...
def rebuild_response(
    kind: ResponseKind, recorded: Mapping[str, Any] | bytes, *, output_format: Any = None
) -> Any:
    """The SDK object that ``recorded`` (from ``record_response``, or its JSON text) was, as the call of ``kind``
    returns it.

    ``message.parsed`` needs the ``output_format`` given to ``messages.parse``: the SDK's own parser makes
    ``parsed_output`` from the recorded text, exactly as it did live.
    """
    if kind != "message" and kind != "message.parsed":
        raise ValueError(f"unknown kind {kind!r}; expected 'message' or 'message.parsed'")
    types = _types()
    result, request_id = _wire.load_response(
        types.message, recorded, types.validation_error, _body, "message"
    )
    if kind == "message.parsed":
        result = _parse(result, output_format)
    _add_ids(result, request_id)
    return result


def _parse(message: Any, output_format: Any) -> Any:
    from anthropic.lib._parse._response import parse_response

    return parse_response(output_format=_given(output_format), response=message)


# --------------------------------------------------------------------------------------------- wire bodies


def _http() -> Any:
    return _wire.http_library("anthropic")


def sse_pieces(kind: StreamKind, chunks: Sequence[Mapping[str, Any]]) -> list[bytes]:
    """The recorded ``chunks`` as the named server-sent events the API sends, one piece per chunk."""
    if kind != "message":
        raise ValueError(f"unknown stream kind {kind!r}; expected 'message'")
    pieces: list[bytes] = []
    for chunk in chunks:
        data = _wire.chunk_data(chunk)
        event = chunk.get("event") or data.get("type")
        if not isinstance(event, str) or not event:
            # The SDK skips an event without a name, so a chunk without one could not be replayed.
            raise ValueError("a recorded message stream chunk needs its event name")
        pieces.append(_wire.sse_event(event, data))
    return pieces


def http_response(
    *, url: str = _DEFAULT_BASE_URL + "v1/messages", **fields: Any
) -> httpx2.Response:
    """An ``httpx2.Response`` that no network produced (see :func:`_wire.http_response`)."""
    return cast("httpx2.Response", _wire.http_response(_http(), url=url, **fields))


def _url(client: Any) -> str:
    return _wire.client_url(client, _DEFAULT_BASE_URL, "v1/messages")


def _is_async(client: Any) -> bool:
    # Bedrock, Vertex and Foundry clients are clients too (the SDK's base classes decide).
    return _wire.is_async("anthropic", client, "an anthropic.Anthropic or anthropic.AsyncAnthropic")


def _stream_types(kind: Any, client: Any) -> tuple[Any, Any]:
    from anthropic import AsyncStream, Stream
    from anthropic.types import RawMessageStreamEvent

    cls = AsyncStream if _is_async(client) else Stream
    return cls[RawMessageStreamEvent], RawMessageStreamEvent


def _stream_class(client: Any) -> Any:
    return _stream_types("message", client)[0]


rebuild_stream = _wire.stream_rebuilder(
    "anthropic",
    lambda kind, chunks: sse_pieces(kind, chunks),
    _stream_types,
    lambda kind, client: _url(client),
    "messages.create(..., stream=True)",
)


def rebuild_message_stream_manager(
    chunks: Sequence[Mapping[str, Any]],
    *,
    client: Anthropic | AsyncAnthropic,
    output_format: Any = None,
    headers: Mapping[str, str] | None = None,
) -> MessageStreamManager[Any] | AsyncMessageStreamManager[Any]:
    """What ``client.messages.stream(...)`` returns, over the recorded ``chunks``: its ``text_stream``,
    ``get_final_message()`` and ``get_final_text()`` are the SDK's own, over the replayed events."""
    from anthropic.lib.streaming import AsyncMessageStreamManager, MessageStreamManager

    stream = rebuild_stream("message", chunks, client=client, headers=headers)
    return _wire.stream_manager(
        stream, MessageStreamManager, AsyncMessageStreamManager, output_format=_given(output_format)
    )


# --------------------------------------------------------------------------------------------- raw responses


def raw_response_mode(extra_headers: Mapping[str, Any] | None) -> Literal["raw", "stream"] | None:
    """``"raw"``, ``"stream"`` or ``None`` (see :func:`_wire.raw_response_mode`)."""
    from anthropic._constants import RAW_RESPONSE_HEADER

    return _wire.raw_response_mode(extra_headers, RAW_RESPONSE_HEADER, ("raw", "true"))


def rebuild_raw_response(
    kind: ResponseKind,
    recorded: Mapping[str, Any] | None = None,
    *,
    client: Anthropic | AsyncAnthropic,
    chunks: Sequence[Mapping[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
    output_format: Any = None,
) -> APIResponse[Any] | AsyncAPIResponse[Any]:
    """What ``client.messages.with_raw_response.create(...)`` (and ``.with_streaming_response``, which anthropic
    answers with the same class) returns, over a recorded result or, for a streamed call, its ``chunks``:
    an ``APIResponse`` for an ``Anthropic`` client, an ``AsyncAPIResponse`` for an ``AsyncAnthropic`` one.

    Its ``.parse()`` is the SDK's own, and gives the ``Message`` (or, for ``message.parsed``, the
    ``ParsedMessage``; for ``chunks``, the ``Stream``); ``.headers`` and ``.request_id`` are the recorded ones.
    """
    from anthropic.types import Message

    return raw_response_over(
        kind,
        recorded,
        client=client,
        chunks=chunks,
        headers=headers,
        path="/v1/messages",
        cast_to=Message,
        stream_cls=_stream_class(client) if chunks is not None else None,
        parse=lambda message: _parse(message, output_format),
    )


def raw_response_over(
    kind: ResponseKind,
    recorded: Mapping[str, Any] | None,
    *,
    client: Any,
    chunks: Sequence[Mapping[str, Any]] | None,
    headers: Mapping[str, str] | None,
    path: str,
    cast_to: Any,
    stream_cls: Any,
    parse: Callable[[Any], Any],
) -> APIResponse[Any] | AsyncAPIResponse[Any]:
    """The SDK's raw response over a recording of the Messages API at ``path``, plain or beta:
    ``.parse()`` gives ``cast_to`` (through ``parse`` for ``message.parsed``, a stream of
    ``stream_cls`` for ``chunks``)."""
    from anthropic._models import FinalRequestOptions
    from anthropic._response import APIResponse, AsyncAPIResponse

    if kind not in ("message", "message.parsed"):
        raise ValueError(f"unknown kind {kind!r}; expected 'message' or 'message.parsed'")
    options = FinalRequestOptions.construct(method="post", url=path)
    response = _wire.raw_http_response(
        "anthropic",
        url=_url(client),
        headers=headers,
        pieces=None if chunks is None else sse_pieces("message", chunks),
        body=None if recorded is None or chunks is not None else _body(recorded),
        request_id=None if recorded is None else recorded.get("request_id"),
        request_id_header="request-id",
    )
    if kind == "message.parsed":
        options.post_parser = parse
    response_cls = AsyncAPIResponse if _is_async(client) else APIResponse
    return response_cls(
        raw=response,
        cast_to=cast_to,
        client=client,
        stream=chunks is not None,
        stream_cls=stream_cls,
        options=options,
    )


# --------------------------------------------------------------------------------------------- errors


# The status codes that this SDK has a class of its own for, whatever the body says. Each is a subclass of
# the class the shared table (or `>= 500`) gives, so `except InternalServerError` still catches 529.
_OWN_STATUS_CLASSES = {
    402: "PaymentRequiredError",
    408: "RequestTimeoutError",
    412: "PreconditionFailedError",
    413: "ContentTooLargeError",
    431: "RequestHeaderFieldsTooLargeError",
    499: "ClientClosedRequestError",
    501: "HTTPNotImplementedError",
    503: "ServiceUnavailableError",
    504: "GatewayTimeoutError",
    529: "OverloadedError",
}


def _status_class(status: int) -> type[APIStatusError]:
    import anthropic

    return cast("type[APIStatusError]", _wire.status_class(anthropic, status, _OWN_STATUS_CLASSES))


def error_for_status(
    status: int,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    url: str = _DEFAULT_BASE_URL + "v1/messages",
) -> APIStatusError:
    """The exception the SDK raises for an error response of ``status`` with ``body`` (as the server sent it)
    and ``headers``, made as the SDK makes it: same class, message, ``body``, ``status_code``,
    ``request_id``, ``type``/``api_message`` and ``response``.

    Where the installed SDK has a status-error factory of its own (anthropic 2.17 and later: it picks a
    narrower class by ``error.details.error_code``, such as ``FileExpiredError``, from its fixed table, and
    writes the request id and path into the message), that factory makes it; for an older SDK the class
    comes from the shared table by status code, as that SDK's client did."""
    response = http_response(status=_wire.error_status(status), body=body, headers=headers, url=url)
    # What the client's `_make_status_error_from_response` hands on, from the body the server sent.
    if body is None:
        message = f"Error code: {status}"
    elif isinstance(body, str):
        message = body.strip() or f"Error code: {status}"
    else:
        message = f"Error code: {status} - {body}"
    factory = _status_error_factory()
    if factory is not None:
        return cast("APIStatusError", factory(message, body=body, response=response))
    return _status_class(status)(message, response=response, body=body)


@functools.cache
def _status_error_factory() -> Callable[..., Any] | None:
    try:
        from anthropic._error_classes import make_status_error
    except ImportError:  # an SDK before 2.17: its client picked the class by status
        return None
    return cast("Callable[..., Any]", make_status_error)


def rebuild_error(
    recorded: Mapping[str, Any], *, url: str = _DEFAULT_BASE_URL + "v1/messages"
) -> APIError:
    """The exception of a recorded failure (from ``record_error``): ``error_for_status`` for one with a
    status, else the SDK's ``APITimeoutError`` or ``APIConnectionError``."""
    import anthropic

    return cast(
        "APIError", _wire.rebuilt_error(recorded, anthropic, _http(), url, error_for_status)
    )


# --------------------------------------------------------------------------------------------- plain text


def recording_from_text(
    text: str,
    *,
    model: str,
    usage: tuple[int, int] | None = None,
    message_id: str = "replay",
) -> dict[str, Any]:
    """The recording of a message whose one text block is ``text`` (``record_response``'s shape),
    ending its turn: what a hand-written entry (``{"output": "Hello", "usage": [812, 96]}``) that
    holds no SDK body is served as."""
    prompt, completion = usage or (0, 0)
    body = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": completion},
    }
    return {"object": "message", "body": body, "request_id": None}


def chunks_from_text(
    text: str,
    *,
    model: str,
    usage: tuple[int, int] | None = None,
    message_id: str = "replay",
) -> list[dict[str, Any]]:
    """Recorded events (``record_chunk``'s shape) that stream ``text`` word by word, for an entry that holds
    only the answer's text."""
    prompt, completion = usage or (0, 0)
    message = recording_from_text("", model=model, usage=(prompt, 0), message_id=message_id)["body"]
    message["content"] = []
    message["stop_reason"] = None
    pieces = _wire.word_pieces(text)
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            }
            for piece in pieces
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": completion},
        },
        {"type": "message_stop"},
    ]
    return [{"event": event["type"], "data": event} for event in events]


# --------------------------------------------------------------------------------------------- bodies

# The stop reasons of the Messages API that the shared table leaves as they are.
STOPS: dict[Any, str] = {
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "model_context_window_exceeded": "length",
}


def genai_output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    """A message body in the GenAI conventions' ``gen_ai.output.messages`` shape."""
    reason = body.get("stop_reason")
    return [
        {
            "role": "assistant",
            "parts": content_parts(body.get("content")),
            "finish_reason": genai_finish_reason(STOPS.get(reason, reason)),
        }
    ]


def body_from_events(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The message that recorded ``chunks`` add up to."""
    body: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    json_parts: dict[int, str] = {}
    for recorded in chunks:
        data = recorded.get("data") if isinstance(recorded, Mapping) else None
        if not isinstance(data, Mapping):
            continue
        kind = data.get("type")
        if kind == "message_start" and isinstance(data.get("message"), Mapping):
            body = dict(data["message"])
            body["usage"] = dict(body.get("usage") or {})
        elif kind == "content_block_start":
            blocks[int(data.get("index") or 0)] = dict(data.get("content_block") or {})
        elif kind == "content_block_delta":
            index = int(data.get("index") or 0)
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = (block.get("text") or "") + str(delta.get("text") or "")
            elif dtype == "input_json_delta":
                json_parts[index] = json_parts.get(index, "") + str(delta.get("partial_json") or "")
            elif dtype == "thinking_delta":
                block["thinking"] = (block.get("thinking") or "") + str(delta.get("thinking") or "")
            elif dtype == "signature_delta":
                block["signature"] = str(delta.get("signature") or "")
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "message_delta" and body is not None:
            delta = data.get("delta") or {}
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    body[key] = delta[key]
            for key, value in (data.get("usage") or {}).items():
                if value is not None:
                    body["usage"][key] = value
    if body is None:
        raise ValueError("the recorded message stream has no message_start event")
    for index, text in json_parts.items():
        blocks[index]["input"] = _json_value(text) if text else {}
    body["content"] = [blocks[i] for i in sorted(blocks)]
    return body


def usage_of(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """The (input, output) token counts of a message body, cache reads and writes counted in."""
    usage = body.get("usage")
    if not isinstance(usage, Mapping):
        return None
    tokens_in, tokens_out = usage.get("input_tokens"), usage.get("output_tokens")
    if not isinstance(tokens_in, int) or not isinstance(tokens_out, int):
        return None
    # The conventions count every input token; the API reports cache reads/writes apart.
    for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        cached = usage.get(key)
        if isinstance(cached, int):
            tokens_in += cached
    return tokens_in, tokens_out


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


# --------------------------------------------------------------------------- replies as bodies

_STOP_FROM_GENAI = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_call": "tool_use",
    "content_filter": "refusal",
}


def message_body_from_reply(reply: Reply) -> dict[str, Any]:
    """A message body (``record_response``'s ``body``) answering ``reply``."""
    body: dict[str, Any] = recording_from_text(
        "", model=reply.model, usage=reply.usage or (0, 0), message_id=reply.response_id
    )["body"]
    content: list[dict[str, Any]] = []
    finish = "stop"
    for text, calls, reason in reply.messages:
        finish = reason if reason != "stop" else finish
        if text is not None and (text or not calls):
            content.append({"type": "text", "text": text})
        content.extend(
            {"type": "tool_use", "id": cid, "name": name, "input": json_value(arguments)}
            for cid, name, arguments in calls
        )
    body["content"] = content
    body["stop_reason"] = _STOP_FROM_GENAI.get(finish, "end_turn")
    return body


def events_from_body(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The events (``record_chunk``'s shape) a streamed call would have sent for ``body``."""
    usage = dict(body.get("usage") or {})
    start = {
        **body,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(body.get("content") or []):
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "text": ""},
                }
            )
            events.extend(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                }
                for piece in pieces(str(block.get("text") or ""))
            )
        elif kind in ("tool_use", "server_tool_use"):
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {
                        "type": "input_json_delta",
                        "partial_json": json_text(block.get("input")),
                    },
                }
            )
        elif kind == "thinking":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "thinking": "", "signature": ""},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": block.get("thinking") or ""},
                }
            )
            if block.get("signature"):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": block["signature"]},
                    }
                )
        else:
            events.append(
                {"type": "content_block_start", "index": index, "content_block": dict(block)}
            )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": body.get("stop_reason"),
                "stop_sequence": body.get("stop_sequence"),
            },
            "usage": {"output_tokens": usage.get("output_tokens", 0)},
        }
    )
    events.append({"type": "message_stop"})
    return [{"event": event["type"], "data": event} for event in events]
