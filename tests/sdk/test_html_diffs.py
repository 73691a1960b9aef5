"""Differences in a page: the words that changed inside a changed string, escaped."""

from __future__ import annotations

from examples import weather_agent
from tracely_sdk._html._diffs import MAX_WORDS, differences_view, word_diff


def test_only_the_changed_words_are_marked() -> None:
    old, new = word_diff(weather_agent.SYSTEM, weather_agent.REWRITTEN_SYSTEM) or ("", "")
    assert old == (
        "You are a <del>weather</del> assistant. <del>Use get_weather for current conditions</del>."
    )
    assert new == "You are a <ins>terse</ins> assistant. <ins>Answer in one sentence</ins>."


def test_marked_words_are_escaped() -> None:
    old, new = word_diff("say <b>hi</b>", "say <script>alert(1)</script>") or ("", "")
    assert "<script>" not in new and "<b>" not in old
    assert new == "say &lt;<ins>script</ins>&gt;<ins>alert(1)</ins>&lt;/<ins>script</ins>&gt;"
    assert old == "say &lt;<del>b</del>&gt;<del>hi</del>&lt;/<del>b</del>&gt;"


def test_strings_too_long_to_compare_word_by_word_are_shown_whole() -> None:
    long = "word " * (MAX_WORDS // 2 + 1)
    assert word_diff(long, long + "more") is None
    table = differences_view([{"path": "p", "recorded": long, "actual": long + "more"}])
    assert "<ins>" not in table and table.count(long.strip()) == 2


def test_a_difference_of_strings_is_marked_and_others_are_json() -> None:
    table = differences_view(
        [
            {"path": "messages[0].content", "recorded": "a cloudy day", "actual": "a sunny day"},
            {"path": "n", "recorded": 1, "actual": [1]},
            {"path": "gone", "recorded": "x"},
        ],
        labels=("version 1", "version 2"),
    )
    assert "<th>version 1</th><th>version 2</th>" in table
    assert "a <del>cloudy</del> day" in table and "a <ins>sunny</ins> day" in table
    assert '<td data-side="version 2"><span class="absent">(absent)</span></td>' in table
    assert '<pre class="json">[\n  <span class="jn">1</span>\n]</pre>' in table
    assert table.startswith('<div class="scroll"><table class="diff">')
