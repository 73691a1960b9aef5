"""The HTTP layer: Starlette on uvicorn (h11), with the limits a public endpoint needs.

Connection handling and HTTP/1.1 framing are uvicorn's and h11's: h11 is the strict parser
(conflicting ``Content-Length`` headers, malformed chunking and oversized heads are refused
with 400 before the application sees them), and uvicorn skips the unread rest of a body
before it reads the next request on a connection. Routing, requests and responses are
Starlette's. What a public endpoint needs beyond that is added here, in one ASGI middleware
(:class:`LimitsMiddleware`) and one connection wrapper (:class:`_Connection`) around uvicorn's
h11 protocol:

- a deadline for a request's head, counted from its first byte (or from the connection's
  opening), so that an idle or trickling client costs one connection for that long and never a
  request slot; a deadline for its body, read in the event loop before a slot is taken;
- a cap on open connections: at the cap an idle connection gives way to a new one, and when
  every one has a request in flight the new one is answered 503, the probes excepted;
- ``Transfer-Encoding`` together with ``Content-Length`` is refused (RFC 9112 §6.1);
- a ``Content-Length`` over the limit is answered 413 before a byte of the body is read (the
  connection stays usable, uvicorn skipping what the client still sends, unless the body is
  far over it); a chunked body is answered 413 once it passes the limit; a body that ends
  before its ``Content-Length`` is answered 400, one that stops arriving 408;
- a connection closed after an answer lingers briefly, reading and dropping, so that a
  client still sending reads the answer instead of a reset;
- JSON error bodies for all of these.

The application decides what needs a token before the body is read, reads it with
:func:`read_body`, and answers with Starlette responses (:func:`json_response`).
Importing this module needs none of the web stack: the server package imports without it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

if TYPE_CHECKING:
    import uvicorn
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = [
    "PROBES",
    "Guarded",
    "HTTPError",
    "HTTPServer",
    "Limits",
    "LimitsMiddleware",
    "body_of",
    "client_of",
    "error_body",
    "has_body",
    "header",
    "json_response",
    "media_type",
    "raw_path",
    "read_body",
    "response",
]

logger = logging.getLogger("tracely.server")

_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "timeout",
    409: "conflict",
    411: "bad_request",
    413: "too_large",
    414: "too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    431: "too_large",
    500: "internal",
    501: "not_implemented",
    503: "unavailable",
    505: "bad_request",
}
# A body over the limit by at most this factor is skipped by uvicorn after the 413, so that the
# connection stays usable; a larger one is answered and the connection closed.
_DRAIN_FACTOR = 4
# An unread body up to this size is skipped before the next request on the connection; a
# request refused unread with a longer one (or a chunked one) is answered and closed instead,
# so that a refused client cannot keep the connection busy sending.
_SKIP_LIMIT = 64 * 1024
_MAX_QUERY_FIELDS = 32
_MAX_HEADERS = 100
_MAX_TARGET = 8192
# A connection closed while its client may still be sending keeps reading (and dropping) for
# this long after the answer, so that the client reads the answer instead of a reset.
_LINGER_SECONDS = 2.0
PROBES = frozenset({"/healthz", "/readyz"})
_CONNECTION = "tracely.connection"
_BODY = "tracely.body"


class HTTPError(Exception):
    """An answer other than success: status, error code, message, optional detail and headers."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        detail: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        close: bool = False,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or _STATUS_CODES.get(status, "bad_request")
        self.message = message
        self.detail = dict(detail) if detail else None
        self.headers = dict(headers or {})
        if close:
            self.headers["Connection"] = "close"
        self.field = field  # the offending field, for OTLP's BadRequest detail


def error_body(status: int, message: str, code: str | None = None, detail: Any = None) -> bytes:
    """The JSON error envelope ``{"error": {"code", "message", "detail"?}}``."""
    error: dict[str, Any] = {"code": code or _STATUS_CODES.get(status, "bad_request")}
    error["message"] = message
    if detail is not None:
        error["detail"] = detail
    return orjson.dumps({"error": error})


# -- requests and responses ---------------------------------------------------------------------


def response(
    status: int,
    body: bytes = b"",
    media_type: str | None = "application/json",
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A Starlette response with a body already encoded."""
    from starlette.responses import Response

    return Response(body, status, dict(headers or {}), media_type)


def json_response(status: int, value: Any, headers: Mapping[str, str] | None = None) -> Response:
    """A JSON answer (orjson: what the API has always written, and fast)."""
    return response(status, orjson.dumps(value), "application/json", headers)


def header(request: Request, name: str) -> str:
    """A request header, stripped ("" when absent)."""
    return request.headers.get(name, "").strip()


def media_type(request: Request) -> str:
    return header(request, "Content-Type").split(";", 1)[0].strip().lower()


def client_of(request: Request) -> str:
    """The client's address (a trusted proxy's ``X-Forwarded-For`` already applied)."""
    client = request.client
    return str(client.host) if client else "?"


def raw_path(request: Request) -> str:
    """The path as sent (percent-encoded), for messages and links back to it."""
    raw = request.scope.get("raw_path")
    return raw.decode("latin-1") if raw else request.url.path


async def read_body(request: Request) -> bytes:
    """Read the body within the limits of :class:`Limits` (an :class:`HTTPError` past them)
    and keep it for :func:`body_of` (the handlers run in worker threads)."""
    body = await request.body()
    request.scope[_BODY] = body
    return body


def body_of(request: Request) -> bytes:
    """The body :func:`read_body` read (empty when the request has none)."""
    return bytes(request.scope.get(_BODY, b""))


def has_body(scope: Mapping[str, Any]) -> bool:
    """Whether the request says it has a body (a chunked one, or a Content-Length above 0)."""
    for name, value in scope.get("headers") or ():
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return True
    return False


# -- the middleware -----------------------------------------------------------------------------


class Guarded(Protocol):
    """The application behind :class:`LimitsMiddleware`."""

    @property
    def draining(self) -> bool:
        """Shutting down: every answer closes its connection."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None: ...

    def error_response(self, request: Request, error: HTTPError) -> Response:
        """The answer for an error found here (413, 408, 503...), in the route's terms."""


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int
    max_connections: int = 256
    head_timeout: float = 10.0
    body_timeout: float = 60.0
    keep_alive_timeout: float = 15.0
    max_head_bytes: int = 32 * 1024


class LimitsMiddleware:
    """The one ASGI middleware: what no uvicorn option does for a request. It checks the head
    (header count, target length, framing, a ``Content-Length`` over the limit), bounds the
    body's size and time as the application reads it, and closes a connection whose unread
    body may be long. Pure ASGI: the body is never buffered here."""

    def __init__(self, app: Guarded, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; websockets are not served
        connection: _Connection | None = (scope.get("state") or {}).get(_CONNECTION)
        if connection is not None:
            connection.request_started(scope)
        try:
            await self._serve(scope, receive, send, connection)
        finally:
            if connection is not None:
                connection.request_done()

    async def _serve(
        self, scope: Any, receive: Any, send: Any, connection: _Connection | None
    ) -> None:
        body = _Body(self.limits, scope, receive, connection)
        try:
            self._check_head(scope, connection)
        except HTTPError as exc:
            await self._refuse(scope, exc, body, send)
            return
        status = 0

        async def sending(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if self.app.draining or body.unread_may_be_long():
                    message = {**message, "headers": [*message["headers"], _CLOSE]}
            await send(message)

        try:
            await self.app(scope, body.receive, sending)
        finally:
            # The path without its query string: nothing a client put there is written to a log.
            logger.debug(
                "%s %s %s %s",
                (scope.get("client") or ("?",))[0],
                scope.get("method"),
                str(scope.get("path", ""))[:200],
                status,
            )

    def _check_head(self, scope: Any, connection: _Connection | None) -> None:
        probe = scope.get("path") in PROBES and scope.get("method") in ("GET", "HEAD")
        if connection is not None and connection.over_cap and not probe:
            # Every connection the cap allows is busy with a request: this one is answered (a
            # probe in full) and closed.
            raise HTTPError(
                503,
                "the server has as many connections open as it may",
                headers={"Retry-After": "1"},
                close=True,
            )
        headers = scope.get("headers") or ()
        if len(headers) > _MAX_HEADERS:
            raise HTTPError(
                431, f"the request has more than {_MAX_HEADERS} header fields", close=True
            )
        path = scope.get("raw_path") or b""
        query = scope.get("query_string") or b""
        if len(path) + len(query) > _MAX_TARGET:
            raise HTTPError(414, f"the request target is longer than {_MAX_TARGET} bytes")
        if query.count(b"&") >= _MAX_QUERY_FIELDS:
            raise HTTPError(400, f"too many query parameters (at most {_MAX_QUERY_FIELDS})")
        try:
            _unquote_strict(path)
        except UnicodeDecodeError:
            raise HTTPError(400, "the request path is not valid UTF-8 once decoded") from None
        names = {name for name, _ in headers}
        if b"transfer-encoding" in names and b"content-length" in names:
            # Two framings: a proxy in front may pick the other one, so the rest of the
            # connection cannot be trusted (RFC 9112 §6.1).
            raise HTTPError(
                400,
                "the request has both Transfer-Encoding and Content-Length; send one",
                close=True,
            )
        declared = _declared_length(scope)
        limit = self.limits.max_body_bytes
        if declared is not None and declared > limit:
            # Answered before a byte of the body is read: a client that waits for the answer
            # (Expect: 100-continue) sends nothing; one that sends anyway is skipped, or, far
            # over the limit, closed on.
            raise HTTPError(
                413,
                f"the body is {declared} bytes; the limit is {limit} bytes",
                detail={"limit": limit},
                close=declared > limit * _DRAIN_FACTOR,
            )
        if len(path) > 1 and path.endswith(b"/"):
            # A trailing slash names the same resource.
            scope["raw_path"] = path.rstrip(b"/") or b"/"
            scope["path"] = str(scope.get("path", "/")).rstrip("/") or "/"

    async def _refuse(self, scope: Any, error: HTTPError, body: _Body, send: Any) -> None:
        from starlette.requests import Request

        answer = self.app.error_response(Request(scope), error)
        if self.app.draining or (body.unread_may_be_long() and error.status != 413):
            answer.headers["connection"] = "close"
        await answer(scope, body.receive, send)


_CLOSE = (b"connection", b"close")


def _unquote_strict(path: bytes) -> str:
    import urllib.parse

    return urllib.parse.unquote_to_bytes(path).decode("utf-8")


def _declared_length(scope: Mapping[str, Any]) -> int | None:
    """``Content-Length`` (h11 has checked it is a number), or None."""
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class _Body:
    """The request's ``receive``, within the body's size limit and deadline."""

    def __init__(
        self, limits: Limits, scope: Any, receive: Any, connection: _Connection | None
    ) -> None:
        self._limits = limits
        self._receive = receive
        self._connection = connection
        self._declared = _declared_length(scope)
        self._has_body = has_body(scope)
        self._size = 0
        self._done = not self._has_body
        self._deadline: float | None = None

    def unread_may_be_long(self) -> bool:
        """Whether answering now leaves a body that may be long unread (then the connection
        is closed rather than the rest of the body skipped)."""
        if self._done:
            return False
        return self._declared is None or self._declared - self._size > _SKIP_LIMIT

    async def receive(self) -> Any:
        if self._done:
            return await self._receive()
        loop = asyncio.get_running_loop()
        if self._deadline is None:
            self._deadline = loop.time() + self._limits.body_timeout
        remaining = self._deadline - loop.time()
        if remaining <= 0:
            raise _body_timeout(self._limits.body_timeout)
        connection = self._connection
        if connection is not None and connection.too_large.done():
            raise self._too_large()
        receiving = asyncio.ensure_future(self._receive())
        waiting: set[asyncio.Future[Any]] = {receiving}
        if connection is not None:
            waiting.update((connection.ended, connection.too_large))
        await asyncio.wait(waiting, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        if connection is not None and connection.too_large.done():
            receiving.cancel()
            raise self._too_large()
        if not receiving.done():
            receiving.cancel()
            if connection is not None and connection.ended.done():
                raise self._ended()
            raise _body_timeout(self._limits.body_timeout)
        message = receiving.result()
        if message["type"] == "http.disconnect":
            raise self._ended()
        self._size += len(message.get("body", b""))
        if self._size > self._limits.max_body_bytes:
            raise self._too_large()
        if not message.get("more_body", False):
            self._done = True
        return message

    def _too_large(self) -> HTTPError:
        # A chunked body: how much more is coming is not known, so it is not waited for.
        limit = self._limits.max_body_bytes
        return HTTPError(
            413, f"the body is more than {limit} bytes", detail={"limit": limit}, close=True
        )

    def _ended(self) -> HTTPError:
        announced = (
            f" of the {self._declared} its Content-Length announced"
            if self._declared is not None
            else ""
        )
        return HTTPError(
            400,
            f"the body ended after {self._size} bytes{announced}; send the whole body",
            close=True,
        )


def _body_timeout(seconds: float) -> HTTPError:
    return HTTPError(
        408,
        f"the body did not arrive within {seconds:g}s; send it at once or in smaller requests",
        close=True,
    )


# -- connections --------------------------------------------------------------------------------


class _Connections:
    """The open connections, oldest first, and the cap on them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[_Connection, None] = {}

    def opened(self, connection: _Connection) -> bool:
        """Count a new connection; True when it is over the cap. At the cap, the oldest
        connection without a request in flight (idle first, else one still sending its head)
        is closed to make room: idle connections can never keep a client, or a probe, out."""
        over = False
        if len(self._open) >= self.limit:
            idle = next((c for c in self._open if not (c.busy or c.sending)), None)
            if idle is None:
                idle = next((c for c in self._open if not c.busy), None)
            if idle is not None:
                self.closed(idle)
                idle.close()
            else:
                over = True
        self._open[connection] = None
        return over

    def closed(self, connection: _Connection) -> None:
        self._open.pop(connection, None)


class _Connection(asyncio.Protocol):
    """One client connection: uvicorn's h11 protocol inside, and what no uvicorn option does
    around it: the cap on connections, a deadline for each request's head counted from its
    first byte (or from the connection's opening), and a lingering close.

    uvicorn's ``timeout_keep_alive`` starts only after a first answer and stops at any byte, so
    a client that never sends a byte, or sends one a second, would hold a connection for ever;
    and uvicorn's ``limit_concurrency`` counts idle connections too and answers every request,
    probes included, 503 while they are open. The ASGI layer tells this object when a request
    starts and ends (through the scope's ``state``).

    ASGI hands the application a chunked body's bytes, never the sizes its chunks announce, and
    h11 keeps them private: so a chunked request's bytes are also read here for those sizes
    (:class:`_ChunkSizes`), and a body announcing more than the limit is answered 413 at once.
    """

    def __init__(
        self, inner: Callable[[dict[str, Any]], Any], connections: _Connections, limits: Limits
    ) -> None:
        self._make_inner = inner
        self._connections = connections
        self._limits = limits
        self._timer: asyncio.TimerHandle | None = None
        self.busy = False
        self.sending = False  # some of the next request's head has arrived
        self.eof = False
        self.over_cap = False
        self._lingering = False
        # This request's bytes so far (its head first), until a chunked body is recognised.
        self._recent: bytearray | None = bytearray()
        self._chunks: _ChunkSizes | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self._loop = asyncio.get_running_loop()
        self.ended: asyncio.Future[None] = self._loop.create_future()
        self.too_large: asyncio.Future[None] = self._loop.create_future()
        self.over_cap = self._connections.opened(self)
        self.inner = self._make_inner({_CONNECTION: self})
        self.inner.connection_made(_LingeringTransport(transport, self))
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # the answer is sent; what the client still sends is dropped
        if not self.busy:
            self.sending = True
            if self._timer is None:
                self._arm()  # the first byte of the next request on this connection
            if self._recent is not None:
                self._recent += data
                if len(self._recent) > self._limits.max_head_bytes + _SKIP_LIMIT:
                    self._recent = None
        elif self._chunks is not None:
            self._watch(data)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        if self.busy and not self._lingering:
            # The client has stopped sending, mid-request: it is still answered (a body
            # shorter than it said is a 400), so the connection stays open for writing.
            self.eof = True
            if not self.ended.done():
                self.ended.set_result(None)
            return True
        if self._lingering:
            self.transport.close()
            return None
        return self.inner.eof_received()  # type: ignore[no-any-return]

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._connections.closed(self)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def request_started(self, scope: Mapping[str, Any]) -> None:
        self.busy = True
        self.sending = False
        self._disarm()
        recent, self._recent = self._recent, None
        chunked = any(name == b"transfer-encoding" for name, _ in scope.get("headers") or ())
        start = str(scope.get("method", "")).encode("ascii") + b" "
        if chunked and recent is not None and recent.startswith(start):
            # The bytes after the head are the body's first; a pipelined request whose head
            # is not at the start of what arrived is left to the size count alone.
            end = recent.find(b"\r\n\r\n")
            if end >= 0:
                self._chunks = _ChunkSizes(self._limits.max_body_bytes)
                self._watch(recent[end + 4 :])

    def request_done(self) -> None:
        self.busy = False
        self._recent = bytearray()
        self._chunks = None

    def _watch(self, data: bytes | bytearray) -> None:
        chunks = self._chunks
        if chunks is not None and chunks.feed(data):
            self._chunks = None
            if not self.too_large.done():
                self.too_large.set_result(None)

    def close(self) -> None:
        self._disarm()
        self.transport.close()

    def linger(self) -> None:
        """Close after the answer: the write side at once, the read side once the client
        closes too or after a short while, so that a client still sending reads the answer."""
        if self._lingering or self.transport.is_closing():
            return
        self._disarm()
        if self.eof or not (self.busy or self.sending) or not self.transport.can_write_eof():
            self.transport.close()  # the client is not sending: nothing to wait for
            return
        self._lingering = True
        self.transport.write_eof()
        self._loop.call_later(_LINGER_SECONDS, self.transport.close)

    def _arm(self) -> None:
        self._timer = self._loop.call_later(self._limits.head_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_timed_out(self) -> None:
        self._timer = None
        if not self.busy:
            self.transport.close()


class _ChunkSizes:
    """The sizes a chunked body's chunks announce, read off its bytes as they arrive (h11
    parses and checks the framing; this only adds the sizes up)."""

    _MAX_LINE = 1024

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._line = bytearray()
        self._skip = 0
        self._done = False

    def feed(self, data: bytes | bytearray) -> bool:
        """True once the sizes announced so far add up to more than the limit."""
        at, end = 0, len(data)
        while at < end and not self._done:
            if self._skip:
                step = min(self._skip, end - at)
                self._skip -= step
                at += step
                continue
            newline = data.find(b"\n", at)
            if newline < 0:
                self._line += data[at:]
                self._done = len(self._line) > self._MAX_LINE  # h11 refuses it
                return False
            self._line += data[at:newline]
            at = newline + 1
            text = bytes(self._line).split(b";", 1)[0].strip()
            self._line.clear()
            try:
                size = int(text, 16)
            except ValueError:
                self._done = True  # not chunked framing: h11 answers it
                return False
            if size == 0:
                self._done = True  # the last chunk: trailers follow
                return False
            self.total += size
            if self.total > self.limit:
                self._done = True
                return True
            self._skip = size + 2  # the chunk and its CRLF
        return False


class _LingeringTransport:
    """The transport as uvicorn sees it: closing it closes the connection lingering."""

    def __init__(self, transport: Any, connection: _Connection) -> None:
        self._transport = transport
        self._connection = connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def close(self) -> None:
        self._connection.linger()

    def is_closing(self) -> bool:
        return self._connection._lingering or bool(self._transport.is_closing())


def _protocol_factory(limits: Limits) -> Callable[..., _Connection]:
    """What uvicorn calls for each connection (its ``http`` option takes a factory)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class _H11Protocol(H11Protocol):
        # The one piece of uvicorn's protocol still replaced: h11 refused the request's line,
        # head or framing, which no option and no ASGI application ever sees. Answered in the
        # JSON envelope every other error uses (uvicorn's own answer is plain text).
        def send_400_response(self, msg: str) -> None:
            body = error_body(
                400, "the request is not valid HTTP/1.1 (its request line, head or framing)"
            )
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
            self.transport.close()

    connections = _Connections(limits.max_connections)

    def make(*, config: Any, server_state: Any, app_state: dict[str, Any], **_: Any) -> _Connection:
        def inner(state: dict[str, Any]) -> Any:
            return _H11Protocol(
                config=config, server_state=server_state, app_state={**app_state, **state}
            )

        return _Connection(inner, connections, limits)

    return make


class HTTPServer:
    """A bound socket and a uvicorn server on it, run in a background thread."""

    def __init__(
        self,
        address: tuple[str, int],
        app: Guarded | None,
        limits: Limits,
        *,
        trusted_proxies: tuple[str, ...] = (),
    ) -> None:
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP named, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
        # connections whose protocol says TCP, and with it on a kept-alive client waits ~40 ms
        # for every answer.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.socket = sock
        self.server_address = sock.getsockname()[:2]
        self.app = app
        self.limits = limits
        self.trusted_proxies = trusted_proxies
        self._server: uvicorn.Server | None = None
        self._started = threading.Event()
        self._done = threading.Event()

    def serve_forever(self) -> None:
        import uvicorn

        if self.app is None:
            raise RuntimeError("HTTPServer.app must be set before serving")

        config = uvicorn.Config(
            LimitsMiddleware(self.app, self.limits),
            # uvicorn calls its http class as a factory: ours wraps its h11 protocol.
            http=_protocol_factory(self.limits),  # type: ignore[arg-type]
            lifespan="off",
            ws="none",
            interface="asgi3",
            log_config=None,
            access_log=False,
            server_header=False,
            date_header=False,
            timeout_keep_alive=max(1, round(self.limits.keep_alive_timeout)),
            h11_max_incomplete_event_size=self.limits.max_head_bytes,
            backlog=128,
            # The client address comes from X-Forwarded-For only when the peer is a proxy the
            # operator named; uvicorn would otherwise trust any client on this machine.
            proxy_headers=bool(self.trusted_proxies),
            forwarded_allow_ips=list(self.trusted_proxies),
        )
        server = uvicorn.Server(config)
        self._server = server

        async def serve() -> None:
            started = asyncio.get_running_loop().create_task(self._watch_started(server))
            try:
                await server.serve(sockets=[self.socket])
            finally:
                started.cancel()

        try:
            asyncio.run(serve())
        finally:
            self._started.set()
            self._done.set()

    async def _watch_started(self, server: uvicorn.Server) -> None:
        while not server.started:
            await asyncio.sleep(0.01)
        self._started.set()

    def wait_started(self, timeout: float) -> bool:
        return self._started.wait(timeout)

    def shutdown(self, timeout: float) -> bool:
        """Stop accepting, let in-flight requests finish (at most ``timeout``), close."""
        server = self._server
        if server is not None:
            server.config.timeout_graceful_shutdown = max(1, round(timeout))
            server.should_exit = True
            if not self._done.wait(timeout + 5):
                server.force_exit = True
                return False
        return True

    def server_close(self) -> None:
        try:
            self.socket.close()
        except OSError:
            pass
