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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from examples import openai_agent, weather_agent
from examples.llm_server import serve
from tracely_sdk import providers

from ._helpers import CLI, WEATHER, record

ROOT = Path(__file__).resolve().parents[3]
OPENAI_AGENT = "examples.openai_agent:run"


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
        "error,timeout,empty",
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
    # The LLM calls are call_llm's: a model fault (timeout) is served at an HTTP client, which
    # they never reach on replay, so they are skipped, with that reason.
    model_rows = {k: r for k, r in paris.items() if k[0].startswith("llm:")}
    assert set(model_rows) == {
        ("llm:local-weather-model #1", "timeout"),
        ("llm:local-weather-model #2", "timeout"),
    }
    assert all(r["verdict"] == "SKIPPED" for r in model_rows.values())
    assert (
        "recorded by call_llm"
        in model_rows[("llm:local-weather-model #1", "timeout")]["reasons"][0]
    )

    oslo = {k: r for k, r in by_cell(cases["oslo"]).items() if k[0].startswith("tools:")}
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
    (tool_row,) = [line for line in paris_table if line.startswith("tools:")]
    assert tool_row.split(None, 2)[2].startswith("CRASHED: raised WeatherServiceError")
    assert "HANDLED: called llm:local-weather-model" in tool_row
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


# -- model calls ---------------------------------------------------------------------------------

QUESTION = "What's the weather in Paris?"
SERVE_RECORDED = {"TRACELY_FAULTS": json.dumps({"retry": "serve-recorded"})}


@pytest.fixture
def openai_case(capture: Any, cli: CLI) -> Iterator[str]:
    """The OpenAI SDK agent recorded against the local model server (two model calls and a
    tool call), as a stored trace."""
    providers.instrument(["openai", "httpx", "httpx2"])
    try:
        with serve() as (server, _):
            client = openai.OpenAI(api_key="test-key", base_url=server.openai_base_url)
            yield record(capture, cli, lambda: openai_agent.run(QUESTION, client=client))
    finally:
        providers.uninstrument(["openai", "httpx", "httpx2"])


def test_model_call_faults_are_in_the_robustness_table_and_every_report(
    openai_case: str, cli: CLI, tmp_path: Path
) -> None:
    status, _, err = cli(
        "cases", "promote", openai_case, "--name", "paris", "--entrypoint", OPENAI_AGENT
    )
    assert status == 0, err
    done = tracely(
        cli,
        "replay",
        "--faults",
        "rate_limit,server_error,stream_cut",
        "--json",
        str(tmp_path / "r.json"),
        "--junit",
        str(tmp_path / "j.xml"),
        "--html",
        str(tmp_path / "r.html"),
        env=SERVE_RECORDED,
    )
    assert done.returncode == 0, done.stderr
    (case,) = json.loads((tmp_path / "r.json").read_text())["cases"]
    cells = {k: r["verdict"] for k, r in by_cell(case).items() if k[0].startswith("llm:")}
    model = f"llm:{openai_agent.MODEL}"
    # The SDK retries the 429 and the 500 itself; serve-recorded answers its retry.
    assert cells == {
        (f"{model} #1", "rate_limit"): "HANDLED",
        (f"{model} #1", "server_error"): "HANDLED",
        (f"{model} #1", "stream_cut"): "SKIPPED",
        (f"{model} #2", "rate_limit"): "HANDLED",
        (f"{model} #2", "server_error"): "HANDLED",
        (f"{model} #2", "stream_cut"): "SKIPPED",
    }
    table = done.stdout.split("robustness of paris\n")[1].split("\n\n")[0].splitlines()
    assert table[0].split() == ["CALL", "RATE_LIMIT", "SERVER_ERROR", "STREAM_CUT"]
    assert table[1].startswith(f"{model} #1")
    junit = junit_cases(tmp_path / "j.xml")
    limited = junit[f"paris [{model} #1 / rate_limit]"]
    assert junit_props(limited)["tracely.fault.verdict"] == "HANDLED"
    html = (tmp_path / "r.html").read_text()
    assert "rate_limit" in html and "Robustness" in html


def test_promoted_fault_cases_replay_with_the_verdict_of_their_derived_run(
    openai_case: str, cli: CLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACELY_FAULTS", SERVE_RECORDED["TRACELY_FAULTS"])
    status, out, err = cli(
        "cases",
        "promote",
        openai_case,
        "--name",
        "paris",
        "--entrypoint",
        OPENAI_AGENT,
        "--with-faults",
        "llm:*:rate_limit,llm:*:refusal",
    )
    assert status == 0, err
    model = openai_agent.MODEL
    kept = sorted(line.rsplit(" ", 1)[1] for line in out.splitlines() if line.startswith("kept"))
    assert kept == [
        f"paris-rate_limit-llm-{model}-1",
        f"paris-rate_limit-llm-{model}-2",
        f"paris-refusal-llm-{model}-1",
        f"paris-refusal-llm-{model}-2",
    ]
    store = cli.store()
    try:
        limited = store.get_case(f"paris-rate_limit-llm-{model}-1")
        refused = store.get_case(f"paris-refusal-llm-{model}-1")
        original = store.get_case("paris")
    finally:
        store.close()
    assert limited.expected_output == original.expected_output  # the retry recovered
    assert refused.expected_output == ""  # the agent answered nothing after a content filter
    assert "fault:rate_limit" in limited.tags
    # The retry the SDK made is recorded in the kept case: 429, then the recorded answer.
    first, retried, _ = limited.bundle["llm"][model]
    assert first["output"]["status"] == 429
    assert retried["output"]["status"] == 200

    # Replayed without any retry rule, each kept case passes, as its derived run was HANDLED.
    done = tracely(cli, "replay", "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = {
        c["case_id"]: c["verdict"] for c in json.loads((tmp_path / "r.json").read_text())["cases"]
    }
    assert verdicts == {"paris": "PASS", **dict.fromkeys(kept, "PASS")}


def test_with_faults_needs_an_entrypoint_and_well_formed_selectors(
    openai_case: str, cli: CLI
) -> None:
    status, _, err = cli("cases", "promote", openai_case, "--name", "p", "--with-faults")
    assert status == 2 and "--with-faults replays each promoted case's derived runs" in err
    status, _, err = cli(
        "cases",
        "promote",
        openai_case,
        "--name",
        "p",
        "--entrypoint",
        OPENAI_AGENT,
        "--with-faults",
        "rate_limit",
    )
    assert status == 2 and "is not CALL:KIND" in err
