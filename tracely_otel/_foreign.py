"""Readers for the LLM spans of other instrumentors: the calls tracely did not record itself.

An app that already runs another instrumentor records every LLM call without tracely's seam.
When that instrumentor captured the messages, the span is a recording like tracely's own and
the extractor turns it into an ``llm:`` entry. Four sources are read:

``otel-genai``
    The OpenTelemetry GenAI semantic conventions (the contrib instrumentations, and any
    library that follows them): ``gen_ai.operation.name`` ``chat`` / ``text_completion`` /
    ``generate_content``, the messages as ``gen_ai.input.messages`` /
    ``gen_ai.output.messages`` JSON (plus ``gen_ai.system_instructions``), or, in the older
    event-based form, as span events (``gen_ai.user.message`` ... ``gen_ai.choice``,
    ``gen_ai.client.inference.operation.details``, ``gen_ai.content.prompt``/``completion``).
    Content is on the span only with
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only`` (or ``span_and_event``);
    content sent only as log records (``event_only``) never reaches a trace.
``openllmetry``
    OpenLLMetry (Traceloop): its current releases write the GenAI JSON attributes, older ones
    flat attributes (``gen_ai.prompt.N.role/content/tool_calls.M.*``,
    ``gen_ai.completion.N.*``, ``llm.usage.*``, ``llm.request.type``). Content is captured
    unless ``TRACELOOP_TRACE_CONTENT=false``.
``openinference``
    OpenInference (Arize): ``openinference.span.kind`` ``LLM`` with
    ``llm.input_messages.N.message.*`` / ``llm.output_messages.N.message.*``,
    ``llm.model_name``, ``llm.token_count.*``. Content is captured unless one of the
    ``OPENINFERENCE_HIDE_*`` settings hides it.
``anthropic-sdk``
    The anthropic SDK's own ``anthropic.messages.create`` spans (scope
    ``com.anthropic.sdk.python``), made whenever a tracer provider is set. They carry the
    messages only with ``ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content`` (or the
    client's ``open_telemetry={"traces": {"content_mode": "content"}}``).

Whatever the source, an entry has one shape, so the provider replay code can build an SDK
response from it::

    {"input": [{"role": "user", "parts": [{"type": "text", "content": "..."}]}, ...],
     "output": {"messages": [{"role": "assistant", "parts": [...], "finish_reason": "stop"}],
                "model": "gpt-4o-2024-08-06", "id": "chatcmpl-..."},
     "output_type": "gen_ai.messages", "usage": [812, 96], "provider": "otel-genai"}

Parts are the conventions' ``text`` (``content``), ``tool_call`` (``id``, ``name``,
``arguments`` parsed from JSON text when it is JSON), ``tool_call_response`` (``id``,
``response``) and, kept as the source wrote them, any other part (``reasoning``, ``uri``,
...). System instructions recorded apart from the messages become a leading ``system``
message, and a message that only returns tool results has the role ``tool`` (Anthropic sends
them as ``user``), its text results as text (not text blocks): one form for one conversation,
whoever recorded it, which :func:`input_messages` also gives a replayed call's arguments so
that they compare. ``finish_reason`` is the conventions' value (``stop``, ``length``,
``content_filter``, ``tool_call``, ``error``) where the source's maps to one, else the
source's own; where none was recorded it is ``tool_call`` for a message that calls a tool and
``stop`` otherwise. The entry is named after the request model (what a replayed call asks
for), else the response model, else the span name.

A span that is an LLM call but cannot be served (content not captured, cut short, evicted by
the attribute count limit, or the call failed) is a :class:`NotReplayable` whose reason names
the setting to change; never a half entry. Tool spans of other instrumentors are not read:
their results are rarely captured, and a tool decorated with ``@tracely.observe`` is recorded
by tracely itself. Embeddings and every other non-LLM operation are not calls a bundle serves.

Every reader is a pure function of a :class:`SpanRecord` and never raises.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Union

import orjson

from tracely_otel import _attributes as A
from tracely_otel._extract import ExtractedCall, NotReplayable, SpanReader
from tracely_otel._redact import redact_value
from tracely_otel._spans import SpanRecord

__all__ = [
    "FOREIGN_READERS",
    "OUTPUT_TYPE",
    "input_messages",
    "read_anthropic_sdk_span",
    "read_genai_span",
    "read_openinference_span",
    "read_openllmetry_span",
    "same_call_beside",
]

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


# --------------------------------------------------------------------------------- parts


def _text_part(content: Any) -> dict[str, Any]:
    return {"type": "text", "content": _text(content)}


def _tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {
        "type": "tool_call",
        "id": _opt_str(call_id),
        "name": name if isinstance(name, str) else _text(name),
        "arguments": _arguments(arguments),
    }


def _tool_response(call_id: Any, response: Any) -> dict[str, Any]:
    return {
        "type": "tool_call_response",
        "id": _opt_str(call_id),
        "response": _response_value(_plain(response)),
    }


def _response_value(response: Any) -> Any:
    """A tool result in one form however the source kept it: text blocks become their text.

    The anthropic SDK writes a result given as text as a list of text blocks, the
    instrumentors as the text; without one form the same prompt would read as two.
    """
    if not isinstance(response, list) or not response:
        return response
    texts: list[str] = []
    for block in response:
        text = block.get("text", block.get("content")) if isinstance(block, dict) else None
        if not (isinstance(block, dict) and block.get("type") == "text" and isinstance(text, str)):
            return response
        texts.append(text)
    return "".join(texts)


def _block_part(block: Mapping[str, Any]) -> dict[str, Any]:
    """A part from a provider's own content block (OpenAI, Anthropic, Bedrock shapes)."""
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text") or (kind is None and "text" in block):
        return _text_part(block.get("text", block.get("content")))
    if kind in ("tool_use", "server_tool_use"):
        return _tool_call(block.get("id"), block.get("name"), block.get("input"))
    if kind == "tool_result":
        return _tool_response(block.get("tool_use_id"), block.get("content"))
    if kind in ("thinking", "reasoning"):
        return {"type": "reasoning", "content": _text(block.get("thinking", block.get("content")))}
    if kind == "image_url":
        image = block.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        return {"type": "uri", "modality": "image", "uri": _text(url)}
    if kind is None and isinstance(block.get("toolUse"), Mapping):
        use = block["toolUse"]
        return _tool_call(use.get("toolUseId"), use.get("name"), use.get("input"))
    if kind is None and isinstance(block.get("toolResult"), Mapping):
        result = block["toolResult"]
        return _tool_response(result.get("toolUseId"), result.get("content"))
    part = {str(k): _plain(v) for k, v in block.items()}
    part["type"] = kind if isinstance(kind, str) and kind else "unknown"
    return part


def _genai_part(part: Any) -> dict[str, Any]:
    """A part of a message in the conventions' shape (lenient about near misses)."""
    if not isinstance(part, Mapping):
        return _text_part(part)
    kind = part.get("type")
    if kind == "text":
        content = part.get("content")
        return _text_part(content if content is not None else part.get("text"))
    if kind == "tool_call":
        return _tool_call(part.get("id"), part.get("name"), part.get("arguments"))
    if kind == "tool_call_response":
        return _tool_response(part.get("id"), part.get("response"))
    if isinstance(kind, str) and kind and kind not in ("tool_use", "tool_result", "image_url"):
        return {str(k): _plain(v) for k, v in part.items()}
    return _block_part(part)


def _looks_like_blocks(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(b, Mapping)
            and (
                isinstance(b.get("type"), str) or "text" in b or "toolUse" in b or "toolResult" in b
            )
            for b in value
        )
    )


def _content_parts(content: Any, *, blocks_in_text: bool = False) -> list[dict[str, Any]]:
    """Parts from a message's ``content``: text, or a list of content blocks.

    ``blocks_in_text``: the source wrote a list of blocks as JSON text (flat attributes, span
    events), so text that parses as one is read as blocks.
    """
    if content is None:
        return []
    if isinstance(content, str):
        if blocks_in_text and content[:1] == "[":
            try:
                parsed = orjson.loads(content)
            except (orjson.JSONDecodeError, ValueError, TypeError):
                parsed = None
            if _looks_like_blocks(parsed):
                return [_block_part(b) for b in parsed]
        return [_text_part(content)]
    if isinstance(content, (list, tuple)):
        return [_block_part(b) if isinstance(b, Mapping) else _text_part(b) for b in content]
    if isinstance(content, Mapping):
        return [_block_part(content)]
    return [_text_part(content)]


def _openai_tool_calls(calls: Any) -> list[dict[str, Any]]:
    if isinstance(calls, str):
        try:
            calls = orjson.loads(calls)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            return []
    if not isinstance(calls, (list, tuple)):
        return []
    parts = []
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        function = function if isinstance(function, Mapping) else call
        parts.append(_tool_call(call.get("id"), function.get("name"), function.get("arguments")))
    return parts


def _add_tool_calls(parts: list[dict[str, Any]], calls: Iterable[dict[str, Any]]) -> None:
    """Append ``calls`` not already among ``parts`` (sources that record them twice)."""
    seen = {p.get("id") for p in parts if p.get("type") == "tool_call" and p.get("id")}
    for call in calls:
        if call["id"] is None or call["id"] not in seen:
            parts.append(call)
            seen.add(call["id"])


# --------------------------------------------------------------------------------- messages


def _message(raw: Any, key: str, *, output: bool) -> dict[str, Any]:
    """One message in the conventions' shape, from that shape or an OpenAI-like one."""
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            raw = {"content": raw}
    if not isinstance(raw, Mapping):
        raise _Unservable(f"not replayable: {key} holds a message that is not an object")
    role = _opt_str(raw.get("role")) or ("assistant" if output else "user")
    parts_raw = raw.get("parts")
    if isinstance(parts_raw, (list, tuple)):
        parts = [_genai_part(p) for p in parts_raw]
    elif role == "tool" and ("tool_call_id" in raw or "id" in raw):
        parts = [_tool_response(raw.get("tool_call_id", raw.get("id")), raw.get("content"))]
    else:
        parts = _content_parts(raw.get("content"), blocks_in_text=True)
        _add_tool_calls(parts, _openai_tool_calls(raw.get("tool_calls")))
    message: dict[str, Any] = {"role": role, "parts": parts}
    name = raw.get("name")
    if isinstance(name, str) and name:
        message["name"] = name
    if output:
        message["finish_reason"] = raw.get("finish_reason")
    return message


def _messages(raw: Any, key: str, *, output: bool) -> list[dict[str, Any]]:
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list):
        raise _Unservable(f"not replayable: {key} is not a list of messages")
    return [_message(m, key, output=output) for m in raw]


def _system_message(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    parts = [_genai_part(p) for p in raw] if isinstance(raw, list) else _content_parts(raw)
    return {"role": "system", "parts": parts} if parts else None


def _finish(messages: list[dict[str, Any]], reasons: Sequence[Any]) -> None:
    """Give every output message its finish reason, normalised to the conventions' values."""
    for i, message in enumerate(messages):
        reason = message.get("finish_reason")
        if not (isinstance(reason, str) and reason) and i < len(reasons):
            reason = reasons[i]
        if isinstance(reason, str) and reason:
            message["finish_reason"] = _FINISH_REASONS.get(reason.lower(), reason)
        else:
            calls = any(p.get("type") == "tool_call" for p in message["parts"])
            message["finish_reason"] = "tool_call" if calls else "stop"


def _reasons(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    return []


def _tool_roles(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages that only return tool results get the role ``tool``.

    Anthropic sends tool results in a ``user`` message; some sources keep that role and some
    write ``tool``. One role makes the same conversation one input, whoever recorded it.
    """
    for message in messages:
        parts = message["parts"]
        if parts and all(p.get("type") == "tool_call_response" for p in parts):
            message["role"] = "tool"
    return messages


def input_messages(messages: Any, system: Any = None) -> list[dict[str, Any]]:
    """A call's ``messages`` (and a ``system`` prompt given apart from them) in the one form
    the readers give an entry's ``input``.

    ``messages`` may be in the conventions' shape, OpenAI's or Anthropic's. A replayed call
    answered by an entry read from another instrumentor's span is compared with it in this
    form, so an unchanged prompt is not divergence and a changed one is. Raises ValueError
    for what is not a list of messages.
    """
    try:
        inputs = _messages(_plain(messages), "input", output=False)
        lead = _system_message(_plain(system))
    except _Unservable as exc:
        raise ValueError(exc.reason) from None
    if lead is not None and not (inputs and inputs[0]["role"] == "system"):
        inputs.insert(0, lead)
    return _tool_roles(inputs)


def _entry(
    source: _Source,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    *,
    model: Any,
    response_id: Any,
    usage: tuple[int | None, int | None],
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "input": _tool_roles(inputs),
        "output": {"messages": outputs, "model": _opt_str(model), "id": _opt_str(response_id)},
        "output_type": OUTPUT_TYPE,
    }
    if usage[0] is not None and usage[1] is not None:
        entry["usage"] = [usage[0], usage[1]]
    entry["provider"] = source.provider
    try:
        orjson.dumps(entry)
    except orjson.JSONEncodeError:
        safe: dict[str, Any] = _json_safe(entry)
        return safe
    return entry


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


# --------------------------------------------------------------------------------- GenAI conventions


_INPUT_EVENTS: Final = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _event_content(attrs: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in attrs:
            return attrs[key]
    return None


def _from_events(span: SpanRecord) -> tuple[Any, Any, Any] | None:
    """Messages from span events, in any of the forms the conventions have had.

    Returns raw (input, output, system instructions) lists for :func:`_messages`, or None
    when the span has no content events.
    """
    inputs: list[Any] = []
    outputs: list[Any] = []
    system: Any = None
    found = False
    for event in span.events:
        attrs = event.attributes
        if event.name == "gen_ai.client.inference.operation.details":
            if A.GEN_AI_INPUT_MESSAGES in attrs:
                inputs.extend(
                    _messages_list(attrs[A.GEN_AI_INPUT_MESSAGES], A.GEN_AI_INPUT_MESSAGES)
                )
                found = True
            if A.GEN_AI_OUTPUT_MESSAGES in attrs:
                outputs.extend(
                    _messages_list(attrs[A.GEN_AI_OUTPUT_MESSAGES], A.GEN_AI_OUTPUT_MESSAGES)
                )
                found = True
            if _SYSTEM_INSTRUCTIONS in attrs:
                system = _json_value(_SYSTEM_INSTRUCTIONS, attrs[_SYSTEM_INSTRUCTIONS])
        elif event.name in _INPUT_EVENTS:
            found = True
            role = _opt_str(attrs.get("role")) or _INPUT_EVENTS[event.name]
            content = _event_content(attrs, "content", "message.content", "gen_ai.prompt")
            if role == "tool":
                call_id = _event_content(attrs, "id", "tool_call_id", "gen_ai.tool.call.id")
                inputs.append({"role": role, "parts": [_tool_response(call_id, content)]})
                continue
            parts = _content_parts(content, blocks_in_text=True)
            _add_tool_calls(parts, _openai_tool_calls(attrs.get("tool_calls")))
            inputs.append({"role": role, "parts": parts})
        elif event.name == "gen_ai.choice":
            found = True
            outputs.append(_choice(attrs))
        elif event.name == "gen_ai.content.prompt" and "gen_ai.prompt" in attrs:
            found = True
            inputs.extend(_messages_list(attrs["gen_ai.prompt"], "gen_ai.prompt"))
        elif event.name == "gen_ai.content.completion" and "gen_ai.completion" in attrs:
            found = True
            outputs.extend(_messages_list(attrs["gen_ai.completion"], "gen_ai.completion"))
    if not found:
        return None
    return (inputs or None), (outputs or None), system


def _messages_list(value: Any, key: str) -> list[Any]:
    parsed = _json_value(key, value)
    if isinstance(parsed, Mapping):
        return [parsed]
    if isinstance(parsed, list):
        return parsed
    return [{"content": parsed}]


def _choice(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """A ``gen_ai.choice`` event as a raw output message."""
    message: Any = attrs.get("message")
    if isinstance(message, str) and message[:1] in ("{", "["):
        try:
            message = orjson.loads(message)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            pass
    if isinstance(message, Mapping):
        raw: dict[str, Any] = dict(message)
    elif message is not None:
        raw = {"content": message}
    else:
        raw = {
            "role": attrs.get("message.role"),
            "content": _event_content(attrs, "message.content", "content", "gen_ai.completion"),
            "tool_calls": _event_content(attrs, "message.tool_calls", "tool_calls"),
        }
    raw.setdefault("finish_reason", attrs.get("finish_reason"))
    return raw


def _genai_entry(span: SpanRecord, source: _Source) -> dict[str, Any]:
    attrs = span.attributes
    _check_failed(span, source)
    if source is _ANTHROPIC_SDK and attrs.get("anthropic.content.truncated") is True:
        raise _Unservable(
            "not replayable: the anthropic SDK cut its content to fit max_content_bytes (raise "
            "ANTHROPIC_OPEN_TELEMETRY_TRACES_MAX_CONTENT_BYTES, or the client's "
            'open_telemetry={"traces": {"max_content_bytes": ...}}, and re-record)'
        )
    raw_in: Any = None
    raw_out: Any = None
    raw_system: Any = None
    if A.GEN_AI_INPUT_MESSAGES in attrs:
        raw_in = _json_value(A.GEN_AI_INPUT_MESSAGES, attrs[A.GEN_AI_INPUT_MESSAGES])
    if A.GEN_AI_OUTPUT_MESSAGES in attrs:
        raw_out = _json_value(A.GEN_AI_OUTPUT_MESSAGES, attrs[A.GEN_AI_OUTPUT_MESSAGES])
    if _SYSTEM_INSTRUCTIONS in attrs:
        raw_system = _json_value(_SYSTEM_INSTRUCTIONS, attrs[_SYSTEM_INSTRUCTIONS])
    if raw_in is None and raw_out is None and span.events:
        from_events = _from_events(span)
        if from_events is not None:
            raw_in, raw_out, events_system = from_events
            raw_system = raw_system if raw_system is not None else events_system
    if raw_in is None and raw_out is None:
        raise _not_captured(source)
    if raw_out is None:
        if source is _ANTHROPIC_SDK and attrs.get("gen_ai.request.stream") is True:
            raise _Unservable(
                "not replayable: the output content was not captured (the anthropic SDK "
                "records a streamed reply's content only when it is read through "
                "messages.stream(...), not from messages.create(stream=True))"
            )
        raise _not_captured(source, "the output content")
    if raw_in is None:
        raise _not_captured(source, "the input content")
    inputs = _messages(raw_in, A.GEN_AI_INPUT_MESSAGES, output=False)
    outputs = _messages(raw_out, A.GEN_AI_OUTPUT_MESSAGES, output=True)
    system = _system_message(raw_system)
    if system is not None and not (inputs and inputs[0]["role"] == "system"):
        inputs.insert(0, system)
    if not outputs:
        raise _not_captured(source, "the output content")
    if not inputs:
        raise _not_captured(source, "the input content")
    reasons = _reasons(attrs.get(_GENAI_FINISH_REASONS))
    if not reasons and source is _ANTHROPIC_SDK:
        reasons = _reasons(attrs.get("anthropic.message.stop_reason"))
    _finish(outputs, reasons)
    return _entry(
        source,
        inputs,
        outputs,
        model=attrs.get(A.GEN_AI_RESPONSE_MODEL),
        response_id=attrs.get(A.GEN_AI_RESPONSE_ID),
        usage=(_tokens(attrs, _USAGE_IN), _tokens(attrs, _USAGE_OUT)),
    )


def _is_genai_llm(attrs: Mapping[str, Any]) -> bool:
    operation = attrs.get(A.GEN_AI_OPERATION_NAME)
    if operation is None:
        # No operation name: an LLM call only if it carries the messages themselves.
        return A.GEN_AI_INPUT_MESSAGES in attrs or A.GEN_AI_OUTPUT_MESSAGES in attrs
    return operation in _LLM_OPERATIONS


def _is_anthropic_sdk(span: SpanRecord) -> bool:
    return span.scope_name.startswith("com.anthropic.") or span.name.startswith(
        "anthropic.messages."
    )


def _is_openllmetry(span: SpanRecord) -> bool:
    attrs = span.attributes
    if any(key in attrs for key in _OPENLLMETRY_MARKERS):
        return True
    # OpenLLMetry names its spans "<vendor>.<operation>" ("openai.chat", "anthropic.chat");
    # the conventions name them "<operation> <model>".
    name = span.name
    return (
        span.scope_name.startswith("opentelemetry.instrumentation.")
        and "." in name
        and " " not in name
    )


def _model_names(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    return (
        attrs.get(A.GEN_AI_REQUEST_MODEL) or attrs.get("llm.request.model"),
        attrs.get(A.GEN_AI_RESPONSE_MODEL) or attrs.get("llm.response.model"),
    )


@_guarded
def read_genai_span(span: SpanRecord) -> Result:
    """An LLM call recorded by the GenAI semantic conventions (``provider: otel-genai``)."""
    attrs = span.attributes
    if _is_tracely(span) or _OI_KIND in attrs or not _is_genai_llm(attrs):
        return None
    if _is_anthropic_sdk(span) or _is_openllmetry(span):
        return None  # their own readers name their own settings
    name = _call_name(span, *_model_names(attrs))
    return _attempt(name, lambda: _genai_entry(span, _GENAI))


@_guarded
def read_anthropic_sdk_span(span: SpanRecord) -> Result:
    """An ``anthropic.messages.create`` span of the anthropic SDK (``provider: anthropic-sdk``)."""
    attrs = span.attributes
    if _is_tracely(span) or not _is_anthropic_sdk(span):
        return None
    # The SDK's other spans (count_tokens, batches, the tool runner and its tools, work
    # items) are not LLM calls a bundle serves.
    if span.name != "anthropic.messages.create" or not _is_genai_llm(attrs):
        return None
    name = _call_name(span, *_model_names(attrs))
    return _attempt(name, lambda: _genai_entry(span, _ANTHROPIC_SDK))


# --------------------------------------------------------------------------------- OpenLLMetry


_FLAT_PREFIXES: Final = ("gen_ai.prompt.", "gen_ai.completion.", "llm.prompts.", "llm.completions.")
_FLAT_KEY: Final = r"(gen_ai\.prompt|gen_ai\.completion|llm\.prompts|llm\.completions)\.(\d+)\.(.+)"
_SUB_KEY: Final = r"tool_calls\.(\d+)\.(.+)"


def _flat_groups(
    attrs: Mapping[str, Any],
) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    """``gen_ai.prompt.N.*`` and ``gen_ai.completion.N.*`` (or the older ``llm.prompts``)."""
    groups: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attrs.items():
        if not key.startswith(_FLAT_PREFIXES):
            continue
        match = re.fullmatch(_FLAT_KEY, key)
        if match is None:
            continue  # gen_ai.prompt.prompt_filter_results and the like
        family, digits, field = match.groups()
        groups.setdefault(family, {}).setdefault(_index(digits, key), {})[field] = value
    prompts = groups.get("gen_ai.prompt") or groups.get("llm.prompts") or {}
    completions = groups.get("gen_ai.completion") or groups.get("llm.completions") or {}
    return prompts, completions


def _flat_tool_calls(fields: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    calls: dict[int, dict[str, Any]] = {}
    for field, value in fields.items():
        match = re.fullmatch(_SUB_KEY, field)
        if match is not None:
            calls.setdefault(_index(match.group(1), key), {})[match.group(2)] = value
    return [
        _tool_call(c.get("id"), c.get("name"), c.get("arguments"))
        for c in _in_order(calls, f"tool call of {key}")
    ]


def _flat_message(fields: Mapping[str, Any], key: str, *, output: bool) -> dict[str, Any]:
    role = _opt_str(fields.get("role"))
    content = fields.get("content")
    if role is None and "user" in fields:  # a completions-API prompt: gen_ai.prompt.0.user
        role, content = "user", fields["user"]
    role = role or ("assistant" if output else "user")
    if role == "tool" and "tool_call_id" in fields:
        parts = [_tool_response(fields["tool_call_id"], content)]
    else:
        parts = _content_parts(_plain(content), blocks_in_text=True)
    if isinstance(fields.get("refusal"), str):
        parts.append({"type": "refusal", "content": fields["refusal"]})
    _add_tool_calls(parts, _flat_tool_calls(fields, key))
    message: dict[str, Any] = {"role": role, "parts": parts}
    if output:
        message["finish_reason"] = fields.get("finish_reason")
    return message


def _flat_outputs(completions: list[Mapping[str, Any]], key: str) -> list[dict[str, Any]]:
    """Completions, with a ``thinking`` one (Anthropic) as a reasoning part of the next.

    OpenLLMetry's anthropic instrumentation writes the reply's stop reason on the first
    completion, which is the thinking one when there is one.
    """
    outputs: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    carried: Any = None
    for fields in completions:
        if fields.get("role") == "thinking":
            thinking.append({"type": "reasoning", "content": _text(fields.get("content"))})
            carried = carried or fields.get("finish_reason")
            continue
        message = _flat_message(fields, key, output=True)
        message["parts"][:0] = thinking
        if not message.get("finish_reason"):
            message["finish_reason"] = carried
        thinking, carried = [], None
        outputs.append(message)
    if thinking:
        outputs.append({"role": "assistant", "parts": thinking, "finish_reason": carried})
    return outputs


def _flat_entry(span: SpanRecord) -> dict[str, Any]:
    """The flat attributes OpenLLMetry wrote before it adopted the JSON ones.

    As written by traceloop/openllmetry
    packages/opentelemetry-instrumentation-openai/.../shared/chat_wrappers.py
    (``_set_prompts``, ``_set_completions``), .../shared/__init__.py
    (``_set_response_attributes``) and
    packages/opentelemetry-instrumentation-anthropic/.../span_utils.py.
    """
    attrs = span.attributes
    _check_failed(span, _OPENLLMETRY)
    _check_dropped(span)
    prompts, completions = _flat_groups(attrs)
    if not prompts and not completions:
        raise _not_captured(_OPENLLMETRY)
    if not completions:
        raise _not_captured(_OPENLLMETRY, "the output content")
    if not prompts:
        raise _not_captured(_OPENLLMETRY, "the input content")
    inputs = [
        _flat_message(fields, "gen_ai.prompt", output=False)
        for fields in _in_order(prompts, "prompt message")
    ]
    outputs = _flat_outputs(_in_order(completions, "completion"), "gen_ai.completion")
    _finish(outputs, _reasons(attrs.get(_GENAI_FINISH_REASONS)))
    return _entry(
        _OPENLLMETRY,
        inputs,
        outputs,
        model=_model_names(attrs)[1],
        response_id=attrs.get(A.GEN_AI_RESPONSE_ID),
        usage=(_tokens(attrs, _USAGE_IN), _tokens(attrs, _USAGE_OUT)),
    )


@_guarded
def read_openllmetry_span(span: SpanRecord) -> Result:
    """An LLM call recorded by OpenLLMetry, in its JSON or its older flat attributes."""
    attrs = span.attributes
    if _is_tracely(span) or _OI_KIND in attrs or not _is_openllmetry(span):
        return None
    name = _call_name(span, *_model_names(attrs))
    if A.GEN_AI_OPERATION_NAME in attrs or A.GEN_AI_INPUT_MESSAGES in attrs:
        if not _is_genai_llm(attrs):
            return None
        return _attempt(name, lambda: _genai_entry(span, _OPENLLMETRY))
    request_type = attrs.get("llm.request.type")
    if request_type is not None and request_type not in ("chat", "completion"):
        return None  # embeddings, rerank
    if request_type is None and not any(k.startswith(_FLAT_PREFIXES) for k in attrs):
        return None  # a workflow or task span of OpenLLMetry's SDK, not an LLM call
    return _attempt(name, lambda: _flat_entry(span))


# --------------------------------------------------------------------------------- OpenInference


_OI_MESSAGE_KEY: Final = r"llm\.(input|output)_messages\.(\d+)\.message\.(.+)"
_OI_PROMPT_KEY: Final = r"llm\.(prompts|choices)\.(\d+)\.(?:prompt|completion)\.text"
_OI_CONTENTS_KEY: Final = r"contents\.(\d+)\.(.+)"
_OI_TOOL_CALL_KEY: Final = r"tool_calls\.(\d+)\.tool_call\.(.+)"
_OI_HIDE_INPUT_TEXT: Final = "OPENINFERENCE_HIDE_INPUT_TEXT=false (or leave it unset)"
_OI_HIDE_OUTPUT_TEXT: Final = "OPENINFERENCE_HIDE_OUTPUT_TEXT=false (or leave it unset)"


def _oi_sub(fields: Mapping[str, Any], pattern: str, what: str) -> list[dict[str, Any]]:
    items: dict[int, dict[str, Any]] = {}
    for field, value in fields.items():
        match = re.fullmatch(pattern, field)
        if match is not None:
            items.setdefault(_index(match.group(1), what), {})[match.group(2)] = value
    return _in_order(items, what)


def _oi_text(value: Any, *, output: bool) -> str:
    if value == _REDACTED:
        raise _not_captured(
            _OPENINFERENCE,
            "the output text" if output else "the input text",
            _OI_HIDE_OUTPUT_TEXT if output else _OI_HIDE_INPUT_TEXT,
        )
    return _text(value)


def _oi_message(fields: Mapping[str, Any], *, output: bool) -> dict[str, Any]:
    """One ``llm.*_messages.N.message.*`` group, as written by Arize-ai/openinference
    python/openinference-semantic-conventions (``MessageAttributes``,
    ``MessageContentAttributes``, ``ToolCallAttributes``)."""
    role = _opt_str(fields.get("role")) or ("assistant" if output else "user")
    parts: list[dict[str, Any]] = []
    content = fields.get("content")
    if role == "tool" and "tool_call_id" in fields:
        parts.append(_tool_response(fields["tool_call_id"], _oi_text(content, output=output)))
    elif content is not None:
        parts.append(_text_part(_oi_text(content, output=output)))
    block_calls: list[dict[str, Any]] = []
    for block in _oi_sub(fields, _OI_CONTENTS_KEY, "message content"):
        kind = block.get("message_content.type")
        if kind == "text":
            parts.append(_text_part(_oi_text(block.get("message_content.text"), output=output)))
        elif kind == "image":
            parts.append(
                {
                    "type": "uri",
                    "modality": "image",
                    "uri": _text(block.get("message_content.image.image.url")),
                }
            )
        elif "tool_call.function.name" in block:  # a tool_use block (OpenInference's anthropic)
            block_calls.append(
                _tool_call(
                    block.get("tool_call.id"),
                    block.get("tool_call.function.name"),
                    block.get("tool_call.function.arguments"),
                )
            )
        elif isinstance(kind, str) and kind:
            parts.append({"type": kind})
    calls = [
        _tool_call(c.get("id"), c.get("function.name"), c.get("function.arguments"))
        for c in _oi_sub(fields, _OI_TOOL_CALL_KEY, "tool call")
    ]
    if "function_call_name" in fields:  # the legacy function_call
        calls.append(
            _tool_call(
                None, fields["function_call_name"], fields.get("function_call_arguments_json")
            )
        )
    _add_tool_calls(parts, calls or block_calls)
    message: dict[str, Any] = {"role": role, "parts": parts}
    if isinstance(fields.get("name"), str) and fields["name"]:
        message["name"] = fields["name"]
    if output:
        message["finish_reason"] = None
    return message


def _oi_response_id(attrs: Mapping[str, Any]) -> str | None:
    """OpenInference keeps no response id attribute; the response body it records has one."""
    body = attrs.get("output.value")
    if attrs.get("output.mime_type") != "application/json" or not isinstance(body, str):
        return None
    if body[:1] != "{":
        return None
    try:
        parsed = orjson.loads(body)
    except (orjson.JSONDecodeError, ValueError, TypeError):
        return None
    return _opt_str(parsed.get("id")) if isinstance(parsed, dict) else None


def _oi_request_model(attrs: Mapping[str, Any]) -> Any:
    model = attrs.get("llm.request.model_name")
    if model:
        return model
    params = attrs.get("llm.invocation_parameters")
    if isinstance(params, str) and params[:1] == "{":
        try:
            parsed = orjson.loads(params)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("model"), str):
            return parsed["model"]
    return attrs.get("llm.model_name")


def _oi_entry(span: SpanRecord) -> dict[str, Any]:
    attrs = span.attributes
    _check_failed(span, _OPENINFERENCE)
    _check_dropped(span)
    groups: dict[str, dict[int, dict[str, Any]]] = {}
    prompts: dict[str, dict[int, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(("llm.input_messages.", "llm.output_messages.")):
            match = re.fullmatch(_OI_MESSAGE_KEY, key)
            if match is not None:
                side, digits, field = match.groups()
                groups.setdefault(side, {}).setdefault(_index(digits, key), {})[field] = value
        elif key.startswith(("llm.prompts.", "llm.choices.")):
            match = re.fullmatch(_OI_PROMPT_KEY, key)
            if match is not None:
                prompts.setdefault(match.group(1), {})[_index(match.group(2), key)] = value
    inputs = [
        _oi_message(f, output=False) for f in _in_order(groups.get("input", {}), "input message")
    ]
    outputs = [
        _oi_message(f, output=True) for f in _in_order(groups.get("output", {}), "output message")
    ]
    if not inputs:
        texts = _in_order(prompts.get("prompts", {}), "prompt")
        listed = attrs.get("llm.prompts")
        if not texts and isinstance(listed, (list, tuple)):
            texts = list(listed)
        inputs = [{"role": "user", "parts": [_text_part(_oi_text(t, output=False))]} for t in texts]
    if not outputs:
        outputs = [
            {
                "role": "assistant",
                "parts": [_text_part(_oi_text(t, output=True))],
                "finish_reason": None,
            }
            for t in _in_order(prompts.get("choices", {}), "choice")
        ]
    hidden_in = "OPENINFERENCE_HIDE_INPUTS=false and OPENINFERENCE_HIDE_INPUT_MESSAGES=false (or leave them unset)"
    hidden_out = "OPENINFERENCE_HIDE_OUTPUTS=false and OPENINFERENCE_HIDE_OUTPUT_MESSAGES=false (or leave them unset)"
    if not inputs and not outputs:
        raise _not_captured(_OPENINFERENCE)
    if not outputs:
        raise _not_captured(_OPENINFERENCE, "the output content", hidden_out)
    if not inputs:
        raise _not_captured(_OPENINFERENCE, "the input content", hidden_in)
    reasons = _reasons(attrs.get("llm.finish_reason"))
    # One reason stands for every output message; a list gives each its own.
    _finish(outputs, reasons * len(outputs) if len(reasons) == 1 else reasons)
    return _entry(
        _OPENINFERENCE,
        inputs,
        outputs,
        model=attrs.get("llm.response.model_name") or attrs.get("llm.model_name"),
        response_id=_oi_response_id(attrs),
        usage=(
            _tokens(attrs, ("llm.token_count.prompt",)),
            _tokens(attrs, ("llm.token_count.completion",)),
        ),
    )


@_guarded
def read_openinference_span(span: SpanRecord) -> Result:
    """An ``LLM`` span of OpenInference (``provider: openinference``).

    Its other span kinds (``TOOL``, ``CHAIN``, ``AGENT``, ``EMBEDDING``, ``RETRIEVER``, ...)
    are not LLM calls a bundle serves.
    """
    attrs = span.attributes
    if _is_tracely(span) or attrs.get(_OI_KIND) != "LLM":
        return None
    name = _call_name(span, _oi_request_model(attrs), attrs.get("llm.response.model_name"))
    return _attempt(name, lambda: _oi_entry(span))


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


FOREIGN_READERS: Final[tuple[SpanReader, ...]] = (
    read_anthropic_sdk_span,
    read_openinference_span,
    read_openllmetry_span,
    read_genai_span,
)
"""The readers, in the order the extractor tries them after tracely's own."""
