"""The public surface is exactly what the package front exports."""

from __future__ import annotations

import tracely_otel
import tracely_sdk

SDK = {
    "AgentRun", "acall_llm", "acall_tool", "agent", "call_llm", "call_tool", "flush", "init",
    "observe",
    "ReplayReport", "fixture", "fixtures",
    "BundleError", "ConfigError", "Conflict", "LLMError", "MissingDependency", "NotFound",
    "RecordedError", "ReplayError", "StoreError", "ToolError", "TracelyError", "__version__",
}  # fmt: skip

OTEL = {
    "FORMAT", "JSON_SPACE", "MAX_NESTING", "Bundle", "BundleFormatError", "RecordedError",
    "TraceSummary", "bundle_checksum", "entry_labels", "seal", "validate_bundle", "value_problem",
    "REDACTED", "is_secret_key", "redact_json", "redact_str",
    "BundleCallback", "ExtractedCall", "FixtureSpanProcessor", "NotReplayable", "SpanEvent",
    "SpanRecord", "bundle_from_spans", "digest_item", "record_from_readable", "register_reader", "value_digest",
    "CALL_SOURCES", "read_call",
    "SetupError", "attributes", "exporter_configured", "find_fixture_processor", "sdk_disabled", "setup",
}  # fmt: skip


def test_tracely_sdk_all() -> None:
    assert set(tracely_sdk.__all__) == SDK
    assert len(tracely_sdk.__all__) == len(SDK)
    for name in SDK:
        assert hasattr(tracely_sdk, name), name


def test_tracely_otel_all() -> None:
    assert set(tracely_otel.__all__) == OTEL
    for name in OTEL:
        assert hasattr(tracely_otel, name), name


def test_tracely_otel_public_submodules_export_what_they_list() -> None:
    import tracely_otel.genai
    import tracely_otel.otlp

    for module in (tracely_otel.genai, tracely_otel.otlp):
        assert module.__all__, module.__name__
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_errors_form_one_tree() -> None:
    for name in SDK:
        obj = getattr(tracely_sdk, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, tracely_sdk.TracelyError), name
