"""OTLP/gRPC in: the real gRPC exporter (plain and gzip), tokens in metadata, the status codes
OTLP gives for gRPC, partial success, size limits, back-pressure and a clean shutdown."""

from __future__ import annotations

import gzip
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc.error_details_pb2 import BadRequest, RetryInfo
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import Compression, OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from server._support import (
    AckingGRPCExporter,
    Contract,
    Ledger,
    ServerProcess,
    Tokens,
    grpc_exporter,
    wait_for,
)
from tracely_sdk.server import ServerConfig, create_server
from tracely_sdk.store import SQLiteStore

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
GRPC = ["--grpc-port", "0", "--quiet-seconds", "0.2", "--rate-limit", "0"]


@pytest.fixture(scope="module")
def grpc_server(tmp_path_factory: pytest.TempPathFactory, contract: Contract) -> Iterator[Any]:
    proc = ServerProcess(tmp_path_factory.mktemp("grpc-server"), args=GRPC, contract=contract)
    proc.start()
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.logs()


class Call:
    """``TraceService/Export`` with the request's bytes as given, on a fresh channel."""

    def __init__(self, server: ServerProcess, token: str | None = "ingest") -> None:
        self.server = server
        self.token = token

    def __call__(
        self, body: bytes, *, compression: grpc.Compression | None = None
    ) -> ExportTraceServiceResponse:
        metadata: list[tuple[str, str]] = []
        if self.token is not None:
            literal = getattr(self.server.tokens, self.token, self.token)
            metadata.append(("authorization", f"Bearer {literal}"))
        with grpc.insecure_channel(self.server.grpc_target) as channel:
            export = channel.unary_unary(
                EXPORT, response_deserializer=ExportTraceServiceResponse.FromString
            )
            response: ExportTraceServiceResponse = export(
                body, metadata=metadata, timeout=30, compression=compression
            )
            return response


def refused(call: Call, body: bytes, **kwargs: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(body, **kwargs)
    return caught.value


def details(error: grpc.RpcError) -> Status:
    trailing = dict(error.trailing_metadata() or ())  # type: ignore[attr-defined]
    return Status.FromString(trailing["grpc-status-details-bin"])


def retry_seconds(error: grpc.RpcError) -> int:
    status = details(error)
    retry = RetryInfo()
    assert [d for d in status.details if d.Unpack(retry)], status
    # The Python exporter reads the same delay from its own key.
    trailing = dict(error.trailing_metadata() or ())  # type: ignore[attr-defined]
    assert RetryInfo.FromString(trailing["google.rpc.retryinfo-bin"]) == retry
    return retry.retry_delay.seconds


def recorded(server: ServerProcess, trace_id: str, bundle: dict[str, Any]) -> None:
    wait_for(
        lambda: (server.recording(trace_id) or {}).get("bundle") == bundle,
        what=f"the recording of {trace_id}",
    )


def body_of(spans: Sequence[Any]) -> bytes:
    return encode_spans(spans).SerializeToString()  # type: ignore[no-any-return]


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_the_real_grpc_exporter_records_the_trace(
    grpc_server: ServerProcess, weather_run: Any, compression: Compression
) -> None:
    spans, bundle = weather_run("Paris")
    send = grpc_exporter(grpc_server, compression=compression, timeout=20)
    try:
        assert send.export(spans) is SpanExportResult.SUCCESS
    finally:
        send.shutdown()
    recorded(grpc_server, bundle["trace_id"], bundle)


def test_a_trace_split_across_grpc_and_http_is_one_recording(
    grpc_server: ServerProcess, weather_run: Any
) -> None:
    from server._support import exporter

    spans, bundle = weather_run("Oslo")
    send = grpc_exporter(grpc_server, timeout=20)
    try:
        assert send.export(spans[:2]) is SpanExportResult.SUCCESS
    finally:
        send.shutdown()
    assert exporter(grpc_server).export(spans[2:]) is SpanExportResult.SUCCESS
    recorded(grpc_server, bundle["trace_id"], bundle)


def test_the_token_comes_in_metadata(grpc_server: ServerProcess, weather_run: Any) -> None:
    spans, _ = weather_run("Lisbon")
    body = body_of(spans)
    missing = refused(Call(grpc_server, token=None), body)
    assert missing.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "bearer token is required" in missing.details()
    wrong = refused(Call(grpc_server, token="not-a-configured-token"), body)
    assert wrong.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "not valid" in wrong.details()
    reader = refused(Call(grpc_server, token="read"), body)
    assert reader.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "ingest scope" in reader.details()
    assert grpc_server.tokens.read not in reader.details() + wrong.details()
    assert not Call(grpc_server)(body).HasField("partial_success")


def test_an_undecodable_request_is_invalid_argument(grpc_server: ServerProcess) -> None:
    error = refused(Call(grpc_server), b"\x0a\xff\xff\xff\xff\x0f")
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    bad = BadRequest()
    assert [d for d in details(error).details if d.Unpack(bad)]
    assert bad.field_violations[0].description == error.details()


def test_a_span_that_cannot_be_decoded_is_rejected_alone(
    grpc_server: ServerProcess, weather_run: Any
) -> None:
    spans, _ = weather_run("Tokyo")
    request = encode_spans(spans)
    request.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x01\x02\x03"
    response = Call(grpc_server)(request.SerializeToString())
    partial = response.partial_success
    assert partial.rejected_spans == 1
    assert partial.error_message.startswith("1 span(s) rejected: resourceSpans[0].scopeSpans[0]")
    assert "span" in partial.error_message and "id" in partial.error_message
    # Every span of it wrong: nothing taken, and the whole request is invalid.
    for span in request.resource_spans[0].scope_spans[0].spans:
        span.span_id = b"\x01"
    error = refused(Call(grpc_server), request.SerializeToString())
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_limits_size_and_back_pressure(make_server: Any, weather_run: Any) -> None:
    proc = make_server(
        *GRPC,
        "--max-body-bytes",
        "4096",
        name="limits",
        env={"TRACELY_SERVER_MAX_SPANS": "3"},
    )
    call = Call(proc)
    spans, _ = weather_run("Paris")
    assert len(spans) == 4 and len(body_of(spans)) < 4096
    # More spans than the server may hold: retryable, with the delay, and nothing taken.
    full = refused(call, body_of(spans))
    assert full.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "holds as many spans" in full.details()
    assert retry_seconds(full) >= 1
    # Larger than the body limit, as sent or once decompressed.
    padded = encode_spans(spans[:1])
    padded.resource_spans[0].scope_spans[0].scope.name = "x" * 8000
    large = padded.SerializeToString()
    assert len(gzip.compress(large)) < 4096
    for compression in (grpc.Compression.NoCompression, grpc.Compression.Gzip):
        too_large = refused(call, large, compression=compression)
        assert too_large.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    # Within the bounds, the same spans are taken.
    assert not call(body_of(spans[:3])).HasField("partial_success")
    assert proc.stop() == 0, proc.logs()


def test_spans_past_the_per_trace_cap_are_a_partial_success(
    make_server: Any, weather_run: Any
) -> None:
    proc = make_server(*GRPC, name="cap", env={"TRACELY_SERVER_MAX_SPANS_PER_TRACE": "3"})
    spans, _ = weather_run("Paris")
    partial = Call(proc)(body_of(spans)).partial_success
    assert partial.rejected_spans == 1
    assert "already hold 3 spans" in partial.error_message


def test_the_exporter_retries_when_the_server_is_full(
    make_server: Any, weather_run: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A server that holds at most 4 spans: the second trace is refused until the first is
    # written and let go of, and the exporter's retry (after the RetryInfo delay) delivers it.
    proc = make_server(
        *GRPC,
        name="retry",
        env={"TRACELY_SERVER_MAX_SPANS": "4", "TRACELY_SERVER_RETAIN_SECONDS": "0"},
    )
    first, first_bundle = weather_run("Paris")
    second, second_bundle = weather_run("Oslo")
    ledger = Ledger()
    send = AckingGRPCExporter(
        ledger,
        endpoint=proc.grpc_target,
        insecure=True,
        headers={"authorization": f"Bearer {proc.tokens.ingest}"},
        timeout=20,
    )
    try:
        assert send.export(first) is SpanExportResult.SUCCESS
        assert send.export(second) is SpanExportResult.SUCCESS
    finally:
        send.shutdown()
    assert ledger.acked_spans == 8 and ledger.failed_spans == 0
    recorded(proc, first_bundle["trace_id"], first_bundle)
    recorded(proc, second_bundle["trace_id"], second_bundle)
    refusals = [r for r in caplog.records if "RESOURCE_EXHAUSTED" in r.getMessage()]
    assert refusals, "the server never refused the second trace"


def test_in_process_the_receiver_starts_and_stops_with_the_server(
    tmp_path: Path, weather_run: Any
) -> None:
    tokens = Tokens()
    config = ServerConfig.load(
        {}, port=0, grpc_port=0, tokens=tokens.env, store=f"sqlite:///{tmp_path}/t.db"
    )
    spans, bundle = weather_run("Lisbon")
    with create_server(config).start() as server:
        assert server.grpc is not None and server.grpc.port != 0
        target = server.grpc.address
        send = OTLPSpanExporter(
            endpoint=target,
            insecure=True,
            headers={"authorization": f"Bearer {tokens.ingest}"},
            timeout=20,
        )
        try:
            assert send.export(spans) is SpanExportResult.SUCCESS
        finally:
            send.shutdown()
    # Shut down: what it acknowledged is stored, and the port is closed.
    with SQLiteStore(tmp_path / "t.db") as store:
        assert store.get_recording(bundle["trace_id"]).bundle == bundle
    host, port = target.rsplit(":", 1)
    with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=2):
        pass


# --------------------------------------------------------------------------------------------
# calls and connections that hold the receiver up


class Stalled:
    """``Export`` calls that open their stream and never send the message, until released."""

    def __init__(self, server: ServerProcess) -> None:
        self.channel = grpc.insecure_channel(server.grpc_target)
        self.release = threading.Event()
        self.calls: list[grpc.Future] = []
        self.export = self.channel.stream_unary(
            EXPORT, response_deserializer=ExportTraceServiceResponse.FromString
        )

    def _never(self) -> Iterator[bytes]:
        self.release.wait(30)
        return
        yield b""  # pragma: no cover - a generator that sends nothing

    def open(self, count: int, token: str | None = None, timeout: float = 20) -> list[Any]:
        metadata = [("authorization", f"Bearer {token}")] if token else []
        calls = [
            self.export.future(self._never(), metadata=metadata, timeout=timeout)
            for _ in range(count)
        ]
        self.calls += calls
        return calls

    def close(self) -> None:
        self.release.set()
        for call in self.calls:
            call.cancel()
        self.channel.close()


@pytest.fixture
def stalled() -> Iterator[Callable[[ServerProcess], Stalled]]:
    made: list[Stalled] = []

    def make(server: ServerProcess) -> Stalled:
        made.append(Stalled(server))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_calls_without_a_token_are_refused_before_their_message(
    make_server: Any, weather_run: Any, stalled: Any
) -> None:
    # More silent calls than workers: each is refused from its metadata alone, so none holds a
    # worker while it never sends, and a valid export is served at once.
    proc = make_server(*GRPC, name="stall", env={"TRACELY_SERVER_MAX_CONCURRENT_REQUESTS": "4"})
    silent = stalled(proc)
    calls = silent.open(6) + silent.open(6, token="not-a-token")
    for call in calls:
        assert call.exception(timeout=10).code() is grpc.StatusCode.UNAUTHENTICATED
    spans, bundle = weather_run("Paris")
    send = grpc_exporter(proc, timeout=5)
    try:
        assert send.export(spans) is SpanExportResult.SUCCESS
    finally:
        send.shutdown()
    recorded(proc, bundle["trace_id"], bundle)


def test_an_authorized_call_waits_for_its_message_only_so_long(
    make_server: Any, weather_run: Any, stalled: Any
) -> None:
    proc = make_server(
        *GRPC,
        name="slow",
        env={"TRACELY_SERVER_MAX_CONCURRENT_REQUESTS": "2", "TRACELY_SERVER_BODY_TIMEOUT": "0.5"},
    )
    calls = stalled(proc).open(3, token=proc.tokens.ingest, timeout=15)
    # Cancelled by the server (the client's own deadline is far later), workers given back.
    for call in calls:
        assert call.exception(timeout=14).code() is grpc.StatusCode.CANCELLED
    spans, _ = weather_run("Paris")
    send = grpc_exporter(proc, timeout=5)
    try:
        assert send.export(spans) is SpanExportResult.SUCCESS
    finally:
        send.shutdown()
    assert "sent no message within 0.5s" in proc.logs()


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def http2_connection(server: ServerProcess) -> socket.socket:
    """A raw HTTP/2 connection to the gRPC port: the preface and empty SETTINGS, then nothing."""
    host, port = server.grpc_target.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(HTTP2_PREFACE)
    return sock


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` within ``within`` seconds (reading what it sends)."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def test_grpc_connections_are_capped_and_http_keeps_serving(make_server: Any) -> None:
    proc = make_server(*GRPC, name="capped", env={"TRACELY_SERVER_GRPC_MAX_CONNECTIONS": "8"})
    socks = [http2_connection(proc) for _ in range(12)]
    try:
        kept = [s for s in socks if not closed_by_server(s, 1.0)]
        assert len(kept) == 8, f"{len(kept)} of 12 connections kept open, over the cap of 8"
        assert proc.healthy()
    finally:
        for sock in socks:
            sock.close()
    # Connections closed are given back: a real export connects again (once grpc has seen
    # them close, hence wait_for_ready).
    with grpc.insecure_channel(proc.grpc_target) as channel:
        export = channel.unary_unary(
            EXPORT, response_deserializer=ExportTraceServiceResponse.FromString
        )
        metadata = [("authorization", f"Bearer {proc.tokens.ingest}")]
        assert export(b"", metadata=metadata, timeout=20, wait_for_ready=True).ByteSize() == 0


def test_an_idle_grpc_connection_is_closed(make_server: Any) -> None:
    proc = make_server(*GRPC, name="idle", env={"TRACELY_SERVER_GRPC_IDLE_TIMEOUT": "0.5"})
    sock = http2_connection(proc)
    try:
        assert closed_by_server(sock, 10), "the idle connection was still open after 10 s"
    finally:
        sock.close()


def test_a_connection_that_never_starts_http2_is_closed(make_server: Any) -> None:
    proc = make_server(*GRPC, name="mute", env={"TRACELY_SERVER_HEADER_TIMEOUT": "0.5"})
    host, port = proc.grpc_target.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        assert closed_by_server(sock, 10), "the silent connection was still open after 10 s"


def test_http_and_grpc_share_one_rate_budget_per_token(make_server: Any) -> None:
    proc = make_server(
        "--grpc-port",
        "0",
        "--rate-limit",
        "0.1",
        name="budget",
        env={"TRACELY_SERVER_RATE_BURST": "3"},
    )
    answers = [
        proc.request(
            "POST", "/v1/traces", b"", token="ingest", content_type="application/x-protobuf"
        )
        for _ in range(4)
    ]
    assert [a.status for a in answers] == [200, 200, 200, 429]
    drained = refused(Call(proc), b"")
    assert drained.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "too many requests for this token" in drained.details()
