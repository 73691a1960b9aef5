"""OTLP/HTTP in: the real exporter, live agent runs, JSON, gzip, partial success, back-pressure,
and traces split across requests, shuffled, duplicated and completed late."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import time
import urllib.request
from typing import Any

import orjson
import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from server._support import ROOT, AckingExporter, Ledger, ServerProcess, exporter, wait_for
from tracely_otel import bundle_from_spans, record_from_readable
from tracely_otel._otlp import encode_records_otlp_json

AGENT = """
import json, sys
import tracely_sdk as tracely
from examples import weather_agent

bundles = []
provider = tracely.init(service_name="weather-agent", on_bundle=lambda t, b: bundles.append(b))
answer = getattr(weather_agent, sys.argv[1])(sys.argv[2])
provider.force_flush()
print(json.dumps({"answer": answer, "bundles": bundles}))
"""


def run_agent(server: ServerProcess, fn: str, city: str, **env: str) -> dict[str, Any]:
    """The reference agent in its own process, exporting with the standard OTLP variables."""
    result = subprocess.run(
        [sys.executable, "-c", AGENT, fn, city],
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "OTEL_EXPORTER_OTLP_ENDPOINT": server.url,
            "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{server.tokens.ingest}",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "TRACELY_RECORD": "false",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def recorded(server: ServerProcess, trace_id: str, bundle: dict[str, Any] | None = None) -> Any:
    """The recording of ``trace_id`` once it exists (and, given ``bundle``, once it is that)."""

    def ready() -> Any:
        rec = server.recording(trace_id)
        if rec is None or (bundle is not None and rec["bundle"] != bundle):
            return None
        return rec

    return wait_for(ready, what=f"the recording of {trace_id}")


def post_otlp(
    server: ServerProcess, body: bytes, content_type: str, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    answer = server.request(
        "POST", "/v1/traces", body, token="ingest", content_type=content_type, headers=headers
    )
    return answer.status, dict(answer.headers), answer.body


# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn,city", [("run", "Paris"), ("run_handles", "Atlantis")])
def test_a_live_run_exported_by_the_standard_exporter_becomes_the_same_recording(
    server: ServerProcess, fn: str, city: str
) -> None:
    out = run_agent(server, fn, city)
    (bundle,) = out["bundles"]
    rec = recorded(server, bundle["trace_id"])
    assert rec["bundle"] == bundle  # the one extractor, in-process and server-side
    assert rec["service"] == "weather-agent"
    assert rec["agent_name"] == "weather-agent"
    assert rec["input"] == {"args": [city], "kwargs": {}}
    assert rec["output"] == out["answer"]
    listed = server.get("/api/traces?service=weather-agent&limit=1000", token="read").json()
    summary = next(t for t in listed["traces"] if t["trace_id"] == bundle["trace_id"])
    assert "bundle" not in summary and summary["status"] == "ok"


def test_gzip_compressed_protobuf(server: ServerProcess) -> None:
    out = run_agent(server, "run", "Oslo", OTEL_EXPORTER_OTLP_COMPRESSION="gzip")
    (bundle,) = out["bundles"]
    assert recorded(server, bundle["trace_id"])["bundle"] == bundle


def test_otlp_json_posted_with_urllib(server: ServerProcess, weather_run: Any) -> None:
    spans, bundle = weather_run("Lisbon")
    payload = orjson.dumps(encode_records_otlp_json([record_from_readable(s) for s in spans]))
    request = urllib.request.Request(
        f"{server.url}/v1/traces",
        data=payload,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {server.tokens.ingest}",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"
        assert json.loads(response.read()) == {}
    assert recorded(server, bundle["trace_id"])["bundle"] == bundle


def test_otlp_json_gzip(server: ServerProcess, weather_run: Any) -> None:
    spans, bundle = weather_run("Tokyo")
    payload = orjson.dumps(encode_records_otlp_json([record_from_readable(s) for s in spans]))
    status, _, body = post_otlp(
        server, gzip.compress(payload), "application/json", **{"Content-Encoding": "gzip"}
    )
    assert (status, orjson.loads(body)) == (200, {})
    assert recorded(server, bundle["trace_id"])["bundle"] == bundle


def test_success_is_an_empty_export_response_in_the_request_encoding(
    server: ServerProcess, weather_run: Any
) -> None:
    spans, _ = weather_run("Paris")
    status, headers, body = post_otlp(
        server, encode_spans(spans).SerializeToString(), "application/x-protobuf"
    )
    assert status == 200 and headers["content-type"] == "application/x-protobuf"
    assert not ExportTraceServiceResponse.FromString(body).HasField("partial_success")
    # An empty request is a success too (the specification says SHOULD).
    assert post_otlp(server, b"", "application/x-protobuf")[0] == 200
    assert post_otlp(server, b"{}", "application/json")[:3:2] == (200, b"{}")


def test_spans_split_shuffled_duplicated_and_late(server: ServerProcess, weather_run: Any) -> None:
    spans, full = weather_run("Paris")
    by_name: dict[str, list[Any]] = {}
    for span in spans:
        by_name.setdefault(span.attributes.get("tracely.kind"), []).append(span)
    (root,) = by_name["agent"]
    (tool,) = by_name["tool"]
    first_llm, second_llm = sorted(by_name["llm"], key=lambda s: s.start_time)
    send = exporter(server)
    trace_id = full["trace_id"]

    # Three requests, the root in the middle, one span sent twice.
    requests = [[second_llm], [tool, root], [tool]]
    random.Random(5).shuffle(requests)
    for batch in requests:
        assert send.export(batch) is SpanExportResult.SUCCESS
    partial = bundle_from_spans([record_from_readable(s) for s in (root, tool, second_llm)])
    first = recorded(server, trace_id, partial)
    assert first["bundle"] != full

    # A late child re-opens the trace; the recording is replaced by the complete one.
    assert send.export([first_llm]) is SpanExportResult.SUCCESS
    complete = recorded(server, trace_id, full)
    assert complete["received_at"] > first["received_at"]

    # Duplicates change nothing.
    assert send.export([first_llm, root]) is SpanExportResult.SUCCESS
    time.sleep(0.6)  # three quiet periods
    assert server.recording(trace_id) == complete
    send.shutdown()  # type: ignore[no-untyped-call]


def test_spans_with_invalid_ids_are_rejected_alone(server: ServerProcess, weather_run: Any) -> None:
    spans, bundle = weather_run("Lisbon")
    request = encode_spans(spans)
    good = request.resource_spans[0].scope_spans[0]
    bad = good.spans.add()
    bad.CopyFrom(good.spans[0])
    bad.trace_id = bytes(16)
    short = good.spans.add()
    short.CopyFrom(good.spans[0])
    short.span_id = b"\x01\x02\x03"
    status, _, body = post_otlp(server, request.SerializeToString(), "application/x-protobuf")
    assert status == 200
    partial = ExportTraceServiceResponse.FromString(body).partial_success
    assert partial.rejected_spans == 2
    assert "2 span(s) rejected" in partial.error_message
    assert "traceId" in partial.error_message and "spanId" in partial.error_message
    assert f"spans[{len(spans)}]" in partial.error_message  # where the bad span really is
    assert recorded(server, bundle["trace_id"])["bundle"] == bundle

    # The same in OTLP/JSON.
    spans, bundle = weather_run("Oslo")
    doc = encode_records_otlp_json([record_from_readable(s) for s in spans])
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"].append(
        {**doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0], "traceId": "not-hex"}
    )
    status, _, body = post_otlp(server, orjson.dumps(doc), "application/json")
    assert status == 200
    answer = orjson.loads(body)
    assert answer["partialSuccess"]["rejectedSpans"] == "1"
    assert "traceId" in answer["partialSuccess"]["errorMessage"]
    assert recorded(server, bundle["trace_id"])["bundle"] == bundle


def test_a_request_whose_every_span_is_invalid_is_bad_data(
    server: ServerProcess, weather_run: Any
) -> None:
    spans, _ = weather_run("Paris")
    request = encode_spans(spans[:1])
    request.resource_spans[0].scope_spans[0].spans[0].trace_id = bytes(16)
    status, headers, body = post_otlp(server, request.SerializeToString(), "application/x-protobuf")
    assert status == 400 and headers["content-type"] == "application/x-protobuf"
    message = Status.FromString(body).message
    assert "trace id is all zeros" in message


def test_back_pressure_is_429_with_retry_after_and_accepts_nothing(
    make_server: Any, weather_run: Any
) -> None:
    proc = make_server("--quiet-seconds", "0.1", env={"TRACELY_SERVER_MAX_SPANS": "3"})
    spans, bundle = weather_run("Paris")
    assert len(spans) == 4
    body = encode_spans(spans).SerializeToString()
    status, headers, answer = post_otlp(proc, body, "application/x-protobuf")
    assert status == 429
    assert int(headers["retry-after"]) >= 1
    assert "holds as many spans" in Status.FromString(answer).message
    status, headers, answer = post_otlp(
        proc, orjson.dumps({"resourceSpans": []}), "application/json"
    )
    assert status == 200  # nothing in it, nothing held
    time.sleep(0.5)
    assert proc.recording(bundle["trace_id"]) is None  # never accept-then-drop
    # Within the bounds, the same spans are taken.
    assert (
        post_otlp(proc, encode_spans(spans[:3]).SerializeToString(), "application/x-protobuf")[0]
        == 200
    )


def test_the_exporter_retries_after_429(make_server: Any, weather_run: Any) -> None:
    # A server that holds at most 4 spans: the second trace waits until the first is written
    # and let go of, and the exporter's retry (honouring Retry-After) then delivers it.
    proc = make_server(
        "--quiet-seconds",
        "0.1",
        env={"TRACELY_SERVER_MAX_SPANS": "4", "TRACELY_SERVER_RETAIN_SECONDS": "0"},
    )
    first, first_bundle = weather_run("Paris")
    second, second_bundle = weather_run("Oslo")
    ledger = Ledger()
    send = AckingExporter(
        ledger,
        endpoint=f"{proc.url}/v1/traces",
        headers={"Authorization": f"Bearer {proc.tokens.ingest}"},
        timeout=20,
    )
    assert send.export(first) is SpanExportResult.SUCCESS
    assert send.export(second) is SpanExportResult.SUCCESS
    assert ledger.statuses.get(429), ledger.statuses  # refused once, then delivered
    assert recorded(proc, first_bundle["trace_id"])["bundle"] == first_bundle
    assert recorded(proc, second_bundle["trace_id"])["bundle"] == second_bundle
    send.shutdown()  # type: ignore[no-untyped-call]


def test_request_json_is_validated_not_trusted(server: ServerProcess) -> None:
    # OTLP/JSON receivers must ignore unknown fields (the specification says so).
    doc = {"resourceSpans": [], "someFutureField": {"x": 1}}
    assert post_otlp(server, orjson.dumps(doc), "application/json")[0] == 200


def test_spans_past_the_per_trace_cap_are_a_partial_success(
    make_server: Any, weather_run: Any
) -> None:
    proc = make_server(env={"TRACELY_SERVER_MAX_SPANS_PER_TRACE": "3"})
    spans, _ = weather_run("Paris")
    status, _, body = post_otlp(
        proc, encode_spans(spans).SerializeToString(), "application/x-protobuf"
    )
    assert status == 200
    partial = ExportTraceServiceResponse.FromString(body).partial_success
    assert partial.rejected_spans == 1
    assert partial.error_message.startswith("1 span(s) rejected: trace(s) ")
    assert "already hold 3 spans" in partial.error_message
    # Sending the same spans again is not a second rejection of the ones it holds.
    status, _, body = post_otlp(
        proc, encode_spans(spans[:2]).SerializeToString(), "application/x-protobuf"
    )
    assert status == 200 and not ExportTraceServiceResponse.FromString(body).HasField(
        "partial_success"
    )


def test_a_trace_that_lost_spans_is_incomplete_until_they_arrive(
    server: ServerProcess, capture: Any
) -> None:
    import tracely_sdk as tracely

    with tracely.agent("counted", input="x") as run:
        for i in range(6):
            tracely.call_tool("lookup", lambda i=i: i, args={"i": i})
        run.output = "done"
    spans = capture.spans[-7:]
    trace_id = format(spans[0].context.trace_id, "032x")
    tools = [s for s in spans if s.attributes.get("tracely.kind") == "tool"]
    (root,) = [s for s in spans if s.attributes.get("tracely.kind") == "agent"]
    send = exporter(server)

    # One instance behind a round-robin balancer: it sees the root and every other call.
    assert send.export([root, *tools[::2]]) is SpanExportResult.SUCCESS
    half = wait_for(
        lambda: (rec := server.recording(trace_id)) and rec["bundle"].get("incomplete") and rec,
        what="the half recording",
    )
    assert len(half["bundle"]["tools"]["lookup"]) == 3
    (lost,) = half["bundle"]["incomplete"]
    assert lost["label"] == "tools" and lost["missing"] == 3
    refused = server.request("POST", "/api/cases", {"trace_id": trace_id, "name": "half"})
    assert refused.status == 409 and "not a whole recording" in refused.error["message"]

    # The other half arrives later: the trace is re-opened and the recording is whole.
    assert send.export(tools[1::2]) is SpanExportResult.SUCCESS
    whole = wait_for(
        lambda: (rec := server.recording(trace_id)) and "incomplete" not in rec["bundle"] and rec,
        what="the whole recording",
    )
    assert len(whole["bundle"]["tools"]["lookup"]) == 6
    send.shutdown()  # type: ignore[no-untyped-call]
