"""OpenInference's spans (``openinference``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from tracely_otel._foreign._common import (
    _OI_KIND,
    _OPENINFERENCE,
    _REDACTED,
    Result,
    _attempt,
    _call_name,
    _check_dropped,
    _check_failed,
    _guarded,
    _in_order,
    _index,
    _is_tracely,
    _not_captured,
    _opt_str,
    _text,
    _tokens,
)
from tracely_otel._foreign._messages import (
    _add_tool_calls,
    _entry,
    _finish,
    _reasons,
    _text_part,
    _tool_call,
    _tool_response,
)
from tracely_otel._spans import SpanRecord

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
