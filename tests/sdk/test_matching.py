"""The matcher: property tests over generated recordings and calls."""

from __future__ import annotations

import random
from typing import Any

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
