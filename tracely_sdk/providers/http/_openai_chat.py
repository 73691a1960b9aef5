"""The OpenAI-compatible chat completions wire format: ``POST .../chat/completions``.

Spoken by OpenAI and by the servers that copy its API (Groq, Mistral, DeepSeek, Together,
vLLM, Ollama's ``/v1``): a JSON request body with ``model`` and ``messages``, answered by a
completion body, or (``"stream": true``) by SSE ``data:`` chunks ending in ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracely_otel import attributes as A
from tracely_otel.genai import ChatMessage, OutputMessage, input_messages
from tracely_sdk.providers import _openai_codec
from tracely_sdk.providers._patching import GEN_AI_OUTPUT_TYPE, Reply
from tracely_sdk.providers.http._codec import Codec

model_key = "model"
id_key = "id"

# The GenAI conventions' provider names of the hosts known to speak this format; any other host
# (a local vLLM or Ollama) is named from the model, as every call is.
_PROVIDERS = {
    "api.openai.com": "openai",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.deepseek.com": "deepseek",
    "api.together.xyz": "together_ai",
    "api.x.ai": "x_ai",
    "api.perplexity.ai": "perplexity",
}


UNCOMPARED = ("prompt_cache_key",)
"""Request keys left out of the recorded input: a prompt-cache hint, which agents make per run
(the OpenAI Agents SDK's ``agents-sdk:run:<id>``), is no part of what the model is asked."""


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return method == "POST" and path.rstrip("/").endswith("/chat/completions")


def provider(host: str) -> str | None:
    return _PROVIDERS.get(host)


def streamed(body: Mapping[str, Any]) -> bool:
    return body.get("stream") is True


def request_numbers(body: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The request's max tokens, temperature and top-p (None where not given)."""
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    return max_tokens, body.get("temperature"), body.get("top_p")


def request_extras(
    body: Mapping[str, Any], provider: str, api: str = "chat_completions"
) -> dict[str, Any]:
    """The OpenAI conventions' request attributes of a call to OpenAI: the API, a service tier
    asked for (other than ``auto``), and the output type a response format asks for."""
    if provider != "openai":
        return {}
    out: dict[str, Any] = {A.OPENAI_API_TYPE: api}
    tier = body.get("service_tier")
    if isinstance(tier, str) and tier != "auto":
        out[A.OPENAI_REQUEST_SERVICE_TIER] = tier
    fmt = body.get("response_format") if api == "chat_completions" else body.get("text")
    if api != "chat_completions" and isinstance(fmt, Mapping):
        fmt = fmt.get("format")
    if isinstance(fmt, Mapping) and isinstance(fmt.get("type"), str):
        out[GEN_AI_OUTPUT_TYPE] = "text" if fmt["type"] == "text" else "json"
    return out


def response_extras(body: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenAI conventions' response attributes: the service tier and system fingerprint."""
    out: dict[str, Any] = {}
    for key, name in (
        ("service_tier", A.OPENAI_RESPONSE_SERVICE_TIER),
        ("system_fingerprint", A.OPENAI_RESPONSE_SYSTEM_FINGERPRINT),
    ):
        if isinstance(value := body.get(key), str):
            out[name] = value
    return out


def messages(body: Mapping[str, Any]) -> list[ChatMessage]:
    """The request's messages in the GenAI conventions' shape."""
    return input_messages(body.get("messages"))


def output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    return _openai_codec.genai_chat_output(body)


def reasons(body: Mapping[str, Any]) -> list[str]:
    return [str(r) for c in body.get("choices") or () if (r := (c or {}).get("finish_reason"))]


def asks_for_tools(body: Mapping[str, Any]) -> bool:
    return any(
        ((c or {}).get("message") or {}).get("tool_calls") for c in body.get("choices") or ()
    )


def usage(body: Mapping[str, Any]) -> tuple[int, int] | None:
    return _openai_codec.usage_of(body, ("prompt_tokens", "completion_tokens"))


def body_from_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The completion body that a stream's recorded events add up to."""
    return _openai_codec.chat_body_from_chunks(events)


def record_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return _openai_codec.record_headers(headers)


# --------------------------------------------------------------------------- other recordings

SDK_TAGS = ("openai.chat.completion", "openai.chat.completion.chunks")
"""The type tags of the OpenAI SDK patches' recordings of a chat completion (tracely-replay 0.5
and earlier): plain, streamed."""

SDK_INPUT = ("messages", "tools", "response_format")
"""The request's keys such a recording kept as its input."""


def closed_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stream's events as the wire ends them (``data: [DONE]``)."""
    return [*events, {"text": "[DONE]"}]


def text_body(text: str, *, model: str, usage: tuple[int, int] | None) -> dict[str, Any]:
    """The completion body that answers ``text`` (a hand-written entry's answer)."""
    body: dict[str, Any] = _openai_codec.recording_from_text(
        "chat.completion", text, model=model, usage=usage
    )["body"]
    return body


def text_events(text: str, *, model: str, usage: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The stream events that answer ``text``, word by word."""
    chunks = _openai_codec.chunks_from_text("chat.completion", text, model=model, usage=usage)
    return closed_events([{"data": chunk["data"]} for chunk in chunks])


def reply_body(reply: Reply) -> dict[str, Any]:
    """The completion body that answers ``reply`` (an entry read from another instrumentor's span)."""
    return _openai_codec.chat_body_from_reply(reply)


def body_events(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stream events a streamed request would have been sent for ``body``."""
    return closed_events([{"data": c["data"]} for c in _openai_codec.chat_chunks_from_body(body)])


CODEC = Codec.of("openai_chat", globals())
