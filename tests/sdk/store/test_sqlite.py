from __future__ import annotations

import dataclasses
import multiprocessing
import sqlite3
import sys
import threading
from pathlib import Path

import orjson
import pytest

from tracely_otel._bundle import seal
from tracely_sdk.errors import ConfigError, Conflict, NotFound, StoreError
from tracely_sdk.store import (
    Case,
    CaseVersion,
    InvalidCase,
    NewerSchema,
    Recording,
    SQLiteStore,
    Store,
    _migrations,
    default_store_url,
    open_store,
    register_backend,
    slugify,
    validate_case_id,
)
from tracely_sdk.store._base import Promotion, StatedRun, plan_recapture
from tracely_sdk.store._model import now_ns

from ._helpers import make_bundle, make_recording, trace_id, write_many

# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "t.db")
    yield s
    s.close()


@pytest.fixture
def promoted(store: SQLiteStore) -> Case:
    store.put_recording(make_recording(1))
    return store.promote(
        trace_id(1), name="Paris weather", entrypoint="weather_agent:run", tags=["smoke"]
    )


# --- open_store and URLs --------------------------------------------------------------------


def test_sqlite_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRACELY_STORE", raising=False)
    absolute = tmp_path / "abs" / "deep" / "a.db"
    for url, expected in [
        (f"sqlite://{absolute}", absolute),
        (f"sqlite:///{absolute.as_posix().lstrip('/')}", absolute),
        ("sqlite:rel/dir/b.db", tmp_path / "rel" / "dir" / "b.db"),
        ("bare.db", tmp_path / "bare.db"),
        (str(tmp_path / "c.db"), tmp_path / "c.db"),
    ]:
        s = open_store(url)
        try:
            assert isinstance(s, SQLiteStore)
            assert s.path == expected
            assert expected.is_file()  # file and parent directories created on first use
        finally:
            s.close()


def test_env_and_empty_string_and_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "proj"
    (project / "src" / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    monkeypatch.chdir(project / "src" / "pkg")
    monkeypatch.delenv("TRACELY_STORE", raising=False)
    expected = project / ".tracely" / "tracely.db"
    assert default_store_url() == f"sqlite:///{expected.as_posix().lstrip('/')}"
    with open_store("") as s:  # empty string = unset
        assert isinstance(s, SQLiteStore) and s.path == expected
    monkeypatch.setenv("TRACELY_STORE", "")
    with open_store() as s:
        assert isinstance(s, SQLiteStore) and s.path == expected
    monkeypatch.setenv("TRACELY_STORE", f"sqlite://{tmp_path / 'env.db'}")
    with open_store() as s:
        assert isinstance(s, SQLiteStore) and s.path == tmp_path / "env.db"
    with open_store(str(tmp_path / "arg.db")) as s:  # the argument wins over the environment
        assert isinstance(s, SQLiteStore) and s.path == tmp_path / "arg.db"


def test_project_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracely_sdk.store import _files

    (tmp_path / ".git").mkdir()
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    assert _files.project_root(inner) == tmp_path
    assert (
        default_store_url(inner)
        == f"sqlite:///{(tmp_path / '.tracely' / 'tracely.db').as_posix().lstrip('/')}"
    )
    # No marker in any ancestor: the directory itself.
    monkeypatch.setattr(_files, "_MARKERS", ("no-such-marker-file.xyz",))
    assert _files.project_root(inner) == inner
    monkeypatch.chdir(inner)
    assert (
        default_store_url()
        == f"sqlite:///{(inner / '.tracely' / 'tracely.db').as_posix().lstrip('/')}"
    )


def test_server_and_postgres_urls_need_their_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracely_sdk.store import _backends  # type: ignore[attr-defined]

    for scheme in ("http", "https", "postgresql", "postgres"):
        monkeypatch.delitem(_backends, scheme, raising=False)
    # as when the server extra is not installed: the module that registers them is missing
    monkeypatch.setitem(sys.modules, "tracely_sdk.server", None)
    with pytest.raises(ConfigError, match=r"tracely-replay\[server\]"):
        open_store("http://localhost:8000")
    with pytest.raises(ConfigError, match=r"tracely-replay\[server\]"):
        open_store("https://tracely.example.com")
    with pytest.raises(ConfigError, match=r"tracely-replay\[postgres\]") as info:
        open_store("postgresql://user:s3cret@db/tracely")
    assert "s3cret" not in str(info.value)  # the password never appears in the message


def test_unknown_scheme_names_url_and_schemes() -> None:
    with pytest.raises(ConfigError) as info:
        open_store("redis://localhost/0")
    msg = str(info.value)
    assert "redis://localhost/0" in msg
    for scheme in ("sqlite", "http", "https", "postgresql"):
        assert scheme in msg
    with pytest.raises(ConfigError, match="not one tracely can open"):
        open_store("somewhere/file.txt")
    with pytest.raises(ConfigError, match="no host"):
        open_store("sqlite://host/x.db")
    with pytest.raises(ConfigError, match="names no file"):
        open_store("sqlite:")


def test_register_backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tracely_sdk.store import _backends  # type: ignore[attr-defined]

    seen = []

    def factory(url: str) -> Store:
        seen.append(url)
        return SQLiteStore(tmp_path / "via-backend.db")

    monkeypatch.setitem(_backends, "http", factory)
    with open_store("http://tracely:8000") as s:
        assert isinstance(s, SQLiteStore)
    assert seen == ["http://tracely:8000"]
    register_backend("custom+x", factory)
    try:
        open_store("custom+x://a").close()
    finally:
        _backends.pop("custom+x")
    with pytest.raises(ValueError):
        register_backend("not a scheme", factory)


def test_sqlite_url_options(tmp_path: Path) -> None:
    with open_store(f"sqlite://{tmp_path / 'o.db'}?synchronous=normal&timeout=2.5") as s:
        assert isinstance(s, SQLiteStore)
        assert (s.synchronous, s.timeout) == ("NORMAL", 2.5)
        assert s._connection().execute("PRAGMA synchronous").fetchone()[0] == 1
        assert s._connection().execute("PRAGMA busy_timeout").fetchone()[0] == 2500
    with pytest.raises(ConfigError, match="unknown option 'mode'"):
        open_store(f"sqlite://{tmp_path / 'o.db'}?mode=ro")
    with pytest.raises(ConfigError, match="synchronous"):
        open_store(f"sqlite://{tmp_path / 'o.db'}?synchronous=fast")
    with pytest.raises(ConfigError, match="timeout"):
        open_store(f"sqlite://{tmp_path / 'o.db'}?timeout=soon")


def test_memory_store() -> None:
    with open_store("sqlite::memory:") as s:
        s.put_recording(make_recording(1))
        assert s.get_recording(trace_id(1)).trace_id == trace_id(1)


def test_pragmas(store: SQLiteStore) -> None:
    conn = store._connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    assert _migrations.schema_version(conn, _migrations.SQLITE) == _migrations.latest_version()


def test_not_a_database(tmp_path: Path) -> None:
    bad = tmp_path / "junk.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match=r"junk\.db"):
        SQLiteStore(bad)


def test_close_is_idempotent(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "c.db")
    s.close()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.get_recording("x")


# --- recordings ---------------------------------------------------------------------------


def test_recording_from_bundle() -> None:
    rec = make_recording(1)
    assert rec.trace_id == trace_id(1)
    assert rec.service == "weather-svc"
    assert rec.agent_name == "weather-agent"
    assert rec.status == "ok"
    assert rec.input == {"args": ["Paris"], "kwargs": {}}
    assert rec.output == "Sunny in Paris"
    assert rec.replay_mode is None
    err = make_recording(2, error=True)
    assert err.status == "error" and err.output is None
    assert make_recording(3, replay="recorded").replay_mode == "recorded"
    assert make_recording(4, with_input=False).input is None
    with pytest.raises(ValueError, match="trace_id"):
        Recording.from_bundle({"tools": {}})
    with pytest.raises(ValueError, match="status"):
        dataclasses.replace(rec, status="weird")
    with pytest.raises(ValueError, match="carries the bundle"):
        dataclasses.replace(rec, trace_id=trace_id(99))
    assert Recording.from_dict(rec.to_dict()) == rec


def test_put_get_recording_round_trip(store: SQLiteStore) -> None:
    rec = make_recording(1)
    assert store.put_recording(rec) is True
    assert store.get_recording(rec.trace_id) == rec
    with pytest.raises(NotFound, match="nope"):
        store.get_recording("nope")


def test_put_recording_is_idempotent(store: SQLiteStore) -> None:
    rec = make_recording(1)
    assert store.put_recording(rec) is True
    again = dataclasses.replace(rec, received_at=rec.received_at + 10)
    assert store.put_recording(again) is False
    assert store.get_recording(rec.trace_id).received_at == rec.received_at
    assert len(store.list_recordings()) == 1


def test_more_complete_bundle_replaces(store: SQLiteStore) -> None:
    tid = trace_id(1)
    early = Recording.from_bundle(make_bundle(tid, tools=1, agent=False))
    assert early.input is None
    assert store.put_recording(early) is True
    late = Recording.from_bundle(make_bundle(tid, tools=3))
    assert store.put_recording(late) is True  # late spans complete the recording
    got = store.get_recording(tid)
    assert got == late and got.input == {"args": ["Paris"], "kwargs": {}}
    # An earlier, smaller batch arriving again does not downgrade it.
    assert store.put_recording(early) is False
    # Same number of spans, different content: the first one stays.
    other = Recording.from_bundle(make_bundle(tid, tools=3, output="Rain"))
    assert store.put_recording(other) is False
    assert store.get_recording(tid).output == "Sunny in Paris"


def test_put_recordings_batch(store: SQLiteStore) -> None:
    recs = [make_recording(i) for i in range(5)]
    assert store.put_recordings(recs + recs[:2]) == [True] * 5 + [False] * 2
    assert store.put_recordings([]) == []
    assert len(store.list_recordings()) == 5


def test_list_recordings(store: SQLiteStore) -> None:
    base = 1_700_000_000_000_000_000
    for i in range(6):
        store.put_recording(
            make_recording(
                i,
                started_at=base + i,
                service="svc-a" if i % 2 else "svc-b",
                name="agent-x" if i < 3 else "agent-y",
            )
        )
    newest_first = [r.started_at - base for r in store.list_recordings()]
    assert newest_first == [5, 4, 3, 2, 1, 0]
    assert [r.started_at - base for r in store.list_recordings(limit=2, offset=1)] == [4, 3]
    assert [r.started_at - base for r in store.list_recordings(service="svc-a")] == [5, 3, 1]
    assert [r.started_at - base for r in store.list_recordings(agent="agent-x")] == [2, 1, 0]
    assert [
        r.started_at - base for r in store.list_recordings(service="svc-b", agent="agent-y")
    ] == [4]
    assert store.list_recordings(limit=0) == []
    with pytest.raises(ValueError, match="limit"):
        store.list_recordings(limit=-1)
    with pytest.raises(ValueError, match="offset"):
        store.list_recordings(offset=-5)


def test_threads_share_one_store(store: SQLiteStore) -> None:
    def work(t: int) -> None:
        for i in range(50):
            store.put_recording(make_recording(f"t{t}-{i}"))
            store.list_recordings(limit=5)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.list_recordings(limit=1000)) == 200


def test_two_processes_write_concurrently(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    SQLiteStore(path).close()  # create the schema first, as the first recording process would
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=write_many, args=(path, w, 200)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with SQLiteStore(path) as s:
        recs = s.list_recordings(limit=10_000)
    ids = [r.trace_id for r in recs]
    assert len(ids) == 400
    assert len(set(ids)) == 400
    assert set(ids) == {trace_id(f"{w}-{i}") for w in range(2) for i in range(200)}


def test_two_processes_create_the_file_concurrently(tmp_path: Path) -> None:
    path = str(tmp_path / "fresh" / "new.db")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=write_many, args=(path, w, 20)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with SQLiteStore(path) as s:
        assert len(s.list_recordings(limit=100)) == 40


# --- promote ------------------------------------------------------------------------------


def test_promote(store: SQLiteStore, promoted: Case) -> None:
    assert promoted.id == "paris-weather"
    assert promoted.name == "Paris weather"
    assert promoted.entrypoint == "weather_agent:run"
    assert promoted.version == 1
    assert promoted.tags == ("smoke",)
    assert promoted.input == {"args": ["Paris"], "kwargs": {}}
    assert promoted.expected_output == "Sunny in Paris"
    assert promoted.source_trace_id == trace_id(1)
    assert promoted.bundle == store.get_recording(trace_id(1)).bundle
    assert promoted.created_at == promoted.updated_at > 0
    assert store.get_case("paris-weather") == promoted
    (v1,) = store.case_history("paris-weather")
    assert (v1.case_id, v1.version, v1.source_trace_id) == ("paris-weather", 1, trace_id(1))
    assert v1.bundle == promoted.bundle and v1.input == promoted.input
    assert trace_id(1) in (v1.note or "")


def test_promote_ids_are_unique_slugs(store: SQLiteStore, promoted: Case) -> None:
    store.put_recording(make_recording(2))
    store.put_recording(make_recording(3))
    assert store.promote(trace_id(2), name="Paris weather").id == "paris-weather-2"
    assert store.promote(trace_id(3), name="Paris weather").id == "paris-weather-3"
    store.put_recording(make_recording(4))
    with pytest.raises(Conflict, match="already exists"):
        store.promote(trace_id(4), case_id="paris-weather", name="x")
    with pytest.raises(InvalidCase):
        store.promote(trace_id(4), case_id="../escape", name="x")
    assert store.promote(trace_id(4), case_id="custom.id_1", name="x").id == "custom.id_1"


def test_promote_refusals(store: SQLiteStore) -> None:
    store.put_recording(make_recording("noinput", with_input=False))
    with pytest.raises(Conflict) as info:
        store.promote(trace_id("noinput"), name="x")
    assert str(info.value) == (
        f"trace {trace_id('noinput')} has no recorded agent input (it was recorded without "
        "an agent span, e.g. by `tracely run` or TRACELY_INSTRUMENT): record the run under "
        "`tracely.agent(name, input=...)` or `@observe(as_type='agent')`, or state what to "
        "replay it through: `tracely cases promote TRACE_ID --input JSON --expected JSON "
        "--entrypoint MODULE:FUNCTION`"
    )
    store.put_recording(make_recording("replayed", replay="recorded"))
    with pytest.raises(Conflict, match="replay run"):
        store.promote(trace_id("replayed"), name="x")
    tampered = make_bundle(trace_id("tampered"))
    tampered["agent"]["output"] = "edited after recording"  # checksum no longer matches
    store.put_recording(Recording.from_bundle(tampered))
    with pytest.raises(Conflict, match="checksum"):
        store.promote(trace_id("tampered"), name="x")
    with pytest.raises(NotFound, match="missing"):
        store.promote("missing", name="x")
    assert store.list_cases() == []


def test_promote_many_makes_every_case_in_one_go(store: SQLiteStore) -> None:
    store.put_recordings([make_recording(n, city=f"City{n}") for n in range(3)])
    cases = store.promote_many(
        [
            Promotion(trace_id(n), "Weather", entrypoint="weather_agent:run", tags=("batch",))
            for n in range(3)
        ]
    )
    assert [c.id for c in cases] == ["weather", "weather-2", "weather-3"]
    assert [c.source_trace_id for c in cases] == [trace_id(n) for n in range(3)]
    assert [c.input for c in cases] == [{"args": [f"City{n}"], "kwargs": {}} for n in range(3)]
    for case in cases:
        assert (case.name, case.entrypoint, case.tags, case.version) == (
            "Weather",
            "weather_agent:run",
            ("batch",),
            1,
        )
        assert store.get_case(case.id) == case
        assert [v.version for v in store.case_history(case.id)] == [1]
    assert store.promote_many([]) == []


def test_a_refused_promotion_leaves_the_whole_batch_unpromoted(store: SQLiteStore) -> None:
    store.put_recordings(
        [make_recording(1), make_recording(2, replay="recorded"), make_recording(3)]
    )
    batch = [Promotion(trace_id(n), "Weather") for n in (1, 2, 3)]
    with pytest.raises(Conflict, match=f"trace {trace_id(2)} was made by a replay run"):
        store.promote_many(batch)
    assert store.list_cases() == []
    with pytest.raises(NotFound, match=trace_id("missing")):
        store.promote_many([batch[0], Promotion(trace_id("missing"), "Weather")])
    assert store.list_cases() == []
    with pytest.raises(Conflict, match="case taken already exists"):
        store.promote_many(
            [Promotion(trace_id(1), "a", "taken"), Promotion(trace_id(3), "b", "taken")]
        )
    assert store.list_cases() == []
    assert [c.id for c in store.promote_many([batch[0], batch[2]])] == ["weather", "weather-2"]


def test_a_trace_recorded_without_an_agent_span_is_promoted_with_a_stated_run(
    store: SQLiteStore,
) -> None:
    store.put_recording(make_recording("bare", agent=False))
    stated = StatedRun({"args": ["Paris"], "kwargs": {}}, "Sunny in Paris")
    case = store.promote(trace_id("bare"), name="bare", stated=stated)
    assert (case.input, case.expected_output) == (stated.input, "Sunny in Paris")
    (first,) = store.case_history(case.id)
    assert first.input == stated.input and "input and expected output as stated" in (
        first.note or ""
    )
    # A trace with a recorded agent input keeps it: nothing stated overrides a recording.
    store.put_recording(make_recording("agent"))
    with pytest.raises(Conflict, match="has a recorded agent input"):
        store.promote(trace_id("agent"), name="x", stated=stated)
    with pytest.raises(InvalidCase, match="a stated input must be"):
        store.promote(trace_id("bare"), name="y", stated=StatedRun(["Paris"], None))
    assert [c.id for c in store.list_cases()] == ["bare"]


def test_promote_validates_fields(store: SQLiteStore) -> None:
    store.put_recording(make_recording(1))
    for kwargs, match in [
        ({"name": ""}, "name"),
        ({"name": "x", "entrypoint": "not an entrypoint"}, "entrypoint"),
        ({"name": "x", "tags": "smoke"}, "tags"),
        ({"name": "x", "tags": ["has space"]}, "tag"),
    ]:
        with pytest.raises(InvalidCase, match=match):
            store.promote(trace_id(1), **kwargs)  # type: ignore[arg-type]
    assert store.list_cases() == []


def test_promote_errored_run(store: SQLiteStore) -> None:
    store.put_recording(make_recording("err", error=True))
    case = store.promote(trace_id("err"), name="Crashes on Paris")
    assert case.expected_output is None
    assert "error" in case.bundle["agent"]


# --- recapture ----------------------------------------------------------------------------


def test_recapture_bumps_version_and_keeps_history(store: SQLiteStore, promoted: Case) -> None:
    store.put_recording(make_recording(2, tools=2, output="Sunny, 22C"))
    new = store.recapture(promoted.id, trace_id(2), note="fixed the tool call")
    assert new.version == 2
    assert new.expected_output == "Sunny, 22C"
    assert new.source_trace_id == trace_id(2)
    assert len(new.bundle["tools"]["get_weather"]) == 2
    assert (new.id, new.name, new.tags, new.entrypoint, new.created_at) == (
        promoted.id,
        promoted.name,
        promoted.tags,
        promoted.entrypoint,
        promoted.created_at,
    )
    assert new.updated_at >= promoted.updated_at
    assert store.get_case(promoted.id) == new
    store.put_recording(make_recording(3, tools=3, output="v3"))
    store.recapture(promoted.id, trace_id(3))
    history = store.case_history(promoted.id)
    assert [v.version for v in history] == [1, 2, 3]
    assert [v.source_trace_id for v in history] == [trace_id(1), trace_id(2), trace_id(3)]
    assert [v.expected_output for v in history] == ["Sunny in Paris", "Sunny, 22C", "v3"]
    assert history[0].bundle == promoted.bundle
    assert history[1].note == "fixed the tool call" and history[2].note is None


def test_recapture_compares_inputs_canonically(store: SQLiteStore) -> None:
    tid = trace_id("kw")
    bundle = make_bundle(tid)
    bundle["agent"]["input"] = {"kwargs": {"units": "c", "city": "Paris"}, "args": []}
    store.put_recording(Recording.from_bundle(seal(bundle)))
    case = store.promote(tid, name="kwargs case")
    tid2 = trace_id("kw2")
    bundle2 = make_bundle(tid2, output="later")
    bundle2["agent"]["input"] = {"args": (), "kwargs": {"city": "Paris", "units": "c"}}
    store.put_recording(Recording.from_bundle(seal(bundle2)))
    assert store.recapture(case.id, tid2).version == 2
    # The rule itself, on values that were never through JSON storage.
    bundle3 = make_bundle(trace_id("kw3"))
    bundle3["agent"]["input"] = {"kwargs": {"units": "c", "city": "Paris"}, "args": ()}
    rec = Recording.from_bundle(seal(bundle3))
    assert rec.input["args"] == ()
    current = store.get_case(case.id)
    plan = plan_recapture(
        dataclasses.replace(current, input={"args": [], "kwargs": {"city": "Paris", "units": "c"}}),
        rec,
        note=None,
        now=current.updated_at + 1,
    )
    assert plan is not None and plan[0].version == 3


def test_recapture_different_input_conflicts(store: SQLiteStore, promoted: Case) -> None:
    store.put_recording(make_recording("lyon", city="Lyon"))
    with pytest.raises(Conflict) as info:
        store.recapture(promoted.id, trace_id("lyon"))
    msg = str(info.value)
    assert '"Paris"' in msg and '"Lyon"' in msg  # both inputs are shown
    assert store.get_case(promoted.id) == promoted
    assert len(store.case_history(promoted.id)) == 1


def test_recapture_refusals(store: SQLiteStore, promoted: Case) -> None:
    store.put_recording(make_recording("replayed", replay="recorded"))
    with pytest.raises(Conflict, match="replay run"):
        store.recapture(promoted.id, trace_id("replayed"))
    store.put_recording(make_recording("noinput", with_input=False))
    with pytest.raises(Conflict, match="no recorded agent input") as info:
        store.recapture(promoted.id, trace_id("noinput"))
    assert "a recapture compares the case's input" in str(info.value)
    assert "--input" not in str(info.value)  # that is promotion's way, not recapture's
    with pytest.raises(NotFound, match="nope"):
        store.recapture("nope", trace_id(1))
    with pytest.raises(NotFound, match="missing-trace"):
        store.recapture(promoted.id, "missing-trace")
    assert store.get_case(promoted.id) == promoted


def test_recapture_from_the_same_recording_is_a_no_op(store: SQLiteStore, promoted: Case) -> None:
    assert store.recapture(promoted.id, trace_id(1)) == promoted
    assert len(store.case_history(promoted.id)) == 1


# --- update / list / delete / put -----------------------------------------------------------


def test_update_case(store: SQLiteStore, promoted: Case) -> None:
    updated = store.update_case(promoted.id, name="Renamed", tags=["b", "a", "a"])
    assert updated.name == "Renamed" and updated.tags == ("a", "b")
    assert updated.bundle == promoted.bundle and updated.input == promoted.input
    assert updated.version == promoted.version + 1  # the edit is kept in the history
    assert updated.entrypoint == "weather_agent:run"
    assert store.get_case(promoted.id) == updated
    assert (
        store.update_case(promoted.id, entrypoint="pkg.mod:Agent.run").entrypoint
        == "pkg.mod:Agent.run"
    )
    assert store.update_case(promoted.id, entrypoint="").entrypoint is None  # "" clears it
    assert store.update_case(promoted.id) == store.get_case(promoted.id)
    assert store.update_case(promoted.id, name="Renamed") == store.get_case(promoted.id)
    with pytest.raises(InvalidCase):
        store.update_case(promoted.id, name=" ")
    with pytest.raises(NotFound):
        store.update_case("nope", name="x")
    history = store.case_history(promoted.id)
    assert [v.version for v in history] == [1, 2, 3, 4]
    assert [v.note for v in history[1:]] == [
        f"edited: name {promoted.name!r} -> 'Renamed'; tags [smoke] -> [a, b]",
        "edited: entrypoint 'weather_agent:run' -> 'pkg.mod:Agent.run'",
        "edited: entrypoint 'pkg.mod:Agent.run' -> -",
    ]
    assert all(v.bundle == promoted.bundle for v in history)


def test_list_cases_by_tag(store: SQLiteStore) -> None:
    for i, tags in enumerate([["smoke"], ["smoke", "slow"], []]):
        store.put_recording(make_recording(i))
        store.promote(trace_id(i), name=f"case {i}", tags=tags)
    assert [c.id for c in store.list_cases()] == ["case-0", "case-1", "case-2"]
    assert [c.id for c in store.list_cases(tag="smoke")] == ["case-0", "case-1"]
    assert [c.id for c in store.list_cases(tag="slow")] == ["case-1"]
    assert store.list_cases(tag="none") == []
    store.update_case("case-1", tags=[])
    assert [c.id for c in store.list_cases(tag="smoke")] == ["case-0"]


def test_cases_are_listed_a_page_at_a_time(store: SQLiteStore) -> None:
    for i in range(5):
        store.put_recording(make_recording(i))
        store.promote(trace_id(i), name=f"case {i}", tags=["smoke"] if i % 2 else [])
    assert [c.id for c in store.list_cases(limit=2)] == ["case-0", "case-1"]
    assert [c.id for c in store.list_cases(limit=2, offset=3)] == ["case-3", "case-4"]
    assert [c.id for c in store.list_cases(offset=4)] == ["case-4"]
    assert store.list_cases(limit=2, offset=5) == []
    assert [c.id for c in store.list_cases(tag="smoke", limit=1, offset=1)] == ["case-3"]


def test_delete_case(store: SQLiteStore, promoted: Case) -> None:
    store.put_recording(make_recording(2, output="v2"))
    store.recapture(promoted.id, trace_id(2))
    store.delete_case(promoted.id)
    with pytest.raises(NotFound, match="paris-weather"):
        store.get_case(promoted.id)
    with pytest.raises(NotFound):
        store.case_history(promoted.id)
    with pytest.raises(NotFound):
        store.delete_case(promoted.id)
    conn = store._connection()
    assert conn.execute("SELECT COUNT(*) FROM case_versions").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM case_tags").fetchone()[0] == 0
    # The recordings stay; the case can be promoted again.
    assert store.promote(trace_id(1), name="Paris weather").id == "paris-weather"


def test_put_case_replaces(store: SQLiteStore, promoted: Case) -> None:
    history = store.case_history(promoted.id)
    store.delete_case(promoted.id)
    assert store.put_case(promoted, history) == promoted
    assert store.get_case(promoted.id) == promoted
    assert store.case_history(promoted.id) == history
    renamed = dataclasses.replace(promoted, name="Imported", tags=("x",))
    store.put_case(renamed, history)
    assert store.get_case(promoted.id) == renamed
    assert [c.id for c in store.list_cases(tag="x")] == [promoted.id]


def test_put_case_checks_history(store: SQLiteStore, promoted: Case) -> None:
    (v1,) = store.case_history(promoted.id)
    with pytest.raises(InvalidCase, match="at least"):
        store.put_case(promoted, [])
    with pytest.raises(InvalidCase, match="twice"):
        store.put_case(promoted, [v1, v1])
    with pytest.raises(InvalidCase, match="ends at"):
        store.put_case(dataclasses.replace(promoted, version=2), [v1])
    with pytest.raises(InvalidCase, match="belongs to"):
        store.put_case(promoted, [dataclasses.replace(v1, case_id="other")])
    with pytest.raises(InvalidCase, match="differ"):
        store.put_case(dataclasses.replace(promoted, expected_output="changed"), [v1])
    broken = dict(v1.bundle, tools={"t": [{"nothing": 1}]})
    with pytest.raises(InvalidCase, match="invalid fixture bundle"):
        store.put_case(
            dataclasses.replace(promoted, bundle=broken), [dataclasses.replace(v1, bundle=broken)]
        )
    assert store.get_case(promoted.id) == promoted


def test_model_validation() -> None:
    with pytest.raises(InvalidCase, match="no input"):
        Case("a", "A", None, None, None, {}, None, 1, (), 0, 0)
    with pytest.raises(InvalidCase, match="version"):
        CaseVersion("a", 0, {}, None, {}, None, 0)
    with pytest.raises(ValueError, match="nanoseconds"):
        Case("a", "A", None, {}, None, {}, None, 1, (), -1, 0)


# --- ids --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "../x",
        "a/b",
        "a\\b",
        "",
        "Upper",
        "x" * 200,
        "a..b",
        ".hidden",
        "-dash",
        "a b",
        "con",
        "nul.x",
        "é",
    ],
)
def test_invalid_case_ids(bad: str) -> None:
    with pytest.raises(InvalidCase):
        validate_case_id(bad)


@pytest.mark.parametrize("good", ["a", "0", "paris-weather", "v1.2_final", "x" * 128, "console"])
def test_valid_case_ids(good: str) -> None:
    assert validate_case_id(good) == good


def test_slugify() -> None:
    assert slugify("Paris weather!") == "paris-weather"
    assert slugify("  ../../etc/passwd ") == "etc-passwd"
    assert slugify("Ünïcödé  café") == "unicode-cafe"
    assert slugify("!!!") == "case"
    assert slugify("CON") == "con-case"
    assert len(slugify("y" * 500)) == 120


# --- migrations -------------------------------------------------------------------------


def _make_v1(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(_migrations._SCHEMA_TABLE)
    for step in _migrations.MIGRATIONS[0].steps:
        assert isinstance(step, str)
        conn.execute(step)
    conn.execute("INSERT INTO tracely_schema VALUES (1, 'v1', 0)")
    replayed = make_bundle(trace_id("r"), replay="recorded")
    live = make_bundle(trace_id("l"), tools=2)
    from tracely_sdk.store._model import dumps_json

    for b in (replayed, live):
        conn.execute(
            "INSERT INTO recordings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        "INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
    conn.execute(
        "INSERT INTO case_versions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            "old-case",
            1,
            dumps_json(live["agent"]["input"]),
            dumps_json("x"),
            dumps_json(live),
            live["trace_id"],
            1,
            None,
        ),
    )
    conn.close()


def test_migrates_v1_database(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _make_v1(path)
    with SQLiteStore(path) as s:
        conn = s._connection()
        latest = _migrations.latest_version()
        assert _migrations.schema_version(conn, _migrations.SQLITE) == latest
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
        # A late, more complete bundle still replaces a migrated recording.
        assert s.put_recording(make_recording("l", tools=3)) is True
    # Opening again is a no-op.
    with SQLiteStore(path) as s:
        assert _migrations.migrate(s._connection(), _migrations.SQLITE) == (latest, latest)


def test_failed_migration_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _make_v1(path)
    conn = sqlite3.connect(path, isolation_level=None)

    def broken(c: object, d: object) -> None:
        raise RuntimeError("migration step failed")

    bad = (
        *_migrations.MIGRATIONS,
        _migrations.Migration(
            _migrations.latest_version() + 1, "broken", ("CREATE TABLE t3 (x TEXT)", broken)
        ),
    )
    with pytest.raises(RuntimeError):
        _migrations.migrate(conn, _migrations.SQLITE, migrations=bad)
    assert _migrations.schema_version(conn, _migrations.SQLITE) == 1
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'case_tags'").fetchone() is None
    conn.close()


def test_refuses_newer_schema_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO tracely_schema VALUES (99, 'from the future', 0)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(NewerSchema, match="newer tracely") as info:
        SQLiteStore(path)
    assert "upgrade" in str(info.value)
    assert isinstance(info.value, StoreError)
    assert path.read_bytes() == before
    with pytest.raises(StoreError, match="newer"):
        open_store(str(path))


def test_dialect_shim() -> None:
    sql = "SELECT x FROM t WHERE a = ? AND b = ?"
    assert _migrations.SQLITE.sql(sql) == sql
    assert _migrations.POSTGRES.sql(sql) == "SELECT x FROM t WHERE a = %s AND b = %s"
    for m in _migrations.MIGRATIONS:
        for step in m.steps:
            if isinstance(step, str):
                assert "?" not in step and "AUTOINCREMENT" not in step.upper()


def test_a_row_changed_outside_tracely_is_a_store_error_naming_the_case(tmp_path: Path) -> None:
    import sqlite3

    from tests.sdk.store._helpers import make_recording
    from tracely_sdk.errors import StoreError
    from tracely_sdk.store import SQLiteStore

    db = tmp_path / "t.db"
    store = SQLiteStore(db)
    store.put_recording(make_recording(1))
    case = store.promote(make_recording(1).trace_id, name="one")
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE cases SET bundle = '{not json' WHERE id = ?", (case.id,))
    store = SQLiteStore(db)
    try:
        with pytest.raises(StoreError, match=f"case {case.id} holds JSON that cannot be read"):
            store.list_cases()
    finally:
        store.close()


def test_a_late_span_that_completes_a_call_replaces_the_recording(tmp_path: Path) -> None:
    from tests.sdk.store._helpers import make_recording
    from tracely_otel import seal
    from tracely_sdk.store import Recording, SQLiteStore

    complete = make_recording("late", tools=2)
    # The first assembly saw the same spans, but one call's output had not arrived yet.
    early = {k: v for k, v in complete.bundle.items() if k != "checksum"}
    early["tools"] = {"get_weather": complete.bundle["tools"]["get_weather"][:1]}
    early["incomplete"] = [{"label": "tools:get_weather", "seq": 1, "reason": "no output"}]
    with SQLiteStore(tmp_path / "t.db") as store:
        assert store.put_recording(Recording.from_bundle(seal(early))) is True
        assert store.put_recording(complete) is True
        assert store.get_recording(complete.trace_id).bundle == complete.bundle
        assert store.put_recording(Recording.from_bundle(seal(early))) is False


# -- replay runs (these run against every backend) ------------------------------------------


def test_a_run_is_kept_with_each_case_result(store: SQLiteStore) -> None:
    from tests.sdk.store._helpers import make_run

    divergence = {
        "label": "llm:m",
        "entry": "llm:m #1 (seq 1)",
        "seq": 1,
        "field": "input",
        "recorded": ["a"],
        "actual": ["b"],
        "differences": [{"path": "[0]", "recorded": "a", "actual": "b"}],
        "omitted": 0,
    }
    run = make_run(1, divergences=[divergence], agent_version="2.1.0")
    store.save_run(run)
    assert store.get_run(run.id) == run
    (first, second) = store.get_run(run.id).cases
    assert first["divergences"] == [divergence] and first["agent_version"] == "2.1.0"
    assert second["verdict"] == "PASS"
    store.save_run(run)  # the same run again changes nothing
    with pytest.raises(Conflict, match=f"run {run.id}"):
        store.save_run(dataclasses.replace(run, ok=True))
    with pytest.raises(NotFound, match="no run"):
        store.get_run("f" * 16)


def test_runs_are_listed_newest_first_without_cases_and_found_by_replay_trace(
    store: SQLiteStore,
) -> None:
    from tests.sdk.store._helpers import make_run

    runs = [make_run(n) for n in (1, 3, 2)]
    for run in runs:
        store.save_run(run)
    listed = store.list_runs()
    assert [r.id for r in listed] == [f"{n:016x}" for n in (3, 2, 1)]
    assert all(r.cases == () for r in listed)
    assert listed[0].summary == runs[1].summary
    assert [r.id for r in store.list_runs(limit=1, offset=1)] == [f"{2:016x}"]
    (found,) = store.list_runs(trace_id=runs[2].cases[1]["trace_id"])
    assert found.id == runs[2].id
    assert store.list_runs(trace_id=trace_id("never replayed")) == []


def test_a_run_keeps_large_values_cut_with_a_marker(store: SQLiteStore) -> None:
    from tests.sdk.store._helpers import make_run
    from tracely_sdk.store._model import MAX_RUN_CASE_BYTES, MAX_RUN_ITEMS, MAX_RUN_STRING

    huge = "x" * 100_000
    run = make_run(
        5,
        diff=huge,
        output={"items": list(range(1000))},
        divergences=[{"label": "llm:m", "recorded": [huge] * 40, "actual": [huge] * 40}],
    )
    (first, _) = run.cases
    assert len(first["diff"]) <= MAX_RUN_STRING
    assert first["diff"].endswith("… [truncated: 100000 characters]")
    assert len(first["output"]["items"]) == MAX_RUN_ITEMS
    assert first["output"]["items"][-1] == f"… [{1000 - MAX_RUN_ITEMS + 1} more items]"
    assert len(orjson.dumps(first)) <= MAX_RUN_CASE_BYTES
    store.save_run(run)
    assert store.get_run(run.id) == run  # what is kept is exactly the bounded run


def test_a_runs_timeline_keeps_its_steps_and_collapses_their_values(store: SQLiteStore) -> None:
    from tests.sdk.store._helpers import make_run
    from tracely_sdk.store._model import MAX_RUN_CASE_BYTES

    huge = ["y" * 1500] * 40
    steps = [
        {"outcome": "served", "label": "llm:m", "seq": n, "recorded": huge, "output": huge}
        for n in range(10)
    ]
    run = make_run(6, timeline=steps)
    (first, _) = run.cases
    assert len(orjson.dumps(first)) <= MAX_RUN_CASE_BYTES
    assert [(s["outcome"], s["seq"]) for s in first["timeline"]] == [
        ("served", n) for n in range(10)
    ]
    assert first["timeline"][0]["output"].startswith("… [collapsed: ")
    store.save_run(run)
    assert store.get_run(run.id) == run


def test_sign_in_sessions_expire_and_are_deleted(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        store.create_session("a" * 64, "t" * 64, expires_at=2_000)
        assert store.session_token("a" * 64, now=1_999) == "t" * 64
        assert store.session_token("a" * 64, now=2_000) is None
        store.create_session("b" * 64, "t" * 64, expires_at=now_ns() + 10**12)
        assert store.session_token("a" * 64, now=0) is None  # expired rows are let go of
        store.delete_session("b" * 64)
        store.delete_session("b" * 64)
        assert store.session_token("b" * 64, now=0) is None


def test_a_row_is_checked_against_its_seal_by_value_whatever_the_json_text_looks_like(
    tmp_path: Path,
) -> None:
    import json
    import sqlite3

    from tests.sdk.store._helpers import make_recording
    from tracely_sdk.store import SQLiteStore

    db = tmp_path / "t.db"
    store = SQLiteStore(db)
    store.put_recording(make_recording(1))
    case = store.promote(make_recording(1).trace_id, name="one")
    store.close()
    with sqlite3.connect(db) as conn:
        # The same value written another way (spaced, keys in another order): still the case.
        (text,) = conn.execute("SELECT bundle FROM cases WHERE id = ?", (case.id,)).fetchone()
        spaced = json.dumps(dict(reversed(json.loads(text).items())), indent=1)
        conn.execute("UPDATE cases SET bundle = ? WHERE id = ?", (spaced, case.id))
    store = SQLiteStore(db)
    try:
        (loaded,) = store.list_cases()
        assert loaded.problem is None and loaded.bundle == case.bundle
    finally:
        store.close()
    with sqlite3.connect(db) as conn:
        changed = json.loads(spaced)
        changed["agent"]["output"] = "edited after recording"
        conn.execute("UPDATE cases SET bundle = ? WHERE id = ?", (json.dumps(changed), case.id))
    store = SQLiteStore(db)
    try:
        (loaded,) = store.list_cases()
        assert loaded.problem is not None and "bundle does not match the checksum" in loaded.problem
    finally:
        store.close()
