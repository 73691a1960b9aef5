"""Health that means it: liveness and readiness reflect the store and the journal; a damaged or
empty store file is refused, never replaced; memory and the journal are bounded in bytes."""

from __future__ import annotations

import os
import secrets
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from server._support import ServerProcess, wait_for
from server.test_server_cli import serve


def root_less_spans(count: int, attribute_bytes: int) -> bytes:
    """OTLP/JSON: ``count`` child spans (their root never comes) of one fresh trace."""
    trace_id = secrets.token_hex(16)
    spans = [
        {
            "traceId": trace_id,
            "spanId": secrets.token_hex(8),
            "parentSpanId": secrets.token_hex(8),
            "name": "child",
            "kind": 1,
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": "blob", "value": {"stringValue": "x" * attribute_bytes}}],
        }
        for _ in range(count)
    ]
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


def export(proc: ServerProcess, body: bytes) -> Any:
    return proc.request("POST", "/v1/traces", body, token="ingest", content_type="application/json")


def test_healthz_and_readyz_when_all_is_well(server: ServerProcess) -> None:
    assert server.get("/healthz", token=None).json() == {"status": "ok"}
    ready = server.get("/readyz", token=None)
    assert (ready.status, ready.json()) == (200, {"status": "ready"})


def test_a_damaged_store_is_not_healthy_and_refuses_spans(
    make_server: Any, tmp_path: Path, weather_run: Any
) -> None:
    path = tmp_path / "damaged" / "tracely.db"
    proc: ServerProcess = make_server(
        "--quiet-seconds", "0.1", store=f"sqlite:///{path}", start=False
    )
    proc.start()
    # Fill a few pages, stop, then overwrite every page but the first with garbage.
    for city in ("Paris", "Oslo", "Lisbon", "Tokyo"):
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        spans, bundle = weather_run(city)
        answer = proc.request(
            "POST",
            "/v1/traces",
            encode_spans(spans).SerializeToString(),
            token="ingest",
            content_type="application/x-protobuf",
        )
        assert answer.status == 200
        wait_for(lambda b=bundle: proc.recording(b["trace_id"]), what="the recording")
    assert proc.stop() == 0
    # The pages of the recordings table and its indexes: the schema still reads, the server
    # starts, and the damage shows when the writer first touches them.
    conn = sqlite3.connect(path)
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    roots = [
        row[0]
        for row in conn.execute("SELECT rootpage FROM sqlite_master WHERE tbl_name = 'recordings'")
    ]
    conn.close()
    with path.open("r+b") as f:
        for root in roots:
            f.seek((root - 1) * page)
            f.write(os.urandom(page))
    proc.start()
    spans, _ = weather_run("Paris")
    first = proc.request(
        "POST",
        "/v1/traces",
        encode_spans(spans).SerializeToString(),
        token="ingest",
        content_type="application/x-protobuf",
    )
    assert first.status in (200, 503)  # journaled before the writer meets the damage
    ready = wait_for(
        lambda: (lambda a: a if a.status == 503 else None)(proc.get("/readyz", token=None)),
        what="the store's failure to show",
    )
    assert str(path) in " ".join(ready.json()["problems"])
    assert proc.get("/healthz", token=None).status == 503
    refused = export(proc, root_less_spans(1, 10))
    assert refused.status == 503 and "retry-after" in refused.headers
    proc.kill()


def test_an_empty_store_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "t.db").write_bytes(b"")
    result = serve(tmp_path)
    assert result.returncode == 2, result
    assert "empty file (0 bytes)" in result.stderr and str(tmp_path / "t.db") in result.stderr
    assert (tmp_path / "t.db").stat().st_size == 0


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path) -> None:
    text = b"these are my notes, not a database\n" * 200
    (tmp_path / "t.db").write_bytes(text)
    result = serve(tmp_path)
    assert result.returncode == 2, result
    assert "not a database" in result.stderr and str(tmp_path / "t.db") in result.stderr
    assert (tmp_path / "t.db").read_bytes() == text


@pytest.mark.parametrize(
    "variable", ["TRACELY_SERVER_MAX_HELD_BYTES", "TRACELY_SERVER_MAX_JOURNAL_BYTES"]
)
def test_spans_held_are_bounded_in_bytes(make_server: Any, variable: str) -> None:
    proc = make_server(env={variable: str(1024 * 1024)})
    answers = [export(proc, root_less_spans(2, 100_000)) for _ in range(8)]
    # About 200 KB a request and a 1 MiB bound: the first ones are taken, then 429 (until
    # the orphans held are assembled and written early to make room).
    assert answers[0].status == 200, answers[0]
    refused = [a for a in answers if a.status == 429]
    assert refused and refused[0].headers["retry-after"].isdigit(), [a.status for a in answers]
    if variable == "TRACELY_SERVER_MAX_JOURNAL_BYTES":
        ready = proc.get("/readyz", token=None)
        assert ready.status == 503 and "journal" in " ".join(ready.json()["problems"])
