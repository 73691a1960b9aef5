"""tracely_otel: the OpenTelemetry layer of Tracely.

Attribute names, pipeline setup from the standard ``OTEL_*`` variables, the
:class:`FixtureSpanProcessor` and the spans → fixture bundle extractor. This package depends
on OpenTelemetry and orjson only; it never imports ``tracely_sdk``.
"""

from __future__ import annotations

from tracely_otel import _attributes as attributes
from tracely_otel._bundle import (
    FORMAT,
    BundleFormatError,
    bundle_checksum,
    entry_labels,
    seal,
    validate_bundle,
)
from tracely_otel._extract import (
    bundle_from_spans,
    digest_item,
    register_reader,
    value_digest,
)
from tracely_otel._processor import BundleCallback, FixtureSpanProcessor
from tracely_otel._reads import ExtractedCall, NotReplayable
from tracely_otel._setup import SetupError, find_fixture_processor, sdk_disabled, setup
from tracely_otel._spans import SpanEvent, SpanRecord, record_from_readable

__all__ = [
    # bundles
    "FORMAT",
    "BundleFormatError",
    "bundle_checksum",
    "entry_labels",
    "seal",
    "validate_bundle",
    # extraction
    "BundleCallback",
    "ExtractedCall",
    "FixtureSpanProcessor",
    "NotReplayable",
    "SpanEvent",
    "SpanRecord",
    "bundle_from_spans",
    "digest_item",
    "record_from_readable",
    "register_reader",
    "value_digest",
    # pipeline
    "SetupError",
    "attributes",
    "find_fixture_processor",
    "sdk_disabled",
    "setup",
]
