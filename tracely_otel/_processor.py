"""FixtureSpanProcessor: turns each finished trace into a fixture bundle, in process."""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from tracely_otel._extract import bundle_from_spans
from tracely_otel.diagnostics import WarnOnce

logger = logging.getLogger("tracely.otel")

# The bundle is a Bundle; the callback's parameter stays Any so that a callback annotated with
# dict[str, Any] (as callbacks were before bundles were typed) still type-checks.
BundleCallback = Callable[[str, Any], None]


class FixtureSpanProcessor(SpanProcessor):
    """Calls ``on_bundle(trace_id_hex, bundle)`` when a trace's root span ends.

    Spans are buffered per trace until the trace's first local span (no parent, or a remote
    parent) ends; then the one extractor builds the bundle. Memory is bounded: at most
    ``max_traces`` open traces and ``max_spans_per_trace`` spans each; past that the oldest
    trace is dropped (logged once), never the host's call. Spans that end after their root
    are not part of the in-process bundle (the server path assembles late spans). With no
    callback attached nothing is buffered at all: replay runs that record nothing pay nothing.

    By default the bundle is extracted and delivered on the thread that ends the root span.
    With ``background=True`` (what :func:`tracely_otel.setup` and ``tracely.init()`` attach)
    a worker thread does it (finished traces gather for up to 50 ms, or until 64 wait, so that
    many short traces cost one wake-up), so the agent returns without waiting for its own
    recording. ``force_flush()`` (and the provider's) waits until every finished trace is
    delivered, and the processor delivers what is left at shutdown and at interpreter exit. When
    ``max_queued_traces`` traces are already waiting, the thread that ends a root extracts its
    trace itself: a recording is delayed, never dropped.
    """

    def __init__(
        self,
        on_bundle: BundleCallback | None = None,
        *,
        max_traces: int = 4096,
        max_spans_per_trace: int = 20_000,
        background: bool = False,
        max_queued_traces: int = 256,
    ) -> None:
        self._callbacks: list[BundleCallback] = [on_bundle] if on_bundle is not None else []
        self._max_traces = max_traces
        self._max_spans = max_spans_per_trace
        self._pending: OrderedDict[int, list[ReadableSpan]] = OrderedDict()
        self._lock = threading.Lock()
        self._warn_once = WarnOnce(logger)
        self._shutdown = False
        self._delivery: _Delivery | None = (
            _Delivery(self._deliver, max_queued_traces) if background else None
        )

    def add_callback(self, on_bundle: BundleCallback) -> None:
        """Also deliver bundles to ``on_bundle`` (a callback already present is not added twice)."""
        with self._lock:
            if on_bundle not in self._callbacks:
                self._callbacks.append(on_bundle)

    def remove_callback(self, on_bundle: BundleCallback) -> None:
        """Stop delivering bundles to ``on_bundle`` (no error if it was not attached)."""
        with self._lock:
            if on_bundle in self._callbacks:
                self._callbacks.remove(on_bundle)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        try:
            self._on_end(span)
        except Exception:  # a tracing failure never reaches the host's call
            self._warn_once("on_end", "tracely: fixture extraction failed", exc_info=True)

    def _on_end(self, span: ReadableSpan) -> None:
        if self._shutdown or not self._callbacks:
            return
        ctx = span.context
        if ctx is None:
            return
        trace_id = ctx.trace_id
        parent = span.parent
        is_root = parent is None or parent.is_remote
        with self._lock:
            spans = self._pending.get(trace_id)
            if spans is None:
                if is_root:
                    spans = []
                else:
                    spans = self._pending[trace_id] = []
                    if len(self._pending) > self._max_traces:
                        self._pending.popitem(last=False)
                        self._warn_once(
                            "traces",
                            "tracely: more than %d traces open at once; the oldest was not "
                            "recorded",
                            self._max_traces,
                        )
            if len(spans) < self._max_spans:
                spans.append(span)
            else:
                self._warn_once(
                    "spans",
                    "tracely: a trace exceeded %d spans; it is not recorded whole",
                    self._max_spans,
                )
            if is_root:
                self._pending.pop(trace_id, None)
                callbacks = list(self._callbacks)
        if not is_root:
            return
        if self._delivery is None or not self._delivery.submit(trace_id, spans, callbacks):
            self._deliver(trace_id, spans, callbacks)

    def _deliver(
        self, trace_id: int, spans: list[ReadableSpan], callbacks: list[BundleCallback]
    ) -> None:
        try:
            bundle = bundle_from_spans(spans)
        except Exception:  # a tracing failure never reaches the host's call
            self._warn_once("extract", "tracely: fixture extraction failed", exc_info=True)
            return
        if bundle is None:
            return
        trace_hex = format(trace_id, "032x")
        for callback in callbacks:
            try:
                callback(trace_hex, bundle)
            except Exception:
                self._warn_once(
                    f"cb{id(callback)}",
                    "tracely: on_bundle callback %r failed",
                    callback,
                    exc_info=True,
                )

    def pending_traces(self) -> int:
        """How many traces are waiting for their root span to end."""
        with self._lock:
            return len(self._pending)

    def shutdown(self) -> None:
        with self._lock:
            self._shutdown = True
            if self._pending:
                logger.debug(
                    "tracely: %d trace(s) still open at shutdown were not recorded",
                    len(self._pending),
                )
            self._pending.clear()
        if self._delivery is not None:
            self._delivery.close(_SHUTDOWN_DRAIN_SECONDS)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait until every finished trace's bundle has been delivered (background mode)."""
        if self._delivery is None:
            return True
        return self._delivery.wait_idle(timeout_millis / 1000)


_SHUTDOWN_DRAIN_SECONDS = 30.0
_GATHER_SECONDS = 0.05
_GATHER_TRACES = 64
Delivery = Callable[[int, list[ReadableSpan], list[BundleCallback]], None]


class _Delivery:
    """The worker thread of a background FixtureSpanProcessor and its queue of traces.

    The thread that ends a trace only appends to a deque (atomic) and, when the worker sleeps
    or a gather is full, sets an event: it never waits for a lock the worker holds. A shared
    lock there made the agent's thread queue behind the worker whenever the worker woke up.
    """

    def __init__(self, deliver: Delivery, max_queued: int) -> None:
        self._deliver = deliver
        self._max_queued = max_queued
        self._queue: deque[tuple[int, list[ReadableSpan], list[BundleCallback]]] = deque()
        self._wake = threading.Event()
        self._idle = False  # the worker waits for a first trace: the next one must wake it
        self._busy = 0  # traces taken off the queue and not yet delivered (worker-owned)
        self._waiters = 0  # threads in wait_idle: the worker stops gathering for them
        self._cond = threading.Condition()  # guards _busy and _waiters; never taken by submit
        self._start_lock = threading.Lock()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._exit_hook = False
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_weak_call(self._after_fork))

    def _after_fork(self) -> None:
        # Threads do not survive a fork, and a lock may have been held by one that did not: the
        # child starts afresh, and the parent delivers what it had queued.
        self._wake = threading.Event()
        self._cond = threading.Condition()
        self._start_lock = threading.Lock()
        self._queue.clear()
        self._idle = False
        self._busy = 0
        self._waiters = 0
        self._thread = None

    def submit(
        self, trace_id: int, spans: list[ReadableSpan], callbacks: list[BundleCallback]
    ) -> bool:
        """Queue a finished trace; False when the caller should deliver it itself."""
        queue = self._queue
        if self._closed or len(queue) >= self._max_queued:
            return False
        if self._thread is None:
            self._start()
        queue.append((trace_id, spans, callbacks))
        # The worker sets _idle before it looks at the queue a last time and sleeps, so either
        # it sees this trace or this sees _idle.
        if self._idle or len(queue) >= _GATHER_TRACES:
            self._wake.set()
        return True

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is not None:
                return
            thread = threading.Thread(
                target=self._run, name="tracely-fixture-recorder", daemon=True
            )
            thread.start()
            self._thread = thread
            if not self._exit_hook:
                # The last recordings reach every callback before the interpreter goes (a store
                # writer's own exit hook also flushes this processor before it closes).
                self._exit_hook = True
                atexit.register(self.close, _SHUTDOWN_DRAIN_SECONDS)

    def _run(self) -> None:
        queue, wake = self._queue, self._wake
        while True:
            if not queue:
                self._idle = True
                if not queue:  # looked at again after _idle is set: see submit()
                    if self._closed:
                        return
                    wake.wait()
                self._idle = False
                wake.clear()
                continue
            # Let finished traces gather a moment before taking the interpreter lock for them:
            # one wake-up for many short traces instead of one each.
            deadline = time.monotonic() + _GATHER_SECONDS
            while len(queue) < _GATHER_TRACES and not self._closed and not self._waiters:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                wake.wait(left)
                wake.clear()
            with self._cond:
                batch = [queue.popleft() for _ in range(len(queue))]
                self._busy += len(batch)
            for item in batch:
                try:
                    self._deliver(*item)
                finally:
                    with self._cond:
                        self._busy -= 1
                        if self._waiters:
                            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is queued or being delivered; False on timeout."""
        if threading.current_thread() is self._thread:
            return True  # asked from a callback: waiting for itself would never end
        deadline = time.monotonic() + timeout
        with self._cond:
            self._waiters += 1
        self._wake.set()  # a gathering worker delivers now
        try:
            return self._wait_idle(deadline)
        finally:
            with self._cond:
                self._waiters -= 1

    def _wait_idle(self, deadline: float) -> bool:
        with self._cond:
            while self._queue or self._busy:
                thread = self._thread
                if thread is None or not thread.is_alive():
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                # Woken by each delivery. The timeout notices a worker that died with traces
                # still queued (delivered below, here) without waiting out the whole deadline.
                self._cond.wait(min(left, 0.05))
                if self._queue and not self._busy:
                    self._wake.set()
            leftover = [self._queue.popleft() for _ in range(len(self._queue))]
        for item in leftover:  # no worker left to deliver them: do it here
            self._deliver(*item)
        return True

    def close(self, timeout: float) -> None:
        """Deliver what is queued (waiting at most ``timeout``), then stop the worker."""
        self.wait_idle(timeout)
        self._closed = True
        self._wake.set()


def _weak_call(method: Callable[[], None]) -> Callable[[], None]:
    """A hook that calls ``method`` while its object lives, without keeping it alive."""
    ref = weakref.WeakMethod(method)

    def call() -> None:
        target = ref()
        if target is not None:
            target()

    return call
