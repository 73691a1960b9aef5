"""Scenario files: what loads, and the error a bad one gets (naming the file and the field)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracely_sdk.cli import main
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

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "scenarios"


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
    assert [s.id for s in scenarios] == [
        "oslo",
        "paris-follow-up",
        "service-conversation",
        "unknown-city",
    ]
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


def test_the_docs_show_the_saved_value_example_as_the_live_tests_run_it() -> None:
    example = EXAMPLES / "service-conversation.yaml"
    readme = (ROOT / "docs" / "scenarios.md").read_text()
    shown = readme.split(f"(`{example.relative_to(ROOT)}`):\n\n```yaml\n")[1].split("```")[0]
    lines = example.read_text().splitlines()
    assert shown == "".join(f"{line}\n" for line in lines if not line.startswith("#"))


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


@pytest.mark.parametrize("bad", ["", "$..x", "$.a[*]", "$.a[?(@.b)]", "$.a[b]", "$.a[", 3])
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


# -- values carried between turns --------------------------------------------------------


def test_a_saved_value_is_defined_from_the_next_turn_on() -> None:
    scenario = scenario_from_data(
        minimal(
            target={"path": "/conversations", "body": {"q": "{{message}}"}, "reply": "$.reply"},
            turns=[
                {"user": "hi", "save": {"conversation": "$.id"}},
                {
                    "user": "again",
                    "path": "/conversations/{{conversation}}",
                    "headers": {"X-Conversation": "{{conversation}}"},
                    "body": {"q": "{{message}}", "id": "{{conversation}}"},
                },
            ],
        )
    )
    first, second = scenario.turns
    assert {k: str(v) for k, v in first.save.items()} == {"conversation": "$.id"}
    assert second.path == "/conversations/{{conversation}}"
    assert second.headers == {"X-Conversation": "{{conversation}}"}


@pytest.mark.parametrize(
    ("turns", "field"),
    [
        # used by the turn that saves it: not known yet
        ([{"user": "a", "save": {"cid": "$.id"}, "path": "/c/{{cid}}"}], "turns[0].path"),
        # the target's template is every turn's, the first included
        ([{"user": "a", "save": {"cid": "$.id"}}], "target.headers.X-Id"),
        # a typo of a saved name
        (
            [{"user": "a", "save": {"cid": "$.id"}}, {"user": "b", "body": {"c": "{{cdi}}"}}],
            "turns[1].body.c",
        ),
    ],
)
def test_an_unknown_variable_is_an_error_when_the_file_is_read(
    turns: list[dict[str, Any]], field: str
) -> None:
    target = {"shape": "message"}
    if field.startswith("target"):
        target["headers"] = {"X-Id": "{{cid}}"}  # type: ignore[assignment]
    with pytest.raises(ScenarioError) as err:
        scenario_from_data(minimal(target=target, turns=turns), source="s.yaml")
    assert f"s.yaml: {field}: unknown placeholder" in str(err.value)


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ({"shape": "message", "headers": {"X": "{{ conversation-id }}"}}, "is not a placeholder"),
        ({"shape": "message", "headers": [{"X": "y"}]}, "target.headers: must be a mapping"),
        ({"shape": "message", "allow_redirects_to": ["https://a.example/path"]}, "an origin"),
        ({"shape": "message", "allow_redirects_to": ["https://a.example:port"]}, "an origin"),
        ({"url": "http://127.0.0.1:99999"}, "http(s) URL"),
    ],
)
def test_a_bad_request_template_is_refused_when_read(target: dict[str, Any], words: str) -> None:
    with pytest.raises(ScenarioError, match=words.replace("(", r"\(").replace(")", r"\)")):
        scenario_from_data(minimal(target=target), source="s.yaml")


def test_a_save_may_not_replace_the_runners_own_values_but_the_conversation_id() -> None:
    with pytest.raises(ScenarioError, match=r"turns\[0\].save.message: message is the runner"):
        scenario_from_data(minimal(turns=[{"user": "a", "save": {"message": "$.m"}}]))
    scenario = scenario_from_data(
        minimal(turns=[{"user": "a", "save": {"conversation_id": "$.c"}}])
    )
    assert list(scenario.turns[0].save) == ["conversation_id"]


def test_headers_expand_only_the_environment_variables_the_file_names() -> None:
    target = {"shape": "message", "headers": {"Authorization": "Bearer ${HOME}"}}
    with pytest.raises(ScenarioError) as err:
        scenario_from_data(minimal(target=target), source="s.yaml")
    assert str(err.value).startswith("s.yaml: target.headers.Authorization: ${HOME} is not in")
    assert "env: [HOME]" in str(err.value)
    turn = {"user": "a", "headers": {"X-Key": "${SVC_KEY}"}}
    with pytest.raises(ScenarioError, match=r"turns\[0\].headers.X-Key: \$\{SVC_KEY\}"):
        scenario_from_data(minimal(turns=[turn]), source="s.yaml")
    allowed = scenario_from_data(minimal(target=target, env=["HOME"]))
    assert allowed.env == ("HOME",)


# -- hostile files -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"$ref": "http://127.0.0.1:9/schema.json"}, "points outside the file"),
        ({"$ref": "file:///etc/passwd"}, "points outside the file"),
        ({"properties": {"a": {"$ref": "other.json#/x"}}}, "points outside the file"),
        ({"$ref": "#/nowhere"}, "names nothing in the schema"),
        ({"$ref": "#nowhere"}, "names nothing in the schema"),
        ({"type": "nonsense"}, "not a valid JSON Schema at /type"),
        ({"$schema": "http://example.com/my-draft"}, "unknown $schema"),
        ({"properties": {"a": {"$id": "http://example.com/a"}}}, "no nested identifiers"),
        ({"type": "string", "pattern": "(a)\\1"}, "backreferences"),
        ({"$ref": "#"}, "a loop"),
        (
            {
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                "$ref": "#/$defs/a",
            },
            "a loop",
        ),
        ({"patternProperties": {"(?=x)": {}}}, "lookaround"),
    ],
)
def test_a_schema_that_could_fetch_read_or_fail_is_refused_when_read(
    schema: dict[str, Any], words: str
) -> None:
    turn = {"user": "hi", "expect": [{"json_schema": schema}]}
    with pytest.raises(ScenarioError) as err:
        scenario_from_data(minimal(turns=[turn]), source="s.yaml")
    assert str(err.value).startswith("s.yaml: turns[0].expect[0].json_schema: ")
    assert words in str(err.value)


def test_a_schema_that_refers_inside_itself_loads() -> None:
    schema = {
        "$defs": {"city": {"type": "string", "pattern": "^[A-Z]"}},
        "properties": {"city": {"$ref": "#/$defs/city"}, "alias": {"$anchor": "a"}},
        "items": {"$ref": "#a"},
    }
    turn = {"user": "hi", "expect": [{"json_schema": schema}]}
    assert scenario_from_data(minimal(turns=[turn])).turns[0].checks[0].value == schema


@pytest.mark.parametrize(
    "check",
    [{"regex": "(a)\\1"}, {"json_path": {"path": "$.a", "regex": "a(?!b)"}}],
)
def test_a_pattern_without_a_linear_time_match_is_refused_when_read(check: dict[str, Any]) -> None:
    turn = {"user": "hi", "expect": [check]}
    with pytest.raises(ScenarioError, match="not a regular expression tracely can run"):
        scenario_from_data(minimal(turns=[turn]), source="s.yaml")


ALIAS_BOMB = "\n".join(
    [
        "name: bomb",
        "turns: [{user: hi}]",
        "target:",
        "  path: /x",
        "  reply: $.r",
        "  body:",  # a request template: validating it walks every value
        '    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"    {chr(ord('a') + i)}: &{chr(ord('a') + i)} ["
            + ",".join([f"*{chr(ord('a') + i - 1)}"] * 9)
            + "]"
            for i in range(1, 9)
        ),
    ]
)


# Merge keys are expanded by the YAML loader itself: the bound must hold while it reads.
MERGE_BOMB = "\n".join(
    [
        "name: merges",
        "turns: [{user: hi}]",
        "a: &a {k: 1, j: 2}",
        *(
            f"m{i}: &m{i} {{<<: [" + ",".join([f"*{'a' if i == 1 else f'm{i - 1}'}"] * 9) + "]}"
            for i in range(1, 10)
        ),
    ]
)


@pytest.mark.parametrize("bomb", [ALIAS_BOMB, MERGE_BOMB], ids=["aliases", "merge-keys"])
def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path: Path, bomb: str) -> None:
    """`tracely scenarios list` on a few hundred bytes that stand for 9**9 values exits 2."""
    assert len(bomb) <= 616
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb)
    done = subprocess.run(
        [sys.executable, "-m", "tracely_sdk.cli", "scenarios", "list", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2, done.stderr
    assert "stands for more than 100000 values once its YAML aliases" in done.stderr


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name: x\nturns: &t [{user: hi, expect: [{equals: *t}]}]\n", "levels deep"),
        (
            "name: x\nturns: [{user: hi, expect: [{equals: " + "[" * 200 + "]" * 200 + "}]}]\n",
            "levels deep",
        ),
    ],
)
def test_a_file_that_contains_itself_or_nests_too_deep_is_refused(
    tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError, match=words):
        load_scenario(path)


_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.text(max_size=6),
    st.sampled_from(
        ["{{message}}", "{{x}}", "{{ a-b }}", "${HOME}", "$.id", "#/a", "/p", "(a)\\1"]
    ),
)
_fields = st.sampled_from(
    [
        *("user", "expect", "trace", "save", "path", "headers", "body", "reply", "shape", "url"),
        *("env", "contains", "regex", "json_schema", "json_path", "$ref", "pattern", "type"),
        *("allow_redirects_to", "stream_reply", "timeout_s", "equals", "exists", "id", "called"),
    ]
)
_data = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(_fields, inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "name": st.just("x"),
            "turns": st.lists(st.dictionaries(_fields, _data, max_size=5), min_size=1, max_size=3),
        },
        optional={"target": _data, "env": _data},
    )
)
def test_any_file_is_a_scenario_or_an_error_naming_the_field(data: dict[str, Any]) -> None:
    try:
        scenario_from_data(data, source="s.yaml")
    except ScenarioError as exc:
        assert str(exc).startswith("s.yaml:")


@pytest.mark.parametrize("schema", [{"type": "nonsense"}, {"$ref": "#/nowhere"}])
def test_an_invalid_schema_exits_2_when_the_file_is_read(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    schema: dict[str, Any],
) -> None:
    monkeypatch.delenv("TRACELY_STORE", raising=False)
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(minimal(turns=[{"user": "hi", "expect": [{"json_schema": schema}]}]))
    )
    status = main(["--no-color", "scenarios", "run", str(path), "--target", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert status == 2
    assert f"{path}: turns[0].expect[0].json_schema: " in err and "Traceback" not in err
