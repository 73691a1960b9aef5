"""``tracely replay --faults``: robustness runs of the reference agent's cases, end to end.

The cases are recorded in this process; ``tracely replay`` runs as a real subprocess, as CI
runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from examples import weather_agent

from ._helpers import CLI, WEATHER, record

ROOT = Path(__file__).resolve().parents[3]


def promote(capture: Any, cli: CLI, fn: Any, city: str, name: str, entrypoint: str) -> None:
    trace = record(capture, cli, fn, city)
    status, _, err = cli("cases", "promote", trace, "--name", name, "--entrypoint", entrypoint)
    assert status == 0, err


@pytest.fixture
def suite(capture: Any, cli: CLI) -> CLI:
    """Three cases: run (does not handle a tool failure), run_handles, and a recorded failure."""
    promote(capture, cli, weather_agent.run, "Paris", "Paris", f"{WEATHER}:run")
    promote(capture, cli, weather_agent.run_handles, "Oslo", "Oslo", f"{WEATHER}:run_handles")
    promote(
        capture, cli, weather_agent.run_handles, "Atlantis", "Atlantis", f"{WEATHER}:run_handles"
    )
    return cli


def tracely(
    cli: CLI, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TRACELY_", "OTEL_")) and k not in ("CI", "GITHUB_STEP_SUMMARY")
    }
    environ.update(PYTHONPATH=str(ROOT), OTEL_TRACES_EXPORTER="none", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "tracely_sdk.cli", *argv, "--store", cli.url],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def by_cell(case: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(row["call"], row["fault"]): row for row in case["faults"]}


def test_a_tool_failure_the_agent_handles_is_handled_and_one_it_does_not_crashes(
    suite: CLI, tmp_path: Path
) -> None:
    done = tracely(
        suite,
        "replay",
        "--faults",
        "--json",
        str(tmp_path / "r.json"),
        "--junit",
        str(tmp_path / "j.xml"),
        "--html",
        str(tmp_path / "r.html"),
    )
    assert done.returncode == 0, done.stderr  # by default derived runs do not fail the job
    report = json.loads((tmp_path / "r.json").read_text())
    cases = {c["case_id"]: c for c in report["cases"]}
    assert [c["verdict"] for c in cases.values()] == ["PASS", "PASS", "PASS"]

    paris = by_cell(cases["paris"])
    crashed = paris[("tools:get_weather #1", "error")]
    assert crashed["verdict"] == "CRASHED"
    # get_weather failed in another recording (Atlantis): the fault is that failure.
    assert crashed["served"] == {
        "error": {
            "type": "WeatherServiceError",
            "message": "no weather data for 'Atlantis'",
            "repr": "WeatherServiceError(\"no weather data for 'Atlantis'\")",
        }
    }
    assert crashed["reasons"] == [
        "the agent raised WeatherServiceError: no weather data for 'Atlantis'"
    ]
    assert crashed["next"] == "raised WeatherServiceError: no weather data for 'Atlantis'"
    assert "weather_agent.py" in crashed["traceback"]
    timeout = paris[("tools:get_weather #1", "timeout")]
    assert timeout["verdict"] == "CRASHED"
    assert timeout["error"] == {
        "type": "TimeoutError",
        "message": "tools:get_weather timed out (a fault tracely injected)",
    }
    empty = paris[("tools:get_weather #1", "empty")]
    assert empty["served"] == {"output": {}}
    assert empty["verdict"] == "HANDLED" and empty["next"] == "called llm:local-weather-model"
    # The LLM calls are faulted by no tool kind: only tool calls are derived.
    assert {call for call, _ in paris} == {"tools:get_weather #1"}

    oslo = by_cell(cases["oslo"])
    assert {k: r["verdict"] for k, r in oslo.items()} == {
        ("tools:get_weather #1", "error"): "HANDLED",
        ("tools:get_weather #1", "timeout"): "HANDLED",
        ("tools:get_weather #1", "empty"): "HANDLED",
    }
    handled = oslo[("tools:get_weather #1", "error")]
    assert handled["error"] is None and handled["output"] == "It's 3°C and snowing in Oslo."
    assert handled["calls"] == 3 and handled["max_calls"] == 6

    atlantis = by_cell(cases["atlantis"])
    assert atlantis[("tools:get_weather #1", "error")]["verdict"] == "SKIPPED"
    assert atlantis[("tools:get_weather #1", "timeout")]["verdict"] == "HANDLED"
    assert atlantis[("tools:get_weather #1", "empty")]["verdict"] == "SKIPPED"

    # The terminal shows a table per case: call / fault → verdict and what followed.
    out = done.stdout
    paris_table = out.split("robustness of paris\n")[1].split("\n\n")[0].splitlines()
    assert paris_table[0].split() == ["CALL", "ERROR", "TIMEOUT", "EMPTY"]
    assert paris_table[1].startswith("tools:get_weather #1  CRASHED: raised WeatherServiceError")
    assert "HANDLED: called llm:local-weather-model" in paris_table[1]
    assert "7 derived runs: 2 crashed, 5 handled" in out

    # JUnit: a test case per derived run, with its verdict; not gated, so no failure.
    crashed_tc = junit_cases(tmp_path / "j.xml")["paris [tools:get_weather #1 / error]"]
    assert crashed_tc.find("failure") is None
    assert junit_props(crashed_tc)["tracely.fault.verdict"] == "CRASHED"
    html = (tmp_path / "r.html").read_text()
    assert "Robustness" in html and "CRASHED" in html


def junit_cases(path: Path) -> dict[str | None, ET.Element]:
    suite_xml = ET.parse(path).getroot().find("testsuite")
    assert suite_xml is not None
    return {tc.get("name"): tc for tc in suite_xml.iter("testcase")}


def junit_props(testcase: ET.Element) -> dict[str | None, str | None]:
    return {p.get("name"): p.get("value") for p in testcase.iter("property")}


def test_derived_runs_gate_the_job_only_as_the_project_says(suite: CLI, tmp_path: Path) -> None:
    gated = tracely(
        suite,
        "replay",
        "--faults",
        "error",
        "--junit",
        str(tmp_path / "j.xml"),
        env={"TRACELY_FAULTS": '{"fail_on": ["error:CRASHED"]}', "CI": "true"},
    )
    assert gated.returncode == 1
    # In CI only the tables with a derived run that was not handled are listed.
    assert "robustness of paris" in gated.stdout and "robustness of oslo" not in gated.stdout
    assert "2 derived runs: 1 crashed, 1 handled" in gated.stdout
    assert "1 derived run(s) fail the gate" in gated.stderr
    assert "paris: tools:get_weather #1 / error → CRASHED" in gated.stderr
    testcases = junit_cases(tmp_path / "j.xml")
    failure = testcases["paris [tools:get_weather #1 / error]"].find("failure")
    assert failure is not None and failure.get("type") == "CRASHED"
    assert failure.get("message") == (
        "the agent raised WeatherServiceError: no weather data for 'Atlantis'"
    )
    assert testcases["oslo [tools:get_weather #1 / error]"].find("failure") is None
    # Only the kinds asked for are derived.
    assert "TIMEOUT" not in gated.stdout and "EMPTY" not in gated.stdout

    not_gated = tracely(
        suite,
        "replay",
        "--faults",
        "empty",
        env={"TRACELY_FAULTS": '{"fail_on": ["error:CRASHED"]}'},
    )
    assert not_gated.returncode == 0, not_gated.stderr


def test_derived_runs_are_deterministic(suite: CLI, tmp_path: Path) -> None:
    def table(n: int, *options: str) -> list[Any]:
        done = tracely(suite, "replay", "--faults", "--json", str(tmp_path / f"{n}.json"), *options)
        assert done.returncode == 0, done.stderr
        cases = json.loads((tmp_path / f"{n}.json").read_text())["cases"]
        return [
            [
                (r["call"], r["fault"], r["verdict"], r.get("next"), r.get("served"))
                for r in c["faults"]
            ]
            for c in cases
        ]

    assert table(1) == table(2) == table(3, "-j", "2")


def test_faults_refuse_lenient_and_bad_kinds(suite: CLI) -> None:
    lenient = tracely(suite, "replay", "--faults", "--lenient")
    assert lenient.returncode == 2 and "cannot be combined with --lenient" in lenient.stderr
    bad = tracely(suite, "replay", "--faults", "errors")
    assert bad.returncode == 2 and "unknown fault kind 'errors'" in bad.stderr
    config = tracely(suite, "replay", "--faults", env={"TRACELY_FAULTS": '{"retry": "again"}'})
    assert config.returncode == 2 and "retry='again'" in config.stderr
