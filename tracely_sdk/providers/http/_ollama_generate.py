"""The Ollama native completion wire format: ``POST .../api/generate``.

:mod:`._ollama_chat`'s twin for a single prompt: the request has ``prompt`` and an optional
``system`` instead of ``messages``, and each answer line carries a piece of ``response`` (and
``thinking``) instead of a ``message``; streamed as newline-delimited JSON unless
``"stream": false``, the last line with ``"done": true``, the counts and the ``context``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from tracely_otel.genai import ChatMessage, OutputMessage, input_messages
from tracely_sdk.providers import _wire
from tracely_sdk.providers.http import _ollama_chat
from tracely_sdk.providers.http._ollama_chat import (
    CREATED,
    counts,
    finish_reason,
    joined,
    last_line,
    reply_parts,
)


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return method == "POST" and path.rstrip("/").endswith("/api/generate")


def messages(body: Mapping[str, Any]) -> list[ChatMessage]:
    """The prompt as a user message, after its system prompt."""
    prompt = body.get("prompt")
    given = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else []
    return input_messages(given, body.get("system"))


def output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    parts = reply_parts(body.get("response"), body.get("thinking"), ())
    return [{"role": "assistant", "parts": parts, "finish_reason": finish_reason(body, parts)}]


def asks_for_tools(body: Mapping[str, Any]) -> bool:
    return False


def body_from_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The answer that a stream's recorded lines add up to: the last line holding the whole
    response."""
    lines, body = last_line(events)
    body["response"] = joined(line.get("response") for line in lines)
    thinking = joined(line.get("thinking") for line in lines)
    if thinking:
        body["thinking"] = thinking
    return body


def text_body(text: str, *, model: str, usage: tuple[int, int] | None) -> dict[str, Any]:
    """The answer to ``text`` (a hand-written entry's), as a ``"stream": false`` call gets it."""
    return {
        "model": model,
        "created_at": CREATED,
        "response": text,
        "done": True,
        "done_reason": "stop",
        **counts(usage),
    }


def text_events(text: str, *, model: str, usage: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The lines that stream ``text``, word by word."""
    lines: list[dict[str, Any]] = [
        {"data": {"model": model, "created_at": CREATED, "response": piece, "done": False}}
        for piece in _wire.word_pieces(text)
    ]
    return [*lines, {"data": text_body("", model=model, usage=usage)}]


CODEC = dataclasses.replace(
    _ollama_chat.CODEC,
    name="ollama_generate",
    answers=answers,
    messages=messages,
    output_messages=output_messages,
    asks_for_tools=asks_for_tools,
    body_from_events=body_from_events,
    text_body=text_body,
    text_events=text_events,
)
