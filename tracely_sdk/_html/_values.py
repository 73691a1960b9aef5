"""Recorded values as text in a page: JSON pretty-printed and coloured, long values cut.

A value is untrusted and may be huge. Nothing longer than :data:`MAX_SHOWN` characters is
laid out: the rest is one click away, either at ``full`` (a server page links to the raw
value) or, in a static report that has no server, in a ``<textarea>`` inside a closed
``<details>``, which the browser keeps as text and does not lay out until it is opened.
"""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any

import orjson

from tracely_sdk._html._markup import Html, tag

__all__ = [
    "MAX_KEPT",
    "MAX_SHOWN",
    "cut",
    "json_text",
    "json_view",
    "text_of",
    "value_view",
    "whole_view",
]

# A value longer than this is cut, with a way to see the whole of it.
MAX_SHOWN = 20_000
# A report keeps at most this much of a cut value (past that, the JSON report has it).
MAX_KEPT = 1_000_000
# JSON this short (compact) stays on the line it is part of.
_INLINE = 60
# A value shown as text up to this length stays open; a longer one is collapsed.
_OPEN = 240

# The tokens of indented JSON worth a colour: a string (a key when a colon follows), a number,
# a literal. Strings come first, so a number inside a string is part of the string.
_JSON_TOKEN = re.compile(
    r'("(?:[^"\\\n]|\\.)*")(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|\b(true|false|null)\b'
)


def json_text(value: Any, *, indent: bool = False) -> str:
    """``value`` as JSON text, whatever it holds: what JSON cannot say is written as text."""
    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    try:
        return orjson.dumps(value, option=option, default=str).decode()
    except TypeError:  # an integer past 64 bits, nesting past orjson's limit
        return json.dumps(value, default=str, indent=2 if indent else None, ensure_ascii=False)


def text_of(value: Any) -> str:
    """A string as it is; anything else as indented JSON."""
    return value if isinstance(value, str) else json_text(value, indent=True)


def cut(text: str, limit: int = MAX_SHOWN) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters, and how many were cut off."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def _mark(token: re.Match[str]) -> str:
    string, colon, number, literal = token.groups()
    if string is not None:
        return f'<span class="{"jk" if colon else "js"}">{escape(string)}</span>{colon or ""}'
    if number is not None:
        return f'<span class="jn">{number}</span>'
    return f'<span class="jl">{literal}</span>'


def json_view(text: str) -> Html:
    """JSON text with its keys, strings, numbers and literals marked for colour (escaped)."""
    # Written as strings, not with tag(): a long value has thousands of tokens.
    parts: list[str] = []
    at = 0
    for token in _JSON_TOKEN.finditer(text):
        parts.append(escape(text[at : token.start()]))
        parts.append(_mark(token))
        at = token.end()
    parts.append(escape(text[at:]))
    return Html("".join(parts))


def whole_view(text: str, label: str, *, full: str | None = None, note: str = "") -> Html:
    """The way to the whole ``text`` of a value shown cut short: a link to ``full``, or (in a
    report) the text in a closed ``<details>``, up to :data:`MAX_KEPT` characters."""
    size = f"{len(text):,} characters"
    if full is not None:
        return tag("p", note, tag("a", f"the whole {label} ({size})", href=full), class_="cut")
    kept, lost = cut(text, MAX_KEPT)
    return tag(
        "details",
        tag("summary", note, f"the whole {label} ({size})"),
        tag("textarea", kept, readonly=True, rows="12", aria_label=f"the whole {label}"),
        tag("p", f"… {lost:,} more characters: see the JSON report (--json)") if lost else None,
        class_="cut",
    )


def _rest(text: str, more: int, label: str, full: str | None) -> Html:
    return whole_view(text, label, full=full, note=f"… {more:,} more characters not shown: ")


def value_view(
    value: Any, label: str = "value", *, full: str | None = None, limit: int = MAX_SHOWN
) -> Html:
    """A value as text: JSON pretty-printed and coloured, a short value on its line, a long
    one collapsed under a summary with its size, and one past ``limit`` characters cut (see
    the module docstring for ``full``)."""
    is_json = not isinstance(value, str)
    if is_json:
        compact = json_text(value)
        if len(compact) <= _INLINE:
            return tag("pre", json_view(compact), class_="inline json")
    text = text_of(value)
    shown, more = cut(text, limit)
    body = json_view(shown) if is_json else shown
    rest = _rest(text, more, label, full) if more else None
    if not more and len(text) <= _OPEN:
        if "\n" not in text:
            return tag("pre", body, class_="inline json" if is_json else "inline")
        return tag("pre", body, class_="json" if is_json else None)
    lines = shown.count("\n") + 1
    what = f"{lines:,} lines, " if lines > 1 else ""
    return tag(
        "details",
        tag("summary", f"{label} ({what}{len(text):,} characters)"),
        tag("pre", body, class_="json" if is_json else None),
        rest,
        class_="value",
    )
