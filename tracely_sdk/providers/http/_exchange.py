"""One HTTP exchange with a model API: recorded live, served on replay.

The recording of a call (its entry's ``output``, type tag ``http.response``)::

    {"status": 200, "headers": {"content-type": "application/json", ...}, "body": {...}}
    {"status": 200, "headers": {"content-type": "text/event-stream"},
     "events": [{"event": "message_start", "data": {...}}, {"data": "[DONE]"}, ...]}

``body`` is the JSON the server sent (``text`` holds a body that is not JSON, ``base64`` one
that is not text); ``events`` are a server-sent-event stream's events in order, each with its
``event`` name when it had one and its ``data``, parsed when it is JSON (``text`` otherwise).
Served, a recording becomes the same bytes again, as JSON written compactly: what the
client's library parses is what it parsed live.
"""

from __future__ import annotations

import base64
import urllib.parse
import weakref
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

import orjson

from tracely_otel import attributes as A
from tracely_sdk.errors import ReplayError
from tracely_sdk.providers._patching import (
    SERVER_ADDRESS,
    SERVER_PORT,
    WIRE_TAG,
    Intercepted,
    Recording,
    TeeStream,
    compared_as_messages,
    content_json,
    entry_usage,
    request_attributes,
    response_attributes,
    settings,
    warn_once,
)
from tracely_sdk.providers._streams import body_recorder
from tracely_sdk.providers.http import _anthropic_messages, _gemini, _openai_chat

if TYPE_CHECKING:
    from tracely_sdk._seam import Call
    from tracely_sdk.providers.http._hook import ClientHook

TAG = WIRE_TAG

FORMATS: tuple[ModuleType, ...] = (_openai_chat, _anthropic_messages, _gemini)
"""The wire formats whose requests are model calls, each a codec module."""


def format_for(method: str, path: str) -> ModuleType | None:
    """The codec of the wire format a request to ``path`` is a model call of, or None."""
    method = method.upper()
    for codec in FORMATS:
        if codec.answers(method, path):
            return codec
    return None


def request_facts(
    codec: ModuleType, path: str, query: str, body: Mapping[str, Any]
) -> tuple[str | None, bool]:
    """The model a request asks (None: not a model call) and whether it asks for a stream: read
    from the path and query by a format that puts them there (its ``from_path``), else from the
    JSON body's ``model`` and the format's ``streamed``."""
    from_path = getattr(codec, "from_path", None)
    if from_path is not None:
        return from_path(path, query, body)  # type: ignore[no-any-return]
    model = body.get("model")
    return (model if isinstance(model, str) else None), codec.streamed(body)


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


def _is_sse(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "text/event-stream"


def _response_body(codec: ModuleType, output: Mapping[str, Any]) -> Mapping[str, Any]:
    """The response body a recorded exchange answers with (a stream's, added up)."""
    events = output.get("events")
    if isinstance(events, Sequence):
        try:
            body = codec.body_from_events(events)
        except ValueError:
            return {}  # a stream cut short before its first event
        return body if isinstance(body, Mapping) else {}
    body = output.get("body")
    if isinstance(body, list):  # a stream sent as one JSON array of its chunks
        try:
            body = codec.body_from_events([{"data": item} for item in body])
        except ValueError:
            return {}
    return body if isinstance(body, Mapping) else {}


def served_output(
    codec: ModuleType, entry: Mapping[str, Any], model: str, *, streamed: bool
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
    if tag == plain_tag and not streamed and isinstance(body, Mapping):
        headers["content-type"] = "application/json"
        return {"status": 200, "headers": headers, "body": body}
    if tag == streamed_tag and streamed and isinstance(output, Mapping):
        events = [
            {key: chunk[key] for key in ("event", "data") if chunk.get(key) is not None}
            for chunk in output.get("chunks") or ()
            if isinstance(chunk, Mapping)
        ]
        headers["content-type"] = "text/event-stream"
        return {"status": 200, "headers": headers, "events": codec.closed_events(events)}
    text = output.get("content") if tag is None and isinstance(output, Mapping) else output
    if tag is None and isinstance(text, str):
        usage = entry_usage(entry)
        if streamed:
            events = codec.text_events(text, model=model, usage=usage)
            return {
                "status": 200,
                "headers": {"content-type": "text/event-stream"},
                "events": events,
            }
        answer = codec.text_body(text, model=model, usage=usage)
        return {"status": 200, "headers": {"content-type": "application/json"}, "body": answer}
    shape = (
        f"{'a streamed' if streamed else 'a plain'} {codec.__name__.rsplit('.', 1)[-1].lstrip('_')}"
    )
    raise ReplayError(
        f"recorded replay: {label} was recorded as {tag or 'a value'} (by "
        f"{entry.get('provider') or 'call_llm'}), which the HTTP client layer cannot serve as "
        f"{shape} response; re-record the case with this client",
        label=label,
    )


# --------------------------------------------------------------------------- one call


class WireCall(Intercepted):
    """One model call seen at the HTTP client: the :class:`InterceptedCall` of an exchange."""

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
        codec: ModuleType,
        hook: ClientHook,
        request: Any,
        body: Mapping[str, Any],
        *,
        method: str,
        url: Any,
        model: str,
        streamed: bool,
        provider: str,
        is_async: bool,
        stream: bool,
    ) -> None:
        self.codec = codec
        self.hook = hook
        self.request = request  # what the library's served response and errors are made with
        self.model = model
        self.provider = provider  # the patched method, as ``httpx.Client.send``
        self.is_async = is_async
        self.stream = stream  # the body is left unread for the caller (``send(stream=True)``)
        self.streamed = streamed  # the API was asked for a stream
        self.call: Call | None = None
        self.status = 0
        self.content_type = ""
        self.encoding: str | None = None
        self.input: Any = {"method": method, "path": url.path, "body": body}
        server = {
            SERVER_ADDRESS: url.host,
            SERVER_PORT: url.port or (443 if url.scheme == "https" else 80),
        }
        max_tokens, temperature, top_p = codec.request_numbers(body)
        self.attributes = request_attributes(
            codec.provider(url.host) or A.provider_for_model(self.model),
            server,
            stream=self.streamed,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
        )
        if compared_as_messages(self.model):
            try:  # the only form the recorded entry has: compare the input as messages
                self.input = codec.messages(body)
            except ValueError:
                pass  # not messages: compared as given, which reports the difference
        if settings.capture_content:
            try:
                self.attributes[A.GEN_AI_INPUT_MESSAGES] = content_json(codec.messages(body))
            except Exception:
                warn_once("http-content", "tracely: could not capture the input messages")

    # -- recording -----------------------------------------------------------------------

    def _look(self, response: Any) -> dict[str, str]:
        self.status, items = self.hook.head(response)
        for name, value in items:
            lowered = name.lower()
            if lowered == "content-type":
                self.content_type = value
            elif lowered == "content-encoding":
                self.encoding = value
        return dict(self.codec.record_headers(items))

    def recordable(self, result: Any) -> Recording | TeeStream:
        headers = self._look(result)
        if self.stream:
            return TeeStream(
                result, headers, tee=lambda call, started: self._tee(result, call, headers, started)
            )
        return self._recording(self.hook.content(result), headers)

    async def arecordable(self, result: Any) -> Recording | TeeStream:
        return self.recordable(result)

    def _tee(self, response: Any, call: Call, headers: Mapping[str, str], started: float) -> None:
        recorder = body_recorder(call, self, headers, started, is_async=self.is_async)
        self.hook.tee(response, recorder, self.is_async)
        # Dropped unread and never closed: record what was read when the response is freed.
        weakref.finalize(response, recorder.finish)

    def record_item(self, item: Any, wire: dict[str, Any] | None) -> dict[str, Any]:
        return {"piece": bytes(item)}

    def record_stream(
        self, chunks: list[dict[str, Any]], headers: Mapping[str, str] | None
    ) -> Recording:
        raw = b"".join(chunk["piece"] for chunk in chunks)
        return self._recording(self.hook.decoded(raw, self.encoding), headers or {})

    def _recording(self, content: bytes, headers: Mapping[str, str]) -> Recording:
        value: dict[str, Any] = {"status": self.status, "headers": dict(headers)}
        if _is_sse(self.content_type):
            value["events"] = sse_events(content)
        else:
            value.update(body_value(content))
        body = _response_body(self.codec, value)
        attributes = response_attributes(self.codec, body) if self.status < 400 else {}
        return Recording(value, TAG, self.codec.usage(body), attributes)

    def failure_recording(self, exc: BaseException) -> Recording | None:
        return None

    def record_error(self, exc: BaseException) -> dict[str, Any]:
        return {"type": type(exc).__qualname__, "message": str(exc)}

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
        if entry.get("output_type") == TAG:
            output = orjson.loads(output_json)  # a fresh copy, whatever the caller changes
        else:
            output = served_output(self.codec, entry, self.model, streamed=self.streamed)
        session = self.call.session if self.call is not None else None
        return self.hook.served_response(self.request, output, stream=self.stream, session=session)

    def raise_error(self, error: Mapping[str, Any], label: str) -> NoReturn:
        self.hook.raise_error(error, label, self.request)


__all__ = [
    "FORMATS",
    "TAG",
    "WireCall",
    "answers",
    "body_bytes",
    "body_value",
    "format_for",
    "request_facts",
    "served_output",
    "sse_events",
    "sse_pieces",
]
