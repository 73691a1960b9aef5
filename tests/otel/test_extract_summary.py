"""The trace summary is gathered in the pass that reads the spans for the bundle: each span is
read once. It is the summary the two passes gave, which read every span a second time (its
call, its conversation, its service, whether it is a failed root), on any trace: tracely's own
spans, other instrumentors', spans of no call, nested and side by side, sharing start times."""

from __future__ import annotations

import json
from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracely_otel import _attributes as A
from tracely_otel import _extract, bundle_from_spans
from tracely_otel._extract import (
    _START_END,
    _ancestors_of,
    _by_span_id,
    _Inside,
    _Nearest,
    _read,
)
from tracely_otel._foreign import conversation_of, read_call, same_call_beside
from tracely_otel._reads import ExtractedCall, NotReplayable
from tracely_otel._spans import SpanRecord

_TRACE = "0" * 31 + "7"


def _two_pass_summary(spans: list[SpanRecord]) -> dict[str, Any]:
    """The summary as the extractor computed it in a second pass over the spans."""
    by_id = _by_span_id(spans)
    records = list(by_id.values())
    order = sorted(records, key=_START_END)
    reads: dict[str, ExtractedCall | NotReplayable] = {}
    for record in order:
        if record.attributes.get(A.KIND) == A.KIND_AGENT:
            continue
        result = _read(record)
        if result is not None:
            reads[record.span_id] = result
    shadowed: set[str] = set()
    if any(res.foreign for res in reads.values()):
        natives = [by_id[sid] for sid, res in reads.items() if not res.foreign]
        shadowed = {
            anc for anc in _ancestors_of(natives, by_id) if anc in reads and reads[anc].foreign
        }
        shadowed |= same_call_beside({k: v for k, v in reads.items() if k not in shadowed}, by_id)
    observed = {
        r.span_id: call
        for r in order
        if r.span_id not in shadowed and (call := read_call(r, reads.get(r.span_id))) is not None
    }
    in_call = _Inside(by_id, lambda span_id: span_id in reads and span_id not in shadowed)
    seq = 0
    seq_of: dict[str, int] = {}
    for record in order:
        result = reads.get(record.span_id)
        if result is None or record.span_id in shadowed or in_call(record.parent_span_id):
            continue
        seq += 1
        if isinstance(result, ExtractedCall):
            seq_of[record.span_id] = seq
    for kind in ("tool", "llm"):
        foreign = {i for i, c in observed.items() if c["kind"] == kind and c["by"] != "tracely"}
        if not foreign:
            continue
        outer_call = _Nearest(by_id, foreign.__contains__)
        for record in order:
            call = observed.get(record.span_id)
            if call is None or call["by"] != "tracely" or call["kind"] != kind:
                continue
            outer = outer_call(record.parent_span_id)
            if outer in observed and (kind == "llm" or observed[outer]["name"] == call["name"]):
                del observed[outer]
    calls: list[dict[str, Any]] = []
    for record in sorted(records, key=attrgetter("start_time_unix_nano")):
        call = observed.get(record.span_id)
        if call is None:
            continue
        result = reads.get(record.span_id)
        if record.span_id in seq_of:
            call["seq"] = seq_of[record.span_id]
            for key in ("args", "result", "input"):
                call.pop(key, None)
        elif isinstance(result, ExtractedCall):
            entry = result.entry
            if "args" in entry:
                call["args"] = entry["args"]
            if "output" in entry and result.kind == "tools":
                call["result"] = entry["output"]
            if "input" in entry:
                call["input"] = entry["input"]
            if "usage" in entry:
                call["usage"] = entry["usage"]
        calls.append(call)
    summary: dict[str, Any] = {
        "spans": len(records),
        "calls": calls,
        "errored": sorted(
            {
                r.name
                for r in records
                if r.status_code == "ERROR" and (r.is_root or r.parent_span_id not in by_id)
            }
        ),
    }
    services = sorted({s for r in records if isinstance(s := r.resource.get("service.name"), str)})
    if services:
        summary["services"] = services
    conversation = next((c for r in order if (c := conversation_of(r)) is not None), None)
    if conversation is not None:
        summary["conversation"] = conversation
    return summary


def _tracely(kind: str, name: str, value: Any, failed: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = {A.KIND: kind, A.NAME: name}
    if kind == A.KIND_AGENT:
        attrs[A.INPUT] = json.dumps({"args": [value], "kwargs": {}})
        attrs[A.CALLS_TOOLS] = 1
    else:
        attrs[A.ARGS if kind == A.KIND_TOOL else A.INPUT] = json.dumps(value)
        if kind == A.KIND_LLM:
            attrs[A.GEN_AI_USAGE_INPUT_TOKENS] = 3
            attrs[A.GEN_AI_USAGE_OUTPUT_TOKENS] = 4
    if failed:
        attrs[A.ERROR] = json.dumps({"type": "TimeoutError", "message": "slow"})
    else:
        attrs[A.OUTPUT] = json.dumps(value)
    return attrs


_MESSAGES = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])

# Spans of the other instrumentors, as they record a call (and spans of no call).
_FOREIGN: list[tuple[str, str, dict[str, Any]]] = [
    (
        "execute_tool get_weather",
        "opentelemetry.util.genai.handler",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            "gen_ai.tool.call.result": '{"temp": 21}',
        },
    ),
    (
        "chat gpt-4o",
        "opentelemetry.instrumentation.openai.v1",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 5,
            "gen_ai.usage.output_tokens": 2,
            "gen_ai.input.messages": _MESSAGES,
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "yo"}]}]
            ),
        },
    ),
    (
        "ChatCompletion",
        "openinference.instrumentation.openai",
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o",
            "llm.token_count.prompt": 1,
            "llm.token_count.completion": 1,
            "input.value": '{"messages": [{"role": "user", "content": "hi"}]}',
            "output.value": '{"id": "chatcmpl-1"}',
        },
    ),
    (
        "get_weather",
        "openinference.instrumentation.langchain",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "tool.parameters": '{"city": "Paris"}',
            "output.value": "sunny",
        },
    ),
    (
        "get_weather.tool",
        "opentelemetry.instrumentation.langchain",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "get_weather",
            "traceloop.entity.input": '{"args": [], "kwargs": {"city": "Paris"}}',
            "traceloop.entity.output": '"sunny"',
        },
    ),
    (
        "invoke_agent planner",
        "opentelemetry.util.genai.handler",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
    ),
    ("GET /weather", "opentelemetry.instrumentation.requests", {"http.method": "GET"}),
    ("handle request", "app", {}),
]


@st.composite
def _spans(draw: st.DrawFn) -> list[SpanRecord]:
    count = draw(st.integers(1, 9))
    spans: list[SpanRecord] = []
    for n in range(count):
        span_id = f"{n + 1:016x}"
        # A parent among the spans before, one not in the trace, or none.
        parent = draw(
            st.sampled_from([None, "00000000000000ff", *(s.span_id for s in spans)])
            if spans
            else st.sampled_from([None, "00000000000000ff"])
        )
        if draw(st.booleans()):
            kind = draw(st.sampled_from([A.KIND_AGENT, A.KIND_TOOL, A.KIND_LLM]))
            name = draw(st.sampled_from(["get_weather", "gpt-4o", "planner"]))
            value = draw(st.sampled_from([{"city": "Paris"}, [1, 2], "hi", None]))
            attrs = _tracely(kind, name, value, draw(st.booleans()))
            scope = "tracely_sdk"
            span_name = f"{A.OPERATION_FOR_KIND.get(kind, kind)} {name}"
        else:
            span_name, scope, base = draw(st.sampled_from(_FOREIGN))
            attrs = dict(base)
        conversation = draw(st.sampled_from([None, None, "conv-1", "conv-2"]))
        if conversation is not None:
            attrs[draw(st.sampled_from(["gen_ai.conversation.id", "session.id"]))] = conversation
        if draw(st.integers(0, 5)) == 0:
            attrs[A.ERROR_TYPE] = "ValueError"
        start = draw(st.integers(1, 4))  # ties: some SDKs stamp a start to the millisecond
        service = draw(st.sampled_from([None, "weather", "planner", 7]))
        spans.append(
            SpanRecord(
                trace_id=_TRACE,
                span_id=span_id,
                parent_span_id=parent,
                name=span_name,
                start_time_unix_nano=start,
                end_time_unix_nano=start + draw(st.integers(0, 3)),
                attributes=attrs,
                status_code=draw(st.sampled_from(["OK", "UNSET", "ERROR"])),
                resource={} if service is None else {"service.name": service},
                scope_name=scope,
                parent_is_remote=parent is not None and draw(st.booleans()),
                in_process=True,
                intact=True,
            )
        )
    return draw(st.permutations(spans))  # the order the spans arrived in


def _summary_of(spans: list[SpanRecord]) -> Mapping[str, Any] | None:
    bundle = bundle_from_spans(spans)
    return None if bundle is None else bundle["trace"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_spans())
def test_the_one_pass_summary_is_the_two_pass_summary(spans: list[SpanRecord]) -> None:
    summary = _summary_of(spans)
    if summary is not None:
        assert json.dumps(summary, sort_keys=False) == json.dumps(
            _two_pass_summary(spans), sort_keys=False
        )


def test_a_foreign_call_around_tracely_s_own_is_listed_once() -> None:
    tool = _tracely(A.KIND_TOOL, "get_weather", {"city": "Paris"}, False)
    outer_name, outer_scope, outer = _FOREIGN[0]
    spans = [
        SpanRecord(
            _TRACE, "00000000000000a1", None, outer_name, 1, 4, outer, scope_name=outer_scope
        ),
        SpanRecord(
            _TRACE,
            "00000000000000a2",
            "00000000000000a1",
            "execute_tool get_weather",
            2,
            3,
            tool,
            scope_name="tracely_sdk",
            resource={"service.name": "weather"},
            in_process=True,
            intact=True,
        ),
    ]
    summary = _summary_of(spans)
    assert summary is not None
    assert [(c["by"], c.get("seq")) for c in summary["calls"]] == [("tracely", 1)]
    assert summary == _two_pass_summary(spans)


def test_the_summary_reads_each_span_s_call_once(monkeypatch: Any) -> None:
    seen: list[str] = []
    call_of = _extract.call_of

    def counting(span: SpanRecord, *args: Any) -> Any:
        seen.append(span.span_id)
        return call_of(span, *args)

    monkeypatch.setattr(_extract, "call_of", counting)
    spans = [
        SpanRecord(_TRACE, f"{n:016x}", None if n == 1 else f"{1:016x}", name, n, n + 1, attrs)
        for n, (name, _scope, attrs) in enumerate(_FOREIGN, start=1)
    ]
    bundle_from_spans(spans)
    assert sorted(seen) == sorted(s.span_id for s in spans)
