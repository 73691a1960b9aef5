"""The HTTP layer: the standard library's threading server, bounded, and never crashing.

``http.server.ThreadingHTTPServer`` is enough here: requests are short, the work is CPU-bound
Python either way, and the ``server`` extra then needs nothing beyond the standard library.
What it lacks is added here: HTTP/1.1 keep-alive with Nagle off, a cap on open connections
(further ones get 503 and are closed), a cap on requests handled at once, bounded body reads
(``Content-Length`` or chunked, 413 past the limit), JSON error bodies for the errors the
standard library answers itself, and a last line of defence that turns any exception into a
500 so that the server keeps serving whatever a request holds.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

__all__ = [
    "HTTPError",
    "HTTPServer",
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
_REFUSED = frozenset({401, 403, 429, 503})  # answered without reading the body: close, not drain
_DRAIN_LIMIT = 1024 * 1024  # an unread body up to this size is read and dropped, not the connection
_CHUNK_LINE = 1024


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


class Request:
    """One parsed request. The body is read on demand, within a limit."""

    def __init__(self, handler: _Handler, method: str) -> None:
        self._handler = handler
        self.method = method
        self.client = handler.client_address[0] if handler.client_address else "?"
        self.headers: Message = handler.headers
        parts = urllib.parse.urlsplit(handler.path)
        self.path = parts.path or "/"
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
                parts.query, keep_blank_values=True, strict_parsing=False, max_num_fields=32
            )
        except ValueError:
            raise HTTPError(400, "too many query parameters") from None
        self.body_read = False
        self._declared: int | None = None

    def header(self, name: str) -> str:
        value = self.headers.get(name)
        return value.strip() if isinstance(value, str) else ""

    def media_type(self) -> str:
        return self.header("Content-Type").split(";", 1)[0].strip().lower()

    def body(self, limit: int) -> bytes:
        """The request body, at most ``limit`` bytes (413 beyond it, without reading it)."""
        self.body_read = True
        rfile = self._handler.rfile
        encoding = self.header("Transfer-Encoding").lower()
        if encoding:
            if encoding != "chunked":
                self._handler.close_connection = True
                raise HTTPError(501, f"Transfer-Encoding {encoding!r} is not supported")
            return self._chunked(limit)
        length = self.header("Content-Length")
        if not length:
            return b""
        if not length.isdigit() or len(length) > 19:
            self._handler.close_connection = True
            raise HTTPError(400, "Content-Length is not a number of bytes")
        size = int(length)
        if size > limit:
            self._handler.close_connection = True  # the unread body cannot be skipped safely
            raise HTTPError(
                413,
                f"the body is {size} bytes; the limit is {limit} bytes",
                close=True,
                detail={"limit": limit},
            )
        data = rfile.read(size)
        if len(data) != size:
            self._handler.close_connection = True
            raise HTTPError(400, "the body ended before Content-Length bytes arrived", close=True)
        return data

    def _chunked(self, limit: int) -> bytes:
        rfile = self._handler.rfile
        out = bytearray()
        while True:
            line = rfile.readline(_CHUNK_LINE + 1)
            if len(line) > _CHUNK_LINE or not line.endswith(b"\n"):
                self._handler.close_connection = True
                raise HTTPError(400, "malformed chunked body", close=True)
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                self._handler.close_connection = True
                raise HTTPError(400, "malformed chunk size in a chunked body", close=True) from None
            if size < 0:
                raise HTTPError(400, "malformed chunk size in a chunked body", close=True)
            if size == 0:
                for _ in range(64):  # trailer fields, then the empty line
                    trailer = rfile.readline(_CHUNK_LINE + 1)
                    if trailer in (b"\r\n", b"\n", b""):
                        return bytes(out)
                self._handler.close_connection = True
                raise HTTPError(400, "too many trailer fields in a chunked body", close=True)
            if len(out) + size > limit:
                self._handler.close_connection = True
                raise HTTPError(
                    413,
                    f"the body is more than {limit} bytes",
                    close=True,
                    detail={"limit": limit},
                )
            chunk = rfile.read(size)
            if len(chunk) != size:
                self._handler.close_connection = True
                raise HTTPError(400, "the chunked body ended early", close=True)
            out += chunk
            rfile.readline(3)  # the CRLF after the chunk

    def has_body(self) -> bool:
        return bool(self.header("Transfer-Encoding")) or self.header("Content-Length") not in (
            "",
            "0",
        )

    def discard_unread_body(self) -> None:
        """Keep the connection usable when a handler answered without reading the body."""
        if self.body_read:
            return
        if self.header("Transfer-Encoding"):
            self._handler.close_connection = True
            return
        length = self.header("Content-Length")
        if not length:
            return
        if not length.isdigit() or int(length) > _DRAIN_LIMIT:
            self._handler.close_connection = True
            return
        try:
            self._handler.rfile.read(int(length))
        except OSError:
            self._handler.close_connection = True


Dispatch = Callable[[Request], Response]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 60  # an idle keep-alive connection, or a stalled body, is closed after this
    server_version = "tracely"
    sys_version = ""
    server: HTTPServer

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_OPTIONS(self) -> None:
        self._serve("OPTIONS")

    def _serve(self, method: str) -> None:
        server = self.server
        request: Request | None = None
        if not server.slots.acquire(timeout=server.slot_wait):
            self.close_connection = True
            self._send(
                Response(
                    503,
                    error_body(503, "the server is handling as many requests as it may"),
                    headers={"Retry-After": "1"},
                )
            )
            return
        server.begin()
        try:
            try:
                request = Request(self, method)
                response = server.dispatch(request)
            except HTTPError as exc:
                response = Response(
                    exc.status,
                    error_body(exc.status, exc.message, exc.code, exc.detail),
                    headers=exc.headers,
                    close=exc.close,
                )
            except Exception:  # the last line of defence: answer, log, keep serving
                logger.exception("unhandled error answering %s %s", method, self.path[:200])
                response = Response(500, error_body(500, "internal server error"), close=True)
            finally:
                server.slots.release()  # writing the answer needs no slot
            if request is not None:
                if response.status in _REFUSED:
                    # Do not spend time reading a body that was refused unread.
                    if not request.body_read and request.has_body():
                        self.close_connection = True
                else:
                    request.discard_unread_body()
            self._send(response, head=method == "HEAD")
        finally:
            server.end()

    def _send(self, response: Response, *, head: bool = False) -> None:
        try:
            self.send_response(response.status)
            if response.status != 204:
                if response.content_type:
                    self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.body)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            if response.close or self.server.draining:
                self.close_connection = True
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if response.body and response.status != 204 and not head:
                self.wfile.write(response.body)
        except OSError:
            self.close_connection = True  # the client went away; nothing to answer

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self._no_http09()
        return ok

    def _no_http09(self) -> None:
        # HTTP/0.9 has no status line or headers; answer anything that looks like it (a
        # garbage request line included) as HTTP/1.0, then close.
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.0"
            self.close_connection = True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        self._no_http09()
        # Errors the standard library answers itself (bad request line, headers too large,
        # unknown method): the same JSON envelope as every other error.
        try:
            text = message or HTTPStatus(code).phrase
        except ValueError:
            text = message or "error"
        self.close_connection = True
        self._send(Response(code, error_body(code, text)))

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # The path without its query string: nothing a client put there is written to a log.
        path = urllib.parse.urlsplit(getattr(self, "path", "") or "").path[:200]
        if isinstance(code, HTTPStatus):
            code = code.value
        logger.debug(
            "%s %s %s %s", self.address_string(), getattr(self, "command", "-"), path, code
        )

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def log_error(self, format: str, *args: Any) -> None:
        # The standard library's messages quote the request line; keep only the status.
        logger.debug("%s request error", self.address_string())


class HTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` of them, and at most
    ``max_concurrent`` requests handled at once."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    slot_wait = 5.0

    def __init__(
        self,
        address: tuple[str, int],
        dispatch: Dispatch,
        *,
        max_connections: int = 256,
        max_concurrent: int = 32,
    ) -> None:
        host = address[0]
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.dispatch = dispatch
        self.max_connections = max_connections
        self.slots = threading.BoundedSemaphore(max_concurrent)
        self.draining = False
        self._lock = threading.Condition()
        self._connections: set[socket.socket] = set()
        self._in_flight = 0
        super().__init__(address, _Handler)

    # connections ----------------------------------------------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            full = len(self._connections) >= self.max_connections
            if not full:
                self._connections.add(request)
        if full:
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            with self._lock:
                self._connections.discard(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._connections.discard(request)

    def _refuse(self, sock: socket.socket) -> None:
        body = error_body(503, "the server has as many connections open as it may")
        head = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
        ).encode("ascii")
        with contextlib.suppress(OSError):
            sock.settimeout(1.0)
            sock.sendall(head + body)
        self.shutdown_request(sock)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # An error outside a request's handler (a reset connection, mostly): not worth a
        # traceback on stderr, and never fatal.
        logger.debug("connection error from %s", client_address, exc_info=True)

    # requests in flight ---------------------------------------------------------------------

    def begin(self) -> None:
        with self._lock:
            self._in_flight += 1

    def end(self) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._lock.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is being handled; False if some still are after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(remaining)
        return True

    def close_connections(self) -> None:
        """Close every client connection (idle keep-alive ones included)."""
        with self._lock:
            connections = list(self._connections)
        for sock in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
