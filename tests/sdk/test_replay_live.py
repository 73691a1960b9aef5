"""``fixtures(bundle, live=[...])``: the model served from the recording, the tools run for
real, and each live call's outcome compared with the recorded one."""

from __future__ import annotations

from typing import Any

import pytest

import tracely_sdk as tracely
from tracely_sdk._runner import ReplayCase, run_case, run_cases
from tracely_sdk.errors import ConfigError

BUNDLE: dict[str, Any] = {
    "tools": {"get_weather": [{"args": {"city": "Oslo"}, "output": {"sky": "cloudy", "temp": 4}}]},
    "llm": {"gpt-4o": [{"input": "Oslo?", "output": "Take a coat."}]},
}


def agent(weather: dict[str, Any], ran: list[str]) -> str:
    def get_weather() -> dict[str, Any]:
        ran.append("get_weather")
        return weather

    def chat() -> str:
        ran.append("chat")
        raise AssertionError("the model is served, never called")

    tracely.call_tool("get_weather", get_weather, args={"city": "Oslo"})
    return tracely.call_llm("gpt-4o", chat, input="Oslo?")


def test_matching_calls_run_live_and_the_rest_are_served() -> None:
    ran: list[str] = []
    with tracely.fixtures(BUNDLE, live=["tools:*"]) as rep:
        answer = agent({"sky": "cloudy", "temp": 4}, ran)
    assert ran == ["get_weather"] and answer == "Take a coat."
    assert rep.mode == "recorded" and rep.live_patterns == ["tools:*"]
    assert rep.served == ["llm:gpt-4o"] and rep.unused == []
    assert rep.live_checks == [
        {"label": "tools:get_weather", "equal": True, "differences": [], "omitted": 0}
    ]
    assert rep.clean
    assert rep.to_dict()["live_checks"][0]["equal"] is True


def test_a_live_output_that_differs_is_reported_path_by_path() -> None:
    with tracely.fixtures(BUNDLE, live="tools:get_weather") as rep:
        agent({"sky": "sunny", "temp": 4}, [])
    (check,) = rep.live_checks
    assert check["equal"] is False
    assert check["differences"] == [{"path": "output.sky", "recorded": "cloudy", "actual": "sunny"}]
    assert not rep.clean


def test_a_live_failure_is_compared_with_the_recorded_output() -> None:
    def failing() -> Any:
        raise ValueError("station offline")

    with tracely.fixtures(BUNDLE, live=["tools:*"]) as rep, pytest.raises(ValueError):
        tracely.call_tool("get_weather", failing, args={"city": "Oslo"})
    (check,) = rep.live_checks
    assert not check["equal"]
    assert {d["path"] for d in check["differences"]} == {"output", "error"}


def test_a_live_call_the_recording_lacks_runs_and_is_reported() -> None:
    with tracely.fixtures({}, live=["tools:*"]) as rep:
        assert tracely.call_tool("lookup", lambda: 7, args={"q": 1}) == 7
    assert rep.live == ["tools:lookup"] and not rep.clean


def test_calls_outside_the_patterns_stay_strict() -> None:
    with (
        tracely.fixtures(BUNDLE, live=["tools:get_weather"]),
        pytest.raises(tracely.ReplayError),
    ):
        tracely.call_tool("lookup", lambda: 7, args={"q": 1})


@pytest.mark.parametrize("bad", [[""], [3], ["tools:*", None]])
def test_live_takes_label_patterns(bad: Any) -> None:
    with pytest.raises(ConfigError, match="label patterns"), tracely.fixtures(BUNDLE, live=bad):
        pass


def _case() -> ReplayCase:
    return ReplayCase(
        id="oslo",
        name="Oslo",
        version=1,
        entrypoint=None,
        input={"args": [], "kwargs": {}},
        expected_output="Take a coat.",
        bundle=BUNDLE,
    )


def test_a_case_passes_when_its_live_tools_return_what_was_recorded() -> None:
    result = run_case(_case(), lambda: agent({"sky": "cloudy", "temp": 4}, []), live=["tools:*"])
    assert result.verdict == "PASS", result.reasons
    assert result.report["live_patterns"] == ["tools:*"]


def test_a_case_fails_with_the_diff_when_a_live_tool_returns_something_else() -> None:
    result = run_case(_case(), lambda: agent({"sky": "sunny", "temp": 4}, []), live=["tools:*"])
    assert result.verdict == "FAIL"
    assert result.reasons == [
        "tools:get_weather ran live and differs from the recording: output.sky: recorded "
        '"cloudy" now "sunny"'
    ]


def test_run_cases_passes_the_patterns_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    module = types.ModuleType("tracely_live_agent")
    module.run = lambda: agent({"sky": "sunny", "temp": 4}, [])  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tracely_live_agent", module)
    (result,) = run_cases([_case()], "tracely_live_agent:run", live=["tools:*"])
    assert result.verdict == "FAIL" and "ran live and differs" in result.reasons[0]


def test_the_reports_say_which_labels_ran_live_and_show_the_comparison() -> None:
    from tracely_sdk._reports import json_report, summarize, summary_line

    result = run_case(_case(), lambda: agent({"sky": "sunny", "temp": 4}, []), live=["tools:*"])
    assert summarize([result])["live_patterns"] == ["tools:*"]
    assert summarize([result])["mode"] == "recorded"
    assert summary_line([result]).endswith("(live: tools:*)")
    (case,) = json_report([result])["cases"]
    assert case["live_patterns"] == ["tools:*"]
    assert case["live_checks"][0]["differences"] == [
        {"path": "output.sky", "recorded": "cloudy", "actual": "sunny"}
    ]


def test_junit_shows_the_live_difference_as_the_failure() -> None:
    from tracely_sdk._reports import junit_xml

    result = run_case(_case(), lambda: agent({"sky": "sunny", "temp": 4}, []), live=["tools:*"])
    xml = junit_xml([result]).decode()
    assert "tools:get_weather ran live and differs from the recording" in xml
    assert "output.sky" in xml


def test_a_secret_in_a_live_outcome_never_reaches_the_comparison() -> None:
    secret = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2"

    def leaking() -> Any:
        raise ValueError(f"denied for key {secret}")

    def returning() -> Any:
        return {"sky": "cloudy", "token": secret}

    with tracely.fixtures(BUNDLE, live=["tools:*"]) as rep, pytest.raises(ValueError):
        tracely.call_tool("get_weather", leaking, args={"city": "Oslo"})
    with tracely.fixtures(BUNDLE, live=["tools:*"]) as again:
        tracely.call_tool("get_weather", returning, args={"city": "Oslo"})
    shown = repr([rep.live_checks, again.live_checks])
    assert "token" in shown and secret not in shown
