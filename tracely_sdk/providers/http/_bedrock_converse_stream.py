"""Amazon Bedrock's ConverseStream wire format: ``POST /model/{modelId}/converse-stream``.

The model is in the path; the request is Converse's, answered by an AWS event stream
(``application/vnd.amazon.eventstream``, see :mod:`._eventstream`) of Converse's pieces.
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
    return operation(method, path) == "converse-stream"


def streamed(body: Mapping[str, Any]) -> bool:
    return True  # the path asks for the stream, whatever the body says


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
