"""The Anthropic Messages wire format: ``POST .../v1/messages``.

A JSON request body with ``model``, ``messages`` and an optional ``system`` prompt, answered by
a message body, or (``"stream": true``) by named SSE events (``message_start`` ...
``message_stop``, with ``ping`` between).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracely_otel.genai import ChatMessage, OutputMessage, content_parts, input_messages
from tracely_sdk.providers import _anthropic_codec
from tracely_sdk.providers._patching import GEN_AI_OUTPUT_TYPE, Reply
from tracely_sdk.providers.http._codec import Codec

model_key = "model"
id_key = "id"


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format (``count_tokens`` is not)."""
    return method == "POST" and path.rstrip("/").endswith("/v1/messages")


def provider(host: str) -> str | None:
    return "anthropic"


def streamed(body: Mapping[str, Any]) -> bool:
    return body.get("stream") is True


def request_numbers(body: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The request's max tokens, temperature and top-p (None where not given)."""
    return body.get("max_tokens"), body.get("temperature"), body.get("top_p")


def request_extras(body: Mapping[str, Any], provider: str) -> dict[str, Any]:
    """The output type a structured-output request asks for."""
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, Mapping) else body.get("output_format")
    return {GEN_AI_OUTPUT_TYPE: "json"} if isinstance(fmt, Mapping) else {}


def system_instructions(body: Mapping[str, Any]) -> list[Any] | None:
    """The request's ``system`` prompt as the GenAI conventions' system instructions."""
    system = body.get("system")
    return content_parts(system) if system is not None else None


def messages(body: Mapping[str, Any]) -> list[ChatMessage]:
    """The request's messages (its system prompt first) in the GenAI conventions' shape."""
    return input_messages(body.get("messages"), body.get("system"))


def output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    return _anthropic_codec.genai_output_messages(body)


def reasons(body: Mapping[str, Any]) -> list[str]:
    reason = body.get("stop_reason")
    return [reason] if isinstance(reason, str) else []


def asks_for_tools(body: Mapping[str, Any]) -> bool:
    return any(
        isinstance(block, Mapping) and block.get("type") == "tool_use"
        for block in body.get("content") or ()
    )


def usage(body: Mapping[str, Any]) -> tuple[int, int] | None:
    return _anthropic_codec.usage_of(body)


def body_from_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The message that a stream's recorded events add up to (ValueError without its start)."""
    return _anthropic_codec.body_from_events(events)


def record_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return _anthropic_codec.record_headers(headers)


# --------------------------------------------------------------------------- other recordings

SDK_TAGS = ("anthropic.message", "anthropic.message.events")
"""The type tags of the Anthropic SDK patches' recordings of a message (tracely-replay 0.5 and
earlier): plain, streamed."""

SDK_INPUT = ("messages", "system", "tools")
"""The request's keys such a recording kept as its input."""


def closed_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stream's events as the wire ends them (``message_stop`` is an event of its own)."""
    return events


def text_body(text: str, *, model: str, usage: tuple[int, int] | None) -> dict[str, Any]:
    """The message body that answers ``text`` (a hand-written entry's answer)."""
    body: dict[str, Any] = _anthropic_codec.recording_from_text(text, model=model, usage=usage)[
        "body"
    ]
    return body


def text_events(text: str, *, model: str, usage: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The stream events that answer ``text``, word by word."""
    chunks = _anthropic_codec.chunks_from_text(text, model=model, usage=usage)
    return [{"event": chunk["event"], "data": chunk["data"]} for chunk in chunks]


def reply_body(reply: Reply) -> dict[str, Any]:
    """The message body that answers ``reply`` (an entry read from another instrumentor's span)."""
    return _anthropic_codec.message_body_from_reply(reply)


def body_events(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stream events a streamed request would have been sent for ``body``."""
    return _anthropic_codec.events_from_body(body)


CODEC = Codec.of("anthropic_messages", globals())
