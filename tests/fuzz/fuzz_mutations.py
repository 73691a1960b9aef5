"""Mutations of seed inputs, as hypothesis strategies: structural ones that keep a JSON or
protobuf document readable but put hostile values into it (the edges of every integer range,
deep nesting, JSON text that is not what a field should hold), and byte-level ones."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _deep_text(depth: int) -> str:
    return "[" * depth + "]" * depth


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)

hostile_ints = st.sampled_from(
    [-1, 0, 2**31, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30]
)
hostile_strings = st.one_of(
    st.sampled_from(
        [
            "",
            "[]",
            "{}",
            "1",
            "[1]",
            "null",
            '{"type": "E"}',
            '{"type": 1, "message": 2}',
            '{"args": [], "kwargs": {}}',
            "[-1, 3]",
            str(2**64),
            " [[]]",
            "\n{}",
        ]
    ),
    st.integers(1, 300).map(_deep_text),
    st.text(max_size=30),
    json_values.map(lambda v: json.dumps(v)),
)
hostile_values = st.one_of(
    hostile_ints,
    hostile_strings,
    st.integers(1, 400).map(nested),
    json_values,
    st.floats(allow_nan=True, allow_infinity=True),
)


def _slots(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) of a JSON document, the document's own top level first."""
    slots: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            slots.append((node, key))
            if isinstance(value, (dict, list)):
                stack.append(value)
    return slots


@st.composite
def mutated_json(draw: st.DrawFn, seed: bytes) -> bytes:
    """``seed`` (JSON text) with a few of its values replaced, removed or repeated."""
    doc = orjson.loads(seed)
    for _ in range(draw(st.integers(1, 4))):
        slots = _slots(doc)
        if not slots:
            break
        container, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "replace", "replace", "remove", "repeat"]))
        if action == "replace":
            container[key] = draw(hostile_values)
        elif action == "remove":
            del container[key]
        elif isinstance(container, list):
            container.append(container[key])
        else:
            container[key + "_"] = container[key]
    # The standard library writes what orjson refuses: integers past 64 bits, any depth.
    return json.dumps(doc).encode()


@st.composite
def mutated_proto(draw: st.DrawFn, seed: bytes) -> bytes:
    """An OTLP/protobuf request with hostile span fields and attribute values."""
    request = ExportTraceServiceRequest.FromString(seed)
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    u64 = st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 1])
    for _ in range(draw(st.integers(1, 4))):
        span = draw(st.sampled_from(spans))
        action = draw(st.integers(0, 5))
        if action == 0:
            span.start_time_unix_nano = draw(u64)
            span.end_time_unix_nano = draw(u64)
        elif action == 1 and span.attributes:
            attribute = draw(st.sampled_from(list(span.attributes)))
            value = draw(hostile_strings | hostile_ints.filter(lambda n: -(2**63) <= n < 2**63))
            if isinstance(value, str):
                attribute.value.string_value = value
            else:
                attribute.value.int_value = value
        elif action == 2:
            span.parent_span_id = draw(
                st.sampled_from([s.span_id for s in spans] + [b"", b"\x01" * 8])
            )
        elif action == 3:
            span.span_id = draw(st.sampled_from([s.span_id for s in spans] + [bytes(8), b"\x02"]))
        elif action == 4:
            request.resource_spans[0].scope_spans[0].spans.add().CopyFrom(span)
        else:
            span.trace_id = draw(st.sampled_from([bytes(16), b"\x03" * 16, b"\x04"]))
    return request.SerializeToString()


@st.composite
def mutated_bytes(draw: st.DrawFn, seed: bytes) -> bytes:
    """``seed`` with bytes flipped, inserted, removed or cut off."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        action = draw(st.integers(0, 3))
        if action == 0:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif action == 1:
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif action == 2:
            del data[at : at + draw(st.integers(1, 16))]
        else:
            del data[at:]
    return bytes(data)


def mutations(target: str, seed: bytes) -> st.SearchStrategy[bytes]:
    """The mutations that fit a seed of ``target``."""
    if target == "otlp-proto":
        return mutated_proto(seed) | mutated_bytes(seed)
    return mutated_json(seed) | mutated_bytes(seed)
