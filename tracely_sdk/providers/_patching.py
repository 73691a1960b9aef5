"""How provider methods are patched, and how a patched call runs.

Installing (``install`` / ``uninstall``, in ``_install``, re-exported here)
    A patch is a wrapt ``FunctionWrapper`` put on a class attribute (``Completions.create``),
    so every client, old or new, sees it at call time. Installing is idempotent: a method
    carries at most one tracely wrapper. Uninstalling restores exactly the object that was
    there before, when tracely's wrapper is still the outermost one. When another
    instrumentor wrapped the method after tracely, its wrapper holds tracely's as
    ``__wrapped__``: removing tracely's would break its chain, and putting the original back
    would remove it. Tracely's wrapper then stays where it is, switched to a pure
    pass-through, and a later ``install`` switches it back on instead of adding a second one.

Running (``intercept`` / ``aintercept``)
    A patched call becomes one :class:`~tracely_sdk._seam.Call`, the seam every recorded call
    goes through. Under ``fixtures()`` it is served from the recording, rebuilt into the
    SDK's own type by the provider module (the response attributes of the entry expected to
    answer it go into the span's starting attributes, so a served span is started once); live, the SDK's method runs with the call's span
    current (so the SDK's own spans are its children) and its result is recorded. A live
    stream is returned to the caller as the SDK's own stream object, teed in place: each item
    is kept as it passes, and the call is recorded, and its span ended, when the stream is
    exhausted, closed, fails, or is dropped unread.

A replayed stream the agent never reads is closed when its ``fixtures()`` block ends (when
the block's session is released), or at the latest when the next block starts.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace

from tracely_otel import attributes as A
from tracely_otel._foreign import input_messages
from tracely_sdk import _redact, _replay
from tracely_sdk._matching import LLM
from tracely_sdk._seam import Call, error_status
from tracely_sdk.errors import ConfigError
from tracely_sdk.providers._install import (
    bodies,
    capture_body,
    in_chain,
    install,
    is_installed,
    made_of,
    uninstall,
    wire_body,
    wrapper_of,
)

logger = logging.getLogger("tracely")


# GenAI semantic-convention names not (yet) in tracely_otel._attributes.
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_OUTPUT_TYPE = "gen_ai.output.type"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

_warned: set[str] = set()


def warn_once(key: str, message: str, *args: Any, exc_info: bool = False) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args, exc_info=exc_info)


# --------------------------------------------------------------------------- settings


class _Settings:
    """Read when a provider is instrumented and when a fixtures() block starts, never per call."""

    capture_content = False


settings = _Settings()


# The GenAI instrumentations' newer values of the variable, besides true/false.
_CAPTURE_MODES = {
    "span_only": True,
    "span_and_event": True,
    "event_only": False,
    "no_content": False,
}


def refresh_settings() -> None:
    import os

    from tracely_sdk._config import resolve

    try:
        settings.capture_content = bool(resolve("capture_content"))
    except ConfigError as exc:
        raw = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
        mode = _CAPTURE_MODES.get(raw.strip().lower())
        if mode is None:
            warn_once("capture", "tracely: %s; message content is not captured", exc)
        settings.capture_content = bool(mode)


def find_stream(value: Any, classes: tuple[type, ...]) -> Any:
    """The SDK stream object inside ``value``, which another instrumentor may have wrapped
    (a wrapt proxy, or an object keeping the stream as ``stream``); None when there is none."""
    for _ in range(8):
        if value is None:
            return None
        if issubclass(type(value), classes):
            return value
        inner = getattr(value, "__wrapped__", None)
        if inner is None:
            fields = getattr(value, "__dict__", None) or {}
            inner = fields.get("stream", fields.get("_stream"))
        value = inner
    return None


def compared_as_messages(model: str) -> bool:
    """Whether the recorded entry that will answer a call to ``model`` in this context's
    fixtures() block holds its input as the GenAI conventions' messages (read from another
    instrumentor's span, or written by hand in that shape).

    The call's input is then compared in that form (:func:`input_messages`), not as the
    provider's own arguments, which such an entry never has: an unchanged prompt is served
    without divergence and a changed one is reported. The matcher serves LLM entries in order,
    so the entry looked at is the one it will match, unless a concurrent call of the same
    block takes it first.
    """
    session = _replay.current_session()
    if session is None or not session.recording.messages_inputs:
        return False  # nothing to look ahead for: what nearly every replay is
    entry = session.recording.peek(LLM, model)
    return entry is not None and entry.messages_input


def content_json(value: Any) -> str:
    """A gen_ai content attribute's JSON text, redacted like every recorded value."""
    from tracely_sdk._types import dumps

    return _redact.redact(dumps(value).decode())


# Keyed by the id of the client's URL object, which each entry keeps alive so that the id
# cannot be reused while cached (cheaper than weak references to the clients).
_servers: dict[int, tuple[Any, dict[str, Any]]] = {}
_SERVERS_KEPT = 256


def server_attributes(client: Any) -> dict[str, Any]:
    """``server.address`` / ``server.port`` of an SDK client, worked out once per base URL."""
    try:
        # Both SDKs keep the URL as `_base_url`; their `base_url` property returns it through
        # a function-level import on every read, a cost paid on every call otherwise.
        url = client.__dict__.get("_base_url") or client.base_url
        cached = _servers.get(id(url))
        if cached is not None and cached[0] is url:
            return cached[1]
        port = url.port or (443 if url.scheme == "https" else 80)
        attributes = {SERVER_ADDRESS: url.host, SERVER_PORT: port}
        if len(_servers) >= _SERVERS_KEPT:
            _servers.pop(next(iter(_servers)), None)
        _servers[id(url)] = (url, attributes)
        return attributes
    except Exception:
        return {}


# --------------------------------------------------------------------------- JSON helpers


def plain(value: Any, omitted: tuple[type, ...] = ()) -> Any:
    """``value`` as JSON data, SDK objects dumped as the SDK sends them (unset fields left out)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v, omitted) for k, v in value.items() if not isinstance(v, omitted)}
    if isinstance(value, (list, tuple)):
        return [plain(v, omitted) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return plain(dump(mode="json", exclude_unset=True, warnings=False), omitted)
        except TypeError:
            return plain(dump(mode="json"), omitted)
    return str(value)


def materialise(kwargs: dict[str, Any], key: str, omitted: tuple[type, ...] = ()) -> None:
    """A one-shot iterable argument (a generator of messages), made a list so that it can be
    both recorded and sent."""
    value = kwargs.get(key)
    if value is None or type(value) is list:  # what calls pass nearly always
        return
    if isinstance(value, (str, bytes, list, tuple, Mapping, *omitted)):
        return
    if isinstance(value, Iterable):
        kwargs[key] = list(value)


def json_text(value: Any) -> str:
    """Tool-call arguments as the JSON text the APIs send."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value if value is not None else {}).decode()


def json_value(text: Any) -> Any:
    """Tool-call arguments as data where the text is JSON."""
    if not isinstance(text, str):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def pieces(text: str) -> list[str]:
    """``text`` in word-sized pieces that join back to it, for synthesised streams."""
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)] if text else []


def entry_usage(entry: Mapping[str, Any]) -> tuple[int, int] | None:
    usage = entry.get("usage")
    if isinstance(usage, (list, tuple)) and len(usage) == 2:
        return int(usage[0]), int(usage[1])
    return None


# --------------------------------------------------------------------------- replies


ToolCall = tuple[str, str, str]  # (call id, tool name, arguments as JSON text)


@dataclass(slots=True)
class Reply:
    """What a recording says the model answered, in a form any SDK response can be made from.

    ``messages`` holds one ``(text, tool calls, finish reason)`` per choice; finish reasons
    are the GenAI conventions' values (``stop``, ``length``, ``tool_call``, ...).
    """

    messages: list[tuple[str | None, list[ToolCall], str]]
    model: str
    response_id: str
    usage: tuple[int, int] | None


def reply_from_genai(
    output: Mapping[str, Any], *, model: str, usage: tuple[int, int] | None
) -> Reply:
    """The reply of an entry read from another instrumentor's span (``gen_ai.messages``)."""
    messages: list[tuple[str | None, list[ToolCall], str]] = []
    for index, message in enumerate(output.get("messages") or []):
        if not isinstance(message, Mapping):
            continue
        texts: list[str] = []
        calls: list[ToolCall] = []
        for part in message.get("parts") or []:
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "text" and isinstance(part.get("content"), str):
                texts.append(part["content"])
            elif part.get("type") == "tool_call":
                call_id = str(part.get("id") or f"call_replay_{index}_{len(calls)}")
                arguments = json_text(part.get("arguments"))
                calls.append((call_id, str(part.get("name") or ""), arguments))
        reason = message.get("finish_reason")
        finish = reason if isinstance(reason, str) else ("tool_call" if calls else "stop")
        messages.append(("".join(texts) if texts else None, calls, finish))
    if not messages:
        messages.append(("", [], "stop"))
    recorded_model = output.get("model")
    recorded_id = output.get("id")
    return Reply(
        messages,
        model=recorded_model if isinstance(recorded_model, str) and recorded_model else model,
        response_id=recorded_id if isinstance(recorded_id, str) and recorded_id else "replay",
        usage=usage,
    )


def reply_from_value(output: Any, *, model: str, usage: tuple[int, int] | None) -> Reply:
    """The reply of a hand-written entry: its text, or its JSON data answered as JSON text."""
    if isinstance(output, Mapping) and isinstance(output.get("content"), str):
        text = output["content"]
    elif isinstance(output, str):
        text = output
    else:
        text = orjson.dumps(output).decode()
    return Reply([(text, [], "stop")], model=model, response_id="replay", usage=usage)


# --------------------------------------------------------------------------- one intercepted call


@dataclass(slots=True)
class Recording:
    """What a live call recorded: the JSON value, its type tag, usage and closing attributes."""

    value: Any
    tag: str
    usage: tuple[int, int] | None = None
    attributes: Mapping[str, Any] | None = None


@dataclass(slots=True)
class TeeStream:
    """A live result whose stream must be teed; ``headers`` are the response's kept headers."""

    stream: Any
    headers: Mapping[str, str] | None = None


@dataclass(slots=True)
class Refused:
    """A recorded answer that the SDK's own parser refuses on replay, as it did live
    (``LengthFinishReasonError``): raised at the call site once the call is served.

    The seam turns any exception from rebuilding into ReplayError, so the provider's
    ``rebuild`` returns this instead of raising the SDK's exception itself.
    """

    error: BaseException


def _answer(call: Call, value: Any) -> Any:
    if isinstance(value, Refused):
        error = value.error
        call.span.set_attribute(A.ERROR_TYPE, type(error).__qualname__)
        call.span.set_status(error_status(error))
        raise error
    return value


class InterceptedCall(Protocol):
    """What a provider module knows about one call to a patched method.

    It is also the call's :class:`~tracely_sdk._seam.OutputCodec` (subclass
    :class:`Intercepted` for its ``record``).
    """

    model: str
    provider: str
    input: Any
    attributes: dict[str, Any]
    call: Call | None

    def record(self, result: Any) -> tuple[Any, str | None]:
        """The recorded value and type tag of a :class:`Recording`."""

    def served_attributes(self, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The response attributes (model, id, finish reasons) of a recorded entry."""

    def recordable(self, result: Any) -> Recording | TeeStream:
        """The recording of a live non-streamed ``result``, or the stream to tee."""

    async def arecordable(self, result: Any) -> Recording | TeeStream:
        """:meth:`recordable` for async results (an async raw response parses with await)."""

    def record_item(self, item: Any, wire: dict[str, Any] | None) -> dict[str, Any]:
        """The recording of one item of a live stream, made as it passes; ``wire`` is the JSON
        data the SDK made it of, when :func:`capture_body` saw it."""

    def record_stream(
        self, chunks: list[dict[str, Any]], headers: Mapping[str, str] | None
    ) -> Recording:
        """The recording of a live stream (possibly cut short) from its recorded items."""

    def failure_recording(self, exc: BaseException) -> Recording | None:
        """For a failure that carries the API's answer (a parse error): that answer."""

    def rebuild(self, output_json: bytes, entry: Mapping[str, Any]) -> Any:
        """The value to serve for a recorded output (its JSON text, parsed afresh)."""

    def record_error(self, exc: BaseException) -> dict[str, Any]:
        """The recorded form of a live failure."""

    def raise_error(self, error: Mapping[str, Any], label: str) -> NoReturn:
        """Raise the SDK's exception for a recorded failure."""


class Intercepted:
    """Base of the provider modules' calls: what the seam records for them."""

    __slots__ = ()

    @staticmethod
    def record(result: Any) -> tuple[Any, str | None]:
        if not isinstance(result, Recording):
            raise TypeError("a provider call records a Recording")
        return result.value, result.tag


def _usage(result: Any) -> tuple[int, int] | None:
    return result.usage if isinstance(result, Recording) else None


def _new_call(spec: InterceptedCall) -> Call:
    # A served call's span starts once, with every attribute: the seam asks the spec for the
    # served entry's response attributes (served_attributes) before it starts the span.
    call = Call(
        A.KIND_LLM,
        spec.model,
        input=spec.input,
        usage=_usage,
        codec=spec,
        attributes=spec.attributes,
        provider=spec.provider,
    )
    spec.call = call
    return call


def _release(call: Call, spec: InterceptedCall) -> None:
    """End the call and break the call/spec cycle, so the call (and the replay session it
    holds) is freed at once: the session's end closes its unread replayed streams."""
    call.end()
    spec.call = None


def _succeed(call: Call, recording: Recording) -> None:
    # One pass of the SDK's attribute checks: the response attributes first, then the seam's
    # recorded values, then tracely.kind, last.
    call.succeeded(recording, recording.attributes)


def _fail(call: Call, spec: InterceptedCall, exc: BaseException) -> None:
    try:
        recording = spec.failure_recording(exc) if isinstance(exc, Exception) else None
    except Exception:
        recording = None
    if recording is None:
        call.failed(exc)
        return
    # The API answered and the SDK's own parser refused the answer: record the answer, so the
    # same parser refuses it again on replay.
    _succeed(call, recording)
    call.span.set_attribute(A.ERROR_TYPE, type(exc).__qualname__)
    call.span.set_status(error_status(exc))


def _recorded(
    call: Call,
    spec: InterceptedCall,
    outcome: Recording | TeeStream,
    result: Any,
    started: float,
) -> Any:
    if isinstance(outcome, Recording):
        _succeed(call, outcome)
        _release(call, spec)
        return result
    if not tee(outcome.stream, call, spec, outcome.headers, started):
        _release(call, spec)
    return result


def _unrecordable(call: Call, spec: InterceptedCall) -> None:
    warn_once("recordable", "tracely: could not record the result of %s", call.label, exc_info=True)
    _release(call, spec)


def intercept(spec: InterceptedCall, live: Callable[[], Any]) -> Any:
    """Serve the call from the recording, or run ``live()`` and record it."""
    call = _new_call(spec)  # under strict replay, a miss raises ReplayError here
    if call.served:
        try:
            return _answer(call, call.serve())
        finally:
            _release(call, spec)
    # The call's span is current while the SDK runs, so the SDK's own spans are its children
    # (attached directly: `trace.use_span` costs a generator context manager per call).
    token = otel_context.attach(trace.set_span_in_context(call.span))
    kept = bodies.set([])  # see wire_body: until the result is recorded
    started = time.perf_counter()
    try:
        try:
            try:
                result = live()
            finally:
                otel_context.detach(token)
        except BaseException as exc:
            _fail(call, spec, exc)
            _release(call, spec)
            raise
        try:
            outcome = spec.recordable(result)
        except Exception:
            _unrecordable(call, spec)
            return result
    finally:
        bodies.reset(kept)
    return _recorded(call, spec, outcome, result, started)


async def aintercept(spec: InterceptedCall, live: Callable[[], Awaitable[Any]]) -> Any:
    """Async :func:`intercept`: ``live()`` returns an awaitable, awaited only when live."""
    call = _new_call(spec)
    if call.served:
        try:
            return _answer(call, call.serve())
        finally:
            _release(call, spec)
    # The call's span is current while the SDK runs, so the SDK's own spans are its children
    # (attached directly: `trace.use_span` costs a generator context manager per call).
    token = otel_context.attach(trace.set_span_in_context(call.span))
    kept = bodies.set([])  # see wire_body: until the result is recorded
    started = time.perf_counter()
    try:
        try:
            try:
                result = await live()
            finally:
                otel_context.detach(token)
        except BaseException as exc:
            _fail(call, spec, exc)
            _release(call, spec)
            raise
        try:
            outcome = await spec.arecordable(result)
        except Exception:
            _unrecordable(call, spec)
            return result
    finally:
        bodies.reset(kept)
    return _recorded(call, spec, outcome, result, started)


# --------------------------------------------------------------------------- teeing a live stream


class _StreamRecorder:
    """The items of one live stream, each recorded as it passes; the stream is recorded on the
    call when it is done."""

    __slots__ = ("active", "call", "chunks", "done", "first_chunk", "headers", "spec", "started")

    def __init__(
        self,
        call: Call,
        spec: InterceptedCall,
        headers: Mapping[str, str] | None,
        started: float,
    ) -> None:
        self.call = call
        self.spec = spec
        self.headers = headers
        self.started = started  # perf_counter() when the request was sent
        self.first_chunk: float | None = None  # seconds from the request to the first item
        # None once an item could not be recorded: the stream is then not recorded at all, as
        # a recording missing an item would be served as if it were whole.
        self.chunks: list[dict[str, Any]] | None = []
        self.active = False  # inside the SDK's own next(): its closing is its end, not a cut
        self.done = False

    def add(self, item: Any, seen: list[tuple[Any, Any]]) -> None:
        """Record ``item`` before the agent has it: the agent may change it in place, and the
        SDK's object need not be kept until the stream ends."""
        if self.first_chunk is None:
            self.first_chunk = time.perf_counter() - self.started
        chunks = self.chunks
        if chunks is None:
            return
        try:
            chunks.append(self.spec.record_item(item, made_of(item, seen)))
        except Exception:
            self.chunks = None
            self._unrecorded()

    def _unrecorded(self) -> None:
        warn_once(
            "stream", "tracely: could not record the stream of %s", self.call.label, exc_info=True
        )

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        chunks, self.chunks = self.chunks, []
        try:
            if chunks is not None:
                recording = self.spec.record_stream(chunks, self.headers)
                if self.first_chunk is not None:
                    recording.attributes = {
                        **(recording.attributes or {}),
                        A.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: self.first_chunk,
                    }
                _succeed(self.call, recording)
        except Exception:
            self._unrecorded()
        finally:
            _release(self.call, self.spec)

    def fail(self, exc: BaseException) -> None:
        if self.done:
            return
        self.done = True
        self.chunks = []
        try:
            self.call.failed(exc)
        finally:
            _release(self.call, self.spec)

    def closed(self) -> None:
        if not self.active:
            self.finish()


def _sync_tee(inner: Iterator[Any], recorder: _StreamRecorder) -> Iterator[Any]:
    try:
        while True:
            recorder.active = True
            seen: list[tuple[Any, Any]] = []
            try:
                # The item's JSON data, as the server sent it, is recorded rather than a dump of
                # the object the SDK made of it: see capture_body.
                token = bodies.set(seen)
                try:
                    item = next(inner)
                finally:
                    bodies.reset(token)
            except StopIteration:
                recorder.active = False
                recorder.finish()
                return
            except BaseException as exc:
                recorder.active = False
                recorder.fail(exc)
                raise
            recorder.active = False
            recorder.add(item, seen)
            yield item
    finally:
        # Closed early: closing the SDK's generator closes the response (and ends the call).
        close = getattr(inner, "close", None)
        if close is not None:
            close()
        recorder.closed()


async def _async_tee(inner: AsyncIterator[Any], recorder: _StreamRecorder) -> AsyncIterator[Any]:
    try:
        while True:
            recorder.active = True
            seen: list[tuple[Any, Any]] = []
            try:
                token = bodies.set(seen)  # as in _sync_tee
                try:
                    item = await inner.__anext__()
                finally:
                    bodies.reset(token)
            except StopAsyncIteration:
                recorder.active = False
                recorder.finish()
                return
            except BaseException as exc:
                recorder.active = False
                recorder.fail(exc)
                raise
            recorder.active = False
            recorder.add(item, seen)
            yield item
    finally:
        aclose = getattr(inner, "aclose", None)
        if aclose is not None:
            await aclose()
        recorder.closed()


def _hook_close(response: Any, recorder: _StreamRecorder, is_async: bool) -> None:
    """Finish the recording when the stream's HTTP response is closed, by whatever path.

    The SDK's stream, its helpers (``ChatCompletionStream``, ``MessageStream``) and the SDK's
    own generator at exhaustion all close the stream by closing this response. The hook holds
    the response weakly so that a dropped stream is still freed at once.
    """
    ref = weakref.ref(response)
    cls = type(response)
    if is_async:
        original_aclose = cls.aclose

        async def aclose() -> None:
            target = ref()
            try:
                if target is not None:
                    await original_aclose(target)
            finally:
                recorder.closed()

        response.aclose = aclose
    else:
        original_close = cls.close

        def close() -> None:
            target = ref()
            try:
                if target is not None:
                    original_close(target)
            finally:
                recorder.closed()

        response.close = close


def tee(
    stream: Any,
    call: Call,
    spec: InterceptedCall,
    headers: Mapping[str, str] | None,
    started: float,
) -> bool:
    """Record ``stream``'s items as they pass, in place: the caller keeps the SDK's object.

    Returns False when the stream cannot be teed (an SDK without the stream internals this
    relies on); the call then ends unrecorded and the stream is untouched.
    """
    try:
        inner = stream._iterator
        response = stream.response
        is_async = hasattr(inner, "__anext__")
    except Exception:
        warn_once("tee", "tracely: cannot record %s streams of this SDK", type(stream).__name__)
        return False
    recorder = _StreamRecorder(call, spec, headers, started)
    stream._iterator = _async_tee(inner, recorder) if is_async else _sync_tee(inner, recorder)
    try:
        _hook_close(response, recorder, is_async)
    except Exception:
        warn_once("tee-close", "tracely: cannot observe the closing of %s", type(stream).__name__)
    # Dropped unread and never closed: record what was read when the stream is freed.
    weakref.finalize(stream, recorder.finish)
    return True


# --------------------------------------------------------------------------- replayed streams


_served: dict[int, tuple[weakref.ref[Any], list[weakref.ref[Any]]]] = {}
_ended: set[int] = set()  # the sessions in _served whose fixtures() block has ended
_served_lock = threading.Lock()


def served_stream(session: Any, response: Any) -> None:
    """Remember a replayed stream's response, to close it when ``session``'s block ends."""
    if session is None:
        return
    key = id(session)
    with _served_lock:
        entry = _served.get(key)
        if entry is None or entry[0]() is not session:
            entry = (weakref.ref(session), [])
            _served[key] = entry
            _ended.discard(key)
            weakref.finalize(session, _close_served, key)
            # A replayed stream may still be read after its block ends: it is closed at the
            # next block or when the session is freed, whichever comes first.
            session.on_end(lambda: _end(key))
        entry[1].append(weakref.ref(response))


def _end(key: int) -> None:
    with _served_lock:
        _ended.add(key)


def _close_served(key: int) -> None:
    with _served_lock:
        entry = _served.pop(key, None)
        _ended.discard(key)
    if entry is None:
        return
    for ref in entry[1]:
        response = ref()
        if response is not None and not getattr(response, "is_closed", True):
            try:
                # A replayed body is sync and async at once: a sync close works for both.
                response.close()
            except Exception:
                warn_once("close-replayed", "tracely: could not close a replayed stream")


def close_finished_streams() -> None:
    """Close the replayed streams of every fixtures() block that has ended."""
    with _served_lock:
        keys = [k for k, (ref, _) in _served.items() if ref() is None or k in _ended]
    for key in keys:
        _close_served(key)


__all__ = [
    "Intercepted",
    "InterceptedCall",
    "Recording",
    "Refused",
    "Reply",
    "TeeStream",
    "aintercept",
    "capture_body",
    "close_finished_streams",
    "entry_usage",
    "find_stream",
    "compared_as_messages",
    "in_chain",
    "input_messages",
    "install",
    "intercept",
    "is_installed",
    "json_text",
    "json_value",
    "materialise",
    "pieces",
    "plain",
    "refresh_settings",
    "reply_from_genai",
    "reply_from_value",
    "served_stream",
    "server_attributes",
    "settings",
    "tee",
    "uninstall",
    "warn_once",
    "wire_body",
    "wrapper_of",
]
