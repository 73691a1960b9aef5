"""Shared fixtures: one SDK TracerProvider for the session, a fresh span capture per test.

OpenTelemetry lets a process set its global provider once, so the session installs one whose
only processor routes spans to the current test's in-memory exporter and FixtureSpanProcessor.
Tests that must see an unset global provider use ``unset_global_provider``.
"""

from __future__ import annotations

import http.server
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracely_otel import FixtureSpanProcessor
from tracely_otel.diagnostics import RAISE_INTERNAL_ERRORS

ROOT = Path(__file__).resolve().parent.parent

# Property tests check behaviour, not speed: on a loaded CI machine an example can take longer
# than hypothesis's default 200 ms deadline, which would fail a correct test.
settings.register_profile("tracely", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tracely")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The suite pins what a person sees at a terminal. A CI runner sets CI (replay then lists only
# the failures) and GITHUB_STEP_SUMMARY (replay appends to it); tests that pin those behaviours
# set them themselves, so neither may leak in from the machine running the suite.
for _name in ("CI", "GITHUB_STEP_SUMMARY"):
    os.environ.pop(_name, None)
# A failure inside tracely that production only logs is raised in tests (and in every process a
# test starts), so that no test passes over a swallowed bug; a test that provokes one on purpose
# removes the variable.
os.environ[RAISE_INTERNAL_ERRORS] = "1"


class _Router(SpanProcessor):
    def __init__(self) -> None:
        self.targets: list[SpanProcessor] = []
        self.open: dict[int, str] = {}
        self.lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        with self.lock:
            self.open[span.context.span_id] = span.name
        for target in list(self.targets):
            target.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        with self.lock:
            self.open.pop(span.context.span_id, None)
        for target in list(self.targets):
            target.on_end(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_ROUTER = _Router()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(_ROUTER)
trace.set_tracer_provider(_PROVIDER)


class Capture:
    """The spans and bundles one test produced."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.bundles: dict[str, dict[str, Any]] = {}
        self.fixture_processor = FixtureSpanProcessor(self._on_bundle)
        self.processors = [SimpleSpanProcessor(self.exporter), self.fixture_processor]

    def _on_bundle(self, trace_id: str, bundle: dict[str, Any]) -> None:
        self.bundles[trace_id] = bundle

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        matches = [s for s in self.spans if s.name == name]
        assert len(matches) == 1, f"expected one span {name!r}, got {[s.name for s in self.spans]}"
        return matches[0]

    @property
    def last_bundle(self) -> dict[str, Any]:
        assert self.bundles, "no trace finished with a bundle"
        return list(self.bundles.values())[-1]


@pytest.fixture(autouse=True, scope="session")
def _private_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Nothing a test records lands in the project's own store."""
    import os

    saved = os.environ.get("TRACELY_STORE")
    from tracely_sdk.store import sqlite_url

    os.environ["TRACELY_STORE"] = sqlite_url(tmp_path_factory.mktemp("store") / "tracely.db")
    yield
    if saved is None:
        os.environ.pop("TRACELY_STORE", None)
    else:
        os.environ["TRACELY_STORE"] = saved


@pytest.fixture
def capture() -> Iterator[Capture]:
    cap = Capture()
    _ROUTER.targets.extend(cap.processors)
    try:
        yield cap
    finally:
        for p in cap.processors:
            _ROUTER.targets.remove(p)


@pytest.fixture(autouse=True)
def _no_span_leaks() -> Iterator[None]:
    """Every span a test started has ended by the time it finishes."""
    with _ROUTER.lock:
        before = set(_ROUTER.open)
    yield
    with _ROUTER.lock:
        leaked = {k: v for k, v in _ROUTER.open.items() if k not in before}
        for k in leaked:
            _ROUTER.open.pop(k, None)
    assert not leaked, f"spans left open: {sorted(leaked.values())}"


@pytest.fixture
def unset_global_provider() -> Iterator[None]:
    """Run with no global TracerProvider set, then restore the session's."""
    saved = trace._TRACER_PROVIDER
    saved_once = trace._TRACER_PROVIDER_SET_ONCE._done
    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE._done = False
    try:
        yield
    finally:
        current = trace._TRACER_PROVIDER
        if isinstance(current, TracerProvider) and current is not saved:
            current.shutdown()
        trace._TRACER_PROVIDER = saved
        trace._TRACER_PROVIDER_SET_ONCE._done = saved_once


# An OTLP/HTTP endpoint ---------------------------------------------------------------------


class _OTLPHandler(http.server.BaseHTTPRequestHandler):
    disable_nagle_algorithm = True
    server: OTLPCollector

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append((self.path, request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class OTLPCollector(http.server.ThreadingHTTPServer):
    """What the real OTLP/HTTP exporter posts to, on 127.0.0.1: keeps every export request."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _OTLPHandler)
        self.received: list[tuple[str, Any]] = []  # (path, ExportTraceServiceRequest)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    @property
    def spans(self) -> list[Any]:
        """Every span received, in the order the requests came."""
        return [
            span
            for _, request in self.received
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]


@pytest.fixture
def otlp_collector() -> Iterator[OTLPCollector]:
    server = OTLPCollector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
