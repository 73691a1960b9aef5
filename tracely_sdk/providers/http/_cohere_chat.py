"""The Cohere v2 chat wire format: ``POST .../v2/chat``.

A JSON request body with ``model`` and OpenAI-like ``messages`` (``system``, ``user``,
``assistant`` with ``tool_calls``, ``tool`` with ``tool_call_id``), answered by a body with
``id``, ``finish_reason`` (``COMPLETE``, ``MAX_TOKENS``, ``TOOL_CALL``, ...), one ``message``
(content blocks, ``tool_plan``, ``tool_calls``) and ``usage`` (``tokens`` and
``billed_units``); no model is named in the answer. Streamed (``"stream": true``) it is
server-sent events whose JSON ``data`` carries its ``type`` (``message-start``,
``content-delta``, ``tool-call-start``, ... ``message-end``, which holds the finish reason and
usage), what the cohere SDK's ``chat_stream`` reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracely_otel.genai import (
    ChatMessage,
    MessagePart,
    OutputMessage,
    content_parts,
    input_messages,
    tool_call_part,
)
from tracely_sdk.providers import _wire
from tracely_sdk.providers.http._codec import Codec

model_key = "model"
id_key = "id"

_FINISH = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    "MAX_TOKENS": "length",
    "TOOL_CALL": "tool_call",
    "ERROR": "error",
    "TIMEOUT": "error",
}
_SAFE_HEADERS = frozenset({"content-type", "retry-after"})


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return method == "POST" and path.rstrip("/").endswith("/v2/chat")


def provider(host: str) -> str | None:
    return "cohere"


def streamed(body: Mapping[str, Any]) -> bool:
    return body.get("stream") is True


def request_numbers(body: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The request's max tokens, temperature and top-p (``p``; None where not given)."""
    return body.get("max_tokens"), body.get("temperature"), body.get("p")


def messages(body: Mapping[str, Any]) -> list[ChatMessage]:
    """The request's messages in the GenAI conventions' shape."""
    return input_messages(body.get("messages"))


def output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    message = body.get("message")
    message = message if isinstance(message, Mapping) else {}
    parts: list[MessagePart] = []
    if isinstance(message.get("tool_plan"), str) and message["tool_plan"]:
        parts.append({"type": "reasoning", "content": message["tool_plan"]})
    parts.extend(content_parts(message.get("content")))
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            function = call.get("function") or {}
            parts.append(
                tool_call_part(call.get("id"), function.get("name"), function.get("arguments"))
            )
    reason = body.get("finish_reason")
    finish = _FINISH.get(reason, "stop") if isinstance(reason, str) else "stop"
    return [{"role": "assistant", "parts": parts, "finish_reason": finish}]


def reasons(body: Mapping[str, Any]) -> list[str]:
    reason = body.get("finish_reason")
    return [reason] if isinstance(reason, str) else []


def asks_for_tools(body: Mapping[str, Any]) -> bool:
    message = body.get("message")
    return isinstance(message, Mapping) and bool(message.get("tool_calls"))


def usage(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """The tokens the model read and wrote (``usage.tokens``, not the billed units)."""
    counts = body.get("usage")
    tokens = counts.get("tokens") if isinstance(counts, Mapping) else None
    if not isinstance(tokens, Mapping):
        return None
    tokens_in, tokens_out = tokens.get("input_tokens"), tokens.get("output_tokens")
    if isinstance(tokens_in, (int, float)) and isinstance(tokens_out, (int, float)):
        return int(tokens_in), int(tokens_out)
    return None


def _delta_message(data: Mapping[str, Any]) -> Mapping[str, Any]:
    delta = data.get("delta")
    message = delta.get("message") if isinstance(delta, Mapping) else None
    return message if isinstance(message, Mapping) else {}


def body_from_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The chat response that a stream's recorded events add up to (ValueError without its
    ``message-start``)."""
    body: dict[str, Any] | None = None
    content: dict[int, dict[str, Any]] = {}
    calls: dict[int, dict[str, Any]] = {}
    plan: list[str] = []
    for event in events:
        data = event.get("data") if isinstance(event, Mapping) else None
        if not isinstance(data, Mapping):
            continue
        kind, index = data.get("type"), data.get("index")
        index = index if isinstance(index, int) else 0
        message = _delta_message(data)
        if kind == "message-start":
            body = {"id": data.get("id"), "finish_reason": None, "message": {}}
        elif kind == "content-start":
            block = message.get("content")
            content[index] = dict(block) if isinstance(block, Mapping) else {"type": "text"}
        elif kind == "content-delta":
            block = message.get("content")
            slot = content.setdefault(index, {"type": "text"})
            for key in ("text", "thinking"):
                piece = block.get(key) if isinstance(block, Mapping) else None
                if isinstance(piece, str):
                    slot[key] = str(slot.get(key) or "") + piece
        elif kind == "tool-plan-delta" and isinstance(message.get("tool_plan"), str):
            plan.append(message["tool_plan"])
        elif kind == "tool-call-start":
            call = message.get("tool_calls")
            if isinstance(call, Mapping):
                started = dict(call)
                started["function"] = dict(call.get("function") or {})
                calls[index] = started
        elif kind == "tool-call-delta":
            call = message.get("tool_calls")
            piece = ((call or {}).get("function") or {}).get("arguments")
            if index in calls and isinstance(piece, str):
                function = calls[index]["function"]
                function["arguments"] = str(function.get("arguments") or "") + piece
        elif kind == "message-end" and body is not None:
            delta = data.get("delta")
            if isinstance(delta, Mapping):
                body["finish_reason"] = delta.get("finish_reason")
                if delta.get("usage") is not None:
                    body["usage"] = delta["usage"]
    if body is None:
        raise ValueError("the recorded Cohere stream holds no message-start event")
    reply: dict[str, Any] = {"role": "assistant"}
    if plan:
        reply["tool_plan"] = "".join(plan)
    if content:
        reply["content"] = [content[n] for n in sorted(content)]
    if calls:
        reply["tool_calls"] = [calls[n] for n in sorted(calls)]
    body["message"] = reply
    return body


def record_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return _wire.kept_headers(headers, _SAFE_HEADERS, "x-ratelimit-")


# --------------------------------------------------------------------------- other recordings

SDK_TAGS = (None, None)
"""No SDK tracely patches records Cohere: every recording of a call is the wire's."""


def closed_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return events


def _usage(usage: tuple[int, int] | None) -> dict[str, Any]:
    tokens_in, tokens_out = usage or (0, 0)
    counts = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    return {"billed_units": dict(counts), "tokens": counts}


def text_body(text: str, *, model: str, usage: tuple[int, int] | None) -> dict[str, Any]:
    """The chat response that answers ``text`` (a hand-written entry's answer)."""
    return {
        "id": "replay",
        "finish_reason": "COMPLETE",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
        "usage": _usage(usage),
    }


def text_events(text: str, *, model: str, usage: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The stream events that answer ``text``, word by word."""
    data: list[dict[str, Any]] = [
        {"type": "message-start", "id": "replay", "delta": {"message": {"role": "assistant"}}},
        {
            "type": "content-start",
            "index": 0,
            "delta": {"message": {"content": {"type": "text", "text": ""}}},
        },
        *(
            {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": p}}}}
            for p in _wire.word_pieces(text)
        ),
        {"type": "content-end", "index": 0},
        {"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": _usage(usage)}},
    ]
    return [{"event": event["type"], "data": event} for event in data]


CODEC = Codec.of("cohere_chat", globals())
