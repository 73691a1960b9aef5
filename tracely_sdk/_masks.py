"""Masks: the volatile parts of a call's args or input, left out of matching.

A system prompt with today's date, a request id or a UUID differs on every run. A project
declares what is volatile once, in ``pyproject.toml``::

    [tool.tracely]
    ignore = ["@iso-timestamp", "$..request_id", "re:req-[0-9a-f]{8}"]

and per call with ``ignore=[...]``, in the same syntax, one string per mask:

- a JSON path into the call's args (tools) or input (LLM calls): ``messages[0].content``,
  ``$.request_id`` (``$`` is the value itself and may be left out), ``messages[*].content``
  (every item or value), ``$..request_id`` (that key at any depth), ``["odd key"]``;
- ``re:PATTERN``, a regular expression: every match inside any string is masked;
- a built-in pattern, opt-in: ``@iso-timestamp`` (ISO 8601 dates and date-times) and ``@uuid``.

Masking replaces what a mask covers with ``"[MASKED]"``, on the recorded and the actual value
alike, after both are canonicalised and before they are compared; a pattern is applied to the
text between masks already made, so masking twice changes nothing more. What is served and
what is recorded are never masked.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tracely_sdk.errors import ConfigError

PLACEHOLDER = "[MASKED]"

_DIGITS_AROUND = r"(?<!\d){}(?!\d)"
BUILTINS: dict[str, str] = {
    "@iso-timestamp": _DIGITS_AROUND.format(
        r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?"
    ),
    "@uuid": r"(?<![0-9A-Fa-f-])[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}(?![0-9A-Fa-f-])",
}

# One step of a path: .key  ..key  [N]  [*]  .*  ["key"]  ['key']
_STEP = re.compile(
    r"""\.\.(?P<deep>[^.\[\]]+)
    | \.?\*
    | \.(?P<key>[^.\[\]*]+)
    | \[(?P<index>-?\d+)\]
    | \[\*\]
    | \[(?P<quoted>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\]""",
    re.VERBOSE,
)

Step = tuple[str, Any]  # ("key", name) | ("index", n) | ("any", None) | ("deep", name)


@dataclass(frozen=True)
class Mask:
    """One mask as written (``spec``), with its path steps or its pattern."""

    spec: str
    steps: tuple[Step, ...] | None = None
    pattern: re.Pattern[str] | None = None


def parse_mask(spec: Any, where: str = "ignore") -> Mask:
    """The mask ``spec`` denotes; a ConfigError saying what to write when it is not one."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(
            f"{where}: {spec!r} is not a mask; write a JSON path ('$..request_id'), "
            f"'re:PATTERN' or one of {', '.join(BUILTINS)}"
        )
    if spec.startswith("@"):
        if spec not in BUILTINS:
            raise ConfigError(
                f"{where}: unknown built-in mask {spec!r}; the built-ins are {', '.join(BUILTINS)}"
            )
        return Mask(spec, pattern=re.compile(BUILTINS[spec]))
    if spec.startswith("re:"):
        try:
            pattern = re.compile(spec[3:])
        except re.error as exc:
            raise ConfigError(
                f"{where}: {spec!r} is not a valid regular expression: {exc}"
            ) from exc
        return Mask(spec, pattern=pattern)
    return Mask(spec, steps=_parse_path(spec, where))


def _parse_path(spec: str, where: str) -> tuple[Step, ...]:
    text = spec.strip()
    if text.startswith("$"):
        text = text[1:]
    elif not text.startswith((".", "[")):
        text = "." + text
    steps: list[Step] = []
    pos = 0
    while pos < len(text):
        match = _STEP.match(text, pos)
        if match is None:
            raise ConfigError(
                f"{where}: cannot read the JSON path {spec!r} at {text[pos:]!r}; write keys as "
                "a.b or ['a b'], items as [0] or [*], a key at any depth as $..key"
            )
        if match["deep"] is not None:
            steps.append(("deep", match["deep"]))
        elif match["key"] is not None:
            steps.append(("key", match["key"]))
        elif match["index"] is not None:
            steps.append(("index", int(match["index"])))
        elif match["quoted"] is not None:
            quoted = match["quoted"]
            steps.append(("key", re.sub(r"\\(.)", r"\1", quoted[1:-1])))
        else:
            steps.append(("any", None))
        pos = match.end()
    if not steps:
        raise ConfigError(f"{where}: the JSON path {spec!r} names the whole value; name a part")
    return tuple(steps)


class Masks:
    """An ordered set of masks, applied together; hashable, so masked forms can be cached."""

    __slots__ = ("_hash", "masks", "paths", "patterns")

    def __init__(self, masks: Iterable[Mask] = ()) -> None:
        unique: dict[str, Mask] = {}
        for mask in masks:
            unique.setdefault(mask.spec, mask)
        self.masks = tuple(unique.values())
        self.paths = tuple(m for m in self.masks if m.steps is not None)
        self.patterns = tuple(m for m in self.masks if m.pattern is not None)
        self._hash = hash(tuple(unique))

    def __bool__(self) -> bool:
        return bool(self.masks)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Masks) and self.specs == other.specs

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Masks({list(self.specs)!r})"

    @property
    def specs(self) -> tuple[str, ...]:
        return tuple(m.spec for m in self.masks)

    def __add__(self, other: Masks) -> Masks:
        if not other:
            return self
        if not self:
            return other
        return Masks((*self.masks, *other.masks))

    def apply(self, value: Any) -> tuple[Any, tuple[str, ...]]:
        """``value`` (canonical JSON data) masked, and the specs of the masks that changed it.

        ``value`` itself is not changed: containers on a masked path are copied.
        """
        applied: list[str] = []
        for mask in self.paths:
            assert mask.steps is not None
            value, changed = _mask_path(value, mask.steps)
            if changed:
                applied.append(mask.spec)
        if self.patterns:
            hits: set[str] = set()
            value = _mask_strings(value, self.patterns, hits)
            applied.extend(m.spec for m in self.patterns if m.spec in hits)
        return value, tuple(applied)


NO_MASKS = Masks()


def _mask_path(value: Any, steps: tuple[Step, ...]) -> tuple[Any, bool]:
    if not steps:
        return PLACEHOLDER, value != PLACEHOLDER
    (kind, arg), rest = steps[0], steps[1:]
    if kind == "deep":
        return _mask_deep(value, arg, rest)
    if isinstance(value, Mapping):
        keys: Iterable[Any] = value if kind == "any" else ([arg] if kind == "key" else ())
        return _replace(value, dict(value), [k for k in keys if k in value], rest)
    if isinstance(value, list):
        if kind == "any":
            return _replace(value, list(value), range(len(value)), rest)
        if kind == "index" and -len(value) <= arg < len(value):
            return _replace(value, list(value), [arg], rest)
    return value, False


def _replace(
    value: Any, copy: Any, keys: Iterable[Any], rest: tuple[Step, ...]
) -> tuple[Any, bool]:
    changed = False
    for key in keys:
        copy[key], hit = _mask_path(copy[key], rest)
        changed = changed or hit
    return (copy, True) if changed else (value, False)


def _mask_deep(value: Any, name: str, rest: tuple[Step, ...]) -> tuple[Any, bool]:
    """``..name`` then ``rest``: at every depth, under every key ``name``."""
    if isinstance(value, Mapping):
        copy = dict(value)
        changed = False
        for key, child in value.items():
            if key == name:
                child, hit = _mask_path(child, rest)
                changed = changed or hit
            child, hit = _mask_deep(child, name, rest)
            copy[key] = child
            changed = changed or hit
        return (copy, True) if changed else (value, False)
    if isinstance(value, list):
        items = []
        changed = False
        for child in value:
            child, hit = _mask_deep(child, name, rest)
            items.append(child)
            changed = changed or hit
        return (items, True) if changed else (value, False)
    return value, False


def _mask_strings(value: Any, masks: tuple[Mask, ...], hits: set[str]) -> Any:
    if isinstance(value, str):
        return _mask_text(value, masks, hits)
    if isinstance(value, Mapping):
        return {k: _mask_strings(v, masks, hits) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_strings(v, masks, hits) for v in value]
    return value


def _mask_text(text: str, masks: tuple[Mask, ...], hits: set[str]) -> str:
    for mask in masks:
        assert mask.pattern is not None
        pieces = text.split(PLACEHOLDER)  # masks already made are not looked into again
        out = [mask.pattern.sub(_substitute, piece) for piece in pieces]
        if out != pieces:
            hits.add(mask.spec)
            text = PLACEHOLDER.join(out)
    return text


def _substitute(match: re.Match[str]) -> str:
    # An empty match (a pattern like 'a*') masks nothing rather than everywhere.
    return PLACEHOLDER if match.end() > match.start() else ""


@functools.lru_cache(maxsize=256)
def _parsed(specs: tuple[Any, ...], where: str) -> Masks:
    return Masks(parse_mask(spec, where) for spec in specs)


def masks_from(ignore: Any, where: str = "ignore") -> Masks:
    """The masks of an ``ignore=`` value: one spec or an iterable of them (None: none)."""
    if ignore is None:
        return NO_MASKS
    if isinstance(ignore, Masks):
        return ignore
    if isinstance(ignore, str):
        specs: tuple[Any, ...] = (ignore,)
    else:
        try:
            specs = tuple(ignore)
        except TypeError:
            specs = (ignore,)
    try:
        return _parsed(specs, where)
    except TypeError:  # an unhashable spec: not a mask, and parse_mask says so
        return Masks(parse_mask(spec, where) for spec in specs)
