"""The write-ahead log: what was appended is read back exactly, whatever a crash cut off."""

from __future__ import annotations

import errno
import io
import logging
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracely_sdk.store._wal import Damage, Frames, Lines, Record, SegmentLog, SharedLog

FRAMES = Frames(b"TEST", (1, 2, 3))
LINES = Lines()

payloads = st.lists(st.tuples(st.sampled_from([1, 2, 3]), st.binary(max_size=64)), max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
documents = st.lists(st.dictionaries(st.text(max_size=8), json_values, max_size=4), max_size=8)
quick = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def lines(payloads: list[bytes]) -> bytes:
    return b"".join(part for payload in payloads for part in LINES.frame(payload))


def segment_file(directory: Path) -> Path:
    (path,) = directory.glob("segment-*.log")
    return path


def framed_records(framing: Frames | Lines, data: bytes) -> list[Record]:
    return [item for item in framing.read(io.BytesIO(data)) if isinstance(item, Record)]


@quick
@given(records=payloads, cut=st.floats(0, 1))
def test_a_segment_cut_at_any_byte_gives_back_exactly_the_records_before_the_cut(
    records: list[tuple[int, bytes]], cut: float
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = SegmentLog(Path(tmp) / "a", FRAMES, segment_seconds=3600)
        log.open()
        ends = []  # where each record ends
        for kind, payload in records:
            _, sequence = log.append(kind, payload)
            log.sync(sequence)
            ends.append(log.size)
        data = segment_file(Path(tmp) / "a").read_bytes()
        log.close()
        for at in range(len(data) + 1):
            whole = [Record(p, k) for (k, p), end in zip(records, ends, strict=True) if end <= at]
            assert framed_records(FRAMES, data[:at]) == whole
        at = round(cut * len(data))  # and one cut through recovery from the files
        left = Path(tmp) / "b" / "segment-0000000001.log"  # as a crash left it
        left.parent.mkdir()
        left.write_bytes(data[:at])
        again = SegmentLog(left.parent, FRAMES)
        assert again.open() == [1]
        assert list(again.read(1)) == [r for r, end in zip(records, ends, strict=True) if end <= at]
        assert not list(left.parent.glob("*.damaged")), "a cut end is not damage"
        again.close()


@quick
@given(batches=st.lists(documents, max_size=4), cut=st.floats(0, 1))
def test_a_shared_log_cut_at_any_byte_gives_back_exactly_the_records_before_the_cut(
    batches: list[list[dict[str, object]]], cut: float
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = SharedLog(Path(tmp) / "log.jsonl", LINES)
        ends: list[tuple[bytes, int]] = []  # each record, and where its line ends
        size = 0
        for batch in batches:
            encoded = [orjson.dumps(document) for document in batch]
            log.append(lines(encoded))
            for payload in encoded:
                size += len(lines([payload]))
                ends.append((payload, size - 1))  # whole without the newline after it
        data = log.path.read_bytes() if log.path.exists() else b""
        for at in range(len(data) + 1):
            whole = [Record(payload) for payload, end in ends if end <= at]
            assert framed_records(LINES, data[:at]) == whole
        at = round(cut * len(data))  # and one cut through the claimed file a writer reads
        log.path.write_bytes(data[:at])
        read = list(log.records(log.path))
        assert [item for item in read if isinstance(item, Record)] == [
            Record(payload) for payload, end in ends if end <= at
        ]
        assert all(item.torn for item in read if isinstance(item, Damage))
        documents_read = [orjson.loads(payload) for payload, _ in ends]
        assert documents_read == [document for batch in batches for document in batch]


def test_a_line_is_one_json_object_that_another_reader_still_reads() -> None:
    (line,) = LINES.frame(b'{"trace_id":"t","n":1}')
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line) == {"~crc32": line[11:19].decode(), "trace_id": "t", "n": 1}
    (empty,) = LINES.frame(b"{}")
    assert orjson.loads(empty) == {"~crc32": empty[11:19].decode()}
    with pytest.raises(ValueError, match="one JSON object on one line"):
        LINES.frame(b"[1]")


def test_a_changed_line_is_damage_and_the_lines_after_it_are_read(tmp_path: Path) -> None:
    log = SharedLog(tmp_path / "log.jsonl", LINES)
    log.append(lines([b'{"city":"Paris"}', b'{"city":"Oslo"}', b'{"city":"Lima"}']))
    log.path.write_bytes(log.path.read_bytes().replace(b"Oslo", b"Osla"))
    read = list(log.records(log.path))
    assert read[0] == Record(b'{"city":"Paris"}') and read[2] == Record(b'{"city":"Lima"}')
    assert isinstance(read[1], Damage) and not read[1].torn and b"Osla" in read[1].raw


def test_a_line_of_the_previous_release_is_read_as_it_is(tmp_path: Path) -> None:
    log = SharedLog(tmp_path / "log.jsonl", LINES)
    log.path.write_bytes(b'{"city":"Paris"}\n')
    log.append(lines([b'{"city":"Oslo"}']))
    assert list(log.records(log.path)) == [Record(b'{"city":"Paris"}'), Record(b'{"city":"Oslo"}')]


def test_damage_inside_a_segment_is_kept_beside_it_not_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = SegmentLog(tmp_path, FRAMES)
    log.open()
    for payload in (b"first", b"second", b"third"):
        _, sequence = log.append(1, payload)
        log.sync(sequence)
    path = segment_file(tmp_path)
    log.close()
    data = path.read_bytes().replace(b"second", b"sec0nd")  # a bad sector
    path.write_bytes(data)
    again = SegmentLog(tmp_path, FRAMES)
    again.open()
    with caplog.at_level(logging.ERROR, logger="tracely.store"):
        assert list(again.read(1)) == [(1, b"first")]
    kept = path.with_name(path.name + ".damaged")
    assert kept.read_bytes() == data[data.index(b"sec0nd") - 16 :]  # its record and the rest
    assert f"kept in {kept}" in caplog.text
    again.close()


def test_zeros_a_power_cut_left_at_the_end_are_a_write_cut_short(tmp_path: Path) -> None:
    log = SegmentLog(tmp_path, FRAMES)
    log.open()
    log.sync(log.append(2, b"kept")[1])
    path = segment_file(tmp_path)
    log.close()
    path.write_bytes(path.read_bytes() + bytes(40))
    again = SegmentLog(tmp_path, FRAMES)
    again.open()
    assert list(again.read(1)) == [(2, b"kept")]
    assert not list(tmp_path.glob("*.damaged"))
    again.close()


_FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from tracely_sdk.store._wal import Lines, SharedLog, SegmentLog, Frames, LogError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
shared = SharedLog(Path(sys.argv[1]) / "log.jsonl", Lines())
shared.append(Lines().frame(b'{"n":1}')[0])
segments = SegmentLog(Path(sys.argv[1]) / "segments", Frames(b"TEST", [1]))
segments.open()
segments.sync(segments.append(1, b"kept")[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))  # the disk is full past 200 bytes
try:
    shared.append(Lines().frame(b'{"n":"' + b"x" * 300 + b'"}')[0])
except OSError as exc:
    print("spool:", exc.errno)
try:
    segments.append(1, b"y" * 300)
except LogError as exc:
    print("journal:", exc)
shared.append(Lines().frame(b'{"n":3}')[0])
segments.sync(segments.append(1, b"after")[1])
"""


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="file size limits are POSIX")
def test_an_append_the_disk_cannot_take_is_cut_off_and_the_log_stays_readable(
    tmp_path: Path,
) -> None:
    # A limit on file size (in a child process) fails a write as a full disk does.
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"spool: {errno.EFBIG}" in done.stdout  # the append failed, and said so
    assert "journal: cannot write the write-ahead log" in done.stdout
    shared = SharedLog(tmp_path / "log.jsonl", LINES)
    assert list(shared.records(shared.path)) == [Record(b'{"n":1}'), Record(b'{"n":3}')]
    segments = SegmentLog(tmp_path / "segments", Frames(b"TEST", [1]))
    assert segments.open() == [1]
    assert list(segments.read(1)) == [(1, b"kept"), (1, b"after")]
    segments.close()
