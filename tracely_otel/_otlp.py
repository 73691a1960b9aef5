"""Every wire format that traces arrive in, decoded once into :class:`SpanRecord` values.

The OTLP receiver of the server and ``tracely traces import`` both call into this module, so
there is exactly one decoder per format and the extractor only ever sees ``SpanRecord``s:

* OTLP/protobuf: an ``ExportTraceServiceRequest`` (``TracesData`` has the same wire layout, and so
  does the protobuf form of Tempo's trace response);
* OTLP/JSON: the JSON mapping of the same messages, as the OTLP specification defines it (hex
  ids, integer enums, 64-bit integers as strings, lowerCamelCase names), and also what other
  producers emit in practice (base64 ids as in protobuf's canonical JSON mapping, enum names,
  integers as numbers, snake_case names, the pre-1.0 ``instrumentationLibrarySpans`` layout);
* Jaeger's ``/api/v3/traces/{id}`` response (``{"result": {"resourceSpans": [...]}}``, one such
  document per streamed chunk), Tempo's ``/api/traces/{id}`` response (``{"batches": [...]}``)
  and ``/api/v2/traces/{id}`` response (``{"trace": {...}}``);
* JSON Lines as a collector's file exporter writes them (one request per line).

Every decoder raises :class:`OTLPDecodeError` (a ``ValueError``) for input that is not trace
data, with the path of the offending field in the message, and nothing else: hostile input can
neither recurse without bound, nor allocate without bound (:func:`gunzip_bounded`).

Attribute values follow what an SDK attribute can hold: ``kvlistValue`` becomes the JSON text
of the object, ``bytesValue`` its standard base64 text, an array a tuple (elements that carry
no value become ``None``), and an attribute that carries no value at all is left out.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple, TypeVar

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PBSpan

from tracely_otel._spans import AttributeValue, SpanEvent, SpanRecord

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "MAX_VALUE_DEPTH",
    "DecodedExport",
    "OTLPDecodeError",
    "PayloadTooLarge",
    "decode_any",
    "decode_export_request",
    "encode_records_otlp_json",
    "gunzip_bounded",
    "records_from_jaeger",
    "records_from_jsonl",
    "records_from_otlp_json",
    "records_from_otlp_proto",
    "records_from_tempo",
    "rejected_message",
]

MAX_VALUE_DEPTH: Final = 32
"""How deeply ``arrayValue``/``kvlistValue`` may nest inside one attribute value."""

DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 64 * 1024 * 1024
"""The bound :func:`decode_any` applies when it meets a gzip body."""

SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK: Final = 0x100
SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK: Final = 0x200
_REMOTE_BITS: Final = SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK

_KINDS: Final = ("INTERNAL", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
_KIND_COUNT: Final = len(_KINDS)
_KIND_NUMBERS: Final = {name: number for number, name in enumerate(_KINDS) if number}
_KIND_BY_NAME: Final = {
    "SPAN_KIND_UNSPECIFIED": 0,
    **{f"SPAN_KIND_{name}": number for name, number in _KIND_NUMBERS.items()},
    **_KIND_NUMBERS,
}
_STATUSES: Final = ("UNSET", "OK", "ERROR")
_STATUS_COUNT: Final = len(_STATUSES)
_STATUS_NUMBERS: Final = {name: number for number, name in enumerate(_STATUSES)}
_STATUS_BY_NAME: Final = {
    **{f"STATUS_CODE_{name}": number for name, number in _STATUS_NUMBERS.items()},
    **_STATUS_NUMBERS,
}

_U32: Final = 1 << 32
_U64: Final = 1 << 64
_I64: Final = 1 << 63
_ZERO_TRACE_ID: Final = bytes(16)
_ZERO_SPAN_ID: Final = bytes(8)
_MAX_TRACE_STATE: Final = 512  # what W3C Trace Context lets a tracestate hold
_INT_TEXT: Final = re.compile(r"-?[0-9]{1,20}")
_FLOAT_TEXT: Final = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SPECIAL_FLOATS: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_GZIP_MAGIC: Final = b"\x1f\x8b"
_BOM: Final = b"\xef\xbb\xbf"
_PROTOBUF_TYPES: Final = frozenset(
    {"application/x-protobuf", "application/protobuf", "application/vnd.google.protobuf"}
)
_JSONL_TYPES: Final = frozenset(
    {"application/jsonl", "application/x-ndjson", "application/x-jsonlines", "application/ndjson"}
)


class _Missing:
    """The value of an ``AnyValue`` that sets none of its fields."""

    __slots__ = ()


_MISSING: Final = _Missing()


# --------------------------------------------------------------------------------------------
# errors


class OTLPDecodeError(ValueError):
    """The payload is not trace data in any accepted format.

    ``path`` names the offending field (``resourceSpans[0].scopeSpans[1].spans[3] (span 'x')
    .traceId``), ``problem`` says what is wrong with it.
    """

    def __init__(self, problem: str, path: str = "") -> None:
        self.problem = problem
        self.path = path
        super().__init__(self._message())

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.problem, self.path))

    def _message(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"not valid OTLP trace data: {where}{self.problem}"

    def _within(self, segment: str, separator: str = ".") -> OTLPDecodeError:
        """Prefix the path with the field this error happened inside; returns ``self``."""
        if not self.path:
            self.path = segment
        elif self.path.startswith("[") and separator == ".":
            self.path = segment + self.path
        else:
            self.path = f"{segment}{separator}{self.path}"
        self.args = (self._message(),)
        return self


class PayloadTooLarge(OTLPDecodeError):
    """A compressed body expands past the allowed size; decoding stopped at the bound."""

    def __init__(self, limit: int, path: str = "gzip body") -> None:
        self.limit = limit
        super().__init__(f"decompresses to more than {limit} bytes (payload too large)", path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.limit, self.path))


class DecodedExport(NamedTuple):
    """An OTLP export request's spans, and the spans it refused one by one."""

    records: list[SpanRecord]
    rejected: int
    """How many spans were refused (the ``rejected_spans`` of a partial success)."""
    errors: list[str]
    """Why, one reason per refused span or group of spans, each with its path."""


class _Refused:
    """Where a decoder sets aside the spans it refuses while it keeps the rest."""

    __slots__ = ("count", "errors")

    def __init__(self) -> None:
        self.count = 0
        self.errors: list[str] = []

    def add(self, error: OTLPDecodeError, spans: int, *within: str) -> None:
        """Refuse ``spans`` span(s) for ``error``, found inside ``within`` (innermost first)."""
        if not spans:
            return
        for segment in within:
            error._within(segment)
        self.count += spans
        self.errors.append(f"{error.path}: {error.problem}" if error.path else error.problem)


_P = TypeVar("_P")
_R = TypeVar("_R")

_UNEXPECTED: Final = (
    TypeError,
    ValueError,
    KeyError,
    IndexError,
    AttributeError,
    OverflowError,
    RecursionError,
    UnicodeError,
)


def _guarded(fn: Callable[[_P], _R]) -> Callable[[_P], _R]:
    """Make sure a public decoder raises nothing but :class:`OTLPDecodeError` on bad input."""

    @functools.wraps(fn)
    def wrapper(payload: _P) -> _R:
        try:
            return fn(payload)
        except OTLPDecodeError:
            raise
        except _UNEXPECTED as error:  # a shape no check above foresaw: still bad input
            raise OTLPDecodeError(
                f"unexpected decoding failure ({type(error).__name__}: {error})"
            ) from error

    return wrapper


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    return type(value).__name__


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _span_segment(index: int, name: Any) -> str:
    if isinstance(name, str) and name:
        return f"spans[{index}] (span {_show(name)})"
    return f"spans[{index}]"


# --------------------------------------------------------------------------------------------
# gzip


def gunzip_bounded(data: bytes, max_bytes: int) -> bytes:
    """Decompress a gzip body (one or more members), refusing to produce more than ``max_bytes``.

    Decompression is streamed and stops as soon as the output passes the bound, so a gzip bomb
    costs at most ``max_bytes`` of memory before :class:`PayloadTooLarge` is raised. A truncated
    or corrupt stream raises :class:`OTLPDecodeError`.
    """
    if max_bytes < 0:
        raise ValueError("max_bytes must not be negative")
    out = bytearray()
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
    pending = bytes(data)
    try:
        while True:
            out += inflater.decompress(pending, max_bytes - len(out) + 1)
            if len(out) > max_bytes:
                raise PayloadTooLarge(max_bytes)
            if inflater.eof:
                rest = inflater.unused_data
                if not rest.strip(b"\x00"):  # zero padding after the last member is allowed
                    break
                inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
                pending = rest
                continue
            pending = inflater.unconsumed_tail
            if not pending:
                raise OTLPDecodeError("the gzip stream is truncated", "gzip body")
    except zlib.error as error:
        raise OTLPDecodeError(f"the gzip stream is corrupt ({error})", "gzip body") from None
    return bytes(out)


# --------------------------------------------------------------------------------------------
# protobuf


def _pb_value(value: AnyValue, depth: int, plain: bool) -> Any:
    """One ``AnyValue``: attribute form, or (``plain``) the JSON-able form used inside a kvlist."""
    which = value.WhichOneof("value")
    if which in _PB_SCALARS:
        return getattr(value, which)
    if which is None:
        return None if plain else _MISSING
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    if depth >= MAX_VALUE_DEPTH:
        raise OTLPDecodeError(f"values nest deeper than {MAX_VALUE_DEPTH} levels")
    if which == "array_value":
        items: list[Any] = []
        for index, item in enumerate(value.array_value.values):
            try:
                converted = _pb_value(item, depth + 1, plain)
            except OTLPDecodeError as error:
                raise error._within(f"arrayValue.values[{index}]") from None
            items.append(None if converted is _MISSING else converted)
        return items if plain else tuple(items)
    if which == "kvlist_value":
        obj: dict[str, Any] = {}
        for index, kv in enumerate(value.kvlist_value.values):
            try:
                obj[kv.key] = _pb_value(kv.value, depth + 1, True)
            except OTLPDecodeError as error:
                raise error._within(f"kvlistValue.values[{index}][{kv.key!r}]") from None
        return obj if plain else _json_text(obj)
    raise OTLPDecodeError(f"unknown AnyValue field {which!r}")


_PB_SCALARS: Final = frozenset({"string_value", "int_value", "bool_value", "double_value"})


_SHARED_KEYS: dict[str, str] = {}
_MAX_SHARED_KEYS: Final = 4096


def _pb_attributes(kvs: Iterable[KeyValue]) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    shared_keys = _SHARED_KEYS
    for kv in kvs:
        # The protobuf runtime makes a new str for every key it hands out, and the server holds
        # many spans with the same few keys: one str per distinct key saves a quarter of a
        # span's memory. Bounded, so that arbitrary keys cannot grow it (nor, unlike
        # sys.intern on some Pythons, make strings immortal).
        key = kv.key
        shared = shared_keys.get(key)
        if shared is not None:
            key = shared
        elif len(shared_keys) < _MAX_SHARED_KEYS:
            shared_keys[key] = key
        value = kv.value
        # A non-empty string_value can only mean the oneof holds a string (the common case by
        # far); reading it directly saves a WhichOneof call per attribute.
        text = value.string_value
        if text:
            out[key] = text
            continue
        which = value.WhichOneof("value")
        if which in _PB_SCALARS:
            out[key] = getattr(value, which)
        elif which is not None:
            try:
                out[key] = _pb_value(value, 1, False)
            except OTLPDecodeError as error:
                raise error._within(f"attributes[{key!r}]") from None
    return out


def _pb_id_error(value: bytes, size: int, what: str, field_name: str) -> OTLPDecodeError:
    if len(value) != size:
        return OTLPDecodeError(f"{what} has {len(value)} bytes, expected {size}", field_name)
    return OTLPDecodeError(f"{what} is all zeros, which is invalid", field_name)


def _pb_span(
    span: PBSpan,
    resource: Mapping[str, AttributeValue],
    scope: str,
    trace_ids: dict[bytes, str],
) -> SpanRecord:
    """One span; ``resource`` is shared by the spans of one ResourceSpans (read-only), and
    ``trace_ids`` holds the trace ids of the request already checked, as text."""
    # Each field read from a protobuf message is a lookup by name in C: every field is read
    # once, the optional ones (flags, events) only when they can matter.
    raw_trace_id = span.trace_id
    trace_id = trace_ids.get(raw_trace_id)
    if trace_id is None:
        if len(raw_trace_id) != 16 or raw_trace_id == _ZERO_TRACE_ID:
            raise _pb_id_error(raw_trace_id, 16, "trace id", "traceId")
        trace_id = trace_ids[raw_trace_id] = raw_trace_id.hex()
    span_id = span.span_id
    if len(span_id) != 8 or span_id == _ZERO_SPAN_ID:
        raise _pb_id_error(span_id, 8, "span id", "spanId")
    parent = span.parent_span_id
    parent_id: str | None = None
    remote = False
    if parent and parent != _ZERO_SPAN_ID:
        if len(parent) != 8:
            raise OTLPDecodeError(
                f"parent span id has {len(parent)} bytes, expected 8", "parentSpanId"
            )
        parent_id = parent.hex()
        remote = span.flags & _REMOTE_BITS == _REMOTE_BITS
    kind = span.kind
    if not 0 <= kind < _KIND_COUNT:
        raise OTLPDecodeError(f"unknown span kind {kind}", "kind")
    status = span.status
    code = status.code
    if not 0 <= code < _STATUS_COUNT:
        raise OTLPDecodeError(f"unknown status code {code}", "status.code")
    events: tuple[SpanEvent, ...] = ()
    pb_events = span.events
    if pb_events:
        converted: list[SpanEvent] = []
        for index, event in enumerate(pb_events):
            try:
                attrs = _pb_attributes(event.attributes)
            except OTLPDecodeError as error:
                raise error._within(f"events[{index}]") from None
            converted.append(SpanEvent(event.name, event.time_unix_nano, attrs))
        events = tuple(converted)
    trace_state = span.trace_state
    # positional, in SpanRecord's field order: keywords cost a name match per field
    return SpanRecord(
        trace_id,
        span_id.hex(),
        parent_id,
        span.name,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        _pb_attributes(span.attributes),
        _STATUSES[code],
        status.message,
        events,
        span.dropped_attributes_count,
        resource,
        scope,
        remote,
        _KINDS[kind],
        False,  # in_process
        False,  # intact
        trace_state[:_MAX_TRACE_STATE] if trace_state else "",
    )


def _pb_resource_spans(
    resource_spans: Iterable[ResourceSpans], refused: _Refused | None = None
) -> list[SpanRecord]:
    """The spans of a request; with ``refused``, a bad span (or a resource that cannot be
    read, with its spans) is set aside there instead of failing the whole request."""
    records: list[SpanRecord] = []
    append = records.append
    trace_ids: dict[bytes, str] = {}
    for r_index, rs in enumerate(resource_spans):
        try:
            try:
                # One dict per ResourceSpans, shared by its spans as the SDK shares a
                # Resource's attributes between the spans it makes.
                resource = _pb_attributes(rs.resource.attributes)
            except OTLPDecodeError as error:
                error._within("resource")
                if refused is None:
                    raise error from None
                count = sum(len(ss.spans) for ss in rs.scope_spans)
                refused.add(error, count, f"resourceSpans[{r_index}]")
                continue
            scope_spans: Iterable[ScopeSpans] = rs.scope_spans
            for s_index, ss in enumerate(scope_spans):
                try:
                    scope = ss.scope.name
                    for index, span in enumerate(ss.spans):
                        try:
                            append(_pb_span(span, resource, scope, trace_ids))
                        except OTLPDecodeError as error:
                            error._within(_span_segment(index, span.name))
                            if refused is None:
                                raise error from None
                            refused.add(
                                error, 1, f"scopeSpans[{s_index}]", f"resourceSpans[{r_index}]"
                            )
                except OTLPDecodeError as error:
                    raise error._within(f"scopeSpans[{s_index}]") from None
        except OTLPDecodeError as error:
            raise error._within(f"resourceSpans[{r_index}]") from None
    return records


def _parse_proto(body: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except Exception as error:  # DecodeError, and whatever else the parser may raise
        raise OTLPDecodeError(
            f"the protobuf ExportTraceServiceRequest cannot be parsed ({error})", "body"
        ) from None
    if body and not request.ListFields():
        raise OTLPDecodeError(
            "the protobuf message has none of ExportTraceServiceRequest's fields", "body"
        )
    return request


@_guarded
def records_from_otlp_proto(body: bytes) -> list[SpanRecord]:
    """Decode an OTLP/protobuf ``ExportTraceServiceRequest`` (or ``TracesData``) body."""
    if not isinstance(body, bytes):
        if not isinstance(body, (bytearray, memoryview)):
            raise OTLPDecodeError(f"expected protobuf bytes, got {_type_name(body)}", "body")
        body = bytes(body)
    return _pb_resource_spans(_parse_proto(body).resource_spans)


# --------------------------------------------------------------------------------------------
# JSON: scalars


def _json_text(obj: Any) -> str:
    return orjson.dumps(obj).decode("utf-8")


def _field(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _json_object(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OTLPDecodeError(f"expected an object, got {_type_name(value)}", what)
    return value


def _json_list(value: Any, what: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise OTLPDecodeError(f"expected an array, got {_type_name(value)}", what)
    return value


def _json_str(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise OTLPDecodeError(f"expected a string, got {_type_name(value)}", what)
    return value


def _json_int(value: Any, what: str, low: int, high: int) -> int:
    """A protobuf integer in the JSON mapping: a number, or a decimal string (64-bit fields)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise OTLPDecodeError("expected an integer, got a boolean", what)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        if not _INT_TEXT.fullmatch(value):
            raise OTLPDecodeError(f"{_show(value)} is not a decimal integer", what)
        number = int(value)
    elif isinstance(value, float):
        if not value.is_integer():
            raise OTLPDecodeError(f"{_show(value)} is not an integer", what)
        number = int(value)
    else:
        raise OTLPDecodeError(f"expected an integer, got {_type_name(value)}", what)
    if not low <= number < high:
        raise OTLPDecodeError(f"{number} is out of range", what)
    return number


def _json_enum(value: Any, what: str, by_name: Mapping[str, int], count: int) -> int:
    if isinstance(value, str) and not _INT_TEXT.fullmatch(value):
        number = by_name.get(value)
        if number is None:
            raise OTLPDecodeError(f"unknown enum value {_show(value)}", what)
        return number
    number = _json_int(value, what, 0, _U32)
    if number >= count:
        raise OTLPDecodeError(f"unknown enum value {number}", what)
    return number


def _json_double(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise OTLPDecodeError("expected a number, got a boolean", what)
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            raise OTLPDecodeError(f"{_show(value)} is out of range", what) from None
    if isinstance(value, str):
        special = _SPECIAL_FLOATS.get(value)
        if special is not None:
            return special
        if len(value) <= 400 and _FLOAT_TEXT.fullmatch(value):
            return float(value)
        raise OTLPDecodeError(f"{_show(value)} is not a number", what)
    raise OTLPDecodeError(f"expected a number, got {_type_name(value)}", what)


def _json_bytes(value: Any, what: str) -> bytes:
    """A ``bytes`` field in the JSON mapping: standard or URL-safe base64, padded or not."""
    if not isinstance(value, str):
        raise OTLPDecodeError(f"expected a base64 string, got {_type_name(value)}", what)
    text = value.translate(_URLSAFE) if ("-" in value or "_" in value) else value
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise OTLPDecodeError(f"{_show(value)} is not valid base64", what) from None


_URLSAFE: Final = str.maketrans("-_", "+/")


def _json_id(value: Any, size: int, what: str) -> bytes:
    """A trace or span id: hex (as OTLP/JSON defines it) or base64 (told apart by length)."""
    if not isinstance(value, str):
        raise OTLPDecodeError(f"expected an id string, got {_type_name(value)}", what)
    length = len(value)
    raw: bytes | None = None
    if length == 2 * size:
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = None
    elif length in (4 * ((size + 2) // 3), (4 * size + 2) // 3):  # padded / unpadded base64
        try:
            raw = _json_bytes(value, what)
        except OTLPDecodeError:
            raw = None
    if raw is None or len(raw) != size:
        raise OTLPDecodeError(
            f"{_show(value)} is neither {2 * size} hex characters nor base64 of {size} bytes",
            what,
        )
    return raw


# --------------------------------------------------------------------------------------------
# JSON: values and spans


def _json_array(value: Any, depth: int, plain: bool) -> Any:
    values = _json_list(_json_object(value, "arrayValue").get("values"), "arrayValue.values")
    items: list[Any] = []
    for index, item in enumerate(values):
        try:
            converted = _json_value(item, depth + 1, plain)
        except OTLPDecodeError as error:
            raise error._within(f"arrayValue.values[{index}]") from None
        items.append(None if converted is _MISSING else converted)
    return items if plain else tuple(items)


def _json_kvlist(value: Any, depth: int, plain: bool) -> Any:
    values = _json_list(_json_object(value, "kvlistValue").get("values"), "kvlistValue.values")
    obj: dict[str, Any] = {}
    for index, kv in enumerate(values):
        try:
            kv = _json_object(kv, "")
            key = _json_str(kv.get("key"), "key")
            try:
                converted = _json_value(kv.get("value"), depth + 1, True)
            except OTLPDecodeError as error:
                raise error._within(f"[{key!r}]") from None
            obj[key] = None if converted is _MISSING else converted
        except OTLPDecodeError as error:
            raise error._within(f"kvlistValue.values[{index}]") from None
    return obj if plain else _json_text(obj)


def _json_value(value: Any, depth: int, plain: bool) -> Any:
    """One JSON ``AnyValue``; :data:`_MISSING` when it sets no field."""
    if value is None:
        return _MISSING
    if not isinstance(value, Mapping):
        raise OTLPDecodeError(f"expected an AnyValue object, got {_type_name(value)}")
    result: Any = _MISSING
    seen: str | None = None
    for key, item in value.items():
        kind = _VALUE_FIELDS.get(key)
        if kind is None or item is None:
            continue  # unknown fields are ignored; null is an unset field
        if seen is not None:
            raise OTLPDecodeError(f"AnyValue sets both {seen} and {key}")
        seen = key
        if kind == "s":
            result = _json_str(item, key)
        elif kind == "i":
            result = _json_int(item, key, -_I64, _I64)
        elif kind == "b":
            if not isinstance(item, bool):
                raise OTLPDecodeError(f"expected true or false, got {_type_name(item)}", key)
            result = item
        elif kind == "d":
            result = _json_double(item, key)
        elif kind == "y":
            result = base64.b64encode(_json_bytes(item, key)).decode("ascii")
        elif depth >= MAX_VALUE_DEPTH:
            raise OTLPDecodeError(f"values nest deeper than {MAX_VALUE_DEPTH} levels")
        elif kind == "a":
            result = _json_array(item, depth, plain)
        else:
            result = _json_kvlist(item, depth, plain)
    return result


_VALUE_FIELDS: Final = {
    "stringValue": "s",
    "string_value": "s",
    "intValue": "i",
    "int_value": "i",
    "boolValue": "b",
    "bool_value": "b",
    "doubleValue": "d",
    "double_value": "d",
    "arrayValue": "a",
    "array_value": "a",
    "kvlistValue": "k",
    "kvlist_value": "k",
    "bytesValue": "y",
    "bytes_value": "y",
}


def _json_attributes(value: Any) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    for index, kv in enumerate(_json_list(value, "attributes")):
        if not isinstance(kv, Mapping):
            raise OTLPDecodeError(
                f"expected a KeyValue object, got {_type_name(kv)}", f"attributes[{index}]"
            )
        key = _json_str(kv.get("key"), f"attributes[{index}].key")
        try:
            converted = _json_value(kv.get("value"), 1, False)
        except OTLPDecodeError as error:
            raise error._within(f"attributes[{index}] ({_show(key)}).value") from None
        if converted is not _MISSING:
            out[key] = converted
    return out


def _json_span(
    span: Mapping[str, Any], resource: Mapping[str, AttributeValue], scope: str
) -> SpanRecord:
    trace_id = _json_id(_field(span, "traceId", "trace_id"), 16, "traceId")
    if trace_id == _ZERO_TRACE_ID:
        raise OTLPDecodeError("trace id is all zeros, which is invalid", "traceId")
    span_id = _json_id(_field(span, "spanId", "span_id"), 8, "spanId")
    if span_id == _ZERO_SPAN_ID:
        raise OTLPDecodeError("span id is all zeros, which is invalid", "spanId")
    parent_value = _field(span, "parentSpanId", "parent_span_id")
    parent_id: str | None = None
    if parent_value is not None and parent_value != "":
        parent = _json_id(parent_value, 8, "parentSpanId")
        if parent != _ZERO_SPAN_ID:
            parent_id = parent.hex()
    kind = _json_enum(span.get("kind"), "kind", _KIND_BY_NAME, len(_KINDS))
    status = _json_object(span.get("status"), "status")
    code = _json_enum(status.get("code"), "status.code", _STATUS_BY_NAME, len(_STATUSES))
    flags = _json_int(span.get("flags"), "flags", 0, _U32)
    events: list[SpanEvent] = []
    for index, event in enumerate(_json_list(span.get("events"), "events")):
        try:
            event = _json_object(event, "")
            events.append(
                SpanEvent(
                    _json_str(event.get("name"), "name"),
                    _json_int(
                        _field(event, "timeUnixNano", "time_unix_nano"), "timeUnixNano", 0, _U64
                    ),
                    _json_attributes(event.get("attributes")),
                )
            )
        except OTLPDecodeError as error:
            raise error._within(f"events[{index}]") from None
    return SpanRecord(
        trace_id=trace_id.hex(),
        span_id=span_id.hex(),
        parent_span_id=parent_id,
        name=_json_str(span.get("name"), "name"),
        start_time_unix_nano=_json_int(
            _field(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano", 0, _U64
        ),
        end_time_unix_nano=_json_int(
            _field(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano", 0, _U64
        ),
        attributes=_json_attributes(span.get("attributes")),
        status_code=_STATUSES[code],
        status_message=_json_str(status.get("message"), "status.message"),
        events=tuple(events),
        dropped_attributes_count=_json_int(
            _field(span, "droppedAttributesCount", "dropped_attributes_count"),
            "droppedAttributesCount",
            0,
            _U32,
        ),
        resource=resource,  # one dict per ResourceSpans, as in the protobuf decoder
        scope_name=scope,
        parent_is_remote=parent_id is not None and flags & _REMOTE_BITS == _REMOTE_BITS,
        kind=_KINDS[kind],
        trace_state=_json_str(_field(span, "traceState", "trace_state"), "traceState")[
            :_MAX_TRACE_STATE
        ],
    )


_SCOPE_SPANS_FIELDS: Final = (
    ("scopeSpans", "scope_spans"),
    ("instrumentationLibrarySpans", "instrumentation_library_spans"),  # OTLP before 1.0
)


_Refuse = Callable[[OTLPDecodeError, int], None]
"""Sets aside spans a JSON decoder refuses: the error and how many spans it costs."""


def _json_scope_spans(
    ss: Any, resource: Mapping[str, AttributeValue], refuse: _Refuse | None = None
) -> list[SpanRecord]:
    ss = _json_object(ss, "")
    spans = _json_list(ss.get("spans"), "spans")
    try:
        scope_value = ss.get("scope")
        label = "scope"
        if scope_value is None:
            label = "instrumentationLibrary"
            scope_value = _field(ss, "instrumentationLibrary", "instrumentation_library")
        scope = _json_str(_json_object(scope_value, label).get("name"), f"{label}.name")
    except OTLPDecodeError as bad_scope:
        if refuse is None:
            raise
        refuse(bad_scope, len(spans))
        return []
    records: list[SpanRecord] = []
    for index, span in enumerate(spans):
        if not isinstance(span, Mapping):
            problem = OTLPDecodeError(
                f"expected a Span object, got {_type_name(span)}", f"spans[{index}]"
            )
        else:
            try:
                records.append(_json_span(span, resource, scope))
                continue
            except OTLPDecodeError as error:
                problem = error._within(_span_segment(index, span.get("name")))
        if refuse is None:
            raise problem
        refuse(problem, 1)
    return records


def _json_resource(rs: Mapping[str, Any]) -> dict[str, AttributeValue]:
    resource_obj = _json_object(rs.get("resource"), "resource")
    try:
        return _json_attributes(resource_obj.get("attributes"))
    except OTLPDecodeError as error:
        raise error._within("resource") from None


def _json_span_count(rs: Mapping[str, Any]) -> int:
    """How many spans a ResourceSpans object holds, as far as its layout can be read."""
    count = 0
    for camel, snake in _SCOPE_SPANS_FIELDS:
        groups = _field(rs, camel, snake)
        for ss in groups if isinstance(groups, list) else ():
            spans = ss.get("spans") if isinstance(ss, Mapping) else None
            count += len(spans) if isinstance(spans, list) else 0
    return count


def _json_resource_spans(
    value: Any, field_name: str, refused: _Refused | None = None
) -> list[SpanRecord]:
    """The spans of ``resourceSpans`` (or Tempo's ``batches``); with ``refused``, a bad span
    (or a resource or scope that cannot be read, with its spans) is set aside there instead of
    failing the whole request."""
    records: list[SpanRecord] = []
    for r_index, rs in enumerate(_json_list(value, field_name)):
        try:
            rs = _json_object(rs, "")
            try:
                resource = _json_resource(rs)
            except OTLPDecodeError as error:
                if refused is None:
                    raise
                refused.add(error, _json_span_count(rs), f"{field_name}[{r_index}]")
                continue
            for camel, snake in _SCOPE_SPANS_FIELDS:
                groups = _field(rs, camel, snake)
                for s_index, ss in enumerate(_json_list(groups, camel)):
                    refuse: _Refuse | None = None
                    if refused is not None:
                        where = (f"{camel}[{s_index}]", f"{field_name}[{r_index}]")

                        def refuse(error: OTLPDecodeError, spans: int, where: Any = where) -> None:
                            refused.add(error, spans, *where)

                    try:
                        records.extend(_json_scope_spans(ss, resource, refuse))
                    except OTLPDecodeError as error:
                        raise error._within(f"{camel}[{s_index}]") from None
        except OTLPDecodeError as error:
            raise error._within(f"{field_name}[{r_index}]") from None
    return records


# --------------------------------------------------------------------------------------------
# JSON: documents


def _load_json(payload: bytes | str, what: str = "body") -> Any:
    if isinstance(payload, (bytearray, memoryview)):
        payload = bytes(payload)
    if isinstance(payload, bytes):
        if payload.startswith(_BOM):
            payload = payload[len(_BOM) :]
    elif isinstance(payload, str):
        payload = payload.removeprefix("\ufeff")
    else:
        raise OTLPDecodeError(f"expected JSON text, got {_type_name(payload)}", what)
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as error:
        raise OTLPDecodeError(f"invalid JSON ({error})", what) from None


def _document(payload: bytes | str | Mapping[str, Any], what: str = "body") -> Mapping[str, Any]:
    doc = payload if isinstance(payload, Mapping) else _load_json(payload, what)
    if not isinstance(doc, Mapping):
        raise OTLPDecodeError(f"expected a JSON object, got {_type_name(doc)}", what)
    return doc


def _wrong_shape(doc: Mapping[str, Any], expected: str) -> OTLPDecodeError:
    keys = ", ".join(sorted(map(str, doc))[:8])
    if "data" in doc and not any(k in doc for k in ("resourceSpans", "resource_spans")):
        hint = "; this looks like Jaeger's internal UI API (/api/traces), use /api/v3/traces/{id}"
    else:
        hint = ""
    return OTLPDecodeError(f"expected {expected}, found the fields {{{keys}}}{hint}")


def _otlp_doc(doc: Mapping[str, Any], refused: _Refused | None = None) -> list[SpanRecord]:
    if "resourceSpans" in doc or "resource_spans" in doc or not doc:
        field_name = "resourceSpans" if doc.get("resourceSpans") is not None else "resource_spans"
        return _json_resource_spans(doc.get(field_name), field_name, refused)
    raise _wrong_shape(doc, "an ExportTraceServiceRequest with resourceSpans")


def _jaeger_doc(doc: Mapping[str, Any]) -> list[SpanRecord]:
    if "result" in doc:
        result = doc["result"]
        if not isinstance(result, Mapping):
            raise OTLPDecodeError(f"expected an object, got {_type_name(result)}", "result")
        try:
            return _otlp_doc(result)
        except OTLPDecodeError as error:
            raise error._within("result") from None
    if "error" in doc:
        err = _json_object(doc["error"], "error")
        message = err.get("message", "")
        code = err.get("httpCode", err.get("http_code", err.get("code", "")))
        raise OTLPDecodeError(f"Jaeger answered with an error: {_show(message)} ({code})", "error")
    if set(doc) <= {"end"}:  # the end-of-stream marker of a streamed response
        return []
    if "resourceSpans" in doc or "resource_spans" in doc:  # older Jaeger: the bare TracesData
        return _otlp_doc(doc)
    raise _wrong_shape(doc, 'a Jaeger api/v3 response {"result": {"resourceSpans": [...]}}')


def _tempo_doc(doc: Mapping[str, Any]) -> list[SpanRecord]:
    if "batches" in doc:
        return _json_resource_spans(doc["batches"], "batches")
    if "trace" in doc:  # /api/v2/traces/{id}
        trace = doc["trace"]
        if not isinstance(trace, Mapping):
            raise OTLPDecodeError(f"expected an object, got {_type_name(trace)}", "trace")
        try:
            if "batches" in trace:
                return _json_resource_spans(trace["batches"], "batches")
            return _otlp_doc(trace)
        except OTLPDecodeError as error:
            raise error._within("trace") from None
    if "resourceSpans" in doc or "resource_spans" in doc or not doc:
        return _otlp_doc(doc)
    raise _wrong_shape(doc, 'a Tempo trace response {"batches": [...]}')


def _any_doc(doc: Mapping[str, Any]) -> list[SpanRecord]:
    if "result" in doc or "error" in doc or set(doc) == {"end"}:
        return _jaeger_doc(doc)
    if "batches" in doc or "trace" in doc:
        return _tempo_doc(doc)
    return _otlp_doc(doc)


def _split_lines(text: bytes | str) -> list[tuple[int, bytes | str]]:
    lines: list[bytes | str] = []
    if isinstance(text, str):
        lines.extend(text.split("\n"))
    else:
        lines.extend(text.split(b"\n"))
    return [(number, line) for number, line in enumerate(lines, 1) if line.strip()]


def _lines_records(
    text: bytes | str, per_doc: Callable[[Mapping[str, Any]], list[SpanRecord]]
) -> list[SpanRecord]:
    records: list[SpanRecord] = []
    for number, line in _split_lines(text):
        try:
            records.extend(per_doc(_document(line, "")))
        except OTLPDecodeError as error:
            raise error._within(f"line {number}", ": ") from None
    return records


def _as_text(payload: Any) -> bytes | str:
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    if isinstance(payload, (bytes, str)):
        return payload
    raise OTLPDecodeError(f"expected JSON text, got {_type_name(payload)}", "body")


@_guarded
def records_from_otlp_json(payload: bytes | str | Mapping[str, Any]) -> list[SpanRecord]:
    """Decode the OTLP/JSON mapping of an ``ExportTraceServiceRequest`` (or ``TracesData``)."""
    return _otlp_doc(_document(payload))


@_guarded
def _proto_export(body: bytes) -> DecodedExport:
    refused = _Refused()
    records = _pb_resource_spans(_parse_proto(body).resource_spans, refused)
    return DecodedExport(records, refused.count, refused.errors)


@_guarded
def _json_export(body: bytes) -> DecodedExport:
    refused = _Refused()
    records = _otlp_doc(_document(body), refused)
    return DecodedExport(records, refused.count, refused.errors)


def decode_export_request(body: bytes, encoding: str) -> DecodedExport:
    """Decode an OTLP/HTTP export request body (``encoding`` "proto" or "json"), refusing bad
    spans one by one as a partial success.

    A body that is not an export request at all raises :class:`OTLPDecodeError`. Within one, a
    span the decoder refuses (an invalid id, say) is counted in ``rejected`` with its reason
    and path, and a resource or scope that cannot be read refuses its spans; the other spans
    are returned. Each part of the request is decoded once, so the cost is linear in its size
    however many spans are refused.
    """
    if encoding == "proto":
        if not isinstance(body, bytes):
            raise OTLPDecodeError(f"expected protobuf bytes, got {_type_name(body)}", "body")
        return _proto_export(body)
    return _json_export(body)


@_guarded
def records_from_jaeger(payload: bytes | str | Mapping[str, Any]) -> list[SpanRecord]:
    """Decode Jaeger's ``/api/v3/traces/{id}`` (or ``/api/v3/traces``) response.

    The body is ``{"result": {"resourceSpans": [...]}}``; a streamed response holds one such
    document per line, and older Jaeger versions answer with the bare ``{"resourceSpans": ...}``.
    An ``{"error": {...}}`` answer raises :class:`OTLPDecodeError` carrying Jaeger's message.
    """
    if isinstance(payload, Mapping):
        return _jaeger_doc(payload)
    text = _as_text(payload)
    try:
        doc = _document(text)
    except OTLPDecodeError:
        if len(_split_lines(text)) < 2:
            raise
        return _lines_records(text, _jaeger_doc)
    return _jaeger_doc(doc)


@_guarded
def records_from_tempo(payload: bytes | str | Mapping[str, Any]) -> list[SpanRecord]:
    """Decode Tempo's ``/api/traces/{id}`` (``{"batches": [...]}``) or ``/api/v2/traces/{id}``
    (``{"trace": {...}}``) response; ids are base64 there, and older Tempo versions use the
    ``instrumentationLibrarySpans`` layout. A protobuf body (``Accept: application/protobuf``)
    has the wire layout of an ``ExportTraceServiceRequest`` and is decoded as one.
    """
    if isinstance(payload, Mapping):
        return _tempo_doc(payload)
    text = _as_text(payload)
    if isinstance(text, bytes) and _first_significant(text) not in (b"{", b"["):
        return _pb_resource_spans(_parse_proto(text).resource_spans)
    return _tempo_doc(_document(text))


@_guarded
def records_from_jsonl(text: bytes | str) -> list[SpanRecord]:
    """Decode JSON Lines as a collector's file exporter writes them: one OTLP/JSON
    ``ExportTraceServiceRequest`` per line (blank lines are skipped; a line may also be a Jaeger
    or Tempo response document). Errors name the line number.
    """
    return _lines_records(_as_text(text), _any_doc)


# --------------------------------------------------------------------------------------------
# sniffing


def _first_significant(data: bytes | str) -> bytes:
    if isinstance(data, str):
        stripped = data.lstrip("\ufeff \t\r\n")
        return stripped[:1].encode("utf-8", "replace")
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    return data.lstrip(b" \t\r\n")[:1]


def _decode_json_text(text: bytes | str) -> list[SpanRecord]:
    """One JSON document, or else JSON Lines."""
    try:
        doc = _document(text)
    except OTLPDecodeError:
        if len(_split_lines(text)) < 2:
            raise
        return _lines_records(text, _any_doc)
    return _any_doc(doc)


def rejected_message(errors: list[str], rejected: int) -> str:
    """The ``error_message`` of a partial success: the first few reasons, and how many."""
    shown = "; ".join(errors[:3])
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return f"{rejected} span(s) rejected: {shown}{more}"


@functools.lru_cache(maxsize=64)
def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def decode_any(
    payload: bytes | str,
    content_type: str | None = None,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> list[SpanRecord]:
    """Decode trace data in any accepted format, told by ``content_type`` or by the body itself.

    A gzip body is decompressed first (bounded by ``max_decompressed_bytes``). Then protobuf
    (``application/x-protobuf``), JSON Lines (``application/x-ndjson``, ``application/jsonl``),
    or JSON: an OTLP request, a Jaeger api/v3 or a Tempo response, one document or one per line.
    Without a telling content type, a body whose first significant byte is ``{`` is JSON, and
    anything else protobuf. Raises :class:`OTLPDecodeError` and nothing else for bad input.
    """
    try:
        return _decode_any(payload, content_type, max_decompressed_bytes)
    except OTLPDecodeError:
        raise
    except _UNEXPECTED as error:
        raise OTLPDecodeError(
            f"unexpected decoding failure ({type(error).__name__}: {error})"
        ) from error


def _decode_any(payload: bytes | str, content_type: str | None, max_bytes: int) -> list[SpanRecord]:
    if isinstance(payload, (bytearray, memoryview)):
        payload = bytes(payload)
    if not isinstance(payload, (bytes, str)):
        raise OTLPDecodeError(f"expected bytes or text, got {_type_name(payload)}", "body")
    if isinstance(payload, bytes) and payload.startswith(_GZIP_MAGIC):
        payload = gunzip_bounded(payload, max_bytes)
    media = _media_type(content_type) if content_type else ""
    if media in _PROTOBUF_TYPES:
        if isinstance(payload, str):
            raise OTLPDecodeError("a protobuf body was given as text", "body")
        return _pb_resource_spans(_parse_proto(payload).resource_spans)
    if media in _JSONL_TYPES:
        return _lines_records(payload, _any_doc)
    if not payload.strip():
        return []
    first = _first_significant(payload)
    if first == b"{":
        try:
            return _decode_json_text(payload)
        except OTLPDecodeError:
            # A protobuf request starts with 0x0a, a newline, and its length byte may be "{".
            if media or not isinstance(payload, bytes) or not payload.startswith(b"\n"):
                raise
            try:
                return _pb_resource_spans(_parse_proto(payload).resource_spans)
            except OTLPDecodeError:
                pass
            raise
    if isinstance(payload, str) or media.endswith("json") or first == b"[":
        raise OTLPDecodeError(
            "expected a JSON object (an OTLP request, a Jaeger or a Tempo response)", "body"
        )
    return _pb_resource_spans(_parse_proto(payload).resource_spans)


# --------------------------------------------------------------------------------------------
# encoding (the inverse, OTLP/JSON as the specification defines it)


def _encode_value(value: Any, depth: int = 1) -> dict[str, Any]:
    if depth > MAX_VALUE_DEPTH:
        raise ValueError(f"attribute values nest deeper than {MAX_VALUE_DEPTH} levels")
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, int):
        if not -_I64 <= value < _I64:
            raise ValueError(f"integer attribute value {value} does not fit in 64 bits")
        return {"intValue": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        return {
            "doubleValue": "NaN"
            if math.isnan(value)
            else ("Infinity" if value > 0 else "-Infinity")
        }
    if isinstance(value, (bytes, bytearray)):
        return {"bytesValue": base64.b64encode(value).decode("ascii")}
    if isinstance(value, Mapping):
        return {
            "kvlistValue": {
                "values": [
                    {"key": str(k), "value": _encode_value(v, depth + 1)} for k, v in value.items()
                ]
            }
        }
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_encode_value(v, depth + 1) for v in value]}}
    raise TypeError(f"cannot encode a {type(value).__name__} as an OTLP AnyValue")


def _encode_attributes(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _encode_value(value)} for key, value in attributes.items()]


def _resource_key(resource: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    # typed, so that {"a": 1} and {"a": True} (equal in Python) stay apart
    return tuple(sorted((str(k), type(v).__name__, repr(v)) for k, v in resource.items()))


def _encode_span(record: SpanRecord) -> dict[str, Any]:
    kind = _KIND_NUMBERS.get(record.kind)
    if kind is None:
        raise ValueError(f"span {record.span_id}: unknown span kind {record.kind!r}")
    code = _STATUS_NUMBERS.get(record.status_code)
    if code is None:
        raise ValueError(f"span {record.span_id}: unknown status code {record.status_code!r}")
    flags = SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
    if record.parent_is_remote:
        flags |= SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
    span: dict[str, Any] = {
        "traceId": record.trace_id,
        "spanId": record.span_id,
    }
    if record.parent_span_id:
        span["parentSpanId"] = record.parent_span_id
    span["flags"] = flags
    if record.trace_state:
        span["traceState"] = record.trace_state
    span["name"] = record.name
    span["kind"] = kind
    span["startTimeUnixNano"] = str(record.start_time_unix_nano)
    span["endTimeUnixNano"] = str(record.end_time_unix_nano)
    span["attributes"] = _encode_attributes(record.attributes)
    if record.dropped_attributes_count:
        span["droppedAttributesCount"] = record.dropped_attributes_count
    if record.events:
        span["events"] = [
            {
                "timeUnixNano": str(event.time_unix_nano),
                "name": event.name,
                "attributes": _encode_attributes(event.attributes),
            }
            for event in record.events
        ]
    status: dict[str, Any] = {}
    if code:
        status["code"] = code
    if record.status_message:
        status["message"] = record.status_message
    span["status"] = status
    return span


def encode_records_otlp_json(records: Sequence[SpanRecord]) -> dict[str, Any]:
    """Encode records as an OTLP/JSON ``ExportTraceServiceRequest`` mapping (hex ids, integer
    enums, 64-bit integers as strings). Consecutive records that share a resource and a scope
    share a ``ResourceSpans``/``ScopeSpans`` entry, so the order of the records is kept.
    """
    resource_spans: list[dict[str, Any]] = []
    resource_key: object = None
    scope_name: str | None = None
    scope_list: list[dict[str, Any]] = []
    spans: list[dict[str, Any]] = []
    for record in records:
        key = _resource_key(record.resource)
        if key != resource_key:
            resource_key = key
            scope_name = None
            scope_list = []
            resource_spans.append(
                {
                    "resource": {"attributes": _encode_attributes(record.resource)},
                    "scopeSpans": scope_list,
                }
            )
        if record.scope_name != scope_name:
            scope_name = record.scope_name
            spans = []
            scope_list.append({"scope": {"name": scope_name}, "spans": spans})
        spans.append(_encode_span(record))
    return {"resourceSpans": resource_spans}
