"""The OpenTelemetry GenAI conventions' spans (``otel-genai``) and the anthropic SDK's own (``anthropic-sdk``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from tracely_otel import _attributes as A
from tracely_otel._foreign._common import (
    _ANTHROPIC_SDK,
    _GENAI,
    _GENAI_FINISH_REASONS,
    _LLM_OPERATIONS,
    _OI_KIND,
    _OPENLLMETRY_MARKERS,
    _SYSTEM_INSTRUCTIONS,
    _USAGE_IN,
    _USAGE_OUT,
    Result,
    _attempt,
    _call_name,
    _check_failed,
    _guarded,
    _is_tracely,
    _json_value,
    _not_captured,
    _opt_str,
    _Source,
    _tokens,
    _Unservable,
)
from tracely_otel._foreign._messages import (
    _add_tool_calls,
    _content_parts,
    _entry,
    _finish,
    _messages,
    _openai_tool_calls,
    _reasons,
    _system_message,
    _tool_response,
)
from tracely_otel._spans import SpanRecord

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
