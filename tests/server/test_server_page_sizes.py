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

from server._support import ROOT, ServerProcess, wait_for
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
