"""The SQL store, and SQLite as its embedded engine (the default: nothing to start).

:class:`SQLStore` holds every query, written in the SQL that SQLite and PostgreSQL share and
passed through a :class:`~tracely_sdk.store._migrations.Dialect`; a backend provides the
connection. :class:`SQLiteStore` is that backend for a local file:

- WAL journal, so readers never block the writer and many processes can share one file;
- ``busy_timeout``, so a writer waits for another instead of failing at once;
- every write in one ``BEGIN IMMEDIATE`` transaction, so two processes recording at once
  never interleave a read-then-write;
- foreign keys on; one connection per store object, guarded by a lock (safe to share between
  threads), reopened transparently in a forked child;
- migrations applied on open; a file from a newer tracely is refused untouched.
"""

from __future__ import annotations

import abc
import dataclasses
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import orjson

from tracely_sdk.errors import Conflict, NotFound, StoreError
from tracely_sdk.store import _outline
from tracely_sdk.store._base import (
    Promotion,
    StatedRun,
    Store,
    check_history,
    check_page,
    plan_edit,
    plan_promotion,
    plan_recapture,
)
from tracely_sdk.store._migrations import (
    SQLITE,
    Connection,
    Dialect,
    check_not_newer,
    migrate,
    schema_version,
)
from tracely_sdk.store._model import (
    Case,
    CaseVersion,
    InvalidCase,
    Recording,
    Run,
    bundle_weight,
    check_case,
    dumps_json,
    dumps_json_bytes,
    normalise_tags,
    now_ns,
    redact_url,
    validate_entrypoint,
)
from tracely_sdk.store._outline import (
    CallOutline,
    CaseCalls,
    RecordedCalls,
    RecordingSummary,
    VersionSummary,
)
from tracely_sdk.store._seal import (
    broken_fields,
    case_row_fields,
    seal,
    seals_texts,
    version_row_fields,
)

__all__ = [
    "CASE_COLUMNS",
    "REC_COLUMNS",
    "SQLStore",
    "SQLiteStore",
    "case_from_row",
    "sealed_case",
]

_Made = TypeVar("_Made")

# The column lists and row reader every SQL backend of the package shares.
REC_COLUMNS = (
    "trace_id, service, agent_name, started_at, status, input, output, bundle, replay_mode, "
    "received_at"
)
CASE_COLUMNS = (
    "id, name, entrypoint, input, expected_output, bundle, source_trace_id, version, tags, "
    "created_at, updated_at, checksum"
)
_CASE_COLUMNS = ", ".join(f"c.{c.strip()}" for c in CASE_COLUMNS.split(","))
_SEALED_TEXTS = "c.input, c.expected_output, c.bundle"
_VERSION_COLUMNS = (
    "case_id, version, input, expected_output, bundle, source_trace_id, created_at, note, checksum"
)


def _j(value: Any) -> str | None:
    return None if value is None else dumps_json(value)


class _CorruptRow(ValueError):
    pass


def _l(text: Any) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise _CorruptRow(str(exc)) from exc


def _d(text: Any) -> Any:
    """:func:`_l` for what the outline of a recording reads (see ``_outline.decode``)."""
    if text is None:
        return None
    try:
        return _outline.decode(text)
    except orjson.JSONDecodeError as exc:
        raise _CorruptRow(str(exc)) from exc


def _corrupt(what: str, exc: _CorruptRow) -> StoreError:
    return StoreError(
        f"{what} holds JSON that cannot be read ({exc}): the row was changed outside tracely; "
        "restore it from an export (tracely cases import) or delete it"
    )


def _recording(row: Sequence[Any]) -> Recording:
    try:
        return _recording_of(row)
    except _CorruptRow as exc:
        raise _corrupt(f"recording {row[0]}", exc) from exc


def _whole_summary(row: Sequence[Any]) -> RecordingSummary:
    """A summary from the columns the whole-summary and head queries read, in their order."""
    return RecordingSummary(
        trace_id=row[0],
        service=row[1],
        agent_name=row[2],
        started_at=int(row[3]),
        status=row[4],
        input=_d(row[5]),
        output=_d(row[6]),
        replay_mode=row[7],
        received_at=int(row[8]),
    )


def _recording_of(row: Sequence[Any]) -> Recording:
    return Recording(
        trace_id=row[0],
        service=row[1],
        agent_name=row[2],
        started_at=int(row[3]),
        status=row[4],
        input=_l(row[5]),
        output=_l(row[6]),
        bundle=_l(row[7]),
        replay_mode=row[8],
        received_at=int(row[9]),
    )


def case_from_row(row: Sequence[Any]) -> Case:
    """A case from a row of CASE_COLUMNS."""
    try:
        case = _case_of(row)
    except _CorruptRow as exc:
        raise _corrupt(f"case {row[0]}", exc) from exc
    texts = {"input": row[3], "expected_output": row[4], "bundle": row[5]}
    problem = _seal_problem(f"case {case.id}", row[11], _case_fields(case), texts)
    return case if problem is None else dataclasses.replace(case, problem=problem)


def sealed_case(row: Sequence[Any], make: Callable[..., _Made]) -> _Made | None:
    """``make`` of the fields of a row of CASE_COLUMNS whose stored seal is, byte for byte, the
    seal of the row's texts (``seals_texts``), each JSON column decoded once and the fields
    checked as a :class:`Case` checks them (``check_case``); None for any other row (changed,
    damaged, of another type, or sealed in another form), which :func:`case_from_row` reads
    and says what is wrong with.

    ``input``, ``expected_output`` and ``bundle`` may be read as the UTF-8 bytes the seal was
    taken over, so that they are hashed and decoded with no text made of them."""
    try:
        return _sealed_case(row, make)
    except (ValueError, TypeError):
        return None


def _sealed_case(row: Sequence[Any], make: Callable[..., _Made]) -> _Made | None:
    (case_id, name, entrypoint, input_text, expected_text, bundle_text) = row[:6]
    source_trace_id, version, tags_text, created_at, updated_at, checksum = row[6:12]
    if type(version) is not int:
        return None
    texts = case_row_fields(
        dumps_json_bytes(case_id),
        dumps_json_bytes(entrypoint),
        dumps_json_bytes(version),
        input_text,
        _NULL if expected_text is None else expected_text,
        bundle_text,
    )
    if not seals_texts(checksum, texts):
        return None
    input = orjson.loads(input_text)
    bundle = orjson.loads(bundle_text)
    tags = check_case(
        case_id,
        name,
        entrypoint,
        input,
        bundle,
        version,
        orjson.loads(tags_text) or (),
        created_at,
        updated_at,
    )
    return make(
        id=case_id,
        name=name,
        version=version,
        entrypoint=entrypoint,
        input=input,
        expected_output=None if expected_text is None else orjson.loads(expected_text),
        bundle=bundle,
        tags=tags,
        source_trace_id=source_trace_id,
    )


_NULL = dumps_json_bytes(None)  # what an expected output stored as NULL is sealed over


def _case_fields(case: Case) -> dict[str, Any]:
    return case_row_fields(
        case.id, case.entrypoint, case.version, case.input, case.expected_output, case.bundle
    )


def _version_fields(v: CaseVersion) -> dict[str, Any]:
    return version_row_fields(v.case_id, v.version, v.input, v.expected_output, v.bundle)


def _sealed(fields: dict[str, Any]) -> str:
    return dumps_json(seal(fields))


def _seal_problem(
    what: str, checksum: Any, fields: dict[str, Any], texts: dict[str, Any] | None = None
) -> str | None:
    """Why a row's content is not what was written (the store seals every write), or None;
    ``texts`` are the row's JSON columns as read (see ``broken_fields``)."""
    try:
        stored = orjson.loads(checksum) if checksum is not None else None
    except orjson.JSONDecodeError:
        stored = None
    broken = broken_fields(stored, fields, texts)
    if not broken:
        return None
    return (
        f"{what}: {', '.join(broken)} does not match the checksum stored with it: the row "
        "was changed outside tracely; restore it from an export (tracely cases import) or "
        "delete it"
    )


def _case_of(row: Sequence[Any]) -> Case:
    return Case(
        id=row[0],
        name=row[1],
        entrypoint=row[2],
        input=_l(row[3]),
        expected_output=_l(row[4]),
        bundle=_l(row[5]),
        source_trace_id=row[6],
        version=int(row[7]),
        tags=tuple(_l(row[8]) or ()),
        created_at=int(row[9]),
        updated_at=int(row[10]),
    )


def _version(row: Sequence[Any]) -> CaseVersion:
    try:
        version = _version_of(row)
    except _CorruptRow as exc:
        raise _corrupt(f"version {row[1]} of case {row[0]}", exc) from exc
    texts = {"input": row[2], "expected_output": row[3], "bundle": row[4]}
    problem = _seal_problem(
        f"version {row[1]} of case {row[0]}", row[8], _version_fields(version), texts
    )
    if problem is not None:
        raise StoreError(problem)
    return version


def _version_of(row: Sequence[Any]) -> CaseVersion:
    return CaseVersion(
        case_id=row[0],
        version=int(row[1]),
        input=_l(row[2]),
        expected_output=_l(row[3]),
        bundle=_l(row[4]),
        source_trace_id=row[5],
        created_at=int(row[6]),
        note=row[7],
    )


def _run(run_id: str, header: Any, cases: Any) -> Run:
    try:
        data = _l(header)
        if not isinstance(data, dict):
            raise _CorruptRow("the run's header is not an object")
        data["cases"] = _l(cases) if cases is not None else []
        return Run.from_dict(data)
    except (_CorruptRow, ValueError) as exc:
        raise StoreError(
            f"run {run_id} cannot be read ({exc}): the row was changed outside tracely"
        ) from exc


class SQLStore(Store):
    """Every store operation in portable SQL; a subclass supplies the connection.

    Subclasses implement :meth:`_connect` (an autocommit DB-API connection whose schema is
    up to date) and set :attr:`dialect` and :attr:`_db_errors` (the engine's exception base).
    """

    dialect: Dialect = SQLITE
    _db_errors: tuple[type[BaseException], ...] = ()
    # Every bundle is validated before it is written, and a case read back whose row does not
    # match its seal carries a problem: the runner need not validate a sound case again.
    validates_bundles = True

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.RLock()
        self._conn: Any = None
        self._pid = os.getpid()
        self._closed = False
        self._stale: list[Any] = []

    # connection handling ------------------------------------------------------------------

    @abc.abstractmethod
    def _connect(self) -> Connection:
        """A new autocommit connection, migrated to the current schema."""

    def _connection(self) -> Any:
        if self._closed:
            raise StoreError(f"the store {self.url} is closed")
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _check_fork(self) -> None:
        if self._pid != os.getpid():
            # A connection must not be used across fork(): the child opens its own. The parent's
            # object is kept (never closed here) so the child does not touch its state.
            self._pid = os.getpid()
            self._lock = threading.RLock()
            if self._conn is not None:
                self._stale.append(self._conn)
                self._conn = None

    def _fail(self, exc: BaseException) -> StoreError:
        return StoreError(f"store {redact_url(self.url)}: {exc}")

    @contextmanager
    def _tx(self, begin: str) -> Iterator[Any]:
        self._check_fork()
        with self._lock:
            try:
                conn = self._connection()
                conn.execute(begin)
            except self._db_errors as exc:
                raise self._fail(exc) from exc
            try:
                yield conn
            except BaseException as exc:
                try:
                    conn.execute("ROLLBACK")
                except self._db_errors:
                    pass
                if isinstance(exc, self._db_errors):
                    raise self._fail(exc) from exc
                raise
            try:
                conn.execute("COMMIT")
            except self._db_errors as exc:
                try:
                    conn.execute("ROLLBACK")
                except self._db_errors:
                    pass
                raise self._fail(exc) from exc

    def _write(self) -> Any:
        return self._tx(self.dialect.begin_write)

    def _read(self) -> Any:
        return self._tx(self.dialect.begin_read)

    def _q(self, statement: str) -> str:
        return self.dialect.sql(statement)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                try:
                    conn.close()
                except self._db_errors:
                    pass

    # recordings ---------------------------------------------------------------------------

    def put_recording(self, recording: Recording) -> bool:
        return self.put_recordings([recording])[0]

    def put_recordings(self, recordings: Iterable[Recording]) -> list[bool]:
        rows = [
            (
                r.trace_id,
                r.service,
                r.agent_name,
                r.started_at,
                r.status,
                _j(r.input),
                _j(r.output),
                *_outline.stored_text(r.bundle),
                r.replay_mode,
                r.received_at,
                bundle_weight(r.bundle),
            )
            for r in recordings
        ]
        if not rows:
            return []
        insert = self._q(
            "INSERT INTO recordings (trace_id, service, agent_name, started_at, status, input, "
            "output, bundle, outline, replay_mode, received_at, span_count) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (trace_id) DO NOTHING"
        )
        # Atomic on every engine without a row lock: only a bundle reflecting more spans wins,
        # so the same content again (same span count) is never rewritten.
        update = self._q(
            "UPDATE recordings SET service = ?, agent_name = ?, started_at = ?, status = ?, "
            "input = ?, output = ?, bundle = ?, outline = ?, replay_mode = ?, received_at = ?, "
            "span_count = ? "
            "WHERE trace_id = ? AND span_count < ?"
        )
        results = []
        with self._write() as conn:
            for row in rows:
                if conn.execute(insert, row).rowcount == 1:
                    results.append(True)
                    continue
                cur = conn.execute(update, (*row[1:], row[0], row[-1]))
                results.append(cur.rowcount == 1)
        return results

    def get_recording(self, trace_id: str) -> Recording:
        with self._read() as conn:
            row = conn.execute(
                self._q(f"SELECT {REC_COLUMNS} FROM recordings WHERE trace_id = ?"), (trace_id,)
            ).fetchone()
        if row is None:
            raise NotFound(f"no recording of trace {trace_id!r} in {self.url}")
        return _recording(row)

    def _page(
        self, select: str, limit: int, offset: int, service: str | None, agent: str | None
    ) -> list[Any]:
        """The rows of ``select`` newest first, one page of them, of one service or agent if
        given; ``select`` names its columns and leaves the WHERE to this."""
        check_page(limit, offset)
        where, params = [], []
        if service is not None:
            where.append("service = ?")
            params.append(service)
        if agent is not None:
            where.append("agent_name = ?")
            params.append(agent)
        sql = select
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started_at DESC, trace_id DESC LIMIT ? OFFSET ?"
        with self._read() as conn:
            return list(conn.execute(self._q(sql), (*params, limit, offset)).fetchall())

    def list_recordings(
        self,
        limit: int = 50,
        offset: int = 0,
        service: str | None = None,
        agent: str | None = None,
    ) -> list[Recording]:
        rows = self._page(f"SELECT {REC_COLUMNS} FROM recordings", limit, offset, service, agent)
        return [_recording(r) for r in rows]

    def recording_summaries(
        self,
        limit: int = 50,
        offset: int = 0,
        service: str | None = None,
        agent: str | None = None,
        *,
        cut: bool = True,
    ) -> list[RecordingSummary]:
        sql = _outline.SUMMARIES_SQL if cut else _outline.WHOLE_SUMMARIES_SQL
        rows = self._page(sql, limit, offset, service, agent)
        try:
            if not cut:
                return [_whole_summary(row) for row in rows]
            return [
                RecordingSummary(
                    trace_id=row[0],
                    service=row[1],
                    agent_name=row[2],
                    started_at=int(row[3]),
                    status=row[4],
                    input=_outline.listed_value(row[5], row[6]),
                    output=_outline.listed_value(row[7], row[8]),
                )
                for row in rows
            ]
        except _CorruptRow as exc:
            raise _corrupt("a recording", exc) from exc
        except orjson.JSONDecodeError as exc:
            raise _corrupt("a recording", _CorruptRow(str(exc))) from exc

    def recording_calls(self, trace_id: str, offset: int = 0, limit: int = 20) -> RecordedCalls:
        check_page(limit, offset)
        try:
            return self._recording_calls(trace_id, offset, limit)
        except _CorruptRow as exc:
            raise _corrupt(f"recording {trace_id}", exc) from exc

    def _recording_calls(self, trace_id: str, offset: int, limit: int) -> RecordedCalls:
        engine = self.dialect.name
        with self._read() as conn:
            head = conn.execute(self._q(_outline.HEAD_SQL), (trace_id,)).fetchone()
            if head is None:
                raise NotFound(f"no recording of trace {trace_id!r} in {self.url}")
            found = None
            if head[9] is not None:
                outline, places, ended = _outline.read_outline(head[9])
                found = self._entries_at(conn, trace_id, outline, places, offset, limit)
            if found is None:  # no outline, or one the bundle does not bear out
                outline = self._outline_of(conn, trace_id)
                found = self._entries_of(conn, trace_id, outline[offset : offset + limit])
                row = conn.execute(_outline.ENDED_SQL[engine], (trace_id,)).fetchone()
                ended = _d(row[0]) if row is not None else None
        summary = dataclasses.replace(_whole_summary(head), ended_at=ended)
        return RecordedCalls(summary, outline, offset, found)

    def _entries_at(
        self,
        conn: Any,
        trace_id: str,
        outline: list[CallOutline],
        places: list[tuple[int, int] | None],
        offset: int,
        limit: int,
    ) -> list[Any] | None:
        """The entries of ``outline[offset:offset + limit]`` read where the outline says they
        lie in the bundle's text; None when it does not know, or when what is there is not
        the call the outline describes (the row was changed since it was written)."""
        shown = outline[offset : offset + limit]
        spans = places[offset : offset + limit]
        if not shown:
            return []
        if any(p is None for p in spans):
            return None
        engine = self.dialect.name
        blobs = getattr(conn, "blobopen", None) if engine == "sqlite" else None
        row: Sequence[Any] | None
        if blobs is not None:
            # Only the bytes of the entries shown are read, not the pages of the whole text.
            found = conn.execute("SELECT rowid FROM recordings WHERE trace_id = ?", (trace_id,))
            rowid = found.fetchone()[0]
            with blobs("recordings", "bundle", rowid, readonly=True) as blob:
                row = []
                for start, length in spans:  # type: ignore[misc]
                    blob.seek(start)
                    row.append(blob.read(length))
        else:
            texts = ", ".join(["substr(bundle, ?, ?)"] * len(spans))
            params = [n for start, length in spans for n in (start + 1, length)]  # type: ignore[misc]
            sql = self._q(_outline.TEXTS_SQL[engine].format(texts=texts))
            row = conn.execute(sql, (*params, trace_id)).fetchone()
        return _outline.checked(shown, list(row or ()))

    def _outline_of(self, conn: Any, trace_id: str) -> list[CallOutline]:
        """Every call's outline, taken out of the bundle by the engine's JSON functions."""
        engine = self.dialect.name
        rows: list[tuple[str, str, int, Any, Any, Any, Any]] = []
        for section in _outline.SECTIONS:
            if engine == "sqlite":
                path = "$." + section
                found = conn.execute(_outline.OUTLINE_SQL[engine], (path, trace_id, path))
                facts = [(n, i, *(_d(f) or (None,) * 4)) for n, i, f in found.fetchall()]
            else:
                found = conn.execute(_outline.OUTLINE_SQL[engine], (section, trace_id))
                facts = [(n, i, *map(_d, f)) for n, i, *f in found.fetchall()]
            rows += [(section, str(n), int(i), *f) for n, i, *f in facts]
        return _outline.in_order(rows)

    def _entries_of(
        self,
        conn: Any,
        trace_id: str,
        shown: Sequence[CallOutline],
        table: str = "recordings",
        key: tuple[Any, ...] | None = None,
    ) -> list[Any]:
        """The entries of ``shown`` (None where there is none), taken out of the bundle by
        the engine's JSON functions: of the recording of ``trace_id``, or of the row of
        ``table`` whose key is ``key`` (see ``_outline.ROWS``)."""
        engine = self.dialect.name
        row_key = (trace_id,) if key is None else key
        picks = _outline.ROWS[table]
        template = (
            _outline.ENTRIES_SQL[engine]
            .replace("{table}", table)
            .replace("{row}", picks if engine == "sqlite" else picks.replace("?", "%s"))
        )
        wanted: dict[tuple[str, str], list[int]] = {}
        for call in shown:
            wanted.setdefault((call.kind, call.name), []).append(call.index)
        entries: dict[tuple[str, str, int], Any] = {}
        for (section, name), indexes in wanted.items():
            if engine == "sqlite":
                # One path per entry (twice when there is one: then the answer is an array too).
                paths = [f"$[{i}]" for i in indexes] * (2 if len(indexes) == 1 else 1)
                sql = template.replace("{paths}", ", ".join("?" * len(paths)))
                row = conn.execute(sql, (*paths, "$." + section, *row_key, name)).fetchone()
                for i, value in zip(indexes, _d(row[0]) if row is not None else [], strict=False):
                    entries[(section, name, i)] = value
            else:
                found = conn.execute(template, (section, name, *row_key, indexes))
                for i, text in found.fetchall():
                    entries[(section, name, int(i))] = _d(text)
        return [entries.get((c.kind, c.name, c.index)) for c in shown]

    # cases --------------------------------------------------------------------------------

    def _load_recording(self, conn: Any, trace_id: str) -> Recording:
        row = conn.execute(
            self._q(f"SELECT {REC_COLUMNS} FROM recordings WHERE trace_id = ?"), (trace_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no recording of trace {trace_id!r} in {self.url}")
        return _recording(row)

    def _load_case(self, conn: Any, case_id: str) -> Case:
        return case_from_row(self._case_row(conn, case_id))

    def _case_row(self, conn: Any, case_id: str) -> Sequence[Any]:
        row = conn.execute(
            self._q(f"SELECT {CASE_COLUMNS} FROM cases WHERE id = ?"), (case_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no case {case_id!r} in {self.url}")
        return row  # type: ignore[no-any-return]

    def _case_exists(self, conn: Any, case_id: str) -> bool:
        row = conn.execute(self._q("SELECT 1 FROM cases WHERE id = ?"), (case_id,)).fetchone()
        return row is not None

    def _insert_case(self, conn: Any, case: Case) -> None:
        bundle, outline = _outline.stored_text(case.bundle)
        conn.execute(
            self._q(
                f"INSERT INTO cases ({CASE_COLUMNS}, outline) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            (
                case.id,
                case.name,
                case.entrypoint,
                dumps_json(case.input),
                _j(case.expected_output),
                bundle,
                case.source_trace_id,
                case.version,
                dumps_json(list(case.tags)),
                case.created_at,
                case.updated_at,
                _sealed(_case_fields(case)),
                outline,
            ),
        )
        self._write_tags(conn, case)

    def _write_tags(self, conn: Any, case: Case) -> None:
        conn.execute(self._q("DELETE FROM case_tags WHERE case_id = ?"), (case.id,))
        for tag in case.tags:
            conn.execute(
                self._q("INSERT INTO case_tags (case_id, tag) VALUES (?, ?)"), (case.id, tag)
            )

    def _insert_version(self, conn: Any, v: CaseVersion) -> None:
        conn.execute(
            self._q(
                f"INSERT INTO case_versions ({_VERSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            (
                v.case_id,
                v.version,
                dumps_json(v.input),
                _j(v.expected_output),
                dumps_json(v.bundle),
                v.source_trace_id,
                v.created_at,
                v.note,
                _sealed(_version_fields(v)),
            ),
        )

    def _delete_case(self, conn: Any, case_id: str) -> bool:
        # Explicit rather than relying on ON DELETE CASCADE being enabled on every connection.
        conn.execute(self._q("DELETE FROM case_tags WHERE case_id = ?"), (case_id,))
        conn.execute(self._q("DELETE FROM case_versions WHERE case_id = ?"), (case_id,))
        cur = conn.execute(self._q("DELETE FROM cases WHERE id = ?"), (case_id,))
        return bool(cur.rowcount == 1)

    def promote(
        self,
        trace_id: str,
        *,
        case_id: str | None = None,
        name: str,
        entrypoint: str | None = None,
        tags: Iterable[str] = (),
        stated: StatedRun | None = None,
    ) -> Case:
        tags = tuple(tags) if not isinstance(tags, (str, bytes)) else tags
        promotion = Promotion(trace_id, name, case_id, entrypoint, tags, stated)  # type: ignore[arg-type]
        return self.promote_many([promotion])[0]

    def promote_many(self, promotions: Sequence[Promotion]) -> list[Case]:
        cases = []
        with self._write() as conn:
            for p in promotions:
                recording = self._load_recording(conn, p.trace_id)
                case, first = plan_promotion(
                    recording,
                    case_id=p.case_id,
                    name=p.name,
                    entrypoint=p.entrypoint,
                    tags=p.tags,
                    now=now_ns(),
                    exists=lambda cid: self._case_exists(conn, cid),
                    stated=p.stated,
                )
                self._insert_case(conn, case)
                self._insert_version(conn, first)
                cases.append(case)
        return cases

    def get_case(self, case_id: str) -> Case:
        with self._read() as conn:
            return self._load_case(conn, case_id)

    def case_calls(
        self, case_id: str, offset: int = 0, limit: int = 20
    ) -> tuple[list[CallOutline], list[Any]]:
        """The case's calls as :meth:`Store.case_calls` says, read as :meth:`case_page`
        reads them."""
        found = self.case_page(case_id, offset, limit)
        return found.outline, found.entries

    def case_page(self, case_id: str, offset: int = 0, limit: int = 20) -> CaseCalls:
        """The case's facts and a page of its calls as :meth:`Store.case_page` says, the
        entries read where the case's outline says they lie. The case's seal is checked
        against the text of its row (which is hashed, not decoded); a case whose seal does not
        hold, or whose outline does not, is read whole (as :meth:`get_case`, which says what
        is wrong)."""
        check_page(limit, offset)
        with self._read() as conn:
            row = conn.execute(
                self._q(
                    "SELECT id, entrypoint, version, input, expected_output, bundle, checksum, "
                    "outline, name, source_trace_id, tags, created_at, updated_at "
                    "FROM cases WHERE id = ?"
                ),
                (case_id,),
            ).fetchone()
            if row is None:
                raise NotFound(f"no case {case_id!r} in {self.url}")
            started = None
            if row[7] is not None:
                engine = self.dialect.name
                started = conn.execute(_outline.CASE_STARTED_SQL[engine], (case_id,)).fetchone()
        found = None
        if row[7] is not None:
            try:
                found = self._case_page_at(row, started, offset, limit)
            except (_CorruptRow, InvalidCase):
                found = None
        return found if found is not None else super().case_page(case_id, offset, limit)

    def _case_page_at(
        self, row: Sequence[Any], started: Sequence[Any] | None, offset: int, limit: int
    ) -> CaseCalls | None:
        texts = {"input": row[3], "expected_output": row[4], "bundle": row[5]}
        # The bundle's digest is taken over its text: it is not decoded (``None`` stands for
        # it, and fails the seal when the text does not match it).
        fields = case_row_fields(row[0], row[1], int(row[2]), _d(row[3]), _d(row[4]), None)
        if _seal_problem(f"case {row[0]}", row[6], fields, texts) is not None:
            return None
        outline, places, ended = _outline.read_outline(row[7])
        entries = _outline.entries_at(
            row[5].encode("utf-8"),
            outline[offset : offset + limit],
            places[offset : offset + limit],
        )
        if entries is None:
            return None
        # Made as a case is (its fields checked as get_case checks them), without its bundle.
        case = Case(
            id=row[0],
            name=row[8],
            entrypoint=row[1],
            input=fields["input"],
            expected_output=fields["expected_output"],
            bundle={},
            source_trace_id=row[9],
            version=int(row[2]),
            tags=tuple(_d(row[10]) or ()),
            created_at=int(row[11]),
            updated_at=int(row[12]),
        )
        summary = dataclasses.replace(
            _outline.case_summary_of(case),
            started_at=_d(started[0]) if started is not None and started[0] is not None else None,
            ended_at=ended,
        )
        return CaseCalls(summary, outline, offset, entries)

    def case_versions(self, case_id: str) -> list[VersionSummary]:
        with self._read() as conn:
            if not self._case_exists(conn, case_id):
                raise NotFound(f"no case {case_id!r} in {self.url}")
            rows = conn.execute(
                self._q(
                    "SELECT version, created_at, source_trace_id, note, length(bundle) "
                    "FROM case_versions WHERE case_id = ? ORDER BY version"
                ),
                (case_id,),
            ).fetchall()
        return [VersionSummary(int(r[0]), int(r[1]), r[2], r[3], int(r[4])) for r in rows]

    def case_version(self, case_id: str, version: int) -> CaseVersion:
        with self._read() as conn:
            row = conn.execute(
                self._q(
                    f"SELECT {_VERSION_COLUMNS} FROM case_versions "
                    "WHERE case_id = ? AND version = ?"
                ),
                (case_id, version),
            ).fetchone()
            if row is None and not self._case_exists(conn, case_id):
                raise NotFound(f"no case {case_id!r} in {self.url}")
        if row is None:
            raise NotFound(f"case {case_id!r} has no version {version}")
        return _version(row)

    def version_entries(
        self, case_id: str, version: int, calls: Sequence[CallOutline]
    ) -> tuple[Any, list[Any]]:
        """:meth:`Store.version_entries`: the version's seal checked on its row's text, the
        entries taken out of it by the engine's JSON functions (not decoded in Python)."""
        with self._read() as conn:
            row = conn.execute(
                self._q(
                    "SELECT case_id, version, input, expected_output, bundle, checksum "
                    "FROM case_versions WHERE case_id = ? AND version = ?"
                ),
                (case_id, version),
            ).fetchone()
            if row is None:
                return super().version_entries(case_id, version, calls)  # says what is missing
            what = f"version {row[1]} of case {row[0]}"
            try:
                expected = _d(row[3])
                fields = version_row_fields(row[0], int(row[1]), _d(row[2]), expected, None)
                texts = {"input": row[2], "expected_output": row[3], "bundle": row[4]}
                problem = _seal_problem(what, row[5], fields, texts)
                if problem is not None:
                    raise StoreError(problem)
                key = (case_id, version)
                entries = self._entries_of(conn, "", calls, "case_versions", key)
            except _CorruptRow as exc:
                raise _corrupt(what, exc) from exc
        return expected, entries

    def list_cases(
        self, tag: str | None = None, *, limit: int | None = None, offset: int = 0
    ) -> list[Case]:
        with self._read() as conn:
            rows = self._case_rows(conn, _CASE_COLUMNS, tag, limit, offset)
        return [case_from_row(r) for r in rows]

    def cases_for_replay(
        self, make: Callable[..., _Made], *, tag: str | None = None, case_id: str | None = None
    ) -> list[_Made | Case]:
        """:meth:`Store.cases_for_replay`: a row whose stored seal is the seal of its texts
        (read as the bytes that were sealed) is built straight into ``make`` by
        :func:`sealed_case`; any other row is read again as :meth:`get_case` reads it, in the
        same transaction, which says what is wrong."""
        columns = _CASE_COLUMNS.replace(
            _SEALED_TEXTS, ", ".join(self.dialect.utf8.format(c) for c in _SEALED_TEXTS.split(", "))
        )
        with self._read() as conn:
            if case_id is None:
                rows = self._case_rows(conn, columns, tag, None, 0)
            else:
                rows = conn.execute(
                    self._q(f"SELECT {columns} FROM cases c WHERE c.id = ?"), (case_id,)
                ).fetchall()
                if not rows:
                    raise NotFound(f"no case {case_id!r} in {self.url}")
            cases: list[_Made | Case] = []
            for row in rows:
                made = sealed_case(row, make)
                cases.append(self._load_case(conn, row[0]) if made is None else made)
            return cases

    def _case_rows(
        self, conn: Any, columns: str, tag: str | None, limit: int | None, offset: int
    ) -> list[Any]:
        # LIMIT -1 is SQLite's "no limit"; PostgreSQL's is LIMIT ALL, written as NULL.
        page = (-1 if self.dialect is SQLITE else None) if limit is None else max(0, int(limit))
        window = (page, max(0, int(offset)))
        if tag is None:
            return conn.execute(  # type: ignore[no-any-return]
                self._q(f"SELECT {columns} FROM cases c ORDER BY c.id LIMIT ? OFFSET ?"), window
            ).fetchall()
        return conn.execute(  # type: ignore[no-any-return]
            self._q(
                f"SELECT {columns} FROM cases c JOIN case_tags t ON t.case_id = c.id "
                "WHERE t.tag = ? ORDER BY c.id LIMIT ? OFFSET ?"
            ),
            (tag, *window),
        ).fetchall()

    def case_history(self, case_id: str) -> list[CaseVersion]:
        with self._read() as conn:
            if not self._case_exists(conn, case_id):
                raise NotFound(f"no case {case_id!r} in {self.url}")
            rows = conn.execute(
                self._q(
                    f"SELECT {_VERSION_COLUMNS} FROM case_versions WHERE case_id = ? ORDER BY version"
                ),
                (case_id,),
            ).fetchall()
        return [_version(r) for r in rows]

    def recapture(self, case_id: str, trace_id: str, *, note: str | None = None) -> Case:
        if note is not None and not isinstance(note, str):
            raise ValueError("note must be a string")
        with self._write() as conn:
            case = self._load_case(conn, case_id)
            recording = self._load_recording(conn, trace_id)
            plan = plan_recapture(case, recording, note=note, now=now_ns())
            if plan is None:
                return case
            new, version = plan
            bundle, outline = _outline.stored_text(new.bundle)
            cur = conn.execute(
                self._q(
                    "UPDATE cases SET input = ?, expected_output = ?, bundle = ?, "
                    "source_trace_id = ?, version = ?, updated_at = ?, checksum = ?, outline = ? "
                    "WHERE id = ? AND version = ?"
                ),
                (
                    dumps_json(new.input),
                    _j(new.expected_output),
                    bundle,
                    new.source_trace_id,
                    new.version,
                    new.updated_at,
                    _sealed(_case_fields(new)),
                    outline,
                    case.id,
                    case.version,
                ),
            )
            if cur.rowcount != 1:  # pragma: no cover - only reachable on an engine without locks
                raise StoreError(f"case {case_id} changed during recapture; try again")
            self._insert_version(conn, version)
        return new

    def update_case(
        self,
        case_id: str,
        *,
        name: str | None = None,
        tags: Iterable[str] | None = None,
        entrypoint: str | None = None,
    ) -> Case:
        changes: dict[str, Any] = {}
        if name is not None:
            changes["name"] = name
        if tags is not None:
            changes["tags"] = normalise_tags(tags)
        if entrypoint is not None:
            changes["entrypoint"] = validate_entrypoint(entrypoint or None)
        with self._write() as conn:
            case = self._load_case(conn, case_id)
            plan = plan_edit(case, changes, now=now_ns())
            if plan is None:
                return case
            new, version = plan
            conn.execute(
                self._q(
                    "UPDATE cases SET name = ?, entrypoint = ?, tags = ?, version = ?, "
                    "updated_at = ?, checksum = ? WHERE id = ?"
                ),
                (
                    new.name,
                    new.entrypoint,
                    dumps_json(list(new.tags)),
                    new.version,
                    new.updated_at,
                    _sealed(_case_fields(new)),
                    case_id,
                ),
            )
            self._write_tags(conn, new)
            self._insert_version(conn, version)
        return new

    def delete_case(self, case_id: str) -> None:
        with self._write() as conn:
            if not self._delete_case(conn, case_id):
                raise NotFound(f"no case {case_id!r} in {self.url}")

    def put_case(self, case: Case, history: Sequence[CaseVersion]) -> Case:
        ordered = check_history(case, history)
        with self._write() as conn:
            self._delete_case(conn, case.id)
            self._insert_case(conn, case)
            for v in ordered:
                self._insert_version(conn, v)
        return case

    # replay runs --------------------------------------------------------------------------

    def save_run(self, run: Run) -> None:
        header = dumps_json(run.summary_dict())
        cases = dumps_json(list(run.cases))
        with self._write() as conn:
            inserted = conn.execute(
                self._q(
                    "INSERT INTO runs (id, started_at, header, cases) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (id) DO NOTHING"
                ),
                (run.id, run.started_at, header, cases),
            ).rowcount
            if inserted != 1:
                row = conn.execute(
                    self._q("SELECT header, cases FROM runs WHERE id = ?"), (run.id,)
                ).fetchone()
                if row is not None and (row[0], row[1]) == (header, cases):
                    return  # the same run again (a retried request)
                raise Conflict(f"run {run.id} is already stored with other results")
            for trace_id, case_id in run.trace_ids().items():
                conn.execute(
                    self._q(
                        "INSERT INTO run_traces (trace_id, run_id, case_id) VALUES (?, ?, ?) "
                        "ON CONFLICT (trace_id, run_id) DO NOTHING"
                    ),
                    (trace_id, run.id, case_id),
                )

    def get_run(self, run_id: str) -> Run:
        with self._read() as conn:
            row = conn.execute(
                self._q("SELECT header, cases FROM runs WHERE id = ?"), (run_id,)
            ).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id!r} in {self.url}")
        return _run(run_id, row[0], row[1])

    def list_runs(self, limit: int = 20, offset: int = 0, trace_id: str | None = None) -> list[Run]:
        check_page(limit, offset)
        sql = "SELECT id, header FROM runs"
        params: list[Any] = []
        if trace_id is not None:
            sql += " WHERE id IN (SELECT run_id FROM run_traces WHERE trace_id = ?)"
            params.append(trace_id)
        sql += " ORDER BY started_at DESC, id DESC LIMIT ? OFFSET ?"
        with self._read() as conn:
            rows = conn.execute(self._q(sql), (*params, limit, offset)).fetchall()
        return [_run(r[0], r[1], None) for r in rows]

    # the pages' sign-in sessions ------------------------------------------------------------

    def create_session(self, session: str, token: str, expires_at: int) -> None:
        now = now_ns()
        with self._write() as conn:
            conn.execute(self._q("DELETE FROM ui_sessions WHERE expires_at <= ?"), (now,))
            conn.execute(
                self._q(
                    "INSERT INTO ui_sessions (id, token, created_at, expires_at) "
                    "VALUES (?, ?, ?, ?)"
                ),
                (session, token, now, expires_at),
            )

    def session_token(self, session: str, now: int) -> str | None:
        with self._read() as conn:
            row = conn.execute(
                self._q("SELECT token FROM ui_sessions WHERE id = ? AND expires_at > ?"),
                (session, now),
            ).fetchone()
        return str(row[0]) if row is not None else None

    def delete_session(self, session: str) -> None:
        with self._write() as conn:
            conn.execute(self._q("DELETE FROM ui_sessions WHERE id = ?"), (session,))


class SQLiteStore(SQLStore):
    """A store in one SQLite file (created, with its directory, on first use).

    ``path`` may be ``":memory:"`` for a private in-memory store (gone when closed). With
    ``create=False`` a file that does not exist is an error and nothing is created (what
    read-only commands use, so that a mistyped path never leaves an empty store behind).
    ``timeout`` is how long a write waits for another process's write to finish.
    ``synchronous`` is SQLite's durability level: ``"FULL"`` (default) makes every committed
    recording survive a power cut; ``"NORMAL"`` survives a crash of the application only.
    """

    dialect = SQLITE
    _db_errors = (sqlite3.Error,)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        synchronous: str = "FULL",
        url: str | None = None,
        create: bool = True,
    ) -> None:
        self.memory = str(path) == ":memory:"
        self.create = create
        self.path = Path(path).expanduser().absolute() if not self.memory else None
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.timeout = float(timeout)
        self.synchronous = synchronous.upper()
        super().__init__(url or ("sqlite::memory:" if self.memory else f"sqlite://{self.path}"))
        with self._lock:
            self._connection()  # open now: a bad path or a newer schema fails here, not later

    def _connect(self) -> sqlite3.Connection:
        target = ":memory:"
        if self.path is not None and not self.create and not self.path.is_file():
            raise StoreError(
                f"no tracely store at {self.path} (nothing was created there): record a run with "
                "tracely.init() or `tracely cases import DIR` first, or point --store / "
                "TRACELY_STORE at the store that holds your cases"
            )
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the directory for {self.url}: {exc}") from exc
            target = str(self.path)
            self._refuse_empty_file(self.path)
        try:
            conn = sqlite3.connect(
                target, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.url}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            # Refuse a newer schema before anything (even the journal mode) is changed.
            check_not_newer(schema_version(conn, self.dialect), self.url)
            if not self.memory:
                self._set_wal(conn)
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            migrate(conn, self.dialect, where=self.url)
        except StoreError:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"cannot use {self.url} as a tracely store: {exc}") from exc
        return conn

    def _refuse_empty_file(self, path: Path) -> None:
        """A file of 0 bytes is not a store: SQLite would quietly start an empty one in it.

        A store another process is creating is empty for a moment (its data may also be in
        the ``-wal`` file beside it), so an empty file is looked at again before refusing.
        """
        deadline = time.monotonic() + min(self.timeout, 2.0)
        while True:
            try:
                if not path.is_file() or path.stat().st_size > 0:
                    return
                wal = path.with_name(path.name + "-wal")
                if wal.is_file() and wal.stat().st_size > 0:
                    return
            except OSError:
                return  # unreadable: opening it reports why
            if time.monotonic() > deadline:
                raise StoreError(
                    f"{self.url} is an empty file (0 bytes), not a tracely store; it is left as "
                    "it is: move it away to start a new store there, or pass the right --store"
                )
            time.sleep(0.05)

    def _set_wal(self, conn: sqlite3.Connection) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError:
                # Another process is creating the same file; the journal mode needs a moment.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.url}: SQLite refused WAL journal mode (got {mode!r})")
