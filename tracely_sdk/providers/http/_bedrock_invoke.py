"""Amazon Bedrock's InvokeModel wire format: ``POST /model/{modelId}/invoke``.

The model is in the path; the body is the model's own JSON. Read here as Anthropic's messages
format on Bedrock (``{"anthropic_version": "bedrock-2023-05-31", "messages": [...],
"max_tokens": ...}``, answered by a message body): the other families' bodies are recorded and
served all the same, with no messages or usage read from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracely_sdk.providers.http._anthropic_messages import (
    asks_for_tools,
    body_from_events,
    closed_events,
    id_key,
    messages,
    model_key,
    output_messages,
    reasons,
    request_numbers,
    text_body,
    text_events,
    usage,
)
from tracely_sdk.providers.http._bedrock import (
    SDK_TAGS,
    operation,
    path_model,
    provider,
    record_headers,
)


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return operation(method, path) == "invoke"


def streamed(body: Mapping[str, Any]) -> bool:
    return False  # InvokeModelWithResponseStream is another path


__all__ = [
    "SDK_TAGS",
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
