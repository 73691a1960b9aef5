"""One call read from two spans beside each other."""

from __future__ import annotations

from collections.abc import Mapping

from tracely_otel import _attributes as A
from tracely_otel._reads import ExtractedCall, NotReplayable
from tracely_otel._spans import SpanRecord

# --------------------------------------------------------------------------------- one call, two spans


def same_call_beside(
    reads: Mapping[str, ExtractedCall | NotReplayable], spans: Mapping[str, SpanRecord]
) -> set[str]:
    """The span ids of LLM reads that repeat another read of the same call beside it.

    An instrumentor that does not make its span current (OpenLLMetry's anthropic one) leaves
    the spans made inside the call (the anthropic SDK's own, or tracely's) as its siblings,
    so nesting does not show that they are one call. Reads of different instrumentation
    scopes, at least one of them another instrumentor's, with the same
    ``gen_ai.response.id`` and overlapping in time are one call: tracely's own read is kept,
    else one that can be served, else the first. ``reads`` are in trace order.
    """
    kept: dict[str, str] = {}  # response id -> the span id of the read kept for it
    dropped: set[str] = set()
    for span_id, result in reads.items():
        span = spans[span_id]
        response_id = span.attributes.get(A.GEN_AI_RESPONSE_ID)
        if result.kind != "llm" or not isinstance(response_id, str) or not response_id:
            continue
        other_id = kept.get(response_id)
        if other_id is None:
            kept[response_id] = span_id
            continue
        other, other_span = reads[other_id], spans[other_id]
        if (
            not (result.foreign or other.foreign)
            or span.scope_name == other_span.scope_name
            or span.start_time_unix_nano > other_span.end_time_unix_nano
            or other_span.start_time_unix_nano > span.end_time_unix_nano
        ):
            kept[response_id] = span_id  # another call that reused the id: a later one
            continue
        if _rank(result) < _rank(other):
            dropped.add(other_id)
            kept[response_id] = span_id
        else:
            dropped.add(span_id)
    return dropped


def _rank(result: ExtractedCall | NotReplayable) -> int:
    """Which read of one call to keep: the lowest rank."""
    if not result.foreign:
        return 0
    return 1 if isinstance(result, ExtractedCall) else 2
