"""The assembler and its journal, in-process: dedupe, late spans, bounds, crash recovery."""

from __future__ import annotations

import dataclasses
import gzip
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from server._support import wait_for
from tracely_otel import bundle_from_spans, record_from_readable
from tracely_otel.otlp import encode_records_otlp_json
from tracely_sdk.errors import StoreError
from tracely_sdk.server._ingest import (
    KIND_JSON,
    KIND_PROTO,
    KIND_PROTO_GZIP,
    Backpressure,
    IngestPipeline,
    Journal,
    Unavailable,
)
from tracely_sdk.store import SQLiteStore
from tracely_sdk.store._model import MAX_STORED_INT


def records(spans: list[Any]) -> list[Any]:
    return [record_from_readable(s) for s in spans]


def pipeline(tmp_path: Path, store: Any = None, **kwargs: Any) -> IngestPipeline:
    kwargs.setdefault("quiet_seconds", 0.05)
    p = IngestPipeline(
        store or SQLiteStore(tmp_path / "t.db"), journal=Journal(tmp_path / "journal"), **kwargs
    )
    p.start()
    return p


def stored(store: Any, trace_id: str, bundle: dict[str, Any] | None = None) -> Any:
    def ready() -> Any:
        try:
            rec = store.get_recording(trace_id)
        except StoreError:
            return None
        return rec if bundle is None or rec.bundle == bundle else None

    return wait_for(ready, what=f"the recording of {trace_id}")


def test_out_of_order_and_duplicate_spans_make_one_recording(
    tmp_path: Path, weather_run: Any
) -> None:
    spans, bundle = weather_run("Paris")
    p = pipeline(tmp_path)
    recs = records(spans)
    for batch in ([recs[3]], [recs[1], recs[1]], [recs[0]], [recs[2], recs[3]]):
        p.submit(batch)
    assert stored(p.store, bundle["trace_id"], bundle).bundle == bundle
    assert p.stats()["spans_in_memory"] == 4  # duplicates were not kept twice
    p.shutdown()


def test_a_trace_waits_for_its_root(tmp_path: Path, weather_run: Any) -> None:
    spans, bundle = weather_run("Oslo")
    recs = records(spans)
    root = next(r for r in recs if r.is_root)
    p = pipeline(tmp_path)
    p.submit([r for r in recs if r is not root])
    time.sleep(0.3)
    with pytest.raises(StoreError):
        p.store.get_recording(bundle["trace_id"])
    p.submit([root])
    assert stored(p.store, bundle["trace_id"], bundle)
    p.shutdown()


def test_a_trace_without_root_is_assembled_after_the_orphan_time(
    tmp_path: Path, weather_run: Any
) -> None:
    spans, _ = weather_run("Tokyo")
    children = [r for r in records(spans) if not r.is_root]
    p = pipeline(tmp_path, orphan_seconds=0.3)
    p.submit(children)
    rec = stored(p.store, children[0].trace_id)
    assert rec.bundle == bundle_from_spans(children) and rec.agent_name is None
    p.shutdown()


def test_shutdown_assembles_rooted_traces_at_once_and_journals_the_rest(
    tmp_path: Path, weather_run: Any
) -> None:
    (a, a_bundle), (b, b_bundle) = weather_run("Paris"), weather_run("Lisbon")
    p = pipeline(tmp_path, quiet_seconds=3600, orphan_seconds=3600)
    p.submit(records(a))
    b_children = [r for r in records(b) if not r.is_root]
    p.submit(b_children)
    p.shutdown()
    store = SQLiteStore(tmp_path / "t.db")
    assert store.get_recording(a_bundle["trace_id"]).bundle == a_bundle  # no quiet wait
    with pytest.raises(StoreError):
        store.get_recording(b_bundle["trace_id"])
    # The rootless trace is still in the journal; the next start finishes it.
    again = pipeline(tmp_path, store=store, orphan_seconds=0.2)
    assert stored(store, b_bundle["trace_id"]).bundle == bundle_from_spans(b_children)
    root = next(r for r in records(b) if r.is_root)
    again.submit([root])  # the late root, while the trace is still held: the full recording
    assert stored(store, b_bundle["trace_id"], b_bundle)
    again.shutdown()


def test_a_crash_loses_nothing_acknowledged(tmp_path: Path, weather_run: Any) -> None:
    runs = [weather_run(city) for city in ("Paris", "Oslo", "Tokyo")]
    p = pipeline(tmp_path, quiet_seconds=3600)
    for spans, _ in runs:
        p.submit(records(spans))
    # No shutdown: the process "dies" here with nothing written to the store.
    store = SQLiteStore(tmp_path / "t.db")
    assert store.list_recordings() == []
    assert p.journal is not None
    p.journal.close()  # what the dead process's exit does: files closed, nothing else
    recovered = pipeline(tmp_path, store=store)
    for _, bundle in runs:
        assert stored(store, bundle["trace_id"], bundle)
    recovered.shutdown()
    assert not list((tmp_path / "journal").glob("segment-*")), "written segments are deleted"


def test_the_journal_keeps_raw_bodies_and_ignores_a_torn_tail(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    assert journal.open() == []
    seg, seq = journal.append(KIND_PROTO, b"\x01\x02")
    journal.sync(seq)
    _, seq = journal.append(KIND_JSON, b'{"resourceSpans": []}')
    journal.sync(seq)
    path = tmp_path / "j" / f"segment-{seg:010d}.journal"
    journal.close()
    with path.open("ab") as fh:
        fh.write(b"TJ01\x02\x00\x00\x00")  # a record cut short by a crash
    again = Journal(tmp_path / "j")
    assert again.open() == [seg]
    assert list(again.read(seg)) == [
        (KIND_PROTO, b"\x01\x02"),
        (KIND_JSON, b'{"resourceSpans": []}'),
    ]
    again.close()


def test_one_server_per_journal(tmp_path: Path) -> None:
    first = Journal(tmp_path / "j")
    first.open()
    from tracely_sdk.errors import ConfigError

    with pytest.raises(ConfigError, match="in use by another tracely server"):
        Journal(tmp_path / "j").open()
    first.close()


def test_segments_are_deleted_when_nothing_needs_them(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j", segment_bytes=10)
    journal.open()
    first, seq = journal.append(KIND_JSON, b"x" * 20)
    journal.sync(seq)
    second, seq = journal.append(KIND_JSON, b"y" * 20)  # rotates: the first is sealed
    journal.sync(seq)
    assert second == first + 1 and set(journal.segments()) == {first, second}
    journal.unref(first)
    assert set(journal.segments()) == {second}
    assert not (tmp_path / "j" / f"segment-{first:010d}.journal").exists()
    journal.close()


class SlowStore(SQLiteStore):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = threading.Event()

    def put_recordings(self, recordings: Any) -> list[bool]:
        self.gate.wait(10)
        return super().put_recordings(recordings)


def test_a_full_write_queue_refuses_whole_requests(tmp_path: Path, weather_run: Any) -> None:
    store = SlowStore(tmp_path / "t.db")
    p = pipeline(tmp_path, store=store, write_queue_size=1, write_batch_size=1, quiet_seconds=0)
    runs = [weather_run(city) for city in ("Paris", "Oslo", "Tokyo", "Lisbon")]
    refused = None
    for spans, _ in runs:
        try:
            p.submit(records(spans))
        except Backpressure as exc:
            refused = exc
            break
        time.sleep(0.1)
    assert refused is not None and "write queue is full" in refused.reason
    store.gate.set()
    p.shutdown()


def test_bounds_on_spans_and_spans_per_trace(tmp_path: Path, weather_run: Any) -> None:
    spans, _ = weather_run("Paris")
    p = pipeline(tmp_path, max_spans=3)
    with pytest.raises(Backpressure):
        p.submit(records(spans))
    assert p.stats()["spans_in_memory"] == 0
    p.shutdown()
    capped = pipeline(tmp_path / "2", max_spans_per_trace=2)
    receipt = capped.submit(records(spans))
    assert (receipt.accepted, receipt.rejected) == (2, 2)
    assert "already hold 2 spans" in receipt.message and "rejected" not in receipt.message
    capped.shutdown()
    with pytest.raises(Unavailable):
        capped.submit(records(spans))


def test_a_start_time_the_store_cannot_hold_loses_no_trace(
    tmp_path: Path, weather_run: Any
) -> None:
    (a, a_bundle), (b, b_bundle) = weather_run("Paris"), weather_run("Oslo")
    far = [
        dataclasses.replace(r, start_time_unix_nano=2**64 - 1) if r.is_root else r
        for r in records(a)
    ]
    p = pipeline(tmp_path, quiet_seconds=3600, orphan_seconds=3600)
    p.submit(far + records(b))  # one request, both traces
    p.shutdown()
    store = SQLiteStore(tmp_path / "t.db")
    assert store.get_recording(b_bundle["trace_id"]).bundle == b_bundle
    kept = store.get_recording(a_bundle["trace_id"])
    assert kept.started_at == MAX_STORED_INT  # clamped into the range the store holds
    assert kept.bundle["started_at"] == 2**64 - 1  # the recording itself is unchanged
    assert not list((tmp_path / "journal").glob("segment-*")), "nothing waits in the journal"


def test_held_bytes_count_what_spans_take_in_memory(tmp_path: Path, weather_run: Any) -> None:
    spans, _ = weather_run("Paris")
    recs = records(spans)
    # A string of ASCII and one character outside the BMP takes 4 bytes a character in memory,
    # four times its UTF-8; an array nested in a kvlist takes its items' objects too.
    wide = "x" * 1_000_000 + "\U0001f600"
    nested = {"outer": {"inner": list(range(200_000))}}
    for extra in ({"wide": wide}, nested):
        big = dataclasses.replace(recs[0], attributes={**recs[0].attributes, **extra})
        p = pipeline(tmp_path / str(len(extra)) / str(id(extra)), max_held_bytes=3_000_000)
        with pytest.raises(Backpressure, match="holds as many bytes"):
            p.submit([big], size=1_100_000)  # what the wire said
        assert p.stats()["spans_in_memory"] == 0
        assert p.submit(recs, size=1_100_000).accepted == len(recs)  # the same, flat, fits
        p.shutdown()


def _previous_release_record(kind: int, payload: bytes) -> bytes:
    """A journal record as the previous release wrote it: magic, kind, three pad bytes, payload
    length and CRC-32 (little-endian), then the payload."""
    return (
        b"TJ01"
        + bytes([kind, 0, 0, 0])
        + len(payload).to_bytes(4, "little")
        + zlib.crc32(payload).to_bytes(4, "little")
        + payload
    )


def test_a_journal_left_by_the_previous_release_is_recovered(
    tmp_path: Path, weather_run: Any
) -> None:
    (a, a_bundle), (b, b_bundle), (c, c_bundle) = (
        weather_run(city) for city in ("Paris", "Oslo", "Tokyo")
    )
    as_json = orjson.dumps(encode_records_otlp_json(records(a)))
    as_proto_gzip = gzip.compress(encode_spans(b).SerializeToString())
    directory = tmp_path / "journal"
    directory.mkdir()
    (directory / "segment-0000000007.journal").write_bytes(
        _previous_release_record(KIND_JSON, as_json)
        + _previous_release_record(KIND_PROTO_GZIP, as_proto_gzip)
    )
    c_json = orjson.dumps(encode_records_otlp_json(records(c)))
    torn = _previous_release_record(KIND_JSON, b'{"resourceSpans": []}')[:-5]
    (directory / "segment-0000000008.journal").write_bytes(
        _previous_release_record(KIND_JSON, c_json) + torn  # killed while writing the last
    )
    store = SQLiteStore(tmp_path / "t.db")
    p = pipeline(tmp_path, store=store)
    for bundle in (a_bundle, b_bundle, c_bundle):
        assert stored(store, bundle["trace_id"], bundle)
    p.shutdown()
    assert not list(directory.glob("segment-*")), "recovered segments are deleted once written"


def test_the_journal_still_writes_what_the_previous_release_reads(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    journal.open()
    for kind, payload in ((KIND_PROTO, b"\x01\x02"), (KIND_JSON, b'{"resourceSpans": []}')):
        segment, sequence = journal.append(kind, payload)
        journal.sync(sequence)
    assert (tmp_path / "j" / f"segment-{segment:010d}.journal").read_bytes() == (
        _previous_release_record(KIND_PROTO, b"\x01\x02")
        + _previous_release_record(KIND_JSON, b'{"resourceSpans": []}')
    )
    journal.close()


def test_a_record_damaged_inside_a_segment_keeps_the_rest_beside_it(tmp_path: Path) -> None:
    directory = tmp_path / "j"
    directory.mkdir()
    records = [_previous_release_record(KIND_JSON, b'{"n": %d}' % n) for n in range(3)]
    damaged = records[1].replace(b'"n"', b'"m"')  # acknowledged, then a bad sector
    path = directory / "segment-0000000001.journal"
    path.write_bytes(records[0] + damaged + records[2])
    journal = Journal(directory)
    assert journal.open() == [1]
    assert list(journal.read(1)) == [(KIND_JSON, b'{"n": 0}')]
    assert path.with_name(path.name + ".damaged").read_bytes() == damaged + records[2]
    journal.close()
