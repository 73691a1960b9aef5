"""The seed's whole story on the reference agent, with bundles extracted from live runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tracely_sdk as tracely
from examples import weather_agent
from tracely_otel import validate_bundle
from tracely_sdk.store import default_store_url, open_store

ROOT = Path(__file__).resolve().parents[2]


def record(capture: Any, fn: Any, city: str) -> tuple[str, dict[str, Any]]:
    answer = fn(city)
    bundle = capture.last_bundle
    validate_bundle(bundle)
    return answer, bundle


def test_the_story(capture: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # 1. The silent failure happens in production: recorded live.
    broken_answer, broken = record(capture, weather_agent.run_broken, "Paris")
    assert broken_answer == "Let me check the weather in Paris."
    assert "get_weather" not in broken["tools"]
    assert broken["agent"]["input"] == {"args": ["Paris"], "kwargs": {}}

    # 2. The fix, replayed against the recording of the bug: a strict miss, never a live call.
    fixed_answer, fixed = record(capture, weather_agent.run, "Paris")
    assert fixed_answer == "It's 18°C and cloudy in Paris."
    tool_calls: list[Any] = []
    monkeypatch.setattr(weather_agent, "get_weather", lambda **kw: tool_calls.append(kw))
    with tracely.fixtures(broken) as rep, pytest.raises(tracely.ReplayError) as info:
        weather_agent.run("Paris")
    assert "no recorded call for tools:get_weather" in str(info.value)
    assert tool_calls == [] and not rep.clean and rep.errors

    # 3. Re-recorded from the fixed run: replays clean.
    monkeypatch.undo()
    with tracely.fixtures(fixed) as rep:
        assert weather_agent.run("Paris") == fixed_answer
    assert rep.clean
    assert rep.served == ["llm:local-weather-model", "tools:get_weather", "llm:local-weather-model"]

    # 4. The regression against the fixed recording: get_weather unused.
    with tracely.fixtures(fixed) as rep:
        assert weather_agent.run_broken("Paris") == "Let me check the weather in Paris."
    assert rep.unused == ["tools:get_weather", "llm:local-weather-model"]
    assert not rep.clean and not rep.errors


def test_replay_is_hermetic(capture: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, fixed = record(capture, weather_agent.run, "Lisbon")
    monkeypatch.setattr(weather_agent, "get_weather", _refuse)
    monkeypatch.setattr(weather_agent, "local_model", _refuse)
    with tracely.fixtures(fixed) as rep:
        assert weather_agent.run("Lisbon") == "It's 24°C and sunny in Lisbon."
    assert rep.clean


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a live call was made under replay")


def test_recorded_failure_is_handled_the_same_on_replay(
    capture: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    live_answer, bundle = record(capture, weather_agent.run_handles, "Atlantis")
    assert live_answer == "Sorry, I couldn't get the weather for Atlantis right now."
    entry = bundle["tools"]["get_weather"][0]
    assert entry["error"] == {
        "type": "WeatherServiceError",
        "message": "no weather data for 'Atlantis'",
        "repr": "WeatherServiceError(\"no weather data for 'Atlantis'\")",
    }
    monkeypatch.setattr(weather_agent, "get_weather", _refuse)
    with tracely.fixtures(bundle) as rep:
        assert weather_agent.run_handles("Atlantis") == live_answer
    assert rep.clean


def test_replay_spans_go_through_the_same_pipeline(capture: Any) -> None:
    _, fixed = record(capture, weather_agent.run, "Oslo")
    capture.exporter.clear()
    with tracely.fixtures(fixed, case_id="oslo", case_version=2):
        weather_agent.run("Oslo")
    agent_span = capture.span("invoke_agent weather-agent")
    assert agent_span.attributes["tracely.replay.mode"] == "recorded"
    assert agent_span.attributes["tracely.case.id"] == "oslo"
    assert agent_span.attributes["tracely.case.version"] == 2
    tool_span = capture.span("execute_tool get_weather")
    assert tool_span.attributes["tracely.replay.served"] is True
    # the replayed trace is itself extractable, and marked as a replay
    replayed = capture.last_bundle
    assert replayed["replay"] == {"mode": "recorded", "case_id": "oslo", "case_version": 2}
    times = ("started_at", "ended_at")  # when each call ran is the replay's own

    def calls(bundle: Any) -> Any:
        return {
            name: [{k: v for k, v in e.items() if k not in times} for e in entries]
            for name, entries in bundle["tools"].items()
        }

    assert calls(replayed) == calls(fixed)


def _run_example(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "examples.weather_agent", "Paris"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_example_says_recorded_only_when_it_was(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    proc = _run_example(tmp_path)
    assert proc.returncode == 0 and proc.stdout == "It's 18°C and cloudy in Paris.\n"
    (trace_id,) = re.findall(r"^recorded trace ([0-9a-f]{32})$", proc.stderr, re.MULTILINE)
    with open_store(default_store_url(tmp_path), create=False) as store:
        assert store.get_recording(trace_id).trace_id == trace_id


def test_a_recording_that_cannot_be_written_is_said_to_be_lost(tmp_path: Path) -> None:
    # The project's .tracely is a file: neither the store nor its spool can be written there.
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / ".tracely").write_text("not a directory")
    proc = _run_example(tmp_path)
    assert proc.returncode == 0 and proc.stdout == "It's 18°C and cloudy in Paris.\n"
    (trace_id,) = re.findall(r"^trace ([0-9a-f]{32}) is not in the store", proc.stderr, re.M)
    assert f"tracely lost the recording of trace(s) {trace_id}: the spool " in proc.stderr
    assert "recorded trace" not in proc.stderr
    assert "kept in" not in proc.stderr and "retried" not in proc.stderr
