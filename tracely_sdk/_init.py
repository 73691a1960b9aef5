"""``tracely.init()``: wire the OpenTelemetry pipeline and the recorder in one call."""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

import tracely_otel
from tracely_otel import Bundle, BundleCallback
from tracely_sdk import _redact
from tracely_sdk._config import resolve
from tracely_sdk._network_guard import allow_own
from tracely_sdk.errors import ConfigError

logger = logging.getLogger("tracely")

_sinks: dict[str, BundleCallback] = {}
_sinks_lock = threading.Lock()


def _store_sink(url: str | None) -> BundleCallback:
    """The one callback that hands bundles to the background writer of store ``url``."""
    from tracely_sdk.store import BackgroundWriter, default_store_url, open_store, spool_path_for

    resolved = url or default_store_url()
    with _sinks_lock:
        sink = _sinks.get(resolved)
        if sink is not None:
            return sink
        writer = BackgroundWriter(lambda: open_store(resolved), spool_path=spool_path_for(resolved))

        def close_at_exit() -> None:
            # The recorder delivers on its own thread: let it hand over the last recordings
            # first, whichever of the two exit hooks was registered first.
            processor = tracely_otel.find_fixture_processor(trace.get_tracer_provider())
            if processor is not None:
                processor.force_flush()
            writer.close()

        atexit.register(close_at_exit)

        def record(trace_id: str, bundle: Bundle) -> None:
            writer.submit(bundle)

        record.writer = writer  # type: ignore[attr-defined]
        _sinks[resolved] = record
        return record


def flush(timeout: float | None = 5.0) -> bool:
    """Wait until every finished trace's recording is in its store; False if one is not.

    The recorder hands over every finished trace first. False when a recording is still
    waiting for an unavailable store when ``timeout`` runs out (it is then kept in the spool
    and written later) or when one was lost; tracely's log messages say which.
    """
    processor = tracely_otel.find_fixture_processor(trace.get_tracer_provider())
    if processor is not None:
        processor.force_flush()
    with _sinks_lock:
        writers = [sink.writer for sink in _sinks.values()]  # type: ignore[attr-defined]
    ok = True
    for writer in writers:
        ok = writer.flush(timeout) and not writer.stats["dropped"] and ok
    return ok


def store_sink_from_settings() -> BundleCallback | None:
    """The store writer's callback per ``TRACELY_STORE``/``TRACELY_RECORD`` (None: not recording).

    Registered under the ``tracely_bundle_sinks`` entry point, so ``opentelemetry-instrument``
    records into the store exactly as ``init()`` does.
    """
    if not resolve("record"):
        return None
    return _store_sink(resolve("store"))


def init(
    *,
    service_name: str | None = None,
    store: str | None = None,
    record: bool | None = None,
    instrument: str | list[str] | None = None,
    exporter: SpanExporter | str | None = None,
    endpoint: str | None = None,
    on_bundle: BundleCallback | None = None,
    redact: Callable[[Any], Any] | None = None,
    sampler: Sampler | None = None,
) -> TracerProvider | None:
    """Set up tracing and recording for an agent process; safe to call more than once.

    - Uses the application's global TracerProvider when it set one (never replacing it), or
      builds one from the standard ``OTEL_*`` variables with the OTLP exporter.
    - Attaches the FixtureSpanProcessor: each finished trace's bundle is written to the store
      (``store`` / ``TRACELY_STORE``, default ``.tracely/tracely.db`` in the project) by a
      background writer that never blocks the agent, unless ``record=False`` /
      ``TRACELY_RECORD=false``. ``on_bundle(trace_id, bundle)`` receives bundles too.
    - ``instrument="auto"`` (or ``TRACELY_INSTRUMENT``) patches the installed provider SDKs.
    - ``redact`` runs after the default secret redaction on every recorded value.
    - ``sampler`` (an OpenTelemetry sampler) is the sampler of the provider init builds; the
      application's own provider keeps its own.

    Returns the provider, or None when ``OTEL_SDK_DISABLED`` is set.
    """
    if redact is not None:
        if not callable(redact):
            raise ConfigError(f"init(redact=...) must be a function of a value, got {redact!r}")
        _redact.configure(redact)
    providers = resolve("instrument", instrument)
    if providers:
        from tracely_sdk.providers import instrument as instrument_providers

        instrument_providers(providers)
    if endpoint:
        allow_own(endpoint)  # strict replay lets spans reach tracely's exporter
    try:
        provider = tracely_otel.setup(
            on_bundle=on_bundle,
            service_name=resolve("service_name", service_name),
            exporter=exporter,
            endpoint=endpoint,
            sampler=sampler,
        )
        if provider is not None and resolve("record", record):
            fixture_processor = tracely_otel.find_fixture_processor(provider)
            if fixture_processor is not None:
                fixture_processor.add_callback(_store_sink(resolve("store", store)))
        return provider
    except tracely_otel.SetupError as exc:
        raise ConfigError(str(exc)) from exc
