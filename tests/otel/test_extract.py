"""The extractor: trace order, nesting, integrity of recorded values."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracely_sdk as tracely
from tracely_otel import (
    FixtureSpanProcessor,
    SpanRecord,
    bundle_from_spans,
    digest_item,
    record_from_readable,
    validate_bundle,
    value_digest,
)


@pytest.fixture
def limited(unset_global_provider: None) -> Iterator[Any]:
    """A global provider with tight span limits, and the bundles it produced."""
    exporter = InMemorySpanExporter()
    bundles: list[dict[str, Any]] = []
    provider = TracerProvider(
        span_limits=SpanLimits(max_attribute_length=60, max_span_attributes=128)
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(FixtureSpanProcessor(lambda t, b: bundles.append(b)))
    trace.set_tracer_provider(provider)
    yield bundles


def test_calls_are_in_trace_order_with_seq(capture: Any) -> None:
    with tracely.agent("a", input=1):
        tracely.call_llm("m", lambda: "plan")
        tracely.call_tool("t", lambda: 1)
        tracely.call_llm("m", lambda: "answer")
    bundle = capture.last_bundle
    assert [e["seq"] for e in bundle["llm"]["m"]] == [1, 3]
    assert bundle["tools"]["t"][0]["seq"] == 2
    assert bundle["format"] == "tracely.bundle/1"
    assert bundle["trace_id"] == next(iter(capture.bundles))
    validate_bundle(bundle)


def test_a_call_nested_in_a_recorded_call_is_not_its_own_entry(capture: Any) -> None:
    def research() -> str:
        return tracely.call_llm("m", lambda: "inner")

    with tracely.agent("a", input=1):
        tracely.call_tool("research", research)
    bundle = capture.last_bundle
    assert bundle["llm"] == {} and list(bundle["tools"]) == ["research"]


def test_a_truncated_value_is_never_served(limited: list[dict[str, Any]]) -> None:
    with tracely.agent("a", input=1):
        tracely.call_tool("big", lambda: "x" * 100)
        tracely.call_tool("small", lambda: "ok")
    bundle = limited[-1]
    assert "big" not in bundle["tools"] and bundle["tools"]["small"][0]["output"] == "ok"
    (item,) = bundle["incomplete"]
    assert item["label"] == "tools:big" and "truncated" in item["reason"]
    assert "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" in item["reason"]
    with (
        tracely.fixtures(bundle),
        pytest.raises(tracely.ReplayError, match=r"could not be recorded: tracely\.output"),
    ):
        tracely.call_tool("big", lambda: "x" * 100)


def test_an_evicted_value_is_never_served(unset_global_provider: None) -> None:
    bundles: list[dict[str, Any]] = []
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=3))
    provider.add_span_processor(FixtureSpanProcessor(lambda t, b: bundles.append(b)))
    trace.set_tracer_provider(provider)
    tracely.call_tool("t", lambda: "ok", args={"a": 1})
    (item,) = bundles[-1]["incomplete"]
    assert item["label"] == "tools:t"
    assert "tracely.args" in item["reason"] and "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT" in item["reason"]


@pytest.mark.parametrize("limit", range(1, 16))
def test_token_counts_are_never_lost_while_the_call_is_served(
    unset_global_provider: None, limit: int
) -> None:
    # Whatever the attribute count limit evicts, the entry either keeps its usage or is not
    # an entry at all: the counts are set after the digested output.
    bundles: list[dict[str, Any]] = []
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=limit))
    provider.add_span_processor(FixtureSpanProcessor(lambda t, b: bundles.append(b)))
    trace.set_tracer_provider(provider)
    tracely.call_llm("m", lambda: "Hello", usage=(812, 96))
    entries = bundles[-1]["llm"].get("m", [])
    assert all(entry["usage"] == [812, 96] for entry in entries)
    assert len(entries) + len(bundles[-1].get("incomplete", [])) == 1


def test_usage_is_recorded_once_as_the_conventions_token_counts(capture: Any) -> None:
    tracely.call_llm("m", lambda: "Hello", usage=(812, 96))
    (span,) = capture.spans
    assert "tracely.usage" not in span.attributes
    assert "tracely.usage" not in orjson.loads(span.attributes["tracely.digest"])
    assert capture.last_bundle["llm"]["m"][0]["usage"] == [812, 96]


def test_usage_recorded_by_an_earlier_version_is_still_read() -> None:
    output, usage = '"Hello"', "[3,4]"
    digest = "{" + digest_item("tracely.output", output) + "," + digest_item("tracely.usage", usage)
    span = TracerProvider().get_tracer("t").start_span("chat m")
    span.set_attributes(
        {
            "tracely.kind": "llm",
            "tracely.name": "m",
            "tracely.output": output,
            "tracely.usage": usage,
            "tracely.digest": digest + "}",
        }
    )
    span.end()
    assert bundle_from_spans([span])["llm"]["m"][0]["usage"] == [3, 4]


def test_a_span_no_limit_could_have_cut_is_intact(capture: Any) -> None:
    tracely.call_tool("t", lambda: "ok")
    (span,) = capture.spans
    assert record_from_readable(span).intact  # so its digest need not be checked


@pytest.mark.parametrize(
    "limits",
    [SpanLimits(max_attribute_length=1000), SpanLimits(max_span_attributes=1)],
    ids=["value-length-limit", "attributes-dropped"],
)
def test_a_span_a_limit_may_have_cut_is_checked(limits: SpanLimits) -> None:
    span = TracerProvider(span_limits=limits).get_tracer("t").start_span("s")
    span.set_attributes({"a": "1", "b": "2"})
    span.end()
    assert not record_from_readable(span).intact


def test_spans_of_several_traces_are_refused(capture: Any) -> None:
    tracely.call_tool("a", lambda: 1)
    tracely.call_tool("b", lambda: 2)
    with pytest.raises(ValueError, match="one trace"):
        bundle_from_spans(capture.spans)


def test_bundle_from_spans_takes_readable_spans_or_records(capture: Any) -> None:
    with tracely.agent("a", input=1):
        tracely.call_tool("t", lambda: 1)
    from_readable = bundle_from_spans(capture.spans)
    from_records = bundle_from_spans([record_from_readable(s) for s in capture.spans])
    assert from_readable == from_records == capture.last_bundle


def test_duplicate_spans_are_one_span(capture: Any) -> None:
    tracely.call_tool("t", lambda: 1)
    assert bundle_from_spans(capture.spans * 2) == bundle_from_spans(capture.spans)


def test_a_trace_without_tracely_spans_has_no_bundle() -> None:
    record = SpanRecord("0" * 31 + "1", "0" * 15 + "1", None, "GET /", 1, 2, {"http.method": "GET"})
    assert bundle_from_spans([record]) is None
    assert bundle_from_spans([]) is None


def test_a_value_rewritten_on_the_wire_fails_the_digest(capture: Any) -> None:
    tracely.call_tool("t", lambda: {"n": 1})
    (span,) = capture.spans
    record = record_from_readable(span)
    # as decoded from OTLP after a collector rewrote the value (same length, other content)
    fields = {f: getattr(record, f) for f in record.__slots__}
    fields.update(attributes={**record.attributes, "tracely.output": '{"n":2}'}, in_process=False)
    bundle = bundle_from_spans([SpanRecord(**fields)])
    assert bundle is not None and bundle["tools"] == {}
    assert "does not match" in bundle["incomplete"][0]["reason"]


def test_a_broken_reader_never_costs_the_trace_its_recording(
    capture: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracely_otel import _extract

    def broken(span: Any) -> Any:
        raise RuntimeError("reader bug")

    monkeypatch.setattr(_extract, "_READERS", [broken, *_extract._READERS])
    with tracely.agent("a", input=1):
        tracely.call_tool("t", lambda: 1)
    assert capture.last_bundle["tools"]["t"][0]["output"] == 1


@given(st.text(), st.sampled_from(["tracely.args", "tracely.output", "tracely.error"]))
def test_digest_item_is_the_value_digest_pair_as_json(text: str, key: str) -> None:
    assert orjson.loads("{" + digest_item(key, text) + "}") == {key: value_digest(text)}


class _LosesSpans(SpanProcessor):
    """Passes spans on to ``inner`` but loses every other tool span, as a full export queue or
    a failed exporter does."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self.tools = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if (span.attributes or {}).get("tracely.kind") == "tool":
            self.tools += 1
            if self.tools % 2 == 0:
                return
        self.inner.on_end(span)


def _twenty_tool_calls() -> str:
    with tracely.agent("a", input="x") as run:
        for i in range(20):
            tracely.call_tool("lookup", lambda i=i: i * 2, args={"i": i})
        tracely.call_llm("m", lambda: "done")
        run.output = "done"
    return "done"


@pytest.fixture
def lossy(unset_global_provider: None) -> Iterator[list[dict[str, Any]]]:
    """A global provider whose recorder loses half the tool spans; the bundles it produced."""
    bundles: list[dict[str, Any]] = []
    provider = TracerProvider()
    provider.add_span_processor(_LosesSpans(FixtureSpanProcessor(lambda t, b: bundles.append(b))))
    trace.set_tracer_provider(provider)
    yield bundles


def test_the_root_agent_counts_the_calls_its_run_made(capture: Any) -> None:
    def research() -> str:
        return tracely.call_llm("m", lambda: "inner")  # served with the tool: not counted

    with tracely.agent("a", input=1):
        with tracely.agent("sub"):
            tracely.call_tool("t", lambda: 1)
        tracely.call_tool("research", research)
        tracely.call_llm("m", lambda: "answer")
    (root,) = [s for s in capture.spans if s.name == "invoke_agent a"]
    assert root.attributes["tracely.calls.tools"] == 2
    assert root.attributes["tracely.calls.llm"] == 1
    assert root.attributes["tracely.calls.last_seq"] == 3
    assert "incomplete" not in capture.last_bundle


def test_a_recording_that_lost_spans_is_marked_incomplete(lossy: list[dict[str, Any]]) -> None:
    _twenty_tool_calls()
    (bundle,) = lossy
    validate_bundle(bundle)
    assert len(bundle["tools"]["lookup"]) == 10
    (lost,) = bundle["incomplete"]
    assert lost["label"] == "tools" and lost["missing"] == 10
    assert "made 20 tool call(s) but the trace holds 10" in lost["reason"]


def test_replaying_a_recording_that_lost_spans_is_never_clean(
    lossy: list[dict[str, Any]],
) -> None:
    _twenty_tool_calls()
    (bundle,) = lossy
    with (
        pytest.raises(tracely.ReplayError, match="the recording is missing calls"),
        tracely.fixtures(bundle) as report,
    ):
        _twenty_tool_calls()
    assert not report.clean


def test_a_recording_without_call_counts_is_taken_as_it_is(capture: Any) -> None:
    with tracely.agent("a", input=1):
        tracely.call_tool("t", lambda: 1)
        tracely.call_tool("t", lambda: 2)
    counts = ("tracely.calls.tools", "tracely.calls.llm", "tracely.calls.last_seq")
    records = []
    for span in capture.spans[-3:]:
        record = record_from_readable(span)
        if record.attributes.get("tracely.kind") == "tool" and records:
            continue  # the second tool span is lost, as an earlier version would not notice
        attributes = {k: v for k, v in record.attributes.items() if k not in counts}
        records.append(dataclasses.replace(record, attributes=attributes))
    bundle = bundle_from_spans(records)
    assert bundle is not None and "incomplete" not in bundle
    assert len(bundle["tools"]["t"]) == 1


def test_a_call_in_a_trace_of_its_own_is_not_counted_for_the_run(capture: Any) -> None:
    from opentelemetry import context as otel_context

    with tracely.agent("own", input=1):
        tracely.call_tool("t", lambda: 1)
        with trace.get_tracer("test").start_as_current_span(
            "elsewhere", context=otel_context.Context()
        ):
            tracely.call_tool("t", lambda: 2)
    (root,) = [s for s in capture.spans if s.name == "invoke_agent own"]
    assert root.attributes["tracely.calls.tools"] == 1
    assert "incomplete" not in capture.bundles[format(root.context.trace_id, "032x")]


def test_each_call_and_the_agent_carry_their_spans_times(capture: Any) -> None:
    with tracely.agent("a", input=1):
        tracely.call_llm("m", lambda: "plan", usage=(3, 1))
        tracely.call_tool("t", lambda: 1)
    bundle = validate_bundle(capture.last_bundle)
    llm, tool = bundle["llm"]["m"][0], bundle["tools"]["t"][0]
    assert bundle["started_at"] <= llm["started_at"] <= llm["ended_at"] <= tool["started_at"]
    assert tool["started_at"] <= tool["ended_at"] <= bundle["agent"]["ended_at"]


@pytest.mark.parametrize("bad", [-1, 1.5, "1", True, 2**64])
def test_a_time_that_is_not_nanoseconds_since_the_epoch_is_refused(bad: Any) -> None:
    from tracely_otel import BundleFormatError

    with pytest.raises(BundleFormatError, match="started_at must be a time in nanoseconds"):
        validate_bundle({"tools": {"t": [{"output": 1, "started_at": bad}]}})
    with pytest.raises(BundleFormatError, match="ended_at must be a time in nanoseconds"):
        validate_bundle({"agent": {"name": "a", "ended_at": bad}})
