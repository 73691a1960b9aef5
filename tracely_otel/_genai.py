"""The GenAI conventions' message model, typed: the parts of a message and the messages.

``gen_ai.input.messages`` / ``gen_ai.output.messages`` (and a bundle entry read from another
instrumentor's span) hold these, as the conventions' JSON schemas describe them. One
converter makes them from every form an SDK or an instrumentor writes
(``tracely_otel._foreign.content_parts`` / ``input_messages``); the providers synthesise a
response from them (``tracely_sdk.providers._patching.reply_from_genai``). A part of a type
the conventions do not define is kept as the source wrote it (:data:`GenericPart`).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, Union


class TextPart(TypedDict):
    type: Literal["text"]
    content: str


class ToolCallRequestPart(TypedDict):
    type: Literal["tool_call"]
    id: str | None
    name: str
    arguments: Any  # parsed from JSON text when it is JSON


class ToolCallResponsePart(TypedDict):
    type: Literal["tool_call_response"]
    id: str | None
    response: Any  # a result given as text blocks is their text


class ReasoningPart(TypedDict):
    type: Literal["reasoning"]
    content: str


class UriPart(TypedDict):
    type: Literal["uri"]
    modality: str
    uri: str


class BlobPart(TypedDict):
    type: Literal["blob"]
    modality: str
    mime_type: str | None
    content: str  # base64, as the source sent it


GenericPart = dict[str, Any]
"""A part of a type the conventions do not define, kept as the source wrote it."""

MessagePart = Union[
    TextPart,
    ToolCallRequestPart,
    ToolCallResponsePart,
    ReasoningPart,
    UriPart,
    BlobPart,
    GenericPart,
]


class _Message(TypedDict):
    role: str
    parts: list[MessagePart]


class ChatMessage(_Message, total=False):
    """A message of ``gen_ai.input.messages``."""

    name: str


class OutputMessage(ChatMessage, total=False):
    """A message of ``gen_ai.output.messages``: the conventions' ``finish_reason`` too."""

    finish_reason: str
