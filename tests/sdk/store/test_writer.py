from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import orjson
import pytest

from tracely_sdk.errors import StoreError
from tracely_sdk.store import BackgroundWriter, Recording, SQLiteStore
from tracely_sdk.store._writer import Spool

from ._helpers import crash_mid_write, make_bundle, make_recording, trace_id


class Flaky(SQLiteStore):
    """A real store that fails while ``down`` is set, and counts every write it is asked for."""

    down = threading.Event()
    asked: list[str] = []

    def put_recordings(self, recordings: Iterable[Recording]) -> list[bool]:
        recordings = list(recordings)
        if self.down.is_set():
            raise StoreError("database is locked")
        self.asked.extend(r.trace_id for r in recordings)
        return super().put_recordings(recordings)


@pytest.fixture
def paths(tmp_path: Path) -> tuple[Path, Path]:
    Flaky.down = threading.Event()
    Flaky.asked = []
    return tmp_path / "t.db", tmp_path / "spool" / "recordings.jsonl"


def _ids(db: Path) -> list[str]:
    with SQLiteStore(db) as s:
        return [r.trace_id for r in s.list_recordings(limit=100_000)]


def _spool_files(spool: Path) -> list[Path]:
    return sorted(
        p
        for p in spool.parent.glob(spool.name + "*")
        if not p.name.endswith(".lock") and p.stat().st_size > 0
    )


def test_writes_everything(paths: tuple[Path, Path]) -> None:
    db, spool = paths
    writer = BackgroundWriter(lambda: SQLiteStore(db), spool_path=spool)
    for i in range(300):
        writer.submit(make_recording(i))
    assert writer.flush(10)
    assert sorted(_ids(db)) == sorted(trace_id(i) for i in range(300))
    assert writer.stats["written"] == 300
    assert _spool_files(spool) == []  # nothing left behind once committed
    assert writer.close(5) is True
    assert writer.close(5) is True  # idempotent


def test_a_burst_is_written_as_one_batch_and_flush_does_not_wait_for_more(
    paths: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, spool = paths
    # A gather far longer than the test may take: only flush() can end it in time.
    monkeypatch.setattr("tracely_sdk.store._writer._GATHER_SECONDS", 600.0)
    calls: list[int] = []

    class Counting(SQLiteStore):
        def put_recordings(self, recordings: Iterable[Recording]) -> list[bool]:
            recordings = list(recordings)
            calls.append(len(recordings))
            return super().put_recordings(recordings)

    writer = BackgroundWriter(lambda: Counting(db), spool_path=spool)
    for i in range(40):
        writer.submit(make_recording(i))
    assert writer.flush(10)
    assert calls == [40]
    assert sorted(_ids(db)) == sorted(trace_id(i) for i in range(40))
    writer.submit(make_recording(40))
    assert writer.close(10)  # close does not wait out the gather either
    assert calls == [40, 1]
    assert _spool_files(spool) == []


def test_a_full_queue_ends_the_gather(
    paths: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, spool = paths
    monkeypatch.setattr("tracely_sdk.store._writer._GATHER_SECONDS", 600.0)
    written = threading.Event()

    class Signalling(SQLiteStore):
        def put_recordings(self, recordings: Iterable[Recording]) -> list[bool]:
            result = super().put_recordings(recordings)
            written.set()
            return result

    writer = BackgroundWriter(lambda: Signalling(db), spool_path=spool, max_queue=8)
    for i in range(8):
        writer.submit(make_recording(i))
    # No flush: the batch is written because more would have to be spooled, not waited for.
    assert written.wait(10)
    assert writer.stats["spooled"] == 0
    assert writer.close(10)
    assert sorted(_ids(db)) == sorted(trace_id(i) for i in range(8))


def test_submit_accepts_a_bundle_and_never_raises(paths: tuple[Path, Path]) -> None:
    db, spool = paths
    writer = BackgroundWriter(lambda: SQLiteStore(db), spool_path=spool)
    writer.submit(make_bundle(trace_id("b")))
    writer.submit({"no": "trace id"})  # type: ignore[arg-type]
    writer.submit(object())  # type: ignore[arg-type]
    assert writer.close(10)
    assert _ids(db) == [trace_id("b")]
    assert writer.stats["dropped"] == 2


def test_failing_store_spools_and_recovers(
    paths: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    db, spool = paths
    SQLiteStore(db).close()
    Flaky.down.set()
    writer = BackgroundWriter(
        lambda: Flaky(db), spool_path=spool, min_backoff=0.01, max_backoff=0.05
    )
    with caplog.at_level(logging.DEBUG, logger="tracely.store"):
        for i in range(200):
            writer.submit(make_recording(i))
        assert writer.flush(0.5) is False  # the store is down: not drained
        assert _spool_files(spool)  # ... but everything is on disk
        for i in range(200, 300):  # still accepting during the outage
            writer.submit(make_recording(i))
        time.sleep(0.2)
        Flaky.down.clear()
        assert writer.flush(10) is True
    ids = _ids(db)
    assert len(ids) == 300 and set(ids) == {trace_id(i) for i in range(300)}
    assert writer.stats["failures"] >= 2
    warnings = [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and "unavailable" in r.getMessage()
    ]
    assert len(warnings) == 1  # each kind of failure is logged once
    assert any("available again" in r.getMessage() for r in caplog.records)
    assert _spool_files(spool) == []
    writer.close()


def test_store_that_cannot_open_yet(paths: tuple[Path, Path]) -> None:
    db, spool = paths
    attempts = []

    def factory() -> SQLiteStore:
        attempts.append(1)
        if len(attempts) < 3:
            raise StoreError("server not up yet")
        return SQLiteStore(db)

    writer = BackgroundWriter(factory, spool_path=spool, min_backoff=0.01, max_backoff=0.02)
    for i in range(20):
        writer.submit(make_recording(i))
    assert writer.flush(10)
    assert len(_ids(db)) == 20
    assert len(attempts) >= 3
    writer.close()


def test_full_queue_spools_without_blocking(paths: tuple[Path, Path]) -> None:
    db, spool = paths
    SQLiteStore(db).close()
    gate = threading.Event()

    class Slow(SQLiteStore):
        def put_recordings(self, recordings: Iterable[Recording]) -> list[bool]:
            gate.wait(30)
            return super().put_recordings(recordings)

    writer = BackgroundWriter(lambda: Slow(db), spool_path=spool, max_queue=2)
    slowest = 0.0
    for i in range(100):
        start = time.perf_counter()
        writer.submit(make_recording(i))
        slowest = max(slowest, time.perf_counter() - start)
    assert slowest < 0.5  # a disk append at worst, never a wait for the store
    assert writer.stats["spooled"] >= 90
    assert spool.exists() and spool.stat().st_size > 0
    gate.set()
    assert writer.flush(20)
    ids = _ids(db)
    assert len(ids) == 100 and len(set(ids)) == 100
    writer.close()


def test_leftover_spool_is_replayed_first(paths: tuple[Path, Path]) -> None:
    db, spool = paths
    recs = [make_recording(i) for i in range(50)]
    s = Spool(spool)
    s.append(Spool.encode(recs[:30]))
    s.append(Spool.encode(recs[25:30]))  # duplicates (a retry) are stored once
    # A batch another process had claimed when it died (pid 2**22 + 1 does not exist).
    dead = spool.with_name(f"{spool.name}.{2**22 + 1}.dead0000-1.claimed")
    dead.write_bytes(Spool.encode(recs[30:]))
    # A crash in the middle of an append leaves half a line.
    with open(spool, "ab") as f:
        f.write(b'{"trace_id": "half-writ')
    writer = BackgroundWriter(lambda: Flaky(db), spool_path=spool)
    assert writer.flush(10)
    ids = _ids(db)
    assert len(ids) == 50 and set(ids) == {r.trace_id for r in recs}
    assert sorted(Flaky.asked) == sorted(r.trace_id for r in recs)  # each written once
    assert not dead.exists()
    rejected = spool.with_name(spool.name + ".rejected.jsonl")
    assert rejected.read_bytes() == b'{"trace_id": "half-writ\n'  # set aside, not retried forever
    writer.close()


def test_append_after_a_partial_line_starts_a_new_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"partial')
    s = Spool(path)
    s.append(Spool.encode([make_recording(1)]))
    lines = path.read_bytes().splitlines()
    assert lines[0] == b'{"partial'
    assert orjson.loads(lines[1])["trace_id"] == trace_id(1)


def test_crash_mid_write_loses_nothing(paths: tuple[Path, Path]) -> None:
    db, spool = paths
    SQLiteStore(db).close()
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=crash_mid_write, args=(str(spool), str(db), 200))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 3  # died inside the store write
    committed = set(_ids(db))
    assert 0 < len(committed) < 200  # the crash really was mid-write
    assert _spool_files(spool)  # the in-flight batch is still on disk
    writer = BackgroundWriter(lambda: Flaky(db), spool_path=spool)
    assert writer.flush(10)
    ids = _ids(db)
    assert len(ids) == 200 and set(ids) == {trace_id(f"crash-{i}") for i in range(200)}
    assert _spool_files(spool) == []
    writer.close()


def test_close_with_store_down_keeps_the_spool(paths: tuple[Path, Path]) -> None:
    db, spool = paths
    SQLiteStore(db).close()
    Flaky.down.set()
    writer = BackgroundWriter(lambda: Flaky(db), spool_path=spool, min_backoff=0.01)
    for i in range(10):
        writer.submit(make_recording(i))
    assert writer.close(0.5) is False
    writer.submit(make_recording(10))  # after close: straight to the spool
    assert _ids(db) == []
    Flaky.down.clear()
    again = BackgroundWriter(lambda: Flaky(db), spool_path=spool)
    assert again.flush(10)
    assert sorted(_ids(db)) == sorted(trace_id(i) for i in range(11))
    again.close()


def test_rejected_recording_does_not_block_the_rest(paths: tuple[Path, Path]) -> None:
    db, spool = paths

    class Picky(SQLiteStore):
        def put_recordings(self, recordings: Iterable[Recording]) -> list[bool]:
            recordings = list(recordings)
            if any(r.trace_id == trace_id("poison") for r in recordings):
                raise ValueError("recording is invalid")
            return super().put_recordings(recordings)

    writer = BackgroundWriter(lambda: Picky(db), spool_path=spool)
    for i in range(5):
        writer.submit(make_recording(i))
    writer.submit(make_recording("poison"))
    for i in range(5, 10):
        writer.submit(make_recording(i))
    assert writer.flush(10)
    assert sorted(_ids(db)) == sorted(trace_id(i) for i in range(10))
    assert writer.stats["rejected"] == 1
    rejected = spool.with_name(spool.name + ".rejected.jsonl").read_bytes().splitlines()
    assert [orjson.loads(line)["trace_id"] for line in rejected] == [trace_id("poison")]
    writer.close()


def test_duplicates_and_updates_through_the_writer(paths: tuple[Path, Path]) -> None:
    db, spool = paths
    writer = BackgroundWriter(lambda: SQLiteStore(db), spool_path=spool)
    tid = trace_id("late")
    early = Recording.from_bundle(make_bundle(tid, tools=1, agent=False))
    late = Recording.from_bundle(make_bundle(tid, tools=2))
    for rec in (early, early, late, early):
        writer.submit(rec)
    assert writer.close(10)
    with SQLiteStore(db) as s:
        assert [r.trace_id for r in s.list_recordings()] == [tid]
        assert s.get_recording(tid) == late


def test_default_spool_path_is_in_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    writer = BackgroundWriter(lambda: SQLiteStore(tmp_path / "x.db"))
    try:
        assert writer.spool.path == tmp_path / ".tracely" / "spool" / "recordings.jsonl"
    finally:
        writer.close()


def _previous_release_lines(recordings: list[Recording]) -> bytes:
    """Recordings as the previous release spooled them: one JSON object a line."""
    return b"".join(
        orjson.dumps(r.to_dict(), option=orjson.OPT_NON_STR_KEYS) + b"\n" for r in recordings
    )


def test_a_spool_left_by_the_previous_release_is_replayed(paths: tuple[Path, Path]) -> None:
    db, spool = paths
    recs = [make_recording(f"old-{i}") for i in range(12)]
    spool.parent.mkdir(parents=True)
    spool.write_bytes(_previous_release_lines(recs[:6]) + b'{"trace_id": "torn')
    claimed = spool.with_name(f"{spool.name}.{2**22 + 3}.0ld0ld00-4.claimed")
    claimed.write_bytes(_previous_release_lines(recs[6:]))
    writer = BackgroundWriter(lambda: Flaky(db), spool_path=spool)
    writer.submit(make_recording("new"))  # appended after the torn line, on a line of its own
    assert writer.flush(10)
    assert sorted(_ids(db)) == sorted([r.trace_id for r in recs] + [trace_id("new")])
    with SQLiteStore(db) as s:
        assert [s.get_recording(r.trace_id) for r in recs] == recs  # nothing changed
    rejected = spool.with_name(spool.name + ".rejected.jsonl")
    assert rejected.read_bytes() == b'{"trace_id": "torn\n'
    assert _spool_files(spool) == [rejected]  # the rest was committed and let go of
    writer.close()


def test_a_flush_waits_while_the_writer_is_claiming_the_spool(
    paths: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The spool's records are off the spool and not yet pending while the writer claims the
    # file: a flush that took that moment for drained returned before anything was stored.
    db, spool = paths
    recs = [make_recording(i) for i in range(2)]
    Spool(spool).append(Spool.encode(recs))
    claiming, release = threading.Event(), threading.Event()
    claim = Spool.claim

    def held_claim(self: Spool) -> Path | None:
        claiming.set()
        assert release.wait(10)
        return claim(self)

    monkeypatch.setattr(Spool, "claim", held_claim)
    writer = BackgroundWriter(lambda: Flaky(db), spool_path=spool)
    assert claiming.wait(10)
    assert not writer.flush(0.2)
    release.set()
    assert writer.flush(10)
    assert sorted(_ids(db)) == sorted(r.trace_id for r in recs)
    writer.close()


def test_a_spooled_recording_changed_on_disk_is_set_aside_not_stored(
    paths: tuple[Path, Path],
) -> None:
    db, spool = paths
    recs = [make_recording(i) for i in range(3)]
    Spool(spool).append(Spool.encode(recs))
    data = spool.read_bytes()
    changed = data.replace(b'"weather-svc"', b'"weather-svd"', 1)  # a bad sector, one byte
    assert changed != data
    spool.write_bytes(changed)
    writer = BackgroundWriter(lambda: Flaky(db), spool_path=spool)
    assert writer.flush(10)
    assert sorted(_ids(db)) == sorted(r.trace_id for r in recs[1:])
    rejected = spool.with_name(spool.name + ".rejected.jsonl").read_bytes()
    assert b'"weather-svd"' in rejected and writer.stats["rejected"] == 1
    writer.close()
