"""The Gemini API's streamed wire format: ``POST .../models/{model}:streamGenerateContent``.

The request is ``:generateContent``'s (see :mod:`._gemini`), answered by a stream of its
responses: server-sent ``data:`` events when the query asks ``alt=sse``, else one JSON array
whose items arrive one by one (recorded as the array).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracely_sdk.providers.http._gemini import (
    SDK_TAGS,
    asks_for_tools,
    body_events,
    body_from_events,
    closed_events,
    id_key,
    messages,
    model_key,
    operation,
    output_messages,
    path_model,
    provider,
    reasons,
    record_headers,
    reply_body,
    request_extras,
    request_numbers,
    system_instructions,
    text_body,
    text_events,
    usage,
)


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return operation(method, path) == "streamGenerateContent"


def streamed(body: Mapping[str, Any]) -> bool:
    return True  # the path asks for the stream, whatever the body says


__all__ = [
    "SDK_TAGS",
    "answers",
    "asks_for_tools",
    "body_events",
    "body_from_events",
    "closed_events",
    "id_key",
    "messages",
    "model_key",
    "output_messages",
    "path_model",
    "provider",
    "reasons",
    "record_headers",
    "reply_body",
    "request_extras",
    "request_numbers",
    "streamed",
    "system_instructions",
    "text_body",
    "text_events",
    "usage",
]
