"""The page renderer: every value escaped, large values collapsed, stored runs' cut values shown."""

from __future__ import annotations

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
    assert (
        value_view({"city": "Paris"})
        == '<pre class="inline">{&quot;city&quot;:&quot;Paris&quot;}</pre>'
    )
    huge = "y" * (MAX_SHOWN + 500)
    shown = value_view(huge, "output")
    assert shown.startswith('<details class="value"><summary>output (20,500 characters)</summary>')
    assert "… 500 more characters not shown" in shown
    assert shown.count("y" * 100) == MAX_SHOWN // 100 and "y" * (MAX_SHOWN + 1) not in shown


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
