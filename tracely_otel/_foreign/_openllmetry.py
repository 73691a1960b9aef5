"""OpenLLMetry's flat attributes (``openllmetry``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from tracely_otel import _attributes as A
from tracely_otel._foreign._common import (
    _GENAI_FINISH_REASONS,
    _OI_KIND,
    _OPENLLMETRY,
    _USAGE_IN,
    _USAGE_OUT,
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
    _plain,
    _text,
    _tokens,
)
from tracely_otel._foreign._genai import _genai_entry, _is_genai_llm, _is_openllmetry, _model_names
from tracely_otel._foreign._messages import (
    _add_tool_calls,
    _content_parts,
    _entry,
    _finish,
    _reasons,
    _tool_call,
    _tool_response,
)
from tracely_otel._spans import SpanRecord

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
