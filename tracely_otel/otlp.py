"""OTLP trace payloads: decoding what exporters, collectors and trace stores send, and encoding.

Imported on its own (not from ``tracely_otel``) because it loads the OTLP protobuf classes,
which an instrumented application never needs: the server's receivers and
``tracely traces import`` do.
"""

from __future__ import annotations

from tracely_otel._otlp import (
    MAX_VALUE_DEPTH,
    DecodedExport,
    OTLPDecodeError,
    PayloadTooLarge,
    decode_any,
    decode_export_request,
    encode_records_otlp_json,
    gunzip_bounded,
    records_from_jaeger,
    records_from_jsonl,
    records_from_otlp_json,
    records_from_otlp_proto,
    records_from_tempo,
    rejected_message,
)

__all__ = [
    "MAX_VALUE_DEPTH",
    "DecodedExport",
    "OTLPDecodeError",
    "PayloadTooLarge",
    "decode_any",
    "decode_export_request",
    "encode_records_otlp_json",
    "gunzip_bounded",
    "records_from_jaeger",
    "records_from_jsonl",
    "records_from_otlp_json",
    "records_from_otlp_proto",
    "records_from_tempo",
    "rejected_message",
]
