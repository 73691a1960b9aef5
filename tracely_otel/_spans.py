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
    return SpanRecord(
        trace_id=format(ctx.trace_id, "032x"),
        span_id=format(ctx.span_id, "016x"),
        parent_span_id=format(parent.span_id, "016x") if parent is not None else None,
        name=fields.get("_name") or span.name,
        start_time_unix_nano=(fields.get("_start_time") or span.start_time) or 0,
        end_time_unix_nano=(fields.get("_end_time") or span.end_time) or 0,
        attributes=_plain(attributes),
        status_code=_status_name(status.status_code),
        status_message=status.description or "",
        events=(
            tuple(SpanEvent(e.name, e.timestamp or 0, _plain(e.attributes)) for e in raw_events)
            if raw_events
            else ()
        ),
        dropped_attributes_count=getattr(attributes, "dropped", 0) or 0,
        resource=_plain(resource.attributes) if resource is not None else {},
        scope_name=scope.name if scope is not None else "",
        parent_is_remote=bool(parent is not None and parent.is_remote),
        kind=_status_name(kind) if kind is not None else "INTERNAL",
        in_process=True,
    )
