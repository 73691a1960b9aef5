"""What the pages read of a recording or a case: a page of its calls, not the whole of it.

A recording's bundle is one JSON document; 200 calls of 20 kB are 7 MiB of it and 160 MB of
Python objects once decoded. A page shows twenty calls, and a list of traces shows none, so
the SQL stores answer them without decoding the bundle in Python:

- the list reads the summary columns only, each of the input, output, service and agent
  name cut to :data:`SUMMARY_TEXT` characters by the engine (:meth:`Store.recording_summaries`);
- beside each recording and case the store keeps its outline (:func:`stored_outline`, written
  with the bundle, and by schema migration 7 for those stored before): every call's kind,
  name, place, ``seq``, times and token usage (a few numbers each: what the call count and the
  waterfall need), and where its entry's text lies in the stored bundle. A trace page reads
  the outline and the bytes of the entries it shows only (:meth:`Store.recording_calls`,
  :meth:`Store.case_calls`), each checked to be the call the outline describes;
- a row without an outline, or one its bundle does not bear out (changed outside tracely), is
  read with the engine's JSON functions instead (SQLite ``json_each``, PostgreSQL
  ``json_each`` / ``json_array_elements`` on the ``json`` type, which keeps the text as
  stored): slower, and still only the calls shown reach Python.

The stored recording itself is never rewritten. A backend without such reads (the HTTP client)
reads the whole recording and cuts it here, with the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import orjson

from tracely_sdk.store._model import Case, CaseVersion, Recording, dumps_json, dumps_json_bytes

__all__ = [
    "SUMMARY_TEXT",
    "CallOutline",
    "CaseCalls",
    "CaseSummary",
    "Cut",
    "RecordedCalls",
    "RecordingSummary",
    "VersionSummary",
    "calls_of",
    "case_summary_of",
    "checked",
    "decode",
    "entries_at",
    "entries_of",
    "in_order",
    "listed_value",
    "page_of",
    "read_outline",
    "stored_outline",
    "stored_text",
    "summary_of",
    "version_summary_of",
]

# Characters of a listed trace's input, output, service and agent name read from the store:
# a list shows a few dozen of each.
SUMMARY_TEXT = 2_000

# The sections of a bundle that hold calls, in the order their entries are numbered when
# they carry no ``seq`` (as the matcher numbers them).
SECTIONS = ("tools", "llm")


def decode(text: str | bytes) -> Any:
    """JSON text read from the store as a value (the one place the outline decodes)."""
    return orjson.loads(text)


@dataclass(frozen=True)
class Cut:
    """The beginning of a value too long to read whole for a list: ``text`` is the value as
    a page shows it (a string itself, anything else its JSON), ``length`` the length of its
    whole JSON text."""

    text: str
    length: int


@dataclass(frozen=True)
class RecordingSummary:
    """A recording's facts without its calls. In a list, ``input``, ``output``, ``service``
    and ``agent_name`` may be cut (``input``/``output`` are then :class:`Cut`); for a trace
    page they are whole, and ``ended_at`` is the agent run's end (None when unknown)."""

    trace_id: str
    service: str
    agent_name: str | None
    started_at: int
    status: str
    input: Any
    output: Any
    replay_mode: str | None = None
    received_at: int | None = None
    ended_at: Any = None


@dataclass(frozen=True)
class CallOutline:
    """One recorded call without its values: ``kind`` (``tools``/``llm``), ``name``, its
    ``index`` among the calls of that name, its ``seq``, and its times and token usage as
    recorded (None when absent)."""

    kind: str
    name: str
    index: int
    seq: int
    started_at: Any = None
    ended_at: Any = None
    usage: Any = None


@dataclass(frozen=True)
class RecordedCalls:
    """A recording's facts, the outline of every call in the trace's order, and the whole
    entries of ``outline[offset:offset + len(entries)]``."""

    summary: RecordingSummary
    outline: list[CallOutline]
    offset: int
    entries: list[Mapping[str, Any]]


@dataclass(frozen=True)
class CaseSummary:
    """A case's facts without its recording: those of :class:`Case` but ``bundle``, and the
    recording's ``started_at`` and its agent run's ``ended_at`` (None when unknown)."""

    id: str
    name: str
    entrypoint: str | None
    input: Any
    expected_output: Any
    source_trace_id: str | None
    version: int
    tags: tuple[str, ...]
    created_at: int
    updated_at: int
    started_at: Any = None
    ended_at: Any = None


@dataclass(frozen=True)
class CaseCalls:
    """A case's facts, the outline of every call of its current recording in the trace's
    order, and the whole entries of ``outline[offset:offset + len(entries)]``."""

    case: CaseSummary
    outline: list[CallOutline]
    offset: int
    entries: list[Any]


@dataclass(frozen=True)
class VersionSummary:
    """One version of a case without its values: ``size`` is the length of its recording's
    JSON text (characters), what reading it whole would cost."""

    version: int
    created_at: int
    source_trace_id: str | None
    note: str | None
    size: int


def case_summary_of(case: Case) -> CaseSummary:
    """The summary of a whole case."""
    agent = case.bundle.get("agent")
    return CaseSummary(
        id=case.id,
        name=case.name,
        entrypoint=case.entrypoint,
        input=case.input,
        expected_output=case.expected_output,
        source_trace_id=case.source_trace_id,
        version=case.version,
        tags=case.tags,
        created_at=case.created_at,
        updated_at=case.updated_at,
        started_at=case.bundle.get("started_at"),
        ended_at=agent.get("ended_at") if isinstance(agent, Mapping) else None,
    )


def version_summary_of(version: CaseVersion) -> VersionSummary:
    """The summary of a whole version."""
    size = len(dumps_json(version.bundle))
    return VersionSummary(
        version.version, version.created_at, version.source_trace_id, version.note, size
    )


def entries_of(bundle: Mapping[str, Any], calls: Sequence[CallOutline]) -> list[Any]:
    """The entries of a whole bundle at the places of ``calls`` (their kind, name and index):
    None where it has no such entry."""
    found = []
    for c in calls:
        section = bundle.get(c.kind)
        entries = section.get(c.name) if isinstance(section, Mapping) else None
        ok = isinstance(entries, list) and 0 <= c.index < len(entries)
        found.append(entries[c.index] if ok else None)  # type: ignore[index]
    return found


def in_order(rows: Iterable[tuple[str, str, int, Any, Any, Any, Any]]) -> list[CallOutline]:
    """Outlines from rows ``(kind, name, index, seq, started_at, ended_at, usage)`` given
    section by section in the bundle's order, sorted as replay orders the calls: by ``seq``,
    a call without one taking its place among all the calls (tools first, then LLM calls)."""
    by_section: dict[str, list[tuple[str, str, int, Any, Any, Any, Any]]] = {
        s: [] for s in SECTIONS
    }
    for row in rows:
        by_section[row[0]].append(row)
    calls = []
    order = 0
    for section in SECTIONS:
        for kind, name, index, seq, started, ended, usage in by_section[section]:
            order += 1
            number = seq if type(seq) is int else order
            calls.append(CallOutline(kind, name, index, number, started, ended, usage))
    calls.sort(key=lambda c: c.seq)  # stable: calls of one seq keep the bundle's order
    return calls


def summary_of(recording: Recording, *, cut: bool = False) -> RecordingSummary:
    """The summary of a whole recording (``cut``: as a list reads it)."""
    agent = recording.bundle.get("agent")
    ended = agent.get("ended_at") if isinstance(agent, Mapping) else None
    return RecordingSummary(
        trace_id=recording.trace_id,
        service=_cut_name(recording.service) if cut else recording.service,
        agent_name=_cut_name(recording.agent_name) if cut else recording.agent_name,
        started_at=recording.started_at,
        status=recording.status,
        input=_cut_value(recording.input) if cut else recording.input,
        output=_cut_value(recording.output) if cut else recording.output,
        replay_mode=recording.replay_mode,
        received_at=recording.received_at,
        ended_at=ended,
    )


def _cut_name(name: str | None) -> Any:
    return name if name is None else name[:SUMMARY_TEXT]


def _cut_value(value: Any) -> Any:
    text = None if value is None else dumps_json(value)
    return value if text is None else listed_value(text[:SUMMARY_TEXT], len(text))


def listed_value(head: str | None, length: int | None) -> Any:
    """A listed input or output from the first :data:`SUMMARY_TEXT` characters of its JSON
    text and the whole text's length: the value when that is all of it, else a :class:`Cut`."""
    if head is None:
        return None
    if length is None or length <= len(head):
        return decode(head)
    if head.startswith('"'):
        # A string: as much of it as decodes (the cut may fall inside an escape).
        for end in range(len(head), max(len(head) - 12, 1), -1):
            try:
                text = decode(head[:end] + '"')
            except orjson.JSONDecodeError:
                continue
            return Cut(text, length)
    return Cut(head, length)


def _rows(bundle: Mapping[str, Any]) -> list[tuple[str, str, int, Any, Any, Any, Any]]:
    """The outline rows of a bundle's calls, section by section (see :func:`in_order`)."""
    rows = []
    for section in SECTIONS:
        calls = bundle.get(section)
        for name, entries in calls.items() if isinstance(calls, Mapping) else ():
            for index, entry in enumerate(entries if isinstance(entries, list) else ()):
                raw = entry if isinstance(entry, Mapping) else {}
                rows.append(
                    (
                        section,
                        name,
                        index,
                        raw.get("seq"),
                        raw.get("started_at"),
                        raw.get("ended_at"),
                        raw.get("usage"),
                    )
                )
    return rows


def stored_outline(text: str, bundle: Mapping[str, Any]) -> str:
    """The outline a SQL store keeps beside a recording whose bundle is stored as ``text``
    (``bundle`` decoded): the agent run's end, and each call in the trace's order with where
    its entry's JSON text lies in ``text`` (start and length in UTF-8 bytes; nulls when it is
    not there as the store writes it). Computed once, when the recording is written, so that
    a page reads its calls' facts, and the text of the calls it shows only."""
    return _outline_of(text.encode("utf-8"), bundle)


def _outline_of(data: bytes, bundle: Mapping[str, Any]) -> str:
    """:func:`stored_outline` of the text's UTF-8 bytes. Searched as bytes, a piece's place
    is its place in UTF-8 bytes as found, with no text encoded again to count them (each
    piece starts with an ASCII bracket, so a match in the bytes starts at a character)."""
    rows = _rows(bundle)
    places: dict[tuple[str, str, int], tuple[int, int]] = {}
    at = 0  # where the last piece ended
    # In the text's order as the store writes it (sorted keys), so each search goes on from
    # where the last one ended; a piece not found there is looked for from the start. A piece
    # is the entry's own text, so wherever it is found, it reads back as that entry.
    for kind, name, index, *_ in sorted(rows, key=lambda r: (r[0], str(r[1]), r[2])):
        try:
            piece = dumps_json_bytes(bundle[kind][name][index])
        except ValueError:
            continue
        found = _find(data, piece, at)
        if found < 0:
            found, at = _find(data, piece, 0), 0
        if found < 0:
            continue
        places[(kind, name, index)] = (found, len(piece))
        at = found + len(piece)
    # As in_order sorts them (the rows are section by section already), without an object
    # per call: the number a call without a seq takes is its place among all the calls.
    nowhere = (None, None)
    calls = [
        [
            kind,
            name,
            index,
            seq if type(seq) is int else number,
            started,
            ended,
            usage,
            *places.get((kind, name, index), nowhere),
        ]
        for number, (kind, name, index, seq, started, ended, usage) in enumerate(rows, 1)
    ]
    calls.sort(key=_SEQ)  # stable: calls of one seq keep the bundle's order
    agent = bundle.get("agent")
    ended = agent.get("ended_at") if isinstance(agent, Mapping) else None
    return dumps_json({"calls": calls, "ended_at": ended})


_SEQ = itemgetter(3)


def _find(data: bytes, piece: bytes, at: int) -> int:
    """Where ``piece`` is in ``data`` from ``at`` (-1: nowhere): found by its first bytes,
    which lie a few bytes on (the next entry), then compared whole; a long needle given to
    ``find`` whole costs a pass over it before the search starts."""
    head = piece[:64]
    found = data.find(head, at)
    while found >= 0 and not data.startswith(piece, found):
        found = data.find(head, found + 1)
    return found


def stored_text(bundle: Mapping[str, Any]) -> tuple[str, str]:
    """A bundle's text as a SQL store writes it, and its outline (:func:`stored_outline`)."""
    data = dumps_json_bytes(bundle)
    return data.decode(), _outline_of(data, bundle)


def read_outline(text: str) -> tuple[list[CallOutline], list[tuple[int, int] | None], Any]:
    """A stored outline: the calls in the trace's order, where each one's entry lies in the
    bundle's text (None: not known), and the agent run's end."""
    doc = decode(text)
    calls, places = [], []
    for kind, name, index, seq, started, ended, usage, start, length in doc["calls"]:
        calls.append(CallOutline(kind, name, index, seq, started, ended, usage))
        places.append((start, length) if type(start) is int and type(length) is int else None)
    return calls, places, doc.get("ended_at")


def describes(call: CallOutline, entry: Any) -> bool:
    """Whether ``entry`` (read where the outline put it) is the call ``call`` outlines."""
    if not isinstance(entry, Mapping):
        return False
    seq = entry.get("seq")
    return (
        (type(seq) is not int or seq == call.seq)
        and entry.get("started_at") == call.started_at
        and entry.get("ended_at") == call.ended_at
        and entry.get("usage") == call.usage
    )


def page_of(
    bundle: Mapping[str, Any], offset: int, limit: int
) -> tuple[list[CallOutline], list[Any]]:
    """A whole bundle's outline, and the entries of ``limit`` of its calls from ``offset``."""
    outline = in_order(_rows(bundle))
    entries = [bundle[c.kind][c.name][c.index] for c in outline[offset : offset + limit]]
    return outline, entries


def calls_of(recording: Recording, offset: int, limit: int) -> RecordedCalls:
    """:class:`RecordedCalls` of a whole recording (a backend that cannot read less)."""
    outline, entries = page_of(recording.bundle, offset, limit)
    return RecordedCalls(summary_of(recording), outline, offset, entries)


def entries_at(
    raw: bytes, outline: list[CallOutline], places: list[tuple[int, int] | None]
) -> list[Any] | None:
    """The entries of ``outline`` read from a bundle's UTF-8 text ``raw`` where ``places``
    say they lie; None when one is not known or is not the call its outline describes."""
    if any(p is None for p in places):
        return None
    return checked(outline, [raw[p[0] : p[0] + p[1]] for p in places if p is not None])


def checked(outline: list[CallOutline], texts: Sequence[bytes | str | None]) -> list[Any] | None:
    """The entries ``texts`` hold (read where the outline put them), or None when one is not
    the call its outline describes (the row was changed since the outline was written)."""
    if len(texts) != len(outline):
        return None
    entries = []
    for call, text in zip(outline, texts, strict=True):
        try:
            entry = decode(text) if text is not None else None
        except orjson.JSONDecodeError:
            return None
        if not describes(call, entry):
            return None
        entries.append(entry)
    return entries


# -- the SQL of each engine -----------------------------------------------------------------
#
# Written for the two engines apart: their JSON functions differ. Every statement reads one
# recording (by trace id) and hands Python small values, or the entries a page shows.

# A list's columns: those before ``bundle`` only (SQLite reads a row's columns in order, and
# one past the bundle would walk the bundle's pages).
SUMMARIES_SQL = (
    f"SELECT trace_id, substr(service, 1, {SUMMARY_TEXT}), substr(agent_name, 1, {SUMMARY_TEXT}), "
    f"started_at, status, substr(input, 1, {SUMMARY_TEXT}), length(input), "
    f"substr(output, 1, {SUMMARY_TEXT}), length(output) FROM recordings"
)

# A list's columns whole (the API's list of traces): the input and output as stored, and the
# two columns past the bundle, which SQLite reaches by walking the bundle's pages (read, not
# decoded).
WHOLE_SUMMARIES_SQL = (
    "SELECT trace_id, service, agent_name, started_at, status, input, output, replay_mode, "
    "received_at FROM recordings"
)

# The recording's facts and its stored outline (NULL: none).
HEAD_SQL = (
    "SELECT trace_id, service, agent_name, started_at, status, input, output, replay_mode, "
    "received_at, outline FROM recordings WHERE trace_id = ?"
)

# The agent run's end, from the bundle (a recording without an outline).
ENDED_SQL = {
    "sqlite": "SELECT bundle -> '$.agent.ended_at' FROM recordings WHERE trace_id = ?",
    "postgresql": "SELECT (bundle::json -> 'agent' -> 'ended_at')::text FROM recordings "
    "WHERE trace_id = %s",
}

# The UTF-8 bytes of entries where the outline says they lie (``{texts}``: one
# ``substring(bundle FROM ? FOR ?)`` each), the bundle's text converted once for all of them.
# SQLite reads them with its incremental blob I/O instead (only those bytes), where Python
# has it (3.11), else with this.
TEXTS_SQL = {
    "sqlite": "SELECT {texts} FROM (SELECT CAST(bundle AS BLOB) AS bundle FROM recordings "
    "WHERE trace_id = ?) r",
    "postgresql": "SELECT {texts} FROM (SELECT convert_to(bundle, 'UTF8') AS bundle "
    "FROM recordings WHERE trace_id = %s OFFSET 0) r",
}

# Every call of one section (a parameter: ``$.tools`` / ``tools``), in the bundle's order:
# its name, index, and [seq, started_at, ended_at, usage] (SQLite: one JSON array; PostgreSQL:
# four JSON texts).
OUTLINE_SQL = {
    "sqlite": "SELECT n.key, e.key, CASE WHEN e.type = 'object' THEN "
    "json_extract(e.value, '$.seq', '$.started_at', '$.ended_at', '$.usage') END "
    "FROM recordings r, json_each(r.bundle, ?) n, "
    "json_each(CASE WHEN n.type = 'array' THEN n.value ELSE '[]' END) e "
    "WHERE r.trace_id = ? AND json_type(r.bundle, ?) = 'object' ORDER BY n.id, e.key",
    "postgresql": "SELECT n.key, e.i - 1, (e.v -> 'seq')::text, (e.v -> 'started_at')::text, "
    "(e.v -> 'ended_at')::text, (e.v -> 'usage')::text "
    "FROM (SELECT bundle::json -> CAST(%s AS TEXT) AS s FROM recordings WHERE trace_id = %s "
    "OFFSET 0) r "
    "CROSS JOIN LATERAL json_each(CASE WHEN json_typeof(r.s) = 'object' THEN r.s "
    "ELSE '{}'::json END) WITH ORDINALITY n(key, value, ni) "
    "CROSS JOIN LATERAL json_array_elements(CASE WHEN json_typeof(n.value) = 'array' "
    "THEN n.value ELSE '[]'::json END) WITH ORDINALITY e(v, i) "
    "ORDER BY n.ni, e.i",
}

# The whole entries of one name of one section at the given indexes (SQLite: a JSON array of
# them, in the order asked, from one path per index; PostgreSQL: a row per entry), of the row
# of ``{table}`` that ``{row}`` picks: a recording by trace id, a case's version by case id
# and version (see :data:`ROWS`).
ENTRIES_SQL = {
    "sqlite": "SELECT json_extract(n.value, {paths}) FROM {table} r, json_each(r.bundle, ?) n "
    "WHERE {row} AND n.key = ?",
    "postgresql": "SELECT e.i - 1, e.v::text "
    "FROM (SELECT bundle::json -> CAST(%s AS TEXT) -> CAST(%s AS TEXT) AS a FROM {table} "
    "WHERE {row} OFFSET 0) r "
    "CROSS JOIN LATERAL json_array_elements(CASE WHEN json_typeof(r.a) = 'array' THEN r.a "
    "ELSE '[]'::json END) WITH ORDINALITY e(v, i) WHERE e.i - 1 = ANY(%s)",
}

# The tables :data:`ENTRIES_SQL` reads, and how each picks its row (``?``: the parameters).
ROWS = {"recordings": "trace_id = ?", "case_versions": "case_id = ? AND version = ?"}

# The recording's start, from a case's bundle (the outline has the agent run's end only).
CASE_STARTED_SQL = {
    "sqlite": "SELECT bundle -> '$.started_at' FROM cases WHERE id = ?",
    "postgresql": "SELECT (bundle::json -> 'started_at')::text FROM cases WHERE id = %s",
}
