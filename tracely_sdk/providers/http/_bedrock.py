"""What Amazon Bedrock's runtime API formats share: the model in the path, and Converse bodies.

Bedrock names the model in the request path, URL-encoded (``POST /model/{modelId}/converse``,
``/converse-stream``, ``/invoke``, ``/invoke-with-response-stream``), never in the body; the
codecs (``_bedrock_converse``, ``_bedrock_converse_stream``, ``_bedrock_invoke``,
``_bedrock_invoke_stream``) read it from there.
A Converse request is ``{"messages": [...], "system": [...], "inferenceConfig": {...}}``, its
content blocks ``{"text": ...}``, ``{"toolUse": ...}``, ``{"toolResult": ...}``; the answer is
``{"output": {"message": ...}, "stopReason": ..., "usage": {"inputTokens": ...,
"outputTokens": ...}}``, or, streamed, the same pieces as AWS event-stream events
(``messageStart``, ``contentBlockStart``/``Delta``/``Stop``, ``messageStop``, ``metadata``).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from tracely_otel.genai import (
    ChatMessage,
    OutputMessage,
    content_parts,
    genai_finish_reason,
    input_messages,
)
from tracely_sdk.providers import _wire
from tracely_sdk.providers._patching import pieces
from tracely_sdk.providers.http import _eventstream

PROVIDER = "aws.bedrock"
"""The GenAI conventions' provider name of Bedrock."""

_PATH = re.compile(r"/model/([^/]+)/([a-z-]+)/?$")

# Bedrock's request id and the token counts and latency it reports in headers.
SAFE_HEADERS = frozenset({"content-type", "x-amzn-requestid", "x-amzn-errortype"})
_HEADER_PREFIX = "x-amzn-bedrock-"


def operation(method: str, path: str) -> str | None:
    """The runtime operation a request is (``converse``, ``invoke``, ...), or None."""
    match = _PATH.search(path) if method == "POST" else None
    return match.group(2) if match else None


def path_model(path: str) -> str | None:
    """The model id a request's path names, decoded (``anthropic.claude-3-haiku-...-v1:0``)."""
    match = _PATH.search(path)
    return urllib.parse.unquote(match.group(1)) if match else None


def provider(host: str) -> str | None:
    return PROVIDER


def record_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return _wire.kept_headers(headers, SAFE_HEADERS, _HEADER_PREFIX)


# --------------------------------------------------------------------------- Converse bodies


def request_numbers(body: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The request's max tokens, temperature and top-p (None where not given)."""
    config = body.get("inferenceConfig")
    if not isinstance(config, Mapping):
        return None, None, None
    return config.get("maxTokens"), config.get("temperature"), config.get("topP")


def messages(body: Mapping[str, Any]) -> list[ChatMessage]:
    """The request's messages (its system prompt first) in the GenAI conventions' shape."""
    return input_messages(body.get("messages"), body.get("system"))


def _message(body: Mapping[str, Any]) -> Mapping[str, Any]:
    output = body.get("output")
    message = output.get("message") if isinstance(output, Mapping) else None
    return message if isinstance(message, Mapping) else {}


def output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    message = _message(body)
    return [
        {
            "role": str(message.get("role") or "assistant"),
            "parts": content_parts(message.get("content") or []),
            "finish_reason": genai_finish_reason(body.get("stopReason")),
        }
    ]


def reasons(body: Mapping[str, Any]) -> list[str]:
    reason = body.get("stopReason")
    return [reason] if isinstance(reason, str) else []


def asks_for_tools(body: Mapping[str, Any]) -> bool:
    return any(
        isinstance(block, Mapping) and "toolUse" in block
        for block in _message(body).get("content") or ()
    )


def usage(body: Mapping[str, Any]) -> tuple[int, int] | None:
    counts = body.get("usage")
    if not isinstance(counts, Mapping):
        return None
    tokens_in, tokens_out = counts.get("inputTokens"), counts.get("outputTokens")
    if isinstance(tokens_in, int) and isinstance(tokens_out, int):
        return tokens_in, tokens_out
    return None


def body_from_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The Converse answer that a ConverseStream's recorded events add up to (ValueError
    without its ``messageStart``)."""
    role: str | None = None
    blocks: dict[int, dict[str, Any]] = {}
    body: dict[str, Any] = {}
    for event in events:
        kind = (event.get("headers") or {}).get(":event-type")
        data = event.get("data")
        if not isinstance(data, Mapping):
            continue
        if kind == "messageStart":
            role = str(data.get("role") or "assistant")
        elif kind in ("contentBlockStart", "contentBlockDelta"):
            block = blocks.setdefault(int(data.get("contentBlockIndex") or 0), {})
            start = data.get("start") or {}
            if isinstance(start.get("toolUse"), Mapping):
                block["toolUse"] = {**start["toolUse"], "input": ""}
            delta = data.get("delta") or {}
            if isinstance(delta.get("text"), str):
                block["text"] = block.get("text", "") + delta["text"]
            tool = delta.get("toolUse")
            if isinstance(tool, Mapping) and isinstance(tool.get("input"), str):
                block.setdefault("toolUse", {"input": ""})["input"] += tool["input"]
        elif kind == "messageStop":
            body["stopReason"] = data.get("stopReason")
        elif kind == "metadata":
            body.update({k: data[k] for k in ("usage", "metrics") if k in data})
    if role is None:
        raise ValueError("a Bedrock event stream without its messageStart")
    content: list[dict[str, Any]] = []
    for _, block in sorted(blocks.items()):
        if "toolUse" in block:
            text = block["toolUse"].get("input") or "{}"
            try:
                block["toolUse"]["input"] = orjson.loads(text)
            except orjson.JSONDecodeError:
                pass  # arguments cut short: kept as the text that arrived
        content.append(block)
    return {"output": {"message": {"role": role, "content": content}}, **body}


# --------------------------------------------------------------------------- other recordings

SDK_TAGS = ("", "")
"""No SDK patch records Bedrock calls: only the HTTP client does, or a hand-written entry."""


def closed_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return events


def _usage_body(usage: tuple[int, int] | None) -> dict[str, Any]:
    tokens_in, tokens_out = usage or (0, 0)
    return {
        "inputTokens": tokens_in,
        "outputTokens": tokens_out,
        "totalTokens": tokens_in + tokens_out,
    }


def text_body(text: str, *, model: str, usage: tuple[int, int] | None) -> dict[str, Any]:
    """The Converse answer that answers ``text`` (a hand-written entry's answer)."""
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": _usage_body(usage),
        "metrics": {"latencyMs": 0},
    }


def _event(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return {"headers": headers, "data": data}


def text_events(text: str, *, model: str, usage: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The ConverseStream events that answer ``text``, word by word."""
    return [
        _event("messageStart", {"role": "assistant"}),
        *(
            _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
            for piece in pieces(text)
        ),
        _event("contentBlockStop", {"contentBlockIndex": 0}),
        _event("messageStop", {"stopReason": "end_turn"}),
        _event("metadata", {"usage": _usage_body(usage), "metrics": {"latencyMs": 0}}),
    ]


STREAM_CONTENT_TYPE = _eventstream.CONTENT_TYPE
"""The content type a streamed answer is sent with."""

model_key = "modelId"  # not in Bedrock's answers: the response model is not known
id_key = "requestId"
