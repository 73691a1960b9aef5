"""The small JSON path language scenario files use: ``$.choices[0].message.content``.

A path is ``$`` (optional) followed by steps: ``.name``, ``['name']`` / ``["name"]`` and
``[N]`` (negative counts from the end). Nothing else: no filters, no wildcards, no
expressions, so a path read from a file can select a value and never run anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["MISSING", "JSONPath", "PathError"]

_STEP: Final = re.compile(
    r"""\.(?P<name>[A-Za-z_][A-Za-z0-9_\-]*)
      | \[\s*(?P<index>-?\d+)\s*\]
      | \[\s*'(?P<sq>(?:[^'\\]|\\.)*)'\s*\]
      | \[\s*"(?P<dq>(?:[^"\\]|\\.)*)"\s*\]""",
    re.VERBOSE,
)
_MAX_STEPS: Final = 64


class PathError(ValueError):
    """A JSON path that is not in the language above; the message names the path and where."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()
"""What :meth:`JSONPath.get` returns when the path selects nothing."""


class JSONPath:
    """A parsed path; :meth:`get` selects one value from parsed JSON."""

    __slots__ = ("steps", "text")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str) or not text.strip():
            raise PathError(f"a JSON path must be a non-empty string, got {text!r}")
        self.text = text.strip()
        rest = self.text[1:] if self.text.startswith("$") else "." + self.text.lstrip(".")
        steps: list[str | int] = []
        pos = 0
        while pos < len(rest):
            m = _STEP.match(rest, pos)
            if m is None:
                raise PathError(
                    f"JSON path {self.text!r}: cannot read {rest[pos:]!r} "
                    "(use .name, ['name'] or [index])"
                )
            if m["name"] is not None:
                steps.append(m["name"])
            elif m["index"] is not None:
                steps.append(int(m["index"]))
            else:
                quoted = m["sq"] if m["sq"] is not None else m["dq"]
                steps.append(re.sub(r"\\(.)", r"\1", quoted))
            pos = m.end()
        if len(steps) > _MAX_STEPS:
            raise PathError(f"JSON path {self.text!r} has more than {_MAX_STEPS} steps")
        self.steps: tuple[str | int, ...] = tuple(steps)

    def get(self, document: Any) -> Any:
        """The value at this path in ``document``, or :data:`MISSING`."""
        value = document
        for step in self.steps:
            if isinstance(step, int):
                if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
                    return MISSING
                if not -len(value) <= step < len(value):
                    return MISSING
                value = value[step]
            else:
                if not isinstance(value, Mapping) or step not in value:
                    return MISSING
                value = value[step]
        return value

    def __repr__(self) -> str:
        return f"JSONPath({self.text!r})"

    def __str__(self) -> str:
        return self.text
