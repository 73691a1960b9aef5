"""OpenAI SDK patches: chat completions and the Responses API, sync and async.

Patched (class attributes, so every client sees them, ``AzureOpenAI`` included):
``Completions.create`` / ``.parse`` and ``Responses.create`` / ``.parse``, sync and async.
``chat.completions.stream()`` and ``responses.stream()`` make their request through
``create(stream=True)``, so they are recorded and replayed there, under the SDK's own stream
managers; ``responses.stream(response_id=...)`` resumes a stream through
``Responses.retrieve(stream=True)``, which is patched for that (its input is
``{"response_id"}``, its name the model of that response when this process saw it, else the
id). A plain ``retrieve`` fetches a stored object, not a model's answer: it is not recorded,
and under recorded replay the safety net refuses it. ``.with_raw_response`` / ``.with_streaming_response`` call the same methods (with a
header saying which wrapper made the call) and get the SDK's raw response objects back.

The recording of a call (``tracely.output``, the codec's recorded form):

- ``openai.chat.completion`` / ``openai.response``: the response body as the API sent it
  (``{"object", "body", "request_id"}``, plus ``headers`` when the call saw them);
- ``openai.chat.completion.chunks`` / ``openai.response.events``: ``{"chunks": [...],
  "headers": {...}}``, every streamed chunk in order, with its SSE event name.

Its input (``tracely.input``) is ``{"messages", "tools", "response_format"}`` (chat) or
``{"input", "instructions", "tools", "text_format", "previous_response_id"}`` (Responses),
the keys the call gave, so a changed prompt shows as divergence on replay. A call answered
by an entry whose input is GenAI messages (read from another instrumentor's span) is compared
in that form instead: its messages (and ``instructions``) as the extractor writes them.

Replay serves any entry as the type the call returns: a recorded body as a streamed call
(chunks made from it), recorded chunks as a plain call (accumulated), a chat recording to
the Responses API and back, an entry read from another instrumentor's span (``gen_ai.messages``)
and a hand-written ``"output": "Hello"``. Pre-flight checks that the SDK makes before sending
(``response_format`` given a class in ``create``, ``parse``'s strict-tool validation) do not run
on a replayed call.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import openai
from openai._base_client import AsyncAPIClient, SyncAPIClient
from openai.resources.chat.completions.completions import AsyncCompletions, Completions
from openai.resources.responses.responses import AsyncResponses, Responses

from tracely_otel import attributes as A
from tracely_otel.genai import (
    ChatMessage,
    OutputMessage,
    content_parts,
    genai_finish_reason,
    tool_call_part,
    tool_response_part,
)
from tracely_sdk.errors import ReplayError
from tracely_sdk.providers import _openai_codec as codec
from tracely_sdk.providers import _patching as P
from tracely_sdk.providers._provider import Provider, ProviderCall

PROVIDER = "openai"

TAG_CHAT = "openai.chat.completion"
TAG_CHAT_CHUNKS = "openai.chat.completion.chunks"
TAG_RESPONSE = "openai.response"
TAG_RESPONSE_EVENTS = "openai.response.events"
TAG_GENAI = "gen_ai.messages"

PROVIDER_LAYER = Provider(
    PROVIDER,
    codec,
    (openai.OpenAI, openai.AzureOpenAI, openai.AsyncOpenAI, openai.AsyncAzureOpenAI),
    (SyncAPIClient, AsyncAPIClient),
)
set_live = PROVIDER_LAYER.set_live
install = PROVIDER_LAYER.install
uninstall = PROVIDER_LAYER.uninstall
patched = PROVIDER_LAYER.patched


def __getattr__(name: str) -> Any:
    if name == "_live":  # whether calls are recorded outside fixtures() blocks
        return PROVIDER_LAYER.live
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_OMIT = (openai.NotGiven, openai.Omit)


def _omitted(value: Any) -> bool:
    return isinstance(value, _OMIT)


def _given(kwargs: Mapping[str, Any], key: str) -> Any:
    value = kwargs.get(key)
    return None if value is None or _omitted(value) else value


def _plain(value: Any) -> Any:
    return P.plain(value, _OMIT)


def _materialised(kwargs: dict[str, Any], key: str) -> None:
    P.materialise(kwargs, key, _OMIT)


_json_text = P.json_text
_json_value = P.json_value


# --------------------------------------------------------------------------- GenAI conventions

_FINISH_FROM_GENAI = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_call": "tool_calls",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


def genai_chat_messages(messages: Any) -> list[ChatMessage]:
    """Chat messages in the GenAI conventions' ``gen_ai.input.messages`` shape."""
    out: list[ChatMessage] = []
    for raw in P.message_dicts(messages, _OMIT):
        role: Any = raw.get("role")
        if role in ("tool", "function"):
            response = tool_response_part(raw.get("tool_call_id"), raw.get("content"))
            out.append({"role": "tool", "parts": [response]})
            continue
        parts = content_parts(raw.get("content"))
        for call in raw.get("tool_calls") or []:
            function = call.get("function") or {}
            parts.append(
                tool_call_part(call.get("id"), function.get("name"), function.get("arguments"))
            )
        message: ChatMessage = {"role": role, "parts": parts}
        if isinstance(raw.get("name"), str):
            message["name"] = raw["name"]
        out.append(message)
    return out


def genai_responses_input(value: Any) -> list[ChatMessage]:
    """A Responses API ``input`` in the GenAI conventions' ``gen_ai.input.messages`` shape."""
    return codec.genai_responses_input(value if isinstance(value, str) else _plain(value))


genai_chat_output = codec.genai_chat_output
chat_body_from_chunks = codec.chat_body_from_chunks
_usage_of = codec.usage_of
_responses_finish = codec.responses_finish
genai_responses_output = codec.genai_responses_output
response_events_from_body = codec.response_events_from_body
response_body_from_events = codec.response_body_from_events


# --------------------------------------------------------------------------- replies (synthesis)


_Reply = P.Reply
_entry_usage = P.entry_usage
reply_from_genai = P.reply_from_genai
reply_from_value = P.reply_from_value


def _reply_from_chat(body: Mapping[str, Any]) -> _Reply:
    messages = []
    for choice in body.get("choices") or []:
        message = choice.get("message") or {}
        calls = [
            (
                str(c.get("id")),
                str((c.get("function") or {}).get("name")),
                _json_text((c.get("function") or {}).get("arguments")),
            )
            for c in message.get("tool_calls") or []
        ]
        reason = choice.get("finish_reason")
        messages.append(
            (message.get("content"), calls, genai_finish_reason(reason, unknown="stop"))
        )
    return _Reply(
        messages or [("", [], "stop")],
        model=str(body.get("model") or ""),
        response_id=str(body.get("id") or "replay"),
        usage=_usage_of(body, ("prompt_tokens", "completion_tokens")),
    )


def _reply_from_response(body: Mapping[str, Any]) -> _Reply:
    texts: list[str] = []
    calls: list[tuple[str, str, str]] = []
    for item in body.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            parts: Sequence[Mapping[str, object]] = content_parts(item.get("content"))
            texts.extend(text for p in parts if isinstance(text := p.get("content"), str))
        elif item.get("type") == "function_call":
            calls.append(
                (str(item.get("call_id")), str(item.get("name")), _json_text(item.get("arguments")))
            )
    return _Reply(
        [("".join(texts) if texts else None, calls, _responses_finish(body))],
        model=str(body.get("model") or ""),
        response_id=str(body.get("id") or "replay"),
        usage=_usage_of(body, ("input_tokens", "output_tokens")),
    )


def chat_body_from_reply(reply: _Reply) -> dict[str, Any]:
    """A chat completion body (``record_response``'s ``body``) answering ``reply``."""
    choices = []
    for index, (text, calls, finish) in enumerate(reply.messages):
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in calls
            ]
        choices.append(
            {
                "index": index,
                "finish_reason": _FINISH_FROM_GENAI.get(finish, "stop"),
                "logprobs": None,
                "message": message,
            }
        )
    body: dict[str, Any] = {
        "id": reply.response_id,
        "object": "chat.completion",
        "created": 0,
        "model": reply.model,
        "choices": choices,
    }
    usage = P.token_counts(reply.usage, ("prompt_tokens", "completion_tokens", "total_tokens"))
    if usage is not None:
        body["usage"] = usage
    return body


def response_body_from_reply(reply: _Reply) -> dict[str, Any]:
    """A Responses API response body answering ``reply``."""
    body: dict[str, Any] = codec.recording_from_text(
        "response", "", model=reply.model, usage=reply.usage, response_id=reply.response_id
    )["body"]
    output: list[dict[str, Any]] = []
    finish = "stop"
    for index, (text, calls, reason) in enumerate(reply.messages):
        finish = reason if reason != "stop" else finish
        if text is not None:
            output.append(
                {
                    "id": f"msg_{reply.response_id}_{index}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        for n, (cid, name, args) in enumerate(calls):
            output.append(
                {
                    "id": f"fc_{reply.response_id}_{index}_{n}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": cid,
                    "name": name,
                    "arguments": args,
                }
            )
    body["output"] = output
    if finish in ("length", "content_filter"):
        body["status"] = "incomplete"
        reason = "max_output_tokens" if finish == "length" else "content_filter"
        body["incomplete_details"] = {"reason": reason}
    return body


_pieces = P.pieces


def chat_chunks_from_body(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chunks (``record_chunk``'s shape) a streamed call would have sent for ``body``."""
    base = {
        "id": body.get("id"),
        "object": "chat.completion.chunk",
        "created": body.get("created", 0),
        "model": body.get("model"),
    }
    for key in ("system_fingerprint", "service_tier"):
        if body.get(key) is not None:
            base[key] = body[key]

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"event": None, "data": {**base, "choices": [choice]}}

    chunks = []
    for choice in body.get("choices") or []:
        index = int(choice.get("index") or 0)
        message = choice.get("message") or {}
        content = message.get("content")
        chunks.append(
            chunk(index, {"role": "assistant", "content": "" if content is not None else None})
        )
        chunks.extend(chunk(index, {"content": piece}) for piece in _pieces(content or ""))
        if message.get("refusal"):
            chunks.append(chunk(index, {"refusal": message["refusal"]}))
        for n, call in enumerate(message.get("tool_calls") or []):
            delta_call = {
                "index": n,
                "id": call.get("id"),
                "type": "function",
                "function": dict(call.get("function") or {}),
            }
            chunks.append(chunk(index, {"tool_calls": [delta_call]}))
        chunks.append(chunk(index, {}, choice.get("finish_reason") or "stop"))
    if body.get("usage") is not None:
        chunks.append({"event": None, "data": {**base, "choices": [], "usage": body["usage"]}})
    return chunks


# --------------------------------------------------------------------------- one call


def _format_name(value: Any) -> str | None:
    if value is None or _omitted(value):
        return None
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind == "json_schema":
            inner = value.get("json_schema")
            named = inner if isinstance(inner, Mapping) else value
            return str(named.get("name") or "json_schema")
        return str(kind) if kind and kind != "text" else None
    return type(value).__name__


def _number(value: Any) -> bool:
    return value is not None and isinstance(value, (int, float)) and not isinstance(value, bool)


_CHAT_ARGUMENTS = frozenset(
    (
        "stream",
        "extra_headers",
        "tools",
        "response_format",
        "max_completion_tokens",
        "max_tokens",
        "temperature",
        "top_p",
        "service_tier",
    )
)
_RESPONSES_ARGUMENTS = frozenset(
    (
        "stream",
        "extra_headers",
        "tools",
        "instructions",
        "previous_response_id",
        "text_format",
        "text",
        "max_output_tokens",
        "temperature",
        "top_p",
        "service_tier",
    )
)


class _Call(ProviderCall):
    """One call to a patched OpenAI method: what to record, and how to serve it."""

    codec = codec
    api_error = openai.APIError
    streams = (openai.Stream, openai.AsyncStream)

    __slots__ = ("api",)

    def __init__(
        self,
        api: str,
        parsed: bool,
        provider: str,
        instance: Any,
        kwargs: dict[str, Any],
        model: str,
        resumed: str | None = None,
    ) -> None:
        super().__init__(provider, instance._client, kwargs, model, parsed=parsed)
        self.api = api  # "chat" | "responses"
        chat = api == "chat"
        # Only the optional arguments the call gives are looked at: most calls give few.
        given = kwargs.keys() & (_CHAT_ARGUMENTS if chat else _RESPONSES_ARGUMENTS)
        self.stream = "stream" in given and bool(_given(kwargs, "stream"))
        extra_headers = kwargs["extra_headers"] if "extra_headers" in given else None
        self.raw = codec.raw_response_mode(extra_headers) if extra_headers else None
        attributes: dict[str, Any] = {
            A.GEN_AI_PROVIDER_NAME: PROVIDER,
            A.OPENAI_API_TYPE: "chat_completions" if chat else "responses",
        }
        attributes.update(P.server_attributes(self.client))
        if self.stream:
            attributes[A.GEN_AI_REQUEST_STREAM] = True
        tier = _given(kwargs, "service_tier") if "service_tier" in given else None
        if isinstance(tier, str) and tier != "auto":
            attributes[A.OPENAI_REQUEST_SERVICE_TIER] = tier
        fmt: str | None = None
        max_tokens: Any = None
        if chat:
            _materialised(kwargs, "messages")
            key: dict[str, Any] = {"messages": kwargs.get("messages")}
            if given:
                fmt = _format_name(kwargs.get("response_format"))
                max_tokens = _given(kwargs, "max_completion_tokens") or _given(kwargs, "max_tokens")
        else:
            _materialised(kwargs, "input")
            key = {"input": _given(kwargs, "input")}
            for name in ("instructions", "previous_response_id"):
                if name in given and _given(kwargs, name) is not None:
                    key[name] = kwargs[name]
            if given:
                fmt = _format_name(kwargs.get("text_format")) or _format_name(
                    (_given(kwargs, "text") or {}).get("format")
                )
                max_tokens = _given(kwargs, "max_output_tokens")
        if "tools" in given:
            _materialised(kwargs, "tools")
            if _given(kwargs, "tools") is not None:
                key["tools"] = kwargs["tools"]
        if fmt is not None:
            key["response_format" if chat else "text_format"] = fmt
            attributes[P.GEN_AI_OUTPUT_TYPE] = "json" if fmt != "text" else "text"
        self.input: Any = key
        if resumed is not None:
            # A stream resumed by id (`responses.stream(response_id=...)`): that is the input.
            self.input = {"response_id": resumed}
            if _given(kwargs, "starting_after") is not None:
                self.input["starting_after"] = kwargs["starting_after"]
        elif P.compared_as_messages(model):
            self._messages_key()
        if given:
            # An omitted parameter is the SDK's sentinel, never a number.
            if _number(max_tokens):
                attributes[P.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
            temperature, top_p = kwargs.get("temperature"), kwargs.get("top_p")
            if _number(temperature):
                attributes[P.GEN_AI_REQUEST_TEMPERATURE] = temperature
            if _number(top_p):
                attributes[P.GEN_AI_REQUEST_TOP_P] = top_p
        if P.settings.capture_content and resumed is None:
            self._input_content(attributes)
        self.attributes = attributes

    def _messages_key(self) -> None:
        """Compare the input as messages, the only form the recorded entry has."""
        try:
            if self.api == "chat":
                self.input = P.input_messages(_plain(self.kwargs.get("messages")))
            else:
                self.input = P.input_messages(
                    genai_responses_input(_given(self.kwargs, "input")),
                    _given(self.kwargs, "instructions"),
                )
        except ValueError:
            pass  # not messages: compared as given, which reports the difference

    def _input_content(self, attributes: dict[str, Any]) -> None:
        try:
            if self.api == "chat":
                messages = genai_chat_messages(self.kwargs.get("messages"))
            else:
                messages = genai_responses_input(_given(self.kwargs, "input"))
                instructions = _given(self.kwargs, "instructions")
                if isinstance(instructions, str):
                    attributes[P.GEN_AI_SYSTEM_INSTRUCTIONS] = P.content_json(
                        [{"type": "text", "content": instructions}]
                    )
            attributes[A.GEN_AI_INPUT_MESSAGES] = P.content_json(messages)
        except Exception:
            P.warn_once(
                "openai-content", "tracely: could not capture the input messages", exc_info=True
            )

    # -- what the call returns -----------------------------------------------------------

    @property
    def _kind(self) -> Any:
        if self.api == "chat":
            return "chat.completion.parsed" if self.parsed else "chat.completion"
        return "response.parsed" if self.parsed else "response"

    @property
    def _stream_kind(self) -> Any:
        return "chat.completion" if self.api == "chat" else "response"

    @property
    def tags(self) -> tuple[str, str]:
        return (
            (TAG_CHAT, TAG_CHAT_CHUNKS)
            if self.api == "chat"
            else (TAG_RESPONSE, TAG_RESPONSE_EVENTS)
        )

    def _parse_arguments(self) -> dict[str, Any]:
        if not self.parsed:
            return {}
        tools = _given(self.kwargs, "tools")
        if self.api == "chat":
            return {"response_format": _given(self.kwargs, "response_format"), "input_tools": tools}
        return {"text_format": _given(self.kwargs, "text_format"), "input_tools": tools}

    # -- recording -----------------------------------------------------------------------

    def _response_attributes(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.api == "responses":
            _remember_model(body)  # every response this process records or serves passes here
        out = super()._response_attributes(body)
        for key, name in (
            ("service_tier", A.OPENAI_RESPONSE_SERVICE_TIER),
            ("system_fingerprint", A.OPENAI_RESPONSE_SYSTEM_FINGERPRINT),
        ):
            if isinstance(value := body.get(key), str):
                out[name] = value
        return out

    def reasons(self, body: Mapping[str, Any]) -> list[str]:
        if self.api == "chat":
            return [
                str(reason) for c in body.get("choices") or () if (reason := c.get("finish_reason"))
            ]
        return [_responses_finish(body)]

    def asks_for_tools(self, body: Mapping[str, Any]) -> bool:
        if self.api == "chat":
            return any(
                (c.get("message") or {}).get("tool_calls") for c in body.get("choices") or ()
            )
        return any(
            isinstance(item, dict) and item.get("type") == "function_call"
            for item in body.get("output") or ()
        )

    def output_messages(self, body: Mapping[str, Any]) -> list[OutputMessage]:
        if self.api == "chat":
            return genai_chat_output(body)
        return genai_responses_output(body)

    def body_usage(self, body: Mapping[str, Any]) -> tuple[int, int] | None:
        keys = (
            ("prompt_tokens", "completion_tokens")
            if self.api == "chat"
            else ("input_tokens", "output_tokens")
        )
        return _usage_of(body, keys)

    def stream_body(self, chunks: list[dict[str, Any]]) -> dict[str, Any]:
        if self.api == "chat":
            return chat_body_from_chunks(chunks)
        try:
            return response_body_from_events(chunks)
        except ValueError:
            return {}  # a stream cut short before its first event

    def failure_recording(self, exc: BaseException) -> P.CapturedResult | None:
        completion = getattr(exc, "completion", None)
        if (
            isinstance(exc, (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError))
            and completion is not None
        ):
            return self._recording(completion, None)
        return None

    def _url(self) -> str:
        base = str(self.client.base_url).rstrip("/")
        return f"{base}/{'chat/completions' if self.api == 'chat' else 'responses'}"

    # -- serving -------------------------------------------------------------------------

    def _body_of(self, output: Any, entry: Mapping[str, Any]) -> dict[str, Any]:
        """The recorded value of ``output`` as this API's response recording."""
        tag = entry.get("output_type")
        body_tag, chunks_tag = self.tags
        if tag == body_tag:
            return output if type(output) is dict else dict(output)
        if tag == chunks_tag:
            chunks = output.get("chunks") or []
            body = (
                chat_body_from_chunks(chunks)
                if self.api == "chat"
                else response_body_from_events(chunks)
            )
            return {
                "object": "chat.completion" if self.api == "chat" else "response",
                "body": body,
                "headers": output.get("headers") or {},
            }
        reply = self._reply(output, tag, entry)
        body = (
            chat_body_from_reply(reply) if self.api == "chat" else response_body_from_reply(reply)
        )
        return {"object": body["object"], "body": body, "request_id": None}

    def _chunks_of(self, output: Any, entry: Mapping[str, Any]) -> tuple[list[Any], dict[str, str]]:
        tag = entry.get("output_type")
        if tag == self.tags[1]:
            return list(output.get("chunks") or []), dict(output.get("headers") or {})
        recording = self._body_of(output, entry)
        body = recording["body"]
        chunks = (
            chat_chunks_from_body(body) if self.api == "chat" else response_events_from_body(body)
        )
        headers = dict(recording.get("headers") or {})
        if isinstance(recording.get("request_id"), str):
            headers.setdefault("x-request-id", recording["request_id"])
        return chunks, headers

    def _reply(self, output: Any, tag: Any, entry: Mapping[str, Any]) -> _Reply:
        usage = _entry_usage(entry)
        if tag == TAG_GENAI and isinstance(output, Mapping):
            return reply_from_genai(output, model=self.model, usage=usage)
        if tag in (TAG_CHAT, TAG_RESPONSE) and isinstance(output, Mapping):
            body = output.get("body") or {}
            return _reply_from_chat(body) if tag == TAG_CHAT else _reply_from_response(body)
        if tag in (TAG_CHAT_CHUNKS, TAG_RESPONSE_EVENTS) and isinstance(output, Mapping):
            chunks = output.get("chunks") or []
            if tag == TAG_CHAT_CHUNKS:
                return _reply_from_chat(chat_body_from_chunks(chunks))
            return _reply_from_response(response_body_from_events(chunks))
        if isinstance(tag, str) and tag.startswith("anthropic."):
            raise ReplayError(
                f"llm:{self.model}: the recorded call was made with the anthropic SDK and cannot "
                "be served to an OpenAI call; re-record the case",
                label=f"llm:{self.model}",
            )
        return reply_from_value(output, model=self.model, usage=usage)

    def _stream(self, chunks: list[Any], headers: dict[str, str]) -> Any:
        return codec.rebuild_stream(self._stream_kind, chunks, client=self.client, headers=headers)

    def _raw_response(
        self, recording: Mapping[str, Any] | None, chunks: list[Any] | None, headers: Any
    ) -> Any:
        return codec.rebuild_raw_response(
            self._kind,
            recording,
            client=self.client,
            chunks=chunks,
            mode=self.raw,
            headers=headers,
            **self._parse_arguments(),
        )

    def _response(self, recording: Mapping[str, Any] | bytes) -> Any:
        if not self.parsed:  # only a parse can refuse a recorded answer
            return codec.rebuild_response(self._kind, recording)
        try:
            return codec.rebuild_response(self._kind, recording, **self._parse_arguments())
        except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as exc:
            return P.Refused(exc)  # the SDK's parser refuses the recorded answer, as it did live


# The model of each Responses API response seen (live or replayed), by id, so that a stream
# resumed by id (whose request names no model) is recorded and matched under the model that
# made the response. A response made in another process leaves the id as the name instead,
# on recording and on replay alike.
_MODELS: dict[str, str] = {}
_MODELS_KEPT = 1024


def _remember_model(body: Mapping[str, Any]) -> None:
    response_id, model = body.get("id"), body.get("model")
    if isinstance(response_id, str) and isinstance(model, str) and model:
        if len(_MODELS) >= _MODELS_KEPT:
            _MODELS.pop(next(iter(_MODELS)), None)
        _MODELS[response_id] = model


def _resumed_spec(provider: str, instance: Any, args: Any, kwargs: dict[str, Any]) -> _Call | None:
    """A ``responses.retrieve(id, stream=True)`` (what ``responses.stream(response_id=...)``
    makes); a plain retrieve fetches a stored object, not a model's answer, and is not one."""
    if not _given(kwargs, "stream"):
        return None
    response_id = args[0] if args else kwargs.get("response_id")
    if not isinstance(response_id, str) or not response_id:
        return None
    model = _MODELS.get(response_id, response_id)
    return _Call("responses", False, provider, instance, kwargs, model, resumed=response_id)


def _spec(
    api: str, parsed: bool, provider: str, instance: Any, args: Any, kwargs: dict[str, Any]
) -> _Call | None:
    model = kwargs.get("model")
    if not isinstance(model, str) or not model:
        return None  # the SDK's own argument checks answer this call
    return _Call(api, parsed, provider, instance, kwargs, model)


# --------------------------------------------------------------------------- installing

for _owner, _client, _path, _api, _async in (
    (Completions, "OpenAI", "chat.completions", "chat", False),
    (AsyncCompletions, "AsyncOpenAI", "chat.completions", "chat", True),
    (Responses, "OpenAI", "responses", "responses", False),
    (AsyncResponses, "AsyncOpenAI", "responses", "responses", True),
):
    for _method in ("create", "parse"):
        _name = f"{_client}.{_path}.{_method}"
        PROVIDER_LAYER.patch(
            _owner,
            _method,
            _name,
            PROVIDER_LAYER.wrapper(
                functools.partial(_spec, _api, _method == "parse", _name), _async
            ),
        )
# `responses.stream(response_id=...)` resumes a stream through `retrieve(stream=True)`.
for _owner, _client, _async in (
    (Responses, "OpenAI", False),
    (AsyncResponses, "AsyncOpenAI", True),
):
    _name = f"{_client}.responses.retrieve"
    PROVIDER_LAYER.patch(
        _owner,
        "retrieve",
        _name,
        PROVIDER_LAYER.wrapper(functools.partial(_resumed_spec, _name), _async),
    )
