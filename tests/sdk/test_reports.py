"""JUnit XML, the JSON report and the Markdown step summary."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import orjson

from tracely_sdk._html._render import report_document
from tracely_sdk._reports import (
    REPORT_FORMAT,
    append_step_summary,
    format_result,
    json_report,
    junit_xml,
    markdown_summary,
    merge_reports,
    summarize,
    summary_line,
    write_json,
    write_junit,
)
from tracely_sdk._runner import CaseResult, ReplayCase, run_case

MISS = "no recorded call for tools:get_weather (the recording has no tool calls)"


def results() -> list[CaseResult]:
    report = {
        "mode": "recorded",
        "served": ["llm:m"],
        "unused": ["tools:get_weather"],
        "diverged": [],
        "live": [],
        "errors": [],
    }
    return [
        CaseResult(
            "a-pass",
            2,
            "A",
            "PASS",
            [],
            "ok",
            "ok",
            None,
            {**report, "unused": []},
            0.01,
            "a" * 32,
            "m:run",
        ),
        CaseResult(
            "b-fail",
            1,
            "B",
            "FAIL",
            [
                "recorded call(s) never made: tools:get_weather",
                "output differs from the expected output",
            ],
            "Let me check",
            "It's 18°C",
            'output: recorded "It\'s 18°C" now "Let me check"',
            report,
            0.02,
            "b" * 32,
            "m:run",
        ),
        CaseResult(
            "c-incomplete",
            1,
            "C",
            "INCOMPLETE",
            [MISS],
            None,
            "x",
            None,
            report,
            0.03,
            None,
            "m:run",
        ),
        CaseResult(
            "d-errored",
            None,
            "D",
            "ERRORED",
            ["the agent raised RuntimeError: <&> \x00\x1b bad"],
            traceback="Traceback...\nRuntimeError",
        ),
        CaseResult(
            "e-lenient", 1, "E", "LENIENT", [], "ok", "ok", None, {**report, "mode": "lenient"}, 0.0
        ),
    ]


def test_summary_counts_and_gate() -> None:
    s = summarize(results())
    assert s == {
        "total": 5,
        "passed": 1,
        "failed": 1,
        "incomplete": 1,
        "errored": 1,
        "lenient": 1,
        "not_run": 0,
        "ok": False,
        "mode": "lenient",
        "duration_s": 0.06,
    }
    assert summarize(results()[:1])["ok"] is True
    assert summarize(results()[:1], elapsed=1.5)["duration_s"] == 1.5
    assert summary_line(results()[:2], elapsed=0.5) == "2 cases: 1 passed, 1 failed in 0.50s"


def test_junit_is_well_formed_with_one_testcase_per_case(tmp_path: Path) -> None:
    path = write_junit(results(), tmp_path / "out" / "junit.xml", elapsed=0.25)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert suite.get("tests") == "5" and suite.get("failures") == "2" and suite.get("errors") == "1"
    assert suite.get("time") == "0.250000" and suite.get("timestamp")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "a-pass",
        "b-fail",
        "c-incomplete",
        "d-errored",
        "e-lenient",
    ]
    for case in cases:
        assert float(case.get("time") or "x") >= 0
        assert case.get("classname", "").startswith("tracely")
        props = {p.get("name"): p.get("value") for p in case.findall("properties/property")}
        assert props["tracely.verdict"] in ("PASS", "FAIL", "INCOMPLETE", "ERRORED", "LENIENT")
    passed, failed, incomplete, errored, lenient = cases
    assert passed.find("failure") is None and passed.find("error") is None
    props = {p.get("name"): p.get("value") for p in passed.findall("properties/property")}
    assert props == {
        "tracely.verdict": "PASS",
        "tracely.case.name": "A",
        "tracely.case.version": "2",
        "tracely.trace_id": "a" * 32,
    }
    failure = failed.find("failure")
    assert failure is not None and failure.get("type") == "FAIL"
    assert failure.get("message") == "recorded call(s) never made: tools:get_weather"
    assert "output differs" in (
        failure.text or ""
    ) and 'output: recorded "It\'s 18°C" now "Let me check"' in (failure.text or "")
    inc = incomplete.find("failure")
    assert inc is not None and inc.get("type") == "INCOMPLETE" and inc.get("message") == MISS
    error = errored.find("error")
    assert error is not None and error.get("type") == "ERRORED"
    # characters XML cannot carry are replaced, markup characters survive as text
    assert error.get("message") == "the agent raised RuntimeError: <&> \ufffd\ufffd bad"
    assert "Traceback" in (error.text or "")
    assert lenient.find("failure") is None  # lenient with nothing to report does not fail
    assert junit_xml([]).startswith(b"<?xml")


def test_json_report_has_stable_field_names(tmp_path: Path) -> None:
    path = write_json(results(), tmp_path / "r.json", elapsed=0.5)
    data = orjson.loads(path.read_bytes())
    assert data == orjson.loads(orjson.dumps(json_report(results(), elapsed=0.5)))
    assert data["format"] == REPORT_FORMAT
    assert data["summary"]["duration_s"] == 0.5 and data["summary"]["ok"] is False
    fail = data["cases"][1]
    assert set(fail) >= {
        "case_id",
        "version",
        "verdict",
        "reasons",
        "output",
        "expected_output",
        "served",
        "unused",
        "diverged",
        "duration_s",
        "trace_id",
    }
    assert fail["case_id"] == "b-fail" and fail["verdict"] == "FAIL" and fail["version"] == 1
    assert fail["unused"] == ["tools:get_weather"] and fail["served"] == ["llm:m"]
    assert fail["output"] == "Let me check" and fail["expected_output"] == "It's 18°C"
    assert fail["trace_id"] == "b" * 32 and fail["duration_s"] == 0.02
    errored = data["cases"][3]
    assert errored["served"] == [] and errored["version"] is None and errored["trace_id"] is None


def test_markdown_summary_is_appended_to_the_step_summary(tmp_path: Path) -> None:
    target = tmp_path / "summary.md"
    target.write_text("# earlier step\n")
    assert append_step_summary(results(), environ={}) is None
    assert append_step_summary(results(), environ={"GITHUB_STEP_SUMMARY": str(target)}) == target
    text = target.read_text()
    assert text.startswith("# earlier step\n### tracely replay: 5 cases: 1 passed, 1 failed")
    assert "| Case | Version | Verdict | Reasons |" in text
    assert (
        "| `b-fail` | 1 | ❌ FAIL | recorded call(s) never made: tools:get_weather<br>output differs"
        in text
    )
    assert "<summary>b-fail: what differed</summary>" in text
    assert '```\noutput: recorded "It\'s 18°C" now "Let me check"\n```' in text
    md = markdown_summary(results())
    assert md.count("\n| `") == 5


def test_markdown_escapes_table_breaking_text() -> None:
    r = CaseResult("x", 1, "X", "FAIL", ["a | b\nc <b>"])
    line = next(ln for ln in markdown_summary([r]).splitlines() if ln.startswith("| `x`"))
    assert "a \\| b c &lt;b&gt;" in line


def test_format_result_is_the_shared_text() -> None:
    text = format_result(results()[1])
    assert text.splitlines()[0] == "FAIL b-fail v1 (B)"
    assert "  - recorded call(s) never made: tools:get_weather" in text
    assert '    output: recorded "It\'s 18°C" now "Let me check"' in text
    assert text.endswith("trace " + "b" * 32)


def diverged_result() -> CaseResult:
    divergence = {
        "label": "llm:m",
        "entry": "llm:m #1 (seq 1)",
        "seq": 1,
        "field": "input",
        "recorded": {"messages": [{"content": "You are a weather assistant."}]},
        "actual": {"messages": [{"content": "You are a terse assistant."}]},
        "differences": [
            {
                "path": "messages[0].content",
                "recorded": "You are a weather assistant.",
                "actual": "You are a terse assistant.",
            }
        ],
        "omitted": 0,
    }
    return CaseResult(
        "d-diverged",
        1,
        "D",
        "FAIL",
        ["served despite a different input: llm:m"],
        report={"mode": "recorded", "diverged": ["llm:m"], "divergences": [divergence]},
        trace_id="d" * 32,
    )


LINE = (
    'messages[0].content: recorded "You are a weather assistant." now "You are a terse assistant."'
)


def test_every_report_shows_what_a_diverged_call_differed_in(tmp_path: Path) -> None:
    result = diverged_result()
    text = format_result(result)
    assert "    llm:m #1 (seq 1) was served despite a different input:" in text
    assert "      " + LINE in text
    (case,) = json_report([result])["cases"]
    assert case["divergences"] == result.divergences
    assert case["divergences"][0]["differences"][0]["path"] == "messages[0].content"
    failure = ET.fromstring(junit_xml([result])).find("testsuite/testcase/failure")
    assert failure is not None and LINE in (failure.text or "")
    assert LINE in markdown_summary([result])


def test_the_otlp_endpoint_of_a_run_is_read_as_the_sdk_reads_it() -> None:
    from tracely_sdk._reports import otlp_endpoint

    assert otlp_endpoint({}) is None
    assert otlp_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == "http://c:4318"
    assert (
        otlp_endpoint(
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://u:secret@t:4318/v1/traces",
            }
        )
        == "https://u:***@t:4318/v1/traces"
    )
    assert (
        otlp_endpoint(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_EXPORTER": "console"}
        )
        is None
    )
    assert (
        otlp_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"})
        is None
    )


def test_a_tool_served_on_other_args_in_lenient_mode_shows_its_args() -> None:
    from tracely_sdk._reports import difference_lines

    lines = difference_lines(
        None,
        [
            {
                "entry": "tools:get_weather #1 (seq 2)",
                "field": "args",
                "differences": [{"path": "city", "recorded": "Paris", "actual": "Lyon"}],
                "omitted": 3,
            }
        ],
    )
    assert lines == [
        "tools:get_weather #1 (seq 2) was served despite different args:",
        '  city: recorded "Paris" now "Lyon"',
        "  ... and 3 more differences",
    ]


def _unreachable_backend(city: str) -> str:
    raise ConnectionError(f"backend refused {city}: token=ghp_0123456789abcdefghijABCDEFGHIJ")


def errored_result() -> CaseResult:
    case = ReplayCase("lima", "Lima", 1, None, {"args": ["Lima"]}, "18°C", {})
    return run_case(case, _unreachable_backend)


def test_an_errored_case_shows_its_traceback_in_every_report(tmp_path: Path) -> None:
    result = errored_result()
    assert result.verdict == "ERRORED"
    raised = "ConnectionError: backend refused Lima: token=[REDACTED]"
    where = "in _unreachable_backend"

    text = format_result(result)
    assert f"  - the agent raised {raised}" in text
    assert "    Traceback (most recent call last):" in text and where in text
    assert f"    {raised}" in text

    case = orjson.loads(write_json([result], tmp_path / "r.json").read_bytes())["cases"][0]
    assert case["error"] == {"type": "ConnectionError", "message": raised.partition(": ")[2]}
    assert where in case["traceback"] and case["traceback"].rstrip().endswith("not shown)")

    error = ET.fromstring(junit_xml([result])).find("testsuite/testcase/error")
    assert error is not None and where in (error.text or "") and raised in (error.text or "")

    page = report_document(json_report([result]))
    assert "actual: the agent raised <code>" + raised + "</code>" in page
    assert "<details open><summary>Traceback</summary>" in page and where in page

    for shown in (text, orjson.dumps(case).decode(), junit_xml([result]).decode(), page):
        assert "ghp_" not in shown and "_runner.py" not in shown


def test_every_report_lists_cases_in_natural_order() -> None:
    ids = ["city10", "City2", "city1", "city02", "city"]
    named = [CaseResult(i, 1, i, "FAIL", ["output differs"]) for i in ids]
    natural = ["city", "city1", "City2", "city02", "city10"]
    assert [c["case_id"] for c in json_report(named)["cases"]] == natural
    junit = ET.fromstring(junit_xml(named)).findall("testsuite/testcase")
    assert [t.get("name") for t in junit] == natural
    table = [line for line in markdown_summary(named).splitlines() if line.startswith("| `")]
    assert [line.split("`")[1] for line in table] == natural


def test_a_merged_report_keeps_every_field_of_every_case(tmp_path: Path) -> None:
    first, second = [*results()[:2], errored_result()], results()[2:]
    paths = [write_json(first, tmp_path / "1.json"), write_json(second, tmp_path / "2.json")]
    merged, _ = merge_reports(paths)
    expected = json_report([*first, *second])["cases"]
    assert json_report(merged)["cases"] == expected
    assert [c["case_id"] for c in expected] == [
        "a-pass", "b-fail", "c-incomplete", "d-errored", "e-lenient", "lima",
    ]  # fmt: skip
