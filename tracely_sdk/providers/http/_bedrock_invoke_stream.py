"""Amazon Bedrock's InvokeModelWithResponseStream wire format:
``POST /model/{modelId}/invoke-with-response-stream``.

The model is in the path and the request is the model's own JSON, as for InvokeModel
(:mod:`._bedrock_invoke`). The answer is an AWS event stream (see :mod:`._eventstream`) of
``chunk`` events whose payload carries one event of the model family's own stream, as base64
JSON::

    {"headers": {":event-type": "chunk", ...}, "data": {"bytes": "eyJ0eXBlIjoibWVzc2FnZV9zdGFydCIs..."}}

Recorded as the wire carried it; read here as Anthropic's messages events on Bedrock
(``message_start`` ... ``message_stop``), whose message gives the span its id, model, finish
reason and usage. Bedrock puts ``amazon-bedrock-invocationMetrics`` (its token counts) on the
last chunk of every family, so the usage of a family not read here comes from there; a chunk
that cannot be read is left out of the span, never a reason to fail the call.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from tracely_sdk.providers.http import _anthropic_messages, _bedrock, _bedrock_invoke

_METRICS = "amazon-bedrock-invocationMetrics"


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return _bedrock.operation(method, path) == "invoke-with-response-stream"


def streamed(body: Mapping[str, Any]) -> bool:
    return True  # the path asks for the stream, whatever the body says


def model_events(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The model family's own events that recorded ``chunk`` events carry, decoded (a chunk
    whose ``bytes`` are not base64 JSON of an object is left out)."""
    decoded: list[dict[str, Any]] = []
    for event in events:
        headers, data = event.get("headers"), event.get("data")
        if not isinstance(headers, Mapping) or headers.get(":event-type") != "chunk":
            continue
        encoded = data.get("bytes") if isinstance(data, Mapping) else None
        if not isinstance(encoded, str):
            continue
        try:
            value = orjson.loads(base64.b64decode(encoded, validate=True))
        except ValueError:  # binascii.Error and orjson.JSONDecodeError both are
            continue
        if isinstance(value, dict):
            decoded.append(value)
    return decoded


def _metrics_usage(decoded: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    for event in reversed(decoded):
        metrics = event.get(_METRICS)
        if isinstance(metrics, Mapping):
            tokens_in, tokens_out = metrics.get("inputTokenCount"), metrics.get("outputTokenCount")
            if isinstance(tokens_in, int) and isinstance(tokens_out, int):
                return {"input_tokens": tokens_in, "output_tokens": tokens_out}
    return None


def body_from_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The Anthropic message the stream's chunks add up to; for a family not read here, only
    its usage, from Bedrock's invocation metrics (ValueError when the stream has neither)."""
    decoded = model_events(events)
    if any(event.get("type") == "message_start" for event in decoded):
        body = _anthropic_messages.body_from_events([{"data": event} for event in decoded])
        if _anthropic_messages.usage(body) is not None:
            return body
    else:
        body = {}
    counts = _metrics_usage(decoded)
    if counts is None and not body:
        raise ValueError("a Bedrock response stream with no message_start and no metrics")
    if counts is not None:
        body["usage"] = counts
    return body


def _chunk(event: Mapping[str, Any]) -> dict[str, Any]:
    headers = {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return {"headers": headers, "data": {"bytes": base64.b64encode(orjson.dumps(event)).decode()}}


def text_events(text: str, *, model: str, usage: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The chunks that answer ``text`` word by word, each an Anthropic stream event."""
    events = _anthropic_messages.text_events(text, model=model, usage=usage)
    return [_chunk(event["data"]) for event in events]


CODEC = dataclasses.replace(
    _bedrock_invoke.CODEC,
    name="bedrock_invoke_stream",
    answers=answers,
    streamed=streamed,
    body_from_events=body_from_events,
    text_events=text_events,
    STREAM_CONTENT_TYPE=_bedrock.STREAM_CONTENT_TYPE,
)
