"""The extractor on hostile traces: its work grows linearly with the spans, and every bundle
it writes is one the bundle validator accepts."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import orjson
import pytest

from tracely_otel import SpanRecord, bundle_from_spans, validate_bundle
from tracely_otel import attributes as A
from tracely_otel._foreign import _openinference

TRACE = "0af7651916cd43dd8448eb211c80319c"


class CountedRecord(SpanRecord):
    """A SpanRecord that counts how often anything follows its parent pointer."""

    hops = 0

    @property  # type: ignore[override]
    def parent_span_id(self) -> str | None:
        CountedRecord.hops += 1
        return self.__dict__["parent"]  # type: ignore[no-any-return]

    @parent_span_id.setter
    def parent_span_id(self, value: str | None) -> None:
        self.__dict__["parent"] = value


def span(n: int, parent: int | None, **attributes: Any) -> CountedRecord:
    values = {
        "trace_id": TRACE,
        "span_id": format(n + 1, "016x"),
        "parent_span_id": None if parent is None else format(parent + 1, "016x"),
        "name": f"span {n}",
        "start_time_unix_nano": n,
        "end_time_unix_nano": 10**9 - n,
        "attributes": attributes,
    }
    return CountedRecord(**{f.name: values[f.name] for f in fields(SpanRecord) if f.name in values})


def deep_trace(n: int) -> list[SpanRecord]:
    """An agent at the root, a chain of ``n`` nested tool spans under it, ``n`` agent spans
    at its bottom, and another instrumentor's LLM span beside the chain."""
    spans = [span(0, None, **{A.KIND: A.KIND_AGENT, A.NAME: "root"})]
    for i in range(1, n + 1):
        spans.append(span(i, i - 1, **{A.KIND: A.KIND_TOOL, A.NAME: f"t{i}"}))
    for i in range(n + 1, 2 * n + 1):
        spans.append(span(i, n, **{A.KIND: A.KIND_AGENT, A.NAME: f"inner{i}"}))
    spans.append(span(2 * n + 1, 0, **{"openinference.span.kind": "LLM"}))
    return spans


def parent_hops(spans: list[SpanRecord]) -> int:
    CountedRecord.hops = 0
    bundle = bundle_from_spans(spans)
    assert bundle is not None and bundle["agent"]["name"] == "root"
    validate_bundle(bundle)
    return CountedRecord.hops


def test_extraction_work_is_linear_in_the_spans_however_deep_the_tree() -> None:
    small, large = parent_hops(deep_trace(100)), parent_hops(deep_trace(200))
    # Twice the spans, twice the work (a walk up the tree per agent or per call would be 4-8x).
    assert large <= 2.2 * small


def test_openinference_finish_reasons_cost_one_item_per_output_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    given: list[int] = []
    real = _openinference._finish

    def finish(messages: list[dict[str, Any]], reasons: Any) -> None:
        given.append(len(reasons))
        real(messages, reasons)

    monkeypatch.setattr(_openinference, "_finish", finish)
    n = 300
    attributes: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "m",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "hi",
        "llm.finish_reason": tuple(["length"] * (n - 1) + ["stop"]),
    }
    for i in range(n):
        attributes[f"llm.output_messages.{i}.message.role"] = "assistant"
        attributes[f"llm.output_messages.{i}.message.content"] = f"answer {i}"
    bundle = bundle_from_spans([span(0, None, **attributes)])
    assert bundle is not None and validate_bundle(bundle)
    (entry,) = bundle["llm"]["m"]
    reasons = [m["finish_reason"] for m in entry["output"]["messages"]]
    assert reasons == ["length"] * (n - 1) + ["stop"]  # each message its own reason
    assert given == [n]  # not n x n items

    # One reason is every message's.
    attributes["llm.finish_reason"] = "stop"
    bundle = bundle_from_spans([span(0, None, **attributes)])
    assert bundle is not None
    assert {m["finish_reason"] for m in bundle["llm"]["m"][0]["output"]["messages"]} == {"stop"}


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def recorded(n: int, parent: int | None, kind: str, name: str, **values: Any) -> SpanRecord:
    """A span as tracely records it in process, its values given as Python (dumped to JSON)."""
    attributes: dict[str, Any] = {A.KIND: kind, A.NAME: name}
    for key, value in values.items():
        attributes[key] = value if isinstance(value, (str, int)) else orjson.dumps(value).decode()
    record = span(n, parent, **attributes)
    record.in_process = record.intact = True  # nothing cut: no digest to check
    return record


@pytest.mark.parametrize(
    ("kind", "values", "label", "problem"),
    [
        (A.KIND_TOOL, {A.ERROR: "[]"}, "tools:call", "an error must be an object"),
        (A.KIND_TOOL, {A.ERROR: '{"type": "E"}'}, "tools:call", "error.message must be a string"),
        (
            A.KIND_LLM,
            {A.OUTPUT: '"hi"', A.GEN_AI_USAGE_INPUT_TOKENS: -1, A.GEN_AI_USAGE_OUTPUT_TOKENS: 3},
            "llm:call",
            "usage must be [input_tokens, output_tokens]",
        ),
        (A.KIND_LLM, {A.OUTPUT: '"hi"', A.USAGE: "[1]"}, "llm:call", "usage must be"),
        (A.KIND_TOOL, {A.OUTPUT: nested(80)}, "tools:call", "output: nests deeper than 64"),
        (
            A.KIND_TOOL,
            {A.OUTPUT: "1", A.ARGS: {"q": orjson.dumps(nested(64)).decode()}},
            "tools:call",
            "args: nests deeper than 64",  # JSON text in a string is compared parsed
        ),
        (A.KIND_AGENT, {A.ERROR: "1"}, "agent:call", "an error must be an object"),
        (A.KIND_AGENT, {A.INPUT: nested(70)}, "agent:call", "input: nests deeper than 64"),
    ],
)
def test_a_malformed_recorded_value_makes_its_call_incomplete_and_the_bundle_valid(
    kind: str, values: dict[str, Any], label: str, problem: str
) -> None:
    root = recorded(0, None, A.KIND_AGENT, "root", **{A.INPUT: {"args": [], "kwargs": {}}})
    spans = [root, recorded(1, 0, kind, "call", **values)]
    if kind == A.KIND_AGENT:
        spans = [recorded(0, None, kind, "call", **values)]
    bundle = bundle_from_spans(spans)
    assert bundle is not None
    assert validate_bundle(bundle) == bundle
    (item,) = bundle["incomplete"]
    assert item["label"] == label
    assert problem in item["reason"] and "cannot be replayed" in item["reason"]
    assert not bundle["tools"] and not bundle["llm"]
    if kind == A.KIND_AGENT:
        assert set(bundle["agent"]) == {"name", "span_id", "ended_at"}  # left out, not malformed
