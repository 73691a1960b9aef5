"""Spans → fixture bundle. The one extractor, used in-process and by the server.

A bundle holds every tool and LLM call of one trace in trace order. A call nested inside
another recorded call is not an entry of its own: on replay the outer call is served and the
inner one never happens. Each recorded value carries its length and hash (``tracely.digest``);
a value the SDK truncated or evicted fails that check, and the call is listed under
``incomplete`` with the reason instead of being served wrong.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter
from typing import Any, Literal, cast

import orjson

from tracely_otel import _attributes as A
from tracely_otel._bundle import (
    FORMAT,
    AgentSection,
    Bundle,
    IncompleteItem,
    LLMEntry,
    ToolEntry,
    TraceSummary,
    entry_problem,
    field_problem,
    seal,
    text_within_limits,
)
from tracely_otel._foreign import FOREIGN_READERS, call_of, conversation_of
from tracely_otel._reads import ExtractedCall, NotReplayable, SpanReader
from tracely_otel._spans import SpanRecord, record_from_readable

logger = logging.getLogger("tracely.otel")


def value_digest(text: str) -> list[Any]:
    """``[length, crc32]`` of an attribute value, as ``tracely.digest`` records it.

    This guards against values the SDK cut short or dropped, not against forgery (the bundle
    checksum is a SHA-256); a CRC keeps the per-call cost negligible.
    """
    return [len(text), format(zlib.crc32(text.encode("utf-8", "surrogatepass")), "08x")]


def digest_item(key: str, text: str) -> str:
    """``"key":[length,"crc32"]``: one member of the ``tracely.digest`` JSON object.

    The same pair as :func:`value_digest`, written directly: the call seam adds one for every
    recorded value, and formatting is cheaper than building and serialising a dict.
    """
    crc = zlib.crc32(text.encode("utf-8", "surrogatepass"))
    # The same eight hex digits as format(crc, "08x"), at half the cost: no format spec to parse.
    return f'"{key}":[{len(text)},"{crc.to_bytes(4, "big").hex()}"]'


def _digest_matches(value: str, expected: Any, in_process: bool) -> bool:
    """Whether ``value`` is the one ``expected`` (its ``[length, crc32]``) was taken of: in
    process only its length can have changed; from the wire, the length decides before the
    hash is taken (a value cut short costs no CRC)."""
    if not isinstance(expected, list) or not expected or expected[0] != len(value):
        return False
    if in_process:
        return True
    crc = zlib.crc32(value.encode("utf-8", "surrogatepass"))
    return len(expected) == 2 and bool(expected[1] == crc.to_bytes(4, "big").hex())


class _Values:
    """A tracely span's recorded JSON values, parsed, and which of them may be past a recorded
    value's limits (``unsure``): the rest were cleared from their text as they were parsed, so
    the extractor neither encodes nor walks them again."""

    __slots__ = ("attributes", "problems", "unsure")

    def __init__(self, span: SpanRecord) -> None:
        self.attributes = span.attributes
        self.problems: list[str] = []
        self.unsure: list[str] = []

    def get(self, key: str) -> Any:
        raw = self.attributes.get(key)
        if raw is None:
            return _MISSING
        if not isinstance(raw, str):
            self.problems.append(f"{key} is not JSON text")
            return _MISSING
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            self.problems.append(f"{key} is not valid JSON (cut short?)")
            return _MISSING
        if not text_within_limits(raw):
            self.unsure.append(key)
        return value


_MISSING: Any = object()


def _check_digest(span: SpanRecord) -> str | None:
    """Why the span's recorded values cannot be trusted, or None when they check out.

    In process, the SDK's limits can only shorten or drop a value, so its length decides (and
    with no value length limit and nothing dropped there is nothing to check); a span that
    crossed the wire (a collector's processors may rewrite attributes) is hashed too.
    """
    if span.intact and span.in_process:
        return None
    attrs = span.attributes
    raw = attrs.get(A.DIGEST)
    if not isinstance(raw, str):
        if span.dropped_attributes_count:
            return (
                f"{span.dropped_attributes_count} attribute(s) were dropped by the span's "
                "attribute count limit, including the integrity digest; raise "
                "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"
            )
        return "the span has no integrity digest (tracely.digest); it was not recorded by tracely"
    try:
        digest = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return (
            "the integrity digest is not valid JSON: it was truncated, most likely by "
            "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT or OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT; unset "
            "or raise it and re-record"
        )
    if not isinstance(digest, dict):
        return "the integrity digest is malformed"
    for key, expected in digest.items():
        value = attrs.get(key)
        if value is None:
            return (
                f"{key} was recorded but is missing from the span (evicted by the attribute "
                "count limit; raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT)"
            )
        if not isinstance(value, str) or not _digest_matches(value, expected, span.in_process):
            length = len(value) if isinstance(value, str) else "?"
            return (
                f"{key} does not match its recorded length/hash ({length} chars, recorded "
                f"{expected[0] if isinstance(expected, list) and expected else '?'}): the "
                "value was truncated, most likely by OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT or "
                "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT; unset or raise it and re-record"
            )
    return None


_NAME_FALLBACK = {A.KIND_TOOL: A.GEN_AI_TOOL_NAME, A.KIND_LLM: A.GEN_AI_REQUEST_MODEL}


def _call_name(span: SpanRecord, kind: str) -> str:
    attrs = span.attributes
    name = attrs.get(A.NAME) or attrs.get(_NAME_FALLBACK.get(kind, A.GEN_AI_AGENT_NAME))
    if isinstance(name, str) and name:
        return name
    # Both evicted by the attribute count limit: the span name is "<operation> <name>".
    prefix = A.OPERATION_FOR_KIND.get(kind, "") + " "
    return span.name[len(prefix) :] if span.name.startswith(prefix) else span.name


def _usage(attrs: Mapping[str, Any]) -> list[int] | None:
    """``[input_tokens, output_tokens]`` when the span has both counts."""
    tokens_in = attrs.get(A.GEN_AI_USAGE_INPUT_TOKENS)
    tokens_out = attrs.get(A.GEN_AI_USAGE_OUTPUT_TOKENS)
    if type(tokens_in) is int and type(tokens_out) is int:
        return [tokens_in, tokens_out]
    return None


_MESSAGES_DIGESTED = f'"{A.GEN_AI_INPUT_MESSAGES}":'


def _input_as_messages(attrs: Mapping[str, Any]) -> bool:
    """Whether the call's recorded input is its ``gen_ai.input.messages``: the input was the
    conventions' messages, which content capture put on the span, so tracely wrote it there
    once (and digested it there) instead of again as ``tracely.input``."""
    digest = attrs.get(A.DIGEST)
    return isinstance(digest, str) and _MESSAGES_DIGESTED in digest


def read_tracely_span(span: SpanRecord) -> ExtractedCall | NotReplayable | None:
    """Read a tool or LLM call from a span tracely made."""
    attrs = span.attributes
    kind = attrs.get(A.KIND)
    if kind not in (A.KIND_TOOL, A.KIND_LLM):
        return None
    section = "tools" if kind == A.KIND_TOOL else "llm"
    name = _call_name(span, kind)
    problem = _check_digest(span)
    if problem is not None:
        return NotReplayable(section, name, problem)
    unserialisable = attrs.get(A.UNSERIALISABLE)
    values = _Values(span)
    entry: dict[str, Any] = {}
    error = values.get(A.ERROR)
    if error is not _MISSING:
        entry["error"] = error
    else:
        if unserialisable and A.OUTPUT in str(unserialisable):
            return NotReplayable(
                section,
                name,
                "its output could not be serialised to JSON when recorded; return JSON data, "
                "a pydantic model or a dataclass",
            )
        output = values.get(A.OUTPUT)
        if output is _MISSING:
            return NotReplayable(section, name, "the call ended without a recorded output")
        entry["output"] = output
        tag = attrs.get(A.OUTPUT_TYPE)
        if isinstance(tag, str):
            entry["output_type"] = tag
    key = A.ARGS if section == "tools" else A.INPUT
    recorded_in = values.get(key)
    if recorded_in is _MISSING and section == "llm" and _input_as_messages(attrs):
        recorded_in = values.get(A.GEN_AI_INPUT_MESSAGES)
    if recorded_in is not _MISSING:
        entry["args" if section == "tools" else "input"] = recorded_in
    if section == "llm":
        usage = _usage(attrs)
        if usage is None and A.USAGE in attrs:  # a span of an earlier tracely version
            usage = values.get(A.USAGE)
        if usage is not None and usage is not _MISSING:
            entry["usage"] = usage
        provider = attrs.get(A.PROVIDER)
        if isinstance(provider, str):
            entry["provider"] = provider
    if values.problems:
        return NotReplayable(section, name, "; ".join(values.problems))
    return ExtractedCall(section, name, entry, values_checked=not values.unsure)


# Readers for spans of other instrumentors register here (tracely's own reader comes first).
_READERS: list[SpanReader] = [read_tracely_span, *FOREIGN_READERS]


def register_reader(reader: SpanReader) -> None:
    """Add a reader for another instrumentor's LLM spans (idempotent)."""
    if reader not in _READERS:
        _READERS.append(reader)


def _read(span: SpanRecord) -> ExtractedCall | NotReplayable | None:
    for reader in _READERS:
        try:
            result = reader(span)
        except Exception:  # one broken reader must not cost the whole trace its recording
            logger.warning(
                "tracely: span reader %r failed on span %s", reader, span.span_id, exc_info=True
            )
            continue
        if isinstance(result, ExtractedCall):
            problem = entry_problem(result.entry, result.kind, values=not result.values_checked)
            if problem is not None:  # never write an entry that replay would refuse
                return NotReplayable(
                    result.kind,
                    result.name,
                    f"a recorded value cannot be replayed: {problem}",
                    result.foreign,
                )
        if result is not None:
            return result
    return None


_AGENT_FIELDS: tuple[tuple[str, Literal["input", "output", "error"]], ...] = (
    (A.INPUT, "input"),
    (A.OUTPUT, "output"),
    (A.ERROR, "error"),
)


def _agent_section(span: SpanRecord, problems: list[IncompleteItem]) -> AgentSection:
    """The bundle's ``agent``; a recorded value replay would refuse is left out and added to
    ``problems`` as an incomplete item."""
    attrs = span.attributes
    agent: AgentSection = {
        "name": _call_name(span, A.KIND_AGENT),
        "span_id": span.span_id,
        "ended_at": span.end_time_unix_nano,
    }
    values = _Values(span)
    if _check_digest(span) is None:
        for key, field_name in _AGENT_FIELDS:
            value = values.get(key)
            # An error's shape is checked whatever its text; a value, only when its text
            # could not clear it.
            checked = value is _MISSING or (key != A.ERROR and key not in values.unsure)
            problem = None if checked else field_problem(field_name, value)
            if problem is not None:
                label = f"agent:{agent['name']}"
                reason = f"a recorded value cannot be replayed: {problem}"
                problems.append({"label": label, "span_id": span.span_id, "reason": reason})
            elif value is not _MISSING:
                agent[field_name] = value
        tag = attrs.get(A.OUTPUT_TYPE)
        if isinstance(tag, str) and "output" in agent:
            agent["output_type"] = tag
    return agent


_START_END = attrgetter("start_time_unix_nano", "end_time_unix_nano")


def _by_span_id(spans: Iterable[Any]) -> dict[str, SpanRecord]:
    """The spans as records, by span id, in the order they came."""
    records: dict[str, SpanRecord] = {}
    for span in spans:
        record = span if isinstance(span, SpanRecord) else record_from_readable(span)
        records[record.span_id] = record  # a duplicate delivery of a span is the same span
    return records


class _Nearest:
    """The nearest span, the span itself included, that ``marked`` says yes to, walking up.

    Memoised per span: asking about every span of a trace visits each span once, however deep
    the tree. A parent cycle (bad input) ends the walk: nothing above it counts.
    """

    __slots__ = ("_by_id", "_known", "_marked")

    def __init__(self, by_id: Mapping[str, SpanRecord], marked: Callable[[str], bool]) -> None:
        self._by_id = by_id
        self._marked = marked
        self._known: dict[str, str | None] = {}

    def __call__(self, span_id: str | None) -> str | None:
        known = self._known
        path: list[str] = []
        seen: set[str] = set()
        answer = None
        while span_id is not None:
            if span_id in known:
                answer = known[span_id]
                break
            if span_id in seen:
                break
            path.append(span_id)
            seen.add(span_id)
            if self._marked(span_id):
                answer = span_id
                break
            parent = self._by_id.get(span_id)
            span_id = parent.parent_span_id if parent is not None else None
        for visited in path:
            known[visited] = answer
        return answer


class _Inside:
    """Whether a span is, or is inside, a span ``marked`` says yes to (memoised as
    :class:`_Nearest` is)."""

    __slots__ = ("_nearest",)

    def __init__(self, by_id: Mapping[str, SpanRecord], marked: Callable[[str], bool]) -> None:
        self._nearest = _Nearest(by_id, marked)

    def __call__(self, span_id: str | None) -> bool:
        return self._nearest(span_id) is not None


def _ancestors_of(records: Iterable[SpanRecord], by_id: Mapping[str, SpanRecord]) -> set[str]:
    """The span ids above any of ``records``; each span is visited once, so the cost is
    linear in the spans however deep the tree (a parent cycle ends the walk)."""
    above: set[str] = set()
    for record in records:
        parent = record.parent_span_id
        while parent is not None and parent not in above and parent in by_id:
            above.add(parent)
            parent = by_id[parent].parent_span_id
    return above


def bundle_from_spans(spans: Iterable[Any]) -> Bundle | None:
    """Extract the fixture bundle of one trace from its finished spans.

    ``spans`` may be SDK ``ReadableSpan``s or :class:`SpanRecord`s. Returns None when the trace
    holds no agent run and no tool/LLM call of any instrumentor, unless its caller asked for it
    to be recorded (a ``tracely`` tracestate member). Raises ``ValueError`` for spans of
    several traces.
    """
    by_id = _by_span_id(spans)
    records = list(by_id.values())
    if not records:
        return None
    trace_ids = {r.trace_id for r in records}
    if len(trace_ids) > 1:
        raise ValueError(
            f"bundle_from_spans() takes the spans of one trace; got {len(trace_ids)} traces"
        )
    order = sorted(records, key=_START_END)

    # One pass reads each span for the bundle and for the trace summary alike.
    reads: dict[str, ExtractedCall | NotReplayable] = {}
    agents: list[SpanRecord] = []
    observed: dict[str, dict[str, Any]] = {}
    summary = _SummaryParts()
    errored = summary.errored
    services = summary.services
    resource: Any = None
    foreign_read = False
    for record in order:
        span_id = record.span_id
        conversation = conversation_of(record)
        if conversation is not None and summary.conversation is None:
            summary.conversation = conversation
        if record.resource is not resource:  # the spans of a trace mostly share one
            resource = record.resource
            service = resource.get("service.name")
            if isinstance(service, str):
                services.add(service)
        # A root: no parent, a remote one, or one that is not in the trace (an SDK that does
        # not flag a remote parent).
        if record.status_code == "ERROR" and (record.is_root or record.parent_span_id not in by_id):
            errored.add(record.name)
        result = None
        if record.attributes.get(A.KIND) == A.KIND_AGENT:
            agents.append(record)
        else:
            result = _read(record)
            if result is not None:
                reads[span_id] = result
                foreign_read = foreign_read or result.foreign
        call = call_of(record, result, conversation)
        if call is not None:
            observed[span_id] = call
            if call["by"] != "tracely":
                summary.foreign = True

    shadowed: set[str] = set()
    if foreign_read:
        # Another instrumentor's span around tracely's own span of the same call is the same
        # call.
        shadowed = {
            anc
            for anc in _ancestors_of(
                [by_id[sid] for sid, res in reads.items() if not res.foreign], by_id
            )
            if anc in reads and reads[anc].foreign
        }
        # So is one beside it: an instrumentor that does not make its span current.
        from tracely_otel._foreign import same_call_beside

        shadowed |= same_call_beside({k: v for k, v in reads.items() if k not in shadowed}, by_id)
    # The run is the first agent span with no agent span above it.
    agent_ids = {a.span_id for a in agents}
    in_agent = _Inside(by_id, agent_ids.__contains__)
    agent = next((a for a in agents if not in_agent(a.parent_span_id)), None)
    if shadowed:
        observed = {i: call for i, call in observed.items() if i not in shadowed}
    if agent is None and not reads and not observed and not _asked(records):
        return None

    bundle: Bundle = {"format": FORMAT, "trace_id": records[0].trace_id}
    service = (agent or order[0]).resource.get("service.name")
    if isinstance(service, str):
        bundle["service"] = service
    bundle["started_at"] = (agent or order[0]).start_time_unix_nano
    incomplete: list[IncompleteItem] = []
    if agent is not None:
        bundle["agent"] = _agent_section(agent, incomplete)
        mode = agent.attributes.get(A.REPLAY_MODE)
        if isinstance(mode, str):
            replay: dict[str, Any] = {"mode": mode}
            for key, name in ((A.CASE_ID, "case_id"), (A.CASE_VERSION, "case_version")):
                if key in agent.attributes:
                    replay[name] = agent.attributes[key]
            bundle["replay"] = replay
    tools: dict[str, list[ToolEntry]] = {}
    llm: dict[str, list[LLMEntry]] = {}
    # Whether a span is, or is inside, a call that is served whole on replay.
    in_call = _Inside(by_id, lambda span_id: span_id in reads and span_id not in shadowed)

    seq = 0
    seq_of: dict[str, int] = {}
    for record in order:
        result = reads.get(record.span_id)
        if result is None or record.span_id in shadowed:
            continue
        if in_call(record.parent_span_id):
            continue  # served as part of the enclosing call on replay
        seq += 1
        label = f"{result.kind}:{result.name}"
        if isinstance(result, NotReplayable):
            incomplete.append(
                {"label": label, "seq": seq, "span_id": record.span_id, "reason": result.reason}
            )
            continue
        seq_of[record.span_id] = seq
        # A reader's entry was checked against its kind's fields by _read.
        entry = {
            "seq": seq,
            **result.entry,
            "started_at": record.start_time_unix_nano,
            "ended_at": record.end_time_unix_nano,
        }
        if result.kind == "tools":
            tools.setdefault(result.name, []).append(cast(ToolEntry, entry))
        else:
            llm.setdefault(result.name, []).append(cast(LLMEntry, entry))
    bundle["tools"] = tools
    bundle["llm"] = llm
    if agent is not None:
        incomplete.extend(_lost_calls(agent.attributes, tools, llm, incomplete, seq))
    if incomplete:
        bundle["incomplete"] = incomplete
    bundle["trace"] = _summary(records, order, by_id, observed, reads, seq_of, summary)
    return seal(bundle)


def _asked(records: Iterable[SpanRecord]) -> bool:
    """Whether the trace's caller asked for it to be recorded (a ``tracely`` tracestate
    member, which ``tracely scenarios`` sends with each turn), calls or not."""
    for record in records:
        if record.trace_state and any(
            member.split("=", 1)[0].strip() == A.TRACESTATE_KEY
            for member in record.trace_state.split(",")
        ):
            return True
    return False


class _SummaryParts:
    """What the trace summary gathers from every span, gathered as the spans are read."""

    __slots__ = ("conversation", "errored", "foreign", "services")

    def __init__(self) -> None:
        self.conversation: str | None = None  # the first span's in trace order that has one
        self.errored: set[str] = set()  # names of the root spans that failed
        self.foreign = False  # a call read from another instrumentor's span
        self.services: set[str] = set()


def _summary(
    records: list[SpanRecord],
    order: list[SpanRecord],
    by_id: Mapping[str, SpanRecord],
    observed: dict[str, dict[str, Any]],
    reads: Mapping[str, ExtractedCall | NotReplayable],
    seq_of: Mapping[str, int],
    parts: _SummaryParts,
) -> TraceSummary:
    """Every call of the trace, whoever recorded it, for checks that a call happened.

    A call that is an entry of the bundle names it by ``seq`` instead of repeating its values;
    another instrumentor's span around tracely's own span of the same tool is that call.
    """
    for kind in ("tool", "llm") if parts.foreign else ():
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
    # Calls in the order they started. Some SDKs (OpenTelemetry JS) stamp a start to the
    # millisecond only, so calls made within one share it: those keep the order the spans
    # arrived in, which is the order they ended, not the order of their end times, which such
    # an SDK computes from the coarse start.
    for record in sorted(
        (r for r in records if r.span_id in observed), key=attrgetter("start_time_unix_nano")
    ):
        call = observed[record.span_id]
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
    summary: TraceSummary = {
        "spans": len(records),
        "calls": calls,
        "errored": sorted(parts.errored),
    }
    if parts.services:
        summary["services"] = sorted(parts.services)
    if parts.conversation is not None:
        summary["conversation"] = parts.conversation
    return summary


def _lost_calls(
    agent: Mapping[str, Any],
    tools: Mapping[str, list[Any]],
    llm: Mapping[str, list[Any]],
    incomplete: list[IncompleteItem],
    last_seq: int,
) -> list[IncompleteItem]:
    """What the root agent says its run called and the trace's spans do not hold.

    Spans get lost between a run and its recording: an export queue that is full, an exporter
    that fails, spans of one trace sent to several servers. Each kind of call missing is an
    ``incomplete`` item labelled with the kind (``tools`` / ``llm``) and the number missing.
    A span of an earlier version has no counts and is taken as it is; calls beyond the counts
    (other instrumentors' spans) are not a loss.
    """
    lost: list[IncompleteItem] = []
    for section, key, entries, what in (
        ("tools", A.CALLS_TOOLS, tools, "tool"),
        ("llm", A.CALLS_LLM, llm, "LLM"),
    ):
        made = agent.get(key)
        if not isinstance(made, int) or isinstance(made, bool):
            continue
        seen = sum(len(v) for v in entries.values())
        seen += sum(1 for i in incomplete if i["label"].startswith(section + ":"))
        if seen < made:
            lost.append(
                {
                    "label": section,
                    "missing": made - seen,
                    "reason": f"the run made {made} {what} call(s) but the trace holds "
                    f"{seen}: {made - seen} span(s) were lost on the way (a full export "
                    "queue, a failed exporter, or spans sent to another server); re-record "
                    "the case, or wait for the late spans to arrive",
                }
            )
    made = agent.get(A.CALLS_LAST_SEQ)
    if not lost and isinstance(made, int) and not isinstance(made, bool) and last_seq < made:
        lost.append(
            {
                "label": "calls",
                "missing": made - last_seq,
                "reason": f"the run's last call was call {made} but the trace holds "
                f"{last_seq}: {made - last_seq} span(s) were lost on the way",
            }
        )
    return lost
