"""FixtureSpanProcessor: one bundle per finished trace, bounded memory, never raising."""

from __future__ import annotations

from typing import Any

import orjson
from opentelemetry import context, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from tracely_otel import FixtureSpanProcessor, value_digest
from tracely_otel import attributes as A


def _provider(processor: FixtureSpanProcessor) -> trace.Tracer:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider.get_tracer("test")


def _tool_attrs(name: str) -> dict[str, Any]:
    digest = {A.OUTPUT: value_digest("1")}
    return {A.KIND: "tool", A.NAME: name, A.OUTPUT: "1", A.DIGEST: orjson.dumps(digest).decode()}


def test_bundle_delivered_when_the_root_ends() -> None:
    got: list[tuple[str, dict[str, Any]]] = []
    tracer = _provider(FixtureSpanProcessor(lambda t, b: got.append((t, b))))
    with tracer.start_as_current_span("request") as root:
        with tracer.start_as_current_span("execute_tool t", attributes=_tool_attrs("t")):
            pass
        assert got == []
    ((trace_id, bundle),) = got
    assert trace_id == format(root.get_span_context().trace_id, "032x")
    assert bundle["tools"]["t"][0]["output"] == 1


def test_a_remote_parent_makes_the_local_span_the_root() -> None:
    got: list[dict[str, Any]] = []
    tracer = _provider(FixtureSpanProcessor(lambda t, b: got.append(b)))
    remote = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    ctx = trace.set_span_in_context(NonRecordingSpan(remote))
    token = context.attach(ctx)
    try:
        with tracer.start_as_current_span("execute_tool t", attributes=_tool_attrs("t")):
            pass
    finally:
        context.detach(token)
    assert len(got) == 1 and got[0]["trace_id"] == format(0xABC, "032x")


def test_traces_without_calls_deliver_nothing() -> None:
    got: list[Any] = []
    tracer = _provider(FixtureSpanProcessor(lambda t, b: got.append(b)))
    with tracer.start_as_current_span("GET /"), tracer.start_as_current_span("db"):
        pass
    assert got == []


def test_open_traces_are_bounded() -> None:
    processor = FixtureSpanProcessor(lambda t, b: None, max_traces=3)
    tracer = _provider(processor)
    roots = [tracer.start_span(f"root{i}") for i in range(5)]
    for root in roots:
        child = tracer.start_span("child", context=trace.set_span_in_context(root))
        child.end()
    assert processor.pending_traces() == 3
    for root in roots:
        root.end()
    assert processor.pending_traces() == 0


def test_add_callback_does_not_duplicate() -> None:
    got: list[Any] = []
    processor = FixtureSpanProcessor()
    callback = got.append
    processor.add_callback(lambda t, b: callback(b))
    processor.add_callback(processor._callbacks[0])
    tracer = _provider(processor)
    with tracer.start_as_current_span("execute_tool t", attributes=_tool_attrs("t")):
        pass
    assert len(got) == 1


def test_removed_callback_gets_nothing_and_an_idle_processor_buffers_nothing() -> None:
    got: list[Any] = []
    processor = FixtureSpanProcessor()
    callback = lambda t, b: got.append(b)  # noqa: E731
    processor.add_callback(callback)
    processor.remove_callback(callback)
    processor.remove_callback(callback)  # not attached: no error
    tracer = _provider(processor)
    with tracer.start_as_current_span("root"):
        with tracer.start_as_current_span("execute_tool t", attributes=_tool_attrs("t")):
            pass
        assert processor.pending_traces() == 0
    assert got == []
