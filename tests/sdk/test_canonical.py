"""The canonicaliser: what counts as the same recorded value."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracely_sdk._canonical import (
    _NESTED_JSON,
    _may_hold_json,
    canonical,
    canonical_equal,
    canonical_equal_json,
    canonical_json,
    canonical_json_bytes,
    sorted_json,
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


def shuffle_keys(value: Any, rnd: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: shuffle_keys(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [shuffle_keys(v, rnd) for v in value]
    return value


def lists_to_tuples(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: lists_to_tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(lists_to_tuples(v) for v in value)
    return value


def containers_as_json_strings(value: Any) -> Any:
    if isinstance(value, dict):
        return orjson.dumps(value).decode()
    if isinstance(value, list):
        return [containers_as_json_strings(v) for v in value]
    return value


@given(json_values, st.randoms(use_true_random=False))
def test_key_order_is_ignored(value: Any, rnd: random.Random) -> None:
    assert canonical_json(value) == canonical_json(shuffle_keys(value, rnd))


@given(json_values)
def test_tuples_equal_lists(value: Any) -> None:
    assert canonical_equal(value, lists_to_tuples(value))


@given(json_values)
def test_json_strings_holding_objects_are_parsed(value: Any) -> None:
    assert canonical_equal(value, containers_as_json_strings(value))


@given(json_values)
def test_idempotent(value: Any) -> None:
    assert canonical(canonical(value)) == canonical(value)


@given(json_values, json_values)
def test_equal_iff_same_json(a: Any, b: Any) -> None:
    same = orjson.dumps(canonical(a), option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        canonical(b), option=orjson.OPT_SORT_KEYS
    )
    assert canonical_equal(a, b) is same


def test_types_are_not_conflated() -> None:
    assert not canonical_equal({"id": "42"}, {"id": 42})
    assert not canonical_equal(True, 1)
    assert not canonical_equal(1, 1.0)
    assert not canonical_equal(None, "null")
    assert canonical_equal('  {"a": [1, 2]}  ', {"a": (1, 2)})
    assert canonical_equal("{not json", "{not json")


def test_non_json_values_compare_as_they_are_recorded() -> None:
    import datetime
    from dataclasses import dataclass

    @dataclass
    class Point:
        x: int
        y: int

    assert canonical_equal(Point(1, 2), {"y": 2, "x": 1})
    assert canonical_equal({"at": datetime.date(2026, 1, 2)}, {"at": "2026-01-02"})


@given(json_values)
def test_canonical_json_bytes_agrees_with_canonical_json(value: Any) -> None:
    for v in (value, containers_as_json_strings(value)):
        assert canonical_json_bytes(orjson.dumps(v)) == canonical_json(v)


# -- canonical_equal_json: the fast comparison agrees with the canonical forms ----------------


def _outcome(compare: Any, a: bytes, b: bytes) -> Any:
    """What ``compare(a, b)`` returns, or the type of what it raises."""
    try:
        return compare(a, b)
    except Exception as exc:
        return type(exc)


def _by_canonical_forms(a: bytes, b: bytes) -> bool:
    return sorted_json(a) == sorted_json(b) or canonical_json_bytes(a) == canonical_json_bytes(b)


def _variant(value: Any, rnd: random.Random) -> Any:
    """``value`` changed the ways a replayed call differs from its recording, or does not:
    key order, containers written as JSON text (padded with JSON whitespace), numbers of
    another JSON type, -0.0, an edited string."""
    choice = rnd.random()
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        out: Any = {k: _variant(v, rnd) for k, v in items}
    elif isinstance(value, list):
        out = [_variant(v, rnd) for v in value]
    elif isinstance(value, bool):
        out = int(value) if choice < 0.2 else value
    elif isinstance(value, int):
        out = float(value) if choice < 0.2 else (value == 1) if choice < 0.3 else value
    elif isinstance(value, float):
        out = -value if value == 0.0 and choice < 0.5 else value
    elif isinstance(value, str):
        out = value + "x" if choice < 0.1 else value
    else:
        out = value
    if isinstance(out, (dict, list)) and rnd.random() < 0.4:
        pad = rnd.choice(["", " ", "\n", "\t ", "\r\n"])
        return pad + orjson.dumps(out).decode() + rnd.choice(["", " ", "\n"])
    return out


@given(json_values, st.randoms(use_true_random=False))
def test_equal_json_agrees_with_the_canonical_forms(value: Any, rnd: random.Random) -> None:
    recorded = orjson.dumps(_variant(value, rnd), option=orjson.OPT_SORT_KEYS)
    called = orjson.dumps(_variant(value, rnd))
    assert _outcome(canonical_equal_json, called, recorded) == _outcome(
        _by_canonical_forms, called, recorded
    )
    assert canonical_equal_json(recorded, recorded)


@given(json_values, json_values)
def test_equal_json_agrees_on_unrelated_values(a: Any, b: Any) -> None:
    texts = [orjson.dumps(v) for v in (a, b, containers_as_json_strings(a))]
    for x in texts:
        for y in texts:
            assert _outcome(canonical_equal_json, x, y) == _outcome(_by_canonical_forms, x, y)


@pytest.mark.parametrize("levels", [20, 40, 62, 64, 66, 80])
@pytest.mark.parametrize("as_text", [False, True])
def test_equal_json_raises_where_the_canonical_forms_raise(levels: int, as_text: bool) -> None:
    deep: Any = 1
    for _ in range(levels):
        deep = [deep]
    held = orjson.dumps(deep).decode()
    for a, b in [
        ([held, "{}"], ["  " + held, "{}"]),  # held JSON, parsed on both sides
        ([held, '{"a":1,"b":2}'], [held, '{"b":2,"a":1}']),  # equal held JSON, other JSON differs
        ([deep, "{}"], [deep, "[]"]),
        ({"a": held, "b": "[1]"}, {"a": "\n" + held, "b": "[1.0]"}),
        ([deep], ["[" + held + "]"] if as_text else [[deep]]),
    ]:
        x, y = orjson.dumps(a), orjson.dumps(b)
        assert _outcome(canonical_equal_json, x, y) == _outcome(_by_canonical_forms, x, y)
        assert _outcome(canonical_equal_json, y, x) == _outcome(_by_canonical_forms, y, x)


@given(
    st.binary(max_size=40) | json_values.map(lambda v: orjson.dumps(containers_as_json_strings(v)))
)
def test_may_hold_json_is_the_pattern(text: bytes) -> None:
    assert _may_hold_json(text) is (_NESTED_JSON.search(text) is not None)
