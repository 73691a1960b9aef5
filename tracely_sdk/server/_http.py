"""The HTTP layer: Starlette on uvicorn (h11), with the limits a public endpoint needs.

Connection handling and HTTP/1.1 framing are uvicorn's and h11's: h11 is the strict parser
(conflicting ``Content-Length`` headers, malformed chunking and oversized heads are refused
with 400 before the application sees them), and uvicorn skips the unread rest of a body
before it reads the next request on a connection. What a public endpoint needs beyond that is
added here:

- a deadline for a request's head, counted from its first byte (or from the connection's
  opening), so that an idle or trickling client costs one connection for that long and never a
  request slot; a deadline for its body, read in the event loop before a slot is taken;
- a cap on open connections (further ones are answered 503 and closed);
- ``Transfer-Encoding`` together with ``Content-Length`` is refused (RFC 9112 §6.1);
- a body over the limit is read to its end and dropped, then answered 413 on a connection that
  stays usable, so a client still sending reads the answer instead of a reset; one far over it
  is answered 413 at once with ``Connection: close``;
- at most ``max_concurrent`` requests handled at once, in worker threads (the store is
  blocking); a request that cannot get a slot within a few seconds is answered 503;
- JSON error bodies, and a last line of defence that turns any exception into a 500.

The application (:class:`Handler`) sees a :class:`Request` whose body has been read, and
answers with a :class:`Response`; it decides what needs a token before the body is read.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import orjson

if TYPE_CHECKING:
    import uvicorn

__all__ = [
    "Admitted",
    "HTTPError",
    "HTTPServer",
    "Handler",
    "Request",
    "Response",
    "error_body",
    "json_response",
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
# A body over the limit by at most this factor is read and dropped before the 413, so that the
# client, still sending, reads it; a larger one is answered at once and the connection closed.
_DRAIN_FACTOR = 4
# An unread body up to this size is skipped before the next request on the connection; a
# request refused unread with a longer one (or a chunked one) is answered and closed instead,
# so that a refused client cannot keep the connection busy sending.
_SKIP_LIMIT = 64 * 1024
_MAX_QUERY_FIELDS = 32
_MAX_HEADERS = 100
_MAX_TARGET = 8192


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
        self.close = close
        self.field = field  # the offending field, for OTLP's BadRequest detail


def error_body(status: int, message: str, code: str | None = None, detail: Any = None) -> bytes:
    """The JSON error envelope ``{"error": {"code", "message", "detail"?}}``."""
    error: dict[str, Any] = {"code": code or _STATUS_CODES.get(status, "bad_request")}
    error["message"] = message
    if detail is not None:
        error["detail"] = detail
    return orjson.dumps({"error": error})


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str | None = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    close: bool = False


def json_response(status: int, value: Any, headers: Mapping[str, str] | None = None) -> Response:
    return Response(status, orjson.dumps(value), headers=dict(headers or {}))


def _error_response(error: HTTPError) -> Response:
    return Response(
        error.status,
        error_body(error.status, error.message, error.code, error.detail),
        headers=error.headers,
        close=error.close,
    )


class Request:
    """One request: method, path segments (percent-decoded, UTF-8), query, headers, body."""

    def __init__(self, scope: Mapping[str, Any]) -> None:
        self.method: str = scope["method"]
        client = scope.get("client")
        self.client = str(client[0]) if client else "?"
        from starlette.datastructures import Headers

        self.headers = Headers(raw=list(scope.get("headers") or []))
        raw_path = scope.get("raw_path") or str(scope.get("path", "/")).encode("utf-8")
        self.path = raw_path.decode("latin-1") or "/"
        try:
            self.segments = tuple(
                urllib.parse.unquote(s, errors="strict") for s in self.path.split("/")[1:]
            )
        except UnicodeDecodeError:
            raise HTTPError(400, "the request path is not valid UTF-8 once decoded") from None
        if self.segments and self.segments[-1] == "" and len(self.segments) > 1:
            self.segments = self.segments[:-1]  # a trailing slash names the same resource
        try:
            self.query = urllib.parse.parse_qs(
                bytes(scope.get("query_string") or b"").decode("latin-1"),
                keep_blank_values=True,
                strict_parsing=False,
                max_num_fields=_MAX_QUERY_FIELDS,
            )
        except ValueError:
            raise HTTPError(
                400, f"too many query parameters (at most {_MAX_QUERY_FIELDS})"
            ) from None
        self._body = b""

    def header(self, name: str) -> str:
        value = self.headers.get(name)
        return value.strip() if isinstance(value, str) else ""

    def media_type(self) -> str:
        return self.header("Content-Type").split(";", 1)[0].strip().lower()

    def has_body(self) -> bool:
        return bool(self.header("Transfer-Encoding")) or self.header("Content-Length") not in (
            "",
            "0",
        )

    def declared_length(self) -> int | None:
        """``Content-Length`` (h11 has checked it is a number), or None for a chunked body."""
        length = self.header("Content-Length")
        return int(length) if length.isascii() and length.isdigit() else None

    def body(self, limit: int) -> bytes:
        """The request body (read before the handler runs, within the server's limit)."""
        if len(self._body) > limit:
            raise HTTPError(
                413,
                f"the body is {len(self._body)} bytes; the limit is {limit} bytes",
                detail={"limit": limit},
            )
        return self._body


@dataclass(frozen=True)
class Admitted:
    """A request that may proceed: ``run`` answers it (in a worker thread) once its body is read."""

    run: Callable[[Request], Response]
    reads_body: bool = True


class Handler(Protocol):
    """The application behind the HTTP layer."""

    @property
    def draining(self) -> bool:
        """Shutting down: every answer closes its connection."""

    def admit(self, request: Request) -> Admitted | Response:
        """Route, authenticate and check the request before its body is read (in the event
        loop: no blocking). A Response answers it at once."""

    def error_response(self, request: Request, error: HTTPError) -> Response:
        """The answer for an error found by the HTTP layer (413, 408, 503...)."""


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int
    max_connections: int = 256
    max_concurrent: int = 32
    head_timeout: float = 10.0
    body_timeout: float = 60.0
    keep_alive_timeout: float = 15.0
    slot_wait: float = 5.0
    max_head_bytes: int = 32 * 1024


class _Disconnected(Exception):
    pass


class _ASGIApp:
    """The ASGI application: limits, body reading, worker threads, answers."""

    def __init__(self, handler: Handler, limits: Limits) -> None:
        self.handler = handler
        self.limits = limits
        self._slots: asyncio.Semaphore | None = None
        self._threads: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; websockets are not served
        response = await self._answer(scope, receive)
        # The path without its query string: nothing a client put there is written to a log.
        logger.debug(
            "%s %s %s %s",
            (scope.get("client") or ("?",))[0],
            scope.get("method"),
            str(scope.get("path", ""))[:200],
            response.status,
        )
        await _send(send, response, close=response.close or self.handler.draining)

    async def _answer(self, scope: Any, receive: Any) -> Response:
        import anyio.to_thread

        request: Request | None = None
        try:
            if len(scope.get("headers") or ()) > _MAX_HEADERS:
                raise HTTPError(
                    431, f"the request has more than {_MAX_HEADERS} header fields", close=True
                )
            target = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
            if target > _MAX_TARGET:
                raise HTTPError(414, f"the request target is longer than {_MAX_TARGET} bytes")
            raw_headers = {k.lower() for k, _ in scope.get("headers") or []}
            if b"transfer-encoding" in raw_headers and b"content-length" in raw_headers:
                # Two framings: a proxy in front may pick the other one, so the rest of the
                # connection cannot be trusted (RFC 9112 §6.1).
                raise HTTPError(
                    400,
                    "the request has both Transfer-Encoding and Content-Length; send one",
                    close=True,
                )
            request = Request(scope)
            admitted = self.handler.admit(request)
            if isinstance(admitted, Response):
                return self._closing_if_unread(request, admitted)
            if admitted.reads_body and request.has_body():
                try:
                    request._body = await self._read_body(request, receive)
                except HTTPError as exc:
                    return self.handler.error_response(request, exc)
            if self._slots is None:
                self._slots = asyncio.Semaphore(self.limits.max_concurrent)
                self._threads = anyio.to_thread.current_default_thread_limiter()
                self._threads.total_tokens = max(
                    self._threads.total_tokens, self.limits.max_concurrent
                )
            try:
                await asyncio.wait_for(self._slots.acquire(), self.limits.slot_wait)
            except asyncio.TimeoutError:
                error = HTTPError(
                    503,
                    "the server is handling as many requests as it may; retry later",
                    headers={"Retry-After": "1"},
                )
                return self.handler.error_response(request, error)
            try:
                return await anyio.to_thread.run_sync(self._run, admitted, request)
            finally:
                self._slots.release()
        except HTTPError as exc:
            if request is None:
                response = _error_response(exc)
                # The body of a request refused before it was parsed is skipped by the server
                # before the next request; one that may be long is not waited for.
                if scope.get("headers") and _may_be_long(scope):
                    response.close = True
                return response
            return self._closing_if_unread(request, self.handler.error_response(request, exc))
        except _Disconnected:
            return Response(400, b"", close=True)

    def _run(self, admitted: Admitted, request: Request) -> Response:
        try:
            return admitted.run(request)
        except HTTPError as exc:
            return self.handler.error_response(request, exc)
        except Exception:  # the last line of defence: answer, log, keep serving
            logger.exception("unhandled error answering %s %s", request.method, request.path[:200])
            return Response(500, error_body(500, "internal server error"), close=True)

    def _closing_if_unread(self, request: Request, response: Response) -> Response:
        """An answer given without reading the body: the server skips the body before the next
        request, unless it may be long (then the connection is closed instead)."""
        if request.has_body():
            length = request.declared_length()
            if length is None or length > _SKIP_LIMIT:
                response.close = True
        return response

    async def _read_body(self, request: Request, receive: Any) -> bytes:
        limit = self.limits.max_body_bytes
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.body_timeout
        declared = request.declared_length()
        if declared is not None and declared > limit * _DRAIN_FACTOR:
            raise HTTPError(
                413,
                f"the body is {declared} bytes; the limit is {limit} bytes",
                detail={"limit": limit},
                close=True,
            )
        chunks: list[bytes] = []
        size = 0
        over = declared is not None and declared > limit
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise _body_timeout(self.limits.body_timeout)
            try:
                message = await asyncio.wait_for(receive(), remaining)
            except asyncio.TimeoutError:
                raise _body_timeout(self.limits.body_timeout) from None
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                over = True
                chunks.clear()  # dropped: read on only so that the client reads the answer
                if size > limit * _DRAIN_FACTOR:
                    raise HTTPError(
                        413,
                        f"the body is more than {limit} bytes",
                        detail={"limit": limit},
                        close=True,
                    )
            elif not over:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        if over:
            raise HTTPError(
                413,
                f"the body is {size} bytes; the limit is {limit} bytes",
                detail={"limit": limit},
            )
        return b"".join(chunks)


def _body_timeout(seconds: float) -> HTTPError:
    return HTTPError(
        408,
        f"the body did not arrive within {seconds:g}s; send it at once or in smaller requests",
        close=True,
    )


def _may_be_long(scope: Any) -> bool:
    for name, value in scope.get("headers") or []:
        name = name.lower()
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return not value.isdigit() or int(value) > _SKIP_LIMIT
    return False


async def _send(send: Any, response: Response, *, close: bool) -> None:
    headers: list[tuple[bytes, bytes]] = []
    if response.status != 204:
        if response.content_type:
            headers.append((b"content-type", response.content_type.encode("latin-1")))
        headers.append((b"content-length", str(len(response.body)).encode("ascii")))
    for name, value in response.headers.items():
        headers.append((name.lower().encode("latin-1"), value.encode("latin-1")))
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    body = response.body if response.status != 204 else b""
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _protocol_class(limits: Limits) -> type[Any]:
    """uvicorn's h11 protocol with a deadline for request heads and a cap on connections."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TracelyH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _head_cycle: Any = None

        _error_status = 400

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            next_event = self.conn.next_event

            def checked_next_event() -> Any:
                try:
                    return next_event()
                except h11.RemoteProtocolError as exc:
                    self._error_status = exc.error_status_hint
                    raise

            self.conn.next_event = checked_next_event  # type: ignore[method-assign]
            if len(self.connections) > limits.max_connections:
                self.connections.discard(self)
                body = error_body(503, "the server has as many connections open as it may")
                transport.write(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s"
                    % (len(body), body)
                )
                transport.close()
                return
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
                self._arm_head_timer()  # the first byte of the next request on this connection
            super().data_received(data)
            if self._head_timer is not None and self.cycle is not self._head_cycle:
                self._disarm_head_timer()  # the head arrived in time

        def _arm_head_timer(self) -> None:
            self._head_cycle = self.cycle
            self._head_timer = self.loop.call_later(limits.head_timeout, self._head_timed_out)

        def _disarm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.cycle is self._head_cycle and not self.transport.is_closing():
                self._unset_keepalive_if_required()
                self.transport.close()

        def send_400_response(self, msg: str) -> None:
            # h11 refused the request's framing or head: the same JSON envelope as every
            # other error, and the connection closed (its framing cannot be trusted).
            status = self._error_status
            if status not in _STATUS_CODES:
                status = 400
            reason = {
                400: "Bad Request",
                414: "URI Too Long",
                431: "Request Header Fields Too Large",
            }
            text = {
                431: "the request head is too large",
                414: "the request target is too long",
            }.get(status, "the request is not valid HTTP/1.1 (its request line or framing)")
            body = error_body(status, text)
            self.transport.write(
                b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n%s"
                % (status, reason.get(status, "Bad Request").encode(), len(body), body)
            )
            self.transport.close()

    return TracelyH11Protocol


class HTTPServer:
    """A bound socket and a uvicorn server on it, run in a background thread."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: Handler,
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
        self.handler = handler
        self.limits = limits
        self.trusted_proxies = trusted_proxies
        self._server: uvicorn.Server | None = None
        self._started = threading.Event()
        self._done = threading.Event()

    def serve_forever(self) -> None:
        import uvicorn

        config = uvicorn.Config(
            _ASGIApp(self.handler, self.limits),
            http=_protocol_class(self.limits),
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
