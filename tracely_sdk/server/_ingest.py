"""From accepted spans to stored recordings, without losing anything acknowledged.

The spans of one trace reach the server in many requests, out of order and sometimes twice.
The :class:`IngestPipeline` holds them per trace (deduplicated by span id) and hands a trace to
the one extractor (:func:`tracely_otel.bundle_from_spans`) once its root span has arrived and
it has been quiet for ``quiet_seconds``; a writer thread (two with a shared store, where they
build the recordings) stores the recordings in batches. A span that arrives after its trace
was assembled re-opens the trace, and the larger bundle replaces the stored one (the store
keeps the more complete recording; duplicates change nothing).

Durability: a request is acknowledged only once its spans are in memory and in the
write-ahead :class:`Journal`, an append-only file fsync'd before the answer (concurrent
requests share one fsync). A journal segment is deleted once every trace with spans in it has
been written to the store and let go of; on start, the segments left are read back and
assembled again, so a crash or a kill loses nothing that was acknowledged.

Memory is bounded: spans, traces and bytes held (orphans included), spans per trace, bytes in
the journal, and recordings waiting for the store. When a bound is reached, :meth:`IngestPipeline.submit` raises :class:`Backpressure`
(the server answers 429 with Retry-After) and accepts nothing of the request.

::

    request ─► submit() ─► journal append + fsync ─► trace table ─► assembler thread
                                                                  (root + quiet, or orphan)
                                                                        │ bundle_from_spans
    store ◄── put_recordings(batch) ◄── writer thread ◄── write queue ◄─┘
"""

from __future__ import annotations

import logging
import math
import queue
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import orjson

from tracely_otel import SpanEvent, SpanRecord, bundle_from_spans
from tracely_otel import attributes as A
from tracely_otel.otlp import (
    MAX_VALUE_DEPTH,
    OTLPDecodeError,
    encode_records_otlp_json,
    gunzip_bounded,
    records_from_otlp_json,
    records_from_otlp_proto,
)
from tracely_sdk.errors import ConfigError, StoreError
from tracely_sdk.store import Recording, Store
from tracely_sdk.store._wal import Frames, LogError, LogInUse, SegmentLog

__all__ = [
    "KIND_JSON",
    "KIND_JSON_GZIP",
    "KIND_PROTO",
    "KIND_PROTO_GZIP",
    "Backpressure",
    "IngestPipeline",
    "Journal",
    "JournalError",
    "Receipt",
    "SharedTraceStore",
    "Unavailable",
]

logger = logging.getLogger("tracely.server")

KIND_PROTO: Final = 1
KIND_JSON: Final = 2
KIND_PROTO_GZIP: Final = 3
KIND_JSON_GZIP: Final = 4
_FRAMES: Final = Frames(b"TJ01", (KIND_PROTO, KIND_JSON, KIND_PROTO_GZIP, KIND_JSON_GZIP))
_RECOVERY_MAX_BYTES: Final = 1 << 31


class Backpressure(Exception):
    """The server holds as much as it may; retry after ``retry_after`` seconds."""

    def __init__(self, reason: str, retry_after: float = 1.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class Unavailable(Exception):
    """The server cannot accept spans now (shutting down, or the journal cannot be written)."""

    def __init__(self, reason: str, retry_after: float = 1.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


# The journal could not be written; nothing of the request was acknowledged.
JournalError = LogError


@dataclass(frozen=True)
class Receipt:
    """What :meth:`IngestPipeline.submit` did with a request's spans."""

    accepted: int
    rejected: int = 0
    message: str = ""


# --------------------------------------------------------------------------------------------
# the journal


class Journal(SegmentLog):
    """The accepted request bodies (``kind``, payload) as binary records in numbered segments
    (:class:`~tracely_sdk.store._wal.SegmentLog`), each pinned by the traces with spans in it."""

    def __init__(
        self,
        directory: Path,
        *,
        segment_bytes: int = 8 * 1024 * 1024,
        segment_seconds: float = 5.0,
    ) -> None:
        super().__init__(
            directory,
            _FRAMES,
            what="the ingest journal",
            logger=logger,
            prefix="segment-",
            suffix=".journal",
            segment_bytes=segment_bytes,
            segment_seconds=segment_seconds,
        )

    def open(self) -> list[int]:
        try:
            return super().open()
        except LogInUse:
            raise ConfigError(
                f"the ingest journal {self.directory} is in use by another tracely server; "
                "give each server its own --journal-dir"
            ) from None


# --------------------------------------------------------------------------------------------
# the trace table

_OPEN: Final = 0  # has spans not yet assembled
_QUEUED: Final = 1  # a snapshot is being assembled or written
_DONE: Final = 2  # written; kept for late spans until evicted


@dataclass(slots=True)
class _Trace:
    spans: dict[str, SpanRecord] = field(default_factory=dict)
    root: bool = False
    touched: float = 0.0
    done_at: float = 0.0
    generation: int = 0
    state: int = _OPEN
    segments: set[int] = field(default_factory=set)
    size: int = 0  # bytes of its spans as received


@dataclass(slots=True)
class _Job:
    trace_id: str
    generation: int
    recording: Recording | None
    spans: list[SpanRecord] | None = None  # for a SharedTraceStore: the spans, and encoded
    shared: dict[str, str] | None = None
    rootless: bool = False  # assembled even without a root (it waited as long as an orphan)
    built: bool = False  # for a SharedTraceStore: ``recording`` is that of the spans here alone


_STOP: Final = object()


@runtime_checkable
class SharedTraceStore(Protocol):
    """A store several servers share, which assembles each trace from the spans every one of
    them received (:meth:`~tracely_sdk.store._postgres.PostgresStore.assemble_traces`).

    With one, a server hands over a trace's spans once they are quiet here, root or not: the
    root may have reached another server. The servers take turns on each trace (``assemble``
    gets the spans the others added and whether a recording is stored); the one that finds
    the trace whole records it from every span. A trace whose root no server has waits as an
    orphan does, and so does one whose root says it made calls that no server has the spans
    of yet, unless a recording of it is stored already: the server that adds the missing
    spans records it, so a trace split across servers is built once, from all of it. So a
    load balancer may send any request to any server.
    """

    def assemble_traces(
        self,
        traces: Sequence[tuple[str, Mapping[str, str]]],
        assemble: Callable[[str, Mapping[str, str], bool], Recording | None],
    ) -> list[bool | None]: ...


_HEX_ID: Final = re.compile(r"[0-9a-f]{16}|[0-9a-f]{32}")
_STATUS_CODES: Final = frozenset({"UNSET", "OK", "ERROR"})
_SPAN_KINDS: Final = frozenset({"INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"})
_U64: Final = 1 << 64
_I64: Final = 1 << 63


def _shared_row(span: SpanRecord) -> bytes:
    """One span as a JSON array of its fields: what orjson writes in C, several times cheaper
    to write and to read back than a one-span OTLP/JSON request."""
    return orjson.dumps(
        [
            span.trace_id,
            span.span_id,
            span.parent_span_id,
            span.name,
            span.start_time_unix_nano,
            span.end_time_unix_nano,
            span.attributes,
            span.status_code,
            span.status_message,
            [[e.name, e.time_unix_nano, e.attributes] for e in span.events],
            span.dropped_attributes_count,
            span.resource,
            span.scope_name,
            span.parent_is_remote,
            span.kind,
        ]
    )


def _encode_shared(spans: Sequence[SpanRecord]) -> dict[str, str]:
    """Each span's encoding for the shared table, by span id: a JSON array of its fields
    (:func:`_shared_row`), or a one-span OTLP/JSON request for a span that array would not
    give back exactly (a NaN, an integer past 64 bits, a list where a tuple was)."""
    encoded: dict[str, str] = {}
    for span in spans:
        text = None
        if (
            not span.trace_state  # not a field of the row
            and _exact(span.attributes)
            and _exact(span.resource)
            and all(_exact(event.attributes) for event in span.events)
        ):
            try:
                text = _shared_row(span)
            except TypeError:  # a key or a value orjson does not write
                text = None
        if text is None:
            text = orjson.dumps(encode_records_otlp_json([span]))
        encoded[span.span_id] = text.decode()
    return encoded


def _exact_value(value: Any, depth: int) -> bool:
    kind = type(value)
    if kind is str or kind is bool:
        return True
    if kind is int:
        return bool(-_I64 <= value < _I64)
    if kind is float:
        return math.isfinite(value)  # orjson writes NaN and the infinities as null
    if kind is tuple and depth < MAX_VALUE_DEPTH:
        return all(item is None or _exact_value(item, depth + 1) for item in value)
    return False


def _exact(attributes: Mapping[str, Any]) -> bool:
    """Whether a row gives ``attributes`` back equal (:func:`_value` reads arrays as tuples)."""
    return all(type(value) is str or _exact_value(value, 0) for value in attributes.values())


def _value(value: Any, depth: int) -> Any:
    """An attribute value read back from a shared row, as :func:`_exact` lets one be written:
    a string, a boolean, a 64-bit integer, a float, or an array (a tuple) of these or null."""
    kind = type(value)
    if kind is str or kind is bool or kind is float:
        return value
    if kind is int:
        if not -_I64 <= value < _I64:
            raise ValueError("an integer attribute is outside the 64-bit range")
        return value
    if kind is list:
        if depth >= MAX_VALUE_DEPTH:
            raise ValueError(f"values nest deeper than {MAX_VALUE_DEPTH} levels")
        return tuple(None if item is None else _value(item, depth + 1) for item in value)
    raise ValueError("an attribute value is a string, a number, a boolean or an array")


_SCALARS: Final = frozenset({str, bool, float})
_NUMBERS: Final = _SCALARS | {int}


def _attributes(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("attributes must be an object")
    # Most values are strings and numbers, which the parser gave exactly as they may be: the
    # mapping is kept as it is, only its integers checked, each value looked at in C.
    kinds = set(map(type, value.values()))
    if kinds <= _SCALARS:
        return value
    if kinds <= _NUMBERS:
        ints = [item for item in value.values() if type(item) is int]
        if min(ints) >= -_I64 and max(ints) < _I64:
            return value
    return {key: _value(item, 0) for key, item in value.items()}


def _time(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < _U64:
        raise ValueError("a time must be an unsigned 64-bit integer")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


def _span_from_row(row: Any) -> SpanRecord:
    """The span of :func:`_shared_row`, every field checked (another server wrote it)."""
    if not isinstance(row, list) or len(row) != 15:
        raise ValueError("a shared span row is an array of 15 fields")
    (trace_id, span_id, parent, name, start, end, attributes, code, message, events,
     dropped, resource, scope, remote, kind) = row  # fmt: skip
    for span_ref in (trace_id, span_id, parent):
        if span_ref is not None and not (isinstance(span_ref, str) and _HEX_ID.fullmatch(span_ref)):
            raise ValueError("ids must be lowercase hex")
    if trace_id is None or span_id is None or len(trace_id) != 32 or len(span_id) != 16:
        raise ValueError("a span needs a 32-digit trace id and a 16-digit span id")
    if parent is not None and len(parent) != 16:
        raise ValueError("a parent span id has 16 hex digits")
    if code not in _STATUS_CODES or kind not in _SPAN_KINDS:
        raise ValueError("unknown status code or span kind")
    if not isinstance(events, list) or not all(isinstance(e, list) and len(e) == 3 for e in events):
        raise ValueError("events must be [name, time, attributes] arrays")
    if not isinstance(dropped, int) or isinstance(dropped, bool) or not 0 <= dropped < _U64:
        raise ValueError("dropped_attributes_count must be a non-negative integer")
    if not isinstance(remote, bool):
        raise ValueError("parent_is_remote must be true or false")
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=_text(name),
        start_time_unix_nano=_time(start),
        end_time_unix_nano=_time(end),
        attributes=_attributes(attributes),
        status_code=code,
        status_message=_text(message),
        events=tuple(SpanEvent(_text(n), _time(t), _attributes(a)) for n, t, a in events),
        dropped_attributes_count=dropped,
        resource=_attributes(resource),
        scope_name=_text(scope),
        parent_is_remote=remote,
        kind=kind,
    )


def _decode_shared(encoded: Iterable[str]) -> list[SpanRecord]:
    """The spans of :func:`_encode_shared`'s encodings (both forms; a row is untrusted)."""
    spans: list[SpanRecord] = []
    requests: list[Any] = []
    for text in encoded:
        if text[:1] == "[":
            spans.append(_span_from_row(orjson.loads(text)))
        else:
            request = orjson.loads(text)
            groups = request.get("resourceSpans") if isinstance(request, dict) else None
            if not isinstance(groups, list):
                raise ValueError("a shared span is neither a field array nor an OTLP/JSON request")
            requests.extend(groups)
    if requests:
        spans.extend(records_from_otlp_json({"resourceSpans": requests}))
    return spans


def _too_few_spans(roots: Sequence[SpanRecord], spans: int) -> bool:
    """Whether a root agent counts more calls than the trace has spans besides its roots: then
    calls are missing (each is a span at least), known before extracting anything."""
    calls = 0
    for root in roots:
        for key in (A.CALLS_TOOLS, A.CALLS_LLM):
            made = root.attributes.get(key)
            if type(made) is int:
                calls += made
    return calls > spans - len(roots)


def _spans_missing(recording: Recording) -> bool:
    """Whether the trace's root agent counts calls whose spans the trace does not hold."""
    incomplete = recording.bundle.get("incomplete")
    return isinstance(incomplete, list) and any("missing" in item for item in incomplete)


def decode_journal(kind: int, payload: bytes) -> list[SpanRecord]:
    """The spans of one journal record."""
    if kind in (KIND_PROTO_GZIP, KIND_JSON_GZIP):
        payload = gunzip_bounded(payload, _RECOVERY_MAX_BYTES)
    if kind in (KIND_PROTO, KIND_PROTO_GZIP):
        return records_from_otlp_proto(payload)
    return records_from_otlp_json(payload)


# What a decoded span costs beyond its values: the record, its ids and name, its dicts.
_SPAN_OVERHEAD: Final = 512


def held_size(records: Iterable[SpanRecord]) -> int:
    """The bytes the decoded spans take in memory, as held until their trace is written.

    Counted from what was decoded, not from the request: a small request can decode into much
    more (many tiny attributes cost a hundred bytes each as Python objects, a few in protobuf),
    and the bound on held bytes must hold whatever the shape of the spans. A value shared by
    several spans (the resource of a batch) is counted once."""
    total = 0
    resources: set[int] = set()
    for record in records:
        total += _SPAN_OVERHEAD + _size(record.name) + _size(record.status_message)
        total += _mapping_size(record.attributes)
        if id(record.resource) not in resources:
            resources.add(id(record.resource))
            total += _mapping_size(record.resource)
        for event in record.events:
            total += _SPAN_OVERHEAD + _size(event.name) + _mapping_size(event.attributes)
    return total


_size = sys.getsizeof
_CONTAINERS: Final = frozenset({dict, list, tuple})


def _mapping_size(values: Mapping[str, Any]) -> int:
    """An attribute mapping's bytes: its table, keys and values, arrays and kvlists within.
    The sums run in C (map), so that the common flat mapping costs little on the ingest path."""
    # keys are strings (str.__sizeof__ is several times cheaper than sys.getsizeof)
    total = _size(values) + sum(map(str.__sizeof__, values)) + sum(map(_size, values.values()))
    if not _CONTAINERS.isdisjoint(map(type, values.values())):
        stack = [v for v in values.values() if type(v) in _CONTAINERS]
        while stack:
            value = stack.pop()
            inner = list(value.values()) if isinstance(value, dict) else list(value)
            if isinstance(value, dict):
                total += sum(map(str.__sizeof__, value))
            total += sum(map(_size, inner))
            stack.extend(v for v in inner if type(v) in _CONTAINERS)
    return total


def _group(records: Iterable[SpanRecord]) -> dict[str, list[SpanRecord]]:
    by_trace: dict[str, list[SpanRecord]] = {}
    for record in records:
        spans = by_trace.get(record.trace_id)
        if spans is None:
            by_trace[record.trace_id] = [record]
        else:
            spans.append(record)
    return by_trace


class IngestPipeline:
    """Spans in, recordings out: the trace table, the assembler thread and the writer thread."""

    def __init__(
        self,
        store: Store,
        *,
        journal: Journal | None,
        quiet_seconds: float = 2.0,
        orphan_seconds: float = 300.0,
        retain_seconds: float = 30.0,
        max_spans: int = 100_000,
        max_traces: int = 50_000,
        max_spans_per_trace: int = 10_000,
        max_held_bytes: int = 128 * 1024 * 1024,
        max_journal_bytes: int = 1024 * 1024 * 1024,
        write_queue_size: int = 2048,
        write_batch_size: int = 256,
    ) -> None:
        self.store = store
        self._shared = store if isinstance(store, SharedTraceStore) else None
        self.journal = journal
        self.quiet_seconds = quiet_seconds
        self.orphan_seconds = max(orphan_seconds, quiet_seconds)
        self.retain_seconds = retain_seconds
        self.max_spans = max_spans
        self.max_traces = max_traces
        self.max_spans_per_trace = max_spans_per_trace
        self.max_held_bytes = max_held_bytes
        self.max_journal_bytes = max_journal_bytes
        self.write_batch_size = write_batch_size
        self._lock = threading.Lock()
        self._traces: dict[str, _Trace] = {}
        self._dirty: OrderedDict[str, _Trace] = OrderedDict()  # open, by last span received
        self._orphans: OrderedDict[str, _Trace] = OrderedDict()  # quiet, still no root
        self._retained: OrderedDict[str, _Trace] = OrderedDict()  # written, by when
        self._span_count = 0
        self._reserved = 0
        self._held_bytes = 0
        self._reserved_bytes = 0
        self._store_error: str | None = None  # the writer's last failure, until it succeeds
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=write_queue_size)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._closing = False
        self._give_up_at = float("inf")
        # Of the traces recently assembled with a SharedTraceStore, the share other servers
        # also had spans of (a moving average, written by the writer thread only).
        self._split_share = 0.0
        self._assembler: threading.Thread | None = None
        self._writers: list[threading.Thread] = []
        self.counters: dict[str, int] = {
            "spans_accepted": 0,
            "spans_rejected": 0,
            "requests_refused": 0,
            "traces_assembled": 0,
            "recordings_written": 0,
            "recordings_changed": 0,
            "store_errors": 0,
        }

    # lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Recover what the journal holds, then start the assembler and writer threads."""
        # With a shared store the writer builds the recordings in its transactions: a second
        # one builds while the first waits on the database (their traces are never the same).
        self._writers = [
            threading.Thread(target=self._write_loop, name="tracely-writer", daemon=True)
            for _ in range(2 if self._shared is not None else 1)
        ]
        for writer in self._writers:
            writer.start()
        if self.journal is not None:
            self._recover(self.journal)
        self._assembler = threading.Thread(
            target=self._assemble_loop, name="tracely-assembler", daemon=True
        )
        self._assembler.start()

    def _recover(self, journal: Journal) -> None:
        segments = journal.open()
        spans = records = 0
        for segment in segments:
            for kind, payload in journal.read(segment):
                try:
                    batch = decode_journal(kind, payload)
                except OTLPDecodeError as exc:  # written by this server, so not expected
                    logger.error("journal segment %d: a record cannot be decoded: %s", segment, exc)
                    continue
                with self._lock:
                    held = max(len(payload), held_size(batch))
                    self._add(_group(batch), segment, time.monotonic(), held / max(1, len(batch)))
                spans += len(batch)
                records += 1
            # Recovery holds what was acknowledged whatever the bounds; relieve memory
            # pressure as it goes rather than refusing it.
            if self._over_budget():
                self._tick(force=True)
        journal.release_unreferenced()
        if records:
            logger.info(
                "recovered %d span(s) from %d journal record(s) in %d segment(s); %d trace(s) "
                "pending",
                spans,
                records,
                len(segments),
                len(self._traces),
            )

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop accepting, assemble every open trace that has its root, drain the writes.

        Traces without a root stay in the journal for the next start. Written traces are let
        go of, so their journal segments are deleted.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._closing:
                return
            self._closing = True
        self._stopping.set()
        self._wake.set()
        if self._assembler is not None:
            self._assembler.join(max(0.0, deadline - time.monotonic()))
        self._flush(deadline)
        self._give_up_at = deadline
        if self._writers:
            for _ in self._writers:
                self._put(_STOP, deadline)
            for writer in self._writers:
                writer.join(max(0.0, deadline - time.monotonic()))
            if any(writer.is_alive() for writer in self._writers):
                logger.error(
                    "the store did not take every recording within %.0fs; the rest stay in the "
                    "ingest journal and are written at the next start",
                    timeout,
                )
        with self._lock:
            for trace_id in list(self._retained):
                self._evict(trace_id)
            pending = len(self._traces)
        if self.journal is not None:
            self.journal.close()
        c = self.counters
        logger.info(
            "ingest stopped: %d span(s) accepted, %d trace(s) assembled, %d recording(s) "
            "written (%d new or updated); %d trace(s) wait in the journal",
            c["spans_accepted"],
            c["traces_assembled"],
            c["recordings_written"],
            c["recordings_changed"],
            pending,
        )

    @property
    def closing(self) -> bool:
        return self._closing

    # accepting spans ------------------------------------------------------------------------

    def submit(
        self,
        records: Sequence[SpanRecord],
        *,
        body: bytes | None = None,
        kind: int = KIND_PROTO,
        size: int | None = None,
    ) -> Receipt:
        """Take a request's spans: all of them durably, or (Backpressure/Unavailable) none.

        ``body``/``kind`` is the request as received, journaled as is when every span is
        taken; otherwise the spans taken are journaled as OTLP/JSON. Spans past the per-trace
        cap are rejected and counted in the receipt. ``size`` is the request's bytes as
        decoded (default: ``body``'s), what the journal's bound counts; the held-bytes bound
        counts the larger of it and the spans' size in memory (:func:`held_size`).
        """
        if not records:
            return Receipt(0)
        by_trace = _group(records)
        size = size if size is not None else len(body) if body is not None else 0
        held = max(size, held_size(records))
        with self._lock:
            if self._closing:
                raise Unavailable("the server is shutting down")
            if self._store_error is not None:
                self.counters["requests_refused"] += 1
                raise Unavailable(f"the store cannot be written ({self._store_error})", 5.0)
            if self._held_bytes + self._reserved_bytes + held > self.max_held_bytes:
                self.counters["requests_refused"] += 1
                self._wake.set()
                raise Backpressure("the server holds as many bytes of spans as it may")
            if self.journal is not None and self.journal.size + size > self.max_journal_bytes:
                self.counters["requests_refused"] += 1
                self._wake.set()
                raise Backpressure("the ingest journal holds as many bytes as it may")
            # With a shared store the writer builds the recordings, so its queue fills in
            # bursts of cheap jobs (every quiet trace at once); the assembler waits for room
            # and the spans wait here, under the bounds above and below.
            if self._shared is None and self._queue.full():
                self.counters["requests_refused"] += 1
                raise Backpressure("the write queue is full")
            new_traces = sum(1 for t in by_trace if t not in self._traces)
            if (
                self._span_count + self._reserved + len(records) > self.max_spans
                or len(self._traces) + new_traces > self.max_traces
            ):
                self.counters["requests_refused"] += 1
                self._wake.set()
                raise Backpressure("the server holds as many spans as it may")
            taken, rejected, over = self._admit(by_trace)
            self._reserved += len(records)
            self._reserved_bytes += held
        accepted = len(records) - rejected
        try:
            segment = -1
            if self.journal is not None and taken:
                if rejected or body is None:
                    taken_records = [r for spans in taken.values() for r in spans]
                    body, kind = orjson.dumps(encode_records_otlp_json(taken_records)), KIND_JSON
                segment = self._journal(self.journal, kind, body)
            with self._lock:
                self._add(taken, segment, time.monotonic(), held / len(records))
                self.counters["spans_accepted"] += accepted
                self.counters["spans_rejected"] += rejected
            if segment >= 0 and self.journal is not None:
                self.journal.unref(segment)  # the trace table holds it now
        finally:
            with self._lock:
                self._reserved -= len(records)
                self._reserved_bytes -= held
        message = ""
        if rejected:
            message = (
                f"trace(s) {', '.join(over[:3])}{' and others' if len(over) > 3 else ''} already "
                f"hold {self.max_spans_per_trace} spans, the most the server keeps of one trace"
            )
        return Receipt(accepted, rejected, message)

    @staticmethod
    def _journal(journal: Journal, kind: int, body: bytes) -> int:
        """Append and fsync one record; the segment it is in, pinned."""
        try:
            segment, sequence = journal.append(kind, body)
        except JournalError as exc:
            logger.error("%s", exc)
            raise Unavailable("the ingest journal cannot be written") from exc
        try:
            journal.sync(sequence)
        except JournalError as exc:
            journal.unref(segment)
            logger.error("%s", exc)
            raise Unavailable("the ingest journal cannot be written") from exc
        return segment

    def _admit(
        self, by_trace: dict[str, list[SpanRecord]]
    ) -> tuple[dict[str, list[SpanRecord]], int, list[str]]:
        """Split off the spans past the per-trace cap (duplicates are always taken)."""
        taken: dict[str, list[SpanRecord]] = {}
        rejected = 0
        over: list[str] = []
        for trace_id, spans in by_trace.items():
            trace = self._traces.get(trace_id)
            have = trace.spans if trace is not None else {}
            room = self.max_spans_per_trace - len(have)
            if room >= len(spans):
                taken[trace_id] = spans
                continue
            keep: list[SpanRecord] = []
            seen: set[str] = set()
            for span in spans:
                if span.span_id in have or span.span_id in seen:
                    keep.append(span)
                elif room > 0:
                    room -= 1
                    seen.add(span.span_id)
                    keep.append(span)
                else:
                    rejected += 1
            if len(keep) < len(spans):
                over.append(trace_id)
            if keep:
                taken[trace_id] = keep
        return taken, rejected, over

    def _add(
        self,
        by_trace: dict[str, list[SpanRecord]],
        segment: int,
        now: float,
        span_bytes: float = 0.0,
    ) -> None:
        """Put spans into the trace table (lock held). Duplicates change nothing.
        ``span_bytes``: what each span counts against the held-bytes bound."""
        for trace_id, spans in by_trace.items():
            trace = self._traces.get(trace_id)
            if trace is None:
                trace = self._traces[trace_id] = _Trace()
            before = len(trace.spans)
            for span in spans:
                if span.span_id not in trace.spans:
                    trace.spans[span.span_id] = span
                    if span.is_root:
                        trace.root = True
            added = len(trace.spans) - before
            if not added:
                if not before:  # a new entry that took nothing (cannot happen, but never leak)
                    del self._traces[trace_id]
                continue
            self._span_count += added
            grown = round(added * span_bytes)
            trace.size += grown
            self._held_bytes += grown
            if segment >= 0 and segment not in trace.segments and self.journal is not None:
                trace.segments.add(segment)
                self.journal.ref(segment)
            trace.generation += 1
            trace.touched = now
            if trace.state == _DONE:
                self._retained.pop(trace_id, None)
                trace.state = _OPEN
            if trace.state == _OPEN:
                self._orphans.pop(trace_id, None)
                self._dirty[trace_id] = trace
                self._dirty.move_to_end(trace_id)

    # assembling -----------------------------------------------------------------------------

    def _over_budget(self, fraction: float = 1.0) -> bool:
        return (
            self._span_count > self.max_spans * fraction
            or len(self._traces) > self.max_traces * fraction
            or self._held_bytes > self.max_held_bytes * fraction
        )

    def _assemble_loop(self) -> None:
        interval = min(0.25, max(0.01, self.quiet_seconds / 4))
        while not self._stopping.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self._stopping.is_set():
                break
            try:
                self._tick()
            except Exception:  # never let the assembler die: log, and keep going
                logger.exception("the trace assembler failed; continuing")
                time.sleep(interval)

    def _tick(self, *, force: bool = False) -> None:
        now = time.monotonic()
        ready: list[tuple[str, int, list[SpanRecord]]] = []
        waited = 0  # ready[waited:] waited long enough to be recorded without a root
        with self._lock:
            quiet, orphan = self.quiet_seconds, self.orphan_seconds
            while self._dirty:
                trace_id, trace = next(iter(self._dirty.items()))
                if trace.touched + quiet > now:
                    break
                del self._dirty[trace_id]
                if trace.root or self._shared is not None:
                    ready.append(self._snapshot(trace_id, trace))
                else:
                    self._orphans[trace_id] = trace
            waited = len(ready)
            while self._orphans:
                trace_id, trace = next(iter(self._orphans.items()))
                if trace.touched + orphan > now:
                    break
                del self._orphans[trace_id]
                ready.append(self._snapshot(trace_id, trace))
            while self._retained:
                trace_id, trace = next(iter(self._retained.items()))
                if trace.done_at + self.retain_seconds > now and not self._over_budget(0.75):
                    break
                self._evict(trace_id)
            if force or self._over_budget(0.9):
                # Still too much held: assemble the longest-waiting open traces now, so that
                # they can be written and let go of (a late root still updates them).
                goal = self.max_spans * 0.75
                byte_goal = self.max_held_bytes * 0.75
                pending = self._span_count - sum(len(spans) for _, _, spans in ready)
                pending_bytes = self._held_bytes - sum(
                    self._traces[trace_id].size for trace_id, _, _ in ready
                )
                for table in (self._orphans, self._dirty):
                    while table and (pending > goal or pending_bytes > byte_goal):
                        trace_id, trace = table.popitem(last=False)
                        ready.append(self._snapshot(trace_id, trace))
                        pending -= len(trace.spans)
                        pending_bytes -= trace.size
        for n, (trace_id, generation, spans) in enumerate(ready):
            self._put(self._job(trace_id, generation, spans, rootless=n >= waited))

    def _snapshot(self, trace_id: str, trace: _Trace) -> tuple[str, int, list[SpanRecord]]:
        trace.state = _QUEUED
        return trace_id, trace.generation, list(trace.spans.values())

    def _job(
        self, trace_id: str, generation: int, spans: list[SpanRecord], *, rootless: bool = False
    ) -> _Job:
        if self._shared is None:
            return _Job(trace_id, generation, self._extract(trace_id, spans))
        job = _Job(trace_id, generation, None, spans, _encode_shared(spans), rootless)
        if self._split_share < 0.5 and (rootless or self._whole_here(spans)):
            # Most traces reach this server alone: build the recording here, on the assembler
            # thread, so that the writer only stores it (unless other servers have spans of
            # this trace after all).
            job.recording, job.built = self._extract(trace_id, spans), True
        return job

    @staticmethod
    def _whole_here(spans: Sequence[SpanRecord]) -> bool:
        """Whether the spans here may be the whole trace: its root, and a span at least for
        each call the root counts (a trace whose other calls are elsewhere is not built
        here first, to be built again from every span)."""
        roots = [span for span in spans if span.is_root]
        return bool(roots) and not _too_few_spans(roots, len(spans))

    def _extract_shared(
        self, job: _Job, others: Mapping[str, str], stored: bool
    ) -> Recording | None:
        """The recording of a trace's spans here and elsewhere; None while no server has its
        root, or, with nothing stored yet, while its root counts calls whose spans no server
        added yet (the server that adds them assembles the trace, seeing these spans too),
        unless the trace waited as long as an orphan does."""
        own = job.spans or []
        self._split_share += ((1.0 if others else 0.0) - self._split_share) / 64
        if job.built and not others:
            recording = job.recording
        else:
            try:
                spans = own + _decode_shared(others.values()) if others else own
            except Exception:  # another server's rows: one bad trace must not stop the others
                logger.exception(
                    "trace %s: cannot read its spans from the shared store", job.trace_id
                )
                return None
            if not job.rootless:
                roots = [span for span in spans if span.is_root]
                if not roots or (not stored and _too_few_spans(roots, len(spans))):
                    return None
            recording = self._extract(job.trace_id, spans)
        if recording is not None and not (stored or job.rootless) and _spans_missing(recording):
            return None
        return recording

    def _extract(self, trace_id: str, spans: list[SpanRecord]) -> Recording | None:
        try:
            bundle = bundle_from_spans(spans)
            if bundle is None:
                return None
            return Recording.from_bundle(bundle)
        except Exception:  # one bad trace must not stop the others
            logger.exception("trace %s: cannot extract a recording from its spans", trace_id)
            return None

    def _flush(self, deadline: float) -> None:
        """Assemble every open trace that has its root, quiet or not (shutdown)."""
        with self._lock:
            ready = []
            for table in (self._dirty, self._orphans):
                for trace_id, trace in list(table.items()):
                    if trace.root or self._shared is not None:
                        del table[trace_id]
                        ready.append(self._snapshot(trace_id, trace))
        for trace_id, generation, spans in ready:
            self._put(self._job(trace_id, generation, spans), deadline)

    def _put(self, item: Any, deadline: float | None = None) -> None:
        while True:
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                if deadline is not None and time.monotonic() > deadline:
                    logger.error("the write queue stayed full until the shutdown deadline")
                    return
                if not any(writer.is_alive() for writer in self._writers):
                    return

    # writing --------------------------------------------------------------------------------

    def _write_loop(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            if item is _STOP:
                break
            batch: list[_Job] = [item]
            while len(batch) < self.write_batch_size:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                batch.append(item)
            try:
                self._write(batch)
            except Exception:  # never let the writer die
                logger.exception("the recording writer failed; the batch stays in the journal")

    def _write(self, batch: list[_Job]) -> None:
        jobs = [job for job in batch if job.recording is not None or job.shared is not None]
        written: list[bool | None] = []
        if jobs:
            stored = self._store(jobs)
            if stored is None:
                return  # gave up at shutdown: the journal keeps these traces
            written = stored
            with self._lock:
                self.counters["recordings_written"] += sum(w is not None for w in written)
                self.counters["recordings_changed"] += sum(w is True for w in written)
        waiting = {
            job.trace_id
            for job, result in zip(jobs, written, strict=True)
            if result is None and job.shared is not None and not job.rootless
        }
        with self._lock:
            now = time.monotonic()
            for job in batch:
                self.counters["traces_assembled"] += 1
                self._written(job, now, root_elsewhere=job.trace_id in waiting)

    def _put_jobs(self, jobs: list[_Job]) -> list[bool | None]:
        if self._shared is not None:
            by_trace = {job.trace_id: job for job in jobs}
            return self._shared.assemble_traces(
                [(job.trace_id, job.shared or {}) for job in jobs],
                lambda trace_id, others, stored: self._extract_shared(
                    by_trace[trace_id], others, stored
                ),
            )
        recordings = [job.recording for job in jobs if job.recording is not None]
        return list(self.store.put_recordings(recordings))

    def _store(self, jobs: list[_Job]) -> list[bool | None] | None:
        attempt = 0
        while True:
            try:
                written = self._put_jobs(jobs)
                if self._store_error is not None:
                    with self._lock:
                        self._store_error = None
                    logger.info("the store takes writes again")
                return written
            except StoreError as exc:
                with self._lock:
                    self.counters["store_errors"] += 1
                    # Until a write succeeds, new spans are refused (503): acknowledging them
                    # into a journal that cannot drain only defers the failure.
                    self._store_error = str(exc)
                if time.monotonic() > self._give_up_at:
                    return None
                delay = min(5.0, 0.05 * 2**attempt)
                if attempt == 0 or delay >= 5.0:
                    logger.warning("the store refused a batch (%s); retrying in %.1fs", exc, delay)
                attempt += 1
                time.sleep(delay)
            except (ValueError, TypeError):
                if len(jobs) == 1:
                    logger.exception(
                        "trace %s: the store cannot hold its recording", jobs[0].trace_id
                    )
                    return [False]
                # Find the one the store cannot hold; the others are written.
                results: list[bool | None] = []
                for job in jobs:
                    one = self._store([job])
                    if one is None:
                        return None
                    results.extend(one)
                return results

    def _written(self, job: _Job, now: float, *, root_elsewhere: bool = False) -> None:
        """A job is in the store (lock held): the trace is done, unless spans came meanwhile;
        a trace whose root no server has yet waits for it as an orphan does."""
        trace = self._traces.get(job.trace_id)
        if trace is None or trace.state != _QUEUED:
            return
        if root_elsewhere and trace.generation == job.generation:
            # Its spans are in the shared store now, which an orphan's assembly reads: only
            # the wait is kept here (and the journal, which starts the wait again on restart).
            self._span_count -= len(trace.spans)
            self._held_bytes -= trace.size
            trace.spans, trace.size = {}, 0
            trace.state = _OPEN
            self._orphans[job.trace_id] = trace
        elif trace.generation == job.generation:
            trace.state = _DONE
            trace.done_at = now
            self._retained[job.trace_id] = trace
        else:
            trace.state = _OPEN
            self._dirty[job.trace_id] = trace  # its new spans set touched; quiet from then

    def _evict(self, trace_id: str) -> None:
        trace = self._traces.pop(trace_id, None)
        self._retained.pop(trace_id, None)
        if trace is None:
            return
        self._span_count -= len(trace.spans)
        self._held_bytes -= trace.size
        if self.journal is not None:
            for segment in trace.segments:
                self.journal.unref(segment)

    # diagnostics ----------------------------------------------------------------------------

    @property
    def store_error(self) -> str | None:
        """The store's last write failure, while writes keep failing."""
        return self._store_error

    def problems(self) -> list[str]:
        """Why the pipeline cannot take spans now (empty when it can): the store's last write
        failed, or the journal or the memory held is nearly full."""
        found: list[str] = []
        with self._lock:
            if self._closing:
                found.append("the server is shutting down")
            if self._store_error is not None:
                found.append(f"the store cannot be written: {self._store_error}")
            if self._held_bytes > self.max_held_bytes * 0.9:
                found.append("the server holds nearly as many bytes of spans as it may")
        if self.journal is not None and self.journal.size > self.max_journal_bytes * 0.9:
            found.append(f"the ingest journal {self.journal.directory} is nearly full")
        return found

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                **self.counters,
                "traces_in_memory": len(self._traces),
                "spans_in_memory": self._span_count,
                "bytes_in_memory": self._held_bytes,
                "traces_open": len(self._dirty) + len(self._orphans),
                "write_queue": self._queue.qsize(),
            }
