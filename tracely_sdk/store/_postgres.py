"""PostgreSQL as the store's engine, for several tracely servers sharing one database.

:class:`PostgresStore` is the :class:`~tracely_sdk.store.SQLStore` (every query, the schema and
its migrations, written once) on psycopg 3, through the PostgreSQL
:class:`~tracely_sdk.store._migrations.Dialect`. What SQLite got from ``BEGIN IMMEDIATE`` (one
writer at a time) comes here from the engine's own locks, so that many processes on many
machines can write at once:

- a pool of autocommit connections (``psycopg_pool``), each used by one thread at a time, one
  found dead replaced; each write in one transaction (``BEGIN`` ... ``COMMIT``, rolled back
  on any error), each read in one ``REPEATABLE READ READ ONLY`` snapshot;
- a batch of recordings is one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` that only a more
  complete bundle passes, in trace id order (two batches never wait for each other in a
  cycle);
- a case being recaptured, renamed, replaced or deleted is locked (``SELECT ... FOR UPDATE``)
  before it is read, so concurrent changes to one case apply one after the other and none is
  lost;
- a trace whose spans reached several servers is assembled under its own advisory lock
  (``pg_advisory_xact_lock`` on a hash of its id), in one transaction that adds this
  server's spans, reads back the others' and stores the recording: one server builds each
  trace, and servers on different traces never wait for each other;
- a write that lost a race (two promotions choosing the same id, a deadlock, a serialisation
  failure) is rolled back and run again from the start, a few times;
- migrations run under a transaction-level advisory lock, so servers starting together apply
  them once; a database from a newer tracely is refused untouched.

The URL is libpq's (``postgresql://user:password@host:port/dbname?sslmode=require``), plus
``pool_size`` (connections per store, default 10) and ``pool_timeout`` (seconds a request waits
for a free connection, default 30). The password never appears in :attr:`url`, a message or a
log line.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from tracely_sdk.errors import ConfigError, MissingDependency, NotFound, StoreError
from tracely_sdk.store import Case, CaseVersion, Recording, SQLStore, redact_url
from tracely_sdk.store._base import Promotion
from tracely_sdk.store._migrations import POSTGRES, migrate
from tracely_sdk.store._model import bundle_weight, dumps_json
from tracely_sdk.store._outline import stored_text
from tracely_sdk.store._sqlite import CASE_COLUMNS, REC_COLUMNS, case_from_row

try:
    import psycopg
    from psycopg import errors as _pg_errors
except ImportError:  # pragma: no cover - exercised only without the extra installed
    psycopg = None  # type: ignore[assignment]
    _pg_errors = None  # type: ignore[assignment]
try:
    import psycopg_pool
except ImportError:  # pragma: no cover - exercised only without the extra installed
    psycopg_pool = None  # type: ignore[assignment]

__all__ = ["PostgresStore"]

logger = logging.getLogger("tracely.store")

_T = TypeVar("_T")

DEFAULT_POOL_SIZE = 10
DEFAULT_POOL_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = "10"
# How many times a write that lost a race is run again before the error is reported.
WRITE_ATTEMPTS = 16
MAX_BACKOFF = 0.5
_HEALTH_EVERY = 1.0  # seconds between looks at the server's health while waiting for the pool


def _transient_errors() -> tuple[type[BaseException], ...]:
    if _pg_errors is None:  # pragma: no cover
        return ()
    return (
        _pg_errors.UniqueViolation,
        _pg_errors.DeadlockDetected,
        _pg_errors.SerializationFailure,
    )


def _parse(url: str) -> tuple[str, int, float, list[str]]:
    """The libpq conninfo of ``url``, the pool options it carries, and the secrets to scrub."""
    split = urllib.parse.urlsplit(url)
    if split.scheme.lower() not in ("postgresql", "postgres"):
        raise ConfigError(
            f"store URL {redact_url(url)!r} is not a PostgreSQL URL "
            "(postgresql://user:password@host:port/dbname)"
        )
    pool_size, pool_timeout = DEFAULT_POOL_SIZE, DEFAULT_POOL_TIMEOUT
    secrets: list[str] = []
    if split.password:
        secrets.extend({split.password, urllib.parse.quote(split.password, safe="")})
    kept: list[tuple[str, str]] = []
    for key, value in urllib.parse.parse_qsl(split.query, keep_blank_values=True):
        if key == "pool_size":
            try:
                pool_size = int(value)
                if pool_size < 1:
                    raise ValueError
            except ValueError:
                raise ConfigError(
                    f"store URL {redact_url(url)!r}: pool_size must be a whole number from 1, "
                    f"got {value!r}"
                ) from None
        elif key == "pool_timeout":
            try:
                pool_timeout = float(value)
                if pool_timeout <= 0:
                    raise ValueError
            except ValueError:
                raise ConfigError(
                    f"store URL {redact_url(url)!r}: pool_timeout must be a positive number of "
                    f"seconds, got {value!r}"
                ) from None
        else:
            if key.lower() == "password" and value:
                secrets.append(value)
            kept.append((key, value))
    if not any(k == "connect_timeout" for k, _ in kept):
        kept.append(("connect_timeout", DEFAULT_CONNECT_TIMEOUT))
    if not any(k == "application_name" for k, _ in kept):
        kept.append(("application_name", "tracely"))
    conninfo = urllib.parse.urlunsplit(
        ("postgresql", split.netloc, split.path, urllib.parse.urlencode(kept), "")
    )
    return conninfo, pool_size, pool_timeout, [s for s in secrets if s]


# Each trace's advisory lock, taken in key order (two transactions never wait for each other in
# a cycle); the count is of the locks another transaction held, which this one waited for.
_LOCK_SQL = (
    "SELECT coalesce(sum(CASE WHEN pg_try_advisory_xact_lock(k) THEN 0 "
    "ELSE (SELECT 1 FROM pg_advisory_xact_lock(k)) END), 0), "
    "extract(epoch FROM clock_timestamp() - statement_timestamp())::float8 "
    "FROM unnest(%s::bigint[]) AS k"
)
# One round trip, after the locks: add the spans given (arrays in binary, %b: as text, each
# span's JSON would be escaped character by character) and read back which traces that added
# spans to ('a'), the spans of those traces others added ('o'), and which have a recording
# ('r'). The reads see the table as it was before this statement's insert (a snapshot taken
# once the locks were held), so the spans given are excluded from the others' by id.
_ADD_AND_READ_SQL = (
    "WITH given AS (SELECT * FROM unnest(%b::text[], %b::text[], %b::text[]) "
    "AS g (trace_id, span_id, span)), "
    "added AS (INSERT INTO trace_spans (trace_id, span_id, span, received_at) "
    "SELECT trace_id, span_id, span, %s FROM given "
    "ON CONFLICT (trace_id, span_id) DO NOTHING RETURNING trace_id) "
    "SELECT DISTINCT 'a', trace_id, NULL::text, NULL::text FROM added "
    "UNION ALL SELECT 'o', s.trace_id, s.span_id, s.span FROM trace_spans s "
    "WHERE s.trace_id = ANY(%b::text[]) "
    "AND (s.trace_id, s.span_id) NOT IN (SELECT trace_id, span_id FROM given) "
    "UNION ALL SELECT 'r', trace_id, NULL, NULL FROM recordings WHERE trace_id = ANY(%b::text[])"
)
_SWEEP_SQL = "DELETE FROM trace_spans WHERE received_at < %s"
SHARED_SPANS_KEEP_SECONDS = 3600.0
_SWEEP_EVERY_MS = 60_000
_REC_FIELDS = [c.strip() for c in REC_COLUMNS.split(",")] + ["span_count", "outline"]


@contextmanager
def _pipeline(conn: Any) -> Iterator[None]:
    """Statements sent together, in one round trip where the client library can."""
    if psycopg.Pipeline.is_supported():
        with conn.pipeline():
            yield
    else:  # pragma: no cover - a libpq before 14
        yield


def _lock_key(trace_id: str) -> int:
    """The advisory lock key of a trace (64 bits of a keyed hash: no other lock's key)."""
    digest = hashlib.blake2b(trace_id.encode(), digest_size=8, person=b"tracely-trace").digest()
    return int.from_bytes(digest, "big", signed=True)


def _recording_row(r: Recording) -> tuple[Any, ...]:
    """The columns of ``r`` in :data:`_REC_FIELDS` order (as :meth:`SQLStore.put_recordings`)."""
    bundle, outline = stored_text(r.bundle)
    return (
        r.trace_id,
        r.service,
        r.agent_name,
        r.started_at,
        r.status,
        None if r.input is None else dumps_json(r.input),
        None if r.output is None else dumps_json(r.output),
        bundle,
        r.replay_mode,
        r.received_at,
        bundle_weight(r.bundle),
        outline,
    )


_REC_TYPES = {"started_at": "bigint", "received_at": "bigint", "span_count": "integer"}  # or text
# One statement text whatever the number of rows (each column one array, in binary): the
# driver converts and the server plans it once, where a VALUES list per row count was parsed
# again for each batch.
_UPSERT_SQL = (
    f"INSERT INTO recordings ({', '.join(_REC_FIELDS)}) SELECT * FROM unnest("
    + ", ".join(f"%b::{_REC_TYPES.get(column, 'text')}[]" for column in _REC_FIELDS)
    + ") ON CONFLICT (trace_id) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in _REC_FIELDS if c != "trace_id")
    + " WHERE recordings.span_count < EXCLUDED.span_count RETURNING trace_id"
)


def _close_quietly(conn: Any) -> None:
    try:
        conn.close()
    except Exception:
        pass


class _Health:
    """Whether the store has lost connections since it last reached the server."""

    def __init__(self) -> None:
        self.suspect = False

    def lost(self) -> None:
        self.suspect = True

    def found(self) -> None:
        self.suspect = False


class PostgresStore(SQLStore):
    """The store in a PostgreSQL database (the tables are created on first use).

    ``url`` is a ``postgresql://`` (or ``postgres://``) URL as libpq takes it, optionally with
    ``pool_size`` and ``pool_timeout``. The database must exist and the user must be allowed to
    create tables in its current schema (choose another with ``options=-csearch_path%3DNAME``).
    Raises :class:`~tracely_sdk.errors.MissingDependency` without psycopg and
    :class:`~tracely_sdk.errors.StoreError` when the server cannot be reached or used.
    """

    dialect = POSTGRES
    _db_errors: tuple[type[BaseException], ...] = (psycopg.Error,) if psycopg is not None else ()

    def __init__(self, url: str) -> None:
        if psycopg is None:
            raise MissingDependency("psycopg", "postgres")
        if psycopg_pool is None:
            raise MissingDependency("psycopg-pool", "postgres")
        conninfo, pool_size, pool_timeout, secrets = _parse(url)
        super().__init__(redact_url(url))
        self._conninfo = conninfo
        self._secrets = sorted(secrets, key=len, reverse=True)
        self.pool_size = pool_size
        self.pool_timeout = pool_timeout
        self._local = threading.local()
        self._migrated = False
        self._spans_swept = 0
        self._health = _Health()
        # What assembling traces cost (assemble_traces): the model of several servers on one
        # store is measured from these, not guessed.
        self.assembly: dict[str, float] = dict.fromkeys(
            ("transactions", "round_trips", "traces", "spans", "built", "lock_waits"), 0
        )
        self.assembly["lock_seconds"] = 0.0
        # Connect and migrate now: a wrong URL or a newer schema fails here, not on first use.
        _close_quietly(self._connect())
        self._pool = self._new_pool()

    # connections --------------------------------------------------------------------------

    def _new_pool(self) -> Any:
        health = self._health
        return psycopg_pool.ConnectionPool(
            self._conninfo,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=self.pool_size,
            timeout=self.pool_timeout,
            # One attempt (and one more at once) per connection the pool needs, not minutes of
            # attempts in the background: while the server is down the pool gives the
            # connection up and says so, and the next request that needs one asks again.
            reconnect_timeout=0,
            reconnect_failed=lambda pool: health.lost(),
            name=f"tracely-store-{os.getpid()}",
            open=True,
        )

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return " ".join(text.split())

    def _fail(self, exc: BaseException) -> StoreError:
        return StoreError(f"store {self.url}: {self._scrub(str(exc))}")

    def _open(self) -> Any:
        """A new autocommit connection, or the StoreError that says why there is none."""
        try:
            return psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to PostgreSQL at {self.url}: {self._scrub(str(exc))} (check "
                "that the server is running and reachable there, and the user, password and "
                "database in the URL)"
            ) from None

    def _connect(self) -> Any:
        conn = self._open()
        if self._migrated:
            return conn
        try:
            migrate(conn, self.dialect, where=self.url)
        except StoreError:
            _close_quietly(conn)
            raise
        except psycopg.Error as exc:
            _close_quietly(conn)
            raise StoreError(
                f"cannot use {self.url} as a tracely store: {self._scrub(str(exc))}"
            ) from None
        self._migrated = True
        return conn

    def _connection(self) -> Any:
        """An autocommit connection of this store's own, outside the pool (for inspection)."""
        with self._lock:
            if self._closed:
                raise StoreError(f"the store {self.url} is closed")
            if self._conn is None or self._conn.closed:
                self._conn = self._connect()
            return self._conn

    def _check_fork(self) -> None:
        if self._pid != os.getpid():
            # The parent's connections must not be used or closed by the child: its pool is
            # kept, untouched (a pool closed or collected here would close them), and the child
            # opens its own.
            self._pid = os.getpid()
            self._lock = threading.RLock()
            self._stale.append(self._pool)
            if self._conn is not None:
                self._stale.append(self._conn)
                self._conn = None
            self._health = _Health()
            self._pool = self._new_pool()

    def _reachable(self) -> None:
        """Raise the StoreError that says the server cannot be reached, if it cannot."""
        _close_quietly(self._open())
        self._health.found()

    def _getconn(self) -> Any:
        # While connections are being lost, a connection of our own says at once whether the
        # server is there, where waiting on the pool would only time out. A request already
        # waiting looks again each _HEALTH_EVERY seconds: the pool does not wake it when it
        # gives a connection up.
        deadline = time.monotonic() + self.pool_timeout
        while True:
            if self._health.suspect:
                self._reachable()
            remaining = deadline - time.monotonic()
            try:
                return self._pool.getconn(timeout=max(0.001, min(remaining, _HEALTH_EVERY)))
            except psycopg_pool.PoolClosed:
                raise StoreError(f"the store {self.url} is closed") from None
            except psycopg_pool.PoolTimeout:
                if remaining > _HEALTH_EVERY:
                    continue
            if self._health.suspect:
                self._reachable()
            raise StoreError(
                f"store {self.url}: all {self.pool_size} connections stayed busy for "
                f"{self.pool_timeout:g}s; raise pool_size in the store URL or the "
                "server's max_connections"
            )

    def _begin(self, begin: str) -> Any:
        """A pooled connection with a transaction open; a connection that died is replaced."""
        attempts = self.pool_size + 1
        for attempt in range(attempts):
            conn = self._getconn()
            try:
                conn.execute(begin)
                return conn
            except psycopg.Error as exc:
                dead = conn.closed or conn.broken
                if not dead:
                    self._rollback(conn)
                # The pool replaces a connection returned broken.
                self._pool.putconn(conn)
                if not dead or attempt == attempts - 1:
                    raise self._fail(exc) from exc
                self._health.lost()
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _tx(self, begin: str) -> Iterator[Any]:
        if self._closed:
            raise StoreError(f"the store {self.url} is closed")
        self._check_fork()
        conn = self._begin(begin)
        writing = getattr(self._local, "writing", False)
        self._local.writing = begin == self.dialect.begin_write
        try:
            try:
                yield conn
            except BaseException as exc:
                self._rollback(conn)
                if isinstance(exc, psycopg.Error):
                    raise self._fail(exc) from exc
                raise
            try:
                if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.execute("COMMIT")  # unless the body sent it with its last statements
            except psycopg.Error as exc:
                self._rollback(conn)
                raise self._fail(exc) from exc
        finally:
            self._local.writing = writing
            self._pool.putconn(conn)

    def _rollback(self, conn: Any) -> None:
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            pass

    def _retrying(self, operation: Callable[[], _T]) -> _T:
        """Run a write again (from the start) when it lost a race that rolled it back."""
        transient = _transient_errors()
        for attempt in range(WRITE_ATTEMPTS):
            try:
                return operation()
            except StoreError as exc:
                if attempt == WRITE_ATTEMPTS - 1 or not isinstance(exc.__cause__, transient):
                    raise
            time.sleep(random.uniform(0, min(MAX_BACKOFF, 0.005 * 2**attempt)))
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        counts = self.assembly
        if counts["transactions"] and not self._closed:
            logger.info(
                "store %s: assembled %d trace(s) of %d span(s) in %d transaction(s) of %d "
                "round trip(s); %d built here; %d lock wait(s), %.3fs taking locks",
                self.url,
                counts["traces"],
                counts["spans"],
                counts["transactions"],
                counts["round_trips"],
                counts["built"],
                counts["lock_waits"],
                counts["lock_seconds"],
            )
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if self._pid != os.getpid():
                return
            self._pool.close()
            if conn is not None:
                _close_quietly(conn)

    # row locks where SQLite had one writer --------------------------------------------------

    def _load_case(self, conn: Any, case_id: str) -> Case:
        if not getattr(self._local, "writing", False):
            return super()._load_case(conn, case_id)
        row = conn.execute(
            self._q(f"SELECT {CASE_COLUMNS} FROM cases WHERE id = ? FOR UPDATE"), (case_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no case {case_id!r} in {self.url}")
        return case_from_row(row)

    def _delete_case(self, conn: Any, case_id: str) -> bool:
        conn.execute(self._q("SELECT 1 FROM cases WHERE id = ? FOR UPDATE"), (case_id,))
        return super()._delete_case(conn, case_id)

    # writes, run again when they lose a race --------------------------------------------------

    def put_recordings(self, recordings: Iterable[Recording]) -> list[bool]:
        """One ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` per batch, in one transaction.

        Only a bundle reflecting more spans updates a stored row (the rule of
        :meth:`SQLStore.put_recordings`), decided by the engine row by row, so concurrent
        writers never overwrite a more complete recording. Rows go in trace id order, so two
        batches touching the same traces lock them in the same order. A trace given twice in
        one call is applied in order, as separate statements.
        """
        items = list(recordings)
        if not items:
            return []

        def write() -> list[bool]:
            with self._write() as conn:
                return self._upsert(conn, items, commit=True)

        return self._retrying(write)

    def _upsert(self, conn: Any, items: Sequence[Recording], *, commit: bool = False) -> list[bool]:
        """Store ``items`` in the transaction open on ``conn`` (see :meth:`put_recordings`),
        and commit it with ``commit``, all in one round trip: whether each changed the row."""
        rows = [_recording_row(r) for r in items]
        rounds: list[list[int]] = []  # the n-th occurrence of each trace id goes in round n
        seen: dict[str, int] = {}
        for index, recording in enumerate(items):
            n = seen.get(recording.trace_id, 0)
            seen[recording.trace_id] = n + 1
            if n == len(rounds):
                rounds.append([])
            rounds[n].append(index)
        sent = []
        with _pipeline(conn):
            for indexes in rounds:
                indexes.sort(key=lambda i: items[i].trace_id)
                columns = [list(column) for column in zip(*(rows[i] for i in indexes), strict=True)]
                sent.append((indexes, conn.execute(_UPSERT_SQL, columns)))
            if commit:
                conn.execute("COMMIT")
        results = [False] * len(items)
        for indexes, cursor in sent:
            changed = {row[0] for row in cursor}
            for i in indexes:
                results[i] = items[i].trace_id in changed
        return results

    def promote_many(self, promotions: Sequence[Promotion]) -> list[Case]:
        # SQLStore.promote is one promotion through this, so it is retried here too.
        promotions = list(promotions)
        return self._retrying(lambda: SQLStore.promote_many(self, promotions))

    def recapture(self, case_id: str, trace_id: str, *, note: str | None = None) -> Case:
        return self._retrying(lambda: SQLStore.recapture(self, case_id, trace_id, note=note))

    def update_case(
        self,
        case_id: str,
        *,
        name: str | None = None,
        tags: Iterable[str] | None = None,
        entrypoint: str | None = None,
    ) -> Case:
        if tags is not None and not isinstance(tags, (str, bytes)):
            tags = tuple(tags)
        return self._retrying(
            lambda: SQLStore.update_case(self, case_id, name=name, tags=tags, entrypoint=entrypoint)
        )

    def delete_case(self, case_id: str) -> None:
        self._retrying(lambda: SQLStore.delete_case(self, case_id))

    def put_case(self, case: Case, history: Sequence[CaseVersion]) -> Case:
        history = list(history)
        return self._retrying(lambda: SQLStore.put_case(self, case, history))

    # one trace from the spans every server received -------------------------------------------

    def assemble_traces(
        self,
        traces: Sequence[tuple[str, Mapping[str, str]]],
        assemble: Callable[[str, Mapping[str, str], bool], Recording | None],
        *,
        keep_seconds: float = SHARED_SPANS_KEEP_SECONDS,
    ) -> list[bool | None]:
        """Add each trace's spans to those every server on this store has added, and store the
        recording ``assemble`` makes of them all; for each trace, whether that changed the
        stored recording (None: ``assemble`` made none).

        ``traces`` are (trace id, span id → the span's encoding) pairs; ``assemble`` gets a
        trace id, the spans of that trace that other servers added (the caller has its own)
        and whether a recording of it is stored already. Each trace is assembled under its
        own advisory lock, in one transaction that adds its spans, reads the others' back and
        stores the recording: servers assembling one trace take turns, the later one seeing
        every span the earlier added, so a trace is built by one server, from every span
        then received; servers never wait for each other on different traces. A trace to
        which this call adds no span, and whose recording is stored, is not built again (the
        recording already holds every span: whoever added them built it or found it stored
        and built it again): its result is False. Spans added more than ``keep_seconds`` ago
        are let go of (their recordings stay).
        """
        items = list(traces)
        if not items:
            return []
        now = int(time.time() * 1000)
        trace_ids = [trace_id for trace_id, _ in items]
        keys = sorted({_lock_key(trace_id) for trace_id in trace_ids})
        columns: list[list[str]] = [[], [], []]  # trace ids, span ids, spans: one row a span
        for trace_id, spans in items:
            for span_id, span in spans.items():
                columns[0].append(trace_id)
                columns[1].append(span_id)
                columns[2].append(span)
        sweep = now - self._spans_swept > _SWEEP_EVERY_MS
        distinct = list(dict.fromkeys(trace_ids))

        def run() -> list[bool | None]:
            counts = self.assembly
            with self._write() as conn:
                # The locks and the statements after them go in one round trip: the server
                # runs them in order, the reads once the locks are held.
                with _pipeline(conn):
                    locked = conn.execute(_LOCK_SQL, (keys,))
                    if sweep:
                        conn.execute(_SWEEP_SQL, (now - int(keep_seconds * 1000),))
                    read = conn.execute(_ADD_AND_READ_SQL, (*columns, now, distinct, distinct))
                waits, waited = locked.fetchone()
                trips = 3  # BEGIN; the locks and the statements after them; the upsert, COMMIT
                added: set[str] = set()
                stored: set[str] = set()
                others: dict[str, dict[str, str]] = {}
                for tag, trace_id, span_id, span in read:
                    if tag == "a":
                        added.add(trace_id)
                    elif tag == "r":
                        stored.add(trace_id)
                    else:
                        others.setdefault(trace_id, {})[span_id] = span
                made: list[Recording | bool | None] = [
                    False
                    if trace_id not in added and trace_id in stored
                    else assemble(trace_id, others.get(trace_id, {}), trace_id in stored)
                    for trace_id in trace_ids
                ]
                recordings = [r for r in made if isinstance(r, Recording)]
                written = self._upsert(conn, recordings, commit=True)
            changed = iter(written)
            with self._lock:
                counts["transactions"] += 1
                counts["round_trips"] += trips
                counts["traces"] += sum(1 for _, spans in items if spans)
                counts["spans"] += len(columns[0])
                counts["built"] += len(recordings)
                counts["lock_waits"] += int(waits or 0)
                counts["lock_seconds"] += waited
            return [next(changed) if isinstance(r, Recording) else r for r in made]

        results = self._retrying(run)
        if sweep:
            self._spans_swept = now
        return results
