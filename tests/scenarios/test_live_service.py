"""End to end: ``tracely scenarios`` against a live multi-turn agent service.

The service (``examples.weather_service``) runs in its own process and exports its spans over
OTLP to a ``tracely serve`` process; the CLI sends the example scenarios' turns to the service
and reads each turn's trace back from the server.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from server._support import ROOT, ServerProcess, Tokens

from tracely_sdk.cli import main

EXAMPLES = ROOT / "examples" / "scenarios"
LISTENING = re.compile(r"listening on (http://\S+)")
FAST_ARGS = ["--quiet-seconds", "0.2", "--rate-limit", "0"]


class Service:
    """A service process on a free port; its spans go to ``collector`` over OTLP/HTTP."""

    def __init__(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        directory: Path,
        program: str = sys.executable,
    ) -> None:
        self.log = directory / "service.log"
        with self.log.open("wb") as err:
            self.process = subprocess.Popen(
                [program, *argv, "--port", "0"],
                stdout=subprocess.PIPE,
                stderr=err,
                env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                cwd=directory,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        match = LISTENING.search(line)
        assert match, f"the service did not start: {line!r} {self.log.read_text()}"
        self.url = match.group(1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)


def otlp_env(server: ServerProcess) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": server.url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{server.tokens.ingest}",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "TRACELY_RECORD": "false",
    }


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("collector"), tokens=Tokens(), args=FAST_ARGS)
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def start_service(collector: ServerProcess, tmp_path: Path) -> Iterator[Callable[..., Service]]:
    services: list[Service] = []

    def start(
        *argv: str, env: dict[str, str] | None = None, program: str = sys.executable
    ) -> Service:
        service = Service(argv, {**otlp_env(collector), **(env or {})}, tmp_path, program)
        services.append(service)
        return service

    yield start
    for service in services:
        service.stop()


@pytest.fixture
def cli(
    collector: ServerProcess,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> Callable[..., tuple[int, str, dict[str, Any]]]:
    """``tracely …`` in-process, reading traces from the collector; returns status, output, report."""
    monkeypatch.setenv("TRACELY_STORE", collector.url)
    monkeypatch.setenv("TRACELY_TOKEN", collector.tokens.read)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)

    def run(*argv: str) -> tuple[int, str, dict[str, Any]]:
        report = tmp_path / "report.json"
        report.unlink(missing_ok=True)
        extra = ["--json", str(report)] if argv[:2] == ("scenarios", "run") else []
        status = main(["--no-color", *argv, *extra])
        captured = capsys.readouterr()
        data = json.loads(report.read_text()) if report.exists() else {}
        return status, captured.out + captured.err, data

    return run


def verdicts(report: dict[str, Any]) -> dict[str, str]:
    return {c["case_id"]: c["verdict"] for c in report["cases"]}


def turns(report: dict[str, Any], case_id: str) -> list[dict[str, Any]]:
    case = next(c for c in report["cases"] if c["case_id"] == case_id)
    return case["scenario"]["attempts"][-1]["turns"]


def test_the_example_scenarios_pass_on_replies_and_traces(
    start_service: Callable[..., Service], cli: Callable[..., tuple[int, str, dict[str, Any]]]
) -> None:
    service = start_service("-m", "examples.weather_service")
    status, out, report = cli("scenarios", "run", str(EXAMPLES), "--target", service.url, "-j", "2")
    assert status == 0, out
    assert verdicts(report) == {
        "oslo": "PASS",
        "paris-follow-up": "PASS",
        "service-conversation": "PASS",
        "unknown-city": "PASS",
    }
    paris = turns(report, "paris-follow-up")
    assert [t["trace_checks"] for t in paris] == ["passed", "passed"]
    assert paris[0]["calls"]["tools"] == [
        {"name": "get_weather", "args": {"city": "Paris"}, "error": False, "by": "tracely"}
    ]
    assert {c["model"] for c in paris[0]["calls"]["llm"]} == {"local-weather-model"}
    assert "4 cases: 4 passed" in out


def test_a_regression_fails_a_content_check_and_a_trace_check(
    start_service: Callable[..., Service],
    cli: Callable[..., tuple[int, str, dict[str, Any]]],
    tmp_path: Path,
) -> None:
    broken = start_service("-m", "examples.weather_service", "--broken")
    page = tmp_path / "scenarios.html"
    status, out, report = cli(
        "scenarios",
        "run",
        str(EXAMPLES / "paris-follow-up.yaml"),
        "--target",
        broken.url,
        "--html",
        str(page),
    )
    assert status == 1
    case = report["cases"][0]
    assert case["verdict"] == "FAIL"
    reasons = case["reasons"]
    assert any(r.startswith("turn 1: regex") and "°C" in r for r in reasons), reasons
    assert (
        'turn 1: called get_weather with {"city": "Paris"}: expected a call of tool '
        "get_weather; got tools called: none"
    ) in reasons
    assert "FAIL" in out and "expected a call of tool get_weather" in out
    html = page.read_text()
    # The report shows every turn: the message, the reply and the check that failed, escaped.
    assert "Turn 1" in html and "Turn 2" in html
    assert "What&#x27;s the weather in Paris?" in html or "What&#39;s the weather in Paris?" in html
    assert "expected a call of tool get_weather" in html


def test_a_service_that_is_down_is_errored(
    cli: Callable[..., tuple[int, str, dict[str, Any]]],
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    status, _, report = cli("scenarios", "run", str(EXAMPLES / "oslo.yaml"), "--target", closed)
    assert status == 1
    assert verdicts(report) == {"oslo": "ERRORED"}
    assert "cannot reach" in report["cases"][0]["reasons"][0]


def test_an_empty_selection_is_a_usage_error(
    cli: Callable[..., tuple[int, str, dict[str, Any]]],
) -> None:
    status, out, _ = cli("scenarios", "run", str(EXAMPLES), "--target", "http://x", "--tag", "smok")
    assert status == 2
    assert "no scenarios to run: 4 scenario(s) in" in out and "none tagged smok" in out
    status, out, _ = cli(
        "scenarios", "run", str(EXAMPLES), "--target", "http://x", "--tag", "smok", "--allow-empty"
    )
    assert status == 0


def test_a_scenario_written_from_recorded_traces_runs_green(
    start_service: Callable[..., Service],
    cli: Callable[..., tuple[int, str, dict[str, Any]]],
    tmp_path: Path,
) -> None:
    service = start_service("-m", "examples.weather_service")
    status, out, report = cli(
        "scenarios", "run", str(EXAMPLES / "paris-follow-up.yaml"), "--target", service.url
    )
    assert status == 0, out
    trace_ids = [t["trace_id"] for t in turns(report, "paris-follow-up")]
    written = tmp_path / "from-trace.yaml"
    status, out, _ = cli(
        "scenarios",
        "new",
        *[a for t in trace_ids for a in ("--from-trace", t)],
        "--name",
        "paris from production",
        "-o",
        str(written),
    )
    assert status == 0, out
    scenario = yaml.safe_load(written.read_text())
    # The user's own messages, from the service's invoke_agent span, not the agent's input.
    assert [t["user"] for t in scenario["turns"]] == [
        "What's the weather in Paris?",
        "Is it still like that there?",
    ]
    assert scenario["turns"][0]["trace"][0] == {"called": "get_weather", "args": {"city": "Paris"}}
    status, out, report = cli("scenarios", "run", str(written), "--target", service.url)
    assert status == 0, out
    assert verdicts(report) == {"paris-from-production": "PASS"}


def test_trace_checks_hold_for_a_service_tracely_never_touched(
    start_service: Callable[..., Service],
    cli: Callable[..., tuple[int, str, dict[str, Any]]],
    tmp_path: Path,
) -> None:
    """Any language: spans that follow the GenAI conventions, from another instrumentor."""
    from examples.llm_server import serve

    scenario = {
        "name": "otel service",
        "target": {"shape": "message"},
        "turns": [
            {
                "user": "hello there",
                "expect": [{"contains": "You said: hello there"}],
                "trace": [{"model": "gpt-4o-mini"}, {"max_llm_calls": 1}, {"no_errors": True}],
            },
            {
                "user": "and again",
                "expect": [{"contains": "and again"}],
                "trace": [{"max_llm_calls": 0}],
            },
        ],
    }
    path = tmp_path / "otel.json"
    path.write_text(json.dumps(scenario))
    with serve() as (llm, _):
        service = start_service(
            str(ROOT / "tests" / "scenarios" / "_otel_service.py"),
            "--llm",
            llm.openai_base_url,
            env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"},
        )
        status, out, report = cli("scenarios", "run", str(path), "--target", service.url)
    assert status == 1, out
    first, second = turns(report, "otel")  # a file's id is its name without the suffix
    assert first["trace_checks"] == "passed"
    (call,) = first["calls"]["llm"]
    assert (call["model"], call["error"], call["by"]) == ("gpt-4o-mini", False, "otel-genai")
    assert second["trace_checks"] == "failed"  # one LLM call, where the check allows none
    assert report["cases"][0]["reasons"] == [
        "turn 2: max_llm_calls 0: expected at most 0 LLM call(s); got 1: gpt-4o-mini"
    ]


def test_a_scenario_run_is_kept_in_the_store_like_a_replay_run(
    start_service: Callable[..., Service],
    cli: Callable[..., tuple[int, str, dict[str, Any]]],
    collector: ServerProcess,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service = start_service("-m", "examples.weather_service")
    monkeypatch.setenv("TRACELY_TOKEN", collector.tokens.write)  # keeping a run writes
    status, out, _ = cli("scenarios", "run", str(EXAMPLES / "oslo.yaml"), "--target", service.url)
    assert status == 0, out
    match = re.search(r"run ([0-9a-f]{16}) kept in", out)
    assert match, out
    status, out, _ = cli("runs", "show", match.group(1), "--json")
    assert status == 0, out
    run = json.loads(out)
    assert run["mode"] == "scenarios"
    assert [(c["case_id"], c["verdict"]) for c in run["cases"]] == [("oslo", "PASS")]


def test_the_follow_up_needs_the_id_the_service_issued(
    start_service: Callable[..., Service],
    cli: Callable[..., tuple[int, str, dict[str, Any]]],
    tmp_path: Path,
) -> None:
    """The example's second turn, sent without the saved id, starts a conversation of its own."""
    import yaml

    service = start_service("-m", "examples.weather_service")
    data = yaml.safe_load((EXAMPLES / "service-conversation.yaml").read_text())
    del data["turns"][0]["save"], data["turns"][1]["body"]
    forgetful = tmp_path / "forgetful.yaml"
    forgetful.write_text(yaml.safe_dump(data))
    status, out, report = cli(
        "scenarios", "run", str(forgetful), "--target", service.url, "--no-trace-checks"
    )
    assert status == 1, out
    assert report["cases"][0]["reasons"][0].startswith("turn 2: regex")
    assert turns(report, "forgetful")[1]["reply"].startswith("Which city?")
