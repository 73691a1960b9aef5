"""Deriving robustness runs from a recording, and the verdicts of derived runs."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracely_sdk as tracely
from tracely_otel import seal
from tracely_sdk import _faults
from tracely_sdk._faults import FaultConfig, decide, derive, fault_config, parse_kinds
from tracely_sdk._replay import load_bundle
from tracely_sdk._robustness import run_derived
from tracely_sdk._runner import ReplayCase
from tracely_sdk.errors import ConfigError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
tool_entries = st.fixed_dictionaries(
    {"args": st.dictionaries(st.sampled_from("abc"), json_values, max_size=2)},
    optional={"output": json_values},
).map(lambda e: e if "output" in e else {**e, "error": {"type": "ValueError", "message": "no"}})
bundles = st.fixed_dictionaries(
    {
        "tools": st.dictionaries(
            st.sampled_from(["get_weather", "search", "lookup"]),
            st.lists(tool_entries, min_size=1, max_size=3),
            max_size=3,
        ),
        "llm": st.just({"m": [{"input": "hi", "output": "hello"}]}),
    }
)
kind_sets = st.lists(st.sampled_from(_faults.KINDS), min_size=1, unique=True)


@settings(max_examples=150, deadline=None)
@given(bundle=bundles, kinds=kind_sets)
def test_derivation_is_deterministic_and_changes_one_call_only(
    bundle: dict[str, Any], kinds: list[str]
) -> None:
    original = copy.deepcopy(bundle)
    first = derive(load_bundle(bundle), kinds)
    second = derive(load_bundle(copy.deepcopy(bundle)), list(reversed(kinds)))
    assert [(r.fault, r.bundle) for r in first.runs] == [(r.fault, r.bundle) for r in second.runs]
    assert [(s.fault, s.reason) for s in first.skipped] == [
        (s.fault, s.reason) for s in second.skipped
    ]
    assert bundle == original  # the case's recording is never changed
    calls = sum(len(v) for v in bundle["tools"].values())
    tool_kinds = [k for k in kinds if k in _faults.TOOL_KINDS]
    assert len(first.runs) + len(first.skipped) == calls * len(tool_kinds)
    for run in first.runs:
        fault = run.fault
        assert run.bundle["llm"] == bundle["llm"]
        for name, entries in bundle["tools"].items():
            for i, entry in enumerate(entries):
                if (name, i) == (fault.name, fault.index):
                    assert run.bundle["tools"][name][i] == run.served != entry
                    assert run.served["args"] == entry["args"]
                else:
                    assert run.bundle["tools"][name][i] == entry
        load_bundle(run.bundle)  # every derived recording is a recording


def test_the_error_is_the_one_the_tool_was_recorded_raising_else_the_projects() -> None:
    bundle = load_bundle(
        {"tools": {"get_weather": [{"args": {"city": "Paris"}, "output": {"t": 1}}]}}
    )
    elsewhere = {
        "get_weather": {"type": "WeatherServiceError", "message": "down", "repr": "W('down')"}
    }
    (run,) = derive(bundle, ["error"], errors=elsewhere).runs
    assert run.served["error"] == elsewhere["get_weather"]
    (generic,) = derive(bundle, ["error"], error_type="ConnectionError").runs
    assert generic.served["error"] == {
        "type": "ConnectionError",
        "message": "tools:get_weather failed (a fault tracely injected)",
    }


def test_a_case_prefers_its_own_recorded_failure() -> None:
    bundle = load_bundle(
        {
            "tools": {
                "t": [
                    {"args": {"n": 1}, "error": {"type": "OwnError", "message": "own"}},
                    {"args": {"n": 2}, "output": "x"},
                ]
            }
        }
    )
    derivation = derive(bundle, ["error"], errors={"t": {"type": "Other", "message": "o"}})
    (run,) = derivation.runs
    assert run.fault.index == 1 and run.served["error"] == {"type": "OwnError", "message": "own"}
    (skipped,) = derivation.skipped
    assert skipped.fault.index == 0 and "recorded failing" in skipped.reason


@pytest.mark.parametrize(
    ("output", "empty", "skipped"),
    [
        ({"a": 1}, {}, None),
        ([1, 2], [], None),
        ("text", "", None),
        ("", None, "already empty"),
        (None, None, "null, which has no empty value"),
        (3, None, "int, which has no empty value"),
        (True, None, "bool, which has no empty value"),
    ],
)
def test_empty_is_the_empty_value_of_the_recorded_json_type(
    output: Any, empty: Any, skipped: str | None
) -> None:
    derivation = derive(load_bundle({"tools": {"t": [{"args": {}, "output": output}]}}), ["empty"])
    if skipped is None:
        assert derivation.runs[0].served == {"args": {}, "output": empty}
    else:
        assert not derivation.runs and skipped in derivation.skipped[0].reason


def test_a_typed_output_is_not_emptied() -> None:
    bundle = {"tools": {"t": [{"args": {}, "output": {"a": 1}, "output_type": "dataclass:m.C"}]}}
    derivation = derive(load_bundle(bundle), ["empty", "timeout"])
    assert [r.fault.kind for r in derivation.runs] == ["timeout"]
    assert "output_type" not in derivation.runs[0].served
    assert "dataclass:m.C" in derivation.skipped[0].reason


def test_a_sealed_recording_is_resealed() -> None:
    bundle = seal({"format": "tracely.bundle/1", "tools": {"t": [{"args": {}, "output": "x"}]}})
    (run,) = derive(load_bundle(bundle), ["timeout"]).runs
    assert run.bundle["checksum"] != bundle["checksum"]
    load_bundle(run.bundle)


def test_verdicts() -> None:
    crash = {"type": "ToolError", "message": "down"}
    assert decide(reached=True, stopped=False, misses=[], raised=None) == ("HANDLED", [])
    assert decide(reached=True, stopped=False, misses=[], raised=crash) == (
        "CRASHED",
        ["the agent raised ToolError: down"],
    )
    assert decide(reached=True, stopped=True, misses=["m"], raised=crash)[0] == "LOOPED"
    assert decide(reached=True, stopped=False, misses=["no recorded call"], raised=crash)[0] == (
        "INCOMPLETE"
    )
    assert decide(reached=False, stopped=False, misses=[], raised=None)[0] == "UNREACHED"


def test_the_faults_setting() -> None:
    config = fault_config(
        "[tool.tracely] faults", {"kinds": ["timeout", "error"], "fail-on": ["error:CRASHED"]}
    )
    assert config.kinds == ("error", "timeout")
    assert config.gates("error", "CRASHED") and not config.gates("timeout", "CRASHED")
    assert FaultConfig(fail_on=("CRASHED",)).gates("empty", "CRASHED")
    assert not FaultConfig().gates("error", "CRASHED")  # by default nothing gates
    assert FaultConfig().budget(3) == 6 and FaultConfig(max_calls=4).budget(3) == 4
    assert fault_config("X", '{"max_calls": "1.5x"}').budget(4) == 6
    assert parse_kinds("all") == _faults.KINDS
    for bad, message in [
        ({"retry": "twice"}, "retry='twice'"),
        ({"max_calls": 0}, "max_calls=0"),
        ({"fail_on": ["BROKEN"]}, "'BROKEN' names no verdict"),
        ({"kinds": ["slow"]}, "unknown fault kind 'slow'"),
        ({"budget": 3}, "unknown key(s) ['budget']"),
        ("not json", "must be a JSON object"),
    ]:
        with pytest.raises(ConfigError, match=None) as info:
            fault_config("TRACELY_FAULTS", bad)
        assert message in str(info.value)


# -- derived runs of small agents ----------------------------------------------------------------

RECORDING = {
    "tools": {"fetch": [{"args": {"q": "a"}, "output": {"v": 1}, "seq": 1}]},
    "llm": {"m": [{"input": "x", "output": "done", "seq": 2}]},
}
CASE = ReplayCase("c", "c", 1, None, {"args": [], "kwargs": {}}, "done", RECORDING)


def fetch() -> Any:
    return tracely.call_tool("fetch", lambda: {"v": 1}, args={"q": "a"})


def retries_forever() -> str:
    while True:
        try:
            fetch()
            return str(tracely.call_llm("m", lambda: "done", input="x"))
        except Exception:  # the loop a budget must stop
            continue


def retries_once() -> str:
    try:
        fetch()
    except tracely.ToolError:
        fetch()
    return str(tracely.call_llm("m", lambda: "done", input="x"))


def derived(kind: str = "error") -> _faults.DerivedRun:
    (run,) = derive(load_bundle(RECORDING), [kind]).runs
    return run


def test_an_agent_that_retries_forever_is_looped_by_the_budget() -> None:
    for retry in ("incomplete", "serve-fault"):
        row = run_derived(CASE, retries_forever, derived(), FaultConfig(retry=retry))  # type: ignore[arg-type]
        assert (row["verdict"], row["calls"], row["max_calls"]) == ("LOOPED", 5, 4)
        assert row["next"] == "retried tools:fetch" + (
            ", which the recording cannot answer"
            if retry == "incomplete"
            else " (served by the retry rule)"
        )


def test_a_retry_is_incomplete_unless_the_project_serves_it() -> None:
    row = run_derived(CASE, retries_once, derived(), FaultConfig())
    assert row["verdict"] == "INCOMPLETE"
    assert row["reasons"][0].startswith("no recorded call for tools:fetch")
    served = run_derived(CASE, retries_once, derived(), FaultConfig(retry="serve-recorded"))
    assert (served["verdict"], served["output"]) == ("HANDLED", "done")
    assert served["steps"] == ["served tools:fetch", "retried tools:fetch", "served llm:m"]


def test_a_fault_the_run_never_reaches_is_unreached() -> None:
    row = run_derived(
        CASE, lambda: str(tracely.call_llm("m", lambda: "", input="x")), derived(), FaultConfig()
    )
    assert row["verdict"] == "UNREACHED" and row["next"] == "never made the faulted call"


def test_a_timeout_is_a_timeout_error_where_the_call_names_it() -> None:
    def waits() -> str:
        try:
            tracely.call_tool("fetch", lambda: {}, args={"q": "a"}, errors=(TimeoutError,))
        except TimeoutError as exc:
            return f"gave up: {type(exc).__name__}"
        return "no"

    row = run_derived(CASE, waits, derived("timeout"), FaultConfig())
    assert (row["verdict"], row["output"]) == ("HANDLED", "gave up: TimeoutError")
    assert row["next"] == 'returned "gave up: TimeoutError"'
