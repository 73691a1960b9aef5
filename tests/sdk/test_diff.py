"""The one diff renderer: path-level differences of two recorded values, and their text."""

from __future__ import annotations

from tracely_sdk._diff import diff_values, render


def test_a_changed_prompt_is_one_path_with_both_values() -> None:
    recorded = {"messages": [{"role": "system", "content": "You are a weather assistant."}]}
    actual = {"messages": [{"role": "system", "content": "You are a terse assistant."}]}
    differences, total = diff_values(recorded, actual)
    assert total == 1
    assert differences == [
        {
            "path": "messages[0].content",
            "recorded": "You are a weather assistant.",
            "actual": "You are a terse assistant.",
        }
    ]
    assert render(differences) == [
        'messages[0].content: recorded "You are a weather assistant." '
        'now "You are a terse assistant."'
    ]


def test_a_side_with_nothing_at_a_path_is_left_out_and_shown_absent() -> None:
    differences, _ = diff_values({"a": [1]}, {"a": [1, 2], "b": None}, "args")
    assert differences == [{"path": "args.a[1]", "actual": 2}, {"path": "args.b", "actual": None}]
    assert render(differences) == [
        "args.a[1]: recorded (absent) now 2",
        "args.b: recorded (absent) now null",
    ]


def test_canonical_comparison_ignores_key_order_and_parses_json_strings() -> None:
    assert diff_values({"a": 1, "b": [1, 2]}, {"b": (1, 2), "a": 1}) == ([], 0)
    assert diff_values('{"x": 1}', {"x": 1}) == ([], 0)
    # "42" is never 42, and 1 is never true
    assert diff_values({"id": "42", "n": 1}, {"id": 42, "n": True})[1] == 2


def test_beyond_the_limit_differences_are_counted_and_said_to_be_left_out() -> None:
    differences, total = diff_values(list(range(30)), list(range(1, 31)), limit=3)
    assert len(differences) == 3 and total == 30
    lines = render(differences, total - len(differences))
    assert lines[0] == "[0]: recorded 0 now 1"
    assert lines[-1] == "... and 27 more differences"


def test_long_strings_are_shown_around_where_they_first_differ() -> None:
    prefix = "word " * 100
    (line,) = render(diff_values(prefix + "sunny", prefix + "cloudy", "output")[0])
    assert line.startswith('output: recorded ..."') and "sunny" in line and "cloudy" in line
    assert len(line) < 300
