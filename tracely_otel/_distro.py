"""``opentelemetry-instrument`` integration: a distro and a configurator.

``opentelemetry-instrument python app.py`` loads the distro and configurator registered under
the ``opentelemetry_distro`` / ``opentelemetry_configurator`` entry points, then every
``opentelemetry_instrumentor`` (minus ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``). Tracely's
configurator sets the SDK up exactly as OpenTelemetry's own does (exporters, resource,
sampler from the ``OTEL_*`` variables) and then attaches the FixtureSpanProcessor, delivering
bundles to every callback registered under the ``tracely_bundle_sinks`` entry point group (the
tracely SDK registers its store writer there), so this package never imports the SDK.

Select them explicitly with ``OTEL_PYTHON_DISTRO=tracely`` and
``OTEL_PYTHON_CONFIGURATOR=tracely`` when other distros are installed too.
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from typing import Any

from opentelemetry.instrumentation.distro import BaseDistro  # type: ignore[attr-defined]
from opentelemetry.sdk._configuration import _OTelSDKConfigurator

from tracely_otel._setup import find_fixture_processor, setup

logger = logging.getLogger("tracely.otel")

SINK_GROUP = "tracely_bundle_sinks"


class TracelyDistro(BaseDistro):  # type: ignore[misc]
    """The tracely distro: OpenTelemetry's defaults, nothing changed."""

    def _configure(self, **kwargs: Any) -> None:
        return None


def attach_sinks() -> int:
    """Attach the FixtureSpanProcessor and every registered bundle sink; returns how many."""
    provider = setup()
    processor = find_fixture_processor(provider) if provider is not None else None
    if processor is None:
        return 0
    attached = 0
    for entry_point in entry_points(group=SINK_GROUP):
        try:
            sink = entry_point.load()()
        except Exception:  # one broken sink never stops the app from starting
            logger.warning(
                "tracely: bundle sink %r could not be loaded", entry_point.name, exc_info=True
            )
            continue
        if sink is not None:
            processor.add_callback(sink)
            attached += 1
    return attached


class TracelyConfigurator(_OTelSDKConfigurator):
    """OpenTelemetry's SDK configurator, plus tracely's fixture recorder."""

    def _configure(self, **kwargs: Any) -> None:
        super()._configure(**kwargs)  # type: ignore[no-untyped-call]
        attach_sinks()
