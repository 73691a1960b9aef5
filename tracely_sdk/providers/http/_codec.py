"""What a wire format's codec is: the one list of what the HTTP layer asks of a format.

Each format module (``_openai_chat``, ``_gemini_stream``, ...) builds its ``CODEC``: a base
format from its own functions (``Codec.of("openai_chat", globals())``), a variant as its base's
codec with what differs replaced (``dataclasses.replace(_gemini.CODEC, name=..., answers=...,
streamed=...)``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracely_otel.genai import ChatMessage, OutputMessage

Body = Mapping[str, Any]


@dataclass(frozen=True, eq=False)
class Codec:
    """One wire format's requests and answers, read and written.

    Compared by identity: each format has one codec, a key of tables such as the fault
    bodies of ``_faults``.
    """

    name: str
    """The format's name in messages, as ``openai_chat``."""
    answers: Callable[[str, str], bool]
    """Whether a request (upper-case method, path) is a model call of this format."""
    streamed: Callable[[Body], bool]
    """Whether a request body asks for a streamed answer."""
    provider: Callable[[str], str | None]
    """The ``gen_ai.provider.name`` of a host, or None to tell it by the model."""
    request_numbers: Callable[[Body], tuple[Any, Any, Any]]
    """A request's max tokens, temperature and top_p (None where not given)."""
    messages: Callable[[Body], list[ChatMessage]]
    """A request's input messages (ValueError when it holds none to read)."""
    output_messages: Callable[[Body], list[OutputMessage]]
    """An answer's output messages."""
    reasons: Callable[[Body], list[str]]
    """An answer's finish reasons."""
    asks_for_tools: Callable[[Body], bool]
    """Whether an answer asks for a tool call (its output messages are then read)."""
    usage: Callable[[Body], tuple[int, int] | None]
    """An answer's input and output token counts."""
    body_from_events: Callable[[Sequence[Body]], dict[str, Any]]
    """The answer a recorded stream's events (or lines) add up to."""
    record_headers: Callable[[Iterable[tuple[str, str]]], dict[str, str]]
    """The response headers kept in a recording (those a client reads; no secrets)."""
    closed_events: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
    """A stream's events with the end marker the format's clients wait for."""
    text_body: Callable[..., Any]
    """``(text, *, model, usage)``: the plain answer (a dict) to a hand-written text, or None
    when the format has no answer made of text (an embedding)."""
    text_events: Callable[..., Any]
    """``(text, *, model, usage)``: the stream (a list of events) that answers a hand-written
    text, or None."""
    model_key: str
    """The answer's key naming the model."""
    id_key: str
    """The answer's key naming the response."""
    SDK_TAGS: tuple[str | None, str | None]
    """The output types (plain, streamed) the SDK patches of tracely-replay 0.5 and earlier
    recorded this format's calls as, served again as this format's answers."""
    SDK_INPUT: tuple[str, ...] = ()
    """The request keys those SDK patches kept as a call's input, compared on replay."""
    UNCOMPARED: tuple[str, ...] = ()
    """Request keys that are no part of the prompt: left out of the recorded input."""
    OPERATION: str | None = None
    """The ``gen_ai.operation.name``, when not ``chat``."""
    STREAM_CONTENT_TYPE: str = "text/event-stream"
    """The content type of a streamed answer."""
    path_model: Callable[[str], str | None] | None = None
    """The model named by a request's path, for a format that names it there (else the
    body's ``model``)."""
    request_extras: Callable[[Body, str], dict[str, Any]] | None = None
    """``(body, provider)``: a request's span attributes of this format's own."""
    response_extras: Callable[[Body], dict[str, Any]] | None = None
    """An answer's span attributes of this format's own."""
    system_instructions: Callable[[Body], list[Any] | None] | None = None
    """A request's system prompt, kept apart from its input messages."""
    reply_body: Callable[[Any], dict[str, Any]] | None = None
    """The answer made of a reply read from another instrumentor's span (None: not served)."""
    body_events: Callable[[Body], list[dict[str, Any]]] | None = None
    """The stream that answers a whole answer body (with ``reply_body``)."""

    @classmethod
    def of(cls, name: str, namespace: Mapping[str, Any], **given: Any) -> Codec:
        """The codec made of the functions and constants of ``namespace`` (a format module's)
        named as its attributes, with ``given`` added; a TypeError names any it lacks."""
        names = {field.name for field in dataclasses.fields(cls)} - {"name"}
        found = {key: value for key, value in namespace.items() if key in names}
        return cls(name=name, **{**found, **given})


__all__ = ["Codec"]
