"""Checks on a reply and on a turn's recorded trace: each says what it expected and what came."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracely_sdk.scenarios import (
    Check,
    Failure,
    NotEvaluated,
    ScenarioError,
    TraceCalls,
    check_budget,
    check_reply,
    check_trace,
)
from tracely_sdk.scenarios._spec import scenario_from_data

ROOT = Path(__file__).resolve().parents[2]


def check(spec: dict[str, Any], *, on_trace: bool = False) -> Check:
    turn = {"user": "hi", ("trace" if on_trace else "expect"): [spec]}
    data = {"name": "x", "target": {"shape": "message"}, "turns": [turn]}
    return scenario_from_data(data).turns[0].checks[0]


REPLY = "It's 18°C and cloudy in Paris."
RESPONSE = {"reply": REPLY, "meta": {"city": "Paris", "n": 2}}


@pytest.mark.parametrize(
    ("spec", "holds"),
    [
        ({"contains": "Paris"}, True),
        ({"contains": ["Paris", "18°C"]}, True),
        ({"contains": "paris"}, False),
        ({"contains": "paris", "ignore_case": True}, True),
        ({"not_contains": "Sorry"}, True),
        ({"not_contains": ["Sorry", "cloudy"]}, False),
        ({"regex": r"\d+°C"}, True),
        ({"regex": r"^Sorry"}, False),
        ({"equals": REPLY}, True),
        ({"equals": "It's 18°C."}, False),
        ({"json_path": {"path": "$.meta.city", "equals": "Paris"}}, True),
        ({"json_path": {"path": "$.meta.n", "equals": 3}}, False),
        ({"json_path": {"path": "$.meta.city", "regex": "^P"}}, True),
        ({"json_path": {"path": "$.meta.zip", "exists": False}}, True),
        ({"json_path": {"path": "$.meta.zip", "contains": "7"}}, False),
        ({"latency_ms": 500}, True),
        ({"latency_ms": 100}, False),
    ],
)
def test_reply_checks(spec: dict[str, Any], holds: bool) -> None:
    failure = check_reply(check(spec), REPLY, RESPONSE, latency_ms=250.0)
    assert (failure is None) == holds, failure


def test_a_failed_check_says_what_was_expected_and_what_came_back() -> None:
    failure = check_reply(check({"contains": "Oslo"}), REPLY, RESPONSE, 1.0)
    assert failure is not None
    assert str(failure) == (
        "contains 'Oslo': expected the reply to contain 'Oslo'; "
        'got "It\'s 18°C and cloudy in Paris."'
    )


def test_json_schema_checks_the_reply_as_json() -> None:
    schema = {
        "type": "object",
        "properties": {"temp_c": {"type": "integer"}},
        "required": ["temp_c"],
    }
    c = check({"json_schema": schema})
    assert check_reply(c, '{"temp_c": 18}', {}, 1.0) is None
    failure = check_reply(c, '{"temp_c": "warm"}', {}, 1.0)
    assert failure is not None and "is not of type 'integer'" in failure.got
    assert "temp_c" in failure.got
    failure = check_reply(c, "not json", {}, 1.0)
    assert failure is not None and "JSON" in failure.expected


BUNDLE = {
    "tools": {
        "get_weather": [
            {"args": {"city": "Paris"}, "output": {"temp_c": 18}, "seq": 2},
            {"args": '{"city": "Oslo"}', "error": {"type": "E", "message": "m"}, "seq": 3},
        ]
    },
    "llm": {"gpt-4o": [{"input": [], "output": "a", "seq": 1}, {"input": [], "output": "b"}]},
    "incomplete": [{"label": "llm:claude-x", "reason": "no content captured"}],
}


@pytest.mark.parametrize(
    ("spec", "holds"),
    [
        ({"called": "get_weather"}, True),
        ({"called": "get_weather", "args": {"city": "Paris"}}, True),
        ({"called": "get_weather", "args": {"city": "Oslo"}}, True),  # JSON-string args too
        ({"called": "get_weather", "args": {"city": "Lisbon"}}, False),
        ({"called": "book_flight"}, False),
        ({"not_called": "book_flight"}, True),
        ({"not_called": "get_weather"}, False),
        ({"max_llm_calls": 3}, True),  # the call recorded without content counts
        ({"max_llm_calls": 2}, False),
        ({"max_tool_calls": 1}, False),
        ({"model": "gpt-4o"}, True),
        ({"model": "claude-x"}, True),
        ({"model": "gpt-5"}, False),
        ({"no_errors": True}, False),
    ],
)
def test_trace_checks(spec: dict[str, Any], holds: bool) -> None:
    failure = check_trace(check(spec, on_trace=True), TraceCalls.of(BUNDLE))
    assert (failure is None) == holds, failure


def test_no_errors_names_what_errored_including_the_turn_itself() -> None:
    clean = {"tools": {"t": [{"args": {}, "output": 1}]}}
    c = check({"no_errors": True}, on_trace=True)
    assert check_trace(c, TraceCalls.of(clean)) is None
    failure = check_trace(c, TraceCalls.of(clean, status="error"))
    assert failure is not None and "root span" in failure.got
    failure = check_trace(c, TraceCalls.of(BUNDLE))
    assert failure is not None and failure.got == "errored: tools:get_weather"


# -- evidence: every instrumentor's calls, and never a pass on none -------------------------


def summary(*calls: dict[str, Any], spans: int = 4, **extra: Any) -> dict[str, Any]:
    """A bundle with a trace summary, as the extractor makes for another instrumentor's trace."""
    return {"tools": {}, "llm": {}, "trace": {"spans": spans, "calls": list(calls), **extra}}


JS_TURN = summary(
    {"kind": "agent", "name": "support", "by": "otel-genai"},
    {"kind": "tool", "name": "lookup_order", "by": "otel-genai", "args": '{"order_id": "42"}',
     "result": {"status": "shipped"}},
    {"kind": "tool", "name": "issue_refund", "by": "otel-genai", "args": {"order_id": "42"},
     "error": "RefundDenied"},
    {"kind": "llm", "name": "gpt-4o-mini", "by": "otel-genai", "usage": [30, 12],
     "input": [{"role": "user", "parts": [{"type": "text", "content": "refund order 42"}]}]},
)  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "holds"),
    [
        ({"called": "lookup_order", "args": {"order_id": "42"}}, True),
        ({"called": "lookup_order", "result": {"status": "shipped"}}, True),
        ({"called": "lookup_order", "result": {"status": "lost"}}, False),
        ({"called": "lookup_order", "times": 1}, True),
        ({"called": "lookup_order", "times": 2}, False),
        ({"not_called": "issue_refund"}, False),
        ({"max_tool_calls": 0}, False),
        ({"max_tool_calls": 2}, True),
        ({"no_errors": True}, False),
        ({"trajectory": ["lookup_order", "issue_refund"]}, True),
        ({"trajectory": ["issue_refund"]}, True),
        ({"trajectory": ["issue_refund"], "exact": True}, False),
        ({"trajectory": ["issue_refund", "lookup_order"]}, False),
        ({"llm_input": "refund order 42"}, True),
        ({"llm_input": "REFUND", "ignore_case": True}, True),
        ({"llm_input": "Paris"}, False),
        ({"max_tokens": 42}, True),
        ({"max_tokens": 41}, False),
        ({"model": "gpt-4o-mini"}, True),
    ],
)
def test_trace_checks_read_another_instrumentors_calls(spec: dict[str, Any], holds: bool) -> None:
    result = check_trace(check(spec, on_trace=True), TraceCalls.of(JS_TURN))
    assert not isinstance(result, NotEvaluated), result
    assert (result is None) == holds, result


NO_CALLS = summary({"kind": "agent", "name": "support", "by": "otel-genai"})


@pytest.mark.parametrize(
    "spec",
    [
        {"not_called": "issue_refund"},
        {"max_tool_calls": 0},
        {"max_llm_calls": 0},
        {"max_tokens": 100},
        {"llm_input": "hi"},
    ],
)
def test_a_check_of_absence_is_not_evaluated_without_evidence(spec: dict[str, Any]) -> None:
    c = check(spec, on_trace=True)
    result = check_trace(c, TraceCalls.of(NO_CALLS))
    assert isinstance(result, NotEvaluated), result
    assert "the trace's 4 span(s) (1 agent call(s)) hold no span read as" in result.why
    assert "assume_complete: true" in result.why
    # The scenario says every call is traced: none seen is none made.
    opted = check_trace(c, TraceCalls.of(NO_CALLS), assume_complete=True)
    if "llm_input" in spec:
        assert isinstance(opted, Failure)  # an input is something that must be there
    else:
        assert opted is None


def test_tracelys_own_agent_counts_are_evidence_of_no_call() -> None:
    counted = summary(
        {"kind": "agent", "name": "a", "by": "tracely", "counted": {"tools": 0, "llm": 0}}
    )
    for spec in ({"not_called": "x"}, {"max_tool_calls": 0}, {"max_llm_calls": 0}):
        assert check_trace(check(spec, on_trace=True), TraceCalls.of(counted)) is None


def test_what_a_span_did_not_record_is_not_evaluated() -> None:
    unrecorded = summary(
        {"kind": "tool", "name": "lookup_order", "by": "openinference"},
        {"kind": "llm", "name": "m", "by": "openinference"},
    )
    calls = TraceCalls.of(unrecorded)
    for spec, words in (
        ({"called": "lookup_order", "result": {"a": 1}}, "result recorded"),
        ({"max_tokens": 10}, "no token usage recorded for LLM call(s) m"),
        ({"llm_input": "hi"}, "input recorded"),
    ):
        result = check_trace(check(spec, on_trace=True), calls)
        assert isinstance(result, NotEvaluated) and words in result.why, result


def test_a_summary_entry_names_the_bundle_entry_it_is() -> None:
    bundle = {
        "tools": {"get_weather": [{"seq": 1, "args": {"city": "Paris"}, "output": {"t": 18}}]},
        "llm": {},
        "trace": {
            "spans": 2,
            "calls": [{"kind": "tool", "name": "get_weather", "by": "tracely", "seq": 1}],
        },
    }
    (call,) = TraceCalls.of(bundle).tools
    assert (call.args, call.result) == ({"city": "Paris"}, {"t": 18})


def test_the_report_says_what_the_trace_held() -> None:
    assert TraceCalls.of(JS_TURN).to_dict()["held"] == {
        "spans": 4,
        "agent": {"otel-genai": 1},
        "tool": {"otel-genai": 2},
        "llm": {"otel-genai": 1},
    }


def test_a_scenario_budget_sums_every_turn() -> None:
    turns = [TraceCalls.of(JS_TURN), TraceCalls.of(JS_TURN)]
    assert check_budget("budget", 84, turns) is None
    failure = check_budget("budget", 83, turns)
    assert isinstance(failure, Failure) and failure.got == "84 over 2 LLM call(s)"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"span_format": "zipkin"}, "unknown span format(s) zipkin"),
        ({"assume_complete": "yes"}, "true or false"),
        ({"max_tokens": -5}, "whole number"),
        ({"turns": [{"user": "hi", "trace": [{"trajectory": "a"}]}]}, "list of tool names"),
        ({"turns": [{"user": "hi", "trace": [{"called": "a", "times": 0}]}]}, "whole number ≥ 1"),
        (
            {"turns": [{"user": "hi", "trace": [{"max_tokens": 1, "exact": True}]}]},
            "no option exact",
        ),
    ],
)
def test_evidence_settings_and_new_checks_are_validated(change: dict[str, Any], words: str) -> None:
    data = {"name": "x", "target": {"shape": "message"}, "turns": [{"user": "hi"}], **change}
    with pytest.raises(ScenarioError, match=re.escape(words)):
        scenario_from_data(data)


EVIL = "^(a+)+$"  # exponential on a backtracking engine
REDOS = f"""
import json, sys
from tracely_sdk.scenarios import check_reply, scenario_from_data

checks = [
    {{"regex": "{EVIL}"}},
    {{"json_path": {{"path": "$.reply", "regex": "{EVIL}"}}}},
    {{"json_schema": {{"type": "string", "pattern": "{EVIL}"}}}},
]
data = {{"name": "x", "target": {{"shape": "message"}}, "turns": [{{"user": "hi", "expect": checks}}]}}
reply = "a" * 34 + "!"
json_reply = json.dumps(reply)
for check in scenario_from_data(data).turns[0].checks:
    text = json_reply if check.kind == "json_schema" else reply
    failure = check_reply(check, text, {{"reply": reply}}, 1.0)
    print(check.kind, failure is not None)
"""


def test_patterns_run_in_linear_time_on_a_catastrophic_input() -> None:
    """In a process of its own: a backtracking engine would hold it for hours."""
    done = subprocess.run(
        [sys.executable, "-c", REDOS],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["regex True", "json_path True", "json_schema True"]
    assert done.stderr == ""  # RE2 says nothing on stderr either


def test_a_schema_that_loops_on_one_value_only_fails_its_check_without_raising() -> None:
    schema = {"if": {"const": "spin"}, "then": {"$ref": "#"}}
    c = check({"json_schema": schema})  # no probe of the file's reader meets "spin"
    assert check_reply(c, '"calm"', {}, 1.0) is None
    failure = check_reply(c, '"spin"', {}, 1.0)
    assert failure is not None and "a loop" in failure.got


def test_a_schema_made_in_code_never_fetches_its_reference() -> None:
    """Files are checked when read; a schema given in code still resolves nothing remote."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"type": "integer"}')

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/schema.json"
        failure = check_reply(Check("json_schema", {"$ref": url}), "1", {}, 1.0)
    finally:
        server.shutdown()
        server.server_close()
    assert hits == []
    assert failure is not None and f"refers to {url!r}, which is not in it" in failure.got


_schema_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from(["#", "#/$defs/a", "#a", "string", "object", "^a", "(a+)+$", "http://x/s"]),
)
_keywords = st.sampled_from(
    [
        *("$ref", "$defs", "a", "type", "pattern", "patternProperties", "properties", "items"),
        *("additionalProperties", "$anchor", "$id", "$schema", "required", "allOf", "not"),
    ]
)
_schemas = st.dictionaries(
    _keywords,
    st.recursive(
        _schema_leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(_keywords, inner, max_size=4)
        ),
        max_leaves=20,
    ),
    max_size=5,
)
_instances = st.recursive(
    st.one_of(st.none(), st.integers(), st.text(max_size=4)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(_schemas, _instances)
def test_a_schema_the_file_may_hold_judges_any_reply_without_raising(
    schema: dict[str, Any], instance: Any
) -> None:
    try:
        c = check({"json_schema": schema})
    except ScenarioError:
        return
    check_reply(c, json.dumps(instance), {}, 1.0)
