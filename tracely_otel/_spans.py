"""A finished span, independent of where it came from.

The extractor reads only :class:`SpanRecord`. The SDK's ``ReadableSpan``, OTLP protobuf, OTLP
JSON, Jaeger and Tempo payloads are each converted to it once, so there is one extractor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

AttributeValue = Union[str, bool, int, float, tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_unix_nano: int
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


@dataclass(slots=True)
class SpanRecord:
    """One finished span. Ids are lowercase hex (32 chars for a trace, 16 for a span).

    Treat it as read-only. It is not frozen because one is built for every finished span and a
    frozen dataclass costs several times more to construct.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_time_unix_nano: int
    end_time_unix_nano: int
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    status_code: str = "UNSET"  # "UNSET" | "OK" | "ERROR"
    status_message: str = ""
    events: tuple[SpanEvent, ...] = ()
    dropped_attributes_count: int = 0
    resource: Mapping[str, AttributeValue] = field(default_factory=dict)
    scope_name: str = ""
    parent_is_remote: bool = False
    kind: str = "INTERNAL"  # "INTERNAL" | "SERVER" | "CLIENT" | "PRODUCER" | "CONSUMER"
    # Where it was read from (this process's SDK, or decoded from the wire); not part of equality.
    in_process: bool = field(default=False, compare=False)
    # True when the SDK that made it could not have cut or dropped an attribute (no value length
    # limit, nothing dropped): its recorded values need no integrity check.
    intact: bool = field(default=False, compare=False)
    # The W3C tracestate the span was made with ("" for none): a trace a caller marked as one
    # to record (``tracely=...``) is recorded even when it holds no call.
    trace_state: str = ""

    @property
    def is_root(self) -> bool:
        """True for the first span of a trace in this process (no parent, or a remote one)."""
        return self.parent_span_id is None or self.parent_is_remote


def _status_name(code: Any) -> str:
    name = getattr(code, "name", None)
    return str(name) if name else "UNSET"


def _plain(attributes: Any) -> Mapping[str, Any]:
    """A finished span's attributes without copying them item by item.

    ``BoundedAttributes`` is a Python-level mapping with a lock; its backing dict is immutable
    once the span has ended, so reading it directly is safe and an order of magnitude cheaper.
    """
    if attributes is None:
        return {}
    backing = getattr(attributes, "_dict", None)
    return backing if isinstance(backing, dict) else dict(attributes)


# The last trace id and resource converted (the spans of one trace share both), each held as
# one tuple so that a thread reading it while another replaces it sees a consistent pair.
_trace_memo: tuple[int, str] = (-1, "")
_resource_memo: tuple[Any, Mapping[str, Any]] = (None, {})


def record_from_readable(span: Any) -> SpanRecord:
    """Convert an OpenTelemetry SDK ``ReadableSpan`` into a :class:`SpanRecord`."""
    # The SDK's public properties copy and wrap on every access; this runs once per finished
    # span, so read the (immutable once ended) fields directly, falling back to the properties
    # for span classes that do not have them.
    fields = getattr(span, "__dict__", {})
    ctx = fields.get("_context") or span.context
    parent = fields["_parent"] if "_parent" in fields else span.parent  # noqa: SIM401 (lazy)
    resource = fields.get("_resource") or getattr(span, "resource", None)
    scope = fields.get("_instrumentation_scope") or getattr(span, "instrumentation_scope", None)
    status = fields.get("_status") or span.status
    raw_events = fields["_events"] if "_events" in fields else span.events  # noqa: SIM401
    attributes = fields["_attributes"] if "_attributes" in fields else span.attributes  # noqa: SIM401
    kind = fields.get("_kind") or span.kind
    dropped = getattr(attributes, "dropped", 0) or 0
    global _trace_memo, _resource_memo
    trace_int = ctx.trace_id
    memo = _trace_memo
    if memo[0] == trace_int:
        trace_hex = memo[1]
    else:
        trace_hex = format(trace_int, "032x")
        _trace_memo = (trace_int, trace_hex)
    if resource is None:
        resource_plain: Mapping[str, Any] = {}
    else:
        known = _resource_memo
        if known[0] is resource:
            resource_plain = known[1]
        else:
            resource_plain = _plain(resource.attributes)
            _resource_memo = (resource, resource_plain)
    return SpanRecord(
        trace_hex,
        format(ctx.span_id, "016x"),
        format(parent.span_id, "016x") if parent is not None else None,
        fields.get("_name") or span.name,
        (fields.get("_start_time") or span.start_time) or 0,
        (fields.get("_end_time") or span.end_time) or 0,
        _plain(attributes),
        _status_name(status.status_code),
        status.description or "",
        (
            tuple(SpanEvent(e.name, e.timestamp or 0, _plain(e.attributes)) for e in raw_events)
            if raw_events
            else ()
        ),
        dropped,
        resource_plain,
        scope.name if scope is not None else "",
        parent is not None and parent.is_remote,
        _status_name(kind) if kind is not None else "INTERNAL",
        True,
        # intact: no value length limit, and the attribute object says nothing was dropped
        getattr(attributes, "max_value_len", 0) is None and getattr(attributes, "dropped", 1) == 0,
        ctx.trace_state.to_header() if ctx.trace_state else "",
    )
