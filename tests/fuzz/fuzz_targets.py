"""What must hold for any input, whatever its bytes: each target takes one input and raises
only on a bug (an exception other than the documented error types, an extracted bundle the
validator refuses, a store that cannot hold a recording, or work that grows faster than the
spans)."""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import tracely_sdk as tracely
from tracely_otel import BundleFormatError, SpanRecord, bundle_from_spans, validate_bundle
from tracely_otel._otlp import OTLPDecodeError, decode_any, decode_export_request
from tracely_sdk.errors import BundleError, RecordedError, ReplayError, StoreError
from tracely_sdk.store import Recording, SQLiteStore, export_cases, import_cases

# Each parent pointer the extractor follows, per span it is given, at most (see CountedRecord).
HOPS_PER_SPAN = 8


class CountedRecord(SpanRecord):
    """A SpanRecord that counts how often anything follows its parent pointer, so that the
    extractor's work can be compared with the number of spans without timing it."""

    hops = 0

    @property  # type: ignore[override]
    def parent_span_id(self) -> str | None:
        CountedRecord.hops += 1
        return self.__dict__["parent"]  # type: ignore[no-any-return]

    @parent_span_id.setter
    def parent_span_id(self, value: str | None) -> None:
        self.__dict__["parent"] = value


def counted(record: SpanRecord) -> CountedRecord:
    return CountedRecord(**{f.name: getattr(record, f.name) for f in fields(SpanRecord)})


def extract(records: Sequence[SpanRecord]) -> list[dict[str, Any]]:
    """Every trace's bundle: valid, storable, and extracted in work linear in its spans."""
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for record in records:
        by_trace[record.trace_id].append(counted(record))
    bundles = []
    for spans in by_trace.values():
        CountedRecord.hops = 0
        bundle = bundle_from_spans(spans)
        assert CountedRecord.hops <= HOPS_PER_SPAN * (len(spans) + 1), (
            f"{CountedRecord.hops} parent hops to extract {len(spans)} spans"
        )
        if bundle is None:
            continue
        assert validate_bundle(bundle) == bundle
        store().put_recording(Recording.from_bundle(bundle))
        bundles.append(bundle)
    return bundles


_store: list[SQLiteStore] = []


def store() -> SQLiteStore:
    if not _store:
        _store.append(SQLiteStore(":memory:"))
    return _store[0]


def otlp(data: bytes) -> None:
    """A body posted to the OTLP receiver (either encoding), or a file given to import."""
    for encoding in ("proto", "json"):
        try:
            records, rejected, errors = decode_export_request(data, encoding)
        except OTLPDecodeError:
            continue
        assert len(errors) <= rejected, "each reason refuses at least one span"
        extract(records)
    try:
        decode_any(data)
    except OTLPDecodeError:
        pass


def _live() -> Any:
    raise AssertionError("a recorded replay made a live call")


def _entries(bundle: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    return [
        (kind, name, entry)
        for kind in ("tools", "llm")
        for name, entries in (bundle.get(kind) or {}).items()
        for entry in entries
    ]


def bundle(data: bytes) -> None:
    """A bundle given to ``fixtures()``: refused on load, or every call served or refused with
    our own errors."""
    try:
        loaded = validate_bundle(data)
    except BundleFormatError:
        return
    try:
        with tracely.fixtures(loaded):
            for kind, name, entry in _entries(loaded):
                try:
                    tracely.fixture(kind, name)
                    if kind == "tools":
                        tracely.call_tool(name, _live, args=entry.get("args"))
                    else:
                        tracely.call_llm(name, _live, input=entry.get("input"))
                except (ReplayError, RecordedError):
                    pass
    except BundleError:
        return


def case_file(data: bytes) -> None:
    """A case file given to ``tracely cases import``: imported whole, or nothing written."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "cases"
        directory.mkdir()
        (directory / "seed.json").write_bytes(data)
        with SQLiteStore(Path(tmp) / "t.db") as target:
            try:
                import_cases(target, directory)
            except StoreError:
                assert target.list_cases() == [], "a refused import wrote a case"
                return
            export_cases(target, Path(tmp) / "again")
            import_cases(target, Path(tmp) / "again")


TARGETS: dict[str, Callable[[bytes], None]] = {
    "otlp-proto": otlp,
    "otlp-json": otlp,
    "bundle": bundle,
    "case-file": case_file,
}
"""The check for each kind of seed in the corpus."""
