"""The Ollama native chat wire format: ``POST .../api/chat``.

A JSON request body with ``model``, ``messages`` (OpenAI-like; a tool call's ``arguments`` an
object) and ``options`` (``num_predict``, ``temperature``, ``top_p``, ...). Unless it says
``"stream": false`` it is answered by newline-delimited JSON (``application/x-ndjson``): one
object per line, each with a piece of the ``message``, the last with ``"done": true``, the
``done_reason`` and the token counts (``prompt_eval_count``, ``eval_count``); with
``"stream": false``, by that last object holding the whole message. What the ollama Python
client sends and reads; :mod:`._ollama_generate` is its ``/api/generate`` twin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracely_otel.genai import (
    ChatMessage,
    MessagePart,
    OutputMessage,
    content_parts,
    input_messages,
    tool_call_part,
)
from tracely_sdk.providers import _wire
from tracely_sdk.providers.http._codec import Codec

STREAM_CONTENT_TYPE = "application/x-ndjson"
"""How this format streams: one JSON object per line."""

model_key = "model"
id_key = "id"  # an answer has none

CREATED = "1970-01-01T00:00:00Z"  # the creation time of an answer made of a hand-written text
_SAFE_HEADERS = frozenset({"content-type"})


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return method == "POST" and path.rstrip("/").endswith("/api/chat")


def provider(host: str) -> str | None:
    return "ollama"


def streamed(body: Mapping[str, Any]) -> bool:
    """Whether the answer is streamed: Ollama streams unless asked not to."""
    return body.get("stream") is not False


def request_numbers(body: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The request's max tokens (``num_predict``), temperature and top-p, from its options."""
    options = body.get("options")
    options = options if isinstance(options, Mapping) else {}
    return options.get("num_predict"), options.get("temperature"), options.get("top_p")


def messages(body: Mapping[str, Any]) -> list[ChatMessage]:
    """The request's messages in the GenAI conventions' shape."""
    return input_messages(body.get("messages"))


def reply_parts(text: Any, thinking: Any, calls: Any) -> list[MessagePart]:
    """The parts of an answer: its thinking, its text and the tools it calls."""
    parts: list[MessagePart] = []
    if isinstance(thinking, str) and thinking:
        parts.append({"type": "reasoning", "content": thinking})
    parts.extend(content_parts(text or None))
    for call in calls or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            parts.append(
                tool_call_part(call.get("id"), function.get("name"), function.get("arguments"))
            )
    return parts


def finish_reason(body: Mapping[str, Any], parts: Sequence[MessagePart]) -> str:
    if any(part.get("type") == "tool_call" for part in parts):
        return "tool_call"
    return "length" if body.get("done_reason") == "length" else "stop"


def output_messages(body: Mapping[str, Any]) -> list[OutputMessage]:
    message = body.get("message")
    message = message if isinstance(message, Mapping) else {}
    parts = reply_parts(message.get("content"), message.get("thinking"), message.get("tool_calls"))
    return [{"role": "assistant", "parts": parts, "finish_reason": finish_reason(body, parts)}]


def reasons(body: Mapping[str, Any]) -> list[str]:
    reason = body.get("done_reason")
    return [reason] if isinstance(reason, str) and reason else []


def asks_for_tools(body: Mapping[str, Any]) -> bool:
    message = body.get("message")
    return isinstance(message, Mapping) and bool(message.get("tool_calls"))


def usage(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """The tokens read (``prompt_eval_count``) and written (``eval_count``)."""
    tokens_in, tokens_out = body.get("prompt_eval_count"), body.get("eval_count")
    if type(tokens_in) is int and type(tokens_out) is int:
        return tokens_in, tokens_out
    return None


def last_line(
    events: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], dict[str, Any]]:
    """A stream's recorded lines (their data), and the last one (ValueError with none)."""
    lines = [
        e["data"] for e in events if isinstance(e, Mapping) and isinstance(e.get("data"), Mapping)
    ]
    if not lines:
        raise ValueError("the recorded Ollama stream holds no line")
    return lines, dict(lines[-1])


def joined(pieces: Iterable[Any]) -> str:
    return "".join(piece for piece in pieces if isinstance(piece, str))


def body_from_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The answer that a stream's recorded lines add up to: the last line (the counts and
    the reason it stopped) holding the whole message."""
    lines, body = last_line(events)
    said = [line.get("message") for line in lines]
    said_ = [m for m in said if isinstance(m, Mapping)]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": joined(m.get("content") for m in said_),
    }
    thinking = joined(m.get("thinking") for m in said_)
    if thinking:
        message["thinking"] = thinking
    calls = [c for m in said_ for c in m.get("tool_calls") or ()]
    if calls:
        message["tool_calls"] = calls
    body["message"] = message
    return body


def record_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return _wire.kept_headers(headers, _SAFE_HEADERS)


# --------------------------------------------------------------------------- other recordings

SDK_TAGS = (None, None)
"""No SDK tracely patches records Ollama: every recording of a call is the wire's."""


def closed_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return events


def counts(usage: tuple[int, int] | None) -> dict[str, int]:
    return {} if usage is None else {"prompt_eval_count": usage[0], "eval_count": usage[1]}


def text_body(text: str, *, model: str, usage: tuple[int, int] | None) -> dict[str, Any]:
    """The answer to ``text`` (a hand-written entry's), as a ``"stream": false`` call gets it."""
    return {
        "model": model,
        "created_at": CREATED,
        "message": {"role": "assistant", "content": text},
        "done": True,
        "done_reason": "stop",
        **counts(usage),
    }


def text_events(text: str, *, model: str, usage: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The lines that stream ``text``, word by word."""
    lines: list[dict[str, Any]] = [
        {
            "data": {
                "model": model,
                "created_at": CREATED,
                "message": {"role": "assistant", "content": piece},
                "done": False,
            }
        }
        for piece in _wire.word_pieces(text)
    ]
    last = text_body("", model=model, usage=usage)
    return [*lines, {"data": last}]


CODEC = Codec.of("ollama_chat", globals())
