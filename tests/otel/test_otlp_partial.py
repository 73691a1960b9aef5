"""Partial success: an export request keeps its good spans and names each refused one, in
one pass over the request however many spans are refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tracely_otel import _otlp
from tracely_otel._otlp import MAX_VALUE_DEPTH, OTLPDecodeError, decode_export_request

TRACE = "0af7651916cd43dd8448eb211c80319c"


def _span_id(i: int) -> bytes:
    return (i + 1).to_bytes(8, "big")


def _proto(spans: int, *, bad: Callable[[int], bool], resource_attrs: int = 3) -> bytes:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.extend(
        KeyValue(key=f"r{i}", value=AnyValue(string_value="x")) for i in range(resource_attrs)
    )
    ss = rs.scope_spans.add()
    ss.scope.name = "scope"
    for i in range(spans):
        span = ss.spans.add(name=f"s{i}", trace_id=bytes.fromhex(TRACE), span_id=_span_id(i))
        span.attributes.add(key="n", value=AnyValue(int_value=i))
        if bad(i):
            span.trace_id = bytes(16)
    return request.SerializeToString()


def _json(spans: int, *, bad: Callable[[int], bool], resource_attrs: int = 3) -> bytes:
    doc = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": f"r{i}", "value": {"stringValue": "x"}}
                        for i in range(resource_attrs)
                    ]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "scope"},
                        "spans": [
                            {
                                "name": f"s{i}",
                                "traceId": "not-hex" if bad(i) else TRACE,
                                "spanId": _span_id(i).hex(),
                                "attributes": [{"key": "n", "value": {"intValue": str(i)}}],
                            }
                            for i in range(spans)
                        ],
                    }
                ],
            }
        ]
    }
    return orjson.dumps(doc)


@pytest.mark.parametrize(("encoding", "build"), [("proto", _proto), ("json", _json)])
def test_bad_spans_are_refused_alone_and_named_where_they_are(
    encoding: str, build: Callable[..., bytes]
) -> None:
    records, rejected, errors = decode_export_request(build(6, bad=lambda i: i in (1, 4)), encoding)
    assert [r.name for r in records] == ["s0", "s2", "s3", "s5"]
    assert rejected == 2
    assert [e.split(": ")[0] for e in errors] == [
        "resourceSpans[0].scopeSpans[0].spans[1] (span 's1').traceId",
        "resourceSpans[0].scopeSpans[0].spans[4] (span 's4').traceId",
    ]


@pytest.mark.parametrize(("encoding", "build"), [("proto", _proto), ("json", _json)])
def test_a_good_request_refuses_nothing(encoding: str, build: Callable[..., bytes]) -> None:
    records, rejected, errors = decode_export_request(build(3, bad=lambda i: False), encoding)
    assert (len(records), rejected, errors) == (3, 0, [])


def test_a_resource_that_cannot_be_read_refuses_its_spans_and_keeps_the_others() -> None:
    request = ExportTraceServiceRequest.FromString(_proto(2, bad=lambda i: False))
    broken = request.resource_spans.add()
    broken.CopyFrom(request.resource_spans[0])
    deep = broken.resource.attributes.add(key="deep").value
    for _ in range(MAX_VALUE_DEPTH + 1):
        deep = deep.array_value.values.add()
    records, rejected, errors = decode_export_request(request.SerializeToString(), "proto")
    assert len(records) == 2 and rejected == 2
    (error,) = errors
    assert error.startswith("resourceSpans[1].resource.attributes['deep'].arrayValue")
    assert error.endswith(f": values nest deeper than {MAX_VALUE_DEPTH} levels")

    doc = orjson.loads(_json(2, bad=lambda i: False))
    other = orjson.loads(orjson.dumps(doc["resourceSpans"][0]))
    doc["resourceSpans"].append({**other, "resource": {"attributes": 7}})
    doc["resourceSpans"][0]["scopeSpans"].append(
        {"scope": {"name": 5}, "spans": doc["resourceSpans"][0]["scopeSpans"][0]["spans"]}
    )
    records, rejected, errors = decode_export_request(orjson.dumps(doc), "json")
    assert len(records) == 2 and rejected == 4
    assert [e.split(": ")[0] for e in errors] == [
        "resourceSpans[0].scopeSpans[1].scope.name",
        "resourceSpans[1].resource.attributes",
    ]


@pytest.mark.parametrize(
    ("body", "encoding"),
    [
        (b"\xff\xff\xff", "proto"),
        (b"{not json", "json"),
        (b'{"resourceSpans": 7}', "json"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": {}}]}]}', "json"),
    ],
)
def test_a_request_that_is_not_an_export_request_is_refused_whole(
    body: bytes, encoding: str
) -> None:
    with pytest.raises(OTLPDecodeError):
        decode_export_request(body, encoding)


def _counting(monkeypatch: pytest.MonkeyPatch, name: str, size: Callable[[Any], int]) -> list[int]:
    """Count every attribute the decoder reads through ``_otlp.<name>``."""
    seen = [0]
    real = getattr(_otlp, name)

    def counted(kvs: Any) -> Any:
        kvs = list(kvs) if not isinstance(kvs, (list, type(None))) else kvs
        seen[0] += size(kvs)
        return real(kvs)

    monkeypatch.setattr(_otlp, name, counted)
    return seen


@pytest.mark.parametrize(
    ("encoding", "build", "reader"),
    [("proto", _proto, "_pb_attributes"), ("json", _json, "_json_attributes")],
)
def test_refusing_many_spans_reads_each_attribute_once(
    monkeypatch: pytest.MonkeyPatch, encoding: str, build: Callable[..., bytes], reader: str
) -> None:
    # 300 resource attributes and 200 spans, every other one bad: reading the resource again
    # for each span would read 60,000 attributes.
    body = build(200, bad=lambda i: i % 2 == 1, resource_attrs=300)
    read = _counting(monkeypatch, reader, lambda kvs: len(kvs) if kvs else 0)
    records, rejected, _ = decode_export_request(body, encoding)
    assert (len(records), rejected) == (100, 100)
    assert read[0] <= 300 + 200  # the resource once, and each span's one attribute at most once
