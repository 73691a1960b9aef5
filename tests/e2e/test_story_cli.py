"""The issue's whole story, end to end through the CLI, every step its own process.

Record ``run_broken`` live into a fresh store and promote it; replaying ``run`` is INCOMPLETE;
record ``run`` live and recapture (version 2); replaying ``run`` passes and ``run_broken`` fails
on the missing tool. ``-j 2`` gives the same verdicts; export / delete the store / import gives
the same verdicts; a corrupted case file or stored bundle is ERRORED without the agent running.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
WEATHER = "examples.weather_agent"

# An agent entrypoint that leaves a mark each time it runs: proof of whether a case ran it.
MARKER_AGENT = """\
import os
import threading

from examples import weather_agent


def run(city):
    with open(os.environ["AGENT_MARKER"], "a") as f:
        f.write(city + "\\n")
    return weather_agent.run(city)


def block(city):
    # Says it started (and in which process), then never returns: a hung agent.
    with open(os.environ["AGENT_MARKER"] + "." + city, "w") as f:
        f.write(str(os.getpid()))
    threading.Event().wait()
"""


class Shell:
    """Runs commands in a fresh working directory against a fresh store, with a clean env."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.db = workdir / "store" / "tracely.db"
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OTEL_", "TRACELY_", "PYTEST_", "GITHUB_"))
            and k not in ("COLUMNS", "TERM", "CI")  # CI changes what replay lists by default
        }
        env["PYTHONPATH"] = str(ROOT)
        env["TRACELY_STORE"] = f"sqlite:///{self.db.as_posix().lstrip('/')}"
        env["AGENT_MARKER"] = str(workdir / "agent-ran.txt")
        self.env = env

    def run(
        self, *argv: str, status: int = 0, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, *argv],
            cwd=self.workdir,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == status, (
            f"{' '.join(argv)} exited {proc.returncode}, expected {status}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
        # never a terminal here: plain text, no colour codes, no progress bar
        assert "\x1b[" not in proc.stdout and "\x1b[" not in proc.stderr
        return proc

    def tracely(
        self, *argv: str, status: int = 0, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return self.run("-m", "tracely_sdk.cli", *argv, status=status, env=env)

    def record(self, fn: str, city: str) -> str:
        """Run the reference agent live; its trace is recorded into the store. Returns its id."""
        proc = self.run("-m", WEATHER, "--fn", fn, city)
        (trace_id,) = re.findall(r"^recorded trace ([0-9a-f]{32})$", proc.stderr, re.MULTILINE)
        return trace_id

    def json(self, *argv: str) -> Any:
        return json.loads(self.tracely(*argv, "--json").stdout)

    def replay(self, *argv: str, status: int) -> dict[str, dict[str, Any]]:
        """``tracely replay``; returns each case's JSON report entry by case id."""
        report = self.workdir / "replay.json"
        report.unlink(missing_ok=True)
        self.tracely("replay", *argv, "--json", str(report), status=status)
        return {c["case_id"]: c for c in json.loads(report.read_text())["cases"]}

    def marks(self) -> list[str]:
        path = self.workdir / "agent-ran.txt"
        marks = path.read_text().split() if path.exists() else []
        path.unlink(missing_ok=True)
        return marks


def verdicts(cases: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {case_id: c["verdict"] for case_id, c in cases.items()}


@pytest.fixture
def sh(tmp_path: Path) -> Shell:
    (tmp_path / "marker_agent.py").write_text(MARKER_AGENT)
    # The project under test: its own modules (marker_agent) are allowed as entrypoints, and
    # the reference agent, which lives outside it, is allowed by name.
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tracely]\nentrypoints = ["examples.weather_agent:*"]\n'
    )
    return Shell(tmp_path)


def test_the_whole_story(sh: Shell, tmp_path: Path) -> None:
    # 1. the silent failure happens in production, recorded live, and is promoted; an
    #    entrypoint that cannot replay the case is refused at promote time, not at replay
    broken = sh.record("run_broken", "Paris")
    for entrypoint, why in (
        ("nosuchmod:run", "no module named 'nosuchmod'"),
        (f"{WEATHER}:local_model", "does not accept the recorded input"),
        ("os:system", "'os:system' is not allowed"),
    ):
        err = sh.tracely(
            "cases",
            "promote",
            broken,
            "--name",
            "Paris weather",
            "--entrypoint",
            entrypoint,
            status=2,
        ).stderr
        assert err.startswith("tracely: error: ") and why in err and err.count("\n") == 1
    out = sh.tracely(
        "cases", "promote", broken, "--name", "Paris weather", "--entrypoint", f"{WEATHER}:run"
    ).stdout
    assert out == f"promoted trace {broken} as case paris-weather (version 1)\n"

    # 2. the fix replayed against the recording of the bug: INCOMPLETE, exit 1, never live
    cases = sh.replay("--entrypoint", f"{WEATHER}:run", status=1)
    paris = cases["paris-weather"]
    assert paris["verdict"] == "INCOMPLETE" and paris["version"] == 1
    assert paris["reasons"][0].startswith("no recorded call for tools:get_weather")
    plain = sh.tracely("replay", "--no-color", status=1).stdout
    assert plain.splitlines()[0].split() == ["CASE", "VERSION", "VERDICT", "REASON"]
    assert plain.splitlines()[1].split()[:3] == ["paris-weather", "1", "INCOMPLETE"]

    # 3. the fix runs live and the case is recaptured from it: version 2, history kept
    fixed = sh.record("run", "Paris")
    sh.tracely("cases", "recapture", "paris-weather", fixed)
    assert sh.json("cases", "show", "paris-weather")["version"] == 2
    assert [
        v["source_trace_id"] for v in sh.json("cases", "history", "paris-weather")["versions"]
    ] == [
        broken,
        fixed,
    ]

    # 4. the fix replays hermetically: PASS, exit 0; the regression fails on the missing tool
    assert verdicts(sh.replay(status=0)) == {"paris-weather": "PASS"}
    cases = sh.replay("--entrypoint", f"{WEATHER}:run_broken", status=1)
    assert cases["paris-weather"]["verdict"] == "FAIL"
    assert cases["paris-weather"]["reasons"][0].startswith(
        "recorded call(s) never made: tools:get_weather"
    )
    assert cases["paris-weather"]["unused"][0] == "tools:get_weather"

    # a second case, so that -j 2 really runs in two workers
    oslo = sh.record("run", "Oslo")
    sh.tracely(
        "cases",
        "promote",
        oslo,
        "--name",
        "Oslo weather",
        "--entrypoint",
        f"{WEATHER}:run",
        "--tag",
        "nordic",
    )
    for argv, status, expected in (
        ((), 0, {"oslo-weather": "PASS", "paris-weather": "PASS"}),
        (
            ("--entrypoint", f"{WEATHER}:run_broken"),
            1,
            {"oslo-weather": "FAIL", "paris-weather": "FAIL"},
        ),
    ):
        serial = sh.replay(*argv, status=status)
        parallel = sh.replay(*argv, "-j", "2", status=status)
        assert verdicts(serial) == verdicts(parallel) == expected
        assert [c["reasons"] for c in serial.values()] == [c["reasons"] for c in parallel.values()]
        assert all(c["trace_id"] for c in parallel.values())

    # JUnit and JSON reports, and the step summary
    summary = tmp_path / "summary.md"
    sh.tracely(
        "replay",
        "--junit",
        "junit.xml",
        "--json",
        "report.json",
        "--tag",
        "nordic",
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "1" and suite.get("failures") == "0"
    (testcase,) = suite.findall("testcase")
    assert testcase.get("name") == "oslo-weather"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["summary"]["passed"] == 1 and report["summary"]["ok"] is True
    assert "| `oslo-weather` | 1 | ✅ PASS |" in summary.read_text()

    # 5. export, delete the store, import: the same verdicts
    sh.tracely("cases", "export", "cases")
    exported = sorted(p.name for p in (tmp_path / "cases").iterdir())
    assert exported == ["oslo-weather.json", "paris-weather.json"]
    shutil.rmtree(sh.db.parent)
    # reading a store that does not exist is an error naming it, and creates nothing
    for argv in (("cases", "list"), ("replay",)):
        err = sh.tracely(*argv, status=2).stderr
        assert err.startswith(f"tracely: error: no tracely store at {sh.db} ")
        assert not sh.db.parent.exists()
    sh.tracely("cases", "import", "cases")
    assert sh.json("cases", "show", "paris-weather")["version"] == 2
    assert verdicts(sh.replay(status=0)) == {"oslo-weather": "PASS", "paris-weather": "PASS"}
    cases = sh.replay("--entrypoint", f"{WEATHER}:run_broken", status=1)
    assert verdicts(cases) == {"oslo-weather": "FAIL", "paris-weather": "FAIL"}
    # ... and straight from the directory, without a store
    assert verdicts(sh.replay("--cases", "cases", status=0)) == {
        "oslo-weather": "PASS",
        "paris-weather": "PASS",
    }


def _story_store(sh: Shell) -> None:
    for city in ("Paris", "Oslo"):
        trace_id = sh.record("run", city)
        sh.tracely(
            "cases",
            "promote",
            trace_id,
            "--name",
            f"{city} weather",
            "--entrypoint",
            "marker_agent:run",
        )
    assert verdicts(sh.replay(status=0)) == {"oslo-weather": "PASS", "paris-weather": "PASS"}
    assert sorted(sh.marks()) == ["Oslo", "Paris"]  # the marker agent runs when a case runs


def test_a_case_is_edited_in_place_with_the_edit_in_its_history(sh: Shell) -> None:
    _story_store(sh)
    out = sh.tracely("cases", "edit", "paris-weather", "--entrypoint", f"{WEATHER}:run").stdout
    assert out == (
        "case paris-weather version 1 -> 2: edited: entrypoint 'marker_agent:run' -> "
        f"'{WEATHER}:run'\n"
    )
    assert [c["case_id"] for c in sh.json("cases", "list")["cases"]] == [
        "oslo-weather",
        "paris-weather",
    ]
    history = sh.json("cases", "history", "paris-weather")["versions"]
    assert [v["version"] for v in history] == [1, 2]
    assert history[0]["source_trace_id"] == history[1]["source_trace_id"]
    assert verdicts(sh.replay(status=0)) == {"oslo-weather": "PASS", "paris-weather": "PASS"}
    assert sh.marks() == ["Oslo"]  # paris-weather now runs through the reference agent
    err = sh.tracely("cases", "edit", "paris-weather", "--entrypoint", "nosuchmod:run", status=2)
    assert "no module named 'nosuchmod'" in err.stderr
    assert sh.json("cases", "show", "paris-weather")["entrypoint"] == f"{WEATHER}:run"


def test_the_gate_is_never_green_by_accident(sh: Shell, tmp_path: Path) -> None:
    # no store where the job looks: exit 2 naming the path, and nothing is created
    default = tmp_path / ".tracely" / "tracely.db"
    env = {"TRACELY_STORE": ""}
    err = sh.tracely("replay", env=env, status=2).stderr
    assert err.startswith(f"tracely: error: no tracely store at {default} ")
    assert "Traceback" not in err and err.count("\n") == 1
    typo = tmp_path / "typo" / "trcely.db"
    err = sh.tracely("replay", "--store", f"sqlite:///{typo.as_posix().lstrip('/')}", status=2)
    assert err.stderr.startswith(f"tracely: error: no tracely store at {typo} ")
    assert not (tmp_path / ".tracely").exists() and not (tmp_path / "typo").exists()

    _story_store(sh)
    # a filter that selects nothing says what it looked at, and fails the job
    err = sh.tracely("replay", "--tag", "smok", status=2).stderr
    assert err == (
        f"tracely: error: no cases to replay: the store {sh.env['TRACELY_STORE']} holds 2 "
        "cases, none selected by --tag smok; check the filters for a typo (`tracely cases "
        "list` shows every case and its tags). A gate that replays nothing is not a pass: pass "
        "--allow-empty if that is intended\n"
    )
    (tmp_path / "empty").mkdir()
    err = sh.tracely("replay", "--cases", "empty", status=2).stderr
    assert "no cases to replay: the case directory empty holds no cases" in err
    # ... unless the job asks for that
    sh.tracely("replay", "--tag", "smok", "--allow-empty", "--junit", "j.xml")
    assert ET.parse(tmp_path / "j.xml").getroot().get("tests") == "0"
    sh.tracely("replay", "--cases", "empty", "--allow-empty")


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupted_replay_stops_its_workers_and_reports_what_finished(
    sh: Shell, tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    for city, fn in (("Lisbon", "run"), ("Oslo", "block"), ("Tokyo", "block")):
        trace_id = sh.record("run", city)
        sh.tracely(
            "cases", "promote", trace_id, "--name", city, "--entrypoint", f"marker_agent:{fn}"
        )
    summary = tmp_path / "summary.md"
    argv = ["replay", "-j", "2", "--json", "r.json", "--junit", "j.xml"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracely_sdk.cli", *argv],
        cwd=sh.workdir,
        env={**sh.env, "GITHUB_STEP_SUMMARY": str(summary)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Oslo and Tokyo hang in the two workers; Tokyo starts only once Lisbon has finished.
        started = [tmp_path / f"agent-ran.txt.{city}" for city in ("Oslo", "Tokyo")]
        _wait_for(lambda: all(p.exists() and p.read_text() for p in started), proc)
        workers = [int(p.read_text()) for p in started]
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status, err
    name = sig.name
    assert err.endswith(
        f"tracely: error: interrupted by {name}: 1 of 3 case(s) finished, the rest were not run\n"
    )
    report = {c["case_id"]: c for c in json.loads((tmp_path / "r.json").read_text())["cases"]}
    assert report["lisbon"]["verdict"] == "PASS"
    for case_id in ("oslo", "tokyo"):
        assert report[case_id]["verdict"] == "NOT_RUN"
        assert report[case_id]["reasons"] == [
            f"tracely replay was interrupted by {name} before this case finished"
        ]
    assert "3 cases: 1 passed, 2 not run in" in out
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "3" and suite.get("skipped") == "2"
    assert [s.get("message") for s in suite.iter("skipped")] == [
        f"tracely replay was interrupted by {name} before this case finished"
    ] * 2
    assert "| `lisbon` | 1 | ✅ PASS |" in summary.read_text()
    assert "lisbon" in out
    # no worker, and no process of the worker pool (the resource tracker), outlives the run
    _wait_for(lambda: not any(_alive(pid) for pid in workers))
    _wait_for(lambda: not _processes_in(sh.workdir))


def _wait_for(condition: Callable[[], bool], proc: subprocess.Popen[str] | None = None) -> None:
    """Wait until ``condition()`` holds (or ``proc`` exited early): an event, not a duration."""
    deadline = time.monotonic() + 60
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"exited early: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError("the condition never held")
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _processes_in(directory: Path) -> list[int]:
    """Live processes whose working directory is ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if Path(cwd) == directory and _alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def test_a_corrupted_case_file_is_errored_without_running_the_agent(
    sh: Shell, tmp_path: Path
) -> None:
    _story_store(sh)
    sh.tracely("cases", "export", "cases")
    path = tmp_path / "cases" / "paris-weather.json"
    doc = json.loads(path.read_text())
    doc["history"][0]["bundle"]["tools"]["get_weather"][0]["output"]["temp_c"] = (
        35  # a doctored recording
    )
    path.write_text(json.dumps(doc))

    cases = sh.replay("--cases", "cases", status=1)
    assert verdicts(cases) == {"oslo-weather": "PASS", "paris-weather": "ERRORED"}
    assert "checksum" in cases["paris-weather"]["reasons"][0]
    assert sh.marks() == ["Oslo"]  # the agent never ran for the corrupt case
    out = sh.tracely("replay", "--cases", "cases", status=1).stdout
    assert "ERRORED paris-weather v1 (Paris weather)" in out
    sh.marks()

    path.write_text("{ not json")
    assert verdicts(sh.replay("--cases", "cases", status=1))["paris-weather"] == "ERRORED"
    assert sh.marks() == ["Oslo"]
    # importing a corrupt file into a store is refused outright: nothing is imported
    err = sh.tracely("cases", "import", "cases", status=2).stderr
    assert err.startswith("tracely: error: ") and "paris-weather.json" in err


def test_a_corrupted_stored_bundle_is_errored_with_an_error_trace(sh: Shell) -> None:
    _story_store(sh)
    db = sqlite3.connect(sh.db)
    try:
        (text,) = db.execute("SELECT bundle FROM cases WHERE id = 'paris-weather'").fetchone()
        bundle = json.loads(text)
        bundle["llm"] = {}  # cut short: the checksum no longer matches
        db.execute("UPDATE cases SET bundle = ? WHERE id = 'paris-weather'", (json.dumps(bundle),))
        db.commit()
    finally:
        db.close()

    # the spans go through the configured pipeline: here the console exporter, on stdout
    proc = sh.tracely(
        "replay", "--json", "r.json", status=1, env={"OTEL_TRACES_EXPORTER": "console"}
    )
    cases = {c["case_id"]: c for c in json.loads((sh.workdir / "r.json").read_text())["cases"]}
    assert verdicts(cases) == {"oslo-weather": "PASS", "paris-weather": "ERRORED"}
    assert "cannot be loaded, so the agent was not run" in cases["paris-weather"]["reasons"][0]
    assert sh.marks() == ["Oslo"]
    spans = _console_spans(proc.stdout)
    errored = [
        s for s in spans if s["context"]["trace_id"] == "0x" + cases["paris-weather"]["trace_id"]
    ]
    assert [s["name"] for s in errored] == ["invoke_agent paris-weather"]  # no tool or LLM spans
    assert errored[0]["status"]["status_code"] == "ERROR"
    assert errored[0]["attributes"]["tracely.case.id"] == "paris-weather"
    assert errored[0]["attributes"]["tracely.case.version"] == 1
    passed = [
        s for s in spans if s["context"]["trace_id"] == "0x" + cases["oslo-weather"]["trace_id"]
    ]
    assert sorted(s["name"] for s in passed) == [
        "chat local-weather-model",
        "chat local-weather-model",
        "execute_tool get_weather",
        "invoke_agent weather-agent",
    ]


def _console_spans(stdout: str) -> list[dict[str, Any]]:
    """The spans the console exporter printed (JSON objects) among the CLI's own output."""
    decoder = json.JSONDecoder()
    spans, i = [], 0
    while (start := stdout.find("{\n", i)) != -1:
        try:
            value, end = decoder.raw_decode(stdout, start)
        except json.JSONDecodeError:
            i = start + 1
            continue
        if isinstance(value, dict) and "context" in value:
            spans.append(value)
        i = end
    return spans


def test_usage_and_configuration_errors_exit_2(sh: Shell) -> None:
    err = sh.tracely("replay", "--entrypoint", "nowhere_module:run", status=2).stderr
    assert err.startswith("tracely: error: ") and err.count("\n") == 1
    err = sh.tracely("cases", "list", env={"TRACELY_STORE": "ftp://x/y"}, status=2).stderr
    assert err.startswith("tracely: error: store URL") and "Traceback" not in err
    err = sh.tracely("replay", "--bogus", status=2).stderr
    assert err.startswith("usage: tracely") and "unrecognized arguments: --bogus" in err


def test_the_story_script_runs_end_to_end(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not available")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "TRACELY_", "PYTEST_")) and k != "CI"  # as a person runs it
    }
    env["PYTHON"] = sys.executable
    proc = subprocess.run(
        [bash, str(ROOT / "examples" / "story.sh")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard, not a speed target: a loaded CI machine takes minutes
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.count("\n==> ") == 8
    assert "paris-weather  1        INCOMPLETE  no recorded call for tools:get_weather" in out
    assert "version 1 -> 2" in out
    assert "paris-weather  2        PASS" in out
    assert "paris-weather  2        FAIL     recorded call(s) never made: tools:get_weather" in out


# The reference agent with a changed system prompt.
TERSE_AGENT = """\
from examples import weather_agent

weather_agent.SYSTEM = "You are a terse assistant. Use get_weather for current conditions."
run = weather_agent.run
"""

PROMPT_DIFF = (
    'messages[0].content: recorded "You are a weather assistant. Use get_weather for current '
    'conditions." now "You are a terse assistant. Use get_weather for current conditions."'
)


def test_a_changed_prompt_shows_its_difference_in_every_report(sh: Shell, tmp_path: Path) -> None:
    (tmp_path / "terse_agent.py").write_text(TERSE_AGENT)
    sh.tracely("cases", "promote", sh.record("run", "Paris"), "--name", "Paris weather")
    summary = tmp_path / "summary.md"
    proc = sh.tracely(
        "replay",
        "--entrypoint",
        "terse_agent:run",
        "--json",
        "report.json",
        "--junit",
        "junit.xml",
        status=1,
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    lines = proc.stdout.splitlines()
    assert "  - served despite a different input: llm:local-weather-model (x2)" in lines
    for seq in (1, 3):
        head = f"    llm:local-weather-model #{(seq + 1) // 2} (seq {seq}) was served despite"
        assert any(line.startswith(head) for line in lines), proc.stdout
    assert lines.count("      " + PROMPT_DIFF) == 2

    (case,) = json.loads((tmp_path / "report.json").read_text())["cases"]
    assert case["verdict"] == "FAIL" and case["diverged"] == ["llm:local-weather-model"] * 2
    first = case["divergences"][0]
    assert first["field"] == "input" and first["seq"] == 1
    assert first["differences"] == [
        {
            "path": "messages[0].content",
            "recorded": "You are a weather assistant. Use get_weather for current conditions.",
            "actual": "You are a terse assistant. Use get_weather for current conditions.",
        }
    ]
    assert first["recorded"]["messages"][1] == first["actual"]["messages"][1]

    failure = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite/testcase/failure")
    assert failure is not None and PROMPT_DIFF in (failure.text or "")
    assert PROMPT_DIFF in summary.read_text()


def _kept_run_id(stderr: str) -> str:
    (run_id,) = re.findall(r"^tracely: run ([0-9a-f]{16}) kept in ", stderr, re.MULTILINE)
    return run_id


def test_each_replay_run_is_kept_and_its_traces_can_be_found(sh: Shell, tmp_path: Path) -> None:
    (tmp_path / "terse_agent.py").write_text(TERSE_AGENT)
    sh.tracely("cases", "promote", sh.record("run", "Paris"), "--name", "Paris weather")

    # a passing run, then a failing one: each is kept, newest first
    proc = sh.tracely("replay", "--entrypoint", f"{WEATHER}:run", "--json", "pass.json")
    passed_id = _kept_run_id(proc.stderr)
    proc = sh.tracely("replay", "--entrypoint", "terse_agent:run", "--json", "fail.json", status=1)
    failed_id = _kept_run_id(proc.stderr)
    listed = sh.json("runs", "list")["runs"]
    assert [r["run_id"] for r in listed] == [failed_id, passed_id]
    assert [r["ok"] for r in listed] == [False, True]
    assert "cases" not in listed[0] and listed[0]["summary"]["failed"] == 1
    table = sh.tracely("runs", "list").stdout.splitlines()
    assert table[0].split() == ["RUN_ID", "STARTED", "MODE", "GATE", "CASES", "VERDICTS"]
    assert table[1].split()[0] == failed_id and "1 failed" in table[1]

    # per case: verdict, reasons, differences, replay trace id, duration, versions
    run = sh.json("runs", "show", failed_id)
    (case,) = run["cases"]
    (reported,) = json.loads((tmp_path / "fail.json").read_text())["cases"]
    assert case["verdict"] == "FAIL" and case["reasons"] == reported["reasons"]
    assert case["divergences"] == reported["divergences"]
    assert case["trace_id"] == reported["trace_id"] and len(case["trace_id"]) == 32
    assert case["duration_s"] > 0 and case["tracely_version"] == run["tracely_version"]
    assert case["agent_version"] is None  # the example agent is not an installed distribution
    assert run["otlp_endpoint"] is None and run["source"].startswith("sqlite:")
    text = sh.tracely("runs", "show", failed_id).stdout
    assert f"run            {failed_id}" in text.splitlines()
    assert "FAIL paris-weather v1 (Paris weather)" in text
    assert "      " + PROMPT_DIFF in text.splitlines()
    assert f"  trace {case['trace_id']}" in text
    assert sh.tracely("runs", "show", "f" * 16, status=2).stderr.startswith("tracely: error: ")

    # the trace id the summary prints is found: a replay trace, and where its spans went
    out = sh.tracely("traces", "show", case["trace_id"]).stdout
    assert out.startswith(
        f"trace {case['trace_id']} is a replay trace of case paris-weather in run {failed_id}"
    )
    assert "no OTLP backend was configured" in out
    shown = sh.json("traces", "show", case["trace_id"])
    assert shown["replay"] == {
        "run_id": failed_id,
        "case_id": "paris-weather",
        "started_at": run["started_at"],
        "otlp_endpoint": None,
    }
    # a trace id that is neither a recording nor a replay trace is still not found
    sh.tracely("traces", "show", "0" * 31 + "1", status=2)

    # from a directory there is no store: the run is said not to be kept, and where it came from
    sh.tracely("cases", "export", "cases")
    err = sh.tracely("replay", "--cases", "cases", "--entrypoint", f"{WEATHER}:run").stderr
    assert re.search(r"^tracely: run [0-9a-f]{16} not kept: the cases came from cases", err, re.M)
    assert len(sh.json("runs", "list")["runs"]) == 2


def test_a_store_that_refuses_the_run_changes_no_verdict(sh: Shell, tmp_path: Path) -> None:
    (tmp_path / "terse_agent.py").write_text(TERSE_AGENT)
    sh.tracely("cases", "promote", sh.record("run", "Paris"), "--name", "Paris weather")
    db = sqlite3.connect(sh.db)
    try:
        db.execute(
            "CREATE TRIGGER refuse_runs BEFORE INSERT ON runs "
            "BEGIN SELECT RAISE(ABORT, 'the disk is full'); END"
        )
        db.commit()
    finally:
        db.close()
    for entrypoint, status, verdict in (
        (f"{WEATHER}:run", 0, "PASS"),
        ("terse_agent:run", 1, "FAIL"),
    ):
        proc = sh.tracely("replay", "--entrypoint", entrypoint, "--json", "r.json", status=status)
        (line,) = [ln for ln in proc.stderr.splitlines() if " not kept: " in ln]
        assert re.fullmatch(
            r"tracely: run [0-9a-f]{16} not kept: the store sqlite:\S+ refused it: .*the disk is full.*",
            line,
        )
        (case,) = json.loads((tmp_path / "r.json").read_text())["cases"]
        assert case["verdict"] == verdict
    assert sh.json("runs", "list")["runs"] == []
