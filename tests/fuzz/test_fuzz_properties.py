"""Fuzz properties, on a small example budget: the seed corpus of real reference-agent traces
and mutations of it, random bundles and random span trees. ``fuzz.py`` beside this file runs
the same checks for longer (under atheris where it installs)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from fuzz_corpus import Corpus, build, run_reference_agent
from fuzz_mutations import hostile_values, json_values, mutations, nested
from fuzz_targets import TARGETS, extract
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracely_sdk as tracely
from tracely_otel import SpanRecord, validate_bundle
from tracely_otel import attributes as A
from tracely_otel._bundle import BundleFormatError, _plain, _shallow, value_problem

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_built: list[Corpus] = []


@pytest.fixture
def corpus(capture: Any) -> Corpus:
    if not _built:

        def spans_of(fn: Any) -> list[Any]:
            before = len(capture.spans)
            fn()
            return capture.spans[before:]

        _built.append(build(run_reference_agent(spans_of)))
    return _built[0]


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_seed_passes_its_target(corpus: Corpus, target: str) -> None:
    assert corpus.seeds[target]
    for seed in corpus.seeds[target]:
        TARGETS[target](seed)


@pytest.mark.parametrize("target", sorted(TARGETS))
@FUZZ
@given(data=st.data())
def test_mutated_seeds_raise_only_documented_errors(
    corpus: Corpus, target: str, data: st.DataObject
) -> None:
    seed = data.draw(st.sampled_from(corpus.seeds[target]))
    TARGETS[target](data.draw(mutations(target, seed)))


bundles = st.fixed_dictionaries(
    {},
    optional={
        "tools": st.dictionaries(
            st.text(max_size=4),
            st.lists(
                st.fixed_dictionaries(
                    {"output": hostile_values},
                    optional={"args": hostile_values, "seq": hostile_values},
                ),
                max_size=3,
            ),
            max_size=2,
        ),
        "llm": st.dictionaries(
            st.text(max_size=4),
            st.lists(
                st.fixed_dictionaries(
                    {"error": hostile_values | st.just({"type": "E", "message": "m"})},
                    optional={"input": hostile_values, "usage": hostile_values},
                ),
                max_size=3,
            ),
            max_size=2,
        ),
        "agent": st.fixed_dictionaries(
            {"name": st.text(max_size=4)}, optional={"output": hostile_values}
        ),
        "started_at": hostile_values,
        "checksum": st.just("sha256:00"),
    },
)


@FUZZ
@given(bundles)
def test_random_bundles_load_or_are_refused_with_our_error(bundle: dict[str, Any]) -> None:
    try:
        validate_bundle(bundle)
    except BundleFormatError:
        pass
    try:
        with tracely.fixtures(bundle):
            pass
    except tracely.BundleError:
        pass


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # an integer past 64 bits: written as other JSON writers write it
        return json.dumps(value)


values_with_json_text = st.recursive(
    json_values | st.integers(1, 80).map(nested),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        | inner.map(_json_text)
    ),
    max_leaves=10,
)


@FUZZ
@given(values_with_json_text)
def test_the_fast_limit_check_never_clears_what_the_exact_one_refuses(value: Any) -> None:
    try:
        text = orjson.dumps(value)
    except TypeError:
        return
    if _plain(text):
        assert value_problem(value) is None


@FUZZ
@given(values_with_json_text)
def test_the_bracket_bound_never_clears_what_the_exact_check_refuses(value: Any) -> None:
    try:
        text = orjson.dumps(value)
    except TypeError:
        return
    if _shallow(text):
        assert value_problem(value) is None


TRACE = "0af7651916cd43dd8448eb211c80319c"
_KINDS = [A.KIND_AGENT, A.KIND_TOOL, A.KIND_LLM, None]
_KEYS = [A.INPUT, A.OUTPUT, A.ERROR, A.ARGS, A.USAGE, A.GEN_AI_USAGE_INPUT_TOKENS]


def _attribute(value: Any) -> Any:
    """``value`` as a span attribute holds it: a scalar, or JSON text as tracely records."""
    if isinstance(value, (str, float, bool)):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else str(value)
    return json.dumps(value)  # the standard library writes any depth and any integer


@st.composite
def span_trees(draw: st.DrawFn) -> list[SpanRecord]:
    """A trace of tracely-looking spans with hostile values, parents pointing anywhere."""
    n = draw(st.integers(1, 30))
    spans = []
    for i in range(n):
        attributes: dict[str, Any] = {}
        kind = draw(st.sampled_from(_KINDS))
        if kind is not None:
            attributes[A.KIND] = kind
            attributes[A.NAME] = draw(st.sampled_from(["a", "b"]))
        for key in draw(st.lists(st.sampled_from(_KEYS), max_size=3, unique=True)):
            attributes[key] = _attribute(draw(hostile_values))
        parent = draw(st.one_of(st.none(), st.integers(0, n)))
        spans.append(
            SpanRecord(
                trace_id=TRACE,
                span_id=format(i + 1, "016x"),
                parent_span_id=None if parent is None else format(parent + 1, "016x"),
                name=f"s{i}",
                start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                end_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                attributes=attributes,
                in_process=True,
                intact=draw(st.booleans()),
            )
        )
    return spans


@FUZZ
@given(span_trees())
def test_every_extracted_bundle_validates_and_costs_linear_work(spans: list[SpanRecord]) -> None:
    extract(spans)
