"""The seed's whole story on the reference agent, with bundles extracted from live runs."""

from __future__ import annotations

from typing import Any

import pytest

import tracely_sdk as tracely
from examples import weather_agent
from tracely_otel import validate_bundle


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
    assert replayed["tools"] == fixed["tools"]
