"""The OpenAI Responses API wire format: ``POST .../responses``.

A JSON request body with ``model``, ``input`` (text, or a list of items) and optional
``instructions``, answered by a response body, or (``"stream": true``) by named SSE events
(``response.created`` ... ``response.completed``) whose last one carries the whole response.
Spoken by OpenAI and copied by other servers (vLLM, Ollama's ``/v1``, OpenRouter).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracely_otel.genai import ChatMessage, OutputMessage, input_messages
from tracely_sdk.providers import _openai_codec
from tracely_sdk.providers._patching import Reply
from tracely_sdk.providers.http import _openai_chat
from tracely_sdk.providers.http._codec import Codec

model_key = "model"
id_key = "id"


UNCOMPARED = ("prompt_cache_key",)
"""Request keys left out of the recorded input: a prompt-cache hint, which agents make per run
(the OpenAI Agents SDK's ``agents-sdk:run:<id>``), is no part of what the model is asked."""


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format (``GET .../responses/{id}`` fetches a
    stored response: it is not)."""
    return method == "POST" and path.rstrip("/").endswith("/responses")


def provider(host: str) -> str | None:
    return _openai_chat.provider(host)


def streamed(body: Mapping[str, Any]) -> bool:
    return body.get("stream") is True


def request_numbers(body: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The request's max output tokens, temperature and top-p (None where not given)."""
    return body.get("max_output_tokens"), body.get("temperature"), body.get("top_p")


def request_extras(body: Mapping[str, Any], provider: str) -> dict[str, Any]:
    return _openai_chat.request_extras(body, provider, "responses")


response_extras = _openai_chat.response_extras


def system_instructions(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The request's ``instructions`` as the GenAI conventions' system instructions."""
    instructions = body.get("instructions")
    return [{"type": "text", "content": instructions}] if isinstance(instructions, str) else None


def messages(body: Mapping[str, Any]) -> list[ChatMessage]:
    """The request's input (its instructions first) in the GenAI conventions' shape."""
    given = _openai_codec.genai_responses_input(body.get("input"))
    return input_messages(given, body.get("instructions"))


def output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    return _openai_codec.genai_responses_output(body)


def reasons(body: Mapping[str, Any]) -> list[str]:
    return [_openai_codec.responses_finish(body)] if body else []


def asks_for_tools(body: Mapping[str, Any]) -> bool:
    return any(
        isinstance(item, Mapping) and item.get("type") == "function_call"
        for item in body.get("output") or ()
    )


def usage(body: Mapping[str, Any]) -> tuple[int, int] | None:
    return _openai_codec.usage_of(body, ("input_tokens", "output_tokens"))


def body_from_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The response a stream's recorded events end with (ValueError with none)."""
    return _openai_codec.response_body_from_events(events)


def record_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return _openai_codec.record_headers(headers)


# --------------------------------------------------------------------------- other recordings

SDK_TAGS = ("openai.response", "openai.response.events")
"""The type tags of the OpenAI SDK patches' recordings of a response (tracely-replay 0.5 and
earlier): plain, streamed."""

SDK_INPUT = ("input", "instructions", "tools", "previous_response_id")
"""The request's keys such a recording kept as its input."""


def closed_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stream's events as the wire ends them (``response.completed`` is an event of its own)."""
    return events


def text_body(text: str, *, model: str, usage: tuple[int, int] | None) -> dict[str, Any]:
    """The response body that answers ``text`` (a hand-written entry's answer)."""
    body: dict[str, Any] = _openai_codec.recording_from_text(
        "response", text, model=model, usage=usage
    )["body"]
    return body


def text_events(text: str, *, model: str, usage: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The stream events that answer ``text``, word by word."""
    return _openai_codec.response_events_from_body(text_body(text, model=model, usage=usage))


def reply_body(reply: Reply) -> dict[str, Any]:
    """The response body that answers ``reply`` (an entry read from another instrumentor's span)."""
    return _openai_codec.response_body_from_reply(reply)


def body_events(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stream events a streamed request would have been sent for ``body``."""
    return _openai_codec.response_events_from_body(body)


CODEC = Codec.of("openai_responses", globals())
