"""A replayed case's verdict, decided from what its run did (``_runner.decide``), like the
matcher: a pure function, pinned case by case and by property."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tracely_sdk._runner import ERRORED, FAIL, INCOMPLETE, LENIENT, PASS, decide

CLEAN: dict[str, Any] = {
    "errors": [],
    "unused": [],
    "diverged": [],
    "live": [],
    "live_checks": [],
    "raised": None,
    "raised_was_refused": False,
    "output_differs": False,
    "recorded_error": None,
    "strict": True,
}


def verdict(**changes: Any) -> tuple[str, list[str]]:
    decision = decide(**{**CLEAN, **changes})
    return decision.verdict, decision.reasons


def test_a_run_that_did_what_the_recording_did_passes() -> None:
    assert verdict() == (PASS, [])


def test_a_refused_call_makes_the_run_incomplete_whatever_the_agent_did_next() -> None:
    refused = ["no recorded call for llm:gpt-4o"]
    assert verdict(errors=refused) == (INCOMPLETE, refused)
    assert verdict(errors=refused, output_differs=True, unused=["tools:t"]) == (
        INCOMPLETE,
        refused,
    )
    # The agent raised the refusal itself: said once. It raised something else: said after.
    refusal = ("ReplayError", "no recorded call for llm:gpt-4o")
    assert verdict(errors=refused, raised=refusal, raised_was_refused=True) == (INCOMPLETE, refused)
    decision = decide(**{**CLEAN, "errors": refused, "raised": ("KeyError", "'choices'")})
    assert decision.reasons == [*refused, "the agent then raised KeyError: 'choices'"]
    assert decision.shows_error


def test_an_exception_the_recorded_run_did_not_raise_is_errored() -> None:
    assert verdict(raised=("ValueError", "bad")) == (ERRORED, ["the agent raised ValueError: bad"])
    assert verdict(raised=("ValueError", "bad"), recorded_error=("ValueError", "worse")) == (
        ERRORED,
        ["the agent raised ValueError: bad", "the recorded run raised ValueError: worse"],
    )


def test_reproducing_the_recorded_failure_is_no_error() -> None:
    same = ("WeatherServiceError", "no data for Atlantis")
    assert verdict(raised=same, recorded_error=same) == (PASS, [])
    assert verdict(raised=same, recorded_error=same, unused=["tools:t"])[0] == FAIL


def test_returning_where_the_recorded_run_raised_fails() -> None:
    assert verdict(recorded_error=("E", "m")) == (
        FAIL,
        ["the recorded run raised E: m; the replayed agent returned instead"],
    )


def test_calls_come_before_the_output_in_the_reasons() -> None:
    decision = decide(
        **{
            **CLEAN,
            "unused": ["tools:a", "tools:b"],
            "diverged": ["llm:m"],
            "live": ["tools:c"],
            "output_differs": True,
        }
    )
    assert decision.verdict == FAIL and decision.output_differs
    assert decision.reasons == [
        "recorded call(s) never made: tools:a, tools:b",
        "served despite a different input: llm:m",
        "not in the recording, ran live: tools:c",
        "output differs from the expected output",
    ]


def test_a_live_check_that_differs_is_a_reason_and_one_that_agrees_is_not() -> None:
    agrees = {"label": "tools:clock", "equal": True, "differences": [], "omitted": 0}
    assert verdict(live_checks=[agrees]) == (PASS, [])
    differs = {**agrees, "equal": False, "differences": [], "omitted": 0}
    verdict_, reasons = verdict(live_checks=[differs])
    assert verdict_ == FAIL and reasons[0].startswith("tools:clock ran live and differs")


def test_a_lenient_run_is_lenient_unless_replay_refused_something() -> None:
    assert verdict(strict=False) == (LENIENT, [])
    assert verdict(strict=False, output_differs=True)[0] == LENIENT
    assert verdict(strict=False, errors=["refused"])[0] == INCOMPLETE
    assert verdict(strict=False, raised=("E", "m"))[0] == ERRORED


labels = st.lists(st.sampled_from(["tools:a", "tools:b", "llm:m"]), max_size=3)
identity = st.none() | st.tuples(st.sampled_from(["E", "F"]), st.sampled_from(["m", "n"]))


@given(
    errors=st.lists(st.sampled_from(["refused a", "refused b"]), max_size=2),
    unused=labels,
    diverged=labels,
    live=labels,
    raised=identity,
    recorded_error=identity,
    output_differs=st.booleans(),
    strict=st.booleans(),
)
def test_pass_exactly_when_nothing_at_all_went_otherwise(**run: Any) -> None:
    if run["raised"] is not None:
        run["output_differs"] = False  # an agent that raised returned no output
    decision = decide(**{**CLEAN, **run})
    clean = (
        not run["errors"]
        and not run["unused"]
        and not run["diverged"]
        and not run["live"]
        and run["raised"] == run["recorded_error"]
        and not run["output_differs"]
    )
    assert (decision.verdict == PASS) == (clean and run["strict"])
    assert decision.reasons or decision.verdict in (PASS, LENIENT)  # no reason, no failure
    assert decision.verdict not in (FAIL, ERRORED, INCOMPLETE) or decision.reasons
    assert (decision.verdict == INCOMPLETE) == bool(run["errors"])
