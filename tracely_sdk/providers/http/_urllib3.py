"""The hook on urllib3: ``HTTPConnectionPool.urlopen``, where every request of urllib3 is sent.

``requests`` (its ``HTTPAdapter.send``), ``botocore`` (``URLLib3Session.send``, so every boto3
client) and urllib3's own ``PoolManager`` and ``request()`` all call ``urlopen`` on a
connection pool (HTTPS pools inherit it), once per request; urllib3's own retries and
redirects call it again from inside, and are the same call. A model call
(:meth:`ClientHook.wire_call`) is intercepted there; anything else goes on untouched.

Live, a body read inside ``urlopen`` (``preload_content=True``, urllib3's default) is recorded
at once. One left unread (``preload_content=False``, what requests and botocore ask for) is
recorded as the caller reads it, through whichever of the response's public reading methods it
uses (``stream()``, ``read()``, ``read1()``, ``read_chunked()``, and ``data``, iteration and
``readinto`` through them; the response becomes an instance of a subclass of its class that
tees them): the call is recorded when the body is read to its end, closed, or dropped. A body
that fails midway (a connection cut) records the call as that failure, raised again by
``urlopen`` on replay. On replay the caller is given a real ``urllib3.HTTPResponse`` of the recorded bytes,
so requests and botocore make their own responses, errors and event streams of it.
"""

from __future__ import annotations

import http.client
import importlib
import io
import urllib.parse
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tracely_sdk.providers._patching import intercept
from tracely_sdk.providers._streams import teed_body
from tracely_sdk.providers.http._client import ClientHook, served_headers, served_status
from tracely_sdk.providers.http._exchange import Target, WireCall, served_pieces

# urlopen(method, url, body, headers, retries, redirect, assert_same_host, timeout,
#         pool_timeout, release_conn, chunked, body_pos, preload_content, decode_content)
_POSITIONS = {"method": 0, "url": 1, "body": 2, "preload_content": 12, "decode_content": 13}


def _argument(args: tuple[Any, ...], kwargs: Mapping[str, Any], name: str, default: Any) -> Any:
    index = _POSITIONS[name]
    return args[index] if len(args) > index else kwargs.get(name, default)


@dataclass(frozen=True, slots=True)
class Sent:
    """What a replayed response is made for: the request, and how its caller reads bodies."""

    method: str
    url: str
    preload_content: bool
    decode_content: bool


def _decoding(response: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
    """Whether a reading method called with ``args`` returns the body decoded: its
    ``decode_content`` (the second parameter of each), else the response's."""
    flag = args[1] if len(args) > 1 else kwargs.get("decode_content")
    return bool(response.decode_content if flag is None else flag)


def _reads_all(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
    amount = args[0] if args else kwargs.get("amt")
    return amount is None or amount < 0


class _Tee:
    """The recording of one live response's body, kept on the response (``_tracely_tee``) and
    fed by its reading methods (:func:`_teed_class`).

    Only the outermost reading call records (``stream()`` reads through ``read()``: the
    recorder is active while it pulls).
    """

    __slots__ = ("recorder", "released", "spec")

    def __init__(self, recorder: Any, spec: WireCall) -> None:
        self.recorder = recorder
        self.spec = spec
        self.released = False  # the connection went back to the pool while a read pulled

    def _decoded(self, response: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
        """Whether this read returns decoded pieces of a body sent encoded."""
        if _decoding(response, args, kwargs) and self.spec.encoding:
            # No content-encoding is left to undo, and urllib3 may hold decoded bytes back
            # until a later read.
            self.spec.encoding = None
            return True
        return False

    def read(self, response: Any, read: Any, args: Any, kwargs: Any, *, whole: bool) -> Any:
        recorder = self.recorder
        if recorder.active or recorder.done:
            return read(*args, **kwargs)
        held_back = self._decoded(response, args, kwargs)
        with recorder:
            data = read(*args, **kwargs)
        if data:
            recorder.add(data)
        if not data or whole or (self.released and not held_back):
            recorder.finish()
        return data

    def pieces(self, response: Any, pieces: Any, args: Any, kwargs: Any) -> Any:
        recorder = self.recorder
        if recorder.active or recorder.done:
            return pieces(*args, **kwargs)
        self._decoded(response, args, kwargs)
        return teed_body(pieces(*args, **kwargs), recorder)

    def end(self, end: Any, args: Any, kwargs: Any) -> Any:
        try:
            return end(*args, **kwargs)
        finally:
            if self.recorder.active:
                self.released = True
            else:
                self.recorder.closed()


_teed: dict[type, type] = {}


def _teed_class(cls: type) -> type:
    """``cls`` with its reading methods feeding the response's :class:`_Tee`: a subclass, so
    that each method is bound to (and keeps alive) the response it reads, as the original
    would (``urllib3.request(...).read()`` holds nothing else)."""
    teed = _teed.get(cls)
    if teed is not None:
        return teed

    class Teed(cls):  # type: ignore[misc]
        def read(self, *args: Any, **kwargs: Any) -> Any:
            whole = _reads_all(args, kwargs)
            return self._tracely_tee.read(self, super().read, args, kwargs, whole=whole)

        def read1(self, *args: Any, **kwargs: Any) -> Any:
            return self._tracely_tee.read(self, super().read1, args, kwargs, whole=False)

        def stream(self, *args: Any, **kwargs: Any) -> Any:
            return self._tracely_tee.pieces(self, super().stream, args, kwargs)

        def read_chunked(self, *args: Any, **kwargs: Any) -> Any:
            return self._tracely_tee.pieces(self, super().read_chunked, args, kwargs)

        def release_conn(self) -> None:
            self._tracely_tee.end(super().release_conn, (), {})

        def close(self) -> None:
            self._tracely_tee.end(super().close, (), {})

    Teed.__name__, Teed.__qualname__, Teed.__module__ = (
        cls.__name__,
        cls.__qualname__,
        cls.__module__,
    )
    _teed[cls] = Teed
    return Teed


def _tee(response: Any, recorder: Any, spec: WireCall) -> None:
    """Record ``response``'s body as its caller reads it, by any of its reading methods; and,
    dropped unread, when it is freed."""
    response._tracely_tee = _Tee(recorder, spec)
    response.__class__ = _teed_class(type(response))
    weakref.finalize(response, recorder.finish)


# The library's exceptions a recorded failure may be raised as again, looked up only in this
# fixed set; a name resolution failure is the connection failure it is a kind of.
_ERRORS = {
    "NewConnectionError": "NewConnectionError",
    "NameResolutionError": "NewConnectionError",
    "ConnectTimeoutError": "ConnectTimeoutError",
    "ReadTimeoutError": "ReadTimeoutError",
    "ProtocolError": "ProtocolError",
    "MaxRetryError": "MaxRetryError",
}


class URLLib3(ClientHook):
    """The hook on urllib3."""

    def _targets(self) -> list[tuple[type, str, Callable[..., Any]]]:
        urllib3 = importlib.import_module(self.name)
        return [(urllib3.HTTPConnectionPool, "urlopen", self._urlopen)]

    def _spec(self, pool: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> WireCall | None:
        try:
            method = str(_argument(args, kwargs, "method", "GET")).upper()
            url = str(_argument(args, kwargs, "url", "/"))
            parts = urllib.parse.urlsplit(url)
            # A URL given whole (through a proxy, or botocore's for http) names its own host.
            scheme = parts.scheme or str(pool.scheme)
            host = parts.hostname or str(pool.host)
            port = parts.port if parts.hostname else pool.port
            content = _argument(args, kwargs, "body", None)
        except Exception:
            return None
        preload = bool(_argument(args, kwargs, "preload_content", True))
        sent = Sent(method, url, preload, bool(_argument(args, kwargs, "decode_content", True)))
        return self.wire_call(
            sent,
            Target(method, scheme, host, port, urllib.parse.unquote(parts.path)),
            content,
            provider=f"{self.name}.HTTPConnectionPool.urlopen",
            is_async=False,
            stream=not preload,
            sent_path=parts.path,
        )

    def _urlopen(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        spec = self._spec(instance, args, kwargs) if self.watching() else None
        if spec is None:
            return wrapped(*args, **kwargs)
        return intercept(spec, lambda: wrapped(*args, **kwargs))

    # -- what a WireCall asks ----------------------------------------------------------------

    def response_head(self, response: Any) -> tuple[int, list[tuple[str, str]]]:
        return int(response.status), [(str(k), str(v)) for k, v in response.headers.items()]

    def read_body(self, response: Any, encoding: str | None) -> bytes | None:
        data: bytes = response.data
        return data if response.decode_content else self.decoded(data, encoding)

    def tee_body(self, response: Any, recorder: Any, is_async: bool) -> None:
        _tee(response, recorder, recorder.spec)

    def decoded(self, raw: bytes, encoding: str | None) -> bytes:
        if not encoding:
            return raw
        headers = {"content-encoding": encoding}
        content: bytes = self.module.HTTPResponse(body=io.BytesIO(raw), headers=headers).data
        return content

    def served_response(
        self, request: Any, output: Mapping[str, Any], *, stream: bool, session: Any
    ) -> Any:
        status = served_status(output)
        content = b"".join(served_pieces(output))
        return self.module.HTTPResponse(
            body=io.BytesIO(content),
            headers=dict(served_headers(output, len(content))),
            status=status,
            version=11,
            reason=http.client.responses.get(status, ""),
            preload_content=request.preload_content,
            decode_content=request.decode_content,
            request_method=request.method,
            request_url=request.url,
        )

    def transport_error(self, error: Mapping[str, Any], request: Any) -> BaseException | None:
        errors = self.module.exceptions
        name = _ERRORS.get(str(error.get("type")))
        message = str(error.get("message"))
        if name == "NewConnectionError":
            return errors.NewConnectionError(None, message.split(">: ", 1)[-1])  # type: ignore[no-any-return]
        if name in ("ConnectTimeoutError", "ProtocolError"):
            return getattr(errors, name)(message)  # type: ignore[no-any-return]
        if name == "ReadTimeoutError":
            return errors.ReadTimeoutError(None, request.url, message)  # type: ignore[no-any-return]
        if name == "MaxRetryError":
            reason = error.get("reason")
            cause = self.transport_error(reason, request) if isinstance(reason, Mapping) else None
            return errors.MaxRetryError(None, request.url, cause)  # type: ignore[no-any-return]
        return None
