"""Selecting one value from a JSON response, by a path in tracely's one path language.

A scenario names the reply (``$.choices[0].message.content``) and checks values
(``json_path: {path: $.meta.city, equals: Paris}``) by paths of :mod:`tracely_sdk._jsonpath`.
Each must select one value, so ``[*]`` and ``..key`` (which select many) are refused here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from tracely_sdk._jsonpath import PathError, parse_path

__all__ = ["MISSING", "JSONPath", "PathError"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()
"""What :meth:`JSONPath.get` returns when the path selects nothing."""


class JSONPath:
    """A parsed path to one value; :meth:`get` selects it from parsed JSON."""

    __slots__ = ("steps", "text")

    def __init__(self, text: str) -> None:
        steps = parse_path(text, "JSON path", whole=True)
        many = [s for s in steps if s[0] in ("any", "deep")]
        if many:
            raise PathError(
                f"JSON path {text!r} selects many values ([*], .* or ..key); "
                "name one value with .key, ['key'] and [index] steps"
            )
        self.text = text.strip()
        self.steps: tuple[str | int, ...] = tuple(value for _, value in steps)

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
