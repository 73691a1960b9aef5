"""HTTPStore against a real ``tracely serve`` process.

The store's behavioural checks (the SQLite store's own test functions) run through the client
against the server, then what only a remote store has: tokens, error mapping, retries, timeouts.
Faults the server would not produce on demand (a dropped connection, a 503, a slow answer, a
redirect) come from a small proxy in front of the real server that forwards everything else.
"""

from __future__ import annotations

import collections
import http.client
import http.server
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from tests.sdk.store import test_sqlite as shared
from tests.sdk.store._helpers import make_bundle, make_recording, trace_id
from tracely_sdk.errors import ConfigError, Conflict, NotFound, StoreError
from tracely_sdk.store import Case, InvalidCase, Recording, open_store

try:
    import tracely_sdk.server._app  # noqa: F401
    from tracely_sdk.store import _http as _client
    from tracely_sdk.store._http import HTTPStore

    from ._support import ServerProcess

    _UNAVAILABLE = ""
except ImportError as exc:  # pragma: no cover - the server is not there yet
    _UNAVAILABLE = f"the tracely server cannot be imported ({exc})"

if _UNAVAILABLE:  # pragma: no cover
    pytest.skip(_UNAVAILABLE, allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]


# --- the server ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One real server for the module (no rate limit); each test starts from an empty store."""
    proc = ServerProcess(
        tmp_path_factory.mktemp("client-server"),
        args=["--quiet-seconds", "0.2", "--rate-limit", "0"],
    )
    try:
        proc.start()
    except AssertionError as exc:
        pytest.skip(f"`python -m tracely_sdk.server` does not start: {str(exc)[-300:]}")
    try:
        yield proc
    finally:
        proc.stop()
        logs = proc.logs()
        for secret in proc.tokens.all():
            assert secret not in logs, "a token appeared in the server's log"


def _reset(server: ServerProcess) -> None:
    path = server.store_url.removeprefix("sqlite://")
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        for table in ("case_tags", "case_versions", "cases", "recordings", "run_traces", "runs"):
            conn.execute(f"DELETE FROM {table}")
    finally:
        conn.close()


class Sleeps(list):  # type: ignore[type-arg]
    """Stands in for time.sleep: records each wait (and waits for real when asked to)."""

    def __init__(self, real: bool = False) -> None:
        super().__init__()
        self.real = real

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        if self.real:
            time.sleep(seconds)


def client(url: str, token: str | None, **kwargs: Any) -> HTTPStore:
    s = HTTPStore(url, token=token, **kwargs)
    s._sleep = Sleeps()
    return s


@pytest.fixture
def store(live: ServerProcess) -> Iterator[HTTPStore]:
    _reset(live)
    s = client(live.url, live.tokens.write)
    yield s
    s.close()


@pytest.fixture
def promoted(store: HTTPStore) -> Case:
    store.put_recording(make_recording(1))
    return store.promote(
        trace_id(1), name="Paris weather", entrypoint="weather_agent:run", tags=["smoke"]
    )


# --- the store's behavioural checks, through the server ---------------------------------------

test_put_get_recording_round_trip = shared.test_put_get_recording_round_trip
test_put_recording_is_idempotent = shared.test_put_recording_is_idempotent
test_more_complete_bundle_replaces = shared.test_more_complete_bundle_replaces
test_put_recordings_batch = shared.test_put_recordings_batch
test_list_recordings = shared.test_list_recordings
test_threads_share_one_store = shared.test_threads_share_one_store
test_promote = shared.test_promote
test_promote_ids_are_unique_slugs = shared.test_promote_ids_are_unique_slugs
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
test_put_case_replaces = shared.test_put_case_replaces
test_a_run_is_kept_with_each_case_result = shared.test_a_run_is_kept_with_each_case_result
test_runs_are_listed_newest_first_without_cases_and_found_by_replay_trace = (
    shared.test_runs_are_listed_newest_first_without_cases_and_found_by_replay_trace
)
test_a_run_keeps_large_values_cut_with_a_marker = (
    shared.test_a_run_keeps_large_values_cut_with_a_marker
)
test_put_case_checks_history = shared.test_put_case_checks_history


def test_promote_refusals(store: HTTPStore) -> None:
    """As the store's own check, except that the server refuses a bundle that fails its
    integrity check already when the recording is sent, where a store keeps it and refuses to
    promote it."""
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
    with pytest.raises(InvalidCase, match="checksum"):
        store.put_recording(Recording.from_bundle(tampered))
    with pytest.raises(NotFound, match=r"tampered|no recording"):
        store.promote(trace_id("tampered"), name="x")
    with pytest.raises(NotFound, match="missing"):
        store.promote("missing", name="x")
    assert store.list_cases() == []


def test_delete_case(store: HTTPStore, promoted: Case) -> None:
    store.put_recording(make_recording(2, output="v2"))
    store.recapture(promoted.id, trace_id(2))
    store.delete_case(promoted.id)
    with pytest.raises(NotFound, match="paris-weather"):
        store.get_case(promoted.id)
    with pytest.raises(NotFound):
        store.case_history(promoted.id)
    with pytest.raises(NotFound):
        store.delete_case(promoted.id)
    assert store.list_cases() == []
    # The recordings stay; the case can be promoted again.
    assert store.promote(trace_id(1), name="Paris weather").id == "paris-weather"


# --- URLs, tokens, lifecycle ----------------------------------------------------------------


def test_open_store_gives_the_client(live: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELY_TOKEN", live.tokens.read + "\n")  # as `$(cat token-file)` gives
    _reset(live)
    with open_store(live.url + "/") as s:
        assert isinstance(s, HTTPStore)
        assert s.url == live.url and repr(s) == f"<HTTPStore {live.url}>"
        assert s.list_cases() == []
        assert s.health() == {"status": "ok"}
    with pytest.raises(StoreError, match="closed"):
        s.list_cases()


def test_url_options() -> None:
    s = HTTPStore("https://tracely.example.com:8443/base/?timeout=2.5&retries=1", token="t" * 20)
    assert (s.url, s.timeout, s.retries) == ("https://tracely.example.com:8443/base", 2.5, 1)
    for bad, match in [
        ("http://h/?timeout=soon", "timeout"),
        ("http://h/?retries=-1", "retries"),
        ("http://h/?mode=x", "unknown option"),
        ("ftp://h/", "expected http"),
        ("http://:80/", "expected http"),
        ("http://h:notaport/", "not a valid URL"),
    ]:
        with pytest.raises(ConfigError, match=match):
            HTTPStore(bad)
    with pytest.raises(ConfigError, match="TRACELY_TOKEN") as info:
        HTTPStore("http://user:hunter2@h/")
    assert "hunter2" not in str(info.value)
    with pytest.raises(ConfigError, match="TRACELY_TOKEN") as info:
        HTTPStore("http://h/", token="two words")
    assert "two words" not in str(info.value)


def test_missing_wrong_and_underscoped_tokens(live: ServerProcess) -> None:
    _reset(live)
    with pytest.raises(StoreError, match="needs a token: set TRACELY_TOKEN"):
        client(live.url, None).list_cases()
    wrong = "wrong-" + "x" * 30
    with pytest.raises(StoreError, match="does not accept the token in TRACELY_TOKEN") as info:
        client(live.url, wrong).list_cases()
    assert wrong not in str(info.value)
    reader = client(live.url, live.tokens.read)
    assert reader.list_cases() == []
    with pytest.raises(StoreError, match="may not do this") as info:
        reader.put_recording(make_recording(1))
    msg = str(info.value)
    assert "write scope" in msg and live.tokens.read not in msg
    ingest_only = client(live.url, live.tokens.ingest)
    with pytest.raises(StoreError, match="read"):
        ingest_only.list_cases()


def test_runs_are_read_with_the_read_scope_and_kept_with_the_write_scope(
    live: ServerProcess, store: HTTPStore
) -> None:
    from tests.sdk.store._helpers import make_run

    run = make_run(7)
    reader = client(live.url, live.tokens.read)
    with pytest.raises(StoreError, match="write scope"):
        reader.save_run(run)
    assert reader.list_runs() == []
    store.save_run(run)
    assert reader.get_run(run.id) == run
    assert [r.id for r in reader.list_runs(trace_id=run.cases[0]["trace_id"])] == [run.id]
    with pytest.raises(NotFound, match="no run"):
        reader.get_run("0" * 16)
    answer = live.request(
        "POST",
        "/api/runs",
        b'{"id": "../x"}',
        token=live.tokens.write,
        content_type="application/json",
    )
    assert answer.status == 400


def test_server_errors_map_to_store_errors(store: HTTPStore, promoted: Case) -> None:
    with pytest.raises(NotFound, match=f"no case 'nope' on {store.url}"):
        store.get_case("nope")
    with pytest.raises(NotFound, match="nope"):
        store.get_case("../nope")  # an id no case can have: not found, nothing sent
    with pytest.raises(NotFound, match="no recording"):
        store.get_recording(trace_id("never"))
    store.put_recording(make_recording("lyon", city="Lyon"))
    with pytest.raises(Conflict, match="different input") as info:
        store.recapture(promoted.id, trace_id("lyon"))
    detail = info.value.detail  # type: ignore[attr-defined]
    assert detail["case_input"] == {"args": ["Paris"], "kwargs": {}}
    assert detail["trace_input"] == {"args": ["Lyon"], "kwargs": {}}
    broken = make_bundle(trace_id("broken"))
    broken["tools"] = {"t": [{"nothing": 1}]}
    with pytest.raises(InvalidCase, match="bundle") as invalid:
        store.put_recording(Recording.from_bundle(broken))
    assert isinstance(invalid.value, ValueError) and isinstance(invalid.value, StoreError)


def test_pages_of_recordings(store: HTTPStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_client, "MAX_PAGE", 3)
    base = 1_700_000_000_000_000_000
    for i in range(8):
        store.put_recording(make_recording(i, started_at=base + i))
    assert [r.started_at - base for r in store.list_recordings(limit=7)] == [7, 6, 5, 4, 3, 2, 1]
    assert [r.started_at - base for r in store.list_recordings(limit=4, offset=5)] == [2, 1, 0]
    assert [r.started_at - base for r in store.list_recordings(limit=100)] == list(range(7, -1, -1))
    got = store.list_recordings(limit=1)[0]
    assert got == store.get_recording(got.trace_id)  # whole recordings, bundles included


def test_wrong_base_path(live: ServerProcess) -> None:
    with pytest.raises(StoreError, match="is the URL that of a tracely server"):
        client(live.url + "/not-here", live.tokens.read).list_cases()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_server_down_is_a_clear_error() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    s = client(url, "t" * 20, retries=2)
    with pytest.raises(StoreError) as info:
        s.list_cases()
    msg = str(info.value)
    assert url in msg and "`tracely serve` is running" in msg and "tried 3 times" in msg
    assert "t" * 20 not in msg
    assert len(s._sleep) == 2  # type: ignore[arg-type]
    # A refused connection never reached a server, so even a promotion is tried again.
    s._sleep = Sleeps()
    with pytest.raises(StoreError, match="tried 3 times"):
        s.promote(trace_id(1), name="x")


# --- faults in front of the real server --------------------------------------------------------


class FaultProxy:
    """Forwards to the real server, except for the faults queued for the next requests."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self.upstream = (host, int(port))
        self.faults: collections.deque[tuple[Any, ...]] = collections.deque()
        self.seen: list[tuple[str, str, str]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy.faults.popleft() if proxy.faults else ("forward",)
                proxy.seen.append((self.command, self.path, fault[0]))
                kind = fault[0]
                if kind == "reset":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if kind == "status":
                    _, status, headers, payload = fault
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(payload)))
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if kind == "delay":
                    time.sleep(fault[1])
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=30)
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")
                }
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                conn.close()
                try:
                    self.send_response(answer.status)
                    for k, v in answer.getheaders():
                        if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(live: ServerProcess) -> Iterator[FaultProxy]:
    _reset(live)
    p = FaultProxy(live.url)
    yield p
    p.close()


UNAVAILABLE = (
    b'{"error": {"code": "unavailable", "message": "the store is unavailable; try again"}}'
)
BUSY = b'{"error": {"code": "rate_limited", "message": "too many requests"}}'


def test_idempotent_calls_are_retried(live: ServerProcess, proxy: FaultProxy) -> None:
    s = client(proxy.url, live.tokens.write, retries=4)
    s.put_recording(make_recording(1))
    proxy.faults.extend(
        [("status", 503, {"Retry-After": "2"}, UNAVAILABLE), ("reset",), ("status", 429, {}, BUSY)]
    )
    assert s.get_recording(trace_id(1)).trace_id == trace_id(1)
    assert [f for _, _, f in proxy.seen[-4:]] == ["status", "reset", "status", "forward"]
    waits = s._sleep
    assert waits[0] == 2.0 and len(waits) == 3  # type: ignore[index, arg-type]
    # A recapture and a recording may be repeated too: the server ignores the repeat.
    case = s.promote(trace_id(1), name="c")
    proxy.faults.extend([("status", 503, {}, UNAVAILABLE)])
    assert s.recapture(case.id, trace_id(1)) == case
    proxy.faults.extend([("reset",)])
    assert s.put_recording(make_recording(2)) is True


def test_promote_is_not_repeated(live: ServerProcess, proxy: FaultProxy) -> None:
    s = client(proxy.url, live.tokens.write, retries=4)
    s.put_recording(make_recording(1))
    before = len(proxy.seen)
    proxy.faults.extend([("status", 503, {"Retry-After": "1"}, UNAVAILABLE)])
    with pytest.raises(StoreError, match="unavailable"):
        s.promote(trace_id(1), name="once")
    assert [m for m, _, _ in proxy.seen[before:]] == ["POST"]
    proxy.faults.extend([("reset",)])
    with pytest.raises(StoreError, match="cannot reach"):
        s.promote(trace_id(1), name="once")
    assert s.list_cases() == []
    assert s.promote(trace_id(1), name="once").id == "once"


def test_retries_give_up_with_the_reason(live: ServerProcess, proxy: FaultProxy) -> None:
    s = client(proxy.url, live.tokens.write, retries=2)
    proxy.faults.extend([("status", 503, {}, UNAVAILABLE)] * 3)
    with pytest.raises(StoreError, match=r"unavailable \(tried 3 times\)"):
        s.list_cases()
    proxy.faults.extend([("status", 429, {"Retry-After": "600"}, BUSY)] * 3)
    with pytest.raises(StoreError, match="is busy"):
        s.list_cases()
    assert max(s._sleep) == _client.MAX_RETRY_WAIT  # a long Retry-After is capped
    date = formatdate(time.time() + 3, usegmt=True)
    assert 1.0 <= (_client._retry_after(date) or 0) <= 3.0
    assert _client._retry_after("soon") is None


def test_only_busy_and_unavailable_answers_are_retried(
    live: ServerProcess, proxy: FaultProxy
) -> None:
    s = client(proxy.url, live.tokens.write, retries=4)
    before = len(proxy.seen)
    too_large = b'{"error": {"code": "too_large", "message": "the body is too large"}}'
    proxy.faults.extend([("status", 413, {"Retry-After": "1"}, too_large)])
    with pytest.raises(StoreError, match="refused it as too large"):
        s.list_cases()
    assert len(proxy.seen) - before == 1 and s._sleep == []


def test_timeouts(live: ServerProcess, proxy: FaultProxy) -> None:
    s = client(proxy.url, live.tokens.write, timeout=0.3, retries=1)
    proxy.faults.extend([("delay", 1.5), ("delay", 1.5)])
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"no answer within 0.3s \(tried 2 times\)"):
        s.list_cases()
    assert time.monotonic() - started < 3


def test_redirects_are_not_followed(live: ServerProcess, proxy: FaultProxy) -> None:
    s = client(proxy.url, live.tokens.write)
    proxy.faults.extend([("status", 307, {"Location": "http://elsewhere.invalid/api/cases"}, b"")])
    with pytest.raises(StoreError, match=r"redirects to http://elsewhere\.invalid"):
        s.list_cases()


def test_answers_that_are_not_the_contract(live: ServerProcess, proxy: FaultProxy) -> None:
    s = client(proxy.url, live.tokens.write)
    proxy.faults.extend([("status", 200, {}, b"<html>hello</html>")])
    with pytest.raises(StoreError, match="not JSON; is it a tracely server"):
        s.list_cases()
    proxy.faults.extend([("status", 200, {}, b'{"cases": [{"id": "x"}]}')])
    with pytest.raises(StoreError, match="malformed case"):
        s.list_cases()
    proxy.faults.extend([("status", 500, {}, b"boom")])
    with pytest.raises(StoreError, match="HTTP 500: boom"):
        s.list_cases()


def test_real_rate_limit_is_honoured(tmp_path: Path) -> None:
    """The server's own 429 and Retry-After, waited out for real."""
    proc = ServerProcess(tmp_path / "limited", args=["--rate-limit", "1"])
    proc.start()
    try:
        s = HTTPStore(proc.url, token=proc.tokens.read, retries=5)
        waits = Sleeps(real=True)
        s._sleep = waits
        for _ in range(3):  # a burst of two, then the limit applies
            assert s.list_cases() == []
        assert waits and all(w >= 1.0 for w in waits)
    finally:
        assert proc.stop() == 0


# --- the command line against the server ---------------------------------------------------------


def test_cli_uses_the_server_and_never_prints_the_token(live: ServerProcess) -> None:
    _reset(live)
    seed = client(live.url, live.tokens.write)
    seed.put_recording(make_recording(1))
    seed.promote(trace_id(1), name="From the server")

    def tracely(*args: str, token: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TRACELY_STORE": live.url,
            "TRACELY_TOKEN": token,
        }
        return subprocess.run(
            [sys.executable, "-m", "tracely_sdk.cli", "--no-color", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    ok = tracely("cases", "list", token=live.tokens.read)
    assert ok.returncode == 0, ok.stderr
    assert "from-the-server" in ok.stdout
    listed = tracely("traces", "list", token=live.tokens.read)
    assert listed.returncode == 0 and trace_id(1) in listed.stdout
    wrong = "not-the-token-" + "z" * 24
    bad = tracely("cases", "list", token=wrong)
    assert bad.returncode == 2
    assert "does not accept the token in TRACELY_TOKEN" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert wrong not in bad.stderr + bad.stdout
    assert live.tokens.read not in ok.stderr + ok.stdout
