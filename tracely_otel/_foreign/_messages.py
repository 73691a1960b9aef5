"""Messages and their parts in the GenAI conventions' shape, from every form a source writes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import orjson

from tracely_otel._foreign._common import (
    _FINISH_REASONS,
    OUTPUT_TYPE,
    _arguments,
    _json_safe,
    _opt_str,
    _plain,
    _Source,
    _text,
    _Unservable,
)
from tracely_otel._genai import ChatMessage, MessagePart, ToolCallRequestPart, ToolCallResponsePart

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


def _modality(mime_type: str | None) -> str:
    major = (mime_type or "").split("/", 1)[0]
    return major if major in ("image", "video", "audio") else "image"


def _uri_part(modality: str, uri: Any, **mime_type: str | None) -> dict[str, Any]:
    return {"type": "uri", "modality": modality, **mime_type, "uri": _text(uri)}


def _blob_part(modality: str, mime: str | None, data: Any) -> dict[str, Any]:
    return {"type": "blob", "modality": modality, "mime_type": mime, "content": _text(data)}


def _gemini_part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """A part of a Gemini ``Content`` (the google-genai SDK's snake_case, or the API's
    camelCase); None for one that is not."""
    call = block.get("function_call", block.get("functionCall"))
    if isinstance(call, Mapping):
        return _tool_call(call.get("id"), call.get("name"), call.get("args"))
    result = block.get("function_response", block.get("functionResponse"))
    if isinstance(result, Mapping):
        return _tool_response(result.get("id"), result.get("response"))
    data = block.get("inline_data", block.get("inlineData"))
    if isinstance(data, Mapping):
        mime = _opt_str(data.get("mime_type", data.get("mimeType")))
        return _blob_part(_modality(mime), mime, data.get("data"))
    file = block.get("file_data", block.get("fileData"))
    if isinstance(file, Mapping):
        mime = _opt_str(file.get("mime_type", file.get("mimeType")))
        uri = file.get("file_uri", file.get("fileUri"))
        return _uri_part(_modality(mime), uri, mime_type=mime)
    if block.get("thought") is True and "text" in block:
        return {"type": "reasoning", "content": _text(block.get("text"))}
    return None


def _block_part(block: Mapping[str, Any]) -> dict[str, Any]:
    """A part from a provider's own content block (OpenAI, Anthropic, Bedrock, Gemini shapes)."""
    kind = block.get("type")
    if kind is None:
        gemini = _gemini_part(block)
        if gemini is not None:
            return gemini
    if kind in ("text", "input_text", "output_text") or (kind is None and "text" in block):
        return _text_part(block.get("text", block.get("content")))
    if kind in ("tool_use", "server_tool_use"):
        return _tool_call(block.get("id"), block.get("name"), block.get("input"))
    if kind == "tool_result":
        return _tool_response(block.get("tool_use_id"), block.get("content"))
    if kind in ("thinking", "reasoning"):
        return {"type": "reasoning", "content": _text(block.get("thinking", block.get("content")))}
    if kind == "refusal" and isinstance(block.get("refusal"), str):
        return _text_part(block["refusal"])
    if kind in ("image_url", "input_image"):
        image = block.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        return _uri_part("image", url)
    if kind == "image" and isinstance(block.get("source"), Mapping):
        source = block["source"]
        if source.get("type") == "url":
            return _uri_part("image", source.get("url"))
        return _blob_part("image", _opt_str(source.get("media_type")), source.get("data"))
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


def content_parts(content: Any) -> list[MessagePart]:
    """The parts of a message's ``content`` as an SDK takes it (text, or OpenAI, Anthropic,
    Bedrock content blocks or Gemini parts), in the conventions' shape: the one converter every provider and
    reader uses, so that one conversation reads the same whoever recorded it."""
    return cast("list[MessagePart]", _content_parts(content))


def tool_response_part(call_id: Any, response: Any) -> ToolCallResponsePart:
    """A ``tool_call_response`` part; a result given as text blocks is their text."""
    return cast(ToolCallResponsePart, _tool_response(call_id, response))


def tool_call_part(call_id: Any, name: Any, arguments: Any) -> ToolCallRequestPart:
    """A ``tool_call`` part; ``arguments`` given as JSON text are parsed."""
    return cast(ToolCallRequestPart, _tool_call(call_id, name, arguments))


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


def input_messages(messages: Any, system: Any = None) -> list[ChatMessage]:
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
    return cast("list[ChatMessage]", _tool_roles(inputs))


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
