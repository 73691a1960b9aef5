"""Recorded JSON to and from google-genai SDK objects: pure functions, with no patching and no network.

Importing this module imports no ``google.genai``; each function imports what it needs.

What a recording holds (all plain JSON)::

    record_response(response) -> {"body": {...}}
    record_chunk(response)    -> {...}
    record_error(exc)         -> {"type": "ClientError", "message": "429 RESOURCE_EXHAUSTED. {...}",
                                  "code": 429, "status": "RESOURCE_EXHAUSTED", "details": {"error": {...}}}

``body`` and a chunk are the SDK's ``GenerateContentResponse`` as its own JSON dump (field names as
the SDK spells them, unset fields left out), whichever API (Gemini or Vertex AI) answered; its
``sdk_http_response`` keeps only the headers in ``SAFE_HEADERS`` (and the raw body, for a call
made with ``should_return_http_response``). The value the SDK parses with
the caller's ``response_schema`` (``parsed``) is not recorded: it is parsed again on rebuild, by
the SDK, from the recorded text. ``type`` is for people reading the recording: the exception is
chosen by the SDK's own table from the recorded code.

Rebuilding::

    rebuild_response(recorded[, parse=...])             -> GenerateContentResponse
    rebuild_stream(chunks, is_async=...[, parse=...])   -> a generator / async generator of them
    rebuild_error(recorded)                             -> google.genai.errors.ClientError / ServerError / APIError
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson

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
_NOT_RECORDED = frozenset({"parsed", "automatic_function_calling_history"})


@functools.cache
def _response_class() -> Any:
    from google.genai.types import GenerateContentResponse

    return GenerateContentResponse


def _dump(response: Any) -> dict[str, Any]:
    if not isinstance(response, _response_class()):
        raise TypeError(
            f"cannot record {type(response).__name__}: expected a google-genai GenerateContentResponse"
        )
    body: dict[str, Any] = response.model_dump(
        mode="json", exclude_none=True, exclude=_NOT_RECORDED
    )
    http = body.get("sdk_http_response")
    if isinstance(http, dict):
        kept = {"headers": record_headers(http.get("headers") or {})}
        if "body" in http:  # the raw answer, of a call made with should_return_http_response
            kept["body"] = http["body"]
        body["sdk_http_response"] = kept
    return body


def record_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers of a response that a recording may keep (``SAFE_HEADERS``)."""
    return _wire.kept_headers(headers, SAFE_HEADERS)


def raw_response_mode(extra_headers: Mapping[str, Any] | None) -> None:
    """Always None: the SDK has no raw-response wrappers (a call that wants the HTTP body says
    so in its config, and gets it on the response's ``sdk_http_response``)."""
    return None


def record_response(response: Any, wire: dict[str, Any] | None = None) -> dict[str, Any]:
    """The recording of a non-streamed ``GenerateContentResponse`` (``wire`` is unused: the SDK
    keeps no response body apart from its object)."""
    return {"body": _dump(response)}


def record_chunk(chunk: Any, wire: dict[str, Any] | None = None) -> dict[str, Any]:
    """The recording of one streamed ``GenerateContentResponse``."""
    return _dump(chunk)


def record_error(exc: BaseException) -> dict[str, Any]:
    """The recording of a call the API answered with an error (a ``google.genai.errors.APIError``)."""
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "code": getattr(exc, "code", None),
        "status": getattr(exc, "status", None),
        "details": getattr(exc, "details", None),
    }


def rebuild_error(recorded: Mapping[str, Any], *, url: str | None = None) -> BaseException:
    """The SDK's exception for a recorded error: the class its own table gives for the code
    (``ClientError`` for 4xx, ``ServerError`` for 5xx), with the recorded details. (The SDK's
    errors hold no request, so ``url`` is not used.)"""
    from google.genai import errors

    code = _wire.error_status(recorded.get("code"))
    try:
        errors.APIError.raise_error(code, recorded.get("details") or {}, None)
    except errors.APIError as exc:
        return exc
    raise AssertionError("google.genai.errors.APIError.raise_error returned")  # pragma: no cover


def _body(recorded: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(recorded, Mapping):
        raise TypeError(f"a recorded response is a mapping, not {type(recorded).__name__}")
    body = recorded.get("body")
    if not isinstance(body, Mapping):
        raise ValueError("the recording of a response has no body")
    return body


def rebuild_response(
    recorded: Mapping[str, Any] | bytes, *, parse: Mapping[str, Any] | None = None
) -> Any:
    """The ``GenerateContentResponse`` that ``recorded`` (``{"body": ...}``, or its JSON text)
    was. ``parse`` is what the SDK gives its own parsing (``{"config": {"response_schema": ...}}``)
    when the call asked for structured output: ``parsed`` is then made by the SDK, as live."""
    import pydantic

    cls = _response_class()
    if parse is None:
        response, _ = _wire.load_response(
            cls, recorded, pydantic.ValidationError, _body, "response"
        )
        return response
    mapping = orjson.loads(recorded) if isinstance(recorded, bytes) else recorded
    return cls._from_response(response=dict(_body(mapping)), kwargs=dict(parse))


def _replayed(items: list[Any]) -> Iterator[Any]:
    yield from items


async def _areplayed(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def rebuild_stream(
    chunks: Sequence[Mapping[str, Any]],
    *,
    is_async: bool,
    parse: Mapping[str, Any] | None = None,
) -> Any:
    """What ``_generate_content_stream`` gives over the recorded ``chunks``: a generator (an
    async generator for ``client.aio``) of ``GenerateContentResponse``, each rebuilt at once so
    that a recording that cannot be served fails at the call, not in the middle of the stream."""
    items = [rebuild_response({"body": chunk}, parse=parse) for chunk in chunks]
    return _areplayed(items) if is_async else _replayed(items)


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
