"""The matcher: property tests over generated recordings and calls."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.sdk.test_canonical import (
    containers_as_json_strings,
    json_values,
    lists_to_tuples,
    shuffle_keys,
)
from tracely_sdk._canonical import canonical_equal
from tracely_sdk._matching import ServedEntries, call_key
from tracely_sdk.errors import BundleError

names = st.sampled_from(["a", "b", "c"])
args = st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 3), max_size=2)


@st.composite
def recordings(draw: Any) -> tuple[dict[str, Any], list[tuple[str, dict[str, int]]]]:
    calls = draw(st.lists(st.tuples(names, args), max_size=12))
    tools: dict[str, list[dict[str, Any]]] = {}
    for seq, (name, a) in enumerate(calls, 1):
        tools.setdefault(name, []).append({"seq": seq, "args": a, "output": seq})
    return {"tools": tools}, calls


@given(recordings())
def test_replaying_the_recorded_calls_serves_each_entry_exactly_once(rec: Any) -> None:
    bundle, calls = rec
    recording = ServedEntries(bundle)
    served = []
    for name, a in calls:
        match = recording.match_tool(name, call_key(a), strict=True)
        assert match is not None
        served.append(match.entry.raw["output"])
    assert sorted(served) == list(range(1, len(calls) + 1))
    assert recording.unused() == []


@given(recordings(), st.permutations(list(range(12))))
def test_any_call_order_is_served_when_args_identify_calls(rec: Any, order: list[int]) -> None:
    bundle, calls = rec
    recording = ServedEntries(bundle)
    for i in (i for i in order if i < len(calls)):
        name, a = calls[i]
        match = recording.match_tool(name, call_key(a), strict=True)
        assert match is not None
        assert match.entry.name == name
        assert call_key(match.entry.raw["args"]) == call_key(a)


@given(recordings(), names, args)
def test_strict_never_serves_different_args(rec: Any, name: str, a: dict[str, int]) -> None:
    bundle, _ = rec
    match = ServedEntries(bundle).match_tool(name, call_key(a), strict=True)
    if match is not None:
        assert call_key(match.entry.raw["args"]) == call_key(a)
    else:
        assert all(call_key(e["args"]) != call_key(a) for e in bundle["tools"].get(name, []))


@given(
    st.lists(st.tuples(st.sampled_from(["m1", "m2"]), st.integers(0, 2)), max_size=10),
    st.lists(st.sampled_from(["m1", "m2", "other"]), max_size=12),
)
def test_llm_served_by_model_then_in_recorded_order(
    recorded: list[tuple[str, int]], asked: list[str]
) -> None:
    llm: dict[str, list[dict[str, Any]]] = {}
    for seq, (model, inp) in enumerate(recorded, 1):
        llm.setdefault(model, []).append({"seq": seq, "input": inp, "output": seq})
    recording = ServedEntries({"llm": llm})
    left = set(range(1, len(recorded) + 1))
    for model in asked:
        match = recording.match_llm(model, None)
        if not left:
            assert match is None
            continue
        assert match is not None
        seq = match.entry.raw["output"]
        own = [s for s in left if recorded[s - 1][0] == model]
        expected = min(own) if own else min(left)
        assert seq == expected and match.fallback == (not own)
        left.discard(seq)


def test_llm_divergence_only_when_both_inputs_are_known() -> None:
    recording = ServedEntries(
        {"llm": {"m": [{"input": "a", "output": 1}, {"output": 2}, {"input": "c", "output": 3}]}}
    )
    assert recording.match_llm("m", call_key("b")).diverged  # type: ignore[union-attr]
    assert not recording.match_llm("m", call_key("b")).diverged  # type: ignore[union-attr]
    assert not recording.match_llm("m", None).diverged  # type: ignore[union-attr]


def test_ten_thousand_same_name_calls_stay_linear() -> None:
    n = 10_000
    recording = ServedEntries({"tools": {"t": [{"output": i} for i in range(n)]}})
    for i in range(n):
        assert recording.match_tool("t", None, strict=True).entry.raw["output"] == i  # type: ignore[union-attr]


@given(json_values, json_values, st.randoms(use_true_random=False))
def test_call_keys_are_equal_exactly_when_canonically_equal(
    a: Any, b: Any, rnd: random.Random
) -> None:
    variants = (
        a,
        b,
        shuffle_keys(a, rnd),
        lists_to_tuples(a),
        containers_as_json_strings(a),
    )
    for x in variants:
        for y in variants:
            assert (call_key(x) == call_key(y)) is canonical_equal(x, y)


def _eager(bundle: dict[str, Any]) -> ServedEntries:
    """The entries with every key and output text made up front, as a block once made them."""
    recording = ServedEntries(bundle)
    for entry in recording.entries():
        field = "args" if entry.kind == "tools" else "input"
        entry._key = call_key(entry.raw[field]) if field in entry.raw else None
        output = entry.raw.get("output", _NO_OUTPUT)
        entry._output_json = None if output is _NO_OUTPUT else orjson.dumps(output)
    return recording


_NO_OUTPUT = object()


@st.composite
def mixed_recordings(draw: Any) -> dict[str, Any]:
    def entries(field: str) -> list[dict[str, Any]]:
        made = []
        for value, output in draw(st.lists(st.tuples(json_values, json_values), max_size=4)):
            entry: dict[str, Any] = {}
            if draw(st.booleans()):
                entry[field] = value
            if draw(st.booleans()):
                entry["output"] = output
            else:
                entry["error"] = {"type": "E", "message": "no"}
            made.append(entry)
        return made

    return {
        "tools": {name: entries("args") for name in draw(st.lists(names, max_size=2, unique=True))},
        "llm": {m: entries("input") for m in draw(st.lists(names, max_size=2, unique=True))},
    }


@given(
    mixed_recordings(),
    st.lists(st.tuples(st.booleans(), names, json_values, st.booleans()), max_size=10),
    st.booleans(),
)
def test_entries_made_on_first_use_match_and_serve_as_entries_made_up_front(
    bundle: dict[str, Any], calls: list[tuple[bool, str, Any, bool]], json_data: bool
) -> None:
    lazy, eager = ServedEntries(bundle, json_data=json_data), _eager(bundle)
    for tool, name, value, strict in calls:
        key = call_key(value)
        if tool:
            got, want = (
                lazy.match_tool(name, key, strict=strict),
                eager.match_tool(name, key, strict=strict),
            )
        else:
            got, want = lazy.match_llm(name, key), eager.match_llm(name, key)
        assert (got is None) == (want is None)
        if got is not None and want is not None:
            assert got.entry.describe() == want.entry.describe()
            assert (got.diverged, got.fallback, got.masked) == (
                want.diverged,
                want.fallback,
                want.masked,
            )
            assert got.entry.output_json == want.entry.output_json
    assert [e.describe() for e in lazy.unused()] == [e.describe() for e in eager.unused()]
    for got_entry, want_entry in zip(lazy.entries(), eager.entries(), strict=True):
        assert got_entry.output_json == want_entry.output_json
        assert (got_entry.key is None) == (want_entry.key is None)
        if got_entry.key is not None and want_entry.key is not None:
            assert got_entry.key.text == want_entry.key.text


def test_an_entry_no_call_asks_for_is_never_encoded() -> None:
    # Read from JSON text, a recording is JSON data: only what a call asks for is encoded, so
    # an entry no call reaches is never looked at (one that cannot be encoded shows it).
    bundle = {"tools": {"t": [{"args": {"q": 1}, "output": "ok"}, {"output": {1, 2}}]}}
    recording = ServedEntries(bundle, json_data=True)
    match = recording.match_tool("t", call_key({"q": 1}), strict=True)
    assert match is not None and match.entry.output_json == b'"ok"'
    with pytest.raises(BundleError, match=r"tools:t\[1\]: not JSON data"):
        recording.match_tool("t", None, strict=True).entry.output_json  # type: ignore[union-attr]  # noqa: B018


def test_a_bundle_built_in_code_is_checked_for_json_data_when_its_entries_are_made() -> None:
    bundle = {"tools": {"t": [{"output": "ok"}]}, "llm": {"m": [{"input": [1], "output": {1}}]}}
    with pytest.raises(BundleError, match=r"llm:m\[0\]: not JSON data"):
        ServedEntries(bundle)
