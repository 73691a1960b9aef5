"""Versioned schema migrations for the SQL stores.

The statements are written once, in the SQL that SQLite and PostgreSQL share (``TEXT``,
``BIGINT``, ``INTEGER``, ``ALTER TABLE ... ADD COLUMN``, ``?`` placeholders); a
:class:`Dialect` adapts the few things that differ (placeholder style, how a write transaction
begins, how a table's existence is checked, how concurrent migrators are serialised). JSON is
stored as text, so no JSON column type is needed.

``tracely_schema`` holds one row per applied migration; the schema version is its largest
``version``. :func:`migrate` applies every pending migration in one transaction, so a
database is either fully at the new version or unchanged, and running it again is a no-op. A
database whose version is newer than this code knows raises :class:`NewerSchema` before anything
is written.

To change the schema, append a :class:`Migration` to :data:`MIGRATIONS`; never edit one that
has shipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Union

import orjson

from tracely_sdk.errors import StoreError
from tracely_sdk.store._model import bundle_weight, dumps_json, normalise_tags, now_ns
from tracely_sdk.store._outline import stored_outline
from tracely_sdk.store._seal import case_row_fields, seal, version_row_fields

__all__ = [
    "MIGRATIONS",
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "Migration",
    "NewerSchema",
    "latest_version",
    "migrate",
    "schema_version",
]


class Connection(Protocol):
    """The part of a DB-API connection the migrations use (sqlite3 and psycopg 3 both have it)."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...


class NewerSchema(StoreError):
    """The database was created by a newer tracely than this one."""


@dataclass(frozen=True)
class Dialect:
    """The few SQL differences between engines."""

    name: str
    placeholder: str = "?"
    begin_write: str = "BEGIN"
    begin_read: str = "BEGIN"
    has_table: str = ""
    migration_lock: str | None = None
    utf8: str = "CAST({} AS BLOB)"  # a text column as its UTF-8 bytes

    def sql(self, statement: str) -> str:
        """``statement`` (written with ``?`` placeholders) in this engine's parameter style."""
        if self.placeholder == "?":
            return statement
        return statement.replace("?", self.placeholder)


SQLITE = Dialect(
    name="sqlite",
    # IMMEDIATE takes the write lock up front, so two processes never both read-then-write.
    begin_write="BEGIN IMMEDIATE",
    begin_read="BEGIN",
    has_table="SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
)

POSTGRES = Dialect(
    name="postgresql",
    placeholder="%s",
    begin_write="BEGIN",
    begin_read="BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    has_table="SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() "
    "AND table_name = %s",
    # Two servers starting at once: the second waits, then finds nothing left to do.
    migration_lock="SELECT pg_advisory_xact_lock(7347216569)",
    utf8="convert_to({}, 'UTF8')",
)

Step = Union[str, Callable[[Connection, Dialect], None]]


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    steps: Sequence[Step] = field(default_factory=tuple)


def _loads(text: Any) -> Any:
    return orjson.loads(text) if text is not None else None


def _backfill_v2(conn: Connection, dialect: Dialect) -> None:
    """Fill the v2 columns from what v1 already stored in the JSON."""
    rows = conn.execute("SELECT trace_id, bundle FROM recordings").fetchall()
    for trace_id, bundle_text in rows:
        bundle = _loads(bundle_text)
        if not isinstance(bundle, dict):
            continue
        replay = bundle.get("replay")
        mode = replay.get("mode") if isinstance(replay, dict) else None
        conn.execute(
            dialect.sql("UPDATE recordings SET replay_mode = ?, span_count = ? WHERE trace_id = ?"),
            (str(mode) if mode is not None else None, bundle_weight(bundle), trace_id),
        )
    for case_id, tags_text in conn.execute("SELECT id, tags FROM cases").fetchall():
        tags = _loads(tags_text) or []
        try:
            tags = normalise_tags(t for t in tags if isinstance(t, str))
        except ValueError:
            tags = ()
        for tag in tags:
            conn.execute(
                dialect.sql("INSERT INTO case_tags (case_id, tag) VALUES (?, ?)"), (case_id, tag)
            )


def _seal_cases(conn: Connection, dialect: Dialect) -> None:
    """Seal every case and version already stored: the store was trusted when it wrote them,
    and from now on a row changed outside tracely is refused on read."""
    rows = conn.execute(
        "SELECT id, entrypoint, version, input, expected_output, bundle FROM cases"
    ).fetchall()
    for case_id, entrypoint, version, input_text, expected_text, bundle_text in rows:
        fields = case_row_fields(
            case_id,
            entrypoint,
            int(version),
            _loads(input_text),
            _loads(expected_text),
            _loads(bundle_text),
        )
        conn.execute(
            dialect.sql("UPDATE cases SET checksum = ? WHERE id = ?"),
            (dumps_json(seal(fields)), case_id),
        )
    rows = conn.execute(
        "SELECT case_id, version, input, expected_output, bundle FROM case_versions"
    ).fetchall()
    for case_id, version, input_text, expected_text, bundle_text in rows:
        fields = version_row_fields(
            case_id, int(version), _loads(input_text), _loads(expected_text), _loads(bundle_text)
        )
        conn.execute(
            dialect.sql("UPDATE case_versions SET checksum = ? WHERE case_id = ? AND version = ?"),
            (dumps_json(seal(fields)), case_id, version),
        )


def _outline_recordings(conn: Connection, dialect: Dialect) -> None:
    """Keep the outline of each stored recording and case beside it (``store/_outline.py``),
    from its text as stored: one of them in memory at a time."""
    for table, key in (("recordings", "trace_id"), ("cases", "id")):
        _outline_rows(conn, dialect, table, key)


def _outline_rows(conn: Connection, dialect: Dialect, table: str, key: str) -> None:
    select = dialect.sql(f"SELECT bundle FROM {table} WHERE {key} = ?")
    update = dialect.sql(f"UPDATE {table} SET outline = ? WHERE {key} = ?")
    for (trace_id,) in conn.execute(f"SELECT {key} FROM {table}").fetchall():
        row = conn.execute(select, (trace_id,)).fetchone()
        try:
            bundle = _loads(row[0])
        except orjson.JSONDecodeError:
            continue  # a row changed outside tracely: its pages read it whole, as before
        if isinstance(bundle, dict):
            conn.execute(update, (stored_outline(row[0], bundle), trace_id))


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "recordings, cases and case history",
        (
            """CREATE TABLE recordings (
                trace_id TEXT PRIMARY KEY,
                service TEXT NOT NULL,
                agent_name TEXT,
                started_at BIGINT NOT NULL,
                status TEXT NOT NULL,
                input TEXT,
                output TEXT,
                bundle TEXT NOT NULL,
                received_at BIGINT NOT NULL
            )""",
            "CREATE INDEX recordings_started_at ON recordings (started_at)",
            """CREATE TABLE cases (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                entrypoint TEXT,
                input TEXT NOT NULL,
                expected_output TEXT,
                bundle TEXT NOT NULL,
                source_trace_id TEXT,
                version INTEGER NOT NULL,
                tags TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL
            )""",
            """CREATE TABLE case_versions (
                case_id TEXT NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
                version INTEGER NOT NULL,
                input TEXT NOT NULL,
                expected_output TEXT,
                bundle TEXT NOT NULL,
                source_trace_id TEXT,
                created_at BIGINT NOT NULL,
                note TEXT,
                PRIMARY KEY (case_id, version)
            )""",
        ),
    ),
    Migration(
        2,
        "replay marking, completeness, filters and a tag index",
        (
            "ALTER TABLE recordings ADD COLUMN replay_mode TEXT",
            "ALTER TABLE recordings ADD COLUMN span_count INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX recordings_service ON recordings (service, started_at)",
            "CREATE INDEX recordings_agent ON recordings (agent_name, started_at)",
            """CREATE TABLE case_tags (
                case_id TEXT NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
                tag TEXT NOT NULL,
                PRIMARY KEY (case_id, tag)
            )""",
            "CREATE INDEX case_tags_tag ON case_tags (tag)",
            _backfill_v2,
        ),
    ),
    Migration(
        3,
        "replay runs, and the replay traces of their cases",
        (
            """CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                started_at BIGINT NOT NULL,
                header TEXT NOT NULL,
                cases TEXT NOT NULL
            )""",
            "CREATE INDEX runs_started_at ON runs (started_at)",
            """CREATE TABLE run_traces (
                trace_id TEXT NOT NULL,
                run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
                case_id TEXT NOT NULL,
                PRIMARY KEY (trace_id, run_id)
            )""",
        ),
    ),
    Migration(
        4,
        "a checksum on every case and case version",
        (
            "ALTER TABLE cases ADD COLUMN checksum TEXT",
            "ALTER TABLE case_versions ADD COLUMN checksum TEXT",
            _seal_cases,
        ),
    ),
    Migration(
        5,
        "the spans of each trace, shared by the servers on one store",
        (
            # One row per span any server sharing the store received: the servers assemble a
            # trace from all of them (see PostgresStore.assemble_traces). ``span`` is the
            # span's encoding (server/_ingest.py ``_encode_shared``: a JSON array of its
            # fields, or a one-span OTLP/JSON request); ``received_at`` (ms) lets old rows go.
            """CREATE TABLE trace_spans (
                trace_id TEXT NOT NULL,
                span_id TEXT NOT NULL,
                span TEXT NOT NULL,
                received_at BIGINT NOT NULL,
                PRIMARY KEY (trace_id, span_id)
            )""",
            "CREATE INDEX trace_spans_received_at ON trace_spans (received_at)",
        ),
    ),
    Migration(
        6,
        "the pages' sign-in sessions, shared by the servers on one store",
        (
            # ``id`` is the SHA-256 of the session id the browser's cookie holds (the row
            # alone signs nobody in), ``token`` the SHA-256 of the token that signed in (its
            # scopes are the server's configuration's, so a token taken out of it ends the
            # session); times in ns. Sign-out deletes the row.
            """CREATE TABLE ui_sessions (
                id TEXT PRIMARY KEY,
                token TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                expires_at BIGINT NOT NULL
            )""",
            "CREATE INDEX ui_sessions_expires_at ON ui_sessions (expires_at)",
        ),
    ),
    Migration(
        7,
        "an outline of each recording's and case's calls, so that a page reads the calls it "
        "shows only",
        (
            # JSON: the agent run's end, and each call in the trace's order with its facts
            # and where its entry lies in ``bundle`` (see store/_outline.py). NULL (a row
            # changed outside tracely): the pages read the bundle with the engine's JSON
            # functions instead.
            "ALTER TABLE recordings ADD COLUMN outline TEXT",
            "ALTER TABLE cases ADD COLUMN outline TEXT",
            _outline_recordings,
        ),
    ),
)

_SCHEMA_TABLE = """CREATE TABLE IF NOT EXISTS tracely_schema (
    version INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at BIGINT NOT NULL
)"""


def latest_version(migrations: Sequence[Migration] = MIGRATIONS) -> int:
    return max((m.version for m in migrations), default=0)


def schema_version(conn: Connection, dialect: Dialect) -> int:
    """The database's schema version; 0 for a database tracely has not set up yet."""
    if conn.execute(dialect.has_table, ("tracely_schema",)).fetchone() is None:
        return 0
    row = conn.execute("SELECT MAX(version) FROM tracely_schema").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def check_not_newer(version: int, where: str, migrations: Sequence[Migration] = MIGRATIONS) -> None:
    latest = latest_version(migrations)
    if version > latest:
        raise NewerSchema(
            f"the store at {where} has schema version {version}, created by a newer tracely "
            f"(this one knows up to version {latest}); upgrade tracely to use it. "
            "Nothing was changed."
        )


def migrate(
    conn: Connection,
    dialect: Dialect,
    *,
    where: str = "this database",
    migrations: Sequence[Migration] = MIGRATIONS,
) -> tuple[int, int]:
    """Bring the schema up to date in one transaction; returns (version before, version after).

    ``conn`` must be in autocommit mode (the transaction is opened here).
    """
    ordered = sorted(migrations, key=lambda m: m.version)
    conn.execute(dialect.begin_write)
    try:
        if dialect.migration_lock:
            conn.execute(dialect.migration_lock)
        conn.execute(_SCHEMA_TABLE)
        before = schema_version(conn, dialect)
        check_not_newer(before, where, ordered)
        for migration in ordered:
            if migration.version <= before:
                continue
            for step in migration.steps:
                if isinstance(step, str):
                    conn.execute(step)
                else:
                    step(conn, dialect)
            conn.execute(
                dialect.sql(
                    "INSERT INTO tracely_schema (version, description, applied_at) VALUES (?, ?, ?)"
                ),
                (migration.version, migration.description, now_ns()),
            )
        after = schema_version(conn, dialect)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return before, after
