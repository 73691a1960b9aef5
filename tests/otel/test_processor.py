"""FixtureSpanProcessor: one bundle per finished trace, bounded memory, never raising."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from typing import Any

import orjson
import pytest
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


# -- background delivery (what setup() and tracely.init() attach) ----------------------------


def _recorded_trace(tracer: trace.Tracer) -> None:
    with (
        tracer.start_as_current_span("request"),
        tracer.start_as_current_span("execute_tool t", attributes=_tool_attrs("t")),
    ):
        pass


def test_background_delivery_runs_off_the_agents_thread_and_flush_waits_for_it() -> None:
    release = threading.Event()
    got: list[str] = []

    def slow(trace_id: str, bundle: dict[str, Any]) -> None:
        release.wait(10)
        got.append(threading.current_thread().name)

    processor = FixtureSpanProcessor(slow, background=True)
    _recorded_trace(_provider(processor))
    assert got == []  # the root ended and the agent's thread went on
    assert not processor.force_flush(timeout_millis=50)  # still delivering
    release.set()
    assert processor.force_flush()
    assert got == ["tracely-fixture-recorder"]


def test_a_full_queue_delivers_on_the_ending_thread_instead_of_dropping() -> None:
    release = threading.Event()
    got: list[str] = []

    def deliver(trace_id: str, bundle: dict[str, Any]) -> None:
        if threading.current_thread().name == "tracely-fixture-recorder":
            release.wait(10)
        got.append(threading.current_thread().name)

    processor = FixtureSpanProcessor(deliver, background=True, max_queued_traces=1)
    tracer = _provider(processor)
    for _ in range(3):  # one being delivered, one queued, one past the bound
        _recorded_trace(tracer)
    assert threading.current_thread().name in got
    release.set()
    assert processor.force_flush()
    assert len(got) == 3


def test_shutdown_delivers_what_is_queued() -> None:
    got: list[dict[str, Any]] = []
    processor = FixtureSpanProcessor(lambda t, b: got.append(b), background=True)
    _recorded_trace(_provider(processor))
    processor.shutdown()
    assert len(got) == 1


def test_background_recordings_reach_the_callback_at_interpreter_exit() -> None:
    script = textwrap.dedent(
        """
        import sys
        from opentelemetry.sdk.trace import TracerProvider
        from tracely_otel import FixtureSpanProcessor
        from tracely_otel import attributes as A

        def write(trace_id, bundle):
            sys.stdout.write("delivered " + trace_id + "\\n")

        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(FixtureSpanProcessor(write, background=True))
        tracer = provider.get_tracer("t")
        with tracer.start_as_current_span("request"):
            with tracer.start_as_current_span(
                "execute_tool t",
                attributes={A.KIND: "tool", A.NAME: "t", A.OUTPUT: "1", A.DIGEST: "{}"},
            ):
                pass
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("delivered ") == 1


def test_a_forked_child_records_its_own_traces() -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    got: list[str] = []
    processor = FixtureSpanProcessor(lambda t, b: got.append(t), background=True)
    tracer = _provider(processor)
    _recorded_trace(tracer)  # the worker thread now runs in this process
    assert processor.force_flush()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first recording needs a worker of its own
        try:
            _recorded_trace(tracer)
            ok = processor.force_flush(timeout_millis=10_000) and len(got) == 2
            os.write(write, b"ok" if ok else b"no")
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    assert answer == b"ok"
    assert len(got) == 1  # the child's recording stayed in the child
