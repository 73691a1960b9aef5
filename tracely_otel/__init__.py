"""tracely_otel: the OpenTelemetry layer of Tracely.

Attribute names, pipeline setup from the standard ``OTEL_*`` variables, the
:class:`FixtureSpanProcessor`, the spans → fixture bundle extractor, the bundle format and the
redaction rules. Two public submodules are imported on their own: :mod:`tracely_otel.genai`
(the GenAI message model and the conversion into it) and :mod:`tracely_otel.otlp` (OTLP
payloads, which load the protobuf classes). This package depends
on OpenTelemetry and orjson only; it never imports ``tracely_sdk``.
"""

from __future__ import annotations

from tracely_otel import _attributes as attributes
from tracely_otel._bundle import (
    FORMAT,
    JSON_SPACE,
    MAX_NESTING,
    Bundle,
    BundleFormatError,
    RecordedError,
    TraceSummary,
    bundle_checksum,
    entry_labels,
    seal,
    validate_bundle,
    value_problem,
)
from tracely_otel._extract import (
    bundle_from_spans,
    digest_item,
    register_reader,
    value_digest,
)
from tracely_otel._foreign import SOURCES as CALL_SOURCES
from tracely_otel._foreign import read_call
from tracely_otel._processor import BundleCallback, FixtureSpanProcessor
from tracely_otel._reads import ExtractedCall, NotReplayable
from tracely_otel._redact import REDACTED, is_secret_key, redact_json, redact_str
from tracely_otel._setup import (
    SetupError,
    exporter_configured,
    find_fixture_processor,
    sdk_disabled,
    setup,
)
from tracely_otel._spans import SpanEvent, SpanRecord, record_from_readable

__all__ = [
    # bundles
    "FORMAT",
    "JSON_SPACE",
    "MAX_NESTING",
    "Bundle",
    "BundleFormatError",
    "RecordedError",
    "TraceSummary",
    "bundle_checksum",
    "entry_labels",
    "seal",
    "validate_bundle",
    "value_problem",
    # extraction
    "CALL_SOURCES",
    "BundleCallback",
    "ExtractedCall",
    "FixtureSpanProcessor",
    "NotReplayable",
    "SpanEvent",
    "SpanRecord",
    "bundle_from_spans",
    "digest_item",
    "read_call",
    "record_from_readable",
    "register_reader",
    "value_digest",
    # redaction
    "REDACTED",
    "is_secret_key",
    "redact_json",
    "redact_str",
    # pipeline
    "SetupError",
    "attributes",
    "exporter_configured",
    "find_fixture_processor",
    "sdk_disabled",
    "setup",
]
