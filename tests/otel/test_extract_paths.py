"""The recorder's two paths to a bundle: in process, from the SDK's own spans (values the seam
just encoded, cleared from their text), and from exported spans decoded from OTLP, as the
server reads them. Both give the same bundle, byte for byte, and the same as the exact checks
give."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import tracely_sdk as tracely
from tracely_otel import _bundle, _extract, bundle_from_spans
from tracely_otel._bundle import MAX_NESTING, text_within_limits, value_problem
from tracely_otel._foreign import _calls
from tracely_otel.otlp import records_from_otlp_proto

# JSON values with what the limits are about: integers at and past 64 bits, strings that hold
# JSON text (compared parsed, so they nest one level deeper), characters JSON escapes.
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(['{"a": [1, 2]}', " [[3]] ", "[", "}{", '"quoted"', "\x00\u2028", "🙂"])
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


def _nested(value: Any, levels: int, in_text: bool) -> Any:
    for _ in range(levels):
        value = [value]
    return json.dumps(value) if in_text else value


def _in_strings(value: Any, levels: int) -> Any:
    """``value`` in a list in a string holding its JSON, ``levels`` times: two levels each."""
    for _ in range(levels):
        value = [json.dumps(value, ensure_ascii=False)]
    return value


# Values around the nesting limit: as containers, as JSON text held in a string, and as JSON
# held in strings held in JSON.
_deep = st.builds(_nested, _values, st.integers(MAX_NESTING - 3, MAX_NESTING + 2), st.booleans())
_chained = st.builds(
    _in_strings,
    st.builds(_nested, _values, st.integers(MAX_NESTING - 14, MAX_NESTING), st.just(False)),
    st.integers(1, 5),  # the text doubles its escapes with each level
)
_recorded = _values | _deep | _chained


class _Failed(Exception):
    pass


_calls_strategy = st.lists(
    st.tuples(
        st.sampled_from(["tool", "llm"]),
        st.sampled_from(["get_weather", "search", "gpt-4o"]),
        _recorded,  # args / input
        _recorded,  # output
        st.booleans(),  # raises
    ),
    max_size=5,
)


def _run(calls: list[tuple[str, str, Any, Any, bool]], agent_input: Any) -> str:
    with tracely.agent("paths", input=agent_input) as run:
        for kind, name, given_in, output, raises in calls:

            def fn(output: Any = output, raises: bool = raises, name: str = name) -> Any:
                if raises:
                    raise _Failed(f"no answer for {name}")
                return output

            try:
                if kind == "tool":
                    tracely.call_tool(name, fn, args=given_in)
                else:
                    tracely.call_llm(name, fn, input=given_in, usage=(3, 4))
            except _Failed:
                pass
        run.output = calls[-1][3] if calls else None
    return run.trace_id


@contextmanager
def _exact_checks_only() -> Iterator[None]:
    """Every value goes through the exact check, as before values were cleared by their text."""
    with (
        mock.patch.object(_extract, "text_within_limits", lambda text: False),
        mock.patch.object(_calls, "text_within_limits", lambda text: False),
    ):
        yield


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_calls_strategy, _recorded)
def test_the_in_process_bundle_is_the_exported_spans_bundle_byte_for_byte(
    capture: Any, calls: list[tuple[str, str, Any, Any, bool]], agent_input: Any
) -> None:
    capture.exporter.clear()
    trace_id = _run(calls, agent_input)
    in_process = capture.bundles[trace_id]
    spans = [s for s in capture.spans if format(s.context.trace_id, "032x") == trace_id]
    payload = encode_spans(spans).SerializeToString()

    from_the_wire = bundle_from_spans(records_from_otlp_proto(payload))
    with _exact_checks_only():
        exact_in_process = bundle_from_spans(spans)
        exact_from_the_wire = bundle_from_spans(records_from_otlp_proto(payload))

    text = orjson.dumps(in_process)
    assert orjson.dumps(from_the_wire) == text
    assert orjson.dumps(exact_in_process) == text
    assert orjson.dumps(exact_from_the_wire) == text


def _texts() -> st.SearchStrategy[str]:
    """JSON text as orjson and as other writers write it (spaces, escapes, indentation)."""
    return st.one_of(
        _recorded.map(lambda v: orjson.dumps(v).decode()),
        _recorded.map(json.dumps),
        _recorded.map(lambda v: json.dumps(v, ensure_ascii=False, indent=1)),
        st.integers(min_value=2**64 - 2, max_value=2**80).map(lambda n: f"[{n}, {-n}]"),
    )


@settings(max_examples=400, deadline=None)
@given(_texts())
def test_a_value_its_text_clears_is_one_the_exact_check_accepts(text: str) -> None:
    cleared = text_within_limits(text)
    assert text_within_limits(text.encode()) is cleared
    if cleared:
        assert value_problem(orjson.loads(text)) is None


def test_a_value_past_the_limits_is_not_cleared_by_its_text() -> None:
    for too_deep in (
        _nested(1, MAX_NESTING + 1, False),
        _nested(1, MAX_NESTING, True),
        _in_strings(_nested(1, MAX_NESTING - 5, False), 3),
    ):
        text = orjson.dumps(too_deep)
        assert value_problem(orjson.loads(text)) is not None
        assert not text_within_limits(text)
        assert not text_within_limits(text.decode())


def test_a_recorded_value_past_the_limits_is_refused_on_both_paths(capture: Any) -> None:
    too_deep = _nested("x", MAX_NESTING + 1, False)
    trace_id = _run([("tool", "get_weather", {"city": "Paris"}, too_deep, False)], None)
    spans = [s for s in capture.spans if format(s.context.trace_id, "032x") == trace_id]
    wire = bundle_from_spans(records_from_otlp_proto(encode_spans(spans).SerializeToString()))
    for bundle in (capture.bundles[trace_id], wire):
        assert bundle is not None
        assert bundle["tools"] == {}
        (item,) = [i for i in bundle["incomplete"] if i["label"] == "tools:get_weather"]
        assert f"nests deeper than {MAX_NESTING} levels" in item["reason"]


def test_values_cleared_by_their_text_are_neither_encoded_nor_walked_again(capture: Any) -> None:
    calls = [("tool", "get_weather", {"city": "Paris"}, {"temp": 21, "note": "[sunny]"}, False)]
    trace_id = _run(calls * 3, {"question": "weather?"})
    spans = [s for s in capture.spans if format(s.context.trace_id, "032x") == trace_id]
    with (
        mock.patch.object(_bundle, "value_problem", side_effect=AssertionError("walked")),
        mock.patch.object(_bundle, "_text", side_effect=AssertionError("encoded")),
    ):
        bundle = bundle_from_spans(spans)
    assert bundle is not None
    assert [e["output"] for e in bundle["tools"]["get_weather"]] == [
        {"temp": 21, "note": "[sunny]"}
    ] * 3


@settings(max_examples=300, deadline=None)
@given(
    st.text(),
    st.one_of(
        st.text().map(_extract.value_digest),
        st.lists(st.integers(0, 40) | st.text(max_size=8), max_size=3),
        st.none(),
    ),
)
def test_a_value_from_the_wire_matches_exactly_the_digest_taken_of_it(
    value: str, expected: Any
) -> None:
    assert _extract._digest_matches(value, expected, False) is (
        _extract.value_digest(value) == expected
    )
    assert _extract._digest_matches(value, _extract.value_digest(value), False)
