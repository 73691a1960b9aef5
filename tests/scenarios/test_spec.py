"""Scenario files: what loads, and the error a bad one gets (naming the file and the field)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracely_sdk.scenarios import (
    JSONPath,
    PathError,
    ScenarioError,
    load_scenario,
    load_scenarios,
    scenario_from_data,
)
from tracely_sdk.scenarios._jsonpath import MISSING
from tracely_sdk.scenarios._spec import fill

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def minimal(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "one turn",
        "target": {"shape": "message"},
        "turns": [{"user": "hi", "expect": [{"contains": "hello"}]}],
    }
    data.update(changes)
    return data


def test_the_example_scenarios_load() -> None:
    scenarios = load_scenarios([EXAMPLES])
    assert [s.id for s in scenarios] == ["oslo", "paris-follow-up", "unknown-city"]
    paris = next(s for s in scenarios if s.id == "paris-follow-up")
    assert paris.tags == ("smoke", "weather")
    assert [c.kind for c in paris.turns[0].trace_checks] == [
        "called",
        "max_llm_calls",
        "model",
        "no_errors",
    ]
    assert paris.turns[0].trace_checks[0].options == {"args": {"city": "Paris"}}
    assert paris.target.path == "/chat" and str(paris.target.reply) == "$.reply"


def test_a_minimal_scenario_gets_its_id_from_the_name() -> None:
    scenario = scenario_from_data(minimal(name="Paris, then Oslo!"))
    assert scenario.id == "paris-then-oslo"
    assert scenario.repeat == 1 and scenario.pass_threshold == 1.0


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"turns": []}, "turns", "at least one turn"),
        ({"turns": [{"expect": []}]}, "turns[0].user", "user's message"),
        (
            {"turns": [{"user": "hi", "expect": [{"contain": "x"}]}]},
            "turns[0].expect[0]",
            "exactly one of",
        ),
        (
            {"turns": [{"user": "hi", "expect": [{"regex": "("}]}]},
            "turns[0].expect[0].regex",
            "regular expression",
        ),
        (
            {"turns": [{"user": "hi", "expect": [{"called": "x"}]}]},
            "turns[0].expect[0]",
            "move it there",
        ),
        (
            {"turns": [{"user": "hi", "trace": [{"max_llm_calls": -1}]}]},
            "max_llm_calls",
            "whole number",
        ),
        (
            {"turns": [{"user": "hi", "trace": [{"no_errors": False}]}]},
            "no_errors",
            "no_errors: true",
        ),
        ({"target": {"shape": "soap"}}, "target.shape", "unknown shape"),
        ({"target": {"shape": "openai"}}, "target.model", "model"),
        (
            {"target": {"body": {"q": "{{question}}"}, "reply": "$.a"}},
            "target.body.q",
            "unknown placeholder",
        ),
        ({"target": {"url": "file:///etc/passwd"}}, "target.url", "http(s) URL"),
        ({"target": {"shape": "message", "reply": "$.a[?(@.x)]"}}, "target.reply", "cannot read"),
        ({"pass_threshold": 0}, "pass_threshold", "fraction"),
        ({"id": "Not An Id"}, "id", "lowercase"),
        ({"extra": 1}, "", "unknown field(s) extra"),
    ],
)
def test_a_bad_scenario_names_the_field(change: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ScenarioError) as err:
        scenario_from_data(minimal(**change), source="s.yaml")
    message = str(err.value)
    assert message.startswith("s.yaml:")
    assert field in message and words in message


def test_yaml_tags_never_build_objects(tmp_path: Path) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text("name: !!python/object/apply:os.system ['touch pwned']\nturns: []\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(path)
    assert not (tmp_path / "pwned").exists()


def test_a_path_that_does_not_exist_is_an_error_not_an_empty_selection(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no such scenario file or directory"):
        load_scenarios([tmp_path / "scenarioz"])


def test_two_files_with_one_id_are_refused(tmp_path: Path) -> None:
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(minimal(id="same")))
    with pytest.raises(ScenarioError, match="also used by"):
        load_scenarios([tmp_path])


def test_fill_keeps_a_whole_placeholder_typed_and_formats_inline_ones() -> None:
    template = {"messages": "{{messages}}", "q": "turn {{turn}}: {{message}}", "n": 3}
    filled = fill(template, {"messages": [{"role": "user"}], "turn": 2, "message": "hi"})
    assert filled == {"messages": [{"role": "user"}], "q": "turn 2: hi", "n": 3}


# -- JSON paths ---------------------------------------------------------------------------


def test_json_paths_select_by_key_and_index() -> None:
    doc = {"choices": [{"message": {"content": "hi"}}], "a b": {"c": [1, 2, 3]}}
    assert JSONPath("$.choices[0].message.content").get(doc) == "hi"
    assert JSONPath("choices[-1].message").get(doc) == {"content": "hi"}
    assert JSONPath("$['a b'].c[2]").get(doc) == 3
    assert JSONPath("$.choices[1]").get(doc) is MISSING
    assert JSONPath("$.choices.x").get(doc) is MISSING
    assert JSONPath("$").get(doc) is doc


@pytest.mark.parametrize("bad", ["", "$..x", "$.a[*]", "$.a[?(@.b)]", "$.a()", 3])
def test_json_paths_outside_the_language_are_refused(bad: Any) -> None:
    with pytest.raises(PathError):
        JSONPath(bad)


_keys = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)
_steps = st.lists(st.one_of(_keys, st.integers(min_value=0, max_value=3)), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(_steps)
def test_a_path_written_from_steps_selects_what_it_names(steps: list[Any]) -> None:
    """Build a document holding a marker at the steps, write the path, and read it back."""
    marker = object()
    doc: Any = marker
    for step in reversed(steps):
        doc = [None] * step + [doc] if isinstance(step, int) else {step: doc}
    text = "$" + "".join(
        f"[{s}]"
        if isinstance(s, int)
        else "['" + s.replace("\\", "\\\\").replace("'", "\\'") + "']"
        for s in steps
    )
    assert JSONPath(text).get(doc) is marker
