"""The OpenAI embeddings wire format: ``POST .../embeddings``.

A JSON request body with ``model`` and ``input`` (a text, a list of texts, or token arrays),
answered by a list of vectors (``data``, each ``embedding`` a list of floats, or base64 when
``encoding_format`` asks for it) and the input's token count. Never streamed. Spoken by
OpenAI and copied by other servers (Mistral, Together, vLLM, Ollama's ``/v1``). Its span is
the GenAI conventions' ``embeddings MODEL``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracely_otel.genai import ChatMessage, OutputMessage
from tracely_sdk.providers import _openai_codec
from tracely_sdk.providers.http import _openai_chat
from tracely_sdk.providers.http._codec import Codec

OPERATION = "embeddings"
"""The GenAI conventions' operation name of this format's calls."""

model_key = "model"
id_key = "id"


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return method == "POST" and path.rstrip("/").endswith("/embeddings")


def provider(host: str) -> str | None:
    return _openai_chat.provider(host)


def streamed(body: Mapping[str, Any]) -> bool:
    return False


def request_numbers(body: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return None, None, None


def messages(body: Mapping[str, Any]) -> list[ChatMessage]:
    """The texts to embed, one user message each (token arrays are not text: left out)."""
    given = body.get("input")
    texts = [given] if isinstance(given, str) else given if isinstance(given, list) else []
    return [
        {"role": "user", "parts": [{"type": "text", "content": text}]}
        for text in texts
        if isinstance(text, str)
    ]


def output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    return []  # vectors, not messages


def reasons(body: Mapping[str, Any]) -> list[str]:
    return []


def asks_for_tools(body: Mapping[str, Any]) -> bool:
    return False


def usage(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """The input's token count; an embedding has no output tokens."""
    counts = body.get("usage")
    tokens = counts.get("prompt_tokens") if isinstance(counts, Mapping) else None
    return (tokens, 0) if isinstance(tokens, int) and not isinstance(tokens, bool) else None


def body_from_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    raise ValueError("an embeddings response is never streamed")


def record_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return _openai_codec.record_headers(headers)


# --------------------------------------------------------------------------- other recordings

SDK_TAGS = (None, None)
"""No SDK tracely patches records embeddings: every recording of one is the wire's."""


def closed_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return events


def text_body(text: str, *, model: str, usage: tuple[int, int] | None) -> None:
    return None  # a text is no vector: a hand-written answer cannot be served


def text_events(text: str, *, model: str, usage: tuple[int, int] | None) -> None:
    return None


CODEC = Codec.of("openai_embeddings", globals())
