"""Values stored through the server reach ``tracely``'s terminal output with their control
characters escaped: a name sent with an ingest token, a run saved with a write token."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import tracely_sdk as tracely
from server._support import ROOT, ServerProcess, wait_for

CLEAR = "\x1b[2J\x1b[H"
LINK = "\x1b]8;;https://attacker.example/\x1b\\click me\x1b]8;;\x1b\\"
BELL_TITLE = "\x1b]0;owned\x07"
C1_CSI = "\x9b2J"


def tracely_cli(server: ServerProcess, *argv: str) -> subprocess.CompletedProcess[str]:
    """The ``tracely`` command against the server, as a person runs it (output to a pipe)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TRACELY_STORE": server.url,
        "TRACELY_TOKEN": server.tokens.write,
    }
    done = subprocess.run(
        [sys.executable, "-m", "tracely_sdk.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done


def assert_inert(text: str) -> None:
    for control in ("\x1b", "\x07", "\x9b"):
        assert control not in text, f"{control!r} reached the terminal: {text!r}"


def test_names_sent_with_an_ingest_token_are_escaped(server: ServerProcess, capture: Any) -> None:
    with tracely.agent(f"agent{CLEAR}{LINK}", input=f"in{BELL_TITLE}"):
        tracely.call_tool(f"tool{C1_CSI}", lambda: f"out{CLEAR}", args={"q": LINK})
    spans = capture.spans[-2:]
    request = encode_spans(spans)
    for attribute in request.resource_spans[0].resource.attributes:
        if attribute.key == "service.name":
            attribute.value.string_value = f"svc{CLEAR}"
    answer = server.request(
        "POST",
        "/v1/traces",
        request.SerializeToString(),
        token="ingest",
        content_type="application/x-protobuf",
    )
    assert answer.status == 200, answer
    trace_id = format(spans[0].context.trace_id, "032x")
    wait_for(lambda: server.recording(trace_id), what="the recording")

    listed = tracely_cli(server, "traces", "list").stdout
    assert_inert(listed)
    assert "agent\\x1b[2J\\x1b[H\\x1b]8;;https://attacker.example/" in listed
    shown = tracely_cli(server, "traces", "show", trace_id).stdout
    assert_inert(shown)
    assert "svc\\x1b[2J" in shown and "tool\\x9b2J" in shown
    # JSON keeps every value, escaped as JSON.
    as_json = tracely_cli(server, "traces", "show", trace_id, "--json").stdout
    assert_inert(as_json)
    assert json.loads(as_json)["service"] == f"svc{CLEAR}"


def test_a_run_saved_with_a_write_token_is_escaped(server: ServerProcess) -> None:
    from tests.sdk.store._helpers import make_run
    from tracely_sdk.store._http import HTTPStore

    evil = make_run(27, name=f"case{LINK}", reasons=[f"reason{CLEAR}"])
    evil = dataclasses.replace(
        evil, id="00000000000c0de1", tracely_version=f"1.0{C1_CSI}", source=f"src{BELL_TITLE}"
    )
    with HTTPStore(server.url, token=server.tokens.write) as store:
        store.save_run(evil)
    shown = tracely_cli(server, "runs", "show", evil.id).stdout
    assert_inert(shown)
    assert "case\\x1b]8;;https://attacker.example/" in shown
    assert "reason\\x1b[2J" in shown and "1.0\\x9b2J" in shown and "src\\x1b]0;owned\\x07" in shown
    assert_inert(tracely_cli(server, "runs", "list").stdout)


def test_the_server_log_escapes_what_a_client_sent(make_server: Any) -> None:
    proc = make_server("--verbose", name="verbose")
    assert proc.get("/%1b%5b2J%1b%5d0;owned%07", token="read").status == 404
    assert proc.stop() == 0
    logs = proc.logs()
    assert "/\\x1b[2J\\x1b]0;owned\\x07" in logs
    assert_inert(logs)
