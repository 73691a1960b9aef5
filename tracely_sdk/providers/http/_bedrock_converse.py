"""Amazon Bedrock's Converse wire format: ``POST /model/{modelId}/converse``.

The model is in the path; the request and its JSON answer are described in :mod:`._bedrock`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracely_sdk.providers.http._bedrock import (
    SDK_TAGS,
    STREAM_CONTENT_TYPE,
    asks_for_tools,
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
    request_numbers,
    text_body,
    text_events,
    usage,
)


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return operation(method, path) == "converse"


def streamed(body: Mapping[str, Any]) -> bool:
    return False


__all__ = [
    "SDK_TAGS",
    "STREAM_CONTENT_TYPE",
    "answers",
    "asks_for_tools",
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
    "request_numbers",
    "streamed",
    "text_body",
    "text_events",
    "usage",
]
