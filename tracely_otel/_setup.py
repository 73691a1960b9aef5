"""Pipeline setup from the standard ``OTEL_*`` environment variables.

``setup()`` never replaces a TracerProvider the application set: it adds the processors that
are missing to it. Called again, it adds nothing twice. With no OTLP endpoint configured and no
exporter asked for, spans are exported nowhere (and no connection errors are logged), but the
FixtureSpanProcessor still sees them. A caller whose spans nobody else reads can pass a
``sampler`` (OpenTelemetry's ``ALWAYS_OFF``) for the provider setup builds; see
:func:`exporter_configured`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import Sampler

from tracely_otel._processor import BundleCallback, FixtureSpanProcessor

logger = logging.getLogger("tracely.otel")

# The standard variables this module reads, by their documented names.
OTEL_SDK_DISABLED = "OTEL_SDK_DISABLED"
OTEL_SERVICE_NAME = "OTEL_SERVICE_NAME"
OTEL_RESOURCE_ATTRIBUTES = "OTEL_RESOURCE_ATTRIBUTES"
OTEL_TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"
OTEL_EXPORTER_OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
OTEL_EXPORTER_OTLP_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"

_PROTOCOLS = ("http/protobuf", "grpc")
_EXPORTERS = ("otlp", "console", "none")
_ROLE = "_tracely_role"
_lock = threading.Lock()


class SetupError(ValueError):
    """A setting has a value the pipeline cannot use; the message names the variable."""


def _env(name: str, environ: Mapping[str, str]) -> str | None:
    value = environ.get(name, "").strip()
    return value or None  # an empty variable is unset


def _truthy(name: str, value: str) -> bool:
    lowered = value.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise SetupError(f"{name}={value!r} is not a boolean; use true or false")


def sdk_disabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``OTEL_SDK_DISABLED`` says the SDK is off."""
    value = _env(OTEL_SDK_DISABLED, os.environ if environ is None else environ)
    return value is not None and _truthy(OTEL_SDK_DISABLED, value)


def _exporter_names(explicit: str | None, environ: Mapping[str, str]) -> list[str]:
    source = OTEL_TRACES_EXPORTER
    raw = explicit if explicit is not None else _env(OTEL_TRACES_EXPORTER, environ)
    if raw is None:
        has_endpoint = _env(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, environ) or _env(
            OTEL_EXPORTER_OTLP_ENDPOINT, environ
        )
        # OTel's default exporter is otlp to localhost; exporting nowhere is quieter than
        # retrying a collector that is not there, so tracely asks for an endpoint first.
        return ["otlp"] if has_endpoint else []
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    for name in names:
        if name not in _EXPORTERS:
            raise SetupError(
                f"{source}={raw!r}: unknown exporter {name!r}; use one of {', '.join(_EXPORTERS)}"
            )
    return [n for n in names if n != "none"]


def exporter_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the ``OTEL_*`` variables send spans somewhere: ``OTEL_TRACES_EXPORTER`` names an
    exporter other than ``none``, or (with it unset) an OTLP endpoint is set.

    A bad ``OTEL_TRACES_EXPORTER`` counts as configured: :func:`setup` then says what is wrong.
    """
    try:
        return bool(_exporter_names(None, os.environ if environ is None else environ))
    except SetupError:
        return True


def _otlp_exporter(
    endpoint: str | None, protocol: str | None, environ: Mapping[str, str]
) -> SpanExporter:
    proto = (
        protocol
        or _env(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, environ)
        or _env(OTEL_EXPORTER_OTLP_PROTOCOL, environ)
        or "http/protobuf"
    )
    if proto not in _PROTOCOLS:
        raise SetupError(
            f"{OTEL_EXPORTER_OTLP_PROTOCOL}={proto!r} is not supported by the OpenTelemetry "
            f"Python OTLP exporter; use one of {', '.join(_PROTOCOLS)}"
        )
    if proto == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=endpoint) if endpoint else GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if endpoint:
        # An explicit endpoint argument is the full traces URL, as the exporter expects.
        url = (
            endpoint
            if endpoint.rstrip("/").endswith("/v1/traces")
            else endpoint.rstrip("/") + "/v1/traces"
        )
        return OTLPSpanExporter(endpoint=url)
    return OTLPSpanExporter()


def _processors(provider: TracerProvider) -> tuple[SpanProcessor, ...]:
    multi = getattr(provider, "_active_span_processor", None)
    return tuple(getattr(multi, "_span_processors", ()))


def find_fixture_processor(provider: Any) -> FixtureSpanProcessor | None:
    """The FixtureSpanProcessor attached to ``provider``, if any."""
    for processor in _processors(provider) if isinstance(provider, TracerProvider) else ():
        if isinstance(processor, FixtureSpanProcessor):
            return processor
    return None


def setup(
    *,
    on_bundle: BundleCallback | None = None,
    service_name: str | None = None,
    exporter: SpanExporter | str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    environ: Mapping[str, str] | None = None,
    sampler: Sampler | None = None,
) -> TracerProvider | None:
    """Make sure the global TracerProvider records fixtures and exports as configured.

    - No global provider yet: build one (resource from ``OTEL_SERVICE_NAME`` /
      ``OTEL_RESOURCE_ATTRIBUTES`` and ``service_name``), with the exporter chosen by
      ``exporter`` / ``OTEL_TRACES_EXPORTER`` / ``OTEL_EXPORTER_OTLP_*`` and ``sampler``
      (default: the SDK's, ``OTEL_TRACES_SAMPLER``), and set it globally.
    - The app already set an SDK provider: keep it and its exporters; add only the
      FixtureSpanProcessor (and an exporter only when one is passed explicitly); ``sampler``
      is not applied to it: the application decides what its provider samples.
    - The FixtureSpanProcessor extracts bundles on its own worker thread; the provider's
      ``force_flush()`` waits until every finished trace has reached ``on_bundle``.
    - ``OTEL_SDK_DISABLED=true``: do nothing and return None.

    Returns the provider in use, or None when tracing is disabled or the global provider is
    not an SDK provider (then nothing can be attached, and a warning says so).
    """
    env = os.environ if environ is None else environ
    if sdk_disabled(env):
        logger.info("tracely: OTEL_SDK_DISABLED is set; no spans are recorded")
        return None
    with _lock:
        current = trace.get_tracer_provider()
        created = False
        if isinstance(current, TracerProvider):
            provider = current
        elif type(current).__name__ == "ProxyTracerProvider":
            attributes = {"service.name": service_name} if service_name else {}
            provider = TracerProvider(resource=Resource.create(attributes), sampler=sampler)
            created = True
        else:
            logger.warning(
                "tracely: the global tracer provider is %s, not an SDK TracerProvider; tracely "
                "cannot attach its recorder to it",
                type(current).__name__,
            )
            return None

        present = {getattr(p, _ROLE, None) for p in _processors(provider)}
        fixture = find_fixture_processor(provider)
        if fixture is None:
            # Extraction on a worker thread: the agent never waits for its own recording.
            fixture = FixtureSpanProcessor(on_bundle, background=True)
            setattr(fixture, _ROLE, "fixtures")
            provider.add_span_processor(fixture)
        elif on_bundle is not None:
            fixture.add_callback(on_bundle)

        exporters: list[SpanExporter] = []
        if isinstance(exporter, SpanExporter):
            exporters.append(exporter)
        elif created or exporter is not None or endpoint is not None:
            names = _exporter_names(exporter, env) if (exporter or not endpoint) else ["otlp"]
            for name in names:
                if f"export:{name}" in present:
                    continue
                if name == "otlp":
                    exp: SpanExporter = _otlp_exporter(endpoint, protocol, env)
                else:
                    exp = ConsoleSpanExporter()
                exporters.append(exp)
                setattr(exp, _ROLE, f"export:{name}")
        for exp in exporters:
            role = getattr(exp, _ROLE, f"export:{id(exp)}")
            if role in present:
                continue
            processor: SpanProcessor = (
                SimpleSpanProcessor(exp)
                if isinstance(exp, ConsoleSpanExporter)
                else BatchSpanProcessor(exp)
            )
            setattr(processor, _ROLE, role)
            provider.add_span_processor(processor)
        if created:
            trace.set_tracer_provider(provider)
        return provider
