"""Tracely: make LLM agents testable. ``import tracely_sdk as tracely``.

Wrap external calls in :func:`call_tool` / :func:`call_llm` (or decorate with
:func:`observe`); live, each becomes an OpenTelemetry span; under :func:`fixtures`, each is
served from a recorded trace and never runs.
"""

from __future__ import annotations

from tracely_sdk import providers as _providers  # noqa: F401 (registers the SDK-patching hook)
from tracely_sdk._init import flush, init
from tracely_sdk._replay import ReplayReport, fixture, fixtures
from tracely_sdk._seam import (
    AgentRun,
    acall_llm,
    acall_tool,
    agent,
    call_llm,
    call_tool,
    observe,
)
from tracely_sdk._version import __version__
from tracely_sdk.errors import (
    BundleError,
    ConfigError,
    Conflict,
    LLMError,
    MissingDependency,
    NotFound,
    RecordedError,
    ReplayError,
    StoreError,
    ToolError,
    TracelyError,
)

__all__ = [
    # tracing and the call seam
    "AgentRun",
    "acall_llm",
    "acall_tool",
    "agent",
    "call_llm",
    "call_tool",
    "flush",
    "init",
    "observe",
    # replay
    "ReplayReport",
    "fixture",
    "fixtures",
    # errors
    "BundleError",
    "ConfigError",
    "Conflict",
    "LLMError",
    "MissingDependency",
    "NotFound",
    "RecordedError",
    "ReplayError",
    "StoreError",
    "ToolError",
    "TracelyError",
    "__version__",
]
