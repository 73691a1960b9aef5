"""Anthropic SDK patches: ``messages`` and ``beta.messages`` ``.create`` / ``.stream`` / ``.parse``.

Patched (class attributes, so every client sees them, the Bedrock and Vertex clients
included): ``Messages.create``, ``Messages.stream`` and ``Messages.parse`` and their async
twins, and the same six of ``client.beta.messages`` (its own classes). A beta call is recorded
exactly as a plain one (the wire format is one) and served as the beta types: ``BetaMessage``,
``ParsedBetaMessage``, ``Stream[BetaRawMessageStreamEvent]``, ``BetaMessageStreamManager``. ``messages.stream()`` does not go through ``create``: tracely keeps the SDK's own
``MessageStreamManager`` and intercepts the request it makes on entering, so ``text_stream``,
``get_final_message()`` and ``get_final_text()`` run unchanged, live and replayed.
``.with_raw_response`` / ``.with_streaming_response`` call ``create`` with a header saying
which wrapper made the call, and get the SDK's raw response objects back.

The recording of a call (``tracely.output``): ``anthropic.message``, the message as the API
sent it (``{"object", "body", "request_id"}``, plus ``headers`` when the call saw them), or
``anthropic.message.events``, ``{"chunks": [...], "headers": {...}}`` with every streamed event
in order under its SSE event name. Its input (``tracely.input``) is ``{"system", "messages",
"tools", "output_format"}``, the keys the call gave; a call answered by an entry whose input
is GenAI messages (read from another instrumentor's span) is compared in that form instead.

The SDK's own spans: live, the SDK makes an ``anthropic.messages.create`` span (when a tracer
provider is set) inside its ``request``; tracely's ``chat MODEL`` span is current around it, so
the SDK's span is its child, and the extractor (which drops calls nested in a recorded call)
makes one ``llm:`` entry of the pair. A replayed call is served above ``request``, so it
makes tracely's span only.

Not intercepted, so under recorded replay they reach the safety net and raise ReplayError:
``messages.count_tokens`` and ``beta.messages.count_tokens`` (a token count, not a model's
answer) and the rest of ``client.beta`` (files, batches, models). Run them live in lenient
mode, or outside the replayed code. A call the SDK refuses unstreamed ("Streaming is
required", an argument check before any request) is left to the SDK, live and replayed.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import anthropic
from anthropic._base_client import AsyncAPIClient, SyncAPIClient
from anthropic._constants import DEFAULT_TIMEOUT, MODEL_NONSTREAMING_TOKENS
from anthropic.resources.beta.messages.messages import AsyncMessages as AsyncBetaMessages
from anthropic.resources.beta.messages.messages import Messages as BetaMessages
from anthropic.resources.messages.messages import AsyncMessages, Messages

from tracely_otel import attributes as A
from tracely_otel.genai import ChatMessage, OutputMessage, content_parts, genai_finish_reason
from tracely_sdk.errors import ReplayError
from tracely_sdk.providers import _anthropic_beta_codec as beta_codec
from tracely_sdk.providers import _anthropic_codec as codec
from tracely_sdk.providers import _patching as P
from tracely_sdk.providers._install import Wrapper
from tracely_sdk.providers._provider import Provider, ProviderCall, request_attributes

PROVIDER = "anthropic"

TAG_MESSAGE = "anthropic.message"
TAG_EVENTS = "anthropic.message.events"
TAG_GENAI = "gen_ai.messages"

_OMIT = (anthropic.NotGiven, anthropic.Omit)
PROVIDER_LAYER = Provider(
    PROVIDER,
    codec,
    (anthropic.Anthropic, anthropic.AsyncAnthropic),
    (SyncAPIClient, AsyncAPIClient),
    refused={
        "/v1/messages/count_tokens": (
            "messages.count_tokens is not served: a token count is not a model's answer, and "
            "replay serves only recorded answers; run it live in lenient mode, or outside the "
            "replayed code"
        ),
    },
)
set_live = PROVIDER_LAYER.set_live
install = PROVIDER_LAYER.install
uninstall = PROVIDER_LAYER.uninstall
patched = PROVIDER_LAYER.patched


def _given(kwargs: Mapping[str, Any], key: str) -> Any:
    value = kwargs.get(key)
    return None if value is None or isinstance(value, _OMIT) else value


# --------------------------------------------------------------------------- GenAI conventions

_STOPS = codec.STOPS
genai_output_messages = codec.genai_output_messages
body_from_events = codec.body_from_events
_usage_of = codec.usage_of
_STOP_FROM_GENAI = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_call": "tool_use",
    "content_filter": "refusal",
}


def genai_input_messages(messages: Any) -> list[ChatMessage]:
    """Anthropic messages in the GenAI conventions' ``gen_ai.input.messages`` shape."""
    return [
        {"role": m.get("role"), "parts": content_parts(m.get("content"))}  # type: ignore[typeddict-item]
        for m in P.message_dicts(messages, _OMIT)
    ]


# --------------------------------------------------------------------------- synthesis


def message_body_from_reply(reply: P.Reply) -> dict[str, Any]:
    """A message body (``record_response``'s ``body``) answering ``reply``."""
    body: dict[str, Any] = codec.recording_from_text(
        "", model=reply.model, usage=reply.usage or (0, 0), message_id=reply.response_id
    )["body"]
    content: list[dict[str, Any]] = []
    finish = "stop"
    for text, calls, reason in reply.messages:
        finish = reason if reason != "stop" else finish
        if text is not None and (text or not calls):
            content.append({"type": "text", "text": text})
        content.extend(
            {"type": "tool_use", "id": cid, "name": name, "input": P.json_value(arguments)}
            for cid, name, arguments in calls
        )
    body["content"] = content
    body["stop_reason"] = _STOP_FROM_GENAI.get(finish, "end_turn")
    return body


def events_from_body(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The events (``record_chunk``'s shape) a streamed call would have sent for ``body``."""
    usage = dict(body.get("usage") or {})
    start = {
        **body,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(body.get("content") or []):
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "text": ""},
                }
            )
            events.extend(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                }
                for piece in P.pieces(str(block.get("text") or ""))
            )
        elif kind in ("tool_use", "server_tool_use"):
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {
                        "type": "input_json_delta",
                        "partial_json": P.json_text(block.get("input")),
                    },
                }
            )
        elif kind == "thinking":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "thinking": "", "signature": ""},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": block.get("thinking") or ""},
                }
            )
            if block.get("signature"):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": block["signature"]},
                    }
                )
        else:
            events.append(
                {"type": "content_block_start", "index": index, "content_block": dict(block)}
            )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": body.get("stop_reason"),
                "stop_sequence": body.get("stop_sequence"),
            },
            "usage": {"output_tokens": usage.get("output_tokens", 0)},
        }
    )
    events.append({"type": "message_stop"})
    return [{"event": event["type"], "data": event} for event in events]


def _reply_from_body(body: Mapping[str, Any]) -> P.Reply:
    texts: list[str] = []
    calls: list[P.ToolCall] = []
    for block in body.get("content") or []:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text") or ""))
        elif block.get("type") == "tool_use":
            calls.append(
                (str(block.get("id")), str(block.get("name")), P.json_text(block.get("input")))
            )
    reason = body.get("stop_reason")
    return P.Reply(
        [
            (
                "".join(texts) if texts else None,
                calls,
                genai_finish_reason(_STOPS.get(reason, reason), unknown="stop"),
            )
        ],
        model=str(body.get("model") or ""),
        response_id=str(body.get("id") or "replay"),
        usage=_usage_of(body),
    )


# --------------------------------------------------------------------------- one call


def _format_name(kwargs: Mapping[str, Any]) -> str | None:
    output_format = _given(kwargs, "output_format")
    if isinstance(output_format, type):
        return output_format.__name__
    config = _given(kwargs, "output_config")
    fmt = config.get("format") if isinstance(config, Mapping) else None
    if isinstance(fmt, Mapping):
        return str(fmt.get("name") or fmt.get("type") or "json_schema")
    return None


class _Call(ProviderCall):
    """One call to a patched Anthropic method: what to record, and how to serve it."""

    codec = codec
    api_error = anthropic.APIError
    streams = (anthropic.Stream, anthropic.AsyncStream)

    __slots__ = ()

    def __init__(
        self,
        provider: str,
        instance: Any,
        kwargs: dict[str, Any],
        model: str,
        *,
        parsed: bool,
        stream: bool,
    ) -> None:
        extra_headers = kwargs.get("extra_headers")
        raw = codec.raw_response_mode(extra_headers) if extra_headers else None
        super().__init__(
            provider, instance._client, kwargs, model, parsed=parsed, stream=stream, raw=raw
        )
        P.materialise(kwargs, "messages", _OMIT)
        P.materialise(kwargs, "tools", _OMIT)
        key: dict[str, Any] = {"messages": kwargs.get("messages")}
        system = _given(kwargs, "system")
        if system is not None:
            key["system"] = system
        if _given(kwargs, "tools") is not None:
            key["tools"] = kwargs["tools"]
        attributes = request_attributes(
            PROVIDER,
            P.server_attributes(self.client),
            stream=stream,
            max_tokens=_given(kwargs, "max_tokens"),
            temperature=_given(kwargs, "temperature"),
            top_p=_given(kwargs, "top_p"),
        )
        fmt = _format_name(kwargs)
        if fmt is not None:
            key["output_format"] = fmt
            attributes[P.GEN_AI_OUTPUT_TYPE] = "json"
        self.input: Any = key
        if P.compared_as_messages(model):
            # The only form the recorded entry has: compare the input as messages.
            try:
                self.input = P.input_messages(
                    P.plain(kwargs.get("messages"), _OMIT), P.plain(system, _OMIT)
                )
            except ValueError:
                pass  # not messages: compared as given, which reports the difference
        if P.settings.capture_content:
            try:
                attributes[A.GEN_AI_INPUT_MESSAGES] = P.content_json(
                    genai_input_messages(kwargs.get("messages"))
                )
                if system is not None:
                    attributes[P.GEN_AI_SYSTEM_INSTRUCTIONS] = P.content_json(
                        content_parts(P.plain(system, _OMIT))
                    )
            except Exception:
                P.warn_once(
                    "anthropic-content",
                    "tracely: could not capture the input messages",
                    exc_info=True,
                )
        self.attributes = attributes

    @property
    def _kind(self) -> Any:
        return "message.parsed" if self.parsed else "message"

    def _output_format(self) -> Any:
        return _given(self.kwargs, "output_format") if self.parsed else None

    # -- recording -----------------------------------------------------------------------

    @property
    def tags(self) -> tuple[str, str]:
        return TAG_MESSAGE, TAG_EVENTS

    def reasons(self, body: Mapping[str, Any]) -> list[str]:
        reason = body.get("stop_reason")
        return [reason] if isinstance(reason, str) else []

    def asks_for_tools(self, body: Mapping[str, Any]) -> bool:
        return any(
            isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use")
            for block in body.get("content") or ()
        )

    def output_messages(self, body: Mapping[str, Any]) -> list[OutputMessage]:
        return genai_output_messages(body)

    def body_usage(self, body: Mapping[str, Any]) -> tuple[int, int] | None:
        return _usage_of(body)

    def stream_body(self, chunks: list[dict[str, Any]]) -> dict[str, Any]:
        try:
            return body_from_events(chunks)
        except ValueError:
            return {}  # cut short before message_start

    def _url(self) -> str:
        return str(self.client.base_url).rstrip("/") + "/v1/messages"

    # -- serving -------------------------------------------------------------------------

    def _reply(self, output: Any, tag: Any, entry: Mapping[str, Any]) -> P.Reply:
        usage = P.entry_usage(entry)
        if tag == TAG_GENAI and isinstance(output, Mapping):
            return P.reply_from_genai(output, model=self.model, usage=usage)
        if isinstance(tag, str) and tag.startswith("openai."):
            raise ReplayError(
                f"llm:{self.model}: the recorded call was made with the openai SDK and cannot be "
                "served to an Anthropic call; re-record the case",
                label=f"llm:{self.model}",
            )
        return P.reply_from_value(output, model=self.model, usage=usage)

    def _body_of(self, output: Any, entry: Mapping[str, Any]) -> dict[str, Any]:
        tag = entry.get("output_type")
        if tag == TAG_MESSAGE:
            return output if type(output) is dict else dict(output)
        if tag == TAG_EVENTS:
            return {
                "object": "message",
                "body": body_from_events(output.get("chunks") or []),
                "headers": output.get("headers") or {},
            }
        body = message_body_from_reply(self._reply(output, tag, entry))
        return {"object": "message", "body": body, "request_id": None}

    def _chunks_of(self, output: Any, entry: Mapping[str, Any]) -> tuple[list[Any], dict[str, str]]:
        if entry.get("output_type") == TAG_EVENTS:
            return list(output.get("chunks") or []), dict(output.get("headers") or {})
        recording = self._body_of(output, entry)
        headers = dict(recording.get("headers") or {})
        if isinstance(recording.get("request_id"), str):
            headers.setdefault("request-id", recording["request_id"])
        return events_from_body(recording["body"]), headers

    def _stream(self, chunks: list[Any], headers: dict[str, str]) -> Any:
        return self.codec.rebuild_stream("message", chunks, client=self.client, headers=headers)

    def _raw_response(
        self, recording: Mapping[str, Any] | None, chunks: list[Any] | None, headers: Any
    ) -> Any:
        # The parser is the raw response's only for a message: a stream's `.parse()` is the stream.
        output_format = self._output_format() if chunks is None else None
        return self.codec.rebuild_raw_response(
            self._kind,
            recording,
            client=self.client,
            chunks=chunks,
            headers=headers,
            output_format=output_format,
        )

    def _response(self, recording: Mapping[str, Any] | bytes) -> Any:
        return self._message(recording)

    def _message(self, recording: Mapping[str, Any] | bytes) -> Any:
        if self.parsed:
            return self.codec.rebuild_response(
                "message.parsed", recording, output_format=self._output_format()
            )
        return self.codec.rebuild_response("message", recording)


class _BetaCall(_Call):
    """A call to ``client.beta.messages``: recorded alike, served as the SDK's beta types."""

    codec = beta_codec

    __slots__ = ()


def _refused_unstreamed(instance: Any, kwargs: Mapping[str, Any], model: str) -> bool:
    """Whether the SDK itself refuses this call unstreamed ("Streaming is required ..."): a
    check of the arguments, made before any request, which callers (pydantic-ai) catch to
    stream instead. Left to the SDK, it raises its own ValueError in replay as it did live."""
    client = instance._client
    timeout = kwargs.get("timeout", anthropic.NOT_GIVEN)
    if not isinstance(timeout, _OMIT) or client.timeout != DEFAULT_TIMEOUT:
        return False
    try:
        client._calculate_nonstreaming_timeout(
            kwargs.get("max_tokens"), MODEL_NONSTREAMING_TOKENS.get(model, None)
        )
    except ValueError:
        return True
    except Exception:
        return False  # arguments the SDK's own checks answer
    return False


def _spec(
    call: type[_Call],
    provider: str,
    parsed: bool,
    instance: Any,
    args: Any,
    kwargs: dict[str, Any],
    *,
    stream: bool | None = None,
) -> _Call | None:
    model = kwargs.get("model")
    if not isinstance(model, str) or not model:
        return None  # the SDK's own argument checks answer this call
    streamed = bool(_given(kwargs, "stream")) if stream is None else stream
    if not streamed and _refused_unstreamed(instance, kwargs, model):
        return None  # the SDK raises its ValueError before any request, live and replayed
    return call(provider, instance, kwargs, model, parsed=parsed, stream=streamed)


# The name-mangled attribute holding the request a stream manager makes on entering.
_MANAGER_REQUEST = {
    (_Call, False): "_MessageStreamManager__api_request",
    (_Call, True): "_AsyncMessageStreamManager__api_request",
    (_BetaCall, False): "_BetaMessageStreamManager__api_request",
    (_BetaCall, True): "_BetaAsyncMessageStreamManager__api_request",
}


def _close_unawaited(awaitable: Any) -> None:
    try:
        if inspect.getcoroutinestate(awaitable) == inspect.CORO_CREATED:
            awaitable.close()  # served from the recording: the request is never made
    except TypeError:
        pass


def _stream_wrapper(call: type[_Call], provider: str, is_async: bool) -> Wrapper:
    """``messages.stream()``: the SDK's manager, whose request tracely records or serves."""
    attribute = _MANAGER_REQUEST[call, is_async]

    def stream_wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        wanted = PROVIDER_LAYER.wanted()
        spec = _spec(call, provider, False, instance, args, kwargs, stream=True) if wanted else None
        manager = wrapped(*args, **kwargs)
        if spec is None or P.served_at_the_client(spec.model):
            return manager  # an entry recorded at the client is served there
        request = getattr(manager, attribute, None)
        if request is None:
            P.warn_once(
                "anthropic-manager", "tracely: cannot intercept messages.stream() of this SDK"
            )
            return manager
        if is_async:

            async def arequest() -> Any:
                try:
                    return await P.aintercept(spec, lambda: request)
                finally:
                    _close_unawaited(request)

            setattr(manager, attribute, arequest())
        else:
            setattr(manager, attribute, lambda: P.intercept(spec, request))
        return manager

    return stream_wrapper


# --------------------------------------------------------------------------- installing

for _owner, _call, _client, _async in (
    (Messages, _Call, "Anthropic.messages", False),
    (AsyncMessages, _Call, "AsyncAnthropic.messages", True),
    (BetaMessages, _BetaCall, "Anthropic.beta.messages", False),
    (AsyncBetaMessages, _BetaCall, "AsyncAnthropic.beta.messages", True),
):
    for _method in ("create", "parse", "stream"):
        _name = f"{_client}.{_method}"
        PROVIDER_LAYER.patch(
            _owner,
            _method,
            _name,
            _stream_wrapper(_call, _name, _async)
            if _method == "stream"
            else PROVIDER_LAYER.wrapper(
                functools.partial(_spec, _call, _name, _method == "parse"), _async
            ),
        )
