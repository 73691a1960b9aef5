"""What every reader of another instrumentor's spans uses: the sources, the errors that say why a call cannot be served, and reading values."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Union

import orjson

from tracely_otel import _attributes as A
from tracely_otel._reads import ExtractedCall, NotReplayable, SpanReader
from tracely_otel._redact import redact_value
from tracely_otel._spans import SpanRecord

OUTPUT_TYPE: Final = "gen_ai.messages"
"""The ``output_type`` of an entry read from another instrumentor's span."""

Result = Union[ExtractedCall, NotReplayable, None]

_MAX_INDEX_DIGITS: Final = 6  # a conversation of a million messages is not a real span
_MAX_DEPTH: Final = 128
_REDACTED: Final = "__REDACTED__"  # what OpenInference writes for hidden text
_INT_MIN: Final = -(2**63)  # the integers JSON tooling (and OTLP) carries
_INT_MAX: Final = 2**63 - 1

_LLM_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})
_FINISH_REASONS: Final = {
    "stop": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "safety": "content_filter",
    "tool_call": "tool_call",
    "tool_calls": "tool_call",
    "tool_use": "tool_call",
    "function_call": "tool_call",
    "error": "error",
}


def genai_finish_reason(reason: Any, default: str = "stop", *, unknown: str | None = None) -> str:
    """The conventions' ``finish_reason`` for an SDK's or a source's own (``end_turn`` is
    ``stop``); none is ``default``, and one the conventions do not name is ``unknown``, or
    stays as it is."""
    if not isinstance(reason, str) or not reason:
        return default
    return _FINISH_REASONS.get(reason.lower(), reason if unknown is None else unknown)


_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
_GENAI_FINISH_REASONS: Final = A.GEN_AI_RESPONSE_FINISH_REASONS
_USAGE_IN: Final = (
    A.GEN_AI_USAGE_INPUT_TOKENS,
    "gen_ai.usage.prompt_tokens",
    "llm.usage.prompt_tokens",
)
_USAGE_OUT: Final = (
    A.GEN_AI_USAGE_OUTPUT_TOKENS,
    "gen_ai.usage.completion_tokens",
    "llm.usage.completion_tokens",
)
_OPENLLMETRY_MARKERS: Final = (
    "llm.request.type",
    "llm.usage.total_tokens",
    "llm.is_streaming",
    "gen_ai.is_streaming",
    "gen_ai.openai.api_base",
)
_OI_KIND: Final = "openinference.span.kind"


class _Source:
    """An instrumentor, as an entry and the reasons people read name it."""

    __slots__ = ("label", "provider", "setting")

    def __init__(self, provider: str, label: str, setting: str) -> None:
        self.provider = provider  # the entry's "provider"
        self.label = label  # for the reasons people read
        self.setting = setting  # what makes the instrumentor put the messages on its spans


_GENAI: Final = _Source(
    "otel-genai",
    "the OpenTelemetry GenAI instrumentation",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only or span_and_event; content "
    "sent only as log events is not in the trace, and older instrumentations also need "
    "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental,",
)
_OPENLLMETRY: Final = _Source(
    "openllmetry",
    "OpenLLMetry",
    "TRACELOOP_TRACE_CONTENT=true, and leave use_attributes on so that content goes on the "
    "span rather than into log events,",
)
_OPENINFERENCE: Final = _Source(
    "openinference",
    "OpenInference",
    "OPENINFERENCE_HIDE_INPUTS=false, OPENINFERENCE_HIDE_OUTPUTS=false, "
    "OPENINFERENCE_HIDE_INPUT_MESSAGES=false and OPENINFERENCE_HIDE_OUTPUT_MESSAGES=false "
    "(or leave them unset)",
)
_ANTHROPIC_SDK: Final = _Source(
    "anthropic-sdk",
    "the anthropic SDK's own spans",
    "ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content (or the client's "
    'open_telemetry={"traces": {"content_mode": "content"}})',
)


class _Unservable(Exception):
    """The span is an LLM call that cannot be served; ``reason`` says what to change."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _not_captured(
    source: _Source, what: str = "content", setting: str | None = None
) -> _Unservable:
    return _Unservable(
        f"not replayable: {what} was not captured (set {setting or source.setting} "
        f"for {source.label})"
    )


def _guarded(read: Callable[[SpanRecord], Result]) -> SpanReader:
    """A reader that answers None, never an exception, for a span it cannot even inspect."""

    @functools.wraps(read)
    def reader(span: SpanRecord) -> Result:
        try:
            return read(span)
        except Exception:
            return None

    return reader


def _attempt(name: str, build: Callable[[], dict[str, Any]]) -> Result:
    """The call named ``name``: its entry, or why it cannot be served."""
    name = _json_safe(name)
    try:
        # Another instrumentor recorded the content as it was: the secrets in it go no further.
        entry, _ = redact_value(build())
        return ExtractedCall("llm", name, entry, foreign=True)
    except _Unservable as exc:
        reason = exc.reason
    except (RecursionError, MemoryError):
        reason = "not replayable: its messages are nested too deeply"
    except Exception as exc:
        reason = f"not replayable: its span could not be read ({type(exc).__name__})"
    return NotReplayable("llm", name, _json_safe(reason), foreign=True)


# --------------------------------------------------------------------------------- values


def _is_tracely(span: SpanRecord) -> bool:
    """tracely's own spans are read by tracely's reader (even one whose kind was evicted)."""
    return A.KIND in span.attributes or span.scope_name.startswith("tracely")


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return orjson.dumps(_plain(value)).decode()


def _plain(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON data (attribute tuples become lists, non-finite floats null)."""
    if depth > _MAX_DEPTH:
        raise _Unservable("not replayable: its messages are nested too deeply")
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return value if _INT_MIN <= value <= _INT_MAX else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    return str(value)


def _tokens(attrs: Mapping[str, Any], keys: Iterable[str]) -> int | None:
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and 0 <= value <= _INT_MAX:
            return value
        if isinstance(value, float) and value.is_integer() and 0 <= value <= _INT_MAX:
            return int(value)
    return None


def _json_value(key: str, value: Any) -> Any:
    """An attribute that holds JSON: text, or (from OTLP) an array of values or JSON texts."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            raise _Unservable(
                f"not replayable: {key} is not valid JSON (cut short? unset or raise "
                "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT / OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT and "
                "re-record)"
            ) from None
    if isinstance(value, (list, tuple)):
        items: list[Any] = []
        for item in value:
            if isinstance(item, str) and item[:1] in ("{", "["):
                try:
                    items.append(orjson.loads(item))
                    continue
                except (orjson.JSONDecodeError, ValueError, TypeError):
                    pass
            items.append(item)
        return items
    raise _Unservable(f"not replayable: {key} is not JSON text")


def _arguments(value: Any) -> Any:
    """Tool-call arguments, parsed when they are JSON text."""
    if isinstance(value, str):
        try:
            return _plain(orjson.loads(value))
        except (orjson.JSONDecodeError, ValueError, TypeError):
            return value
    return _plain(value)


def _index(digits: str, key: str) -> int:
    if len(digits) > _MAX_INDEX_DIGITS:
        raise _Unservable(f"not replayable: {key} has an index out of range")
    return int(digits)


def _in_order(items: Mapping[int, Any], what: str) -> list[Any]:
    """Indexed items in order; a missing index means attributes were lost."""
    order = sorted(items)
    if order != list(range(len(order))):
        missing = next(i for i, n in enumerate([*order, -1]) if i != n)
        raise _Unservable(
            f"not replayable: {what} {missing} is missing from the span (evicted by the "
            "attribute count limit? raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and re-record)"
        )
    return [items[i] for i in order]


def _check_dropped(span: SpanRecord) -> None:
    """Flat formats spread messages over many attributes; a dropped one loses content."""
    if span.dropped_attributes_count:
        raise _Unservable(
            f"not replayable: {span.dropped_attributes_count} attribute(s) were dropped by the "
            "span's attribute count limit, so its messages are incomplete (raise "
            "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and re-record)"
        )


def _check_failed(span: SpanRecord, source: _Source) -> None:
    if span.status_code == "ERROR":
        cause = span.attributes.get(A.ERROR_TYPE) or span.status_message or "an error"
        raise _Unservable(
            f"not replayable: the call failed ({_text(cause)[:200]}), and a span of "
            f"{source.label} does not record the error response; a failed call replays only "
            "from tracely's own recording of it"
        )


def _json_safe(value: Any) -> Any:
    """``value`` with what JSON cannot hold replaced: lone surrogates, too large integers."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool):
        return value if _INT_MIN <= value <= _INT_MAX else str(value)
    if isinstance(value, dict):
        return {_json_safe(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _call_name(span: SpanRecord, *models: Any) -> str:
    for model in models:
        if isinstance(model, str) and model:
            return model
    return span.name if isinstance(span.name, str) and span.name else "unknown"
