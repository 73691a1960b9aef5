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
from typing import Any, Literal

import orjson


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
