"""The GenAI semantic conventions' message model, and the one conversion into it.

Every LLM call tracely records, reads from another instrumentor's span or serves has its
messages in this form (``gen_ai.input.messages`` / ``gen_ai.output.messages``): the provider
adapters of ``tracely_sdk`` build it with these helpers, and the extractor's readers of other
instrumentors' spans (``tracely_otel._foreign``) use the same ones, so a conversation has one
shape whoever recorded it.
"""

from __future__ import annotations

from tracely_otel._foreign import (
    content_parts,
    genai_finish_reason,
    input_messages,
    tool_call_part,
    tool_response_part,
    user_text,
)
from tracely_otel._genai import (
    BlobPart,
    ChatMessage,
    GenericPart,
    MessagePart,
    OutputMessage,
    ReasoningPart,
    TextPart,
    ToolCallRequestPart,
    ToolCallResponsePart,
    UriPart,
)

__all__ = [
    # the message model
    "BlobPart",
    "ChatMessage",
    "GenericPart",
    "MessagePart",
    "OutputMessage",
    "ReasoningPart",
    "TextPart",
    "ToolCallRequestPart",
    "ToolCallResponsePart",
    "UriPart",
    # conversion into it
    "content_parts",
    "genai_finish_reason",
    "input_messages",
    "tool_call_part",
    "tool_response_part",
    "user_text",
]
