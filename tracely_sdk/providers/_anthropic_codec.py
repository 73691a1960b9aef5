"""The Anthropic Messages API's bodies as the wire codec (``providers.http._anthropic_messages``)
reads and makes them: pure functions over JSON.

The GenAI conventions' messages of an answer, usage, a stream's events added up to the message
they stand for, the headers a recording keeps, and the bodies and events made for an entry
tracely did not record at the client (a hand-written answer, another instrumentor's messages).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracely_otel.genai import OutputMessage, content_parts, genai_finish_reason
from tracely_sdk.providers import _wire
from tracely_sdk.providers._patching import Reply, json_text, json_value, pieces

SAFE_HEADERS = frozenset(
    {
        "content-type",
        "request-id",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
    }
)
"""Response headers a recording may keep, besides ``anthropic-ratelimit-*``: nothing that names an account
(``anthropic-organization-id`` and ``anthropic-workspace-id`` are left out)."""


# --------------------------------------------------------------------------------------------- recording


def record_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers of a response that a recording may keep (``SAFE_HEADERS`` and ``anthropic-ratelimit-*``)."""
    return _wire.kept_headers(headers, SAFE_HEADERS, "anthropic-ratelimit-")


# --------------------------------------------------------------------------------------------- plain text


def recording_from_text(
    text: str,
    *,
    model: str,
    usage: tuple[int, int] | None = None,
    message_id: str = "replay",
) -> dict[str, Any]:
    """The recording of a message whose one text block is ``text``,
    ending its turn: what a hand-written entry (``{"output": "Hello", "usage": [812, 96]}``) that
    holds no SDK body is served as."""
    prompt, completion = usage or (0, 0)
    body = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": completion},
    }
    return {"object": "message", "body": body, "request_id": None}


def chunks_from_text(
    text: str,
    *,
    model: str,
    usage: tuple[int, int] | None = None,
    message_id: str = "replay",
) -> list[dict[str, Any]]:
    """Recorded events that stream ``text`` word by word, for an entry that holds
    only the answer's text."""
    prompt, completion = usage or (0, 0)
    message = recording_from_text("", model=model, usage=(prompt, 0), message_id=message_id)["body"]
    message["content"] = []
    message["stop_reason"] = None
    pieces = _wire.word_pieces(text)
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            }
            for piece in pieces
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": completion},
        },
        {"type": "message_stop"},
    ]
    return [{"event": event["type"], "data": event} for event in events]


# --------------------------------------------------------------------------------------------- bodies

# The stop reasons of the Messages API that the shared table leaves as they are.
STOPS: dict[Any, str] = {
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "model_context_window_exceeded": "length",
}


def genai_output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    """A message body in the GenAI conventions' ``gen_ai.output.messages`` shape."""
    reason = body.get("stop_reason")
    return [
        {
            "role": "assistant",
            "parts": content_parts(body.get("content")),
            "finish_reason": genai_finish_reason(STOPS.get(reason, reason)),
        }
    ]


def body_from_events(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The message that recorded ``chunks`` add up to."""
    body: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    json_parts: dict[int, str] = {}
    for recorded in chunks:
        data = recorded.get("data") if isinstance(recorded, Mapping) else None
        if not isinstance(data, Mapping):
            continue
        kind = data.get("type")
        if kind == "message_start" and isinstance(data.get("message"), Mapping):
            body = dict(data["message"])
            body["usage"] = dict(body.get("usage") or {})
        elif kind == "content_block_start":
            blocks[int(data.get("index") or 0)] = dict(data.get("content_block") or {})
        elif kind == "content_block_delta":
            index = int(data.get("index") or 0)
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = (block.get("text") or "") + str(delta.get("text") or "")
            elif dtype == "input_json_delta":
                json_parts[index] = json_parts.get(index, "") + str(delta.get("partial_json") or "")
            elif dtype == "thinking_delta":
                block["thinking"] = (block.get("thinking") or "") + str(delta.get("thinking") or "")
            elif dtype == "signature_delta":
                block["signature"] = str(delta.get("signature") or "")
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "message_delta" and body is not None:
            delta = data.get("delta") or {}
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    body[key] = delta[key]
            for key, value in (data.get("usage") or {}).items():
                if value is not None:
                    body["usage"][key] = value
    if body is None:
        raise ValueError("the recorded message stream has no message_start event")
    for index, text in json_parts.items():
        blocks[index]["input"] = _json_value(text) if text else {}
    body["content"] = [blocks[i] for i in sorted(blocks)]
    return body


def usage_of(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """The (input, output) token counts of a message body, cache reads and writes counted in."""
    usage = body.get("usage")
    if not isinstance(usage, Mapping):
        return None
    tokens_in, tokens_out = usage.get("input_tokens"), usage.get("output_tokens")
    if not isinstance(tokens_in, int) or not isinstance(tokens_out, int):
        return None
    # The conventions count every input token; the API reports cache reads/writes apart.
    for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        cached = usage.get(key)
        if isinstance(cached, int):
            tokens_in += cached
    return tokens_in, tokens_out


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


# --------------------------------------------------------------------------- replies as bodies

_STOP_FROM_GENAI = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_call": "tool_use",
    "content_filter": "refusal",
}


def message_body_from_reply(reply: Reply) -> dict[str, Any]:
    """A message body answering ``reply``."""
    body: dict[str, Any] = recording_from_text(
        "", model=reply.model, usage=reply.usage or (0, 0), message_id=reply.response_id
    )["body"]
    content: list[dict[str, Any]] = []
    finish = "stop"
    for text, calls, reason in reply.messages:
        finish = reason if reason != "stop" else finish
        if text is not None and (text or not calls):
            content.append({"type": "text", "text": text})
        content.extend(
            {"type": "tool_use", "id": cid, "name": name, "input": json_value(arguments)}
            for cid, name, arguments in calls
        )
    body["content"] = content
    body["stop_reason"] = _STOP_FROM_GENAI.get(finish, "end_turn")
    return body


def events_from_body(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The events a streamed call would have sent for ``body``."""
    usage = dict(body.get("usage") or {})
    start = {
        **body,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(body.get("content") or []):
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "text": ""},
                }
            )
            events.extend(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                }
                for piece in pieces(str(block.get("text") or ""))
            )
        elif kind in ("tool_use", "server_tool_use"):
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {
                        "type": "input_json_delta",
                        "partial_json": json_text(block.get("input")),
                    },
                }
            )
        elif kind == "thinking":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "thinking": "", "signature": ""},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": block.get("thinking") or ""},
                }
            )
            if block.get("signature"):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": block["signature"]},
                    }
                )
        else:
            events.append(
                {"type": "content_block_start", "index": index, "content_block": dict(block)}
            )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": body.get("stop_reason"),
                "stop_sequence": body.get("stop_sequence"),
            },
            "usage": {"output_tokens": usage.get("output_tokens", 0)},
        }
    )
    events.append({"type": "message_stop"})
    return [{"event": event["type"], "data": event} for event in events]
