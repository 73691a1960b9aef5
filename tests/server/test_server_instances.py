"""Several servers on one PostgreSQL store, behind a plain round-robin load balancer: a trace
whose spans reached different servers is recorded whole, as one server would record it."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

import tracely_sdk as tracely
from examples.weather_agent import get_weather
from server._support import ServerProcess, exporter, wait_for
from tracely_otel import bundle_from_spans, record_from_readable
from tracely_otel._otlp import MAX_VALUE_DEPTH
from tracely_otel._spans import SpanEvent, SpanRecord
from tracely_sdk.errors import NotFound
from tracely_sdk.server import _ingest as ingest
from tracely_sdk.server._ingest import IngestPipeline, Journal, _decode_shared, _encode_shared
from tracely_sdk.store._model import bundle_weight
from tracely_sdk.store._postgres import PostgresStore, _lock_key

psycopg = pytest.importorskip(
    "psycopg", reason="psycopg is not installed (tracely-replay[postgres])"
)

FAST = ["--quiet-seconds", "0.2", "--rate-limit", "0"]


def agent_calling_tools(calls: int) -> None:
    with tracely.agent("round-robin-agent", input=f"{calls} cities") as run:
        for n in range(calls):
            tracely.call_tool(
                "get_weather", lambda: get_weather("Paris"), args={"city": "Paris", "call": n}
            )
        run.output = "done"


def instances(make_server: Any, tmp_path: Path, url: str, count: int = 2) -> list[ServerProcess]:
    first = make_server(*FAST, "--journal-dir", str(tmp_path / "journal-0"), name="s0", store=url)
    others = [
        make_server(
            *FAST,
            "--journal-dir",
            str(tmp_path / f"journal-{n}"),
            name=f"s{n}",
            store=url,
            tokens=first.tokens,
        )
        for n in range(1, count)
    ]
    return [first, *others]


def test_20_tool_calls_sent_round_robin_to_two_servers_make_one_whole_recording(
    make_server: Any, tmp_path: Path, schema_url: str, capture: Any
) -> None:
    servers = instances(make_server, tmp_path, schema_url)
    agent_calling_tools(20)
    spans = capture.spans
    bundle = capture.last_bundle
    assert len(bundle["tools"]["get_weather"]) == 20
    exporters = [exporter(s) for s in servers]
    for n, span in enumerate(spans):  # one span a request, to each server in turn
        assert exporters[n % 2].export([span]) is SpanExportResult.SUCCESS

    trace_id = bundle["trace_id"]
    for server in servers:  # either server answers with the whole trace
        wait_for(
            lambda server=server: (server.recording(trace_id) or {}).get("bundle") == bundle,
            what="the recording of every span, from both servers",
        )
    for server in servers:
        assert server.stop() == 0, server.logs()
    store = PostgresStore(schema_url)
    try:
        recording = store.get_recording(trace_id)
    finally:
        store.close()
    assert len(recording.bundle["tools"]["get_weather"]) == 20
    assert recording.bundle == bundle


def count_recording_writes(url: str) -> Any:
    """A trigger in the store's schema noting every write of a recording (each upsert, even
    one that changes nothing), with the weight of the bundle written."""
    conn = psycopg.connect(url, autocommit=True)
    conn.execute("CREATE TABLE recording_writes (trace_id TEXT NOT NULL, span_count INTEGER)")
    conn.execute(
        "CREATE FUNCTION note_recording_write() RETURNS trigger LANGUAGE plpgsql "
        "SET search_path FROM CURRENT AS $$ BEGIN "
        "INSERT INTO recording_writes VALUES (NEW.trace_id, NEW.span_count); RETURN NEW; "
        "END $$"
    )
    conn.execute(
        "CREATE TRIGGER note_recording_write BEFORE INSERT ON recordings "
        "FOR EACH ROW EXECUTE FUNCTION note_recording_write()"
    )
    return conn


def test_each_split_trace_is_built_once_from_all_its_spans_by_two_server_processes(
    make_server: Any, tmp_path: Path, schema_url: str, weather_run: Any
) -> None:
    traces = [weather_run(("Paris", "Oslo", "Lisbon", "Tokyo")[n % 4]) for n in range(40)]
    servers = instances(make_server, tmp_path, schema_url)
    db = count_recording_writes(schema_url)
    # Each trace cut in two, one half to each server (the root to either), all at once.
    halves: list[list[Any]] = [[], []]
    for n, (spans, _) in enumerate(traces):
        cut = len(spans) // 2
        halves[n % 2].extend(spans[:cut])
        halves[1 - n % 2].extend(spans[cut:])
    start = threading.Barrier(2)
    results: list[Any] = [None, None]

    def send(n: int) -> None:
        sender = exporter(servers[n])
        start.wait()
        results[n] = sender.export(halves[n])

    senders = [threading.Thread(target=send, args=(n,)) for n in range(2)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    assert results == [SpanExportResult.SUCCESS] * 2

    expected = {bundle["trace_id"]: bundle for _, bundle in traces}
    wait_for(
        lambda: db.execute("SELECT count(*) FROM recordings").fetchone()[0] == len(expected),
        timeout=60,
        what="every trace recorded",
    )
    for server in servers:  # whatever either still had to write is written by now
        assert server.stop() == 0, server.logs()
    writes: dict[str, list[int]] = {}
    for trace_id, weight in db.execute("SELECT trace_id, span_count FROM recording_writes"):
        writes.setdefault(trace_id, []).append(weight)
    stored = {
        trace_id: orjson.loads(bundle)
        for trace_id, bundle in db.execute("SELECT trace_id, bundle FROM recordings")
    }
    db.close()
    # One write per trace: never twice (two builders), never half first (a builder that did
    # not wait for the other half), and the bundle one server receiving every span makes.
    assert writes == {t: [bundle_weight(b)] for t, b in expected.items()}
    assert stored == expected


def test_a_trace_being_assembled_holds_back_its_assembly_elsewhere_and_nothing_else(
    schema_url: str,
) -> None:
    a, b, c = (PostgresStore(schema_url) for _ in range(3))
    admin = psycopg.connect(schema_url, autocommit=True)
    x, y = "1" * 32, "2" * 32
    inside, release = threading.Event(), threading.Event()
    seen: dict[str, dict[str, str]] = {}

    def hold(trace_id: str, others: Any, stored: bool = False) -> None:
        inside.set()
        release.wait(30)

    def note(trace_id: str, others: Any, stored: bool = False) -> None:
        seen[trace_id] = dict(others)

    key = _lock_key(x) & (1 << 64) - 1  # pg_locks shows the key's two halves, unsigned

    def waiting_for_a_lock() -> bool:
        query = (
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid::text::bigint = %s AND objid::text::bigint = %s AND objsubid = 1 "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        row = admin.execute(query, (key >> 32, key & 0xFFFFFFFF)).fetchone()
        return bool(row and row[0])

    holder = threading.Thread(target=a.assemble_traces, args=([(x, {"01" * 8: "a's"})], hold))
    waiter = threading.Thread(target=c.assemble_traces, args=([(x, {"03" * 8: "c's"})], note))
    try:
        holder.start()
        assert inside.wait(30)  # a is assembling x, its transaction open
        b.assemble_traces([(y, {"02" * 8: "b's"})], note)  # another trace: no wait
        assert seen == {y: {}}
        waiter.start()
        wait_for(waiting_for_a_lock, what="c to wait for a's lock on the trace")
        assert x not in seen
        release.set()
        holder.join()
        waiter.join()
        assert seen[x] == {"01" * 8: "a's"}  # after a committed: every span a added
    finally:
        release.set()
        for thread in (holder, waiter):
            if thread.ident is not None:  # started
                thread.join(30)
        admin.close()
        for store in (a, b, c):
            store.close()


def pipeline(tmp_path: Path, url: str, name: str, **kwargs: Any) -> IngestPipeline:
    kwargs.setdefault("quiet_seconds", 0.05)
    p = IngestPipeline(PostgresStore(url), journal=Journal(tmp_path / name), **kwargs)
    p.start()
    return p


class SlowStore(PostgresStore):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.gate = threading.Event()
        self.entered = threading.Semaphore(0)  # released by each writer that comes in

    def assemble_traces(self, *args: Any, **kwargs: Any) -> list[bool | None]:
        self.entered.release()
        self.gate.wait(30)
        return super().assemble_traces(*args, **kwargs)


def test_a_full_write_queue_leaves_spans_waiting_in_memory_not_refused(
    tmp_path: Path, schema_url: str, weather_run: Any
) -> None:
    # The writer builds the recordings with a shared store: a queue full of cheap jobs is
    # not a reason to refuse spans that the server's memory bounds still have room for.
    runs = [weather_run(city) for city in ("Paris", "Oslo", "Tokyo", "Lisbon")]
    store = SlowStore(schema_url)
    p = IngestPipeline(
        store,
        journal=Journal(tmp_path / "slow"),
        quiet_seconds=0,
        write_queue_size=1,
        write_batch_size=1,
    )
    p.start()
    try:
        batches = [[record_from_readable(s) for s in spans] for spans, _ in runs]
        for spans in batches[:2]:  # each writer holds one trace
            p.submit(spans)
            assert store.entered.acquire(timeout=30)
        p.submit(batches[2])
        wait_for(lambda: p.stats()["write_queue"] == 1, what="the write queue to fill")
        p.submit(batches[3])
        assert p.counters["requests_refused"] == 0
        store.gate.set()
        for _, bundle in runs:
            recording = wait_for(lambda b=bundle: _recording(store, b["trace_id"]), what="it")
            assert recording.bundle == bundle
    finally:
        store.gate.set()
        p.shutdown()
        store.close()


def test_late_spans_at_another_server_complete_the_recording(
    tmp_path: Path, schema_url: str, weather_run: Any
) -> None:
    spans, bundle = weather_run("Paris")
    records = [record_from_readable(s) for s in spans]
    root = [r for r in records if r.is_root]
    children = [r for r in records if not r.is_root]
    # Server a waits for the calls its root counts as long as for an orphan's root, then
    # records what it has, marked partial.
    a = pipeline(tmp_path, schema_url, "a", orphan_seconds=0.3)
    b = pipeline(tmp_path, schema_url, "b")
    try:
        a.submit([*root, children[0]])
        first = wait_for(lambda: _recording(a.store, bundle["trace_id"]), what="a recording")
        assert first.bundle != bundle  # made of the spans server a had
        assert any("missing" in item for item in first.bundle["incomplete"])
        b.submit(children[1:])  # after a recorded the trace: b finds the root there
        wait_for(
            lambda: (_recording(b.store, bundle["trace_id"]) or first).bundle == bundle,
            what="the whole trace",
        )
    finally:
        for p in (a, b):
            p.shutdown()
            p.store.close()


def test_a_trace_whose_root_never_comes_is_recorded_as_an_orphan(
    tmp_path: Path, schema_url: str, weather_run: Any
) -> None:
    spans, _ = weather_run("Oslo")
    children = [record_from_readable(s) for s in spans if s.parent is not None]
    a = pipeline(tmp_path, schema_url, "a", orphan_seconds=0.5)
    b = pipeline(tmp_path, schema_url, "b", orphan_seconds=0.5)
    try:
        a.submit(children[:1])
        b.submit(children[1:])
        trace_id = children[0].trace_id
        wait_for(lambda: a.stats()["traces_open"] == 0 and b.stats()["traces_open"] == 0)
        recording = wait_for(lambda: _recording(a.store, trace_id), what="the orphan")
        assert recording.bundle == bundle_from_spans(children)
    finally:
        for p in (a, b):
            p.shutdown()
            p.store.close()


def _recording(store: Any, trace_id: str) -> Any:
    try:
        return store.get_recording(trace_id)
    except NotFound:
        return None


def test_a_server_without_the_root_hands_its_spans_over_and_lets_go_of_them(
    tmp_path: Path, schema_url: str, weather_run: Any
) -> None:
    spans, bundle = weather_run("Lisbon")
    records = [record_from_readable(s) for s in spans]
    a, b = pipeline(tmp_path, schema_url, "a"), pipeline(tmp_path, schema_url, "b")
    try:
        b.submit([r for r in records if not r.is_root])
        # In the store, and no longer in b's memory; b waits for the root as for an orphan.
        wait_for(lambda: b.stats()["spans_in_memory"] == 0, what="b to hand its spans over")
        assert b.stats()["traces_open"] == 1
        assert b.stats()["bytes_in_memory"] == 0  # nor counted against its bound on bytes
        assert _recording(b.store, bundle["trace_id"]) is None
        a.submit([r for r in records if r.is_root])
        recording = wait_for(lambda: _recording(a.store, bundle["trace_id"]), what="the trace")
        assert recording.bundle == bundle
    finally:
        for p in (a, b):
            p.shutdown()
            p.store.close()


def test_a_server_whose_traces_are_not_split_builds_recordings_off_the_writer_thread(
    tmp_path: Path, schema_url: str, weather_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The writer waits on PostgreSQL; building the recording on the assembler thread lets
    # the next batch be built meanwhile. Only a trace another server had spans of is built
    # again by the writer, from every span.
    threads: list[str] = []

    def spy(spans: Any) -> Any:
        threads.append(threading.current_thread().name)
        return bundle_from_spans(spans)

    monkeypatch.setattr(ingest, "bundle_from_spans", spy)
    spans, bundle = weather_run("Oslo")
    alone = pipeline(tmp_path, schema_url, "alone")
    try:
        alone.submit([record_from_readable(s) for s in spans])
        recording = wait_for(lambda: _recording(alone.store, bundle["trace_id"]), what="the trace")
        assert recording.bundle == bundle
        assert threads == ["tracely-assembler"]
    finally:
        alone.shutdown()
        alone.store.close()


def _span(**changes: Any) -> SpanRecord:
    fields: dict[str, Any] = {
        "trace_id": "ab" * 16,
        "span_id": "cd" * 8,
        "parent_span_id": "ef" * 8,
        "name": "tool get_weather",
        "start_time_unix_nano": 1,
        "end_time_unix_nano": (1 << 64) - 1,
        "attributes": {"s": "x", "i": -(1 << 63), "f": 0.5, "b": True, "a": ("x", None, (1, 2.5))},
        "status_code": "ERROR",
        "status_message": "boom",
        "events": (SpanEvent("exception", 5, {"exception.type": "ValueError"}),),
        "dropped_attributes_count": 3,
        "resource": {"service.name": "svc"},
        "scope_name": "tracely",
        "parent_is_remote": True,
        "kind": "CLIENT",
    }
    fields.update(changes)
    return SpanRecord(**fields)


def test_spans_shared_between_servers_read_back_equal_to_the_spans_received() -> None:
    spans = [
        _span(),
        _span(span_id="01" * 8, parent_span_id=None, attributes={}, events=()),
        _span(span_id="02" * 8, attributes={"nan": float("nan")}),  # JSON has no NaN
        _span(span_id="03" * 8, attributes={"inf": (float("inf"),)}),
    ]
    encoded = _encode_shared(spans)
    # Plain spans are written as compact field arrays; those an array cannot carry exactly
    # fall back to one-span OTLP/JSON requests.
    assert [encoded[s.span_id][0] for s in spans] == ["[", "[", "{", "{"]
    back = {s.span_id: s for s in _decode_shared(encoded.values())}
    assert back[spans[0].span_id] == spans[0]
    assert back[spans[1].span_id] == spans[1]
    assert math.isnan(back[spans[2].span_id].attributes["nan"])  # type: ignore[arg-type]
    assert back[spans[3].span_id] == spans[3]


@pytest.mark.parametrize(
    "row",
    [
        {"not": "an array"},
        ["ab" * 16],
        ["AB" * 16, "cd" * 8, None, "n", 1, 2, {}, "OK", "", [], 0, {}, "", False, "SERVER"],
        ["ab" * 16, "cd" * 8, None, "n", -1, 2, {}, "OK", "", [], 0, {}, "", False, "SERVER"],
        [
            "ab" * 16,
            "cd" * 8,
            None,
            "n",
            1,
            2,
            {"k": {"o": 1}},
            "OK",
            "",
            [],
            0,
            {},
            "",
            False,
            "SERVER",
        ],
        [
            "ab" * 16,
            "cd" * 8,
            None,
            "n",
            1,
            2,
            {"k": 1 << 63},
            "OK",
            "",
            [],
            0,
            {},
            "",
            False,
            "SERVER",
        ],
        ["ab" * 16, "cd" * 8, None, "n", 1, 2, {}, "FINE", "", [], 0, {}, "", False, "SERVER"],
        ["ab" * 16, "cd" * 8, None, "n", 1, 2, {}, "OK", "", [["e"]], 0, {}, "", False, "SERVER"],
        [
            "ab" * 16,
            "cd" * 8,
            None,
            "n",
            1,
            2,
            {"k": [[[1]]] * 1},
            "OK",
            "",
            [],
            0,
            {},
            "",
            1,
            "SERVER",
        ],
    ],
)
def test_a_malformed_shared_span_row_is_refused(row: Any) -> None:
    with pytest.raises(ValueError):
        _decode_shared([orjson.dumps(row).decode()])


def test_a_shared_span_row_nesting_past_the_limit_is_refused() -> None:
    deep: Any = "x"
    for _ in range(MAX_VALUE_DEPTH + 1):
        deep = [deep]
    row = [
        "ab" * 16,
        "cd" * 8,
        None,
        "n",
        1,
        2,
        {"k": deep},
        "OK",
        "",
        [],
        0,
        {},
        "",
        False,
        "SERVER",
    ]
    with pytest.raises(ValueError):
        _decode_shared([orjson.dumps(row).decode()])
