"""HTML pages of replay runs, cases and recordings: one renderer for the static report and
the server's pages (see :mod:`tracely_sdk._html._render`)."""

from tracely_sdk._html._assets import CSS, JS
from tracely_sdk._html._markup import Html, esc, join, tag
from tracely_sdk._html._render import (
    case_page,
    cases_table,
    differences_view,
    page,
    report_document,
    run_summary,
    timeline_view,
    value_view,
)

__all__ = [
    "CSS",
    "JS",
    "Html",
    "case_page",
    "cases_table",
    "differences_view",
    "esc",
    "join",
    "page",
    "report_document",
    "run_summary",
    "tag",
    "timeline_view",
    "value_view",
]
