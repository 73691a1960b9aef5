"""Where two values differ, as a table: path by path, and inside a changed string, the words
that changed (``<del>`` on one side, ``<ins>`` on the other).

The word diff is :class:`difflib.SequenceMatcher` over word tokens (words, runs of spaces,
single marks), so a changed word in a long prompt is found without reading the prompt again.
Its cost grows with the product of the two lengths: strings past :data:`MAX_WORDS` tokens are
shown whole, unmarked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any

from tracely_sdk._html._markup import Html, Node, join, tag
from tracely_sdk._html._values import cut, json_view, text_of

__all__ = ["MAX_WORDS", "differences_view", "word_diff"]

MAX_WORDS = 3_000
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def word_diff(old: str, new: str) -> tuple[Html, Html] | None:
    """The two strings with the words only ``old`` has in ``<del>`` and those only ``new`` has
    in ``<ins>``; None when either is too long to compare word by word."""
    a = _TOKEN.findall(old)
    b = _TOKEN.findall(new)
    if len(a) > MAX_WORDS or len(b) > MAX_WORDS:
        return None
    # (same, old text, new text) runs; the spaces alone between two changes join them, so a
    # rewritten phrase is one mark, not a mark per word.
    runs: list[tuple[bool, str, str]] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        old_part, new_part = "".join(a[i1:i2]), "".join(b[j1:j2])
        if op != "equal" and len(runs) >= 2 and not runs[-2][0] and runs[-1][1].isspace():
            gap = runs.pop()[1]
            _, before_old, before_new = runs.pop()
            runs.append((False, before_old + gap + old_part, before_new + gap + new_part))
        else:
            runs.append((op == "equal", old_part, new_part))
    left: list[Node] = []
    right: list[Node] = []
    for same, old_part, new_part in runs:
        if same:
            left.append(old_part)
            right.append(new_part)
            continue
        if old_part:
            left.append(tag("del", old_part))
        if new_part:
            right.append(tag("ins", new_part))
    return join(left), join(right)


def _more(more: int) -> str | None:
    return f"\n… {more:,} more characters not shown" if more else None


def _row(d: Mapping[str, Any], labels: tuple[str, str]) -> Html:
    sides: list[Node] = []
    old, new = d.get("recorded"), d.get("actual")
    marked = None
    if isinstance(old, str) and isinstance(new, str):
        (old_shown, old_more), (new_shown, new_more) = cut(old), cut(new)
        marked = word_diff(old_shown, new_shown)
    if marked is not None:
        sides = [
            tag("pre", marked[0], _more(old_more), class_="words"),
            tag("pre", marked[1], _more(new_more), class_="words"),
        ]
    else:
        for side in ("recorded", "actual"):
            if side not in d:
                sides.append(tag("span", "(absent)", class_="absent"))
                continue
            value = d[side]
            text, more = cut(text_of(value))
            if isinstance(value, str):
                sides.append(tag("pre", text, _more(more)))
            else:
                sides.append(tag("pre", json_view(text), _more(more), class_="json"))
    return tag(
        "tr",
        tag("td", d.get("path") or "(the whole value)", class_="path"),
        tag("td", sides[0], data_side=labels[0]),
        tag("td", sides[1], data_side=labels[1]),
    )


def differences_view(
    differences: Sequence[Any], omitted: int = 0, *, labels: tuple[str, str] = ("recorded", "now")
) -> Html:
    """Where two values differ, path by path: the first of ``labels`` on the left (the
    ``recorded`` side of each difference), the second on the right (``actual``)."""
    rows = []
    for d in differences:
        if not isinstance(d, Mapping):  # a stored run may have collapsed the list
            rows.append(tag("tr", tag("td", str(d), colspan=3)))
            continue
        rows.append(_row(d, labels))
    if omitted:
        rows.append(tag("tr", tag("td", f"… and {omitted} more differences", colspan=3)))
    return tag(
        "div",
        tag(
            "table",
            tag(
                "thead",
                tag("tr", tag("th", "path"), tag("th", labels[0]), tag("th", labels[1])),
            ),
            tag("tbody", rows),
            class_="diff",
        ),
        class_="scroll",
    )
