"""End to end: trace checks on services whose tracing tracely did not write.

Two support chat services with the same behaviour, each exporting over OTLP to a ``tracely
serve`` process: a Node.js one traced only by the official OpenTelemetry JS SDK (GenAI
conventions: ``invoke_agent``, ``chat MODEL``, ``execute_tool NAME``), and a Python one traced
only by OpenInference (its OpenAI instrumentor, and its tracer's TOOL spans). Every check kind
passes where it should and fails where it should, on either, and a check the trace cannot
decide is never a pass.

The JS service's packages are installed once from its committed package.json (``npm
install``); without npm's registry its tests are skipped, saying so.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from server._support import ROOT

from scenarios.test_live_service import Service, cli, collector, start_service, turns, verdicts
from tracely_sdk.store import open_store

__all__ = ["cli", "collector", "start_service"]  # fixtures used here

JS_SERVICE = ROOT / "tests" / "scenarios" / "js_service"
OI_SERVICE = ROOT / "tests" / "scenarios" / "_openinference_service.py"
_UNREACHABLE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "network")


@pytest.fixture(scope="session")
def node() -> str:
    """Node.js with the JS service's packages installed (``npm install``, once)."""
    program, npm = shutil.which("node"), shutil.which("npm")
    if program is None or npm is None:
        pytest.skip("Node.js and npm are needed for the JS service (node, npm not on PATH)")
    # Test workers share the directory: one installs, the others wait for it.
    with (JS_SERVICE / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (JS_SERVICE / "node_modules" / "@opentelemetry" / "sdk-trace-base").is_dir():
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--no-save"],
                cwd=JS_SERVICE,
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode != 0:
                output = (done.stdout + done.stderr).strip()
                if any(word in output for word in _UNREACHABLE):
                    pytest.skip(
                        f"npm cannot reach its registry to install the JS service: {output[-300:]}"
                    )
                pytest.fail(f"npm install failed in {JS_SERVICE}:\n{output}")
    return program


@pytest.fixture
def llm() -> Iterator[str]:
    from examples.llm_server import serve

    with serve() as (server, _):
        yield server.openai_base_url


@pytest.fixture(params=["js-otel-genai", "python-openinference"])
def service(
    request: pytest.FixtureRequest, start_service: Callable[..., Service], llm: str
) -> Iterator[tuple[Service, str]]:
    """Each service, with the span format it is traced in."""
    if request.param == "js-otel-genai":
        program = request.getfixturevalue("node")
        yield (
            start_service(str(JS_SERVICE / "service.js"), "--llm", llm, program=program),
            ("otel-genai"),
        )
    else:
        yield start_service(str(OI_SERVICE), "--llm", llm), "openinference"


Run = Callable[..., tuple[int, str, dict[str, Any]]]


def run(
    cli: Run, tmp_path: Path, target: str, scenario: dict[str, Any], *options: str
) -> dict[str, Any]:
    path = tmp_path / f"{scenario['id']}.json"
    path.write_text(json.dumps({"target": {"shape": "message"}, **scenario}))
    status, out, report = cli("scenarios", "run", str(path), "--target", target, *options)
    report["status"], report["out"] = status, out
    return report


def reasons(report: dict[str, Any]) -> list[str]:
    return list(report["cases"][0]["reasons"])


ORDER_TURN = {
    "user": "Where is my order 42?",
    "expect": [{"contains": "order 42 is shipped"}],
    "trace": [
        {"called": "lookup_order", "args": {"order_id": "42"}},
        {"called": "lookup_order", "result": {"status": "shipped"}, "times": 1},
        {"not_called": "issue_refund"},
        {"max_tool_calls": 1},
        {"max_llm_calls": 1},
        {"model": "gpt-4o-mini"},
        {"no_errors": True},
        {"trajectory": ["lookup_order"], "exact": True},
        {"llm_input": ["Where is my order 42?", "order 42 is shipped"]},
        {"max_tokens": 200},
    ],
}
CHAT_TURN = {
    "user": "thanks!",
    "expect": [{"contains": "Which order"}],
    "trace": [{"max_llm_calls": 0}, {"not_called": "issue_refund"}, {"no_errors": True}],
}


def test_every_check_passes_on_a_service_that_behaves(
    service: tuple[Service, str], cli: Run, tmp_path: Path
) -> None:
    target, span_format = service
    report = run(
        cli,
        tmp_path,
        target.url,
        {
            "id": "order-status",
            "span_format": span_format,
            "max_tokens": 400,
            "turns": [ORDER_TURN, CHAT_TURN],
        },
        "--html",
        str(tmp_path / "report.html"),
    )
    assert report["status"] == 0, report["out"]
    first, second = turns(report, "order-status")
    assert first["trace_checks"] == second["trace_checks"] == "passed"
    assert first["calls"]["tools"] == [
        {"name": "lookup_order", "args": {"order_id": "42"}, "error": False, "by": span_format}
    ]
    assert first["calls"]["held"]["tool"] == {span_format: 1}
    assert first["calls"]["held"]["llm"] == {span_format: 1}
    assert second["calls"]["held"]["spans"] >= 1  # the turn's trace arrived, with no call in it
    page = (tmp_path / "report.html").read_text()
    assert f"tool: {span_format} 1; llm: {span_format} 1" in page  # who made the turn's calls


def test_the_false_passes_of_a_refund_now_fail(
    service: tuple[Service, str], cli: Run, tmp_path: Path
) -> None:
    target, _ = service
    refund = {
        "user": "Please refund order 42",
        "trace": [{"not_called": "issue_refund"}, {"max_tool_calls": 0}],
    }
    report = run(cli, tmp_path, target.url, {"id": "no-refunds", "turns": [refund]})
    assert report["status"] == 1
    assert verdicts(report) == {"no-refunds": "FAIL"}
    assert reasons(report) == [
        "turn 1: not_called 'issue_refund': expected no call of tool issue_refund; got 1 call(s)",
        "turn 1: max_tool_calls 0: expected at most 0 tool call(s); got 2: lookup_order, "
        "issue_refund",
    ]


def test_a_tool_span_with_status_error_fails_no_errors(
    service: tuple[Service, str], cli: Run, tmp_path: Path
) -> None:
    target, _ = service
    refund = {
        "user": "Please refund order 13",
        "trace": [{"called": "issue_refund", "args": {"order_id": "13"}}, {"no_errors": True}],
    }
    report = run(cli, tmp_path, target.url, {"id": "refund-fails", "turns": [refund]})
    assert verdicts(report) == {"refund-fails": "FAIL"}
    (reason,) = reasons(report)
    assert reason.startswith("turn 1: no call errored: expected no call errored; got errored: ")
    assert "tools:issue_refund" in reason


def test_every_check_fails_where_it_should(
    service: tuple[Service, str], cli: Run, tmp_path: Path
) -> None:
    target, _ = service
    wrong = {
        "user": "Please refund order 42",
        "trace": [
            {"called": "lookup_order", "args": {"order_id": "43"}},
            {"called": "lookup_order", "result": {"status": "lost"}},
            {"called": "lookup_order", "times": 2},
            {"called": "cancel_order"},
            {"max_llm_calls": 0},
            {"model": "gpt-5"},
            {"trajectory": ["issue_refund", "lookup_order"]},
            {"trajectory": ["lookup_order"], "exact": True},
            {"llm_input": ["Paris"]},
            {"max_tokens": 1},
        ],
    }
    report = run(cli, tmp_path, target.url, {"id": "all-wrong", "turns": [wrong]})
    assert verdicts(report) == {"all-wrong": "FAIL"}
    got = reasons(report)
    expected_starts = [
        'turn 1: called lookup_order with {"order_id": "43"}: expected lookup_order called with',
        'turn 1: called lookup_order returning {"status": "lost"}: expected lookup_order returning',
        "turn 1: called lookup_order 2 time(s): expected exactly 2 such call(s) of lookup_order; "
        "got 1",
        "turn 1: called cancel_order: expected a call of tool cancel_order; got tools called: "
        "lookup_order, issue_refund",
        "turn 1: max_llm_calls 0: expected at most 0 LLM call(s); got 1: gpt-4o-mini",
        "turn 1: model 'gpt-5': expected an LLM call to gpt-5; got models used: gpt-4o-mini",
        "turn 1: trajectory issue_refund → lookup_order: expected tools called in this order",
        "turn 1: trajectory exactly lookup_order: expected tools called exactly: lookup_order; "
        "got lookup_order → issue_refund",
        "turn 1: llm_input 'Paris': expected an LLM input holding 'Paris'",
        "turn 1: max_tokens 1: expected at most 1 tokens; got ",
    ]
    assert len(got) == len(expected_starts), got
    for line, start in zip(got, expected_starts, strict=True):
        assert line.startswith(start), (line, start)


def test_a_check_the_trace_cannot_decide_is_incomplete_unless_the_scenario_opts_in(
    service: tuple[Service, str], cli: Run, tmp_path: Path
) -> None:
    """A turn with no model call and no tool: nothing says whether none was made."""
    target, _ = service
    scenario = {"id": "just-chat", "turns": [CHAT_TURN]}
    report = run(cli, tmp_path, target.url, scenario)
    assert report["status"] == 1
    assert verdicts(report) == {"just-chat": "INCOMPLETE"}
    (turn,) = turns(report, "just-chat")
    assert turn["trace_checks"].startswith("not evaluated: max_llm_calls 0: the trace's ")
    assert "hold no span read as an LLM call" in turn["trace_checks"]
    assert "hold no span read as a tool call" in turn["trace_checks"]
    assert "no span of trace" not in turn["trace_checks"]  # the trace arrived
    assert turn["calls"]["held"]["spans"] >= 1

    report = run(cli, tmp_path, target.url, {**scenario, "assume_complete": True})
    assert verdicts(report) == {"just-chat": "PASS"}, report["out"]


def test_a_scenario_token_budget_counts_every_turn(
    service: tuple[Service, str], cli: Run, tmp_path: Path
) -> None:
    target, span_format = service
    order = {"user": "Where is my order 42?", "trace": [{"called": "lookup_order"}]}
    again = {"user": "And order 7?", "trace": [{"called": "lookup_order"}]}
    scenario = {"id": "budget", "span_format": span_format, "turns": [order, again]}
    report = run(cli, tmp_path, target.url, {**scenario, "max_tokens": 10_000})
    assert verdicts(report) == {"budget": "PASS"}, report["out"]
    report = run(cli, tmp_path, target.url, {**scenario, "max_tokens": 20})
    assert verdicts(report) == {"budget": "FAIL"}
    (reason,) = reasons(report)
    assert reason.startswith("turn 2: scenario max_tokens 20: expected at most 20 tokens; got ")
    assert reason.endswith("over 2 LLM call(s)")


def test_a_scenario_is_written_from_a_recorded_conversation(
    service: tuple[Service, str], cli: Run, tmp_path: Path
) -> None:
    target, span_format = service
    asked = ["Where is my order 42?", "And order 7?"]
    report = run(
        cli,
        tmp_path,
        target.url,
        {
            "id": "two-orders",
            "turns": [{"user": u, "trace": [{"called": "lookup_order"}]} for u in asked],
        },
    )
    assert verdicts(report) == {"two-orders": "PASS"}, report["out"]
    first = turns(report, "two-orders")[0]["trace_id"]
    with open_store(create=False) as store:
        conversation = store.get_recording(first).bundle["trace"]["conversation"]
    written = tmp_path / "conversation.yaml"
    status, out, _ = cli(
        "scenarios", "new", "--conversation", conversation, "--name", "orders", "-o", str(written)
    )
    assert status == 0, out
    scenario = yaml.safe_load(written.read_text())
    assert [t["user"] for t in scenario["turns"]] == asked  # the user's words, every turn
    assert scenario["span_format"] == [span_format]
    assert scenario["turns"][1]["trace"] == [
        {"called": "lookup_order", "args": {"order_id": "7"}},
        {"max_llm_calls": 1},
        {"no_errors": True},
    ]
    status, out, report = cli("scenarios", "run", str(written), "--target", target.url)
    assert status == 0, out
    assert verdicts(report) == {"orders": "PASS"}


def test_a_turn_with_no_model_call_gives_its_user_message_where_the_trace_holds_it(
    service: tuple[Service, str], cli: Run, tmp_path: Path
) -> None:
    target, span_format = service
    report = run(
        cli, tmp_path, target.url, {"id": "chat", "assume_complete": True, "turns": [CHAT_TURN]}
    )
    assert verdicts(report) == {"chat": "PASS"}, report["out"]
    (turn,) = turns(report, "chat")
    written = tmp_path / "chat.yaml"
    status, out, _ = cli("scenarios", "new", "--from-trace", turn["trace_id"], "-o", str(written))
    if span_format == "otel-genai":  # the invoke_agent span holds the user's message
        assert status == 0, out
        assert yaml.safe_load(written.read_text())["turns"][0]["user"] == "thanks!"
    else:  # only the request's span: the message is nowhere in the trace, and that is said
        assert status == 2
        assert "no user message in it" in out and "gen_ai.input.messages" in out


def test_a_trace_that_never_arrives_is_incomplete_saying_what_was_not_received(
    start_service: Callable[..., Service],
    llm: str,
    cli: Run,
    tmp_path: Path,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        nowhere = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sock.getsockname()[1]}"}
    lost = start_service(str(OI_SERVICE), "--llm", llm, env=nowhere)
    path = tmp_path / "lost.json"
    path.write_text(
        json.dumps(
            {
                "target": {"shape": "message"},
                "turns": [{"user": "Where is my order 42?", "trace": [{"no_errors": True}]}],
            }
        )
    )
    status, _, report = cli(
        "scenarios", "run", str(path), "--target", lost.url, "--trace-timeout", "1"
    )
    assert status == 1
    assert verdicts(report) == {"lost": "INCOMPLETE"}
    (reason,) = reasons(report)
    assert reason.startswith("turn 1: trace checks not evaluated: no span of trace ")
    assert "within 1 s, though the service answered" in reason
