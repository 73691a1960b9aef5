"""FixtureSpanProcessor: turns each finished trace into a fixture bundle, in process."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from tracely_otel._extract import bundle_from_spans

logger = logging.getLogger("tracely.otel")

BundleCallback = Callable[[str, dict[str, Any]], None]


class FixtureSpanProcessor(SpanProcessor):
    """Calls ``on_bundle(trace_id_hex, bundle)`` when a trace's root span ends.

    Spans are buffered per trace until the trace's first local span (no parent, or a remote
    parent) ends; then the one extractor builds the bundle. Memory is bounded: at most
    ``max_traces`` open traces and ``max_spans_per_trace`` spans each; past that the oldest
    trace is dropped (logged once), never the host's call. Spans that end after their root
    are not part of the in-process bundle (the server path assembles late spans). With no
    callback attached nothing is buffered at all: replay runs that record nothing pay nothing.
    """

    def __init__(
        self,
        on_bundle: BundleCallback | None = None,
        *,
        max_traces: int = 4096,
        max_spans_per_trace: int = 20_000,
    ) -> None:
        self._callbacks: list[BundleCallback] = [on_bundle] if on_bundle is not None else []
        self._max_traces = max_traces
        self._max_spans = max_spans_per_trace
        self._pending: OrderedDict[int, list[ReadableSpan]] = OrderedDict()
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._shutdown = False

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

    def _warn_once(self, key: str, message: str, *args: Any, exc_info: bool = False) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message, *args, exc_info=exc_info)

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
        if is_root:
            self._deliver(format(trace_id, "032x"), spans, callbacks)

    def _deliver(
        self, trace_id: str, spans: list[ReadableSpan], callbacks: list[BundleCallback]
    ) -> None:
        bundle = bundle_from_spans(spans)
        if bundle is None:
            return
        for callback in callbacks:
            try:
                callback(trace_id, bundle)
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

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
