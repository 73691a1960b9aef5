"""PostgresStore against a real PostgreSQL server.

The server is the one ``TRACELY_TEST_POSTGRES_URL`` names (``.ci/install-postgres.sh`` prints it);
without it the fixture starts one with the same script when PostgreSQL is installed, and
otherwise skips with the reason. Every test gets a schema of its own.

The behavioural checks are the SQLite store's own test functions, run here against PostgreSQL,
followed by what only a shared server has: several processes writing at once, concurrent first
opens, connections that die, a pool that runs dry.
"""

from __future__ import annotations

import multiprocessing
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from tests.sdk.store import test_outline as outline
from tests.sdk.store import test_replay_read as replay_read
from tests.sdk.store import test_sqlite as shared
from tests.sdk.store._helpers import make_bundle, make_recording, trace_id
from tracely_sdk.errors import ConfigError, Conflict, MissingDependency, NotFound, StoreError
from tracely_sdk.store import Case, NewerSchema, Recording, _migrations
from tracely_sdk.store._model import dumps_json

psycopg = pytest.importorskip(
    "psycopg", reason="psycopg is not installed (tracely-replay[postgres])"
)

from tracely_sdk.store import _postgres as _pg  # noqa: E402
from tracely_sdk.store._postgres import PostgresStore  # noqa: E402


@pytest.fixture
def store(schema_url: str) -> Iterator[PostgresStore]:
    s = PostgresStore(schema_url)
    yield s
    s.close()


@pytest.fixture
def promoted(store: PostgresStore) -> Case:
    store.put_recording(make_recording(1))
    return store.promote(
        trace_id(1), name="Paris weather", entrypoint="weather_agent:run", tags=["smoke"]
    )


def _password(url: str) -> str:
    return urllib.parse.urlsplit(url).password or ""


# --- the SQLite store's behavioural checks, on PostgreSQL -------------------------------------

test_put_get_recording_round_trip = shared.test_put_get_recording_round_trip
test_put_recording_is_idempotent = shared.test_put_recording_is_idempotent
test_more_complete_bundle_replaces = shared.test_more_complete_bundle_replaces
test_put_recordings_batch = shared.test_put_recordings_batch
test_list_recordings = shared.test_list_recordings
test_threads_share_one_store = shared.test_threads_share_one_store
test_promote = shared.test_promote
test_promote_ids_are_unique_slugs = shared.test_promote_ids_are_unique_slugs
test_promote_refusals = shared.test_promote_refusals
test_promote_validates_fields = shared.test_promote_validates_fields
test_promote_many_makes_every_case_in_one_go = shared.test_promote_many_makes_every_case_in_one_go
test_a_refused_promotion_leaves_the_whole_batch_unpromoted = (
    shared.test_a_refused_promotion_leaves_the_whole_batch_unpromoted
)
test_a_trace_recorded_without_an_agent_span_is_promoted_with_a_stated_run = (
    shared.test_a_trace_recorded_without_an_agent_span_is_promoted_with_a_stated_run
)
test_promote_errored_run = shared.test_promote_errored_run
test_recapture_bumps_version_and_keeps_history = (
    shared.test_recapture_bumps_version_and_keeps_history
)
test_recapture_compares_inputs_canonically = shared.test_recapture_compares_inputs_canonically
test_recapture_different_input_conflicts = shared.test_recapture_different_input_conflicts
test_recapture_refusals = shared.test_recapture_refusals
test_recapture_from_the_same_recording_is_a_no_op = (
    shared.test_recapture_from_the_same_recording_is_a_no_op
)
test_update_case = shared.test_update_case
test_list_cases_by_tag = shared.test_list_cases_by_tag
test_cases_are_listed_a_page_at_a_time = shared.test_cases_are_listed_a_page_at_a_time
test_delete_case = shared.test_delete_case
test_put_case_replaces = shared.test_put_case_replaces
test_a_run_is_kept_with_each_case_result = shared.test_a_run_is_kept_with_each_case_result
test_runs_are_listed_newest_first_without_cases_and_found_by_replay_trace = (
    shared.test_runs_are_listed_newest_first_without_cases_and_found_by_replay_trace
)
test_a_run_keeps_large_values_cut_with_a_marker = (
    shared.test_a_run_keeps_large_values_cut_with_a_marker
)
test_put_case_checks_history = shared.test_put_case_checks_history


# --- URL, errors, secrets --------------------------------------------------------------------


def test_schema_is_current(store: PostgresStore) -> None:
    conn = store._connection()
    assert _migrations.schema_version(conn, _migrations.POSTGRES) == _migrations.latest_version()
    tables = {
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    }
    assert tables == {
        "tracely_schema",
        "recordings",
        "cases",
        "case_versions",
        "case_tags",
        "runs",
        "run_traces",
        "trace_spans",
        "ui_sessions",
    }


def test_password_never_shown(store: PostgresStore, schema_url: str) -> None:
    password = _password(schema_url)
    assert password, "the test server's URL should carry a password"
    assert password not in store.url and "***" in store.url
    assert password not in repr(store)
    with pytest.raises(NotFound) as info:
        store.get_recording("nope")
    assert password not in str(info.value)
    wrong = schema_url.replace(f":{password}@", ":not-the-password@")
    with pytest.raises(StoreError) as info:
        PostgresStore(wrong)
    msg = str(info.value)
    assert "not-the-password" not in msg and password not in msg
    assert "password authentication failed" in msg
    as_option = re.sub(r":[^:@/]*@", "@", schema_url) + f"&password={password}"
    with PostgresStore(as_option) as s:
        assert password not in s.url and "password=***" in s.url
        s.put_recording(make_recording(1))


def test_unreachable_server_is_a_clear_error(schema_url: str) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = re.sub(r"@[^/]+/", f"@127.0.0.1:{port}/", schema_url)
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        PostgresStore(url + "&connect_timeout=3")
    assert time.monotonic() - started < 10
    msg = str(info.value)
    assert f"127.0.0.1:{port}" in msg and "check that the server is running" in msg
    assert _password(schema_url) not in msg


def test_url_options(schema_url: str) -> None:
    with PostgresStore(schema_url + "&pool_size=3&pool_timeout=1.5") as s:
        assert (s.pool_size, s.pool_timeout) == (3, 1.5)
        assert "pool_size" not in s._conninfo
        name = s._connection().execute("SHOW application_name").fetchone()[0]
        assert name == "tracely"
    for bad, match in [("pool_size=0", "pool_size"), ("pool_timeout=soon", "pool_timeout")]:
        with pytest.raises(ConfigError, match=match) as info:
            PostgresStore(f"{schema_url}&{bad}")
        assert _password(schema_url) not in str(info.value)
    with pytest.raises(ConfigError, match="not a PostgreSQL URL"):
        PostgresStore("mysql://u:secret@h/db")


def test_postgres_scheme_alias(schema_url: str) -> None:
    with PostgresStore("postgres://" + schema_url.split("://", 1)[1]) as s:
        assert s.put_recording(make_recording(1)) is True


def test_open_store_picks_postgres(schema_url: str) -> None:
    from tracely_sdk.store import _backends, open_store  # type: ignore[attr-defined]

    try:
        import tracely_sdk.server  # noqa: F401  (registers the backend)
    except ImportError as exc:  # pragma: no cover - the server package is broken
        pytest.fail(f"tracely_sdk.server cannot be imported: {exc}")
    if "postgresql" not in _backends:
        pytest.skip("tracely_sdk.server does not register the postgresql backend yet")
    for scheme in ("postgresql", "postgres"):
        with open_store(scheme + "://" + schema_url.split("://", 1)[1]) as s:
            assert isinstance(s, PostgresStore)


def test_missing_psycopg(monkeypatch: pytest.MonkeyPatch, schema_url: str) -> None:
    monkeypatch.setattr(_pg, "psycopg", None)
    with pytest.raises(MissingDependency, match=r"tracely-replay\[postgres\]") as info:
        PostgresStore(schema_url)
    assert info.value.package == "psycopg"
    assert isinstance(info.value, ImportError)


def test_close_is_idempotent(schema_url: str) -> None:
    s = PostgresStore(schema_url)
    s.put_recording(make_recording(1))
    s.close()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.get_recording(trace_id(1))
    with pytest.raises(StoreError, match="closed"):
        s._connection()


def test_errors_roll_back_and_keep_the_connection_usable(store: PostgresStore) -> None:
    store.put_recording(make_recording(1))
    with pytest.raises(StoreError), store._write() as conn:
        conn.execute("INSERT INTO recordings (trace_id) VALUES ('broken')")  # NOT NULL fails
    with pytest.raises(RuntimeError), store._write() as conn:
        conn.execute(
            "UPDATE recordings SET service = 'changed' WHERE trace_id = %s", (trace_id(1),)
        )
        raise RuntimeError("the caller failed mid-transaction")
    assert store.get_recording(trace_id(1)).service == "weather-svc"
    assert len(store.list_recordings()) == 1


# --- connections -------------------------------------------------------------------------------


def _backend_pids(store: PostgresStore) -> list[int]:
    """The server pids behind ``store``'s idle pooled connections, and only those.

    Tests run in parallel against one server, so selecting by application name or database
    would also kill another test's connections.
    """
    pool = store._pool
    idle = [pool.getconn() for _ in range(pool.get_stats()["pool_available"])]
    try:
        return [c.info.backend_pid for c in idle]
    finally:
        for c in idle:
            pool.putconn(c)


def test_dead_connections_are_replaced(store: PostgresStore) -> None:
    """A server restart (or a proxy dropping idle connections) costs no request."""

    def work(n: int) -> None:
        store.put_recording(make_recording(f"pool-{n}"))
        time.sleep(0.05)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store._pool.get_stats()["pool_available"], "the pool should hold idle connections"
    pids = _backend_pids(store)
    with psycopg.connect(store._conninfo, autocommit=True) as killer:
        for pid in pids:
            killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # Until the backends have exited, not just been signalled.
        deadline = time.monotonic() + 10
        query = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)"
        while killer.execute(query, (pids,)).fetchone()[0] and time.monotonic() < deadline:
            time.sleep(0.01)
    assert store.put_recording(make_recording("after-restart")) is True
    assert len(store.list_recordings(limit=100)) == 5


class Relay:
    """A TCP relay in front of the server that can be cut (as a server going down looks to a
    client: open connections dropped, new ones refused) and put back on the same port."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self.resume()

    def resume(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            server = socket.create_connection(self.upstream)
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        with self._lock:
            assert self._listener is not None
            self._listener.close()
            self._listener = None
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def test_a_server_that_went_away_fails_requests_at_once_and_is_used_again_when_back(
    schema_url: str,
) -> None:
    split = urllib.parse.urlsplit(schema_url)
    relay = Relay((split.hostname or "", split.port or 5432))
    try:
        url = re.sub(r"@[^/]+/", f"@127.0.0.1:{relay.port}/", schema_url)
        with PostgresStore(url + "&pool_timeout=30") as s:
            assert s.put_recording(make_recording(1)) is True
            relay.cut()
            for _ in range(2):  # the request that finds the connections dead, and the next
                started = time.monotonic()
                with pytest.raises(StoreError) as info:
                    s.list_recordings()
                assert time.monotonic() - started < 15  # not the 30s pool_timeout
                msg = str(info.value)
                assert "check that the server is running" in msg
                assert _password(schema_url) not in msg
            relay.resume()
            assert [r.trace_id for r in s.list_recordings()] == [trace_id(1)]
    finally:
        if relay._listener is not None:
            relay.cut()


def test_pool_runs_dry_with_a_clear_error(schema_url: str) -> None:
    with PostgresStore(schema_url + "&pool_size=1&pool_timeout=0.3") as s:
        holding = threading.Event()
        release = threading.Event()

        def hold() -> None:
            with s._write():
                holding.set()
                release.wait(10)

        t = threading.Thread(target=hold)
        t.start()
        try:
            assert holding.wait(10)
            with pytest.raises(StoreError, match="connections stayed busy") as info:
                s.list_recordings()
            assert "pool_size" in str(info.value)
        finally:
            release.set()
            t.join()
        assert s.list_recordings() == []


def _child_writes(store: PostgresStore, queue: Any) -> None:
    try:
        store.put_recording(make_recording("from-child"))
        queue.put(len(store.list_recordings()))
    except BaseException as exc:  # pragma: no cover - reported to the parent
        queue.put(repr(exc))


def test_forked_child_opens_its_own_connections(store: PostgresStore) -> None:
    store.put_recording(make_recording("from-parent"))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child_writes, args=(store, queue))
    proc.start()
    result = queue.get(timeout=60)
    proc.join(60)
    assert result == 2 and proc.exitcode == 0
    # The parent's connections were left alone.
    assert store.put_recording(make_recording("parent-again")) is True
    assert len(store.list_recordings()) == 3


# --- migrations -------------------------------------------------------------------------------


def _make_v1(url: str) -> None:
    """A database as the first schema version left it, with data the v2 backfill must read."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_migrations._SCHEMA_TABLE)
        for step in _migrations.MIGRATIONS[0].steps:
            assert isinstance(step, str)
            conn.execute(step)
        conn.execute("INSERT INTO tracely_schema VALUES (1, 'v1', 0)")
        replayed = make_bundle(trace_id("r"), replay="recorded")
        live = make_bundle(trace_id("l"), tools=2)
        for b in (replayed, live):
            conn.execute(
                "INSERT INTO recordings VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    b["trace_id"],
                    "svc",
                    "weather-agent",
                    5,
                    "ok",
                    dumps_json(b["agent"]["input"]),
                    dumps_json(b["agent"]["output"]),
                    dumps_json(b),
                    6,
                ),
            )
        conn.execute(
            "INSERT INTO cases VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                "old-case",
                "Old",
                None,
                dumps_json(live["agent"]["input"]),
                dumps_json("x"),
                dumps_json(live),
                live["trace_id"],
                1,
                dumps_json(["smoke", "legacy"]),
                1,
                1,
            ),
        )


def test_migrates_v1_database(schema_url: str) -> None:
    _make_v1(schema_url)
    with PostgresStore(schema_url) as s:
        conn = s._connection()
        latest = _migrations.latest_version()
        assert _migrations.schema_version(conn, _migrations.POSTGRES) == latest
        versions = [
            r[0] for r in conn.execute("SELECT version FROM tracely_schema ORDER BY version")
        ]
        assert versions == list(range(1, latest + 1))
        assert s.list_runs() == []  # the runs tables are there, empty
        assert s.get_recording(trace_id("r")).replay_mode == "recorded"
        assert s.get_recording(trace_id("l")).replay_mode is None
        counts = dict(conn.execute("SELECT trace_id, span_count FROM recordings").fetchall())
        assert counts[trace_id("l")] == 8  # agent + 2 tools + 1 llm, each seen (1) and servable (1)
        assert [c.id for c in s.list_cases(tag="legacy")] == ["old-case"]
        with pytest.raises(Conflict, match="replay run"):
            s.promote(trace_id("r"), name="x")
        assert s.put_recording(make_recording("l", tools=3)) is True
    with PostgresStore(schema_url) as s:
        assert _migrations.migrate(s._connection(), _migrations.POSTGRES) == (latest, latest)


def test_failed_migration_changes_nothing(schema_url: str) -> None:
    """DDL is transactional on PostgreSQL: a failing step leaves the schema as it was."""
    _make_v1(schema_url)

    def broken(c: object, d: object) -> None:
        raise RuntimeError("migration step failed")

    bad = (
        *_migrations.MIGRATIONS,
        _migrations.Migration(
            _migrations.latest_version() + 1, "broken", ("CREATE TABLE t3 (x TEXT)", broken)
        ),
    )
    with psycopg.connect(schema_url, autocommit=True) as conn:
        with pytest.raises(RuntimeError):
            _migrations.migrate(conn, _migrations.POSTGRES, migrations=bad)
        assert _migrations.schema_version(conn, _migrations.POSTGRES) == 1
        for table in ("case_tags", "t3"):
            assert conn.execute(_migrations.POSTGRES.has_table, (table,)).fetchone() is None


def test_refuses_newer_schema_and_changes_nothing(schema_url: str) -> None:
    PostgresStore(schema_url).close()
    with psycopg.connect(schema_url, autocommit=True) as conn:
        conn.execute("INSERT INTO tracely_schema VALUES (99, 'from the future', 0)")
        before = conn.execute("SELECT version FROM tracely_schema ORDER BY version").fetchall()
    with pytest.raises(NewerSchema, match="newer tracely") as info:
        PostgresStore(schema_url)
    assert "upgrade" in str(info.value) and _password(schema_url) not in str(info.value)
    with psycopg.connect(schema_url, autocommit=True) as conn:
        after = conn.execute("SELECT version FROM tracely_schema ORDER BY version").fetchall()
    assert after == before


def _open_and_write(url: str, worker: int, start: Any) -> None:
    start.wait(60)
    store = PostgresStore(url)
    try:
        assert store.put_recording(make_recording(f"first-open-{worker}")) is True
    finally:
        store.close()


def test_concurrent_first_opens_migrate_once(schema_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_open_and_write, args=(schema_url, w, start)) for w in range(6)]
    for p in procs:
        p.start()
    time.sleep(0.5)  # let every process get to the starting line
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 6
    with psycopg.connect(schema_url, autocommit=True) as conn:
        rows = conn.execute("SELECT version FROM tracely_schema ORDER BY version").fetchall()
        assert [r[0] for r in rows] == [m.version for m in _migrations.MIGRATIONS]
        assert conn.execute("SELECT COUNT(*) FROM recordings").fetchone()[0] == 6


# --- several processes writing at once ----------------------------------------------------------

WORKERS = 4
PER_WORKER = 150
SHARED_TRACES = 30


def _write_concurrently(url: str, worker: int, start: Any) -> None:
    """One server instance's share of the load: its own traces, shared ones, a race for a case."""
    store = PostgresStore(url)
    try:
        start.wait(60)
        for i in range(PER_WORKER):
            rec = make_recording(f"{worker}-{i}", started_at=1_700_000_000_000_000_000 + i)
            assert store.put_recording(rec) is True
            if i % 10 == 0:
                # Every worker delivers the shared traces, each a more complete batch, in an
                # order of its own: two batches locking the same rows must not deadlock.
                batch = [
                    make_recording(f"shared-{n}", tools=worker + 1) for n in range(SHARED_TRACES)
                ]
                store.put_recordings(batch if worker % 2 else batch[::-1])
        # Everyone promotes a trace under the same name: the ids must come out distinct.
        store.promote(trace_id(f"{worker}-0"), name="Race")
        # Everyone recaptures the same case: every recapture is a version, none lost.
        store.recapture("base", trace_id(f"{worker}-1"), note=f"worker {worker}")
    finally:
        store.close()


def test_processes_write_concurrently(store: PostgresStore, schema_url: str) -> None:
    store.put_recording(make_recording("base"))
    store.promote(trace_id("base"), case_id="base", name="Base")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [
        ctx.Process(target=_write_concurrently, args=(schema_url, w, start)) for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    time.sleep(0.5)
    start.set()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    recs = store.list_recordings(limit=100_000)
    ids = {r.trace_id for r in recs}
    expected = {trace_id(f"{w}-{i}") for w in range(WORKERS) for i in range(PER_WORKER)}
    assert expected <= ids
    assert len(recs) == WORKERS * PER_WORKER + SHARED_TRACES + 1
    for n in range(SHARED_TRACES):  # the most complete delivery won, whatever the order
        got = store.get_recording(trace_id(f"shared-{n}"))
        assert len(got.bundle["tools"]["get_weather"]) == WORKERS
    race = sorted(c.id for c in store.list_cases() if c.name == "Race")
    assert race == ["race", *(f"race-{n}" for n in range(2, WORKERS + 1))]
    history = store.case_history("base")
    assert [v.version for v in history] == list(range(1, WORKERS + 2))
    assert {v.note for v in history[1:]} == {f"worker {w}" for w in range(WORKERS)}
    assert store.get_case("base").version == WORKERS + 1


def test_threads_change_one_case_without_losing_updates(store: PostgresStore) -> None:
    store.put_recording(make_recording("base"))
    case = store.promote(trace_id("base"), case_id="base", name="Base")
    for n in range(8):
        store.put_recording(make_recording(f"re-{n}", output=f"v{n}"))
    errors: list[BaseException] = []

    def recapture(n: int) -> None:
        try:
            store.recapture(case.id, trace_id(f"re-{n}"))
            store.update_case(case.id, tags=[f"t{n}"])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=recapture, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # each recapture and each edit is a version of its own
    assert [v.version for v in store.case_history(case.id)] == list(range(1, 18))
    final = store.get_case(case.id)
    assert final.version == 17 and len(final.tags) == 1
    assert [c.id for c in store.list_cases(tag=final.tags[0])] == [case.id]
    # A delete racing with a recapture leaves no orphaned history, whichever goes first.
    store.put_recording(make_recording("last", output="last"))

    def late_recapture() -> None:
        try:
            store.recapture(case.id, trace_id("last"))
        except NotFound:
            pass

    t = threading.Thread(target=late_recapture)
    t.start()
    store.delete_case(case.id)
    t.join()
    conn = store._connection()
    assert conn.execute("SELECT COUNT(*) FROM case_versions").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM case_tags").fetchone()[0] == 0


def test_one_batch_with_the_same_trace_twice(store: PostgresStore) -> None:
    tid = trace_id("twice")
    early = Recording.from_bundle(make_bundle(tid, tools=1, agent=False))
    late = Recording.from_bundle(make_bundle(tid, tools=3))
    assert store.put_recordings([early, late, make_recording("other")]) == [True, True, True]
    assert store.get_recording(tid) == late
    tid2 = trace_id("twice-2")
    late2 = Recording.from_bundle(make_bundle(tid2, tools=3))
    early2 = Recording.from_bundle(make_bundle(tid2, tools=1, agent=False))
    assert store.put_recordings([late2, early2, late2]) == [True, False, False]
    assert store.get_recording(tid2) == late2


def test_large_batches(store: PostgresStore) -> None:
    recs = [
        make_recording(f"big-{i}", started_at=1_700_000_000_000_000_000 + i) for i in range(1200)
    ]
    assert store.put_recordings(recs) == [True] * 1200
    assert store.put_recordings(recs[::-1]) == [False] * 1200
    assert len(store.list_recordings(limit=5000)) == 1200


# --- what the pages read: a page of calls, a list's summaries (tests/sdk/store/test_outline.py)

test_a_page_of_calls_reads_back_as_the_recording_has_them = (
    outline.test_a_page_of_calls_reads_back_as_the_recording_has_them
)
test_a_trace_page_shows_its_calls_cut_with_links_to_each_value = (
    outline.test_a_trace_page_shows_its_calls_cut_with_links_to_each_value
)
test_one_value_of_a_mixed_recording_is_read_whole = (
    outline.test_one_value_of_a_mixed_recording_is_read_whole
)
test_a_page_of_many_large_calls_decodes_only_the_calls_shown = (
    outline.test_a_page_of_many_large_calls_decodes_only_the_calls_shown
)
test_a_recording_without_its_outline_is_read_by_the_engine = (
    outline.test_a_recording_without_its_outline_is_read_by_the_engine
)
test_an_outline_the_bundle_does_not_bear_out_is_not_trusted = (
    outline.test_an_outline_the_bundle_does_not_bear_out_is_not_trusted
)
test_recordings_stored_before_outlines_are_outlined_by_the_migration = (
    outline.test_recordings_stored_before_outlines_are_outlined_by_the_migration
)
test_a_list_of_traces_reads_their_summaries_only = (
    outline.test_a_list_of_traces_reads_their_summaries_only
)
test_one_value_of_a_case_is_read_alone = outline.test_one_value_of_a_case_is_read_alone
test_a_case_whose_seal_does_not_hold_is_read_whole = (
    outline.test_a_case_whose_seal_does_not_hold_is_read_whole
)
test_a_case_page_of_many_large_calls_decodes_only_the_calls_shown = (
    outline.test_a_case_page_of_many_large_calls_decodes_only_the_calls_shown
)
test_a_small_case_page_compares_whole_versions = (
    outline.test_a_small_case_page_compares_whole_versions
)
test_a_large_version_whose_seal_does_not_hold_is_not_compared = (
    outline.test_a_large_version_whose_seal_does_not_hold_is_not_compared
)
test_whole_summaries_read_no_calls = outline.test_whole_summaries_read_no_calls


# --- the read of cases for replay (tests/sdk/store/test_replay_read.py) -------------------------

test_a_sound_row_is_built_straight_into_the_case_replay_runs_equal_to_the_case_read_whole = replay_read.test_a_sound_row_is_built_straight_into_the_case_replay_runs_equal_to_the_case_read_whole
test_cases_for_replay_selects_by_tag_and_by_id_as_list_cases_and_get_case_do = (
    replay_read.test_cases_for_replay_selects_by_tag_and_by_id_as_list_cases_and_get_case_do
)
test_a_changed_sealed_column_is_not_read_on_the_fast_path_but_as_get_case_reads_it = (
    replay_read.test_a_changed_sealed_column_is_not_read_on_the_fast_path_but_as_get_case_reads_it
)
test_a_hand_edited_seal_is_not_read_on_the_fast_path = (
    replay_read.test_a_hand_edited_seal_is_not_read_on_the_fast_path
)
test_the_same_value_written_as_other_json_text_is_still_the_case = (
    replay_read.test_the_same_value_written_as_other_json_text_is_still_the_case
)
test_an_unsealed_column_a_case_refuses_is_refused_with_the_error_list_cases_raises = (
    replay_read.test_an_unsealed_column_a_case_refuses_is_refused_with_the_error_list_cases_raises
)
test_a_sound_row_is_sealed_and_each_sealed_field_and_the_seal_count = (
    replay_read.test_a_sound_row_is_sealed_and_each_sealed_field_and_the_seal_count
)
test_the_fast_read_keeps_the_case_problem_as_the_runner_reports_it = (
    replay_read.test_the_fast_read_keeps_the_case_problem_as_the_runner_reports_it
)
