"""OpenTelemetry instrumentors for the provider patches, for ``opentelemetry-instrument``.

Registered under the ``opentelemetry_instrumentor`` entry point group as ``tracely_openai``,
``tracely_anthropic``, ``tracely_google_genai`` and ``tracely_mcp`` (names of their own, so
``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=openai`` switches off the other ``openai``
instrumentors and leaves tracely's, and
``...=tracely_openai`` the reverse). This module is imported only through those entry points
(or by hand), so ``opentelemetry-instrumentation`` stays an optional dependency.

They switch on what ``tracely.init(instrument=...)`` does (for the three SDKs, the hooks of the
HTTP clients beneath them: ``providers._sdk``): spans go to the global tracer
provider (a ``tracer_provider`` argument is not used: tracely's calls share one tracer). The
first tracely span attaches the recorder to that provider when no tracely configurator did
(``OTEL_PYTHON_CONFIGURATOR`` naming another one): see ``tracely_sdk._startup``.

When another instrumentor of the same SDK is active too (the contrib ``openai-v2``,
OpenLLMetry, OpenInference), both record: its span is around tracely's (the HTTP request is sent
inside the SDK call), and the extractor makes one ``llm:`` entry of the pair. Tracely never
records a call twice.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from tracely_sdk import _startup, providers
from tracely_sdk.errors import MissingDependency

__all__ = [
    "TracelyAnthropicInstrumentor",
    "TracelyGoogleGenAIInstrumentor",
    "TracelyMCPInstrumentor",
    "TracelyOpenAIInstrumentor",
]


class _TracelyInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    provider = ""
    requirement = ""

    def instrumentation_dependencies(self) -> Collection[str]:
        return (self.requirement,)

    def _instrument(self, **kwargs: Any) -> None:
        try:
            providers.instrument((self.provider,))
        except MissingDependency as exc:
            # What opentelemetry-instrument reports quietly: this library is not installed.
            raise ModuleNotFoundError(str(exc), name=self.provider) from exc
        # Recorded whichever configurator ran: tracely's attached the recorder already (this
        # then adds nothing), any other one only exported.
        _startup.request()

    def _uninstrument(self, **kwargs: Any) -> None:
        providers.uninstrument((self.provider,))
        if not providers.patched_methods():
            _startup.cancel()


class TracelyOpenAIInstrumentor(_TracelyInstrumentor):
    """Record and replay ``openai`` SDK calls (``tracely_openai``)."""

    provider = "openai"
    requirement = "openai >= 1.40"


class TracelyAnthropicInstrumentor(_TracelyInstrumentor):
    """Record and replay ``anthropic`` SDK calls (``tracely_anthropic``)."""

    provider = "anthropic"
    requirement = "anthropic >= 0.40"


class TracelyGoogleGenAIInstrumentor(_TracelyInstrumentor):
    """Record and replay ``google-genai`` SDK calls (``tracely_google_genai``)."""

    provider = "google"
    requirement = "google-genai >= 1.0"


class TracelyMCPInstrumentor(_TracelyInstrumentor):
    """Record and replay MCP ``ClientSession`` tool calls (``tracely_mcp``)."""

    provider = "mcp"
    requirement = "mcp >= 2.0"
