"""What a recording holds does not decide what its pages cost: names of megabytes are cut in
the lists, and the calls of a trace are shown a page at a time."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SpanExportResult

from server._support import ROOT, ServerProcess, exporter, wait_for
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
BOUND = 3_000_000  # bytes: CALLS_PAGE_SIZE calls, each of its values cut to 20,000 characters


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


def test_a_trace_of_hundreds_of_big_calls_is_shown_a_page_at_a_time(
    served: Callable[..., ServerProcess], capture: Any
) -> None:
    server = served("--quiet-seconds", "0.2")
    before = len(capture.spans)
    big_agent(CALLS)
    spans = capture.spans[before:]
    send = exporter(server, token=server.tokens.ingest, timeout=60)
    try:
        assert send.export(spans) is SpanExportResult.SUCCESS
    finally:
        send.shutdown()
    trace_id = format(spans[0].context.trace_id, "032x")
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
