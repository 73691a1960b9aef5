"""One HTTP exchange with a model API: recorded live, served on replay.

The recording of a call (its entry's ``output``, type tag ``http.response``)::

    {"status": 200, "headers": {"content-type": "application/json", ...}, "body": {...}}
    {"status": 200, "headers": {"content-type": "text/event-stream"},
     "events": [{"event": "message_start", "data": {...}}, {"data": "[DONE]"}, ...]}
    {"status": 200, "headers": {"content-type": "application/x-ndjson"},
     "lines": [{"data": {...}}, {"data": {..., "done": true}}]}

``body`` is the JSON the server sent (a stream sent as one JSON array, as Gemini's without
``alt=sse``, is that array; ``text`` holds a body that is not JSON, ``base64`` one that is not
text); ``events`` are a server-sent-event stream's events in order, each with its
``event`` name when it had one and its ``data``, parsed when it is JSON (``text`` otherwise),
or an AWS event stream's messages (``headers`` and ``data``, see :mod:`._eventstream`);
``lines`` are a newline-delimited JSON stream's lines in order, in the same form as events.
``cut`` (``{"type", "message"}``, a transport error of the client library) marks a body cut
short: served, reading it raises that error after its last piece (a robustness run's
``stream_cut``, see ``_faults``).
Served, a recording becomes the same bytes again, as JSON written compactly: what the
client's library parses is what it parsed live.
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import orjson

from tracely_otel import attributes as A
from tracely_sdk.errors import LLMError, ReplayError
from tracely_sdk.providers._patching import (
    GEN_AI_SYSTEM_INSTRUCTIONS,
    SERVER_ADDRESS,
    SERVER_PORT,
    WIRE_TAG,
    CapturedResult,
    Intercepted,
    Refused,
    TeeStream,
    compared_as_messages,
    content_json,
    entry_usage,
    reply_from_genai,
    request_attributes,
    response_attributes,
    served_tag,
    settings,
    warn_once,
)
from tracely_sdk.providers._streams import body_recorder
from tracely_sdk.providers.http import (
    _anthropic_messages,
    _bedrock_converse,
    _bedrock_converse_stream,
    _bedrock_invoke,
    _bedrock_invoke_stream,
    _cohere_chat,
    _eventstream,
    _gemini,
    _gemini_stream,
    _ollama_chat,
    _ollama_generate,
    _openai_chat,
    _openai_embeddings,
    _openai_responses,
)
from tracely_sdk.providers.http._codec import Codec

if TYPE_CHECKING:
    from tracely_sdk._seam import Call
    from tracely_sdk.providers.http._client import ClientHook

TAG = WIRE_TAG
GENAI_TAG = "gen_ai.messages"  # an entry read from another instrumentor's span

FORMATS: tuple[Codec, ...] = (
    _openai_chat.CODEC,
    _anthropic_messages.CODEC,
    _openai_responses.CODEC,
    _openai_embeddings.CODEC,
    _cohere_chat.CODEC,
    _ollama_chat.CODEC,
    _ollama_generate.CODEC,
    _bedrock_converse.CODEC,
    _bedrock_converse_stream.CODEC,
    _bedrock_invoke.CODEC,
    _bedrock_invoke_stream.CODEC,
    _gemini.CODEC,
    _gemini_stream.CODEC,
)
"""The wire formats whose requests are model calls, each a codec."""


def format_for(method: str, path: str) -> Codec | None:
    """The codec of the wire format a request to ``path`` is a model call of, or None."""
    method = method.upper()
    for codec in FORMATS:
        if codec.answers(method, path):
            return codec
    return None


def model_call(method: str, path: str, content: Any) -> tuple[Codec, dict[str, Any], str] | None:
    """The codec, JSON body and model of a request that is a model call, or None.

    The model is the body's ``model``, or for a format that names it in the path (Bedrock's),
    the codec's ``path_model``. A body that is not bytes (a streamed upload, a file) is not read:
    not a model call.
    """
    codec = format_for(method, path)
    if codec is None or not isinstance(content, (bytes, bytearray, memoryview, str)):
        return None
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict):
        return None
    model = codec.path_model(path) if codec.path_model is not None else body.get("model")
    return (codec, body, model) if isinstance(model, str) and model else None


def answers(method: str, url: str) -> bool:
    """Whether a request (``url`` absolute, or a path) is a model call the HTTP layer records
    and serves."""
    path = urllib.parse.urlsplit(url).path if "://" in url else url.split("?", 1)[0]
    return format_for(method, path) is not None


# --------------------------------------------------------------------------- bodies and events


def body_value(content: bytes) -> dict[str, Any]:
    """A body as recorded: its JSON, else its text, else its bytes in base64."""
    try:
        return {"body": orjson.loads(content)}
    except orjson.JSONDecodeError:
        pass
    try:
        return {"text": content.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(content).decode()}


def body_bytes(recorded: Mapping[str, Any]) -> bytes:
    """The bytes of a body recorded by :func:`body_value`."""
    if "body" in recorded:
        return orjson.dumps(recorded["body"])
    if "base64" in recorded:
        return base64.b64decode(str(recorded["base64"]), validate=True)
    return str(recorded.get("text") or "").encode()


def sse_events(content: bytes) -> list[dict[str, Any]]:
    """The events of a server-sent-event stream (comments and empty events left out)."""
    events: list[dict[str, Any]] = []
    text = content.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    for block in text.split("\n\n"):
        name: str | None = None
        ident: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                ident = value
        if not data and name is None:
            continue
        event: dict[str, Any] = {}
        if name is not None:
            event["event"] = name
        if ident is not None:
            event["id"] = ident
        event.update(body_value("\n".join(data).encode()) if data else {"text": ""})
        if "body" in event:
            event["data"] = event.pop("body")
        events.append(event)
    return events


def sse_pieces(events: Iterable[Mapping[str, Any]]) -> list[bytes]:
    """The bytes of recorded events, one piece per event."""
    pieces: list[bytes] = []
    for event in events:
        lines: list[str] = []
        if isinstance(event.get("event"), str):
            lines.append(f"event: {event['event']}")
        if isinstance(event.get("id"), str):
            lines.append(f"id: {event['id']}")
        data = orjson.dumps(event["data"]).decode() if "data" in event else str(event.get("text"))
        lines.extend(f"data: {line}" for line in data.split("\n"))
        pieces.append(("\n".join(lines) + "\n\n").encode())
    return pieces


def ndjson_lines(content: bytes) -> list[dict[str, Any]]:
    """The lines of a newline-delimited JSON stream (empty lines left out), each as an event:
    its ``data`` when it is JSON (a line cut short is kept as ``text``)."""
    lines: list[dict[str, Any]] = []
    for line in content.split(b"\n"):
        if line.strip():
            value = body_value(line.rstrip(b"\r"))
            lines.append({"data": value["body"]} if "body" in value else value)
    return lines


def ndjson_pieces(lines: Iterable[Mapping[str, Any]]) -> list[bytes]:
    """The bytes of recorded lines, one piece per line."""
    return [
        (orjson.dumps(line["data"]) if "data" in line else body_bytes(line)) + b"\n"
        for line in lines
    ]


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


_NDJSON = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl"})


def _streamed_output(codec: Codec, events: list[dict[str, Any]]) -> dict[str, Any]:
    """A stream of ``events`` as the format's wire frames it: SSE, an AWS event stream, or
    NDJSON lines."""
    content_type = _stream_content_type(codec)
    key = "lines" if content_type in _NDJSON else "events"
    return {"status": 200, "headers": {"content-type": content_type}, key: events}


def eventstream_events(content: bytes) -> list[dict[str, Any]]:
    """The messages of an AWS event stream as a recording keeps them: each one's headers, and
    its payload as :func:`body_value` keeps a body (JSON as ``data``); see :mod:`._eventstream`."""
    events: list[dict[str, Any]] = []
    for headers, payload in _eventstream.messages(content):
        event: dict[str, Any] = {
            "headers": {k: _eventstream.header_value(v) for k, v in headers.items()}
        }
        value = body_value(payload)
        if "body" in value:
            value["data"] = value.pop("body")
        event.update(value)
        events.append(event)
    return events


def eventstream_pieces(events: Iterable[Mapping[str, Any]]) -> list[bytes]:
    """The bytes of recorded AWS event-stream messages, one message per event."""
    out: list[bytes] = []
    for event in events:
        headers = event.get("headers")
        if not isinstance(headers, Mapping):
            raise ValueError("a recorded event-stream event has its headers as an object")
        payload = body_bytes({"body": event["data"]} if "data" in event else event)
        out.append(_eventstream.encode(headers, payload))
    return out


def _content_type(output: Mapping[str, Any]) -> str:
    headers = output.get("headers")
    if not isinstance(headers, Mapping):
        return ""
    return next((str(v) for k, v in headers.items() if str(k).lower() == "content-type"), "")


def served_pieces(output: Mapping[str, Any]) -> list[bytes]:
    """The bytes a recorded exchange's body is served as, a piece per event or line of a
    stream: its events framed as its content type frames them (an AWS event stream's
    messages, else server-sent events), its NDJSON lines, or its body in one piece."""
    events, lines = output.get("events"), output.get("lines")
    if isinstance(lines, list):
        return ndjson_pieces(lines)
    if not isinstance(events, list):
        return [body_bytes(output)]
    if _eventstream.is_eventstream(_content_type(output)):
        return eventstream_pieces(events)
    return sse_pieces(events)


def _response_body(codec: Codec, output: Mapping[str, Any]) -> Mapping[str, Any]:
    """The response body a recorded exchange answers with (a stream's, added up)."""
    events = output.get("events", output.get("lines"))
    if isinstance(events, Sequence):
        try:
            added = codec.body_from_events(events)
        except ValueError:
            return {}  # a stream cut short before its first event
        return added if isinstance(added, Mapping) else {}
    body = output.get("body")
    if isinstance(body, list):  # a stream sent as one JSON array of its chunks (Gemini's)
        try:
            body = codec.body_from_events([{"data": item} for item in body])
        except ValueError:
            return {}
    return body if isinstance(body, Mapping) else {}


def _stream_content_type(codec: Codec) -> str:
    return codec.STREAM_CONTENT_TYPE


def served_output(
    codec: Codec, entry: Mapping[str, Any], model: str, *, streamed: bool
) -> Mapping[str, Any]:
    """The exchange a recorded entry is served as: its own when recorded at the client; made
    of the body or events when the format's SDK recorded it (streamed as the request is);
    made of the answer's text for an entry written by hand (``{"output": "Hello"}``)."""
    label = f"llm:{model}"
    tag, output = entry.get("output_type"), entry.get("output")
    if tag == TAG and isinstance(output, Mapping):
        return output
    plain_tag, streamed_tag = codec.SDK_TAGS
    headers: dict[str, Any] = {}
    if isinstance(output, Mapping) and isinstance(output.get("headers"), Mapping):
        headers = {str(k).lower(): v for k, v in output["headers"].items()}
    body = output.get("body") if isinstance(output, Mapping) else None
    if tag is not None and tag == plain_tag and not streamed and isinstance(body, Mapping):
        headers["content-type"] = "application/json"
        return {"status": 200, "headers": headers, "body": body}
    if tag is not None and tag == streamed_tag and streamed and isinstance(output, Mapping):
        events = [
            {key: chunk[key] for key in ("event", "data") if chunk.get(key) is not None}
            for chunk in output.get("chunks") or ()
            if isinstance(chunk, Mapping)
        ]
        served = _streamed_output(codec, codec.closed_events(events))
        served["headers"] = {**headers, **served["headers"]}
        return served
    if tag == GENAI_TAG and isinstance(output, Mapping) and codec.reply_body is not None:
        reply = reply_from_genai(output, model=model, usage=entry_usage(entry))
        return _answered(codec, codec.reply_body(reply), streamed=streamed)
    if tag is None and output is not None:
        text = output.get("content") if isinstance(output, Mapping) else output
        if not isinstance(text, str):  # a hand-written JSON answer: the model's JSON text
            text = orjson.dumps(output).decode()
        usage = entry_usage(entry)
        # None: the format has no answer made of text (an embedding)
        if streamed:
            events = codec.text_events(text, model=model, usage=usage)
            if events is not None:
                return _streamed_output(codec, events)
        else:
            answer = codec.text_body(text, model=model, usage=usage)
            if answer is not None:
                headers = {"content-type": "application/json"}
                return {"status": 200, "headers": headers, "body": answer}
    shape = f"{'a streamed' if streamed else 'a plain'} {codec.name}"
    if tag is not None and tag != GENAI_TAG:
        # Recorded by the SDK patches of tracely-replay 0.5 and earlier, in a form served here
        # only as the same shape of call of the same API (see the codecs' SDK_TAGS).
        raise ReplayError(
            f"recorded replay: {label} was recorded as {tag} by {entry.get('provider') or '?'} "
            "(the SDK patches of tracely-replay 0.5 and earlier), which this version cannot "
            f"serve as {shape} response: replay the case with tracely-replay 0.5, or re-record "
            "it with this version",
            label=label,
        )
    raise ReplayError(
        f"recorded replay: {label} was recorded as {tag or 'a value'} (by "
        f"{entry.get('provider') or 'call_llm'}), which the HTTP client layer cannot serve as "
        f"{shape} response; re-record the case with this client",
        label=label,
    )


def _answered(codec: Codec, body: Mapping[str, Any], *, streamed: bool) -> dict[str, Any]:
    """The exchange that answers ``body``, streamed as the request asks."""
    if streamed and codec.body_events is not None:  # a codec with reply_body has body_events
        return _streamed_output(codec, codec.body_events(body))
    return {"status": 200, "headers": {"content-type": "application/json"}, "body": body}


# --------------------------------------------------------------------------- one call


@dataclass(frozen=True, slots=True)
class Target:
    """Where a request goes, as a client library's hook reads it (``path`` URL-decoded)."""

    method: str
    scheme: str
    host: str
    port: int | None
    path: str


class WireCall(Intercepted):
    """One model call seen at the HTTP client: the :class:`InterceptedCall` of an exchange.

    What it does not know of the client library (how a response is read, teed, made of
    recorded bytes) it asks the library's ``hook`` (:class:`._client.ClientHook`).
    """

    __slots__ = (
        "attributes",
        "call",
        "codec",
        "content_type",
        "encoding",
        "hook",
        "input",
        "is_async",
        "model",
        "provider",
        "request",
        "status",
        "stream",
        "streamed",
    )

    def __init__(
        self,
        codec: Codec,
        hook: ClientHook,
        request: Any,
        target: Target,
        body: Mapping[str, Any],
        model: str,
        *,
        provider: str,
        is_async: bool,
        stream: bool,
    ) -> None:
        self.codec = codec
        self.hook = hook
        self.request = request  # the library's own request, given back to the hook
        self.model = model
        self.provider = provider  # the patched method, as ``httpx.Client.send``
        self.is_async = is_async
        self.stream = stream  # the client reads the body later, as it needs it
        self.streamed = codec.streamed(body)  # the API was asked for an event stream
        self.call: Call | None = None
        self.status = 0
        self.content_type = ""
        self.encoding: str | None = None
        hints = codec.UNCOMPARED  # request keys that are no part of the prompt
        kept = {k: v for k, v in body.items() if k not in hints} if hints else body
        self.input: Any = {"method": target.method, "path": target.path, "body": kept}
        server = {
            SERVER_ADDRESS: target.host,
            SERVER_PORT: target.port or (443 if target.scheme == "https" else 80),
        }
        max_tokens, temperature, top_p = codec.request_numbers(body)
        self.attributes = request_attributes(
            codec.provider(target.host) or A.provider_for_model(self.model),
            server,
            stream=self.streamed,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
        )
        operation = codec.OPERATION  # chat, unless the format says otherwise
        if operation is not None:
            self.attributes[A.GEN_AI_OPERATION_NAME] = operation
        extras = codec.request_extras  # a format's own request attributes
        if extras is not None:
            self.attributes.update(extras(body, self.attributes[A.GEN_AI_PROVIDER_NAME]))
        if compared_as_messages(self.model):
            try:  # the only form the recorded entry has: compare the input as messages
                self.input = codec.messages(body)
            except ValueError:
                pass  # not messages: compared as given, which reports the difference
        elif (tag := served_tag(model)) is not None and tag in codec.SDK_TAGS:
            # An earlier version's SDK patches kept the call's own arguments: compare those.
            self.input = {k: body[k] for k in codec.SDK_INPUT if k in body}
        if settings.capture_content:
            try:
                given = codec.messages(body)
                system = codec.system_instructions
                parts = system(body) if system is not None else None
                if parts:
                    # The conventions keep the system prompt out of the input messages.
                    self.attributes[GEN_AI_SYSTEM_INSTRUCTIONS] = content_json(parts)
                    given = [m for m in given if m.get("role") != "system"]
                self.attributes[A.GEN_AI_INPUT_MESSAGES] = content_json(given)
            except Exception:
                warn_once("http-content", "tracely: could not capture the input messages")

    # -- recording -----------------------------------------------------------------------

    def _look(self, response: Any) -> dict[str, str]:
        self.status, pairs = self.hook.response_head(response)
        for name, value in pairs:
            if name.lower() == "content-type":
                self.content_type = value
            elif name.lower() == "content-encoding":
                self.encoding = value
        return dict(self.codec.record_headers(pairs))

    def recordable(self, result: Any) -> CapturedResult | TeeStream:
        headers = self._look(result)
        content = None if self.stream else self.hook.read_body(result, self.encoding)
        if content is None:
            return TeeStream(lambda call, started: self._tee(result, call, headers, started))
        return self._recording(content, headers)

    async def arecordable(self, result: Any) -> CapturedResult | TeeStream:
        return self.recordable(result)

    def _tee(self, response: Any, call: Call, headers: Mapping[str, str], started: float) -> None:
        recorder = body_recorder(call, self, headers, started, is_async=self.is_async)
        self.hook.tee_body(response, recorder, self.is_async)

    def record_item(self, item: Any) -> dict[str, Any]:
        return {"piece": bytes(item)}

    def record_stream(
        self, chunks: list[dict[str, Any]], headers: Mapping[str, str] | None
    ) -> CapturedResult:
        raw = b"".join(chunk["piece"] for chunk in chunks)
        return self._recording(self.hook.decoded(raw, self.encoding), headers or {})

    def _recording(self, content: bytes, headers: Mapping[str, str]) -> CapturedResult:
        value: dict[str, Any] = {"status": self.status, "headers": dict(headers)}
        media_type = _media_type(self.content_type)
        if media_type == "text/event-stream":
            value["events"] = sse_events(content)
        elif media_type in _NDJSON:
            value["lines"] = ndjson_lines(content)
        elif _eventstream.is_eventstream(self.content_type) and _eventstream.readable():
            value["events"] = eventstream_events(content)
        else:
            value.update(body_value(content))
        body = _response_body(self.codec, value)
        attributes = response_attributes(self.codec, body) if self.status < 400 else {}
        return CapturedResult(value, TAG, self.codec.usage(body), attributes)

    def failure_recording(self, exc: BaseException) -> CapturedResult | None:
        return None

    def record_error(self, exc: BaseException) -> dict[str, Any]:
        error: dict[str, Any] = {"type": type(exc).__qualname__, "message": str(exc)}
        reason = getattr(exc, "reason", None)
        if isinstance(reason, BaseException):  # urllib3's MaxRetryError: what the last try met
            error["reason"] = {"type": type(reason).__qualname__, "message": str(reason)}
        return error

    # -- serving -------------------------------------------------------------------------

    def served_attributes(self, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
        try:
            output = served_output(self.codec, entry, self.model, streamed=self.streamed)
        except ReplayError:
            return None  # raised where it is served
        status = output.get("status")
        if not isinstance(status, int) or status >= 400:
            return None
        return response_attributes(self.codec, _response_body(self.codec, output))

    def rebuild(self, output_json: bytes, entry: Mapping[str, Any]) -> Any:
        session = self.call.session if self.call is not None else None
        if entry.get("output_type") == TAG:
            output = orjson.loads(output_json)  # a fresh copy, whatever the caller changes
        else:
            try:
                output = served_output(self.codec, entry, self.model, streamed=self.streamed)
            except ReplayError as refused:
                # In the report too: the case is not PASS even if the agent swallows it.
                if session is not None:
                    session.report.errors.append(refused)
                raise
        cut = self.hook.cut_error(output.get("cut"), self.request)
        if cut is not None and not self.stream:
            # The client reads a whole body inside send(): a cut one fails there, as live.
            return Refused(cut)
        return self.hook.served_response(self.request, output, stream=self.stream, session=session)

    def raise_error(self, error: Mapping[str, Any], label: str) -> NoReturn:
        exc = self.hook.transport_error(error, self.request)
        if exc is not None:
            raise exc
        raise LLMError(label, str(error.get("type")), str(error.get("message")))


__all__ = [
    "FORMATS",
    "TAG",
    "Target",
    "WireCall",
    "answers",
    "body_bytes",
    "body_value",
    "eventstream_events",
    "eventstream_pieces",
    "format_for",
    "model_call",
    "ndjson_lines",
    "ndjson_pieces",
    "served_output",
    "served_pieces",
    "sse_events",
    "sse_pieces",
]
