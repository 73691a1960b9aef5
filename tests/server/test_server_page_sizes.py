"""What a recording holds does not decide what its pages cost: names of megabytes are cut in
the lists, the calls of a trace are shown a page at a time, and each value of a call is cut
with a link to the whole of it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SpanExportResult

from server._support import ROOT, ServerProcess, Tokens, exporter, wait_for
from server.test_server_ui import cookie_of, sign_in

HUGE = 500_000
FORM = "application/x-www-form-urlencoded"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    made: list[ServerProcess] = []

    def make(*args: str) -> ServerProcess:
        proc = ServerProcess(tmp_path / "pages", args=["--rate-limit", "0", *args])
        made.append(proc)
        return proc.start()

    yield make
    for proc in made:
        if proc.alive():
            proc.stop()


class Reader:
    """A signed-in browser's GETs, by the read token's session."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.cookie = cookie_of(sign_in(server, server.tokens.write))

    def page(self, path: str) -> bytes:
        answer = self.server.get(path, token=None, headers={"Cookie": self.cookie})
        assert answer.status == 200, (path, answer.status, answer.body[-500:])
        return answer.body


def test_names_of_megabytes_are_cut_in_the_lists(
    served: Callable[..., ServerProcess], weather_run: Any
) -> None:
    server = served("--quiet-seconds", "0.2")
    spans, bundle = weather_run("Paris")
    agent = bundle["agent"]["name"]
    request = encode_spans(spans)
    for resource_spans in request.resource_spans:
        for kv in resource_spans.resource.attributes:
            if kv.key == "service.name":
                kv.value.string_value = "s" * HUGE
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                for kv in span.attributes:
                    if kv.value.string_value == agent:
                        kv.value.string_value = "a" * HUGE
    sent = server.request(
        "POST",
        "/v1/traces",
        request.SerializeToString(),
        token="ingest",
        content_type="application/x-protobuf",
    )
    assert sent.status == 200
    trace_id = bundle["trace_id"]
    recording = wait_for(lambda: server.recording(trace_id), what="the recording")
    assert recording["bundle"]["agent"]["name"] == "a" * HUGE  # kept whole
    case = server.request(
        "POST", "/api/cases", {"trace_id": trace_id, "name": "n" * HUGE}, token="write"
    )
    assert case.status == 201, case

    reader = Reader(server)
    for path in ("/ui/traces", "/ui/cases", f"/ui/traces/{trace_id}"):
        assert len(reader.page(path)) < 100_000, path
    listed = subprocess.run(
        [sys.executable, "-m", "tracely_sdk.cli", "traces", "list", "--store", server.url],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "TRACELY_TOKEN": server.tokens.read, "COLUMNS": "200"},
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert trace_id in listed.stdout and len(listed.stdout) < 2_000


CALLS = 200
# Bytes: CALLS_PAGE_SIZE calls, each of its values cut to CALL_SHOWN characters (each character
# of JSON is a few more of marked-up HTML); 2 MB before values were cut that short.
BOUND = 600_000


def big_agent(calls: int) -> None:
    """An agent of ``calls`` tool calls, each with arguments and a result of about 20 kB of
    JSON in many small tokens: a 7 MiB export, megabytes of page if shown at once."""
    import tracely_sdk as tracely

    rows = [[n, f"row-{n}", n % 3 == 0] for n in range(1000)]
    with tracely.agent("big-agent", input=calls) as run:
        for i in range(calls):
            args = {"query": i, "rows": rows}
            tracely.call_tool("lookup", lambda i=i: {"page": i, "rows": rows}, args=args)
        run.output = "done"


def exported_big_trace(server: ServerProcess, capture: Any) -> str:
    """The id of a trace of :data:`CALLS` big calls, run here and exported to ``server``."""
    before = len(capture.spans)
    big_agent(CALLS)
    spans = capture.spans[before:]
    send = exporter(server, token=server.tokens.ingest, timeout=60)
    try:
        assert send.export(spans) is SpanExportResult.SUCCESS
    finally:
        send.shutdown()
    return format(spans[0].context.trace_id, "032x")


def test_a_trace_of_hundreds_of_big_calls_is_shown_a_page_at_a_time(
    served: Callable[..., ServerProcess], capture: Any
) -> None:
    server = served("--quiet-seconds", "0.2")
    trace_id = exported_big_trace(server, capture)
    wait_for(lambda: server.recording(trace_id), what="the recording")
    reader = Reader(server)

    first = reader.page(f"/ui/traces/{trace_id}")
    assert len(first) < BOUND
    text = first.decode()
    assert f"Calls ({CALLS})" in text and "calls 1 to 20 of 200" in text
    assert f'href="/ui/traces/{trace_id}?calls=20#calls"' in text
    last = reader.page(f"/ui/traces/{trace_id}?calls=180").decode()
    assert len(last) < BOUND and "calls 181 to 200 of 200" in last and "later calls" not in last
    assert f'href="/ui/traces/{trace_id}?calls=160#calls"' in last
    beyond = server.get(
        f"/ui/traces/{trace_id}?calls=200", token=None, headers={"Cookie": reader.cookie}
    )
    assert beyond.status == 404

    promoted = server.request("POST", "/api/cases", {"trace_id": trace_id, "name": "big"})
    assert promoted.status == 201, promoted
    case_id = promoted.json()["id"]
    case_page = reader.page(f"/ui/cases/{case_id}?calls=40").decode()
    assert len(case_page) < BOUND and "calls 41 to 60 of 200" in case_page


def recorded(server: ServerProcess, trace_id: str) -> list[dict[str, Any]]:
    bundle = wait_for(lambda: server.recording(trace_id), what="the recording")["bundle"]
    return sorted(bundle["tools"]["lookup"], key=lambda e: e["seq"])


def test_each_value_of_a_call_is_cut_with_a_link_to_the_whole_of_it(
    served: Callable[..., ServerProcess], capture: Any, tmp_path: Path
) -> None:
    server = served("--quiet-seconds", "0.2")
    trace_id = exported_big_trace(server, capture)
    entries = recorded(server, trace_id)
    reader = Reader(server)

    page = reader.page(f"/ui/traces/{trace_id}?calls=20").decode()
    links = re.findall(rf'href="(/ui/traces/{trace_id}/calls/(\d+)/(input|output))"', page)
    assert {(n, part) for _, n, part in links} == {
        (str(n), part) for n in range(21, 41) for part in ("input", "output")
    }
    assert "more characters not shown" in page
    for n, part in ((21, "output"), (40, "input")):
        whole = reader.page(f"/ui/traces/{trace_id}/calls/{n}/{part}")
        entry = entries[n - 1]
        assert json.loads(whole) == entry["output" if part == "output" else "args"]

    def status(path: str, **headers: str) -> int:
        cookie = {"Cookie": reader.cookie}
        return server.get(path, token=None, headers={**cookie, **headers}).status

    base = f"/ui/traces/{trace_id}/calls"
    served_whole = server.get(f"{base}/1/output", token=None, headers={"Cookie": reader.cookie})
    assert served_whole.headers["content-type"] == "application/json"
    assert served_whole.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'none'" in served_whole.headers["content-security-policy"]
    assert status(f"{base}/201/output") == 404
    assert status(f"{base}/0/output") == 404
    assert status(f"{base}/1/error") == 404  # the call raised nothing
    assert status(f"{base}/1/secrets") == 404
    assert status(f"{base}/x/output") == 400
    assert status(f"/ui/traces/{'0' * 32}/calls/1/output") == 404
    unsigned = server.get(f"{base}/1/output", token=None)
    assert unsigned.status == 303 and unsigned.headers["location"].startswith("/ui/login")
    by_token = server.get(f"{base}/1/output", token="read")  # a page wants a session
    assert by_token.status == 303

    promoted = server.request("POST", "/api/cases", {"trace_id": trace_id, "name": "big"})
    assert promoted.status == 201, promoted
    case_id = promoted.json()["id"]
    case_page = reader.page(f"/ui/cases/{case_id}").decode()
    assert len(case_page) < BOUND
    assert f'href="/ui/cases/{case_id}/calls/1/output"' in case_page
    whole = reader.page(f"/ui/cases/{case_id}/calls/200/input")
    assert json.loads(whole) == entries[199]["args"]
    assert status(f"/ui/cases/{case_id}/calls/201/input") == 404

    server.stop()
    # Without tokens (``tracely ui``), a request for another host name is refused.
    local = ServerProcess(
        tmp_path / "local",
        tokens=Tokens(),
        env={"TRACELY_SERVER_TOKENS": ""},
        args=["--insecure-no-auth"],
        store=server.store_url,
    ).start()
    try:
        port = local.url.rsplit(":", 1)[1]
        path = f"{base}/1/output"
        assert local.get(path, token=None).status == 200
        foreign = local.get(path, token=None, headers={"Host": f"rebound.example:{port}"})
        assert foreign.status == 400
    finally:
        local.stop()


def test_pages_of_whole_recordings_are_made_a_few_at_a_time(
    tmp_path: Path, weather_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each decodes the whole recording: past WHOLE_READERS at once, a view waits its turn
    (here, 0.1 s) and then is told to come back, instead of the memory growing with them."""
    import urllib.error
    import urllib.request

    from tracely_sdk.server import ServerConfig, _ui, create_server
    from tracely_sdk.store import Recording, SQLiteStore

    _, bundle = weather_run("Paris")
    url = f"sqlite:///{tmp_path}/t.db"
    store = SQLiteStore(tmp_path / "t.db")
    store.put_recording(Recording.from_bundle(bundle))
    store.close()
    monkeypatch.setattr(_ui, "_WHOLE_WAIT", 0.1)
    config = ServerConfig.load({}, port=0, tokens="", store=url, insecure_no_auth=True)

    def status(server: Any, path: str) -> tuple[int, str | None]:
        try:
            with urllib.request.urlopen(server.url + path, timeout=10) as answer:
                return answer.status, None
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("Retry-After")

    trace = f"/ui/traces/{bundle['trace_id']}"
    with create_server(config).start() as server:
        assert status(server, trace) == (200, None)
        for _ in range(_ui.WHOLE_READERS):
            assert _ui._whole_readers.acquire(blocking=False)
        try:
            assert status(server, trace) == (503, "5")
            assert status(server, f"{trace}/calls/1/output") == (503, "5")
            assert status(server, "/ui/traces") == (200, None)  # a list reads no recording whole
            _ui._whole_readers.release()
            assert status(server, trace) == (200, None)
        finally:
            for _ in range(_ui.WHOLE_READERS - 1):
                _ui._whole_readers.release()
