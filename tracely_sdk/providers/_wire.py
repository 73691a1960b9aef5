"""What both SDK codecs do the same way: in-memory HTTP bodies for replayed responses, the
recorded form of a failure, and the SDK's exception rebuilt from it.

Both SDKs are generated from one template (the same exception classes, raw-response header and
client internals), so each codec passes its SDK module (``openai`` or ``anthropic``) and the
HTTP module the SDK is built on (``httpx2``, or ``httpx`` for older SDKs); nothing here imports
either.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from types import ModuleType
from typing import Any, Literal, TypeVar, cast

import orjson

_S = TypeVar("_S")
_A = TypeVar("_A")


class ReplayBody:
    """An in-memory response body, sync and async at once, that yields one piece per recorded chunk."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self._pieces = list(pieces)

    @property
    def elapsed(self) -> timedelta:
        # `Response.elapsed` reads it from its stream until the client sets it: nothing was waited for.
        return timedelta(0)

    def __iter__(self) -> Iterator[bytes]:
        yield from self._pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


@functools.cache
def replay_body_class(http: Any) -> type[ReplayBody]:
    """:class:`ReplayBody` as a stream of ``http`` (both its sync and async byte-stream bases,
    as the library's own ``ByteStream`` is), so one body serves the sync and async SDK."""
    return type("ReplayBody", (ReplayBody, http.SyncByteStream, http.AsyncByteStream), {})


@functools.cache
def http_library(sdk: str) -> Any:
    """The HTTP library the installed SDK ``sdk`` is built on: ``httpx2`` (openai 3.x,
    anthropic 2.x) or ``httpx`` (earlier)."""
    base_client = importlib.import_module(f"{sdk}._base_client")
    module = getattr(base_client, "httpx2", None) or getattr(base_client, "httpx", None)
    if module is None:  # pragma: no cover - an SDK on some other HTTP library
        import httpx2 as module
    return module


def http_response(
    http: Any,
    *,
    url: str,
    status: int = 200,
    body: Any = None,
    pieces: Sequence[bytes] | None = None,
    headers: Mapping[str, str] | None = None,
    method: str = "POST",
) -> Any:
    """A response of ``http`` that no network produced: JSON ``body``, or a stream of SSE
    ``pieces``."""
    request = http.Request(method, url)
    merged = {k.lower(): v for k, v in (headers or {}).items()}
    if pieces is not None:
        merged.setdefault("content-type", "text/event-stream; charset=utf-8")
        stream = replay_body_class(http)(pieces)
        return http.Response(status, headers=merged, stream=stream, request=request)
    if isinstance(body, str):
        content = body.encode()
        merged.setdefault("content-type", "text/plain; charset=utf-8")
    else:
        content = b"" if body is None else orjson.dumps(body)
        merged.setdefault("content-type", "application/json")
    response = http.Response(status, headers=merged, content=content, request=request)
    response.elapsed = timedelta(0)
    return response


@functools.cache
def _client_bases(sdk: str) -> tuple[type, type]:
    base_client = importlib.import_module(f"{sdk}._base_client")
    return base_client.SyncAPIClient, base_client.AsyncAPIClient


def is_async(sdk: str, client: Any, expected: str) -> bool:
    """Whether ``client`` is an async client of ``sdk``. The SDK's client base classes decide,
    so subclasses (Azure, Bedrock, Vertex, ...) are clients too; anything else is a TypeError
    saying ``expected``."""
    sync_base, async_base = _client_bases(sdk)
    if isinstance(client, async_base):
        return True
    if isinstance(client, sync_base):
        return False
    raise TypeError(f"expected {expected} client, not {type(client).__name__}")


def client_url(client: Any, default_base: str, path: str) -> str:
    """The URL of ``path`` under the client's base URL (``default_base`` without a client)."""
    base = str(getattr(client, "base_url", None) or default_base)
    if not base.endswith("/"):
        base += "/"
    return base + path


def chunk_data(chunk: Any) -> Mapping[str, Any]:
    """The ``data`` of a recorded stream chunk (``{"event", "data"}``), or a ValueError."""
    if not isinstance(chunk, Mapping) or not isinstance(chunk.get("data"), Mapping):
        raise ValueError("a recorded chunk is a mapping with a 'data' mapping")
    return cast("Mapping[str, Any]", chunk["data"])


def sse_event(event: str | None, data: Mapping[str, Any]) -> bytes:
    """One server-sent event carrying ``data`` as JSON, named ``event`` when it has a name."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


def sdk_stream(
    sdk: str,
    stream_cls: Any,
    item: Any,
    pieces: Sequence[bytes],
    *,
    client: Any,
    url: str,
    headers: Mapping[str, str] | None,
) -> Any:
    """The SDK's own ``stream_cls`` of ``item`` over the SSE ``pieces``, as a streamed call
    returns it. Nothing is sent: ``client`` is only the SDK's context for decoding."""
    response = http_response(http_library(sdk), pieces=pieces, headers=headers, url=url)
    stream = stream_cls(cast_to=item, response=response, client=client)
    # The body is standard server-sent events, whatever framing the client's own transport uses
    # (Bedrock's decoder expects AWS event-stream framing).
    stream._decoder = importlib.import_module(f"{sdk}._streaming").SSEDecoder()
    return stream


def stream_rebuilder(
    sdk: str,
    pieces: Callable[[Any, Sequence[Mapping[str, Any]]], Sequence[bytes]],
    types: Callable[[Any, Any], tuple[Any, Any]],
    url: Callable[[Any, Any], str],
    returned_by: str,
) -> Callable[..., Any]:
    """A codec's ``rebuild_stream(kind, chunks, *, client, headers=None)``: the SDK's own
    ``Stream`` (sync client) or ``AsyncStream`` (async client) over the recorded ``chunks``, as
    ``returned_by`` returns it. ``pieces(kind, chunks)`` are the SSE pieces, ``types(kind,
    client)`` the stream class and item type, ``url(kind, client)`` the request's URL."""

    def rebuild_stream(
        kind: Any,
        chunks: Sequence[Mapping[str, Any]],
        *,
        client: Any,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        stream_cls, item = types(kind, client)
        body = pieces(kind, chunks)
        return sdk_stream(
            sdk, stream_cls, item, body, client=client, url=url(kind, client), headers=headers
        )

    rebuild_stream.__doc__ = (
        f"The SDK's own ``Stream`` or ``AsyncStream`` of the recorded ``chunks``, as "
        f"``{returned_by}`` returns it. Nothing is sent: ``client`` is only the SDK's context "
        "for decoding (its SSE decoder and response validation setting)."
    )
    return rebuild_stream


async def _ready(value: Any) -> Any:
    return value


def stream_manager(
    stream: Any, sync_cls: Callable[..., _S], async_cls: Callable[..., _A], **options: Any
) -> _S | _A:
    """The SDK's stream manager (what ``.stream(...)`` returns) over a rebuilt ``stream``: for an
    ``AsyncStream`` the async one, which awaits it; else the sync one, which calls for it, as
    the SDK's own wrappers do."""
    if hasattr(type(stream), "__aiter__"):
        return async_cls(_ready(stream), **options)
    return sync_cls(lambda: stream, **options)


def raw_http_response(
    sdk: str,
    *,
    url: str,
    headers: Mapping[str, str] | None,
    pieces: Sequence[bytes] | None,
    body: Mapping[str, Any] | None,
    request_id: Any,
    request_id_header: str,
) -> Any:
    """The HTTP response under a rebuilt raw response: the SSE ``pieces`` of a streamed call,
    else the recorded ``body`` with the recorded request id in ``request_id_header``."""
    kept = dict(headers or {})
    if pieces is None:
        if body is None:
            raise ValueError("rebuild_raw_response needs the recorded result or its chunks")
        if isinstance(request_id, str):
            kept.setdefault(request_id_header, request_id)
        return http_response(http_library(sdk), body=body, headers=kept, url=url)
    return http_response(http_library(sdk), pieces=pieces, headers=kept, url=url)


def recorded_body(recorded: Any, what: str, expected: str, field: str) -> Mapping[str, Any]:
    """The ``body`` of a response recording (``{"object", "body", "request_id"}``), checked to
    be a ``what`` whose ``field`` (``object`` or ``type``) is ``expected`` where it is set."""
    if type(recorded) is not dict and not isinstance(recorded, Mapping):
        raise TypeError(f"a recorded {what} is a mapping, not {type(recorded).__name__}")
    body = recorded.get("body")
    if type(body) is not dict and not isinstance(body, Mapping):
        raise ValueError(f"the recording of a {what} has no body")
    if recorded.get("object", expected) != expected or body.get(field, expected) != expected:
        raise ValueError(f"the recording is a {recorded.get('object')!r}, not a {expected!r}")
    return body


def word_pieces(text: str) -> list[str]:
    """``text`` cut into the pieces a stream made from a plain-text answer sends: its words,
    each after the first with the space before it, so the pieces join back to ``text``."""
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)] if text else []


# --------------------------------------------------------------------------------------------- recording


def kept_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    safe: frozenset[str],
    prefix: str | None = None,
) -> dict[str, str]:
    """The response headers a recording may keep: those in ``safe`` and the rate-limit ones
    starting with ``prefix`` (if the API has them), names lowercased."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    kept: dict[str, str] = {}
    for key, value in items:
        name = key.lower()
        if name in safe or (prefix is not None and name.startswith(prefix)):
            kept[name] = value
    return kept


def error_status(status: Any) -> int:
    """``status`` if it is an HTTP error status, else a ValueError that says what it must be."""
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
        raise ValueError(f"an error status is an integer from 400 to 599, not {status!r}")
    return status


def error_record(
    exc: BaseException,
    sdk: ModuleType,
    headers: Callable[[Any], dict[str, str]],
    status_body: Callable[[Any], Any],
) -> dict[str, Any]:
    """The recording of a failed call: ``{"type", "message", "status", "body", "headers",
    "timeout"}``; ``status`` is None for a failure without a response (a timeout, a dropped
    connection). ``status_body`` gives an error response's body as the server sent it."""
    status: int | None = None
    body: Any = None
    kept: dict[str, str] = {}
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        kept = headers(exc.response.headers)
        body = status_body(exc)
    elif isinstance(exc, sdk.APIError):
        body = exc.body
    return {
        "type": type(exc).__name__,
        "message": str(getattr(exc, "message", None) or exc),
        "status": status,
        "body": body,
        "headers": kept,
        "timeout": isinstance(exc, sdk.APITimeoutError),
    }


def raw_response_mode(
    extra_headers: Mapping[str, Any] | None, header: str, raw: tuple[str, ...]
) -> Literal["raw", "stream"] | None:
    """Which wrapper made a call: ``"raw"`` for ``.with_raw_response``, ``"stream"`` for
    ``.with_streaming_response``, None for a plain call. The wrappers say so in ``extra_headers``
    (``header`` set to one of ``raw``, or to ``"stream"``)."""
    value = None
    for key, item in (extra_headers or {}).items():
        if key.lower() == header.lower():
            value = item
    if value in raw:
        return "raw"
    if value == "stream":
        return "stream"
    return None


# --------------------------------------------------------------------------------------------- rebuilding


@functools.cache
def _recorded_adapter(model: type) -> Any:
    import pydantic
    from typing_extensions import NotRequired, TypedDict

    # Made at run time, one per SDK model, hence the functional form.
    recorded = TypedDict(  # type: ignore[misc]  # noqa: UP013
        f"Recorded{model.__name__}",
        {"object": NotRequired[str], "body": model, "request_id": NotRequired[str | None]},
    )
    return pydantic.TypeAdapter(recorded)


def load_response(
    model: type,
    recorded: Mapping[str, Any] | bytes,
    validation_error: type[Exception],
    body: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    expected: str,
) -> tuple[Any, Any]:
    """The ``model`` object and the request id of a response recording (``{"object", "body",
    "request_id"}``), or of its JSON text.

    JSON text is validated straight into ``model``: no intermediate dicts, which are most of
    what rebuilding a served response costs otherwise. What that refuses (and a mapping) takes
    the mapping path: ``body(recording)`` says what is wrong with it, and :func:`load`
    constructs what the live SDK would accept.
    """
    mapping: Mapping[str, Any]
    if isinstance(recorded, bytes):
        try:
            data = _recorded_adapter(model).validate_json(recorded)
        except validation_error:
            data = None
        if data is not None and data.get("object", expected) == expected:
            return data["body"], data.get("request_id")
        mapping = orjson.loads(recorded)
    else:
        mapping = recorded
    return load(model, body(mapping), validation_error), mapping.get("request_id")


def load(model: Any, data: Mapping[str, Any], validation_error: type[Exception]) -> Any:
    """``model`` from recorded wire data: validated (fast, and the SDK's strict path), or else
    constructed without validation, as the SDK itself builds responses live, so a recording the
    live SDK would accept is never refused."""
    try:
        return model.model_validate(data)
    except validation_error:
        return model.construct(**data)


def status_class(sdk: ModuleType, status: int, own: Mapping[int, str] | None = None) -> Any:
    """The SDK's exception class for an error response of ``status``, from a fixed table (never
    from a class name in a recording). ``own`` names classes an SDK has for further statuses;
    each is used only if the SDK has it and it subclasses what the table gives."""
    table: dict[int, Any] = {
        400: sdk.BadRequestError,
        401: sdk.AuthenticationError,
        403: sdk.PermissionDeniedError,
        404: sdk.NotFoundError,
        409: sdk.ConflictError,
        422: sdk.UnprocessableEntityError,
        429: sdk.RateLimitError,
    }
    if status in table:
        return table[status]
    base = sdk.InternalServerError if status >= 500 else sdk.APIStatusError
    refined = getattr(sdk, own[status], None) if own and status in own else None
    if isinstance(refined, type) and issubclass(refined, base):
        return refined
    return base


def rebuilt_error(
    recorded: Mapping[str, Any],
    sdk: ModuleType,
    http: Any,
    url: str,
    for_status: Callable[..., Any],
) -> Any:
    """The exception of a recorded failure (from :func:`error_record`): ``for_status`` (the
    codec's ``error_for_status``) for one with a status, else the SDK's ``APITimeoutError`` or
    ``APIConnectionError``."""
    status = recorded.get("status")
    if status is not None:
        return for_status(int(status), recorded.get("body"), recorded.get("headers") or {}, url=url)
    request = http.Request("POST", url)
    if recorded.get("timeout") is True:
        return sdk.APITimeoutError(request=request)
    message = recorded.get("message")
    return sdk.APIConnectionError(
        message=message if isinstance(message, str) and message else "Connection error.",
        request=request,
    )
