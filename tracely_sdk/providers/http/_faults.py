"""Model-call faults as the wire carries them: what a robustness run serves at the HTTP client.

A derived run (:mod:`tracely_sdk._faults`) fails one recorded model call. The failure is served
where a live one arrives, at the client: the recorded entry is replaced by an exchange of the
HTTP layer (type tag ``http.response``), and the SDK's own HTTP client gets the fault's
status, headers and body, or its transport error. The SDK then raises what it
raises live (``openai.RateLimitError``, ``anthropic.InternalServerError``,
``openai.APITimeoutError``, its connection error for a stream cut short), after its own
retries, and litellm or a home-made client does whatever it does.

The kinds, per wire format (one table, :data:`_ERRORS`):

- ``rate_limit``: HTTP 429 with the provider's error body (OpenAI's APIs and Anthropic's; a
  format without one here, Cohere's or Ollama's, is skipped);
- ``server_error``: HTTP 500 (OpenAI's APIs) or 529 ``overloaded_error`` (Anthropic);
- ``timeout``: the client's read timeout (httpx's ``ReadTimeout``, urllib3's
  ``ReadTimeoutError``), as when the server never answers in time;
- ``stream_cut``: a streamed reply whose connection drops after its first events or NDJSON
  lines (half of them, at least one; never its closing ones), as ``RemoteProtocolError``
  mid-body. Only a call recorded streamed has one, and not one replayed at urllib3;
- ``refusal``: a complete answer with no text whose finish reason is the provider's refusal:
  ``finish_reason: "content_filter"`` (OpenAI chat completions), ``stop_reason: "refusal"``
  (Anthropic); other formats have none here.

Every served 429 and 5xx says ``retry-after: 0`` and ``retry-after-ms: 1``: the SDKs honour the
millisecond header (and ignore a zero delay, falling back to their own backoff of half a second
and more), so an SDK's retries after a fault cost a millisecond each; what the agent does is
what it does after a longer wait. A ``timeout`` carries no header, and an SDK backs off from it
as it does live.

Only calls recorded in a wire format the HTTP layer serves can be faulted: recorded there, or
by the SDK of that format (``openai.chat.completion``, ``openai.response``,
``anthropic.message`` and their streams). A call recorded by ``call_llm`` or written by hand
never reaches a client on replay: such a call is skipped, with that reason.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tracely_sdk.providers._patching import WIRE_TAG
from tracely_sdk.providers.http import (
    _anthropic_messages,
    _openai_chat,
    _openai_embeddings,
    _openai_responses,
)
from tracely_sdk.providers.http._codec import Codec
from tracely_sdk.providers.http._exchange import (
    FORMATS,
    _response_body,
    format_for,
    served_output,
)

__all__ = ["MODEL_KINDS", "fault_entry", "format_of", "served_input"]

MODEL_KINDS = ("rate_limit", "server_error", "timeout", "stream_cut", "refusal")

_RETRY_NOW = {"retry-after": "0", "retry-after-ms": "1"}

# Per wire format: the status, headers and body of each HTTP error, as the provider sends it.
_ERRORS: dict[Codec, dict[str, tuple[int, dict[str, str], dict[str, Any]]]] = {
    _openai_chat.CODEC: {
        "rate_limit": (
            429,
            {**_RETRY_NOW, "x-ratelimit-remaining-requests": "0"},
            {
                "error": {
                    "message": "Rate limit reached for requests (a fault tracely injected)",
                    "type": "requests",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
        ),
        "server_error": (
            500,
            dict(_RETRY_NOW),
            {
                "error": {
                    "message": "The server had an error while processing your request "
                    "(a fault tracely injected)",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            },
        ),
    },
    _anthropic_messages.CODEC: {
        "rate_limit": (
            429,
            dict(_RETRY_NOW),
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "Number of requests has exceeded your rate limit "
                    "(a fault tracely injected)",
                },
            },
        ),
        "server_error": (
            529,
            dict(_RETRY_NOW),
            {
                "type": "error",
                "error": {
                    "type": "overloaded_error",
                    "message": "Overloaded (a fault tracely injected)",
                },
            },
        ),
    },
}

# OpenAI's other APIs answer with the same errors.
_ERRORS[_openai_responses.CODEC] = _ERRORS[_openai_embeddings.CODEC] = _ERRORS[_openai_chat.CODEC]

# The finish reason a refusal ends with, and where each format's answer keeps it.
_REFUSAL = {_openai_chat.CODEC: "content_filter", _anthropic_messages.CODEC: "refusal"}

# A read timeout as each client library raises it: httpx and httpx2 (which the SDKs use), or
# urllib3 (requests, botocore), for a call recorded there.
TIMEOUT = {"type": "ReadTimeout", "message": "The read operation timed out"}
URLLIB3_TIMEOUT = {"type": "ReadTimeoutError", "message": "Read timed out."}
CUT = {
    "type": "RemoteProtocolError",
    "message": "peer closed connection without sending complete message body "
    "(incomplete chunked read)",
}


def _on_urllib3(entry: Mapping[str, Any]) -> bool:
    """Whether the call was recorded at urllib3's client, which replays it there."""
    return str(entry.get("provider") or "").startswith("urllib3.")


def format_of(entry: Mapping[str, Any]) -> Codec | None:
    """The wire format whose codec serves ``entry`` at the client, or None."""
    tag = entry.get("output_type")
    if tag == WIRE_TAG:
        given = entry.get("input")
        if isinstance(given, Mapping) and isinstance(given.get("path"), str):
            return format_for(str(given.get("method") or "POST"), given["path"])
        return None
    for codec in FORMATS:
        if tag and tag in codec.SDK_TAGS:
            return codec
    return None


def served_input(codec: Codec, entry: Mapping[str, Any]) -> Any:
    """The recorded input as the HTTP layer compares it: an SDK's arguments (``{"messages",
    ...}``) as the GenAI conventions' messages, which a call seen at the client is compared
    with; a request recorded at the client as it is."""
    given = entry.get("input")
    if entry.get("output_type") == WIRE_TAG or not isinstance(given, Mapping):
        return given
    try:
        return codec.messages(given)
    except (ValueError, TypeError):
        return given


def _stream_key(output: Mapping[str, Any]) -> str | None:
    """Where a recorded exchange keeps its stream: SSE ``events`` or NDJSON ``lines``."""
    return next((k for k in ("events", "lines") if isinstance(output.get(k), list)), None)


def _streamed(codec: Codec, entry: Mapping[str, Any]) -> bool:
    output = entry.get("output")
    if entry.get("output_type") == WIRE_TAG:
        return isinstance(output, Mapping) and _stream_key(output) is not None
    return bool(entry.get("output_type") == codec.SDK_TAGS[1])


def fault_entry(
    entry: Mapping[str, Any], kind: str, model: str
) -> tuple[dict[str, Any] | None, str]:
    """The entry that serves fault ``kind`` at the client in place of the recorded ``entry``
    of a call to ``model``, or None and why the call cannot have that fault."""
    codec = format_of(entry)
    if codec is None:
        if entry.get("output_type") in (None, "gen_ai.messages"):
            why = "recorded by call_llm or another instrumentor, not at an SDK or HTTP client"
        else:
            why = f"recorded as {entry.get('output_type')}, which is not served at the HTTP client"
        return None, f"a model fault is served at the HTTP client: this call was {why}"
    kept: dict[str, Any] = {k: entry[k] for k in ("seq", "provider") if k in entry}
    if "input" in entry:
        kept["input"] = served_input(codec, entry)
    kept["output_type"] = WIRE_TAG
    streamed = _streamed(codec, entry)
    recorded_error = entry.get("error")
    if kind in ("rate_limit", "server_error"):
        if kind not in _ERRORS.get(codec, {}):
            return None, f"tracely has no {kind} error body of this API ({codec.name})"
        status, headers, body = _ERRORS[codec][kind]
        recorded = entry.get("output")
        if (
            isinstance(recorded, Mapping)
            and entry.get("output_type") == WIRE_TAG
            and recorded.get("status") == status
        ):
            return (
                None,
                f"the call is recorded answered HTTP {status}: the case itself replays that",
            )
        output = {
            "status": status,
            "headers": {"content-type": "application/json", **headers},
            "body": copy.deepcopy(body),  # each derived recording its own
        }
        return {**kept, "output": output}, ""
    if kind == "timeout":
        if isinstance(recorded_error, Mapping) and "Timeout" in str(recorded_error.get("type")):
            return None, "the call is recorded timing out: the case itself replays that"
        return {**kept, "error": dict(URLLIB3_TIMEOUT if _on_urllib3(entry) else TIMEOUT)}, ""
    if "output" not in entry:
        return None, "the call is recorded failing: it has no answer to cut or refuse"
    try:
        exchange = served_output(codec, entry, model, streamed=streamed)
    except Exception as exc:  # a recording the client layer cannot serve: say so
        return None, f"the recorded answer cannot be served at the HTTP client ({exc})"
    if not isinstance(exchange.get("status"), int) or exchange["status"] >= 400:
        return None, "the call is recorded answered with an HTTP error: it has no answer"
    if kind == "stream_cut":
        key = _stream_key(exchange)
        if not streamed or key is None:
            return None, "the call is not streamed: it has no stream to cut"
        if _on_urllib3(entry):
            return None, "a reply replayed at urllib3 is served whole: tracely cannot cut it"
        events = exchange[key]
        if len(events) < 2:
            return None, "the recorded stream has a single event: nothing comes after it to cut"
        shown = max(1, len(events) // 2)
        cut = {**exchange, key: list(events[:shown]), "cut": dict(CUT)}
        return {**kept, "output": cut}, ""
    if kind == "refusal":
        if codec not in _REFUSAL:
            return None, f"tracely serves no refusal of this API ({codec.name})"
        return _refusal(codec, exchange, kept, model, streamed)
    raise ValueError(f"unknown model fault kind {kind!r}; use {', '.join(MODEL_KINDS)}")


def _refusal(
    codec: Codec,
    exchange: Mapping[str, Any],
    kept: dict[str, Any],
    model: str,
    streamed: bool,
) -> tuple[dict[str, Any] | None, str]:
    reason = _REFUSAL[codec]
    answer = _response_body(codec, exchange)
    if reason in codec.reasons(answer):
        return None, f"the call is recorded ending with {reason}: the case itself replays that"
    answered_model = str(answer.get(codec.model_key) or model)
    usage = codec.usage(answer)
    if streamed:
        events = codec.text_events("", model=answered_model, usage=usage)
        events = [
            _refused(e, reason, answer.get(codec.id_key)) for e in codec.closed_events(events)
        ]
        output: dict[str, Any] = {**exchange, "events": events}
    else:
        body = codec.text_body("", model=answered_model, usage=usage)
        output = {
            **exchange,
            "body": _refused({"data": body}, reason, answer.get(codec.id_key))["data"],
        }
    output.pop("text", None)
    output.pop("base64", None)
    return {**kept, "output": output}, ""


def _refused(event: dict[str, Any], reason: str, answer_id: Any) -> dict[str, Any]:
    """An answer's body or stream event, its finish reason made ``reason`` and its id kept."""
    data = event.get("data")
    if not isinstance(data, dict):
        return event
    data = dict(data)
    if isinstance(answer_id, str) and "id" in data:
        data["id"] = answer_id
    if "choices" in data:  # OpenAI-compatible
        data["choices"] = [
            {**c, "finish_reason": reason} if c.get("finish_reason") else c for c in data["choices"]
        ]
    if data.get("stop_reason"):  # an Anthropic message
        data["stop_reason"] = reason
    delta = data.get("delta")
    if isinstance(delta, dict) and delta.get("stop_reason"):  # Anthropic's message_delta
        data["delta"] = {**delta, "stop_reason": reason}
    message = data.get("message")
    if isinstance(message, dict) and isinstance(answer_id, str):  # Anthropic's message_start
        data["message"] = {**message, "id": answer_id}
    return {**event, "data": data}
