"""The bound on the bytes of unfinished traces held in memory counts what the spans take once
decoded, whatever their shape: a small request of many tiny attributes is refused, retryably,
when it would take the server past its bound, and nothing acknowledged is lost."""

from __future__ import annotations

from typing import Any

import grpc
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from server._support import wait_for
from server.test_server_grpc import GRPC, Call, body_of, refused, retry_seconds

BUDGET = 4 * 1024 * 1024


def wide(spans: list[Any], attributes: int) -> bytes:
    """The spans as one OTLP/protobuf request, the first with ``attributes`` more small ones:
    a few bytes each on the wire, a hundred or more each once decoded."""
    request = encode_spans(spans)
    first = request.resource_spans[0].scope_spans[0].spans[0]
    first.attributes.extend(
        KeyValue(key=f"k{n}", value=AnyValue(int_value=n)) for n in range(attributes)
    )
    return request.SerializeToString()  # type: ignore[no-any-return]


def test_a_small_request_that_decodes_past_the_bound_is_refused_retryably(
    make_server: Any, weather_run: Any
) -> None:
    proc = make_server(*GRPC, name="budget", env={"TRACELY_SERVER_MAX_HELD_BYTES": str(BUDGET)})
    spans, bundle = weather_run("Paris")
    other, _ = weather_run("Oslo")
    body = wide(other, 120_000)
    assert len(body) < BUDGET  # what the wire says is within the bound
    # Acknowledged first, so it must survive what follows.
    assert (
        proc.request(
            "POST",
            "/v1/traces",
            body_of(spans),
            token="ingest",
            content_type="application/x-protobuf",
        ).status
        == 200
    )

    answer = proc.request(
        "POST", "/v1/traces", body, token="ingest", content_type="application/x-protobuf"
    )
    assert answer.status == 429, answer
    assert int(answer.headers["retry-after"]) >= 1
    full = refused(Call(proc), body)
    assert full.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "holds as many bytes" in full.details() and retry_seconds(full) >= 1

    wait_for(
        lambda: (proc.recording(bundle["trace_id"]) or {}).get("bundle") == bundle,
        what="the acknowledged trace",
    )
    ids = proc.get("/api/traces?limit=100", token="read").json()["traces"]
    assert [t["trace_id"] for t in ids] == [bundle["trace_id"]]  # the refused one: nothing of it
    # The same spans without the padding are taken.
    assert (
        proc.request(
            "POST",
            "/v1/traces",
            body_of(other),
            token="ingest",
            content_type="application/x-protobuf",
        ).status
        == 200
    )
    assert proc.stop() == 0, proc.logs()
