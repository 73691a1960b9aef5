"""The one diff of two recorded values: where they differ, path by path, and how to show it.

Every difference tracely reports goes through here: the args of a strict miss against the
closest recorded entries, the input of an LLM call served despite a change (and the args of a
tool call served in lenient mode), and a case's output against its expected output.

A difference is ``{"path": "messages[0].content", "recorded": ..., "actual": ...}``; a side
that does not exist at that path (a key only one side has, an item past the end of the other
list) is left out of the dict. Values are compared in their canonical form (see
:mod:`tracely_sdk._canonical`), so key order and tuple/list never count as a difference. Its
text is one line per difference::

    messages[0].content: recorded "You are a weather assistant." now "You are a terse assistant."
"""

from __future__ import annotations

from typing import Any, TypedDict

import orjson

from tracely_sdk._canonical import canonical

__all__ = ["MAX_DIFFERENCES", "Difference", "diff_values", "render", "render_value"]

MAX_DIFFERENCES = 20
# A value shown in a line of text is cut to about this many characters.
_SHOWN = 120
_ABSENT: Any = object()


class _Where(TypedDict):
    path: str


class Difference(_Where, total=False):
    """One place where a recorded value and the actual one differ."""

    recorded: Any  # absent: the recorded value has nothing at this path
    actual: Any  # absent: the actual value has nothing at this path


def diff_values(
    recorded: Any, actual: Any, root: str = "", *, limit: int = MAX_DIFFERENCES
) -> tuple[list[Difference], int]:
    """The first ``limit`` differences between two values, and how many there are in all.

    Both values are compared canonically. ``root`` prefixes every path (``"args"`` gives
    ``args.city``; the default gives ``city`` and ``[0]``).
    """
    found: list[Difference] = []
    total = _walk(_canon(recorded), _canon(actual), root, found, limit)
    return found, total


def _canon(value: Any) -> Any:
    if value is _ABSENT:
        return value
    try:
        return canonical(value)
    except ValueError:  # nested too deep for the canonical form: compare as recorded
        return value


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(a: Any, b: Any, path: str, out: list[Difference], limit: int) -> int:
    if isinstance(a, dict) and isinstance(b, dict):
        total = 0
        for key in sorted(set(a) | set(b)):
            total += _walk(
                a.get(key, _ABSENT), b.get(key, _ABSENT), _key_path(path, key), out, limit
            )
        return total
    if isinstance(a, list) and isinstance(b, list):
        total = 0
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else _ABSENT
            y = b[i] if i < len(b) else _ABSENT
            total += _walk(x, y, f"{path}[{i}]", out, limit)
        return total
    if a is not _ABSENT and b is not _ABSENT and type(a) is type(b) and a == b:
        return 0
    if len(out) < limit:
        difference = Difference(path=path)
        if a is not _ABSENT:
            difference["recorded"] = a
        if b is not _ABSENT:
            difference["actual"] = b
        out.append(difference)
    return 1


def render_value(value: Any, *, absent: bool = False, width: int = _SHOWN) -> str:
    """A value as one line of JSON, cut to about ``width`` characters with ``...``."""
    if absent:
        return "(absent)"
    text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
    return text if len(text) <= width else text[: width - 3] + "..."


def _strings_around_change(a: str, b: str, width: int) -> tuple[str, str] | None:
    """Two long strings cut to the part around where they first differ."""
    if len(a) + 2 <= width and len(b) + 2 <= width:
        return None
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    start = max(0, start - 20)
    keep = width - 8

    def cut(s: str) -> str:
        piece = s[start : start + keep]
        return (
            ("..." if start else "")
            + orjson.dumps(piece).decode()
            + ("..." if start + keep < len(s) else "")
        )

    return cut(a), cut(b)


def render(differences: list[Difference], omitted: int = 0, *, width: int = _SHOWN) -> list[str]:
    """One line per difference (``path: recorded X now Y``), and one for those left out."""
    lines = []
    for d in differences:
        path = d["path"] or "(the whole value)"
        a, b = d.get("recorded", _ABSENT), d.get("actual", _ABSENT)
        around = (
            _strings_around_change(a, b, width)
            if isinstance(a, str) and isinstance(b, str)
            else None
        )
        if around is not None:
            shown_a, shown_b = around
        else:
            shown_a = render_value(a, absent=a is _ABSENT, width=width)
            shown_b = render_value(b, absent=b is _ABSENT, width=width)
        lines.append(f"{path}: recorded {shown_a} now {shown_b}")
    if omitted > 0:
        lines.append(f"... and {omitted} more difference{'s' if omitted > 1 else ''}")
    return lines
