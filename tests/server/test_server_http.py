"""The HTTP layer under hostile clients: idle and trickling connections, slow uploads, request
framing (smuggling), oversized bodies a client is still sending. Everything is a raw socket
against a real server process."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from server._support import ServerProcess

EMPTY_OTLP = b'{"resourceSpans":[]}'


@contextmanager
def connect(server: ServerProcess, timeout: float = 10.0) -> Iterator[socket.socket]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        yield sock


def read_to_close(sock: socket.socket) -> bytes:
    out = b""
    while True:
        piece = sock.recv(65536)
        if not piece:
            return out
        out += piece


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes this connection (within the socket's timeout)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def statuses(reply: bytes) -> list[int]:
    """The status of each response in ``reply`` (responses follow each other's bodies)."""
    return [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", reply)]


def test_idle_connections_are_closed_and_do_not_lock_clients_out(make_server: Any) -> None:
    proc = make_server(
        env={"TRACELY_SERVER_MAX_CONNECTIONS": "4", "TRACELY_SERVER_HEADER_TIMEOUT": "0.5"}
    )
    with connect(proc) as a, connect(proc) as b, connect(proc) as c, connect(proc) as d:
        # Four connections, no byte sent: each is closed once the head deadline passes...
        assert all(closed_by_server(sock) for sock in (a, b, c, d))
    # ...so they never hold the server's connections from everyone else.
    assert proc.healthy()


def test_a_trickling_request_head_is_cut_off(make_server: Any) -> None:
    proc = make_server(env={"TRACELY_SERVER_HEADER_TIMEOUT": "0.5"})
    with connect(proc, timeout=0.2) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        closed = False
        for _ in range(50):  # a header byte every 0.2s: never a complete head
            try:
                sock.sendall(b"X")
            except OSError:
                closed = True
                break
            if closed_by_server(sock):
                closed = True
                break
        assert closed
    assert proc.healthy()


def test_slow_uploads_hold_no_request_slot(make_server: Any) -> None:
    proc = make_server(env={"TRACELY_SERVER_MAX_CONCURRENT_REQUESTS": "2"})
    uploads = [connect(proc) for _ in range(3)]
    socks = [upload.__enter__() for upload in uploads]
    try:
        for sock in socks:
            sock.sendall(
                b"POST /api/cases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + proc.tokens.write.encode() + b"\r\n"
                b"Content-Length: 1000\r\n\r\n{"
            )
        # Three bodies still arriving, two request slots: other requests are still served.
        answer = proc.get("/api/traces", token="read")
        assert answer.status == 200, answer
    finally:
        for upload in uploads:
            upload.__exit__(None, None, None)


def test_a_body_that_stops_arriving_is_answered_408(make_server: Any) -> None:
    proc = make_server(env={"TRACELY_SERVER_BODY_TIMEOUT": "0.5"})
    with connect(proc) as sock:
        sock.sendall(
            b"POST /api/cases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + proc.tokens.write.encode() + b"\r\n"
            b"Content-Length: 1000\r\n\r\n{"
        )
        reply = read_to_close(sock)
    assert statuses(reply) == [408] and b"connection: close" in reply.lower()


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: 5\r\nContent-Length: 6\r\n",
        b"Content-Length: 5, 6\r\n",
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        "Content-Length: \u00b2\r\n".encode(),
    ],
)
def test_ambiguous_framing_is_400_and_closes(server: ServerProcess, framing: bytes) -> None:
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + framing
            + b"\r\n5\r\nhello\r\n0\r\n\r\n"
            + smuggled
        )
        reply = read_to_close(sock)
    assert statuses(reply) == [400], reply[:300]


@pytest.mark.parametrize(
    "target", ["/api/cases/%ff", "/api/traces?" + "&".join(f"k{i}=1" for i in range(40))]
)
def test_a_body_refused_unread_is_never_a_request(server: ServerProcess, target: str) -> None:
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    last = b"GET /no-such-route HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with connect(server) as sock:
        sock.sendall(
            b"POST " + target.encode() + b" HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(smuggled) + smuggled + last
        )
        reply = read_to_close(sock)
    # The refused request, then the next real one; the body is never served as a request.
    assert statuses(reply)[0] == 400 and statuses(reply)[-1] == 404, reply[:500]
    assert 200 not in statuses(reply) and len(statuses(reply)) == 2, reply[:500]


def test_an_early_413_is_read_by_a_client_still_sending(make_server: Any) -> None:
    limit = 256 * 1024
    proc = make_server("--max-body-bytes", str(limit))
    body = b"\x0a" * (limit * 3)
    with connect(proc) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Authorization: Bearer " + proc.tokens.ingest.encode() + b"\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        for start in range(0, len(body), 16 * 1024):
            sock.sendall(body[start : start + 16 * 1024])  # no EPIPE: the server reads it all
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        reply = read_to_close(sock)
    # Answered 413, and the connection stays usable for the next request.
    assert statuses(reply) == [413, 200], reply[:300]


def test_a_body_far_over_the_limit_is_answered_at_once_and_closed(make_server: Any) -> None:
    proc = make_server("--max-body-bytes", "65536")
    with connect(proc) as sock:
        sock.sendall(
            b"POST /api/cases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + proc.tokens.write.encode() + b"\r\n"
            b"Content-Length: 999999999\r\n\r\n"
        )
        reply = read_to_close(sock)
    assert statuses(reply) == [413] and b"connection: close" in reply.lower()


def test_a_request_refused_unread_does_not_wait_for_its_long_body(server: ServerProcess) -> None:
    with connect(server) as sock:
        sock.sendall(
            b"POST /api/cases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n{"
        )
        reply = read_to_close(sock)  # no token: refused without waiting for the body
    assert statuses(reply) == [401] and b"connection: close" in reply.lower()


def test_the_sdk_and_the_server_package_import_without_the_web_stack() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "for name in ('uvicorn', 'starlette', 'h11', 'anyio'):\n"
        "    sys.modules[name] = None\n"
        "import tracely_sdk, tracely_sdk.server, tracely_sdk.server._app\n"
        "from tracely_sdk.server import ServerConfig\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "ok", result.stderr


def test_the_listening_socket_says_tcp_so_answers_are_not_held_back_by_nagle() -> None:
    # asyncio sets TCP_NODELAY on an accepted connection only when the socket's protocol is
    # IPPROTO_TCP; a socket made with protocol 0 kept Nagle's algorithm on, and a kept-alive
    # client (the HTTP store) waited about 40 ms for every answer.
    from tracely_sdk.server._http import HTTPServer, Limits

    async def handler(scope: Any, receive: Any, send: Any) -> None:  # never called
        raise AssertionError

    server = HTTPServer(("127.0.0.1", 0), handler, Limits(max_body_bytes=1024))
    try:
        assert server.socket.proto == socket.IPPROTO_TCP
    finally:
        server.socket.close()


def test_idle_connections_past_the_cap_never_starve_the_probes(make_server: Any) -> None:
    proc = make_server(
        env={"TRACELY_SERVER_MAX_CONNECTIONS": "4", "TRACELY_SERVER_HEADER_TIMEOUT": "30"}
    )
    idle = [connect(proc) for _ in range(5)]
    for connection in idle:
        connection.__enter__()
    try:
        # The cap is full of connections that never send a byte, long before their deadline:
        # the probes are still answered, on a new connection, at once.
        assert proc.get("/healthz", token=None).status == 200
        assert proc.get("/readyz", token=None).status == 200
    finally:
        for connection in idle:
            connection.__exit__(None, None, None)


def test_a_body_shorter_than_its_content_length_is_answered_400(make_server: Any) -> None:
    proc = make_server(env={"TRACELY_SERVER_BODY_TIMEOUT": "0.5"})
    with connect(proc) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + proc.tokens.ingest.encode() + b"\r\n"
            b"Content-Length: 1000\r\n\r\n" + EMPTY_OTLP
        )
        sock.shutdown(socket.SHUT_WR)  # the client stops sending, 980 bytes short
        reply = read_to_close(sock)
    assert statuses(reply) == [400], reply[:300]
    assert b"Content-Length" in reply and b"connection: close" in reply.lower()


def read_answer(sock: socket.socket) -> bytes:
    """One response: its head and the body its Content-Length says."""
    out = b""
    while b"\r\n\r\n" not in out:
        piece = sock.recv(65536)
        if not piece:
            return out
        out += piece
    head, _, body = out.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_a_client_that_stops_sending_after_a_whole_request_reads_its_answer(
    server: ServerProcess,
) -> None:
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + server.tokens.ingest.encode() + b"\r\n"
            b"Content-Length: %d\r\n\r\n" % len(EMPTY_OTLP) + EMPTY_OTLP
        )
        sock.shutdown(socket.SHUT_WR)
        reply = read_answer(sock)
    assert statuses(reply) == [200], reply[:300]


def test_a_chunk_announcing_a_terabyte_is_answered_413_at_once(make_server: Any) -> None:
    proc = make_server("--max-body-bytes", "65536", env={"TRACELY_SERVER_BODY_TIMEOUT": "30"})
    with connect(proc, timeout=5) as sock:
        # The chunk's size line says a terabyte; a few bytes of it follow, then nothing.
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + proc.tokens.ingest.encode() + b"\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % (1 << 40) + b"{" * 1024
        )
        reply = read_answer(sock)
    assert statuses(reply) == [413], reply[:300]
    assert b"connection: close" in reply.lower()


def test_chunked_bodies_within_the_limit_are_served_one_after_another(make_server: Any) -> None:
    proc = make_server("--max-body-bytes", "65536")
    request = (
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + proc.tokens.ingest.encode() + b"\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        b"%x;ext=1\r\n%s\r\n"
        % (len(EMPTY_OTLP) - 4, EMPTY_OTLP[:-4])
        + b"4\r\n%s\r\n0\r\n\r\n" % EMPTY_OTLP[-4:]
    )
    last = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with connect(proc) as sock:
        sock.sendall(request + request + last)  # pipelined: each head mid-stream
        reply = read_to_close(sock)
    assert statuses(reply) == [200, 200, 200], reply[:500]


def test_a_chunked_body_past_the_limit_is_read_by_a_client_still_sending(
    make_server: Any,
) -> None:
    proc = make_server("--max-body-bytes", "65536")
    with connect(proc) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + proc.tokens.ingest.encode() + b"\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )

        def send_forever() -> None:  # small chunks, each within the limit, without end
            try:
                while True:
                    sock.sendall(b"4000\r\n" + b"{" * 0x4000 + b"\r\n")
            except OSError:
                return

        sender = threading.Thread(target=send_forever, daemon=True)
        sender.start()
        reply = read_answer(sock)
    sender.join(10)
    assert statuses(reply) == [413], reply[:300]
    assert b"connection: close" in reply.lower()


@pytest.mark.parametrize(("target", "scope"), [("/v1/traces", "ingest"), ("/api/cases", "write")])
@pytest.mark.parametrize("length", [65537, 10**12])
def test_a_content_length_over_the_limit_is_answered_413_before_any_body_byte(
    make_server: Any, target: str, scope: str, length: int
) -> None:
    proc = make_server("--max-body-bytes", "65536", env={"TRACELY_SERVER_BODY_TIMEOUT": "30"})
    with connect(proc, timeout=5) as sock:
        # Not one body byte is sent: the answer cannot wait for the body (nor its deadline).
        sock.sendall(
            b"POST " + target.encode() + b" HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nAuthorization: Bearer "
            + getattr(proc.tokens, scope).encode()
            + b"\r\nContent-Length: %d\r\n\r\n" % length
        )
        reply = read_answer(sock)
    assert statuses(reply) == [413], reply[:300]
    assert b"65536" in reply
