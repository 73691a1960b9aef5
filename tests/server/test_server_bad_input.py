"""Hostile and broken input: each gets a clear 4xx, and the server keeps serving."""

from __future__ import annotations

import socket
import urllib.parse
import zlib
from typing import Any

import orjson
import pytest
from google.rpc.error_details_pb2 import BadRequest
from google.rpc.status_pb2 import Status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from server._support import ServerProcess, case_document, wait_for


def gzip_bomb(size: int) -> bytes:
    """``size`` zero bytes, gzip-compressed (about a thousandth of the size)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    chunk = bytes(1024 * 1024)
    parts = [packer.compress(chunk) for _ in range(size // len(chunk))]
    parts.append(packer.flush())
    return b"".join(parts)


def raw(server: ServerProcess, data: bytes, timeout: float = 10.0) -> bytes:
    """Send bytes as they are; the answer until the server closes (or a full response)."""
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(data)
        out = b""
        while True:
            try:
                piece = sock.recv(65536)
            except TimeoutError:
                break
            if not piece:
                break
            out += piece
            head, sep, body = out.partition(b"\r\n\r\n")
            if sep:
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    None,
                )
                if length is not None and len(body) >= length:
                    break
        return out


@pytest.fixture(autouse=True)
def still_serving(server: ServerProcess) -> Any:
    yield
    assert server.alive(), server.logs()
    assert server.healthy()


def test_truncated_protobuf(server: ServerProcess, weather_run: Any) -> None:
    spans, _ = weather_run("Paris")
    body = encode_spans(spans).SerializeToString()
    answer = server.request(
        "POST",
        "/v1/traces",
        body[: len(body) // 2],
        token="ingest",
        content_type="application/x-protobuf",
    )
    assert answer.status == 400
    assert answer.headers["content-type"] == "application/x-protobuf"
    status = Status.FromString(answer.body)
    assert status.code == 3 and "cannot be parsed" in status.message
    detail = BadRequest()
    assert status.details[0].Unpack(detail)
    assert detail.field_violations[0].field == "body"


def test_garbage_json_on_the_otlp_route(server: ServerProcess) -> None:
    answer = server.request(
        "POST",
        "/v1/traces",
        b'{"resourceSpans": [',
        token="ingest",
        content_type="application/json",
    )
    assert answer.status == 400
    doc = answer.json()
    assert doc["code"] == 3 and "invalid JSON" in doc["message"]
    assert doc["details"][0]["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    answer = server.request(
        "POST",
        "/v1/traces",
        b'{"resourceSpans": {"no": "list"}}',
        token="ingest",
        content_type="application/json",
    )
    assert answer.status == 400 and "expected an array" in answer.json()["message"]


def test_wrong_content_type(server: ServerProcess) -> None:
    for content_type in ("text/plain", "application/xml", None):
        answer = server.request(
            "POST", "/v1/traces", b"hello", token="ingest", content_type=content_type
        )
        assert answer.status == 415, content_type
        assert "application/x-protobuf or application/json" in answer.json()["message"]
    answer = server.request("POST", "/api/cases", b"name=x", content_type="text/plain")
    assert answer.status == 415 and answer.error["code"] == "unsupported_media_type"


def test_unsupported_content_encoding(server: ServerProcess) -> None:
    answer = server.request(
        "POST",
        "/v1/traces",
        b"x",
        token="ingest",
        content_type="application/x-protobuf",
        headers={"Content-Encoding": "br"},
    )
    assert answer.status == 415 and "Content-Encoding" in Status.FromString(answer.body).message


def test_gzip_bomb(server: ServerProcess) -> None:
    bomb = gzip_bomb(64 * 1024 * 1024)
    assert len(bomb) < 1024 * 1024
    for content_type in ("application/x-protobuf", "application/json"):
        answer = server.request(
            "POST",
            "/v1/traces",
            bomb,
            token="ingest",
            content_type=content_type,
            headers={"Content-Encoding": "gzip"},
        )
        assert answer.status == 413, answer
    answer = server.request(
        "POST",
        "/api/cases",
        bomb,
        content_type="application/json",
        headers={"Content-Encoding": "gzip"},
    )
    assert answer.status == 413 and answer.error["code"] == "too_large"


def test_corrupt_gzip(server: ServerProcess) -> None:
    answer = server.request(
        "POST",
        "/v1/traces",
        b"\x1f\x8b\x08\x00garbage",
        token="ingest",
        content_type="application/x-protobuf",
        headers={"Content-Encoding": "gzip"},
    )
    assert answer.status == 400 and "gzip" in Status.FromString(answer.body).message


def test_oversized_body(make_server: Any) -> None:
    proc = make_server("--max-body-bytes", "65536")
    body = b"\x0a" * 70_000
    answer = proc.request(
        "POST", "/v1/traces", body, token="ingest", content_type="application/x-protobuf"
    )
    assert answer.status == 413
    answer = proc.request("POST", "/api/recordings", body, content_type="application/json")
    assert answer.status == 413 and answer.error["code"] == "too_large"
    # A declared length over the limit is refused before anything is read.
    reply = raw(
        proc,
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Authorization: Bearer " + proc.tokens.ingest.encode() + b"\r\n"
        b"Content-Length: 999999999999\r\n\r\n",
    )
    assert reply.startswith(b"HTTP/1.1 413"), reply[:100]
    assert proc.healthy()


def test_deeply_nested_json(server: ServerProcess) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    answer = server.request("POST", "/api/cases", deep, content_type="application/json")
    assert answer.status == 400 and "not valid JSON" in answer.error["message"]
    nested: Any = "x"
    for _ in range(200):
        nested = {"a": nested}
    answer = server.request(
        "POST", "/api/cases", {"trace_id": "1" * 32, "name": "deep", "tags": [nested]}
    )
    assert answer.status == 400 and "nests deeper than 128 levels" in answer.error["message"]
    answer = server.request(
        "POST", "/v1/traces", deep, token="ingest", content_type="application/json"
    )
    assert answer.status == 400


@pytest.mark.parametrize(
    "path",
    [
        "/api/cases/..%2Fx",
        "/api/cases/..%2F..%2Fetc%2Fpasswd",
        "/api/cases/%2e%2e",
        "/api/cases/a%00b",
        "/api/cases/UPPER",
        "/api/cases/con",
        "/api/cases/%ff%fe",
        "/api/traces/..%2F..%2Fx",
        "/api/traces/" + "0" * 32,
        "/api/traces/abc",
    ],
)
def test_ids_with_path_characters(server: ServerProcess, path: str) -> None:
    answer = server.get(path, token="read")
    assert answer.status == 400, (path, answer)
    assert answer.error["code"] in ("invalid", "bad_request")


def test_unknown_routes_and_methods(server: ServerProcess) -> None:
    assert server.get("/api/nothing", token="read").status == 404
    assert server.get("/api/cases/x/y/z", token="read").status == 404
    answer = server.request("DELETE", "/api/traces", token="write")
    assert answer.status == 405 and answer.headers["allow"] == "GET"
    assert server.request("GET", "/v1/traces", token="ingest").status == 405
    head = server.request("HEAD", "/healthz", token=None)
    assert (head.status, head.headers["allow"], head.body) == (405, "GET", b"")
    options = server.request("OPTIONS", "/api/cases", token=None)
    assert options.status == 405 and options.headers["allow"] == "GET, POST"


def test_unknown_fields_are_named(server: ServerProcess) -> None:
    answer = server.request(
        "POST", "/api/cases", {"trace_id": "1" * 32, "name": "x", "bogus": 1, "extra": 2}
    )
    assert answer.status == 400
    assert "'bogus', 'extra'" in answer.error["message"]
    assert answer.error["detail"] == {"unknown_fields": ["bogus", "extra"]}
    answer = server.request("PATCH", "/api/cases/some-case", {"title": "y"})
    assert answer.status == 400 and "'title'" in answer.error["message"]
    answer = server.get("/api/traces?limit=5&colour=red", token="read")
    assert answer.status == 400 and "'colour'" in answer.error["message"]


@pytest.mark.parametrize(
    "body,message",
    [
        ({"name": "x"}, "missing required field(s) trace_id"),
        ({"trace_id": 7, "name": "x"}, "invalid trace id"),
        ({"trace_id": "1" * 32, "name": 3}, "name must be a string"),
        ({"trace_id": "1" * 32, "name": "x", "tags": "a,b"}, "tags must be a list"),
        ({"trace_id": "1" * 32, "name": "x", "id": "../x"}, "invalid case id"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_json_shapes_are_checked(server: ServerProcess, body: Any, message: str) -> None:
    answer = server.request("POST", "/api/cases", body)
    assert answer.status == 400, answer
    assert message in answer.error["message"]


def test_bad_query_values(server: ServerProcess) -> None:
    for query in ("limit=0", "limit=100000", "limit=-1", "offset=x", "limit=1&limit=2"):
        answer = server.get(f"/api/traces?{query}", token="read")
        assert answer.status == 400, query


def test_broken_http(server: ServerProcess) -> None:
    reply = raw(server, b"GARBAGE\r\n\r\n")
    assert reply.startswith(b"HTTP/"), reply
    assert b'"error"' in reply
    reply = raw(server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 200 + b"\r\n")
    assert b" 431 " in reply.split(b"\r\n", 1)[0] or b" 400 " in reply.split(b"\r\n", 1)[0]
    reply = raw(server, b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b" 414 " in reply.split(b"\r\n", 1)[0]
    reply = raw(
        server,
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n"
        b"Content-Type: application/x-protobuf\r\nAuthorization: Bearer "
        + server.tokens.ingest.encode()
        + b"\r\n\r\n",
    )
    assert reply.startswith(b"HTTP/1.1 400"), reply[:80]


def test_chunked_bodies(server: ServerProcess) -> None:
    body = orjson.dumps({"resourceSpans": []})
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    reply = raw(
        server,
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Type: application/json\r\nAuthorization: Bearer "
        + server.tokens.ingest.encode()
        + b"\r\n\r\n"
        + chunked,
    )
    assert reply.startswith(b"HTTP/1.1 200"), reply[:80]
    reply = raw(
        server,
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Type: application/json\r\nAuthorization: Bearer "
        + server.tokens.ingest.encode()
        + b"\r\n\r\nzz\r\n",
    )
    assert reply.startswith(b"HTTP/1.1 400"), reply[:80]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    body=st.one_of(
        st.binary(max_size=2000),
        st.recursive(
            st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(
                    st.sampled_from(
                        ["resourceSpans", "scopeSpans", "spans", "traceId", "spanId", "x"]
                    ),
                    inner,
                    max_size=4,
                )
            ),
            max_leaves=30,
        ).map(orjson.dumps),
    ),
    content_type=st.sampled_from(["application/x-protobuf", "application/json"]),
)
def test_arbitrary_bodies_never_get_a_5xx(
    server: ServerProcess, body: bytes, content_type: str
) -> None:
    answer = server.request("POST", "/v1/traces", body, token="ingest", content_type=content_type)
    assert answer.status in (200, 400), answer
    answer = server.request("POST", "/api/cases", body, content_type="application/json")
    assert 400 <= answer.status < 500, answer


def test_connections_are_capped_and_the_probes_still_answer(make_server: Any) -> None:
    proc = make_server(env={"TRACELY_SERVER_MAX_CONNECTIONS": "2"})
    host, port = proc.url.removeprefix("http://").rsplit(":", 1)
    held = [socket.create_connection((host, int(port)), timeout=5) for _ in range(2)]
    try:
        for sock in held:  # two requests in flight, their bodies still arriving
            sock.sendall(
                b"POST /api/cases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + proc.tokens.write.encode() + b"\r\n"
                b"Expect: 100-continue\r\nContent-Length: 1000\r\n\r\n"
            )
            # The server asks for the body once it is handling the request.
            assert sock.recv(100).startswith(b"HTTP/1.1 100 ")
            sock.sendall(b"{")
        request = b"GET /api/traces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
        reply = raw(proc, request % proc.tokens.read.encode())
        assert reply.startswith(b"HTTP/1.1 503"), reply[:80]
        assert b"retry-after: 1" in reply.lower()
        # The probes are answered all the same.
        assert raw(proc, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 200")
    finally:
        for sock in held:
            sock.close()
    wait_for(proc.healthy, what="a free connection")


@pytest.mark.parametrize("query", ["limit=\u00b2", "offset=\u00b2", "limit=\u0661"])
def test_unicode_digits_are_not_numbers(server: ServerProcess, query: str) -> None:
    field, value = query.split("=", 1)
    answer = server.get(f"/api/traces?{field}={urllib.parse.quote(value)}", token="read")
    assert answer.status == 400 and field in answer.error["message"], answer


def test_a_content_length_in_unicode_digits_is_400(server: ServerProcess) -> None:
    reply = raw(
        server, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: \u00b2\r\n\r\n".encode()
    )
    assert reply.startswith(b"HTTP/1.1 400"), reply[:80]


@pytest.mark.parametrize(
    "change,field",
    [
        ({"started_at": 2**63}, "started_at"),
        ({"received_at": 2**64 - 1}, "received_at"),
        ({"started_at": -1}, "started_at"),
        ({"started_at": True}, "started_at"),
        ({"service": 7}, "service"),
        ({"agent_name": ["a"]}, "agent_name"),
        ({"replay_mode": {"x": 1}}, "replay_mode"),
    ],
)
def test_recording_fields_of_the_wrong_type_are_400(
    server: ServerProcess, weather_run: Any, change: dict[str, Any], field: str
) -> None:
    from tracely_sdk.store import Recording

    _, bundle = weather_run("Paris")
    recording = {**Recording.from_bundle(bundle).to_dict(), **change}
    answer = server.request("POST", "/api/recordings", recording)
    assert answer.status == 400, answer
    assert field in answer.error["message"] and "retry-after" not in answer.headers


@pytest.mark.parametrize("where", ["case", "history"])
@pytest.mark.parametrize("field", ["version", "created_at"])
def test_case_integers_past_64_bits_are_400(server: ServerProcess, where: str, field: str) -> None:
    case = case_document("big-numbers", input={})
    version = {"version": 1, "input": {}, "bundle": {}, "created_at": 1}
    if where == "case":
        case[field] = 2**63
    else:
        version[field] = 2**63
    answer = server.request("PUT", "/api/cases/big-numbers", {"case": case, "history": [version]})
    assert answer.status == 400, answer
    assert field in answer.error["message"]
