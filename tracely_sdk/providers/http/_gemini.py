"""The Gemini API's wire format: ``POST .../models/{model}:generateContent`` here, and
``:streamGenerateContent`` in :mod:`._gemini_stream`, which shares all but the path.

Spoken by the Gemini API (``v1``, ``v1beta``, ``v1alpha``) and Vertex AI (its
``.../publishers/google/models/{model}:...`` paths). The model is named in the path, not the
body; the body holds ``contents``, an optional ``systemInstruction`` and a
``generationConfig``. ``:generateContent`` is answered by one ``GenerateContentResponse``,
``:streamGenerateContent`` by a stream of them: server-sent ``data:`` events when the query
asks ``alt=sse``, else one JSON array whose items arrive one by one (recorded as the array).

Messages, finish reasons and usage are read by the google-genai SDK's codec, which reads the
API's camelCase as it reads the SDK's own JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracely_otel.genai import ChatMessage, OutputMessage
from tracely_sdk.providers import _google_genai_codec as genai
from tracely_sdk.providers._patching import (
    GEN_AI_OUTPUT_TYPE,
    Reply,
    json_value,
    pieces,
    token_counts,
)
from tracely_sdk.providers.http._codec import Codec

model_key = "modelVersion"
id_key = "responseId"

_PATH = re.compile(r"/(?:models|tunedModels)/([^/:]+):(generateContent|streamGenerateContent)$")


def operation(method: str, path: str) -> str | None:
    """The method a request calls (``generateContent`` or ``streamGenerateContent``), or None
    (``countTokens`` and the embedding methods are not model calls of this format)."""
    match = _PATH.search(path) if method == "POST" else None
    return match.group(2) if match else None


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format: ``:generateContent``."""
    return operation(method, path) == "generateContent"


def path_model(path: str) -> str | None:
    """The model the path names (``gemini-2.0-flash``)."""
    match = _PATH.search(path)
    return match.group(1) if match else None


def streamed(body: Mapping[str, Any]) -> bool:
    return False  # :streamGenerateContent is another path


def provider(host: str) -> str | None:
    return "gcp.vertex_ai" if host.endswith("aiplatform.googleapis.com") else "gcp.gemini"


def _config(body: Mapping[str, Any]) -> Mapping[str, Any]:
    config = body.get("generationConfig", body.get("generation_config"))
    return config if isinstance(config, Mapping) else {}


def request_numbers(body: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The request's max tokens, temperature and top-p (None where not given)."""
    config = _config(body)
    return (
        config.get("maxOutputTokens", config.get("max_output_tokens")),
        config.get("temperature"),
        config.get("topP", config.get("top_p")),
    )


def messages(body: Mapping[str, Any]) -> list[ChatMessage]:
    """The request's contents (its system instruction first) in the GenAI conventions' shape."""
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise ValueError("a Gemini request's contents are a list")
    system = body.get("systemInstruction", body.get("system_instruction"))
    if isinstance(system, Mapping):
        system = system.get("parts")
    return genai.genai_input_messages(contents, system)


def output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    return genai.genai_output_messages(body)


def reasons(body: Mapping[str, Any]) -> list[str]:
    return genai.finish_reasons(body)


def asks_for_tools(body: Mapping[str, Any]) -> bool:
    return genai.asks_for_tools(body)


def usage(body: Mapping[str, Any]) -> tuple[int, int] | None:
    return genai.usage_of(body)


def body_from_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The response that a stream's recorded chunks add up to."""
    return genai.body_from_chunks([e["data"] for e in events if isinstance(e.get("data"), Mapping)])


def record_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return genai.record_headers(headers)


# --------------------------------------------------------------------------- other recordings

SDK_TAGS = ("", "")
"""None: the google-genai SDK patches of tracely-replay 0.5 and earlier recorded the SDK's
objects' JSON, not the API's: such an entry is refused, saying which version reads it."""


def request_extras(body: Mapping[str, Any], provider: str) -> dict[str, Any]:
    """The output type a structured-output request asks for."""
    config = _config(body)
    mime = config.get("responseMimeType", config.get("response_mime_type"))
    return {GEN_AI_OUTPUT_TYPE: "json"} if mime == "application/json" else {}


def system_instructions(body: Mapping[str, Any]) -> list[Any] | None:
    """The request's ``systemInstruction`` as the GenAI conventions' system instructions."""
    system = body.get("systemInstruction", body.get("system_instruction"))
    if isinstance(system, str):
        return [{"type": "text", "content": system}]
    parts = system.get("parts") if isinstance(system, Mapping) else None
    if not isinstance(parts, list):
        return None
    return [
        {"type": "text", "content": p["text"]}
        for p in parts
        if isinstance(p, Mapping) and isinstance(p.get("text"), str)
    ]


_FINISH_FROM_GENAI = {"length": "MAX_TOKENS", "content_filter": "SAFETY"}


def reply_body(reply: Reply) -> dict[str, Any]:
    """The response that answers ``reply`` (an entry read from another instrumentor's span)."""
    candidates = []
    for index, (text, calls, reason) in enumerate(reply.messages):
        parts: list[dict[str, Any]] = []
        if text is not None and (text or not calls):
            parts.append({"text": text})
        parts.extend(
            {"functionCall": {"id": cid, "name": name, "args": json_value(arguments)}}
            for cid, name, arguments in calls
        )
        candidates.append(
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": _FINISH_FROM_GENAI.get(reason, "STOP"),
                "index": index,
            }
        )
    body: dict[str, Any] = {
        "candidates": candidates,
        "modelVersion": reply.model,
        "responseId": reply.response_id,
    }
    usage = token_counts(
        reply.usage, ("promptTokenCount", "candidatesTokenCount", "totalTokenCount")
    )
    if usage is not None:
        body["usageMetadata"] = usage
    return body


def body_events(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stream a streamed request would have been sent for ``body``: that one chunk."""
    return [{"data": dict(body)}]


def closed_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stream's events as the wire ends them (its last chunk, no marker)."""
    return events


def _chunk(
    text: str, *, model: str, usage: tuple[int, int] | None, finished: bool
) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": text}]},
        "index": 0,
    }
    if finished:
        candidate["finishReason"] = "STOP"
    body: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": model,
        "responseId": "replay",
    }
    if usage is not None and finished:
        tokens_in, tokens_out = usage
        body["usageMetadata"] = {
            "promptTokenCount": tokens_in,
            "candidatesTokenCount": tokens_out,
            "totalTokenCount": tokens_in + tokens_out,
        }
    return body


def text_body(text: str, *, model: str, usage: tuple[int, int] | None) -> dict[str, Any]:
    """The response that answers ``text`` (a hand-written entry's answer)."""
    return _chunk(text, model=model, usage=usage, finished=True)


def text_events(text: str, *, model: str, usage: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The stream chunks that answer ``text``, word by word."""
    words = pieces(text) or [""]
    return [
        {"data": _chunk(word, model=model, usage=usage, finished=i == len(words) - 1)}
        for i, word in enumerate(words)
    ]


CODEC = Codec.of("gemini", globals())
