"""The canonical form used wherever two recorded values are compared.

Two values are canonically equal when they are the same JSON after: JSON strings that hold an
object or array are parsed, mapping key order is ignored, and tuples equal lists. Numbers keep
their JSON type (``1`` and ``1.0`` differ, ``True`` and ``1`` differ), and a string that merely
looks like a scalar (``"42"``) stays a string, so ``{"id": "42"}`` never matches ``{"id": 42}``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from tracely_otel import JSON_SPACE, MAX_NESTING
from tracely_sdk._types import dumps

_MAX_DEPTH = MAX_NESTING
# In compact JSON text, a quote directly followed by (whitespace and) a bracket can only open a
# string that itself holds JSON; without one, parsing the text is the canonical form already.
_NESTED_JSON = re.compile(rb'"\s*[\[{]')


def _normalise(value: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise ValueError(f"value nested deeper than {_MAX_DEPTH} levels cannot be compared")
    if isinstance(value, str):
        stripped = value.strip(JSON_SPACE)
        # Tool-call arguments arrive as JSON text from providers and as objects from code.
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            try:
                return _normalise_parsed(orjson.loads(stripped), depth + 1)
            except orjson.JSONDecodeError:
                return value
        return value
    if isinstance(value, Mapping):
        return {str(k): _normalise(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v, depth + 1) for v in value]
    return value


def canonical(value: Any) -> Any:
    """``value`` as a JSON-compatible structure in canonical form."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _normalise(value, 0)
    # Through the recording encoder, so a live value compares the way it was recorded.
    return _from_text(dumps(value))


def _normalise_parsed(value: Any, depth: int) -> Any:
    """:func:`_normalise` of a value orjson has just parsed, in place (nothing else holds it,
    and its containers are exactly dicts and lists): the same result, without a call and a
    copy per scalar."""
    if depth >= _MAX_DEPTH:
        return _normalise(value, depth)  # near the limit: every level checked one by one
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            kind = type(item)
            if kind is dict or kind is list or (kind is str and item[:1] in _MAY_OPEN):
                value[key] = _normalise_parsed(item, depth + 1)
        return value
    if kind is list:
        for i, item in enumerate(value):
            kind = type(item)
            if kind is dict or kind is list or (kind is str and item[:1] in _MAY_OPEN):
                value[i] = _normalise_parsed(item, depth + 1)
        return value
    return _normalise(value, depth)


# A string is parsed only when its first character after JSON whitespace is a bracket.
_MAY_OPEN = frozenset(("{", "[", *JSON_SPACE))


# What every match of _NESTED_JSON starts with: a quote, then white space or a bracket.
_QUOTE_THEN = re.compile(rb'"[\s\[{]')
_BRACKETS = frozenset(b"[{")


def _may_hold_json(text: bytes) -> bool:
    """Whether ``_NESTED_JSON`` matches ``text``: the same answer, mostly from one scan for a
    quote followed by white space or a bracket, which compact JSON without JSON in its strings
    never has. (A ``bytes in bytes`` test would cost more: it raises and clears a TypeError,
    message formatted, on its way to the search.)"""
    found = _QUOTE_THEN.search(text)
    if found is None:
        return False
    start = found.start()
    if text[start + 1] in _BRACKETS:
        return True
    return _NESTED_JSON.search(text, start) is not None


def _from_text(text: bytes) -> Any:
    value = orjson.loads(text)
    if not _may_hold_json(text):
        return value  # parsed compact JSON without JSON inside strings is canonical already
    return _normalise_parsed(value, 0)


def canonical_json(value: Any) -> bytes:
    """The canonical form serialised with sorted keys: equal bytes iff canonically equal."""
    return orjson.dumps(canonical(value), option=orjson.OPT_SORT_KEYS)


def canonical_equal(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are canonically equal."""
    text_a, text_b = dumps(a), dumps(b)
    if text_a == text_b or sorted_json(text_a) == sorted_json(text_b):
        return True
    return canonical_json(a) == canonical_json(b)


def sorted_json(text: bytes) -> bytes:
    """Compact JSON ``text`` with its keys sorted: equal for texts that hold the same value.

    Two values whose texts sort alike are canonically equal (the canonical form is a function
    of the value), and finding that out costs a parse and a dump in C, where the canonical form
    also walks the value in Python when a string in it holds JSON. Values whose sorted texts
    differ may still be canonically equal (JSON held in a string, tuples and lists).
    """
    return orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS)


def canonical_from_json(text: bytes) -> Any:
    """:func:`canonical` of the value that compact JSON ``text`` holds (one parse)."""
    return _from_text(text)


def canonical_json_bytes(text: bytes) -> bytes:
    """:func:`canonical_json` of the value that compact JSON ``text`` holds (one parse)."""
    return orjson.dumps(_from_text(text), option=orjson.OPT_SORT_KEYS)


def canonical_equal_json(a: bytes, b: bytes) -> bool:
    """Whether compact JSON texts ``a`` and ``b`` hold canonically equal values.

    The answer of ``sorted_json(a) == sorted_json(b) or canonical_json_bytes(a) ==
    canonical_json_bytes(b)``, raising where that raises, for less: a replayed call usually
    differs from its recording only in key order, and in the key order of JSON held in a
    string (a served tool result the agent put into its next prompt). The two parsed values
    are compared as Python values, which runs in C; only where they differ is a string that
    holds JSON parsed, in place; one serialisation of each side with sorted keys then tells
    apart what Python equates (``1``, ``1.0`` and ``true``; ``0.0`` and ``-0.0``).
    """
    if a == b:
        return True
    opens = _may_hold_json(a)
    if opens != _may_hold_json(b) or (opens and not (_shallow(a) and _shallow(b))):
        return _canonically_equal(a, b)  # each side parses strings differently, or may raise
    value_a, value_b = orjson.loads(a), orjson.loads(b)
    if opens and value_a != value_b:
        settled = _settled(value_a, value_b)
        if settled is None:
            return False
        value_a, value_b = settled
    return orjson.dumps(value_a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        value_b, option=orjson.OPT_SORT_KEYS
    )


def _canonically_equal(a: bytes, b: bytes) -> bool:
    """What :func:`canonical_equal_json` answers, from the canonical forms."""
    return sorted_json(a) == sorted_json(b) or canonical_json_bytes(a) == canonical_json_bytes(b)


_NOT_JSON: Any = object()


def _opened(text: str) -> Any:
    """What the canonical form makes of string ``text``: the value it holds, or _NOT_JSON."""
    if text[:1] not in _MAY_OPEN:
        return _NOT_JSON
    stripped = text.strip(JSON_SPACE)
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            return orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return _NOT_JSON
    return _NOT_JSON


def _settled(a: Any, b: Any) -> tuple[Any, Any] | None:
    """Parsed values ``a`` and ``b`` (unequal as Python values) with the strings that hold JSON
    parsed where the two differ, so that they are equal as Python values; None when their
    canonical forms certainly differ. Containers are changed in place (they were just parsed)."""
    kind = type(a)
    if kind is str or type(b) is str:
        held_a = _opened(a) if kind is str else a
        held_b = _opened(b) if type(b) is str else b
        held_a = a if held_a is _NOT_JSON else held_a
        held_b = b if held_b is _NOT_JSON else held_b
        if held_a is a and held_b is b:
            return None  # strings (or a string and a value) that hold no JSON and differ
        if held_a == held_b:
            return held_a, held_b
        return _settled(held_a, held_b)
    if kind is not type(b):
        return None
    if kind is dict:
        if a.keys() != b.keys():
            return None
        places: Iterable[Any] = a.keys()
    elif kind is list:
        if len(a) != len(b):
            return None
        places = range(len(a))
    else:
        return None  # scalars that differ as Python values differ as JSON
    for place in places:  # assigns only to places that exist: a dict's keys stay as they are
        item, other = a[place], b[place]
        if item != other:
            pair = _settled(item, other)
            if pair is None:
                return None
            a[place], b[place] = pair
    return a, b


def _shallow(text: bytes) -> bool:
    """Whether the canonical form of ``text``, which parses strings that hold JSON, certainly
    nests within the limit: too few brackets are written in it to nest deeper (a string that
    holds JSON is a level of its own beside its container's; ``\\u`` could hide a bracket in a
    string held by a string)."""
    return text.find(b"\\u") == -1 and 2 * (text.count(b"{") + text.count(b"[")) <= _MAX_DEPTH
