"""The canonicaliser: what counts as the same recorded value."""

from __future__ import annotations

import random
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from tracely_sdk._canonical import canonical, canonical_equal, canonical_json, canonical_json_bytes

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
