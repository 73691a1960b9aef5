"""Recorded JSON to and from the Anthropic SDK's beta objects (``client.beta.messages``).

The beta Messages API speaks the same wire format as ``messages``: a recording is the one
``_anthropic_codec`` writes (``{"object": "message", "body", "request_id"}``, or the named
stream events), so a recording of either surface serves a call of either. What differs is the
classes a call returns: ``BetaMessage``, ``ParsedBetaMessage``, ``Stream[BetaRawMessageStreamEvent]``
and the beta parser of ``beta.messages.parse``. This module rebuilds those, with the same
signatures as ``_anthropic_codec``'s rebuilders; recording headers, chunks and errors is the
plain codec's.

Importing this module imports neither ``anthropic`` nor ``httpx2``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from tracely_sdk.providers import _anthropic_codec as plain
from tracely_sdk.providers import _wire
from tracely_sdk.providers._anthropic_codec import (
    ResponseKind,
    raw_response_mode,
    rebuild_error,
    record_chunk,
    record_error,
    record_headers,
)

_BETA_PATH = "v1/messages?beta=true"


@functools.cache
def _message_class() -> Any:
    from anthropic.types.beta import BetaMessage

    return BetaMessage


def record_response(obj: Any, wire: dict[str, Any] | None = None) -> dict[str, Any]:
    """The recording of a ``BetaMessage`` or ``ParsedBetaMessage``: the plain codec's form."""
    if not isinstance(obj, _message_class()):
        raise TypeError(f"cannot record {type(obj).__name__}: expected an anthropic BetaMessage")
    return plain.message_recording(obj, wire)


def _parse(message: Any, output_format: Any) -> Any:
    from anthropic.lib._parse._response import parse_beta_response

    return parse_beta_response(output_format=plain._given(output_format), response=message)


def rebuild_response(
    kind: ResponseKind, recorded: Mapping[str, Any] | bytes, *, output_format: Any = None
) -> Any:
    """The ``BetaMessage`` (``message``) or ``ParsedBetaMessage`` (``message.parsed``, parsed
    by the SDK's own beta parser with the caller's ``output_format``) that ``recorded`` was."""
    if kind != "message" and kind != "message.parsed":
        raise ValueError(f"unknown kind {kind!r}; expected 'message' or 'message.parsed'")
    types = plain._types()
    result, request_id = _wire.load_response(
        _message_class(), recorded, types.validation_error, plain._body, "message"
    )
    if kind == "message.parsed":
        result = _parse(result, output_format)
    plain._add_ids(result, request_id)
    return result


def _url(client: Any) -> str:
    return plain._url(client).removesuffix("v1/messages") + _BETA_PATH


def _stream_types(kind: Any, client: Any) -> tuple[Any, Any]:
    from anthropic import AsyncStream, Stream
    from anthropic.types.beta import BetaRawMessageStreamEvent

    cls = AsyncStream if plain._is_async(client) else Stream
    return cls[BetaRawMessageStreamEvent], BetaRawMessageStreamEvent


def _stream_class(client: Any) -> Any:
    return _stream_types("message", client)[0]


rebuild_stream = _wire.stream_rebuilder(
    "anthropic",
    plain.sse_pieces,
    _stream_types,
    lambda kind, client: _url(client),
    "beta.messages.create(..., stream=True)",
)


def rebuild_raw_response(
    kind: ResponseKind,
    recorded: Mapping[str, Any] | None = None,
    *,
    client: Any,
    chunks: Sequence[Mapping[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
    output_format: Any = None,
) -> Any:
    """What ``client.beta.messages.with_raw_response.create(...)`` returns over a recording:
    the SDK's ``APIResponse`` / ``AsyncAPIResponse`` whose ``.parse()`` gives the beta types."""
    return plain.raw_response_over(
        kind,
        recorded,
        client=client,
        chunks=chunks,
        headers=headers,
        path="/v1/messages?beta=true",
        cast_to=_message_class(),
        stream_cls=_stream_class(client) if chunks is not None else None,
        parse=lambda message: _parse(message, output_format),
    )


# Recording headers, chunks and errors is the plain codec's: re-exported so this module is the
# beta provider's whole codec.
__all__ = [
    "raw_response_mode",
    "rebuild_error",
    "rebuild_raw_response",
    "rebuild_response",
    "rebuild_stream",
    "record_chunk",
    "record_error",
    "record_headers",
    "record_response",
]
