"""The outline a SQL store writes beside a recording is computed on the text's UTF-8 bytes;
its every byte is pinned here against the reading of the same rules on the text, one
character at a time, for bundles of every shape: calls with and without ``seq``, repeated
entries, names and values outside ASCII, entries JSON cannot hold, and text that is not
the bundle's own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tracely_sdk.store import _outline
from tracely_sdk.store._model import dumps_json


def reference_outline(text: str, bundle: Mapping[str, Any]) -> str:
    """The rules as first written: search the text as characters, count UTF-8 bytes by
    encoding what lies between, order the calls with :func:`_outline.in_order`."""
    rows = _outline._rows(bundle)
    places: dict[tuple[str, str, int], tuple[int, int]] = {}
    at = 0
    at_byte = 0
    for kind, name, index, *_ in sorted(rows, key=lambda r: (r[0], str(r[1]), r[2])):
        try:
            piece = dumps_json(bundle[kind][name][index])
        except ValueError:
            continue
        found = text.find(piece, at)
        if found < 0:
            found, at, at_byte = text.find(piece), 0, 0
        if found < 0:
            continue
        start = at_byte + len(text[at:found].encode("utf-8"))
        size = len(piece.encode("utf-8"))
        places[(kind, name, index)] = (start, size)
        at, at_byte = found + len(piece), start + size
    calls = []
    for c in _outline.in_order(rows):
        place: tuple[int | None, int | None] = places.get((c.kind, c.name, c.index), (None, None))
        calls.append([c.kind, c.name, c.index, c.seq, c.started_at, c.ended_at, c.usage, *place])
    agent = bundle.get("agent")
    ended = agent.get("ended_at") if isinstance(agent, Mapping) else None
    return dumps_json({"calls": calls, "ended_at": ended})


texts = st.text(alphabet=st.sampled_from('ab é°\u4e2d\U0001f600"\\{}[]:,'), max_size=8)
values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
times = st.none() | st.integers(0, 2**62)
entries = st.fixed_dictionaries(
    {"output": values},
    optional={
        "seq": st.integers(1, 9) | st.sampled_from([True, "3", None]),
        "args": values,
        "started_at": times,
        "ended_at": times,
        "usage": st.none() | st.lists(st.integers(0, 99), min_size=2, max_size=2),
    },
)
sections = st.dictionaries(texts, st.lists(entries, max_size=3), max_size=3)


@st.composite
def bundles(draw: st.DrawFn) -> dict[str, Any]:
    bundle: dict[str, Any] = {"format": "tracely.bundle/1", "trace_id": "ab" * 16}
    for section in ("tools", "llm"):
        if draw(st.booleans()):
            bundle[section] = draw(sections)
    if draw(st.booleans()):
        bundle["agent"] = {"name": draw(texts), "ended_at": draw(times), "input": draw(values)}
    if draw(st.booleans()) and bundle.get("tools"):
        # an entry twice: both copies are found, the second after the first
        name = next(iter(bundle["tools"]))
        bundle["tools"][name] = bundle["tools"][name] * 2
    return bundle


@settings(max_examples=300, deadline=None)
@given(bundles())
def test_the_stored_outline_is_the_one_the_text_rules_give(bundle: dict[str, Any]) -> None:
    text, outline = _outline.stored_text(bundle)
    assert text == dumps_json(bundle)
    assert outline == reference_outline(text, bundle)
    assert _outline.stored_outline(text, bundle) == outline


@settings(max_examples=100, deadline=None)
@given(bundles(), bundles())
def test_an_outline_against_other_text_finds_only_what_is_there(
    bundle: dict[str, Any], other: dict[str, Any]
) -> None:
    text = dumps_json(other)
    assert _outline.stored_outline(text, bundle) == reference_outline(text, bundle)


def test_an_entry_json_cannot_hold_has_no_place() -> None:
    bundle = {"tools": {"t": [{"output": {1, 2}, "seq": 1}, {"output": "é", "seq": 2}]}}
    text = '{"tools":{"t":[{"output":"x"},{"output":"é","seq":2}]}}'
    assert _outline.stored_outline(text, bundle) == reference_outline(text, bundle)
    assert '"t",1,2,null,null,null,' in _outline.stored_outline(text, bundle)


def test_after_a_piece_found_nowhere_the_next_is_looked_for_from_the_start() -> None:
    bundle = {"tools": {"t": [{"output": 1}, {"output": 2}, {"output": 1}]}}
    text = '{"a":[{"output":1},{"output":1}]}'
    assert _outline.stored_outline(text, bundle) == reference_outline(text, bundle)
    assert '["tools","t",2,3,null,null,null,6,12]' in _outline.stored_outline(text, bundle)
