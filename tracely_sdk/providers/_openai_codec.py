"""Recorded JSON to and from OpenAI SDK objects: pure functions, with no patching and no network.

Importing this module imports neither ``openai`` nor ``httpx2``; each function imports what it needs.

What a recording holds (all plain JSON)::

    record_response(completion) -> {"object": "chat.completion", "body": {...}, "request_id": "req_..."}
    record_chunk(chunk[, wire]) -> {"event": None, "data": {...}}                 # a chat.completion.chunk
    record_chunk(event[, wire]) -> {"event": "response.output_text.delta", "data": {...}}
    record_error(exc)           -> {"type": "RateLimitError", "message": "...", "status": 429,
                                    "body": {"error": {...}}, "headers": {"retry-after": "1", ...},
                                    "timeout": False}

``body`` and ``data`` are the objects as the API sent them (``to_dict()``: the API's field names, only the
fields it set), so they rebuild into objects equal to the live ones. ``type`` is for people reading the
recording: nothing here chooses a class from anything in a recording. The caller says what to rebuild
(the patched method knows what it returns) and errors are classed by their status code from a fixed table.

Rebuilding::

    rebuild_response("chat.completion", recorded)                        -> ChatCompletion
    rebuild_response("chat.completion.parsed", recorded, response_format=Model)  -> ParsedChatCompletion[Model]
    rebuild_response("response", recorded)                               -> Response
    rebuild_response("response.parsed", recorded, text_format=Model)     -> ParsedResponse[Model]
    rebuild_stream("chat.completion", chunks, client=client)             -> Stream / AsyncStream[ChatCompletionChunk]
    rebuild_stream("response", chunks, client=client)                    -> Stream / AsyncStream[ResponseStreamEvent]
    rebuild_chat_stream_manager(chunks, client=client, ...)              -> (Async)ChatCompletionStreamManager
    rebuild_responses_stream_manager(chunks, client=client, ...)         -> (Async)ResponseStreamManager
    rebuild_raw_response("chat.completion", recorded, client=client)     -> LegacyAPIResponse (.with_raw_response)
    rebuild_raw_response(..., mode="stream")                             -> (Async)APIResponse (.with_streaming_response)
    error_for_status(429, body, headers)                                 -> openai.RateLimitError

A replayed stream is the SDK's own ``Stream``/``AsyncStream`` over an in-memory ``httpx2.Response`` whose body
is the recorded chunks serialised back to server-sent events, one body piece per chunk, so the SDK's own SSE
decoder and model construction produce the chunks and the helpers (``.stream()``, ``get_final_completion()``)
run unchanged.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from tracely_otel.genai import (
    ChatMessage,
    MessagePart,
    OutputMessage,
    content_parts,
    genai_finish_reason,
    tool_call_part,
    tool_response_part,
)
from tracely_sdk.providers import _wire
from tracely_sdk.providers._patching import Reply, pieces, token_counts

if TYPE_CHECKING:
    import httpx2
    from openai import AsyncOpenAI, AsyncStream, OpenAI, Stream
    from openai._exceptions import APIError, APIStatusError
    from openai._legacy_response import LegacyAPIResponse
    from openai._response import APIResponse, AsyncAPIResponse
    from openai.lib.streaming.chat import (
        AsyncChatCompletionStreamManager,
        ChatCompletionStreamManager,
    )
    from openai.lib.streaming.responses import AsyncResponseStreamManager, ResponseStreamManager
    from openai.types.chat import ChatCompletion, ChatCompletionChunk, ParsedChatCompletion
    from openai.types.responses import ParsedResponse, Response, ResponseStreamEvent

ResponseKind = Literal["chat.completion", "chat.completion.parsed", "response", "response.parsed"]
"""What a call returns: ``chat.completions.create`` / ``.parse``, ``responses.create`` / ``.parse``."""

StreamKind = Literal["chat.completion", "response"]
"""What a streamed call streams: chat completion chunks, or Responses API events."""

SAFE_HEADERS = frozenset(
    {
        "content-type",
        "x-request-id",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "openai-processing-ms",
        "openai-version",
    }
)
"""Response headers a recording may keep, besides ``x-ratelimit-*``: nothing that names an account."""

_OBJECT_OF_KIND: dict[str, str] = {
    "chat.completion": "chat.completion",
    "chat.completion.parsed": "chat.completion",
    "response": "response",
    "response.parsed": "response",
}
_PATH_OF_KIND: dict[str, str] = {"chat.completion": "chat/completions", "response": "responses"}
_DEFAULT_BASE_URL = "https://api.openai.com/v1/"


# --------------------------------------------------------------------------------------------- recording


def record_response(obj: Any, wire: dict[str, Any] | None = None) -> dict[str, Any]:
    """The recording of a non-streamed result: a ``ChatCompletion``, ``Response`` or their parsed forms.

    A parsed result is recorded as the completion the API sent; what the SDK parsed out of it is made again
    on rebuild, by the SDK, with the caller's ``response_format``. ``wire`` is the JSON body the SDK made
    ``obj`` from, when the caller saw it: it is recorded as is (the server's own words, and no dump of ``obj``
    to pay for), provided it is a body of ``obj``'s kind.
    """
    types = _types()  # the SDK's classes, imported once: this runs on every live call
    ChatCompletion, Response = types.models["chat.completion"], types.models["response"]

    body: dict[str, Any]
    if isinstance(obj, ChatCompletion):
        kind = "chat.completion"
    elif isinstance(obj, Response):
        kind = "response"
    else:
        raise TypeError(
            f"cannot record {type(obj).__name__}: expected a ChatCompletion or a Response"
        )
    if wire is not None and wire.get("object") == kind:
        body = wire
    elif kind == "chat.completion":
        # `warnings=False`: the SDK's parsed models type `parsed` loosely, and it is dropped below anyway.
        body = cast("dict[str, Any]", obj.to_dict(mode="json", warnings=False))
        # Only the parsed subclass has fields the API did not send.
        for choice in (body.get("choices") or []) if type(obj) is not ChatCompletion else ():
            message = choice.get("message") if isinstance(choice, dict) else None
            if isinstance(message, dict):
                message.pop("parsed", None)
                for call in message.get("tool_calls") or []:
                    if isinstance(call, dict) and isinstance(call.get("function"), dict):
                        call["function"].pop("parsed_arguments", None)
    else:
        body = cast("dict[str, Any]", obj.to_dict(mode="json", warnings=False))
        for item in (body.get("output") or []) if type(obj) is not Response else ():
            if not isinstance(item, dict):
                continue
            item.pop("parsed_arguments", None)
            for part in item.get("content") or []:
                if isinstance(part, dict):
                    part.pop("parsed", None)
    return {"object": kind, "body": body, "request_id": getattr(obj, "_request_id", None)}


def record_chunk(chunk: Any, wire: dict[str, Any] | None = None) -> dict[str, Any]:
    """The recording of one streamed item, as the server sent it, with its SSE event name if it had one.

    ``wire`` is the JSON data the SDK made ``chunk`` of, when the caller saw it: it is recorded as is (no dump of
    ``chunk`` to pay for on every item of a stream), provided it is data of ``chunk``'s kind.
    """
    types = _types()  # imported once: this runs on every chunk of a live stream
    if not isinstance(chunk, types.base_model):
        raise TypeError(
            f"cannot record {type(chunk).__name__}: not a chat chunk or a Responses event"
        )
    if isinstance(chunk, types.chunk):
        fits = wire is not None and wire.get("object") == "chat.completion.chunk"
        return {"event": None, "data": wire if fits else chunk.to_dict(mode="json")}
    fits = wire is not None and wire.get("type") == getattr(chunk, "type", None)
    data = wire if fits else chunk.to_dict(mode="json")
    event = data.get("type") if isinstance(data, dict) else None
    if not isinstance(event, str):
        raise TypeError(
            f"cannot record {type(chunk).__name__}: not a chat chunk or a Responses event"
        )
    return {"event": event, "data": data}


def record_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers of a response that a recording may keep (``SAFE_HEADERS`` and ``x-ratelimit-*``)."""
    return _wire.kept_headers(headers, SAFE_HEADERS, "x-ratelimit-")


def record_error(exc: BaseException) -> dict[str, Any]:
    """The recording of a failed call (see :func:`_wire.error_record`)."""
    import openai

    return _wire.error_record(exc, openai, record_headers, lambda e: _wire_body(e.response, e.body))


def _wire_body(response: httpx2.Response, fallback: Any) -> Any:
    try:
        text = response.text
    except Exception:
        return fallback
    try:
        return json.loads(text)
    except ValueError:
        return text or fallback


# --------------------------------------------------------------------------------------------- rebuilding


class _Types:
    """The SDK names the hot paths use, imported once, on first use."""

    def __init__(self) -> None:
        import pydantic
        from openai import BaseModel
        from openai._models import add_request_id
        from openai.types.chat import ChatCompletion, ChatCompletionChunk
        from openai.types.responses import Response

        self.base_model = BaseModel
        self.chunk = ChatCompletionChunk
        self.validation_error = pydantic.ValidationError
        self.add_request_id = add_request_id
        # On pydantic 2, `add_request_id` is a plain instance-attribute store (the name is
        # neither a field nor a declared private attribute); doing it directly skips pydantic's
        # __setattr__ dispatch. Anything else goes through the SDK's own function.
        self.direct_request_id = pydantic.VERSION.startswith("2.") and all(
            "_request_id" not in getattr(m, "__private_attributes__", {"_request_id": None})
            for m in (ChatCompletion, Response)
        )
        self.models: dict[str, Any] = {
            "chat.completion": ChatCompletion,
            "chat.completion.parsed": ChatCompletion,
            "response": Response,
            "response.parsed": Response,
        }


@functools.cache
def _types() -> _Types:
    return _Types()


def _body(kind: str, recorded: Mapping[str, Any]) -> Mapping[str, Any]:
    return _wire.recorded_body(recorded, kind, _OBJECT_OF_KIND[kind], "object")


# The body check of each kind, made once: rebuilding runs on every served call.
_BODY_OF_KIND = {kind: functools.partial(_body, kind) for kind in _OBJECT_OF_KIND}


def _given(value: Any) -> Any:
    from openai import omit

    return omit if value is None else value


@overload
def rebuild_response(
    kind: Literal["chat.completion"], recorded: Mapping[str, Any] | bytes
) -> ChatCompletion: ...
@overload
def rebuild_response(
    kind: Literal["chat.completion.parsed"],
    recorded: Mapping[str, Any] | bytes,
    *,
    response_format: Any = ...,
    input_tools: Iterable[Any] | None = ...,
) -> ParsedChatCompletion[Any]: ...
@overload
def rebuild_response(
    kind: Literal["response"], recorded: Mapping[str, Any] | bytes
) -> Response: ...
@overload
def rebuild_response(
    kind: Literal["response.parsed"],
    recorded: Mapping[str, Any] | bytes,
    *,
    text_format: Any = ...,
    input_tools: Iterable[Any] | None = ...,
) -> ParsedResponse[Any]: ...
def rebuild_response(
    kind: ResponseKind,
    recorded: Mapping[str, Any] | bytes,
    *,
    response_format: Any = None,
    text_format: Any = None,
    input_tools: Iterable[Any] | None = None,
) -> Any:
    """The SDK object that ``recorded`` (from ``record_response``, or its JSON text) was, as the call of ``kind``
    returns it.

    ``chat.completion.parsed`` needs the ``response_format`` (and ``tools``) given to ``chat.completions.parse``,
    and ``response.parsed`` the ``text_format`` (and ``tools``) given to ``responses.parse``: the SDK's own parser
    makes the parsed values from the recorded content, exactly as it did live.
    """
    types = _types()
    model = types.models.get(kind)
    if model is None:
        raise ValueError(f"unknown kind {kind!r}; expected one of {sorted(_OBJECT_OF_KIND)}")
    result, request_id = _wire.load_response(
        model,
        recorded,
        types.validation_error,
        _BODY_OF_KIND[kind],
        _OBJECT_OF_KIND[kind],
    )
    if kind == "chat.completion.parsed":
        result = _parse_chat(result, response_format, input_tools)
    elif kind == "response.parsed":
        result = _parse_response(result, text_format, input_tools)
    # Set whether or not one was recorded: the live SDK always sets it (None when absent).
    request_id = request_id if isinstance(request_id, str) else None
    if types.direct_request_id:
        object.__setattr__(result, "_request_id", request_id)
    else:
        types.add_request_id(result, request_id)
    return result


def _parse_chat(completion: Any, response_format: Any, input_tools: Iterable[Any] | None) -> Any:
    from openai.lib._parsing import parse_chat_completion, validate_input_tools

    return parse_chat_completion(
        response_format=_given(response_format),
        input_tools=validate_input_tools(_given(input_tools)),
        chat_completion=completion,
    )


def _responses_tools(tools: Iterable[Any] | None) -> Any:
    if tools is None:
        from openai import omit

        return omit
    try:
        # `responses.parse` converts `pydantic_function_tool()` tools to the Responses shape before parsing.
        from openai.lib._response_resources import _make_tools
    except ImportError:  # pragma: no cover - an SDK that moved it
        return list(tools)
    return _make_tools(tools)


def _parse_response(response: Any, text_format: Any, input_tools: Iterable[Any] | None) -> Any:
    from openai.lib._parsing._responses import parse_response

    return parse_response(
        text_format=_given(text_format),
        input_tools=_responses_tools(input_tools),
        response=response,
    )


# --------------------------------------------------------------------------------------------- wire bodies


def _http() -> Any:
    return _wire.http_library("openai")


def sse_pieces(kind: StreamKind, chunks: Sequence[Mapping[str, Any]]) -> list[bytes]:
    """The recorded ``chunks`` as server-sent events, one piece per chunk, as the API sends them.

    Chat completion chunks are ``data:`` lines ending with ``data: [DONE]``; Responses events carry their
    ``event:`` line too.
    """
    if kind not in _PATH_OF_KIND:
        raise ValueError(f"unknown stream kind {kind!r}; expected 'chat.completion' or 'response'")
    pieces: list[bytes] = []
    for chunk in chunks:
        data = _wire.chunk_data(chunk)
        event = chunk.get("event")
        pieces.append(_wire.sse_event(event if isinstance(event, str) else None, data))
    if kind == "chat.completion":
        pieces.append(b"data: [DONE]\n\n")
    return pieces


def http_response(*, url: str = _DEFAULT_BASE_URL, **fields: Any) -> httpx2.Response:
    """An ``httpx2.Response`` that no network produced (see :func:`_wire.http_response`)."""
    return cast("httpx2.Response", _wire.http_response(_http(), url=url, **fields))


def _url(client: Any, kind: str) -> str:
    path = _PATH_OF_KIND["chat.completion" if kind.startswith("chat.") else "response"]
    return _wire.client_url(client, _DEFAULT_BASE_URL, path)


def _is_async(client: Any) -> bool:
    # `AzureOpenAI` and other subclasses are clients too (the SDK's base classes decide).
    return _wire.is_async("openai", client, "an openai.OpenAI or openai.AsyncOpenAI")


def _stream_types(kind: StreamKind, client: Any) -> tuple[type[Any], type[Any]]:
    from openai import AsyncStream, Stream

    item: Any
    if kind == "chat.completion":
        from openai.types.chat import ChatCompletionChunk

        item = ChatCompletionChunk
    elif kind == "response":
        # A union of event models, as the SDK's own `Stream[ResponseStreamEvent]` is.
        from openai.types.responses import ResponseStreamEvent

        item = ResponseStreamEvent
    else:
        raise ValueError(f"unknown stream kind {kind!r}; expected 'chat.completion' or 'response'")
    stream_cls = AsyncStream if _is_async(client) else Stream
    return stream_cls, item


@overload
def rebuild_stream(
    kind: Literal["chat.completion"],
    chunks: Sequence[Mapping[str, Any]],
    *,
    client: OpenAI,
    headers: Mapping[str, str] | None = ...,
) -> Stream[ChatCompletionChunk]: ...
@overload
def rebuild_stream(
    kind: Literal["chat.completion"],
    chunks: Sequence[Mapping[str, Any]],
    *,
    client: AsyncOpenAI,
    headers: Mapping[str, str] | None = ...,
) -> AsyncStream[ChatCompletionChunk]: ...
@overload
def rebuild_stream(
    kind: Literal["response"],
    chunks: Sequence[Mapping[str, Any]],
    *,
    client: OpenAI,
    headers: Mapping[str, str] | None = ...,
) -> Stream[ResponseStreamEvent]: ...
@overload
def rebuild_stream(
    kind: Literal["response"],
    chunks: Sequence[Mapping[str, Any]],
    *,
    client: AsyncOpenAI,
    headers: Mapping[str, str] | None = ...,
) -> AsyncStream[ResponseStreamEvent]: ...
def rebuild_stream(
    kind: StreamKind,
    chunks: Sequence[Mapping[str, Any]],
    *,
    client: OpenAI | AsyncOpenAI,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """The SDK's own ``Stream`` (for an ``OpenAI`` client) or ``AsyncStream`` (``AsyncOpenAI``) of the recorded
    ``chunks``, as ``create(..., stream=True)`` returns it. Nothing is sent: ``client`` is only the SDK's
    context for decoding (its SSE decoder and response validation setting)."""
    stream_cls, item = _stream_types(kind, client)
    pieces = sse_pieces(kind, chunks)
    return _wire.sdk_stream(
        "openai",
        stream_cls[item],
        item,
        pieces,
        client=client,
        url=_url(client, kind),
        headers=headers,
    )


def rebuild_chat_stream_manager(
    chunks: Sequence[Mapping[str, Any]],
    *,
    client: OpenAI | AsyncOpenAI,
    response_format: Any = None,
    input_tools: Iterable[Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> ChatCompletionStreamManager[Any] | AsyncChatCompletionStreamManager[Any]:
    """What ``client.chat.completions.stream(...)`` returns, over the recorded ``chunks``."""
    from openai.lib.streaming.chat import (
        AsyncChatCompletionStreamManager,
        ChatCompletionStreamManager,
    )

    stream: Any = rebuild_stream(
        "chat.completion", chunks, client=cast(Any, client), headers=headers
    )
    tools = _given(None if input_tools is None else list(input_tools))
    managers = (ChatCompletionStreamManager, AsyncChatCompletionStreamManager)
    return _wire.stream_manager(
        stream, *managers, response_format=_given(response_format), input_tools=tools
    )


def rebuild_responses_stream_manager(
    chunks: Sequence[Mapping[str, Any]],
    *,
    client: OpenAI | AsyncOpenAI,
    text_format: Any = None,
    input_tools: Iterable[Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> ResponseStreamManager[Any] | AsyncResponseStreamManager[Any]:
    """What ``client.responses.stream(...)`` returns, over the recorded ``chunks``."""
    from openai.lib.streaming.responses import AsyncResponseStreamManager, ResponseStreamManager

    stream: Any = rebuild_stream("response", chunks, client=cast(Any, client), headers=headers)
    tools = _responses_tools(input_tools)
    managers = (ResponseStreamManager, AsyncResponseStreamManager)
    return _wire.stream_manager(
        stream, *managers, text_format=_given(text_format), input_tools=tools, starting_after=None
    )


# --------------------------------------------------------------------------------------------- raw responses


def raw_response_mode(extra_headers: Mapping[str, Any] | None) -> Literal["raw", "stream"] | None:
    """``"raw"``, ``"stream"`` or ``None`` (see :func:`_wire.raw_response_mode`)."""
    from openai._constants import RAW_RESPONSE_HEADER

    return _wire.raw_response_mode(extra_headers, RAW_RESPONSE_HEADER, ("true",))


def rebuild_raw_response(
    kind: ResponseKind,
    recorded: Mapping[str, Any] | None = None,
    *,
    client: OpenAI | AsyncOpenAI,
    chunks: Sequence[Mapping[str, Any]] | None = None,
    mode: Literal["raw", "stream"] = "raw",
    headers: Mapping[str, str] | None = None,
    response_format: Any = None,
    text_format: Any = None,
    input_tools: Iterable[Any] | None = None,
) -> LegacyAPIResponse[Any] | APIResponse[Any] | AsyncAPIResponse[Any]:
    """What ``client.<resource>.with_raw_response.<method>(...)`` (``mode="raw"``: a ``LegacyAPIResponse``) or
    ``.with_streaming_response.<method>(...)`` (``mode="stream"``: an ``APIResponse``/``AsyncAPIResponse``,
    inside its context manager) returns, over a recorded result or, for a streamed call, its ``chunks``.

    Its ``.parse()`` is the SDK's own: the body goes through the client's response processing, and a
    ``*.parsed`` kind through the same parser that ``.parse()`` gives the live call.
    """
    from openai._models import FinalRequestOptions

    if kind not in _OBJECT_OF_KIND:
        raise ValueError(f"unknown kind {kind!r}; expected one of {sorted(_OBJECT_OF_KIND)}")
    is_chat = kind.startswith("chat.")
    path = "/" + _PATH_OF_KIND["chat.completion" if is_chat else "response"]
    options = FinalRequestOptions.construct(method="post", url=path)
    stream_cls: Any = None
    pieces: list[bytes] | None = None
    if chunks is not None:
        stream_kind: StreamKind = "chat.completion" if is_chat else "response"
        stream_cls, item = _stream_types(stream_kind, client)
        stream_cls = stream_cls[item]
        pieces = sse_pieces(stream_kind, chunks)
    response = _wire.raw_http_response(
        "openai",
        url=_url(client, kind),
        headers=headers,
        pieces=pieces,
        body=None if recorded is None or chunks is not None else _body(kind, recorded),
        request_id=None if recorded is None else recorded.get("request_id"),
        request_id_header="x-request-id",
    )
    if kind == "chat.completion.parsed":
        options.post_parser = lambda completion: _parse_chat(
            completion, response_format, input_tools
        )
    elif kind == "response.parsed":
        options.post_parser = lambda result: _parse_response(result, text_format, input_tools)
    cast_to: Any
    if is_chat:
        from openai.types.chat import ChatCompletion

        cast_to = ChatCompletion
    else:
        from openai.types.responses import Response

        cast_to = Response
    arguments: dict[str, Any] = {
        "raw": response,
        "cast_to": cast_to,
        "client": client,
        "stream": chunks is not None,
        "stream_cls": stream_cls,
        "options": options,
    }
    if mode == "raw":
        from openai._legacy_response import LegacyAPIResponse

        return LegacyAPIResponse(**arguments)
    if mode == "stream":
        from openai._response import APIResponse, AsyncAPIResponse

        return AsyncAPIResponse(**arguments) if _is_async(client) else APIResponse(**arguments)
    raise ValueError(f"unknown mode {mode!r}; expected 'raw' or 'stream'")


# --------------------------------------------------------------------------------------------- errors


def _status_class(status: int) -> type[APIStatusError]:
    import openai

    return cast("type[APIStatusError]", _wire.status_class(openai, status))


def error_for_status(
    status: int,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    url: str = _DEFAULT_BASE_URL,
) -> APIStatusError:
    """The exception the SDK raises for an error response of ``status`` with ``body`` (as the server sent it)
    and ``headers``, made as the SDK makes it: same class (from a fixed table by status), message, ``body``,
    ``status_code``, ``request_id`` and ``response``."""
    response = http_response(status=_wire.error_status(status), body=body, headers=headers, url=url)
    message = f"Error code: {status}"
    error = body.get("error", body) if isinstance(body, Mapping) else None
    detail = error.get("message") if isinstance(error, Mapping) else None
    if isinstance(detail, str) and detail:
        message += f" - {detail}"
    data = body.get("error", body) if isinstance(body, Mapping) else body
    return _status_class(status)(message, response=response, body=data)


def rebuild_error(recorded: Mapping[str, Any], *, url: str = _DEFAULT_BASE_URL) -> APIError:
    """The exception of a recorded failure (from ``record_error``): ``error_for_status`` for one with a
    status, else the SDK's ``APITimeoutError`` or ``APIConnectionError``."""
    import openai

    return cast("APIError", _wire.rebuilt_error(recorded, openai, _http(), url, error_for_status))


# --------------------------------------------------------------------------------------------- plain text


def recording_from_text(
    kind: Literal["chat.completion", "response"],
    text: str,
    *,
    model: str,
    usage: tuple[int, int] | None = None,
    response_id: str = "replay",
) -> dict[str, Any]:
    """The recording of a chat completion (``kind="chat.completion"``) or a Responses API
    response (``"response"``) whose one message says ``text`` (``record_response``'s shape): what a
    hand-written entry (``{"output": "Hello", "usage": [812, 96]}``) is served as."""
    prompt, completion = usage or (0, 0)
    if kind == "chat.completion":
        body: dict[str, Any] = {
            "id": response_id,
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "logprobs": None,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                }
            ],
        }
        if usage is not None:
            body["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
    elif kind == "response":
        body = {
            "id": response_id,
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": model,
            "output": [
                {
                    "id": f"{response_id}_msg",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
        if usage is not None:
            body["usage"] = {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + completion,
            }
    else:
        raise ValueError(f"unknown kind {kind!r}; expected 'chat.completion' or 'response'")
    return {"object": kind, "body": body, "request_id": None}


def chunks_from_text(
    kind: Literal["chat.completion"],
    text: str,
    *,
    model: str,
    usage: tuple[int, int] | None = None,
    response_id: str = "replay",
) -> list[dict[str, Any]]:
    """Recorded chat chunks (``record_chunk``'s shape) that stream ``text`` word by word, for an entry that
    holds only the answer's text; with ``usage`` the last chunk is the ``include_usage`` one."""
    if kind != "chat.completion":
        raise ValueError("chunks_from_text makes chat completion chunks only")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "event": None,
            "data": {
                "id": response_id,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            },
        }

    pieces = _wire.word_pieces(text)
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in pieces]
    chunks.append(chunk({}, "stop"))
    if usage is not None:
        last = chunk({})
        last["data"]["choices"] = []
        last["data"]["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        }
        chunks.append(last)
    return chunks


# --------------------------------------------------------------------------------------------- bodies


def genai_chat_output(body: Mapping[str, Any]) -> list[OutputMessage]:
    """A chat completion body's choices in the ``gen_ai.output.messages`` shape."""
    out: list[OutputMessage] = []
    for choice in body.get("choices") or []:
        message = choice.get("message") or {}
        parts = content_parts(message.get("content"))
        if message.get("refusal"):
            parts.append({"type": "text", "content": message["refusal"]})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            parts.append(
                tool_call_part(call.get("id"), function.get("name"), function.get("arguments"))
            )
        reason = choice.get("finish_reason")
        out.append(
            {
                "role": "assistant",
                "parts": parts,
                "finish_reason": genai_finish_reason(reason),
            }
        )
    return out


def chat_body_from_chunks(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The chat completion body that recorded ``chunks`` add up to."""
    base: dict[str, Any] = {}
    usage: Any = None
    acc: dict[int, dict[str, Any]] = {}
    for recorded in chunks:
        data = recorded.get("data") if isinstance(recorded, Mapping) else None
        if not isinstance(data, Mapping):
            continue
        if not base:
            base = {k: data.get(k) for k in ("id", "created", "model")}
            for key in ("system_fingerprint", "service_tier"):
                if data.get(key) is not None:
                    base[key] = data[key]
        if data.get("usage") is not None:
            usage = data["usage"]
        for choice in data.get("choices") or []:
            index = int(choice.get("index") or 0)
            state = acc.setdefault(
                index, {"content": None, "refusal": None, "calls": {}, "finish": None}
            )
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                state["content"] = (state["content"] or "") + delta["content"]
            if isinstance(delta.get("refusal"), str):
                state["refusal"] = (state["refusal"] or "") + delta["refusal"]
            for call in delta.get("tool_calls") or []:
                slot = state["calls"].setdefault(
                    int(call.get("index") or 0),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                if function.get("name"):
                    slot["function"]["name"] = function["name"]
                if function.get("arguments"):
                    slot["function"]["arguments"] += function["arguments"]
            if choice.get("finish_reason"):
                state["finish"] = choice["finish_reason"]
    choices = []
    for index in sorted(acc):
        state = acc[index]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": state["content"],
            "refusal": state["refusal"],
        }
        if state["calls"]:
            message["tool_calls"] = [state["calls"][n] for n in sorted(state["calls"])]
        choices.append(
            {
                "index": index,
                "finish_reason": state["finish"] or "stop",
                "logprobs": None,
                "message": message,
            }
        )
    body = {
        "id": base.get("id") or "replay",
        "object": "chat.completion",
        "created": base.get("created") or 0,
        "model": base.get("model") or "",
        "choices": choices,
        **{k: v for k, v in base.items() if k not in ("id", "created", "model")},
    }
    if usage is not None:
        body["usage"] = usage
    return body


def genai_responses_input(value: Any) -> list[ChatMessage]:
    """A Responses API ``input`` (a string, or its items as JSON) in the GenAI conventions'
    ``gen_ai.input.messages`` shape."""
    if isinstance(value, str):
        return [{"role": "user", "parts": [{"type": "text", "content": value}]}]
    out: list[ChatMessage] = []
    for item in value or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "function_call":
            call = tool_call_part(item.get("call_id"), item.get("name"), item.get("arguments"))
            out.append({"role": "assistant", "parts": [call]})
        elif kind == "function_call_output":
            response = tool_response_part(item.get("call_id"), item.get("output"))
            out.append({"role": "tool", "parts": [response]})
        elif kind == "reasoning":
            text = " ".join(
                s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)
            )
            out.append({"role": "assistant", "parts": [{"type": "reasoning", "content": text}]})
        elif "role" in item:
            out.append({"role": item["role"], "parts": content_parts(item.get("content"))})
        else:
            out.append({"role": "user", "parts": [item]})
    return out


def responses_finish(body: Mapping[str, Any]) -> str:
    """The GenAI finish reason of a Responses API response."""
    output = body.get("output") or []
    if body.get("status") == "incomplete":
        reason = (body.get("incomplete_details") or {}).get("reason")
        return "content_filter" if reason == "content_filter" else "length"
    if any(isinstance(i, dict) and i.get("type") == "function_call" for i in output):
        return "tool_call"
    return "stop"


def genai_responses_output(body: Mapping[str, Any]) -> list[OutputMessage]:
    """A Responses API response's output in the ``gen_ai.output.messages`` shape."""
    parts: list[MessagePart] = []
    for item in body.get("output") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            parts.extend(content_parts(item.get("content")))
        elif kind == "function_call":
            parts.append(
                tool_call_part(item.get("call_id"), item.get("name"), item.get("arguments"))
            )
        elif kind == "reasoning":
            text = " ".join(
                s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)
            )
            parts.append({"type": "reasoning", "content": text})
    return [{"role": "assistant", "parts": parts, "finish_reason": responses_finish(body)}]


def response_events_from_body(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Responses API events (``record_chunk``'s shape) a streamed call would have sent."""
    events: list[dict[str, Any]] = []

    def add(event: dict[str, Any]) -> None:
        event["sequence_number"] = len(events)
        events.append({"event": event["type"], "data": event})

    started = {**body, "status": "in_progress", "output": [], "usage": None}
    started.pop("completed_at", None)
    add({"type": "response.created", "response": started})
    add({"type": "response.in_progress", "response": dict(started)})
    for index, item in enumerate(body.get("output") or []):
        if not isinstance(item, dict):
            continue
        item_id = item.get("id")
        if item.get("type") == "message":
            add(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "content": []},
                }
            )
            for n, part in enumerate(item.get("content") or []):
                empty = {**part, "text": ""} if part.get("type") == "output_text" else part
                add(
                    {
                        "type": "response.content_part.added",
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": n,
                        "part": empty,
                    }
                )
                if part.get("type") == "output_text":
                    for piece in _wire.word_pieces(part.get("text") or ""):
                        add(
                            {
                                "type": "response.output_text.delta",
                                "item_id": item_id,
                                "output_index": index,
                                "content_index": n,
                                "delta": piece,
                                "logprobs": [],
                            }
                        )
                    add(
                        {
                            "type": "response.output_text.done",
                            "item_id": item_id,
                            "output_index": index,
                            "content_index": n,
                            "text": part.get("text") or "",
                            "logprobs": [],
                        }
                    )
                add(
                    {
                        "type": "response.content_part.done",
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": n,
                        "part": part,
                    }
                )
        elif item.get("type") == "function_call":
            add(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "arguments": ""},
                }
            )
            arguments = item.get("arguments") or ""
            add(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item_id,
                    "output_index": index,
                    "delta": arguments,
                }
            )
            add(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item_id,
                    "output_index": index,
                    "arguments": arguments,
                }
            )
        else:
            add({"type": "response.output_item.added", "output_index": index, "item": item})
        add({"type": "response.output_item.done", "output_index": index, "item": item})
    final = "response.incomplete" if body.get("status") == "incomplete" else "response.completed"
    add({"type": final, "response": dict(body)})
    return events


def response_body_from_events(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The response a recorded Responses stream ended with."""
    last: Any = None
    for recorded in chunks:
        data = recorded.get("data") if isinstance(recorded, Mapping) else None
        if isinstance(data, Mapping) and isinstance(data.get("response"), Mapping):
            last = data["response"]
            if data.get("type") in ("response.completed", "response.incomplete", "response.failed"):
                break
    if last is None:
        raise ValueError("the recorded Responses stream holds no response event")
    return dict(last)


def usage_of(body: Mapping[str, Any], keys: tuple[str, str]) -> tuple[int, int] | None:
    """The (input, output) token counts of a body whose usage names them ``keys``."""
    usage = body.get("usage")
    if not isinstance(usage, Mapping):
        return None
    tokens_in, tokens_out = usage.get(keys[0]), usage.get(keys[1])
    if isinstance(tokens_in, int) and isinstance(tokens_out, int):
        return tokens_in, tokens_out
    return None


# The optional arguments a call's spec reads, by API (the rest are the SDK's business).


# --------------------------------------------------------------------------- replies as bodies

_FINISH_FROM_GENAI = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_call": "tool_calls",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


def chat_body_from_reply(reply: Reply) -> dict[str, Any]:
    """A chat completion body (``record_response``'s ``body``) answering ``reply``."""
    choices = []
    for index, (text, calls, finish) in enumerate(reply.messages):
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in calls
            ]
        choices.append(
            {
                "index": index,
                "finish_reason": _FINISH_FROM_GENAI.get(finish, "stop"),
                "logprobs": None,
                "message": message,
            }
        )
    body: dict[str, Any] = {
        "id": reply.response_id,
        "object": "chat.completion",
        "created": 0,
        "model": reply.model,
        "choices": choices,
    }
    usage = token_counts(reply.usage, ("prompt_tokens", "completion_tokens", "total_tokens"))
    if usage is not None:
        body["usage"] = usage
    return body


def response_body_from_reply(reply: Reply) -> dict[str, Any]:
    """A Responses API response body answering ``reply``."""
    body: dict[str, Any] = recording_from_text(
        "response", "", model=reply.model, usage=reply.usage, response_id=reply.response_id
    )["body"]
    output: list[dict[str, Any]] = []
    finish = "stop"
    for index, (text, calls, reason) in enumerate(reply.messages):
        finish = reason if reason != "stop" else finish
        if text is not None:
            output.append(
                {
                    "id": f"msg_{reply.response_id}_{index}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        for n, (cid, name, args) in enumerate(calls):
            output.append(
                {
                    "id": f"fc_{reply.response_id}_{index}_{n}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": cid,
                    "name": name,
                    "arguments": args,
                }
            )
    body["output"] = output
    if finish in ("length", "content_filter"):
        body["status"] = "incomplete"
        reason = "max_output_tokens" if finish == "length" else "content_filter"
        body["incomplete_details"] = {"reason": reason}
    return body


def chat_chunks_from_body(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chunks (``record_chunk``'s shape) a streamed call would have sent for ``body``."""
    base = {
        "id": body.get("id"),
        "object": "chat.completion.chunk",
        "created": body.get("created", 0),
        "model": body.get("model"),
    }
    for key in ("system_fingerprint", "service_tier"):
        if body.get(key) is not None:
            base[key] = body[key]

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"event": None, "data": {**base, "choices": [choice]}}

    chunks = []
    for choice in body.get("choices") or []:
        index = int(choice.get("index") or 0)
        message = choice.get("message") or {}
        content = message.get("content")
        chunks.append(
            chunk(index, {"role": "assistant", "content": "" if content is not None else None})
        )
        chunks.extend(chunk(index, {"content": piece}) for piece in pieces(content or ""))
        if message.get("refusal"):
            chunks.append(chunk(index, {"refusal": message["refusal"]}))
        for n, call in enumerate(message.get("tool_calls") or []):
            delta_call = {
                "index": n,
                "id": call.get("id"),
                "type": "function",
                "function": dict(call.get("function") or {}),
            }
            chunks.append(chunk(index, {"tool_calls": [delta_call]}))
        chunks.append(chunk(index, {}, choice.get("finish_reason") or "stop"))
    if body.get("usage") is not None:
        chunks.append({"event": None, "data": {**base, "choices": [], "usage": body["usage"]}})
    return chunks


# --------------------------------------------------------------------------- one call
