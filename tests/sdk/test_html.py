"""The page renderer: every value escaped, large values collapsed, stored runs' cut values shown."""

from __future__ import annotations

import base64
import hashlib
import re
from html import unescape
from typing import Any

from tracely_sdk._html import Html, case_page, join, tag, timeline_view, value_view
from tracely_sdk._html._render import MAX_SHOWN, report_document

HOSTILE = "<script>alert(1)</script>\"'&"


def test_text_and_attributes_are_escaped_and_markup_is_kept() -> None:
    made = tag("a", HOSTILE, tag("b", "x"), href=HOSTILE, data_x=1, hidden=True, title=None)
    assert made == (
        '<a href="&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#x27;&amp;" data-x="1" hidden>'
        "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#x27;&amp;<b>x</b></a>"
    )
    assert join("<i>", Html("<i>"), None, ["a", ["<"]]) == "&lt;i&gt;<i>a&lt;"


def test_a_short_value_is_open_and_a_large_one_collapsed_and_cut() -> None:
    assert value_view({"city": "Paris"}) == (
        '<pre class="inline json">{<span class="jk">&quot;city&quot;</span>:'
        '<span class="js">&quot;Paris&quot;</span>}</pre>'
    )
    huge = "y" * (MAX_SHOWN + 500)
    shown = value_view(huge, "output")
    assert shown.startswith('<details class="value"><summary>output (20,500 characters)</summary>')
    assert "… 500 more characters not shown" in shown
    laid_out = shown[: shown.index('<details class="cut">')]
    assert laid_out.count("y" * 100) == MAX_SHOWN // 100 and "y" * (MAX_SHOWN + 1) not in laid_out


def test_every_recorded_value_of_a_case_is_escaped() -> None:
    case = {
        "case_id": HOSTILE,
        "name": HOSTILE,
        "verdict": "FAIL",
        "tags": [HOSTILE],
        "reasons": [HOSTILE],
        "output": HOSTILE,
        "expected_output": {"x": HOSTILE},
        "output_differences": [{"path": HOSTILE, "recorded": HOSTILE, "actual": HOSTILE}],
        "traceback": HOSTILE,
        "timeline": [
            {
                "outcome": "diverged",
                "label": HOSTILE,
                "seq": 1,
                "entry": HOSTILE,
                "call": 1,
                "field": "input",
                "recorded": HOSTILE,
                "output": HOSTILE,
                "error": {"message": HOSTILE},
                "actual": HOSTILE,
                "differences": [{"path": HOSTILE, "recorded": HOSTILE}],
                "omitted": 0,
            },
            {"outcome": "missed", "label": HOSTILE, "seq": None, "message": HOSTILE},
        ],
    }
    document = report_document({"summary": {"total": 1}, "cases": [case]}, store=HOSTILE)
    assert "<script>alert" not in document
    assert document.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 15


def test_a_stored_runs_cut_timeline_and_differences_are_shown_as_they_are() -> None:
    shown = timeline_view(["… [12 more items]"])
    assert "… [12 more items]" in shown
    page = case_page(
        {
            "case_id": "c",
            "verdict": "FAIL",
            "output_differences": ["… [collapsed: 9 bytes of JSON]"],
        }
    )
    assert "… [collapsed: 9 bytes of JSON]" in page


def _report(cases: list[dict[str, Any]]) -> str:
    return report_document({"summary": {"total": len(cases)}, "cases": cases})


def test_a_report_carries_a_policy_that_allows_only_its_own_style_and_script() -> None:
    document = _report([{"case_id": "a", "verdict": "PASS"}, {"case_id": "b", "verdict": "FAIL"}])
    head = document[: document.index("</head>")]
    (policy,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', head)
    assert head.index("Content-Security-Policy") < head.index("<style>")  # before what it guards
    rules = dict(rule.strip().split(" ", 1) for rule in unescape(policy).split(";"))
    assert rules["default-src"] == "'none'" and rules["base-uri"] == "'none'"
    assert rules["form-action"] == "'none'" and set(rules) == {
        "default-src",
        "style-src",
        "script-src",
        "base-uri",
        "form-action",
    }
    style = re.search(r"<style>(.*?)</style>", document, re.S)
    script = re.search(r"<script>(.*?)</script>", document, re.S)
    assert style is not None and script is not None
    for source, directive in ((style.group(1), "style-src"), (script.group(1), "script-src")):
        digest = base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()
        assert rules[directive] == f"'sha256-{digest}'"
    assert " style=" not in document  # an inline style attribute would be refused


def test_a_report_of_one_case_opens_on_it() -> None:
    one = _report([{"case_id": "paris", "verdict": "FAIL", "reasons": ["output differs"]}])
    assert '<section class="case-page only" id="case-1"' in one
    assert "output differs" in one
    assert 'id="verdict-filter"' not in one and "← all cases" not in one
    two = _report([{"case_id": "a", "verdict": "PASS"}, {"case_id": "b", "verdict": "FAIL"}])
    assert "case-page only" not in two and 'id="verdict-filter"' in two
