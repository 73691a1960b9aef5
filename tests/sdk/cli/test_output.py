"""Plain text off a terminal, rich on one; rich is optional."""

from __future__ import annotations

import io
import sys

import pytest

from tracely_sdk._runner import CaseResult
from tracely_sdk.cli._output import Output, rich_available, terminal_safe


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


RESULTS = [
    CaseResult("paris-weather", 2, "Paris", "PASS", duration=0.01),
    CaseResult(
        "oslo-weather",
        1,
        "Oslo",
        "FAIL",
        [
            "recorded call(s) never made: tools:get_weather",
            "output differs from the expected output",
        ],
        diff='output: recorded "a" now "b"',
        duration=0.02,
    ),
]


def test_plain_when_not_a_terminal() -> None:
    out = Output(stdout=io.StringIO())
    assert not out.fancy


def test_rich_on_a_terminal_unless_no_color_or_dumb(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TERM", raising=False)
    assert Output(stdout=Terminal()).fancy is rich_available()
    assert not Output(stdout=Terminal(), color=False).fancy
    monkeypatch.setenv("TERM", "dumb")
    assert not Output(stdout=Terminal()).fancy


def test_plain_when_rich_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TERM", raising=False)
    monkeypatch.setitem(sys.modules, "rich", None)  # import rich now raises ImportError
    assert not rich_available()
    stream = Terminal()
    out = Output(stdout=stream)
    assert not out.fancy
    with out.progress(2) as advance:
        advance(RESULTS[0])
    out.verdicts(RESULTS)
    assert "CASE" in stream.getvalue() and "\x1b[" not in stream.getvalue()


def test_plain_table_aligns_and_shortens_one_column() -> None:
    stream = io.StringIO()
    out = Output(stdout=stream)
    out.table(["A", "LONG"], [["x", "y" * 500], ["wide cell", "z"]], shrink=1)
    header, first, second = stream.getvalue().splitlines()
    assert header.startswith("A          LONG")
    assert first.startswith("x          yyy") and first.endswith("…") and len(first) == 160
    assert second == "wide cell  z"


def test_plain_verdicts() -> None:
    stream = io.StringIO()
    Output(stdout=stream).verdicts(RESULTS, elapsed=0.5)
    text = stream.getvalue()
    lines = text.splitlines()
    assert lines[0].split() == ["CASE", "VERSION", "VERDICT", "REASON"]
    assert lines[1].startswith(  # natural order of case ids
        "oslo-weather   1        FAIL     recorded call(s) never made: tools:get_weather (+1 more)"
    )
    assert lines[2].split() == ["paris-weather", "2", "PASS"]
    assert (
        "FAIL oslo-weather v1 (Oslo)\n  - recorded call(s) never made: tools:get_weather\n" in text
    )
    assert '    output: recorded "a" now "b"' in text
    assert lines[-1] == "2 cases: 1 passed, 1 failed in 0.50s"
    assert "\x1b[" not in text


@pytest.mark.skipif(not rich_available(), reason="rich is not installed")
def test_rich_verdicts_and_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TERM", raising=False)
    monkeypatch.setenv("COLUMNS", "120")
    stream = Terminal()
    out = Output(stdout=stream)
    assert out.fancy
    with out.progress(2) as advance:
        for r in RESULTS:
            advance(r)
    out.verdicts(RESULTS)
    text = stream.getvalue()
    assert "paris-weather" in text and "FAIL oslo-weather v1 (Oslo)" in text
    assert "2 cases: 1 passed, 1 failed" in text
    assert "\x1b[" in text  # styled


def test_json_is_plain_even_on_a_terminal() -> None:
    stream = Terminal()
    Output(stdout=stream).json({"case_id": "x", "verdict": "PASS"})
    assert stream.getvalue() == '{\n  "case_id": "x",\n  "verdict": "PASS"\n}\n'


def test_errors_are_one_line_on_stderr() -> None:
    err = io.StringIO()
    Output(stdout=io.StringIO(), stderr=err).error("no case 'x'")
    assert err.getvalue() == "tracely: error: no case 'x'\n"


UNSAFE = "\x1b[2J\x1b]8;;https://x.example/\x1b\\link\x1b]8;;\x1b\\\x07\r\x9b31m\u202egnp.exe"


def test_terminal_safe_escapes_what_a_terminal_would_act_on() -> None:
    assert terminal_safe(UNSAFE) == (
        "\\x1b[2J\\x1b]8;;https://x.example/\\x1b\\link\\x1b]8;;\\x1b\\\\x07\\x0d\\x9b31m"
        "\\u202egnp.exe"
    )
    assert terminal_safe("line\n\tindented, é, 😀") == "line\n\tindented, é, 😀"


@pytest.mark.parametrize("fancy", [False, True])
def test_every_primitive_prints_stored_values_escaped(
    fancy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TERM", raising=False)
    if fancy and not rich_available():
        pytest.skip("rich is not installed")
    stdout, stderr = (Terminal(), Terminal()) if fancy else (io.StringIO(), io.StringIO())
    out = Output(stdout=stdout, stderr=stderr)
    assert out.fancy is fancy
    out.line(UNSAFE)
    out.fields([("name", UNSAFE)])
    out.table(["CASE", "REASON"], [[UNSAFE, UNSAFE]], title=UNSAFE, shrink=1)
    result = CaseResult(UNSAFE, 1, UNSAFE, "FAIL", [UNSAFE], diff=UNSAFE, duration=0.01)
    with out.progress(1) as advance:
        advance(result)
    out.verdicts([result])
    out.json({"value": UNSAFE})
    out.note(UNSAFE)
    out.error(UNSAFE)
    printed = stdout.getvalue() + stderr.getvalue()
    # (rich's progress bar redraws with carriage returns and colours with CSI of its own.)
    for control in ("\x1b]", "\x1b[2J", "\x07", "\x9b", "\u202e"):
        assert control not in printed
    assert "\\x1b[2J" in printed and "\\x0d" in printed
