"""Every wire format decodes to exactly the SpanRecords the SDK's own spans give."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import math
import pickle
import struct
import tracemalloc
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PBSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)

from tracely_otel._otlp import (
    MAX_VALUE_DEPTH,
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
)
from tracely_otel._spans import SpanEvent, SpanRecord, record_from_readable

REMOTE_TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
REMOTE_SPAN_ID = 0x00F067AA0BA902B7

# Every attribute type an OTLP AnyValue and an SDK attribute can both hold, and that an SDK
# span keeps unchanged (so the decoded record equals record_from_readable exactly).
COMMON_ATTRIBUTES: dict[str, Any] = {
    "str": "hello ☃ world",
    "str.empty": "",
    "bool.true": True,
    "bool.false": False,
    "int": 42,
    "int.negative": -7,
    "int.max": 2**63 - 1,
    "int.min": -(2**63),
    "float": 3.25,
    "float.tiny": 5e-324,
    "float.negative": -1e300,
    "float.inf": math.inf,
    "strs": ("a", "b", ""),
    "bools": (True, False),
    "ints": (1, -2, 3),
    "floats": (1.5, -0.25),
    "empty": (),
    "with.none": ("a", None, "c"),
    "mixed": (1, "a", True, 2.5),
    "nested": ((1, 2), ("x",), ()),
}


def _sorted(records: Sequence[SpanRecord]) -> list[SpanRecord]:
    return sorted(records, key=lambda r: (r.trace_id, r.span_id))


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def _make_spans(extra_attributes: Mapping[str, Any] | None = None) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    resource = Resource.create({"service.name": "weather-agent", "deployment.environment": "ci"})
    provider = TracerProvider(resource=resource, span_limits=SpanLimits(max_span_attributes=40))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    other = TracerProvider(resource=Resource.create({"service.name": "tool-server", "pid": 7}))
    other.add_span_processor(SimpleSpanProcessor(exporter))

    tracer = provider.get_tracer("tracely", "0.4.3")
    llm_tracer = provider.get_tracer("tracely.providers.openai")
    remote = set_span_in_context(
        NonRecordingSpan(
            SpanContext(REMOTE_TRACE_ID, REMOTE_SPAN_ID, is_remote=True, trace_flags=TraceFlags(1))
        )
    )
    with tracer.start_as_current_span(
        "invoke_agent weather", context=remote, kind=SpanKind.SERVER
    ) as agent:
        agent.set_attributes(COMMON_ATTRIBUTES)
        if extra_attributes:
            agent.set_attributes(extra_attributes)
        agent.add_event("started", {"attempt": 1, "tags": ("x", "y")}, timestamp=1_700_000_000_000)
        agent.add_event("bare")
        with tracer.start_as_current_span("execute_tool get_order", kind=SpanKind.CLIENT) as tool:
            tool.set_attribute("tracely.kind", "tool")
            tool.set_attribute("tracely.args", '{"order_id": 7}')
            tool.record_exception(TimeoutError("upstream timed out"))
            tool.set_status(Status(StatusCode.ERROR, "upstream timed out"))
            with other.get_tracer("tool-server").start_as_current_span(
                "handle get_order", kind=SpanKind.CONSUMER
            ) as handler:
                handler.set_attribute("queue", "orders")
        with llm_tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.PRODUCER) as llm:
            llm.set_attribute("gen_ai.request.model", "gpt-4o")
            llm.set_attribute("gen_ai.usage.input_tokens", 812)
            llm.set_status(Status(StatusCode.OK))
        with tracer.start_as_current_span("crowded") as crowded:
            for index in range(45):  # 5 over the limit: dropped_attributes_count == 5
                crowded.set_attribute(f"k{index}", index)
    with tracer.start_as_current_span("second root"):
        pass
    spans = list(exporter.get_finished_spans())
    assert len(spans) == 6
    return spans


@pytest.fixture(scope="module")
def spans() -> list[ReadableSpan]:
    return _make_spans()


@pytest.fixture(scope="module")
def expected(spans: list[ReadableSpan]) -> list[SpanRecord]:
    return _sorted([record_from_readable(span) for span in spans])


@pytest.fixture(scope="module")
def request_pb(spans: list[ReadableSpan]) -> ExportTraceServiceRequest:
    return encode_spans(spans)


def _message(error: pytest.ExceptionInfo[OTLPDecodeError]) -> str:
    text = str(error.value)
    assert text.startswith("not valid OTLP trace data"), text
    return text


# --------------------------------------------------------------------------------------------
# protobuf, from the real OTLP exporter's encoder


def test_proto_from_real_exporter_equals_record_from_readable(
    request_pb: ExportTraceServiceRequest, expected: list[SpanRecord]
) -> None:
    records = records_from_otlp_proto(request_pb.SerializeToString())
    assert _sorted(records) == expected


def test_proto_carries_every_field(
    request_pb: ExportTraceServiceRequest, expected: list[SpanRecord]
) -> None:
    by_name = {r.name: r for r in records_from_otlp_proto(request_pb.SerializeToString())}
    agent = by_name["invoke_agent weather"]
    assert agent.trace_id == format(REMOTE_TRACE_ID, "032x")
    assert agent.parent_span_id == format(REMOTE_SPAN_ID, "016x")
    assert agent.parent_is_remote and agent.is_root
    assert agent.kind == "SERVER"
    assert dict(agent.attributes) == COMMON_ATTRIBUTES
    assert agent.events[0] == SpanEvent(
        "started", 1_700_000_000_000, {"attempt": 1, "tags": ("x", "y")}
    )
    assert agent.events[1].name == "bare" and agent.events[1].attributes == {}
    assert agent.resource["service.name"] == "weather-agent"
    assert agent.scope_name == "tracely"

    tool = by_name["execute_tool get_order"]
    assert tool.parent_span_id == agent.span_id and not tool.parent_is_remote
    assert (tool.status_code, tool.status_message, tool.kind) == (
        "ERROR",
        "upstream timed out",
        "CLIENT",
    )
    assert tool.events[0].name == "exception"
    assert tool.events[0].attributes["exception.type"] == "TimeoutError"

    handler = by_name["handle get_order"]
    assert handler.parent_span_id == tool.span_id and handler.kind == "CONSUMER"
    assert handler.resource["service.name"] == "tool-server" and handler.resource["pid"] == 7

    llm = by_name["chat gpt-4o"]
    assert (llm.status_code, llm.kind, llm.scope_name) == (
        "OK",
        "PRODUCER",
        "tracely.providers.openai",
    )
    assert by_name["crowded"].dropped_attributes_count == 5
    root = by_name["second root"]
    assert root.parent_span_id is None and not root.parent_is_remote and root.is_root
    assert root.kind == "INTERNAL" and root.status_code == "UNSET"


def _normalized(value: Any) -> Any:
    """What an attribute value becomes on the wire and back (the documented mapping)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, Mapping):
        return orjson.dumps(_plain(value)).decode()
    if isinstance(value, tuple):
        return tuple(_normalized(v) for v in value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def test_values_an_sdk_span_holds_but_anyvalue_maps_differently() -> None:
    # This SDK also keeps bytes, maps and None as attribute values; on the wire they are
    # bytesValue (-> base64 text), kvlistValue (-> JSON text) and an empty AnyValue (-> left out).
    extra = {
        "raw": b"\x00\xffbytes",
        "map": {"city": "Oslo", "days": [1, 2], "inner": {"ok": True, "blob": b"\x01"}},
        "maps": ({"a": 1}, {"b": None}),
        "nothing": None,
    }
    spans = _make_spans(extra)
    records = _sorted(records_from_otlp_proto(encode_spans(spans).SerializeToString()))
    expected = []
    for span in spans:
        record = record_from_readable(span)
        attributes = {k: _normalized(v) for k, v in record.attributes.items() if v is not None}
        expected.append(
            SpanRecord(
                **{**{f: getattr(record, f) for f in record.__slots__}, "attributes": attributes}
            )
        )
    assert records == _sorted(expected)
    agent = next(r for r in records if r.name == "invoke_agent weather")
    assert agent.attributes["raw"] == "AP9ieXRlcw=="
    assert json.loads(str(agent.attributes["map"])) == {
        "city": "Oslo",
        "days": [1, 2],
        "inner": {"ok": True, "blob": "AQ=="},
    }
    assert agent.attributes["maps"] == ('{"a":1}', '{"b":null}')
    assert "nothing" not in agent.attributes


# --------------------------------------------------------------------------------------------
# OTLP/JSON: the real JSON exporter's encoding, protobuf's canonical JSON, hand-written JSON


def test_real_otlp_json_exporter_encoding(
    spans: list[ReadableSpan], expected: list[SpanRecord]
) -> None:
    encoder = pytest.importorskip("opentelemetry.exporter.otlp.json.common.trace_encoder")
    body = encoder.encode_spans(spans).to_json()
    assert _sorted(records_from_otlp_json(body)) == expected
    assert _sorted(records_from_otlp_json(body.encode())) == expected
    assert _sorted(decode_any(body.encode(), "application/json")) == expected


@pytest.mark.parametrize("snake_case", [False, True])
def test_protobuf_canonical_json_with_base64_ids_and_enum_names(
    request_pb: ExportTraceServiceRequest, expected: list[SpanRecord], snake_case: bool
) -> None:
    mapping = json_format.MessageToDict(request_pb, preserving_proto_field_name=snake_case)
    span = mapping[("resource_spans" if snake_case else "resourceSpans")][0]
    span = span["scope_spans" if snake_case else "scopeSpans"][0]["spans"][0]
    assert len(span["trace_id" if snake_case else "traceId"]) == 24  # base64, not hex
    assert span["kind"].startswith("SPAN_KIND_")
    assert _sorted(records_from_otlp_json(mapping)) == expected
    text = json_format.MessageToJson(request_pb, preserving_proto_field_name=snake_case)
    assert _sorted(records_from_otlp_json(text)) == expected
    assert _sorted(decode_any(text)) == expected


SPEC_STYLE_REQUEST = """
{
  "resourceSpans": [
    {
      "resource": {
        "attributes": [{"key": "service.name", "value": {"stringValue": "checkout"}}]
      },
      "scopeSpans": [
        {
          "scope": {"name": "checkout.lib", "version": "2.1.0",
                    "attributes": [{"key": "lib.attr", "value": {"stringValue": "x"}}]},
          "spans": [
            {
              "traceId": "0AF7651916CD43DD8448EB211C80319C",
              "spanId": "B7AD6B7169203331",
              "parentSpanId": "00F067AA0BA902B7",
              "name": "POST /cart",
              "startTimeUnixNano": 1544712660000000000,
              "endTimeUnixNano": "1544712661000000000",
              "kind": 2,
              "flags": 768,
              "traceState": "vendor=1",
              "droppedAttributesCount": 3,
              "attributes": [
                {"key": "http.method", "value": {"stringValue": "POST"}},
                {"key": "retries", "value": {"intValue": "3"}},
                {"key": "retries.number", "value": {"intValue": 4}},
                {"key": "ratio", "value": {"doubleValue": 0.5}},
                {"key": "ratio.text", "value": {"doubleValue": "NaN"}},
                {"key": "big", "value": {"doubleValue": "-Infinity"}},
                {"key": "whole", "value": {"doubleValue": 2}},
                {"key": "cached", "value": {"boolValue": false}},
                {"key": "blob", "value": {"bytesValue": "AQID"}},
                {"key": "blob.urlsafe", "value": {"bytesValue": "-_8"}},
                {"key": "list", "value": {"arrayValue": {"values": [
                  {"stringValue": "a"}, {}, {"intValue": "1"}, {"arrayValue": {}}]}}},
                {"key": "obj", "value": {"kvlistValue": {"values": [
                  {"key": "n", "value": {"intValue": "1"}},
                  {"key": "nested", "value": {"kvlistValue": {"values": [
                    {"key": "deep", "value": {"arrayValue": {"values": [{"boolValue": true}]}}}]}}},
                  {"key": "empty", "value": {}}]}}},
                {"key": "unset", "value": {}},
                {"key": "no.value"},
                {"key": "future", "value": {"someFutureValue": 1, "stringValue": "kept"}}
              ],
              "events": [
                {"timeUnixNano": "1544712660500000000", "name": "cache miss",
                 "attributes": [{"key": "key", "value": {"stringValue": "cart:7"}}],
                 "droppedAttributesCount": 1}
              ],
              "links": [{"traceId": "0AF7651916CD43DD8448EB211C80319C", "spanId": "00F067AA0BA902B7"}],
              "status": {"code": 2, "message": "card declined"},
              "someFutureSpanField": {"ignored": true}
            }
          ]
        }
      ]
    }
  ]
}
"""


def test_hand_written_spec_style_json() -> None:
    [record] = records_from_otlp_json(SPEC_STYLE_REQUEST)
    assert record.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert record.span_id == "b7ad6b7169203331"
    assert record.parent_span_id == "00f067aa0ba902b7"
    assert record.parent_is_remote  # flags 0x300
    assert (record.name, record.kind) == ("POST /cart", "SERVER")
    assert record.start_time_unix_nano == 1544712660000000000
    assert record.end_time_unix_nano == 1544712661000000000
    assert (record.status_code, record.status_message) == ("ERROR", "card declined")
    assert record.dropped_attributes_count == 3
    assert record.resource == {"service.name": "checkout"}
    assert record.scope_name == "checkout.lib"
    attrs = dict(record.attributes)
    assert math.isnan(attrs.pop("ratio.text"))  # type: ignore[arg-type]
    assert attrs == {
        "http.method": "POST",
        "retries": 3,
        "retries.number": 4,
        "ratio": 0.5,
        "big": -math.inf,
        "whole": 2.0,
        "cached": False,
        "blob": "AQID",
        "blob.urlsafe": "+/8=",
        "list": ("a", None, 1, ()),
        "obj": '{"n":1,"nested":{"deep":[true]},"empty":null}',
        "future": "kept",
    }
    assert isinstance(attrs["whole"], float)
    assert record.events == (SpanEvent("cache miss", 1544712660500000000, {"key": "cart:7"}),)


def test_snake_case_and_enum_names_and_numbers_as_strings() -> None:
    doc = {
        "resource_spans": [
            {
                "resource": {"attributes": [{"key": "a", "value": {"string_value": "b"}}]},
                "scope_spans": [
                    {
                        "scope": {"name": "s"},
                        "spans": [
                            {
                                "trace_id": "0af7651916cd43dd8448eb211c80319c",
                                "span_id": "b7ad6b7169203331",
                                "parent_span_id": "",
                                "name": "n",
                                "kind": "SPAN_KIND_CONSUMER",
                                "start_time_unix_nano": "5",
                                "end_time_unix_nano": 6.0,
                                "dropped_attributes_count": "2",
                                "flags": "256",
                                "attributes": [
                                    {"key": "i", "value": {"int_value": "-9"}},
                                    {
                                        "key": "arr",
                                        "value": {
                                            "array_value": {"values": [{"bool_value": True}]}
                                        },
                                    },
                                    {"key": "kv", "value": {"kvlist_value": {"values": []}}},
                                    {"key": "d", "value": {"double_value": "1.5e3"}},
                                    {"key": "y", "value": {"bytes_value": "AA"}},
                                ],
                                "events": [{"time_unix_nano": "7", "name": "e"}],
                                "status": {"code": "STATUS_CODE_OK"},
                            }
                        ],
                    }
                ],
            }
        ]
    }
    [record] = records_from_otlp_json(doc)
    assert record == SpanRecord(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        parent_span_id=None,
        name="n",
        start_time_unix_nano=5,
        end_time_unix_nano=6,
        attributes={"i": -9, "arr": (True,), "kv": "{}", "d": 1500.0, "y": "AA=="},
        status_code="OK",
        events=(SpanEvent("e", 7, {}),),
        dropped_attributes_count=2,
        resource={"a": "b"},
        scope_name="s",
        kind="CONSUMER",
    )


def test_kind_zero_and_unspecified_are_internal_and_zero_parent_is_no_parent() -> None:
    def one(**fields: Any) -> SpanRecord:
        span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331"}
        [record] = records_from_otlp_json(
            {"resourceSpans": [{"scopeSpans": [{"spans": [{**span, **fields}]}]}]}
        )
        return record

    assert one(kind=0).kind == "INTERNAL"
    assert one(kind="SPAN_KIND_UNSPECIFIED").kind == "INTERNAL"
    assert one().kind == "INTERNAL"
    assert one(parentSpanId="0000000000000000").parent_span_id is None
    assert one(parentSpanId="AAAAAAAAAAA=").parent_span_id is None
    # IS_REMOTE without HAS_IS_REMOTE says nothing; a root has no remote parent
    assert not one(parentSpanId="00f067aa0ba902b7", flags=0x200).parent_is_remote
    assert one(parentSpanId="00f067aa0ba902b7", flags=0x300).parent_is_remote
    assert not one(flags=0x300).parent_is_remote
    assert records_from_otlp_json({}) == []
    assert records_from_otlp_json({"resourceSpans": []}) == []
    assert records_from_otlp_json({"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}) == []


# --------------------------------------------------------------------------------------------
# Jaeger and Tempo responses

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ROOT = "00f067aa0ba902b7"
CHILD = "b7ad6b7169203331"

JAEGER_V3: dict[str, Any] = {
    "result": {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": "weather-agent"}},
                        {"key": "telemetry.sdk.language", "value": {"stringValue": "python"}},
                    ]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "tracely", "version": "0.4.3"},
                        "spans": [
                            {
                                "traceId": TRACE,
                                "spanId": ROOT,
                                "parentSpanId": "",
                                "flags": 256,
                                "name": "invoke_agent weather",
                                "kind": 1,
                                "startTimeUnixNano": "1717000000000000000",
                                "endTimeUnixNano": "1717000000500000000",
                                "attributes": [
                                    {"key": "tracely.kind", "value": {"stringValue": "agent"}},
                                    {
                                        "key": "gen_ai.usage.input_tokens",
                                        "value": {"intValue": "812"},
                                    },
                                ],
                                "status": {},
                            },
                            {
                                "traceId": TRACE,
                                "spanId": CHILD,
                                "parentSpanId": ROOT,
                                "flags": 256,
                                "name": "execute_tool get_forecast",
                                "kind": 3,
                                "startTimeUnixNano": "1717000000100000000",
                                "endTimeUnixNano": "1717000000400000000",
                                "attributes": [
                                    {"key": "tracely.kind", "value": {"stringValue": "tool"}}
                                ],
                                "events": [
                                    {
                                        "timeUnixNano": "1717000000390000000",
                                        "name": "exception",
                                        "attributes": [
                                            {
                                                "key": "exception.type",
                                                "value": {"stringValue": "TimeoutError"},
                                            }
                                        ],
                                    }
                                ],
                                "status": {"code": 2, "message": "timeout"},
                            },
                        ],
                    }
                ],
            }
        ]
    }
}

JAEGER_EXPECTED = [
    SpanRecord(
        trace_id=TRACE,
        span_id=ROOT,
        parent_span_id=None,
        name="invoke_agent weather",
        start_time_unix_nano=1717000000000000000,
        end_time_unix_nano=1717000000500000000,
        attributes={"tracely.kind": "agent", "gen_ai.usage.input_tokens": 812},
        resource={"service.name": "weather-agent", "telemetry.sdk.language": "python"},
        scope_name="tracely",
    ),
    SpanRecord(
        trace_id=TRACE,
        span_id=CHILD,
        parent_span_id=ROOT,
        name="execute_tool get_forecast",
        start_time_unix_nano=1717000000100000000,
        end_time_unix_nano=1717000000400000000,
        attributes={"tracely.kind": "tool"},
        status_code="ERROR",
        status_message="timeout",
        events=(SpanEvent("exception", 1717000000390000000, {"exception.type": "TimeoutError"}),),
        resource={"service.name": "weather-agent", "telemetry.sdk.language": "python"},
        scope_name="tracely",
        kind="CLIENT",
    ),
]


def test_jaeger_v3_response() -> None:
    assert records_from_jaeger(JAEGER_V3) == JAEGER_EXPECTED
    assert records_from_jaeger(orjson.dumps(JAEGER_V3)) == JAEGER_EXPECTED
    assert decode_any(json.dumps(JAEGER_V3, indent=2)) == JAEGER_EXPECTED


def test_jaeger_streamed_chunks() -> None:
    def chunk(span: dict[str, Any]) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(json.dumps(JAEGER_V3))
        doc["result"]["resourceSpans"][0]["scopeSpans"][0]["spans"] = [span]
        return doc

    spans = JAEGER_V3["result"]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    body = "\n".join(json.dumps(chunk(s)) for s in spans) + "\n"
    assert records_from_jaeger(body) == JAEGER_EXPECTED
    assert records_from_jaeger(body.encode()) == JAEGER_EXPECTED
    assert decode_any(body.encode()) == JAEGER_EXPECTED


def test_older_jaeger_v3_with_base64_ids_and_instrumentation_library() -> None:
    doc = {
        "result": {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "host.name", "value": {"stringValue": "testHost"}}]
                    },
                    "instrumentationLibrarySpans": [
                        {
                            "instrumentationLibrary": {"name": "legacy"},
                            "spans": [
                                {
                                    "traceId": _b64(TRACE),
                                    "spanId": _b64(CHILD),
                                    "parentSpanId": "AAAAAAAAAAA=",
                                    "name": "testSpan",
                                    "kind": "SPAN_KIND_INTERNAL",
                                    "startTimeUnixNano": "1544712660000000000",
                                    "endTimeUnixNano": "1544712661000000000",
                                    "attributes": [{"key": "attr1", "value": {"intValue": "55"}}],
                                }
                            ],
                        }
                    ],
                }
            ]
        }
    }
    [record] = records_from_jaeger(doc)
    assert (record.trace_id, record.span_id, record.parent_span_id) == (TRACE, CHILD, None)
    assert (record.scope_name, record.kind, record.attributes) == (
        "legacy",
        "INTERNAL",
        {"attr1": 55},
    )
    # the bare TracesData that Jaeger 1.x's api_v3 answered with
    assert records_from_jaeger(doc["result"]) == [record]
    assert decode_any(orjson.dumps(doc)) == [record]


def test_jaeger_error_and_legacy_ui_api() -> None:
    error = {"error": {"httpCode": 404, "message": "trace not found"}}
    with pytest.raises(OTLPDecodeError) as info:
        records_from_jaeger(error)
    assert "trace not found" in _message(info) and "404" in str(info.value)
    with pytest.raises(OTLPDecodeError, match="trace not found"):
        decode_any(orjson.dumps(error))
    legacy = {"data": [{"traceID": TRACE, "spans": [], "processes": {}}], "errors": None}
    with pytest.raises(OTLPDecodeError) as info:
        decode_any(orjson.dumps(legacy))
    assert "/api/v3/traces" in _message(info)
    with pytest.raises(OTLPDecodeError, match="result"):
        records_from_jaeger({"batches": []})


def _tempo_span(span_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    span: dict[str, Any] = {"traceId": _b64(TRACE), "spanId": _b64(span_id)}
    if parent:
        span["parentSpanId"] = _b64(parent)
    return {**span, **fields}


TEMPO: dict[str, Any] = {
    "batches": [
        {
            "resource": {
                "attributes": [{"key": "service.name", "value": {"stringValue": "weather-agent"}}]
            },
            "scopeSpans": [
                {
                    "scope": {"name": "tracely", "version": "0.4.3"},
                    "spans": [
                        _tempo_span(
                            ROOT,
                            None,
                            name="invoke_agent weather",
                            kind="SPAN_KIND_SERVER",
                            startTimeUnixNano="1717000000000000000",
                            endTimeUnixNano="1717000000500000000",
                            attributes=[{"key": "tracely.kind", "value": {"stringValue": "agent"}}],
                            status={},
                        ),
                        _tempo_span(
                            CHILD,
                            ROOT,
                            name="chat gpt-4o",
                            kind="SPAN_KIND_CLIENT",
                            startTimeUnixNano="1717000000100000000",
                            endTimeUnixNano="1717000000400000000",
                            attributes=[
                                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "96"}}
                            ],
                            status={"code": "STATUS_CODE_ERROR", "message": "rate limited"},
                        ),
                    ],
                }
            ],
        }
    ]
}

TEMPO_EXPECTED = [
    SpanRecord(
        trace_id=TRACE,
        span_id=ROOT,
        parent_span_id=None,
        name="invoke_agent weather",
        start_time_unix_nano=1717000000000000000,
        end_time_unix_nano=1717000000500000000,
        attributes={"tracely.kind": "agent"},
        resource={"service.name": "weather-agent"},
        scope_name="tracely",
        kind="SERVER",
    ),
    SpanRecord(
        trace_id=TRACE,
        span_id=CHILD,
        parent_span_id=ROOT,
        name="chat gpt-4o",
        start_time_unix_nano=1717000000100000000,
        end_time_unix_nano=1717000000400000000,
        attributes={"gen_ai.usage.output_tokens": 96},
        status_code="ERROR",
        status_message="rate limited",
        resource={"service.name": "weather-agent"},
        scope_name="tracely",
        kind="CLIENT",
    ),
]


def test_tempo_response() -> None:
    assert records_from_tempo(TEMPO) == TEMPO_EXPECTED
    assert records_from_tempo(orjson.dumps(TEMPO)) == TEMPO_EXPECTED
    assert decode_any(orjson.dumps(TEMPO).decode()) == TEMPO_EXPECTED
    # /api/v2/traces/{id}
    v2 = {"trace": {"resourceSpans": TEMPO["batches"]}}
    assert records_from_tempo(v2) == TEMPO_EXPECTED
    assert decode_any(orjson.dumps(v2)) == TEMPO_EXPECTED


def test_older_tempo_instrumentation_library_spans() -> None:
    batch = TEMPO["batches"][0]
    old = {
        "batches": [
            {
                "resource": batch["resource"],
                "instrumentationLibrarySpans": [
                    {
                        "instrumentationLibrary": {"name": "tracely"},
                        "spans": batch["scopeSpans"][0]["spans"],
                    }
                ],
            }
        ]
    }
    assert records_from_tempo(old) == TEMPO_EXPECTED
    assert decode_any(orjson.dumps(old)) == TEMPO_EXPECTED


def test_tempo_protobuf_body(
    request_pb: ExportTraceServiceRequest, expected: list[SpanRecord]
) -> None:
    # tempopb.Trace {repeated ResourceSpans batches = 1} has the request's wire layout
    assert _sorted(records_from_tempo(request_pb.SerializeToString())) == expected


# --------------------------------------------------------------------------------------------
# JSON Lines


def test_jsonl_from_file_exporter(
    request_pb: ExportTraceServiceRequest, expected: list[SpanRecord]
) -> None:
    lines = []
    for rs in json_format.MessageToDict(request_pb)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                one = {
                    "resourceSpans": [
                        {"resource": rs["resource"], "scopeSpans": [{**ss, "spans": [span]}]}
                    ]
                }
                lines.append(orjson.dumps(one).decode())
    assert len(lines) == 6
    text = "\n".join(lines[:3]) + "\r\n\n" + "\n".join(lines[3:]) + "\n"
    assert _sorted(records_from_jsonl(text)) == expected
    assert _sorted(records_from_jsonl(text.encode())) == expected
    assert _sorted(decode_any(text.encode())) == expected
    assert _sorted(decode_any(text.encode(), "application/x-ndjson")) == expected
    assert records_from_jsonl("") == [] and records_from_jsonl(b"\n\n") == []

    broken = [*lines[:2], '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}']
    with pytest.raises(OTLPDecodeError) as info:
        records_from_jsonl("\n".join(broken))
    assert "line 3: resourceSpans[0].scopeSpans[0].spans[0].traceId" in _message(info)
    with pytest.raises(OTLPDecodeError, match="line 2: invalid JSON"):
        records_from_jsonl(lines[0] + "\n{not json\n")


# --------------------------------------------------------------------------------------------
# decode_any


def test_decode_any_protobuf_by_content_type_and_by_sniffing(
    request_pb: ExportTraceServiceRequest, expected: list[SpanRecord]
) -> None:
    body = request_pb.SerializeToString()
    assert _sorted(decode_any(body)) == expected
    assert _sorted(decode_any(body, "application/x-protobuf")) == expected
    assert _sorted(decode_any(body, "application/protobuf; charset=binary")) == expected
    assert _sorted(decode_any(gzip.compress(body))) == expected
    assert _sorted(decode_any(bytearray(body))) == expected  # type: ignore[arg-type]
    assert (
        decode_any(b"") == []
        and decode_any("") == []
        and decode_any(b"", "application/x-protobuf") == []
    )
    with pytest.raises(OTLPDecodeError, match="JSON"):
        decode_any(body, "application/json")
    with pytest.raises(OTLPDecodeError, match="text"):
        decode_any(body.decode("latin-1"), "application/x-protobuf")


def test_decode_any_protobuf_that_starts_like_json_lines() -> None:
    # A request starts with 0x0a ("\n"); when its first ResourceSpans is 123 bytes long the
    # length byte is "{" and the body looks like JSON Lines to a naive sniffer.
    for pad in range(200):
        request = ExportTraceServiceRequest()
        rs = request.resource_spans.add()
        rs.resource.attributes.add(key="k", value=AnyValue(string_value="v" * pad))
        span = rs.scope_spans.add().spans.add()
        span.trace_id, span.span_id, span.name = bytes.fromhex(TRACE), bytes.fromhex(ROOT), "s"
        body = request.SerializeToString()
        if body[1:2] == b"{":
            break
    else:
        pytest.fail("no padding gave a length byte of '{'")
    assert body.startswith(b"\n{")
    [record] = decode_any(body)
    assert record.span_id == ROOT and record.resource == {"k": "v" * pad}


def test_decode_any_rejects_what_is_not_trace_data() -> None:
    metrics = ExportMetricsServiceRequest()
    metrics.resource_metrics.add().scope_metrics.add().metrics.add(name="cpu.utilization")
    with pytest.raises(OTLPDecodeError) as info:
        decode_any(metrics.SerializeToString())
    assert "traceId" in _message(info)
    cases: list[tuple[bytes | str, str]] = [
        (b"hello world", "protobuf"),
        ("hello world", "JSON object"),
        (b"[1, 2]", "JSON object"),
        (b'{"foo": 1}', "resourceSpans"),
        (b"{", "invalid JSON"),
        (b"\x08\x96\x01", "none of ExportTraceServiceRequest's fields"),
        (b"\x1f\x8b\x08\x00garbage", "gzip"),
    ]
    for body, problem in cases:
        with pytest.raises(OTLPDecodeError) as info:
            decode_any(body)
        assert problem in _message(info), (body, str(info.value))


# --------------------------------------------------------------------------------------------
# corrupt and hostile input


def test_truncated_protobuf(request_pb: ExportTraceServiceRequest) -> None:
    single = ExportTraceServiceRequest()
    single.resource_spans.add().CopyFrom(request_pb.resource_spans[0])
    body = single.SerializeToString()
    for cut in [1, 2, 3, 10, len(body) // 2, len(body) - 1]:
        with pytest.raises(OTLPDecodeError) as info:
            records_from_otlp_proto(body[:cut])
        assert "body: the protobuf ExportTraceServiceRequest cannot be parsed" in _message(info)
    with pytest.raises(OTLPDecodeError, match="protobuf bytes"):
        records_from_otlp_proto("text")  # type: ignore[arg-type]


def _pb_request(**span_fields: Any) -> bytes:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(name="bad one")
    span.trace_id, span.span_id = bytes.fromhex(TRACE), bytes.fromhex(ROOT)
    for key, value in span_fields.items():
        setattr(span, key, value)
    return bytes(request.SerializeToString())


@pytest.mark.parametrize(
    ("fields", "path", "problem"),
    [
        ({"trace_id": b"\x01" * 8}, "traceId", "8 bytes, expected 16"),
        ({"trace_id": bytes(16)}, "traceId", "all zeros"),
        ({"trace_id": b""}, "traceId", "0 bytes"),
        ({"span_id": b"\x01" * 16}, "spanId", "16 bytes, expected 8"),
        ({"span_id": bytes(8)}, "spanId", "all zeros"),
        ({"parent_span_id": b"\x01\x02"}, "parentSpanId", "2 bytes"),
        ({"kind": 9}, "kind", "unknown span kind 9"),
    ],
)
def test_bad_protobuf_spans_are_named(fields: dict[str, Any], path: str, problem: str) -> None:
    with pytest.raises(OTLPDecodeError) as info:
        records_from_otlp_proto(_pb_request(**fields))
    message = _message(info)
    assert f"resourceSpans[0].scopeSpans[0].spans[0] (span 'bad one').{path}: " in message
    assert problem in message
    assert info.value.path.endswith(path)


def test_bad_protobuf_status_code() -> None:
    request = ExportTraceServiceRequest.FromString(_pb_request())
    request.resource_spans[0].scope_spans[0].spans[0].status.code = 7
    with pytest.raises(OTLPDecodeError, match=r"status\.code: unknown status code 7"):
        records_from_otlp_proto(request.SerializeToString())


def _nested_array(depth: int) -> AnyValue:
    value = AnyValue(string_value="leaf")
    for _ in range(depth):
        outer = AnyValue()
        outer.array_value.values.append(value)
        value = outer
    return value


def test_protobuf_nesting_is_bounded() -> None:
    def with_value(value: AnyValue) -> bytes:
        request = ExportTraceServiceRequest.FromString(_pb_request())
        request.resource_spans[0].scope_spans[0].spans[0].attributes.append(
            KeyValue(key="deep", value=value)
        )
        return bytes(request.SerializeToString())

    [record] = records_from_otlp_proto(with_value(_nested_array(MAX_VALUE_DEPTH - 1)))
    value: Any = record.attributes["deep"]
    for _ in range(MAX_VALUE_DEPTH - 1):
        value = value[0]
    assert value == "leaf"
    with pytest.raises(OTLPDecodeError) as info:
        records_from_otlp_proto(with_value(_nested_array(40)))
    assert "attributes['deep'].arrayValue.values[0]" in _message(info)
    assert f"nest deeper than {MAX_VALUE_DEPTH} levels" in str(info.value)


def _json_request(span: dict[str, Any]) -> dict[str, Any]:
    base = {"traceId": TRACE, "spanId": ROOT, "name": "bad one"}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [{**base, **span}]}]}]}


SPAN_PATH = "resourceSpans[0].scopeSpans[0].spans[0] (span 'bad one')"


@pytest.mark.parametrize(
    ("span", "path", "problem"),
    [
        ({"traceId": "abc"}, "traceId", "neither 32 hex characters nor base64 of 16 bytes"),
        ({"traceId": TRACE[:16]}, "traceId", "neither 32 hex"),
        ({"traceId": "z" * 32}, "traceId", "neither 32 hex"),
        ({"traceId": "0" * 32}, "traceId", "all zeros"),
        ({"traceId": "A" * 22 + "=="}, "traceId", "all zeros"),
        ({"traceId": "!" * 24}, "traceId", "base64 of 16 bytes"),
        ({"traceId": 12345}, "traceId", "expected an id string, got a number"),
        ({"traceId": None}, "traceId", "got null"),
        ({"spanId": "abcd"}, "spanId", "neither 16 hex characters nor base64 of 8 bytes"),
        ({"spanId": "0" * 16}, "spanId", "all zeros"),
        ({"parentSpanId": "xyz"}, "parentSpanId", "neither 16 hex"),
        ({"kind": "SPAN_KIND_SIDEWAYS"}, "kind", "unknown enum value 'SPAN_KIND_SIDEWAYS'"),
        ({"kind": 6}, "kind", "unknown enum value 6"),
        ({"kind": True}, "kind", "got a boolean"),
        ({"startTimeUnixNano": "soon"}, "startTimeUnixNano", "'soon' is not a decimal integer"),
        ({"startTimeUnixNano": "-1"}, "startTimeUnixNano", "out of range"),
        ({"endTimeUnixNano": 1.5}, "endTimeUnixNano", "not an integer"),
        ({"endTimeUnixNano": str(2**64)}, "endTimeUnixNano", "out of range"),
        ({"endTimeUnixNano": "1" * 5000}, "endTimeUnixNano", "not a decimal integer"),
        ({"flags": [1]}, "flags", "expected an integer, got an array"),
        ({"status": "ERROR"}, "status", "expected an object, got a string"),
        ({"status": {"code": "BROKEN"}}, "status.code", "unknown enum value"),
        ({"status": {"message": 1}}, "status.message", "expected a string"),
        ({"attributes": {"k": "v"}}, "attributes", "expected an array, got an object"),
        ({"attributes": ["k"]}, "attributes[0]", "expected a KeyValue object, got a string"),
        ({"attributes": [{"key": 1, "value": {}}]}, "attributes[0].key", "expected a string"),
        (
            {"attributes": [{"key": "k", "value": {"boolValue": "true"}}]},
            "attributes[0] ('k').value.boolValue",
            "expected true or false, got a string",
        ),
        (
            {"attributes": [{"key": "k", "value": {"intValue": str(2**63)}}]},
            "attributes[0] ('k').value.intValue",
            "out of range",
        ),
        (
            {"attributes": [{"key": "k", "value": {"intValue": "1e3"}}]},
            "attributes[0] ('k').value.intValue",
            "not a decimal integer",
        ),
        (
            {"attributes": [{"key": "k", "value": {"doubleValue": "fast"}}]},
            "attributes[0] ('k').value.doubleValue",
            "not a number",
        ),
        (
            {"attributes": [{"key": "k", "value": {"stringValue": ["a"]}}]},
            "attributes[0] ('k').value.stringValue",
            "expected a string, got an array",
        ),
        (
            {"attributes": [{"key": "k", "value": {"bytesValue": "***"}}]},
            "attributes[0] ('k').value.bytesValue",
            "not valid base64",
        ),
        (
            {"attributes": [{"key": "k", "value": {"stringValue": "a", "intValue": "1"}}]},
            "attributes[0] ('k').value",
            "AnyValue sets both stringValue and intValue",
        ),
        (
            {"attributes": [{"key": "k", "value": "plain"}]},
            "attributes[0] ('k').value",
            "expected an AnyValue object, got a string",
        ),
        (
            {
                "attributes": [
                    {"key": "k", "value": {"arrayValue": {"values": [{}, {"intValue": True}]}}}
                ]
            },
            "attributes[0] ('k').value.arrayValue.values[1].intValue",
            "got a boolean",
        ),
        (
            {
                "attributes": [
                    {"key": "k", "value": {"kvlistValue": {"values": [{"key": "a", "value": 3}]}}}
                ]
            },
            "attributes[0] ('k').value.kvlistValue.values[0]['a']",
            "expected an AnyValue object",
        ),
        (
            {"events": [{"name": "e", "timeUnixNano": "x"}]},
            "events[0].timeUnixNano",
            "not a decimal",
        ),
        ({"events": {"name": "e"}}, "events", "expected an array"),
        ({"events": [5]}, "events[0]", "expected an object"),
    ],
)
def test_bad_json_spans_are_named(span: dict[str, Any], path: str, problem: str) -> None:
    with pytest.raises(OTLPDecodeError) as info:
        records_from_otlp_json(_json_request(span))
    message = _message(info)
    assert f"{SPAN_PATH}.{path}: " in message, message
    assert problem in message, message
    # the same error through every JSON entry point
    with pytest.raises(OTLPDecodeError, match="not valid OTLP"):
        decode_any(orjson.dumps(_json_request(span)))


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ([], "body: expected a JSON object, got an array"),
        ({"resourceSpans": {}}, "resourceSpans: expected an array, got an object"),
        ({"resourceSpans": [7]}, "resourceSpans[0]: expected an object, got a number"),
        ({"resourceSpans": [{"resource": []}]}, "resourceSpans[0].resource: expected an object"),
        (
            {
                "resourceSpans": [
                    {"resource": {"attributes": [{"key": "k", "value": {"intValue": []}}]}}
                ]
            },
            "resourceSpans[0].resource.attributes[0] ('k').value.intValue",
        ),
        (
            {"resourceSpans": [{"scopeSpans": [[]]}]},
            "resourceSpans[0].scopeSpans[0]: expected an object",
        ),
        (
            {"resourceSpans": [{"scopeSpans": [{"scope": 3}]}]},
            "scopeSpans[0].scope: expected an object",
        ),
        (
            {"resourceSpans": [{"scopeSpans": [{"scope": {"name": 3}}]}]},
            "scope.name: expected a string",
        ),
        (
            {"resourceSpans": [{"scopeSpans": [{"spans": [1]}]}]},
            "scopeSpans[0].spans[0]: expected a Span",
        ),
        ({"batches": []}, "resourceSpans"),
        (
            "unnamed",
            "resourceSpans[0].scopeSpans[0].spans[0].name: expected a string, got a number",
        ),
    ],
)
def test_bad_json_documents(doc: Any, fragment: str) -> None:
    if doc == "unnamed":
        doc = _json_request({"name": 7})
    with pytest.raises(OTLPDecodeError) as info:
        records_from_otlp_json(doc if isinstance(doc, Mapping) else orjson.dumps(doc))
    assert fragment in _message(info)


def _deep_kvlist(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    return value


def _deep_array(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


@pytest.mark.parametrize("deep", [_deep_kvlist, _deep_array])
def test_json_nesting_is_bounded(deep: Any) -> None:
    ok = _json_request({"attributes": [{"key": "deep", "value": deep(MAX_VALUE_DEPTH - 1)}]})
    assert len(records_from_otlp_json(ok)) == 1
    hostile = _json_request({"attributes": [{"key": "deep", "value": deep(100)}]})
    for decode in (records_from_otlp_json, lambda d: decode_any(json.dumps(d))):
        with pytest.raises(OTLPDecodeError) as info:
            decode(hostile)
        assert f"nest deeper than {MAX_VALUE_DEPTH} levels" in _message(info)
        assert f"{SPAN_PATH}.attributes[0] ('deep').value." in str(info.value)
    # deeper than any JSON parser's own limit: still an OTLPDecodeError, not a RecursionError
    text = '{"resourceSpans": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(OTLPDecodeError, match="invalid JSON"):
        decode_any(text)


def test_deep_kvlist_value_is_json_text() -> None:
    [record] = records_from_otlp_json(
        _json_request({"attributes": [{"key": "d", "value": _deep_kvlist(3)}]})
    )
    assert record.attributes["d"] == '{"k":{"k":{"k":"leaf"}}}'


def test_invalid_json() -> None:
    bodies: list[bytes | str] = ["", "{", '{"resourceSpans": [}', "nul", b"\xff\xfe{}", "{} x"]
    for body in bodies:
        with pytest.raises(OTLPDecodeError) as info:
            records_from_otlp_json(body)
        assert "body: invalid JSON" in _message(info)


# --------------------------------------------------------------------------------------------
# gzip

CRC32_OF_1_GIB_OF_ZEROS = 0x5B64C2B0  # zlib.crc32(bytes(2**30)), precomputed


def _zeros_bomb(mebibytes: int, crc: int) -> bytes:
    """A single-member gzip stream of ``mebibytes`` MiB of zeros, built without producing them.

    After a full flush a deflate stream starts afresh, so the compressed form of every 1 MiB
    run of zeros is the same bytes; repeating it gives a stream of any length.
    """
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(bytes(1 << 20)) + deflate.flush(zlib.Z_FULL_FLUSH)
    tail = deflate.flush(zlib.Z_FINISH)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    size = (mebibytes << 20) & 0xFFFFFFFF
    return header + block * mebibytes + tail + struct.pack("<II", crc, size)


def test_bomb_construction_is_a_real_gzip_stream() -> None:
    small = _zeros_bomb(3, zlib.crc32(bytes(3 << 20)))
    assert gzip.decompress(small) == bytes(3 << 20)


def test_gzip_bomb_of_one_gib_stops_at_the_bound() -> None:
    bomb = _zeros_bomb(1024, CRC32_OF_1_GIB_OF_ZEROS)
    assert len(bomb) < 2 << 20  # about 1 MiB that expands to 1 GiB
    limit = 10 * 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(PayloadTooLarge) as info:
            gunzip_bounded(bomb, limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * limit, peak
    assert info.value.limit == limit
    assert isinstance(info.value, OTLPDecodeError)
    assert f"gzip body: decompresses to more than {limit} bytes" in str(info.value)
    with pytest.raises(PayloadTooLarge):
        decode_any(bomb, max_decompressed_bytes=limit)
    with pytest.raises(PayloadTooLarge):
        decode_any(bomb)  # the default bound (64 MiB) holds too


def test_gzip_bomb_of_many_members() -> None:
    member = gzip.compress(bytes(1 << 20))
    with pytest.raises(PayloadTooLarge):
        gunzip_bounded(member * 1024, 10 << 20)


def test_gunzip_bounded_edges() -> None:
    data = b"0123456789" * 1000
    assert gunzip_bounded(gzip.compress(data), len(data)) == data
    with pytest.raises(PayloadTooLarge):
        gunzip_bounded(gzip.compress(data), len(data) - 1)
    assert gunzip_bounded(gzip.compress(b"ab") + gzip.compress(b"cd"), 10) == b"abcd"
    assert gunzip_bounded(gzip.compress(b"ab") + bytes(8), 10) == b"ab"
    assert gunzip_bounded(gzip.compress(b""), 0) == b""
    with pytest.raises(OTLPDecodeError, match="gzip body: the gzip stream is truncated"):
        gunzip_bounded(gzip.compress(data)[:-20], 1 << 20)
    with pytest.raises(OTLPDecodeError, match="gzip body: the gzip stream is corrupt"):
        gunzip_bounded(b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"\xff" * 30, 1 << 20)
    with pytest.raises(OTLPDecodeError, match="corrupt"):
        gunzip_bounded(b"plain text", 100)
    with pytest.raises(OTLPDecodeError, match="corrupt"):
        gunzip_bounded(gzip.compress(b"ab") + b"trailing junk", 100)


# --------------------------------------------------------------------------------------------
# encoding


def test_encode_is_spec_otlp_json(expected: list[SpanRecord]) -> None:
    doc = encode_records_otlp_json(expected)
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and len(span["spanId"]) == 16
    assert isinstance(span["kind"], int) and isinstance(span["startTimeUnixNano"], str)
    # every field name and type is one protobuf's own JSON parser knows (it reads the hex ids
    # as base64, the one place where OTLP/JSON departs from protobuf's JSON mapping)
    parsed = json_format.ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=False)
    assert sum(len(ss.spans) for rs in parsed.resource_spans for ss in rs.scope_spans) == len(
        expected
    )
    assert records_from_otlp_json(doc) == expected
    assert records_from_otlp_json(orjson.dumps(doc)) == expected


def test_encode_special_values() -> None:
    record = SpanRecord(
        trace_id=TRACE,
        span_id=ROOT,
        parent_span_id=None,
        name="x",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        attributes={"nan": math.nan, "inf": math.inf, "ninf": -math.inf, "arr": (None, 1)},
    )
    doc = encode_records_otlp_json([record])
    values = {
        kv["key"]: kv["value"]
        for kv in doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    }
    assert values["nan"] == {"doubleValue": "NaN"} and values["ninf"] == {
        "doubleValue": "-Infinity"
    }
    assert values["arr"] == {"arrayValue": {"values": [{}, {"intValue": "1"}]}}
    [back] = records_from_otlp_json(orjson.dumps(doc))
    assert math.isnan(back.attributes["nan"])  # type: ignore[arg-type]
    assert back.attributes["inf"] == math.inf and back.attributes["arr"] == (None, 1)
    with pytest.raises(ValueError, match="64 bits"):
        encode_records_otlp_json([SpanRecord(TRACE, ROOT, None, "x", 1, 2, {"big": 2**64})])
    with pytest.raises(ValueError, match="span kind"):
        encode_records_otlp_json([SpanRecord(TRACE, ROOT, None, "x", 1, 2, kind="SIDEWAYS")])


# --------------------------------------------------------------------------------------------
# properties

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_int64 = st.integers(-(2**63), 2**63 - 1)
_scalar = st.one_of(_text, st.booleans(), _int64, st.floats(allow_nan=False))
_array = st.lists(st.one_of(st.none(), _scalar), max_size=4).map(tuple)
_nested = st.lists(_array, max_size=3).map(tuple)
_value = st.one_of(_scalar, _array, _nested)
_attributes = st.dictionaries(_text, _value, max_size=4)
_span_id = st.integers(1, 2**64 - 1).map(lambda n: format(n, "016x"))


@st.composite
def _records(draw: st.DrawFn) -> list[SpanRecord]:
    resources = draw(st.lists(_attributes, min_size=1, max_size=2))
    scopes = draw(st.lists(_text, min_size=1, max_size=2))
    records = []
    for _ in range(draw(st.integers(0, 4))):
        parent = draw(st.one_of(st.none(), _span_id))
        status = draw(st.sampled_from(["UNSET", "OK", "ERROR"]))
        records.append(
            SpanRecord(
                trace_id=format(draw(st.integers(1, 2**128 - 1)), "032x"),
                span_id=draw(_span_id),
                parent_span_id=parent,
                name=draw(_text),
                start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                end_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
                attributes=draw(_attributes),
                status_code=status,
                status_message=draw(_text) if status == "ERROR" else "",
                events=tuple(
                    SpanEvent(draw(_text), draw(st.integers(0, 2**64 - 1)), draw(_attributes))
                    for _ in range(draw(st.integers(0, 2)))
                ),
                dropped_attributes_count=draw(st.integers(0, 2**32 - 1)),
                resource=draw(st.sampled_from(resources)),
                scope_name=draw(st.sampled_from(scopes)),
                parent_is_remote=parent is not None and draw(st.booleans()),
                kind=draw(
                    st.sampled_from(["INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"])
                ),
            )
        )
    return records


_KIND_NUMBERS = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}


def _pb_any(value: Any) -> AnyValue:
    if value is None:
        return AnyValue()
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    out = AnyValue()
    out.array_value.values.extend(_pb_any(v) for v in value)
    return out


def _pb_kvs(attributes: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=_pb_any(v)) for k, v in attributes.items()]


def _build_proto(records: Sequence[SpanRecord]) -> ExportTraceServiceRequest:
    """A small builder of opentelemetry.proto messages, independent of the module under test."""
    request = ExportTraceServiceRequest()
    for record in records:
        rs = request.resource_spans.add()
        rs.resource.attributes.extend(_pb_kvs(record.resource))
        ss = rs.scope_spans.add()
        ss.scope.name = record.scope_name
        span = ss.spans.add(
            trace_id=bytes.fromhex(record.trace_id),
            span_id=bytes.fromhex(record.span_id),
            parent_span_id=bytes.fromhex(record.parent_span_id or ""),
            name=record.name,
            kind=_KIND_NUMBERS[record.kind],
            start_time_unix_nano=record.start_time_unix_nano,
            end_time_unix_nano=record.end_time_unix_nano,
            dropped_attributes_count=record.dropped_attributes_count,
            flags=0x100 | (0x200 if record.parent_is_remote else 0),
        )
        span.attributes.extend(_pb_kvs(record.attributes))
        span.status.code = ["UNSET", "OK", "ERROR"].index(record.status_code)
        span.status.message = record.status_message
        for event in record.events:
            span.events.append(
                PBSpan.Event(
                    name=event.name,
                    time_unix_nano=event.time_unix_nano,
                    attributes=_pb_kvs(event.attributes),
                )
            )
    return request


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records())
def test_json_round_trip(records: list[SpanRecord]) -> None:
    doc = encode_records_otlp_json(records)
    assert records_from_otlp_json(doc) == records
    assert records_from_otlp_json(orjson.dumps(doc)) == records
    assert decode_any(orjson.dumps(doc)) == records


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records())
def test_proto_round_trip(records: list[SpanRecord]) -> None:
    body = _build_proto(records).SerializeToString()
    assert records_from_otlp_proto(body) == records
    assert decode_any(body, "application/x-protobuf") == records
    # protobuf's canonical JSON of the same message (base64 ids, enum names)
    assert records_from_otlp_json(json_format.MessageToJson(_build_proto(records))) == records


def _build_grouped_proto(records: Sequence[SpanRecord]) -> ExportTraceServiceRequest:
    """Spans grouped as exporters send them: one ResourceSpans per resource, one ScopeSpans per
    scope within it (records must come grouped, see ``_grouped``)."""
    request = ExportTraceServiceRequest()
    one = _build_proto(records)
    last_resource: Any = None
    last_scope: Any = None
    for record, single in zip(records, one.resource_spans, strict=True):
        if last_resource is None or record.resource != last_resource[0]:
            rs = request.resource_spans.add()
            rs.resource.CopyFrom(single.resource)
            last_resource, last_scope = (record.resource, rs), None
        if last_scope is None or record.scope_name != last_scope[0]:
            ss = last_resource[1].scope_spans.add()
            ss.scope.name = record.scope_name
            last_scope = (record.scope_name, ss)
        last_scope[1].spans.extend(single.scope_spans[0].spans)
    return request


@st.composite
def _grouped(draw: st.DrawFn) -> list[SpanRecord]:
    """Records of a few traces, in runs of one resource and one scope."""
    records = draw(_records())
    traces = [format(n, "032x") for n in draw(st.lists(st.integers(1, 2**128 - 1), min_size=1))]
    records = [dataclasses.replace(r, trace_id=draw(st.sampled_from(traces))) for r in records] + [
        dataclasses.replace(r, trace_id=traces[0]) for r in draw(_records())
    ]
    order = {
        orjson.dumps(r.resource, option=orjson.OPT_SORT_KEYS): n for n, r in enumerate(records)
    }
    return sorted(
        records,
        key=lambda r: (order[orjson.dumps(r.resource, option=orjson.OPT_SORT_KEYS)], r.scope_name),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_grouped())
def test_proto_round_trip_grouped(records: list[SpanRecord]) -> None:
    request = _build_grouped_proto(records)
    decoded = records_from_otlp_proto(request.SerializeToString())
    assert decoded == records
    # one resource mapping per ResourceSpans, shared by its spans
    assert len({id(r.resource) for r in decoded}) == len(request.resource_spans)
    from_json = records_from_otlp_json(json_format.MessageToJson(request))
    assert from_json == records
    assert len({id(r.resource) for r in from_json}) == len(request.resource_spans)


def _any_value_of(kind: str, value: Any) -> AnyValue:
    if kind == "array_value":
        return AnyValue(array_value={"values": value})
    if kind == "kvlist_value":
        return AnyValue(kvlist_value={"values": [KeyValue(key=k, value=v) for k, v in value]})
    return AnyValue(**{kind: value})


_gen_scalar = st.one_of(
    st.just(AnyValue()),  # a value that sets no field
    *(
        st.tuples(st.just(kind), values).map(lambda kv: _any_value_of(*kv))
        for kind, values in [
            ("string_value", _text),
            ("bool_value", st.booleans()),
            ("int_value", _int64),
            ("double_value", st.floats()),
            ("bytes_value", st.binary(max_size=8)),
        ]
    ),
)
_gen_any = st.recursive(
    _gen_scalar,
    lambda children: (
        st.lists(children, max_size=3).map(lambda v: _any_value_of("array_value", v))
        | st.lists(st.tuples(_text, children), max_size=3).map(
            lambda v: _any_value_of("kvlist_value", v)
        )
    ),
    max_leaves=8,
)
_gen_attributes = st.lists(st.builds(KeyValue, key=_text, value=_gen_any), max_size=3)
# All zeros now and then, which both decoders refuse with the same words.
_gen_trace_id = st.integers(0, 2**128 - 1).map(lambda n: n.to_bytes(16, "big"))
_gen_span_id = st.integers(0, 2**64 - 1).map(lambda n: n.to_bytes(8, "big"))
_gen_span = st.builds(
    PBSpan,
    trace_id=_gen_trace_id,
    span_id=_gen_span_id,
    parent_span_id=st.one_of(st.just(b""), st.just(bytes(8)), _gen_span_id),  # zeros: no parent
    trace_state=_text,
    flags=st.sampled_from([0, 1, 0x100, 0x301, 2**32 - 1]),
    name=_text,
    kind=st.integers(0, 5),
    start_time_unix_nano=st.integers(0, 2**64 - 1),
    end_time_unix_nano=st.integers(0, 2**64 - 1),
    attributes=_gen_attributes,
    dropped_attributes_count=st.integers(0, 2**32 - 1),
    events=st.lists(
        st.builds(
            PBSpan.Event,
            time_unix_nano=st.integers(0, 2**64 - 1),
            name=_text,
            attributes=_gen_attributes,
        ),
        max_size=2,
    ),
    status=st.builds(
        lambda code, message: {"code": code, "message": message}, st.integers(0, 2), _text
    ),
)
_gen_request = st.builds(
    ExportTraceServiceRequest,
    resource_spans=st.lists(
        st.builds(
            lambda attributes, scope_spans: {
                "resource": {"attributes": attributes},
                "scope_spans": scope_spans,
            },
            _gen_attributes,
            st.lists(
                st.builds(
                    lambda name, spans: {"scope": {"name": name}, "spans": spans},
                    _text,
                    st.lists(_gen_span, max_size=3),
                ),
                max_size=2,
            ),
        ),
        max_size=2,
    ),
)


def _otlp_json(request: ExportTraceServiceRequest, integer_enums: bool) -> dict[str, Any]:
    """The OTLP/JSON form of ``request``: protobuf's JSON mapping, with the ids in hex."""
    doc = json_format.MessageToDict(request, use_integers_for_enums=integer_enums)
    for rs in doc.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                for field in ("traceId", "spanId", "parentSpanId"):
                    if field in span:
                        span[field] = base64.b64decode(span[field]).hex()
    return doc


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_gen_request, st.booleans())
def test_json_and_protobuf_of_one_request_decode_alike(
    request: ExportTraceServiceRequest, integer_enums: bool
) -> None:
    from_proto = decode_export_request(request.SerializeToString(), "proto")
    from_json = decode_export_request(orjson.dumps(_otlp_json(request, integer_enums)), "json")
    # repr tells 0.0 from -0.0, 1 from True and 1.0, and makes NaN equal to itself
    assert repr(from_json.records) == repr(from_proto.records)
    assert (from_json.rejected, from_json.errors) == (from_proto.rejected, from_proto.errors)


def test_proto_bad_ids_are_found_after_good_spans_of_the_same_trace() -> None:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    trace_id = bytes(range(1, 17))
    spans.add(trace_id=trace_id, span_id=b"\x01" * 8, name="ok")
    spans.add(trace_id=trace_id, span_id=b"\x00" * 8, name="zero span id")
    spans.add(trace_id=bytes(16), span_id=b"\x02" * 8, name="zero trace id")
    with pytest.raises(OTLPDecodeError) as info:
        records_from_otlp_proto(request.SerializeToString())
    assert info.value.path == "resourceSpans[0].scopeSpans[0].spans[1] (span 'zero span id').spanId"
    assert info.value.problem == "span id is all zeros, which is invalid"
    del spans[1]
    with pytest.raises(OTLPDecodeError) as info:
        records_from_otlp_proto(request.SerializeToString())
    assert (
        info.value.path == "resourceSpans[0].scopeSpans[0].spans[1] (span 'zero trace id').traceId"
    )
    assert info.value.problem == "trace id is all zeros, which is invalid"


def test_proto_attribute_keys_are_one_str_each_and_the_table_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tracely_otel._otlp as otlp

    monkeypatch.setattr(otlp, "_SHARED_KEYS", {})
    monkeypatch.setattr(otlp, "_MAX_SHARED_KEYS", 8)

    def request(keys: Sequence[str]) -> bytes:
        message = ExportTraceServiceRequest()
        span = (
            message.resource_spans.add()
            .scope_spans.add()
            .spans.add(trace_id=bytes(range(1, 17)), span_id=b"\x01" * 8)
        )
        span.attributes.extend(KeyValue(key=k, value=AnyValue(string_value=f"v-{k}")) for k in keys)
        body: bytes = message.SerializeToString()
        return body

    keys = [f"key.{n}" for n in range(20)]
    (first,) = records_from_otlp_proto(request(keys))
    (second,) = records_from_otlp_proto(request(keys))
    assert first.attributes == second.attributes == {k: f"v-{k}" for k in keys}
    shared = [a is b for a, b in zip(first.attributes, second.attributes, strict=True)]
    assert all(shared[:8])  # the first keys seen are in the table; the rest are not kept
    assert sorted(otlp._SHARED_KEYS) == sorted(keys[:8])


def test_proto_empty_string_attributes_are_kept() -> None:
    request = ExportTraceServiceRequest()
    span = (
        request.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=bytes(range(1, 17)), span_id=b"\x01" * 8)
    )
    span.attributes.extend(
        [
            KeyValue(key="empty", value=AnyValue(string_value="")),
            KeyValue(key="zero", value=AnyValue(int_value=0)),
            KeyValue(key="false", value=AnyValue(bool_value=False)),
            KeyValue(key="unset", value=AnyValue()),
        ]
    )
    (record,) = records_from_otlp_proto(request.SerializeToString())
    assert record.attributes == {"empty": "", "zero": 0, "false": False}
    assert type(record.attributes["zero"]) is int


def _only_decode_errors(payload: bytes | str) -> None:
    try:
        records = decode_any(payload)
    except OTLPDecodeError as error:
        assert "unexpected decoding failure" not in str(error), str(error)
    else:
        assert isinstance(records, list)
        assert all(isinstance(r, SpanRecord) for r in records)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_decode_any_on_arbitrary_bytes(payload: bytes) -> None:
    _only_decode_errors(payload)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_text, children, max_size=3),
    max_leaves=12,
)


def _slots(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _slots(value, (*path, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _slots(value, (*path, index))


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    copy: Any = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[head] = _replace(doc[head], rest, value)
    return copy


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records(), st.data())
def test_decode_any_on_mutated_documents(records: list[SpanRecord], data: st.DataObject) -> None:
    doc = encode_records_otlp_json(records)
    shape = data.draw(st.sampled_from(["otlp", "jaeger", "tempo"]))
    if shape == "jaeger":
        doc = {"result": doc}
    elif shape == "tempo":
        doc = {"batches": doc["resourceSpans"]}
    slots = list(_slots(doc))
    path = data.draw(st.sampled_from(slots))
    mutated = _replace(doc, path, data.draw(_json))
    text = json.dumps(mutated)
    _only_decode_errors(text.encode())
    _only_decode_errors(text + "\n" + json.dumps(doc))
    try:  # the mapping itself, as the server hands over an already parsed body
        decoder = {"otlp": records_from_otlp_json, "jaeger": records_from_jaeger}
        decoder.get(shape, records_from_tempo)(mutated)
    except OTLPDecodeError as error:
        assert "unexpected decoding failure" not in str(error), str(error)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records(), st.data())
def test_decode_any_on_corrupted_protobuf(records: list[SpanRecord], data: st.DataObject) -> None:
    body = bytearray(_build_proto(records).SerializeToString())
    for _ in range(data.draw(st.integers(1, 4))):
        if not body:
            break
        index = data.draw(st.integers(0, len(body) - 1))
        body[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    _only_decode_errors(bytes(body[:cut]))
    _only_decode_errors(bytes(body))


def test_errors_keep_path_and_problem_and_pickle() -> None:
    with pytest.raises(OTLPDecodeError) as info:
        records_from_otlp_json(_json_request({"spanId": "nope"}))
    error = info.value
    assert error.path == f"{SPAN_PATH}.spanId"
    assert error.problem == "'nope' is neither 16 hex characters nor base64 of 8 bytes"
    assert isinstance(error, ValueError)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.path) == (OTLPDecodeError, str(error), error.path)
    large = pickle.loads(pickle.dumps(PayloadTooLarge(5)))
    assert isinstance(large, PayloadTooLarge) and large.limit == 5


def test_the_tracestate_a_span_was_made_with_survives_every_encoding() -> None:
    """``tracely scenarios`` marks a turn's trace in its tracestate: the server must see it."""
    from opentelemetry.trace import TraceState

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    parent = SpanContext(
        REMOTE_TRACE_ID,
        REMOTE_SPAN_ID,
        is_remote=True,
        trace_flags=TraceFlags(1),
        trace_state=TraceState([("tracely", "t1")]),
    )
    with provider.get_tracer("t").start_as_current_span(
        "POST /chat", context=set_span_in_context(NonRecordingSpan(parent))
    ):
        pass
    (span,) = exporter.get_finished_spans()
    assert record_from_readable(span).trace_state == "tracely=t1"
    (from_proto,) = records_from_otlp_proto(encode_spans([span]).SerializeToString())
    assert from_proto.trace_state == "tracely=t1"
    (again,) = records_from_otlp_json(encode_records_otlp_json([from_proto]))
    assert again.trace_state == "tracely=t1"
    (plain,) = records_from_otlp_json(
        encode_records_otlp_json([dataclasses.replace(again, trace_state="")])
    )
    assert plain.trace_state == ""
