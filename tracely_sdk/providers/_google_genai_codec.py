"""The Gemini API's bodies as the wire codecs (``providers.http._gemini``, ``_gemini_stream``) read
them: pure functions over JSON, which read the API's camelCase as they read snake_case.

The GenAI conventions' messages of a request and of an answer, finish reasons, usage, a stream's
chunks added up to the response they stand for, and the headers a recording keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracely_otel.genai import (
    ChatMessage,
    OutputMessage,
    content_parts,
    genai_finish_reason,
    input_messages,
)
from tracely_sdk.providers import _wire

SAFE_HEADERS = frozenset({"content-type", "retry-after"})
"""Response headers a recording may keep: nothing that names an account or a server."""

# Set on the response by the SDK's public methods or parsed from the caller's schema: never the
# API's answer.


def record_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers of a response that a recording may keep (``SAFE_HEADERS``)."""
    return _wire.kept_headers(headers, SAFE_HEADERS)


# --------------------------------------------------------------------------------------------- chunks


def _add_part(parts: list[dict[str, Any]], part: Mapping[str, Any]) -> None:
    last = parts[-1] if parts else None
    text = part.get("text")
    if (
        last is not None
        and isinstance(text, str)
        and isinstance(last.get("text"), str)
        and last.get("thought") == part.get("thought")
        and not (set(part) - {"text", "thought", "thought_signature", "thoughtSignature"})
    ):
        last["text"] += text
        for key in ("thought_signature", "thoughtSignature"):
            if key in part:
                last[key] = part[key]
        return
    parts.append(dict(part))


def body_from_chunks(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The one response that recorded stream ``chunks`` (the SDK's JSON or the API's) add up to:
    each candidate's text parts joined, its other parts in order, the last value of everything
    else."""
    body: dict[str, Any] = {}
    candidates: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if not isinstance(chunk, Mapping):
            continue
        for key, value in chunk.items():
            if key != "candidates":
                body[key] = value
        for candidate in chunk.get("candidates") or ():
            if not isinstance(candidate, Mapping):
                continue
            index = candidate.get("index")
            merged = candidates.setdefault(
                index if isinstance(index, int) else 0, {"content": {"parts": []}}
            )
            for key, value in candidate.items():
                if key != "content":
                    merged[key] = value
                    continue
                content = value if isinstance(value, Mapping) else {}
                if "role" in content:
                    merged["content"]["role"] = content["role"]
                for part in content.get("parts") or ():
                    if isinstance(part, Mapping):
                        _add_part(merged["content"]["parts"], part)
    if candidates:
        body["candidates"] = [candidates[i] for i in sorted(candidates)]
    return body


# --------------------------------------------------------------------------------------------- GenAI conventions
#
# Read from the SDK's JSON (snake_case) and the API's own (camelCase) alike: the SDK's recordings
# and the bodies the HTTP layer records (``providers.http._gemini``) are one conversation.


def _field(mapping: Mapping[str, Any], snake: str, camel: str) -> Any:
    return mapping.get(snake, mapping.get(camel))


# Gemini's finish reasons that the shared table does not know, as the conventions' values.
_FINISHES = dict.fromkeys(
    ("recitation", "blocklist", "prohibited_content", "spii", "image_safety"), "content_filter"
) | dict.fromkeys(("malformed_function_call", "unexpected_tool_call"), "error")


def _finish(reason: Any) -> str:
    lowered = reason.lower() if isinstance(reason, str) else reason
    return genai_finish_reason(_FINISHES.get(lowered, lowered), unknown="stop")


def _role(content: Mapping[str, Any]) -> str:
    role = content.get("role")
    return "assistant" if role == "model" else str(role or "user")


def genai_input_messages(contents: Sequence[Any], system: Any = None) -> list[ChatMessage]:
    """Contents in the GenAI conventions' ``gen_ai.input.messages`` shape (ValueError for what
    is not a list of contents)."""
    messages = [
        {"role": _role(c), "parts": c.get("parts") or []}
        for c in contents
        if isinstance(c, Mapping)
    ]
    return input_messages(messages, system)


def _candidates(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in body.get("candidates") or () if isinstance(c, Mapping)]


def genai_output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    """A response body in the GenAI conventions' ``gen_ai.output.messages`` shape."""
    return [
        {
            "role": "assistant",
            "parts": content_parts((candidate.get("content") or {}).get("parts") or []),
            "finish_reason": _finish(_field(candidate, "finish_reason", "finishReason")),
        }
        for candidate in _candidates(body)
    ]


def finish_reasons(body: Mapping[str, Any]) -> list[str]:
    """The candidates' finish reasons, as the API names them (lowercased)."""
    reasons = (_field(c, "finish_reason", "finishReason") for c in _candidates(body))
    return [reason.lower() for reason in reasons if isinstance(reason, str)]


def asks_for_tools(body: Mapping[str, Any]) -> bool:
    return any(
        isinstance(part, Mapping) and ("function_call" in part or "functionCall" in part)
        for candidate in _candidates(body)
        for part in (candidate.get("content") or {}).get("parts") or ()
    )


def usage_of(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """The (input, output) tokens of a response body's usage metadata, or None."""
    usage = _field(body, "usage_metadata", "usageMetadata")
    if not isinstance(usage, Mapping):
        return None
    prompt = _field(usage, "prompt_token_count", "promptTokenCount")
    if not isinstance(prompt, int):
        return None
    # The conventions count every input and output token: the API reports the prompt of its
    # own tools and the thinking apart.
    tokens_in = prompt + (
        _field(usage, "tool_use_prompt_token_count", "toolUsePromptTokenCount") or 0
    )
    tokens_out = (_field(usage, "candidates_token_count", "candidatesTokenCount") or 0) + (
        _field(usage, "thoughts_token_count", "thoughtsTokenCount") or 0
    )
    return tokens_in, tokens_out
