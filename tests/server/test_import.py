"""``tracely traces import``: files and Jaeger/Tempo URLs become the same recordings as in-process.

The traces are real: the reference agent runs live under the SDK, and its finished spans are
encoded by the real OTLP exporter's encoder (protobuf) and by the OTLP/JSON encoder, then shaped
as a collector's file exporter, Jaeger's api/v3 and Tempo's trace API write them. Jaeger and
Tempo are a stdlib HTTP server on 127.0.0.1 answering what they answer.
"""

from __future__ import annotations

import argparse
import base64
import copy
import gzip
import http.server
import io
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tracely_otel import record_from_readable
from tracely_otel._otlp import encode_records_otlp_json
from tracely_sdk.cli import Context
from tracely_sdk.cli._import import (
    ImportSourceError,
    add_import_command,
    import_traces,
)
from tracely_sdk.cli._output import Output
from tracely_sdk.store import SQLiteStore

Run = Callable[[str], "tuple[list[Any], dict[str, Any]]"]


# --- real traces, encoded as each backend serves them ------------------------------------------


def tid_of(spans: Sequence[ReadableSpan]) -> str:
    return format(spans[0].context.trace_id, "032x")


def proto_bytes(spans: Sequence[ReadableSpan]) -> bytes:
    """What the real OTLP exporter sends (and Tempo answers with ``Accept: application/protobuf``)."""
    return encode_spans(list(spans)).SerializeToString()


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The OTLP/JSON mapping (hex ids, integer enums, 64-bit integers as strings)."""
    return encode_records_otlp_json([record_from_readable(s) for s in spans])


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


_KIND_NAMES = [
    "SPAN_KIND_UNSPECIFIED",
    "SPAN_KIND_INTERNAL",
    "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",
]
_STATUS_NAMES = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"]


def tempo_json(spans: Sequence[ReadableSpan], *, legacy: bool = False) -> dict[str, Any]:
    """Tempo's ``/api/traces/{id}``: protobuf's JSON mapping, so base64 ids and enum names;
    older Tempo versions still say ``instrumentationLibrarySpans``."""
    doc = copy.deepcopy(otlp_json(spans))
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = _b64(span[key])
                span["kind"] = _KIND_NAMES[span["kind"]]
                span["status"]["code"] = _STATUS_NAMES[span["status"].get("code", 0)]
        if legacy:
            rs["instrumentationLibrarySpans"] = [
                {"instrumentationLibrary": ss["scope"], "spans": ss["spans"]}
                for ss in rs.pop("scopeSpans")
            ]
    return {"batches": doc["resourceSpans"]}


def jsonl(batches: Sequence[Sequence[ReadableSpan]]) -> bytes:
    """A collector file exporter's output: one ExportTraceServiceRequest per line."""
    return b"".join(orjson.dumps(otlp_json(batch)) + b"\n" for batch in batches)


@pytest.fixture
def plain_trace() -> list[ReadableSpan]:
    """A trace with no tracely span in it: an HTTP server span and a database call."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "checkout"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("http")
    with (
        tracer.start_as_current_span(
            "GET /cart", kind=SpanKind.SERVER, attributes={"http.request.method": "GET"}
        ),
        tracer.start_as_current_span("SELECT carts", kind=SpanKind.CLIENT),
    ):
        pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "import.db")
    yield s
    s.close()


# --- files ---------------------------------------------------------------------------------------


def test_protobuf_file_is_the_in_process_recording(
    weather_run: Run, store: SQLiteStore, tmp_path: Path
) -> None:
    spans, bundle = weather_run("Paris")
    path = tmp_path / "trace.pb"
    path.write_bytes(proto_bytes(spans))
    result = import_traces(str(path), store)
    assert (result.spans, len(result.traces), result.recordings, result.stored) == (
        len(spans),
        1,
        1,
        1,
    )
    assert result.skipped == [] and result.traces[0].notes == ()
    recording = store.get_recording(tid_of(spans))
    assert recording.bundle == bundle  # the one extractor, whichever way the spans came
    assert recording.input == {"args": ["Paris"], "kwargs": {}}
    assert recording.agent_name and recording.status == "ok"
    # Compressed, and without a telling name: the content says what it is.
    other_spans, other_bundle = weather_run("Oslo")
    unnamed = tmp_path / "export"
    unnamed.write_bytes(gzip.compress(proto_bytes(other_spans)))
    assert import_traces(str(unnamed), store).stored == 1
    assert store.get_recording(tid_of(other_spans)).bundle == other_bundle


def test_otlp_json_file(weather_run: Run, store: SQLiteStore, tmp_path: Path) -> None:
    spans, bundle = weather_run("Lisbon")
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(otlp_json(spans)))
    assert import_traces(str(path), store).stored == 1
    assert store.get_recording(tid_of(spans)).bundle == bundle


def test_collector_jsonl_groups_spans_by_trace(
    weather_run: Run, plain_trace: list[ReadableSpan], store: SQLiteStore, tmp_path: Path
) -> None:
    paris, paris_bundle = weather_run("Paris")
    tokyo, tokyo_bundle = weather_run("Tokyo")
    # The collector's batches cut across traces: every line holds spans of several traces,
    # and each trace is spread over several lines, its root last.
    mixed = [s for pair in zip(paris, tokyo, strict=True) for s in pair] + plain_trace
    lines = [mixed[i : i + 3] for i in range(0, len(mixed), 3)]
    path = tmp_path / "traces.jsonl.gz"
    path.write_bytes(gzip.compress(jsonl(lines)))
    result = import_traces(str(path), store)
    assert result.spans == len(mixed) and len(result.traces) == 3
    assert (result.recordings, result.stored, len(result.skipped)) == (2, 2, 1)
    (skipped,) = result.skipped
    assert skipped.trace_id == tid_of(plain_trace) and skipped.spans == 2
    assert "no tracely spans" in (skipped.reason or "")
    assert store.get_recording(tid_of(paris)).bundle == paris_bundle
    assert store.get_recording(tid_of(tokyo)).bundle == tokyo_bundle
    assert "2 recording(s)" in result.summary() and "1 skipped" in result.summary()


def test_importing_again_and_late_spans(
    weather_run: Run, store: SQLiteStore, tmp_path: Path
) -> None:
    spans, bundle = weather_run("Paris")
    root = [s for s in spans if s.parent is None]
    without_root = [s for s in spans if s.parent is not None]
    early = tmp_path / "early.pb"
    early.write_bytes(proto_bytes(without_root))
    first = import_traces(str(early), store)
    assert first.stored == 1
    assert any("no agent span" in n for n in first.traces[0].notes)
    assert store.get_recording(tid_of(spans)).input is None
    full = tmp_path / "full.jsonl"
    full.write_bytes(jsonl([without_root, root]))
    assert import_traces(str(full), store).stored == 1  # the more complete recording replaces
    assert store.get_recording(tid_of(spans)).bundle == bundle
    again = import_traces(str(full), store)
    assert (again.stored, again.unchanged) == (0, 1)
    assert "1 already stored" in again.summary()
    assert import_traces(str(early), store).unchanged == 1  # never downgraded


def test_standard_input(
    weather_run: Run, store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    spans, bundle = weather_run("Paris")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(jsonl([spans]))))
    assert import_traces("-", store).stored == 1
    assert store.get_recording(tid_of(spans)).bundle == bundle


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("truncated.pb", None, "not trace data"),
        ("garbage.json", b'{"resourceSpans": [', "not trace data"),
        ("other.json", b'{"metrics": []}', "not trace data"),
        ("lines.jsonl", None, "line 2"),
        ("binary.bin", b"\x00\x01\x02\xff" * 10, "not trace data"),
        ("junk.json.gz", None, "not trace data"),
    ],
)
def test_corrupt_files_are_clear_errors(
    weather_run: Run,
    store: SQLiteStore,
    tmp_path: Path,
    name: str,
    content: bytes | None,
    expected: str,
) -> None:
    spans, _ = weather_run("Paris")
    if name == "truncated.pb":
        data = proto_bytes(spans)
        content = data[: len(data) // 2]
    elif name == "lines.jsonl":
        content = jsonl([spans[:1]]) + b'{"resourceSpans": [{"scopeSpans": 7}]}\n'
    elif name == "junk.json.gz":
        content = gzip.compress(b"{" + b" " * (1 << 20) + b"x")
    assert content is not None
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ImportSourceError) as info:
        import_traces(str(path), store)
    msg = str(info.value)
    assert str(path) in msg and expected in msg
    assert store.list_recordings() == []


def test_unreadable_files(store: SQLiteStore, tmp_path: Path) -> None:
    with pytest.raises(ImportSourceError, match=r"cannot read .*missing\.pb: No such file"):
        import_traces(str(tmp_path / "missing.pb"), store)
    with pytest.raises(ImportSourceError, match="is a directory"):
        import_traces(str(tmp_path), store)
    with pytest.raises(ImportSourceError, match="unknown format"):
        import_traces(str(tmp_path), store, format="zipkin")


def test_empty_file(store: SQLiteStore, tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"\n\n")
    result = import_traces(str(path), store)
    assert (result.spans, result.traces) == (0, [])


# --- Jaeger and Tempo over HTTP -----------------------------------------------------------------


class Backend:
    """A trace backend on 127.0.0.1: ``routes[path] = (status, content type, body)``."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, str, bytes]] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.require_auth: str | None = None
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                auth = self.headers.get("Authorization")
                backend.requests.append((self.path, auth))
                if backend.require_auth is not None and auth != backend.require_auth:
                    status, media, body = 401, "text/plain", b"unauthorized"
                else:
                    status, media, body = backend.routes.get(
                        self.path,
                        (404, "application/json", b'{"error": {"message": "no route"}}'),
                    )
                self.send_response(status)
                self.send_header("Content-Type", media)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def backend() -> Iterator[Backend]:
    b = Backend()
    yield b
    b.close()


def test_jaeger_trace_url(weather_run: Run, store: SQLiteStore, backend: Backend) -> None:
    spans, bundle = weather_run("Paris")
    tid = tid_of(spans)
    backend.routes[f"/api/v3/traces/{tid}"] = (
        200,
        "application/json",
        orjson.dumps({"result": otlp_json(spans)}),
    )
    result = import_traces(f"{backend.url}/api/v3/traces/{tid}", store)
    assert result.stored == 1 and result.source == f"{backend.url}/api/v3/traces/{tid}"
    assert store.get_recording(tid).bundle == bundle
    # Jaeger's answer for a trace it does not have.
    missing = "0" * 31 + "1"
    backend.routes[f"/api/v3/traces/{missing}"] = (
        404,
        "application/json",
        b'{"error": {"httpCode": 404, "message": "trace not found"}}',
    )
    with pytest.raises(ImportSourceError, match=r"HTTP 404 .*\(trace not found\)"):
        import_traces(f"{backend.url}/api/v3/traces/{missing}", store)
    # A streamed answer (one document per chunk, then the end marker).
    other, other_bundle = weather_run("Oslo")
    half = len(other) // 2
    stream = (
        orjson.dumps({"result": otlp_json(other[:half])})
        + b"\n"
        + orjson.dumps({"result": otlp_json(other[half:])})
        + b"\n"
    )
    backend.routes[f"/api/v3/traces/{tid_of(other)}"] = (200, "application/json", stream)
    assert import_traces(f"{backend.url}/api/v3/traces/{tid_of(other)}", store).stored == 1
    assert store.get_recording(tid_of(other)).bundle == other_bundle


@pytest.mark.parametrize("legacy", [False, True])
def test_tempo_trace_url(
    weather_run: Run, store: SQLiteStore, backend: Backend, legacy: bool
) -> None:
    spans, bundle = weather_run("Tokyo")
    tid = tid_of(spans)
    body = orjson.dumps(tempo_json(spans, legacy=legacy))
    assert tid not in body.decode()  # base64 ids, as Tempo writes them
    backend.routes[f"/api/traces/{tid}"] = (200, "application/json", body)
    assert import_traces(f"{backend.url}/api/traces/{tid}", store).stored == 1
    assert store.get_recording(tid).bundle == bundle
    # Tempo's protobuf answer (Accept: application/protobuf) has the OTLP wire layout.
    backend.routes["/api/traces/proto"] = (200, "application/protobuf", proto_bytes(spans))
    assert import_traces(f"{backend.url}/api/traces/proto", store).unchanged == 1
    backend.routes["/api/traces/none"] = (404, "text/plain", b"trace not found\n")
    with pytest.raises(ImportSourceError, match=r"HTTP 404 Not Found \(trace not found\)"):
        import_traces(f"{backend.url}/api/traces/none", store)


def test_credentials_in_the_url(weather_run: Run, store: SQLiteStore, backend: Backend) -> None:
    spans, _ = weather_run("Paris")
    tid = tid_of(spans)
    backend.routes[f"/api/traces/{tid}"] = (
        200,
        "application/json",
        orjson.dumps(tempo_json(spans)),
    )
    backend.require_auth = "Basic " + base64.b64encode(b"grafana:s3cret").decode()
    host = backend.url.removeprefix("http://")
    result = import_traces(f"http://grafana:s3cret@{host}/api/traces/{tid}", store)
    assert result.stored == 1 and "s3cret" not in result.source
    with pytest.raises(ImportSourceError) as info:
        import_traces(f"http://grafana:wrong-pass@{host}/api/traces/{tid}", store)
    assert "HTTP 401" in str(info.value) and "wrong-pass" not in str(info.value)


def test_unreachable_backend(store: SQLiteStore) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ImportSourceError, match=f"cannot fetch http://127.0.0.1:{port}/api"):
        import_traces(f"http://127.0.0.1:{port}/api/traces/abc", store, timeout=2)


def test_explicit_format(weather_run: Run, store: SQLiteStore, tmp_path: Path) -> None:
    spans, bundle = weather_run("Paris")
    path = tmp_path / "response.txt"
    path.write_bytes(orjson.dumps({"result": otlp_json(spans)}))
    assert import_traces(str(path), store, format="jaeger").stored == 1
    with pytest.raises(ImportSourceError, match="Tempo"):
        import_traces(str(path), store, format="tempo")
    assert store.get_recording(tid_of(spans)).bundle == bundle


# --- the command -------------------------------------------------------------------------------


def run_cli(argv: list[str], store_path: Path) -> int:
    parser = argparse.ArgumentParser(prog="tracely traces")
    sub = parser.add_subparsers(dest="traces_command")
    add_import_command(sub)
    args = parser.parse_args(argv)
    ctx = Context(Output(color=False), f"sqlite://{store_path}")
    try:
        return int(args.handler(args, ctx))
    finally:
        ctx.close()


def test_cli(
    weather_run: Run,
    plain_trace: list[ReadableSpan],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "cli.db"
    spans, _ = weather_run("Paris")
    good = tmp_path / "good.jsonl"
    good.write_bytes(jsonl([spans, plain_trace]))
    assert run_cli(["import", str(good)], db) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"imported {good}: {len(spans) + 2} span(s) in 2 trace(s), 1 recording(s)"
    )
    assert f"skipped {tid_of(plain_trace)}: no tracely spans" in out
    assert run_cli(["import", "--json", str(good)], db) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert (doc["recording_count"], doc["stored"], doc["unchanged"], doc["skipped"]) == (1, 0, 1, 1)
    only_plain = tmp_path / "plain.pb"
    only_plain.write_bytes(proto_bytes(plain_trace))
    assert run_cli(["import", str(only_plain)], db) == 1  # nothing in it to record
    capsys.readouterr()
    for source in (str(tmp_path / "nope.pb"), str(tmp_path / "good.jsonl") + "x"):
        assert run_cli(["import", source], db) == 2
        err = capsys.readouterr().err
        assert err.startswith("tracely: error: cannot read") and len(err.strip().splitlines()) == 1
    bad = tmp_path / "bad.pb"
    bad.write_bytes(proto_bytes(spans)[:-7])
    assert run_cli(["import", str(bad)], db) == 2
    err = capsys.readouterr().err
    assert "is not trace data" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit):
        run_cli(["import", "--timeout", "0", str(good)], db)
