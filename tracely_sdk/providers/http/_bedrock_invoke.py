"""Amazon Bedrock's InvokeModel wire format: ``POST /model/{modelId}/invoke``.

The model is in the path; the body is the model's own JSON. Read here as Anthropic's messages
format on Bedrock (``{"anthropic_version": "bedrock-2023-05-31", "messages": [...],
"max_tokens": ...}``, answered by a message body): the other families' bodies are recorded and
served all the same, with no messages or usage read from them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tracely_sdk.providers.http import _anthropic_messages, _bedrock


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return _bedrock.operation(method, path) == "invoke"


def streamed(body: Mapping[str, Any]) -> bool:
    return False  # InvokeModelWithResponseStream is another path


# Anthropic's bodies at Bedrock's paths and headers; what reads the Anthropic API's own
# request (its SDK's recordings, system prompt, extra attributes) is not Bedrock's.
CODEC = dataclasses.replace(
    _anthropic_messages.CODEC,
    name="bedrock_invoke",
    answers=answers,
    streamed=streamed,
    provider=_bedrock.provider,
    record_headers=_bedrock.record_headers,
    path_model=_bedrock.path_model,
    SDK_TAGS=_bedrock.SDK_TAGS,
    SDK_INPUT=(),
    request_extras=None,
    system_instructions=None,
    reply_body=None,
    body_events=None,
)
