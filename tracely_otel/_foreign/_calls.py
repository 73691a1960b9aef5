"""What a span says the service did, whoever made it: the calls Scenarios' trace checks read.

Replay needs a call it can serve; a check needs only to know that the call happened, with
what, and how it ended. :func:`read_call` reads that from a span of any of the instrumentors
the extractor knows, in any language:

``tracely``
    ``tracely.kind`` agent / tool / llm, with the recorded values.
``otel-genai``
    The GenAI conventions: ``gen_ai.operation.name`` ``execute_tool`` (``gen_ai.tool.name``,
    ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``), ``chat`` /
    ``generate_content`` / ``text_completion`` (``gen_ai.request.model``,
    ``gen_ai.usage.*``), ``invoke_agent`` / ``create_agent`` (``gen_ai.agent.name``,
    ``gen_ai.input.messages``).
``openinference``
    ``openinference.span.kind`` ``TOOL`` (``tool.name``, ``tool.parameters``,
    ``input.value``, ``output.value``), ``LLM`` (``llm.*``), ``AGENT``.
``openllmetry``
    ``traceloop.span.kind`` ``tool`` / ``agent`` (``traceloop.entity.name`` / ``.input`` /
    ``.output``), and its LLM spans.
``anthropic-sdk``
    The anthropic SDK's ``anthropic.messages.create``.

Whichever made it, a span that failed is a failed call: its status is ``ERROR``, or it has
``error.type``, or tracely recorded an error. The sources are told apart by the same tests
the LLM readers use (:mod:`._genai`, :mod:`._openinference`, :mod:`._openllmetry`), so a span
is the same kind of call for replay and for a check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from tracely_otel import _attributes as A
from tracely_otel._bundle import text_within_limits, value_problem
from tracely_otel._foreign._common import (
    _LLM_OPERATIONS,
    _OI_KIND,
    _USAGE_IN,
    _USAGE_OUT,
    _is_tracely,
    _json_safe,
    _opt_str,
    _plain,
    _tokens,
)
from tracely_otel._foreign._genai import _is_anthropic_sdk, _is_openllmetry, _model_names
from tracely_otel._foreign._openinference import _oi_request_model
from tracely_otel._reads import ExtractedCall, NotReplayable
from tracely_otel._redact import redact_value
from tracely_otel._spans import SpanRecord

__all__ = ["SOURCES", "call_of", "conversation_of", "read_call", "user_text"]

SOURCES: Final = ("tracely", "otel-genai", "openinference", "openllmetry", "anthropic-sdk")
"""Who made a span a call is read from, as a trace summary names them."""

_OI_KINDS: Final = {"TOOL": "tool", "LLM": "llm", "AGENT": "agent"}
_TRACELOOP_KIND: Final = "traceloop.span.kind"
_TRACELOOP_KINDS: Final = {"tool": "tool", "agent": "agent"}
_AGENT_OPERATIONS: Final = frozenset({A.OP_INVOKE_AGENT, "create_agent"})
_CONVERSATION_KEYS: Final = (
    "gen_ai.conversation.id",
    "session.id",
    "traceloop.association.properties.session_id",
)


def _json(value: Any) -> Any:
    """An attribute that may hold JSON text, parsed when it does and the parse is a value a
    bundle can hold (else the text itself: a call is never lost to its values)."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[", '"'):
            try:
                parsed = orjson.loads(stripped)
            except (orjson.JSONDecodeError, ValueError, TypeError):
                return value
            if text_within_limits(stripped) or value_problem(parsed) is None:
                return parsed
            return value
        return value
    return _plain(value)


def _name_after(span: SpanRecord, operation: str) -> str:
    prefix = operation + " "
    return span.name[len(prefix) :] if span.name.startswith(prefix) else span.name


def _error(span: SpanRecord) -> str | None:
    """Why the span's call failed (the error type where one was given), or None."""
    recorded = span.attributes.get(A.ERROR)
    if isinstance(recorded, str):
        parsed = _json(recorded)
        if isinstance(parsed, Mapping) and isinstance(parsed.get("type"), str):
            return str(parsed["type"])
        return "error"
    error_type = span.attributes.get(A.ERROR_TYPE)
    if isinstance(error_type, str) and error_type:
        return error_type
    if span.status_code == "ERROR":
        return span.status_message or "ERROR"
    return None


def _kind_and_source(span: SpanRecord) -> tuple[str, str] | None:
    attrs = span.attributes
    if _is_tracely(span):
        kind = attrs.get(A.KIND)
        return (kind, "tracely") if kind in (A.KIND_AGENT, A.KIND_TOOL, A.KIND_LLM) else None
    oi_kind = attrs.get(_OI_KIND)
    if oi_kind is not None:
        kind = _OI_KINDS.get(str(oi_kind).upper())
        return (kind, "openinference") if kind else None
    traceloop = attrs.get(_TRACELOOP_KIND)
    if isinstance(traceloop, str) and traceloop in _TRACELOOP_KINDS:
        return _TRACELOOP_KINDS[traceloop], "openllmetry"
    operation = attrs.get(A.GEN_AI_OPERATION_NAME)
    if operation == A.OP_EXECUTE_TOOL or (operation is None and A.GEN_AI_TOOL_NAME in attrs):
        return "tool", "openllmetry" if _is_openllmetry(span) else "otel-genai"
    if operation in _AGENT_OPERATIONS:
        return "agent", "openllmetry" if _is_openllmetry(span) else "otel-genai"
    llm = operation in _LLM_OPERATIONS or (
        operation is None
        and (A.GEN_AI_INPUT_MESSAGES in attrs or A.GEN_AI_OUTPUT_MESSAGES in attrs)
    )
    if _is_anthropic_sdk(span):
        return ("llm", "anthropic-sdk") if span.name == "anthropic.messages.create" else None
    if _is_openllmetry(span):
        request_type = attrs.get("llm.request.type")
        if llm or request_type in ("chat", "completion"):
            return "llm", "openllmetry"
        return None
    return ("llm", "otel-genai") if llm else None


def _tool(span: SpanRecord, source: str, call: dict[str, Any]) -> None:
    attrs = span.attributes
    if source == "tracely":
        return  # its values are the extractor's read of it
    if source == "openinference":
        name = attrs.get("tool.name")
        args = attrs.get("tool.parameters", attrs.get("input.value"))
        result = attrs.get("output.value")
    elif source == "openllmetry" and _TRACELOOP_KIND in attrs:
        name = attrs.get("traceloop.entity.name")
        args = _json(attrs.get("traceloop.entity.input"))
        # OpenLLMetry's decorators record {"args": [...], "kwargs": {...}}: the call's kwargs.
        if isinstance(args, Mapping) and set(args) <= {"args", "kwargs"} and not args.get("args"):
            args = args.get("kwargs")
        result = _json(attrs.get("traceloop.entity.output"))
        if isinstance(result, str):
            result = _json(result)
    else:
        name = attrs.get(A.GEN_AI_TOOL_NAME)
        args = attrs.get(A.GEN_AI_TOOL_CALL_ARGUMENTS)
        result = attrs.get(A.GEN_AI_TOOL_CALL_RESULT)
    call["name"] = _opt_str(name) or _name_after(span, A.OP_EXECUTE_TOOL)
    if args is not None:
        call["args"] = _json(args)
    if result is not None:
        call["result"] = _json(result)


def _agent(span: SpanRecord, source: str, call: dict[str, Any]) -> None:
    attrs = span.attributes
    if source == "tracely":
        for key, counted in ((A.CALLS_TOOLS, "tools"), (A.CALLS_LLM, "llm")):
            value = attrs.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                call.setdefault("counted", {})[counted] = value
        recorded = attrs.get(A.INPUT)
        if isinstance(recorded, str):
            call["input"] = _json(recorded)
        return
    if source == "openinference":
        name = attrs.get("agent.name")
        value = attrs.get("input.value")
    elif source == "openllmetry" and _TRACELOOP_KIND in attrs:
        name = attrs.get("traceloop.entity.name")
        value = attrs.get("traceloop.entity.input")
    else:
        name = attrs.get(A.GEN_AI_AGENT_NAME)
        value = attrs.get(A.GEN_AI_INPUT_MESSAGES)
    call["name"] = _opt_str(name) or _name_after(span, A.OP_INVOKE_AGENT)
    if value is not None:
        call["input"] = _json(value)


def _llm(
    span: SpanRecord, source: str, call: dict[str, Any], read: ExtractedCall | NotReplayable | None
) -> None:
    attrs = span.attributes
    if read is not None and read.kind == "llm":
        call["name"] = read.name
    elif source == "openinference":
        call["name"] = _opt_str(_oi_request_model(attrs)) or span.name
    else:
        request, response = _model_names(attrs)
        call["name"] = _opt_str(request) or _opt_str(response) or span.name
    if isinstance(read, ExtractedCall) and isinstance(read.entry.get("usage"), list):
        usage = tuple(read.entry["usage"])
    elif source == "openinference":
        usage = (
            _tokens(attrs, ("llm.token_count.prompt",)),
            _tokens(attrs, ("llm.token_count.completion",)),
        )
    else:
        usage = (_tokens(attrs, _USAGE_IN), _tokens(attrs, _USAGE_OUT))
    if usage[0] is not None and usage[1] is not None:
        call["usage"] = [usage[0], usage[1]]
    if isinstance(read, ExtractedCall) or source == "tracely":
        pass  # its input is the read's entry: the extractor names or copies it
    elif source == "openinference" and "input.value" in attrs:
        call["input"] = _json(attrs["input.value"])
    elif A.GEN_AI_INPUT_MESSAGES in attrs:
        call["input"] = _json(attrs[A.GEN_AI_INPUT_MESSAGES])


def read_call(
    span: SpanRecord, read: ExtractedCall | NotReplayable | None = None
) -> dict[str, Any] | None:
    """The call ``span`` records, as a trace summary lists it, or None for a span that is no
    agent run, tool call or LLM call. ``read`` is the extractor's read of the span, if any.

    ``{"kind": "tool", "name": ..., "by": "otel-genai", "span_id": ..., "args": ...,
    "result": ..., "error": "TimeoutError"}``; an LLM call has ``usage`` (``[input, output]``
    tokens) and ``input`` where recorded, an agent run its ``input``. Never raises.
    """
    try:
        conversation = conversation_of(span)
    except Exception:
        return None
    return call_of(span, read, conversation)


def call_of(
    span: SpanRecord, read: ExtractedCall | NotReplayable | None, conversation: str | None
) -> dict[str, Any] | None:
    """:func:`read_call`, given the span's :func:`conversation_of`: the extractor reads it
    once for the call and for the trace's conversation."""
    try:
        found = _kind_and_source(span)
        if found is None:
            return None
        kind, source = found
        call: dict[str, Any] = {"kind": kind, "name": span.name, "by": source}
        if kind == "tool":
            _tool(span, source, call)
        elif kind == "agent":
            _agent(span, source, call)
        else:
            _llm(span, source, call, read)
        if source == "tracely" and read is not None:
            call["name"] = read.name
        elif source == "tracely" and isinstance(span.attributes.get(A.NAME), str):
            call["name"] = span.attributes[A.NAME]
        error = _error(span)
        if error is not None:
            call["error"] = error
        if conversation is not None:
            call["conversation"] = conversation
        call["span_id"] = span.span_id
        if source == "tracely":
            # tracely redacted its values before they became attributes; a name or an input
            # from the wire may still hold what JSON cannot (an input orjson parsed cannot).
            call["name"] = _json_safe(call["name"])
            if isinstance(call.get("input"), str):
                call["input"] = _json_safe(call["input"])
            return call
        # Another instrumentor recorded the values as they were: the secrets in them go no
        # further.
        redacted, _ = redact_value(_plain(call))
        return dict(_json_safe(redacted))
    except Exception:
        return None


def conversation_of(span: SpanRecord) -> str | None:
    """The conversation (``gen_ai.conversation.id``, ``session.id``) a span belongs to."""
    for key in _CONVERSATION_KEYS:
        value = span.attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def user_text(messages: Any) -> str | None:
    """The text of the last user message of ``messages`` in any form a source records them
    (the conventions' parts, OpenAI's ``content``, a plain string), or None."""
    if isinstance(messages, str):
        return messages.strip() or None
    if isinstance(messages, Mapping):
        if "messages" in messages:  # {"messages": [...], "tools": [...]}: a recorded input
            return user_text(messages["messages"])
        messages = [messages]
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if not isinstance(message, Mapping) or message.get("role", "user") != "user":
            continue
        texts: list[str] = []
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        for part in (message.get("parts") or []) + (content if isinstance(content, list) else []):
            if isinstance(part, Mapping) and part.get("type") == "text":
                text = part.get("content", part.get("text"))
                if isinstance(text, str):
                    texts.append(text)
        text = "".join(texts).strip()
        if text:
            return text
    return None
