"""The canonical form used wherever two recorded values are compared.

Two values are canonically equal when they are the same JSON after: JSON strings that hold an
object or array are parsed, mapping key order is ignored, and tuples equal lists. Numbers keep
their JSON type (``1`` and ``1.0`` differ, ``True`` and ``1`` differ), and a string that merely
looks like a scalar (``"42"``) stays a string, so ``{"id": "42"}`` never matches ``{"id": 42}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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


def _from_text(text: bytes) -> Any:
    value = orjson.loads(text)
    if _NESTED_JSON.search(text) is None:
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
