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
    body read in pieces is teed as it is read (see ``_streams``, which also closes the
    replayed streams a block leaves unread).

Settings and the once-only warnings are in ``_settings``; both are re-exported here for the
provider modules.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import Token
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context

from tracely_otel import attributes as A
from tracely_otel.genai import OutputMessage, input_messages
from tracely_sdk import _redact, _replay
from tracely_sdk import _tool_calls as tool_calls
from tracely_sdk._matching import LLM
from tracely_sdk._seam import Call, enter_call_body, error_status, leave_call_body
from tracely_sdk._types import dumps
from tracely_sdk.providers._install import (
    in_chain,
    install,
    is_installed,
    uninstall,
    wrapper_of,
)
from tracely_sdk.providers._settings import refresh_settings, settings, warn_once
from tracely_sdk.providers._streams import (
    close_finished_streams,
    release,
    served_stream,
    succeed,
)

# GenAI semantic-convention names not (yet) in tracely_otel._attributes.
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_OUTPUT_TYPE = "gen_ai.output.type"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"


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


WIRE_TAG = "http.response"
"""The type tag of a call recorded at the HTTP client (``providers.http``)."""


def served_tag(model: str) -> str | None:
    """The type tag of the entry that will answer a call to ``model`` in this context's
    ``fixtures()`` block, when it is not the HTTP client's own (see :func:`compared_as_messages`
    for which entry that is); None otherwise, or outside a block."""
    session = _replay.current_session()
    if session is None or not session.recording.tagged_outputs:
        return None  # nothing to look ahead for: what nearly every replay is
    entry = session.recording.peek(LLM, model)
    tag = entry.raw.get("output_type") if entry is not None else None
    return tag if isinstance(tag, str) and tag != WIRE_TAG else None


def content_json(value: Any) -> str:
    """A gen_ai content attribute's JSON text, redacted like every recorded value."""
    return _redact.redact(dumps(value).decode())


# --------------------------------------------------------------------------- JSON helpers


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


# --------------------------------------------------------------------------- span attributes


def request_attributes(
    provider: str,
    server: Mapping[str, Any],
    *,
    stream: bool,
    max_tokens: Any = None,
    temperature: Any = None,
    top_p: Any = None,
) -> dict[str, Any]:
    """The request attributes every provider's span has; a number not given is left out.
    ``server`` is the client's ``server.address`` / ``server.port``."""
    attributes: dict[str, Any] = {A.GEN_AI_PROVIDER_NAME: provider, **server}
    if stream:
        attributes[A.GEN_AI_REQUEST_STREAM] = True
    for name, value in (
        (GEN_AI_REQUEST_MAX_TOKENS, max_tokens),
        (GEN_AI_REQUEST_TEMPERATURE, temperature),
        (GEN_AI_REQUEST_TOP_P, top_p),
    ):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            attributes[name] = value
    return attributes


class ResponseReader(Protocol):
    """What :func:`response_attributes` reads a response body with (a provider call, or an
    HTTP wire format's codec)."""

    @property
    def model_key(self) -> str: ...

    @property
    def id_key(self) -> str: ...

    def reasons(self, body: Mapping[str, Any]) -> list[str]: ...

    def asks_for_tools(self, body: Mapping[str, Any]) -> bool: ...

    def output_messages(self, body: Mapping[str, Any]) -> list[OutputMessage]: ...


def response_attributes(source: ResponseReader, body: Mapping[str, Any]) -> dict[str, Any]:
    """A response body's span attributes: model, id, finish reasons, and the output messages
    when content is captured (the tool calls it asks for are expected either way)."""
    out: dict[str, Any] = {}
    model, response_id = body.get(source.model_key), body.get(source.id_key)
    if isinstance(model, str):
        out[A.GEN_AI_RESPONSE_MODEL] = model
    if isinstance(response_id, str):
        out[A.GEN_AI_RESPONSE_ID] = response_id
    reasons = source.reasons(body)
    if reasons:
        out[A.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(reasons)
    extras = getattr(source, "response_extras", None)  # a wire format's own attributes
    if extras is not None:
        out.update(extras(body))
    try:
        # Converted only when something reads them: most responses ask for no tool.
        if settings.capture_content or source.asks_for_tools(body):
            messages = source.output_messages(body)
            tool_calls.expect(messages)
            if settings.capture_content and messages:  # an embedding has none
                out[A.GEN_AI_OUTPUT_MESSAGES] = content_json(messages)
        else:
            tool_calls.expect(())
    except Exception:
        warn_once(
            f"{type(source).__module__}-output",
            "tracely: could not read the output messages",
            exc_info=True,
        )
    return out


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


def token_counts(
    usage: tuple[int, int] | None, names: tuple[str, str, str]
) -> dict[str, int] | None:
    """``usage`` (input, output tokens) as a response body's usage object, whose input, output
    and total counts are named ``names``; None without usage."""
    if usage is None:
        return None
    tokens_in, tokens_out = usage
    return dict(zip(names, (tokens_in, tokens_out, tokens_in + tokens_out), strict=True))


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


# --------------------------------------------------------------------------- one intercepted call


@dataclass(slots=True)
class CapturedResult:
    """What a live call recorded: the JSON value, its type tag, usage and closing attributes."""

    value: Any
    tag: str
    usage: tuple[int, int] | None = None
    attributes: Mapping[str, Any] | None = None


@dataclass(slots=True)
class TeeStream:
    """A live result whose body is recorded as it is read: ``tee`` starts that, given the call
    and when the request was sent (an HTTP response's body, see ``providers.http``)."""

    tee: Callable[[Call, float], None]


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
        """The recorded value and type tag of a :class:`CapturedResult`."""

    def served_attributes(self, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The response attributes (model, id, finish reasons) of a recorded entry."""

    def recordable(self, result: Any) -> CapturedResult | TeeStream:
        """The recording of a live non-streamed ``result``, or the stream to tee."""

    async def arecordable(self, result: Any) -> CapturedResult | TeeStream:
        """:meth:`recordable` for async results (an async raw response parses with await)."""

    def record_item(self, item: Any) -> dict[str, Any]:
        """The recording of one item of a live stream, made as it passes."""

    def record_stream(
        self, chunks: list[dict[str, Any]], headers: Mapping[str, str] | None
    ) -> CapturedResult:
        """The recording of a live stream (possibly cut short) from its recorded items."""

    def failure_recording(self, exc: BaseException) -> CapturedResult | None:
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
        if not isinstance(result, CapturedResult):
            raise TypeError("a provider call records a CapturedResult")
        return result.value, result.tag


def _usage(result: Any) -> tuple[int, int] | None:
    return result.usage if isinstance(result, CapturedResult) else None


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
    succeed(call, recording)
    call.span.set_attribute(A.ERROR_TYPE, type(exc).__qualname__)
    call.span.set_status(error_status(exc))


def _serve(call: Call, spec: InterceptedCall) -> Any:
    try:
        return _answer(call, call.serve())
    finally:
        release(call, spec)


class _LiveCall:
    """One live call of a patched method, from sending it to recording its result.

    What the sync and async calls share. They only run the SDK's method (``with
    run.running():``) and make its result recordable (``with run.recording():``, keeping
    ``run.outcome``), awaiting both when async; this object does the rest as each block ends.
    """

    __slots__ = ("body", "call", "outcome", "spec", "started", "token")

    def __init__(self, call: Call, spec: InterceptedCall) -> None:
        self.call = call
        self.spec = spec
        # The call's span is current while the SDK runs, so the SDK's own spans are its children
        # (attached directly: `trace.use_span` costs a generator context manager per call).
        self.token: Token[Context] | None = otel_context.attach(
            trace.set_span_in_context(call.span)
        )
        # The HTTP request the SDK makes is this call's: the HTTP layer must not record it again.
        self.body: Token[Any] | None = enter_call_body()
        self.started = time.perf_counter()
        self.outcome: CapturedResult | TeeStream | None = None

    def running(self) -> _LiveCall:
        """For the block that runs the SDK's method, with the call's span current."""
        return self

    def recording(self) -> _LiveCall:
        """For the block that makes the result recordable."""
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> bool:
        # The first block to end is the SDK's method (the span's context is still attached),
        # the second the recording of its result.
        token, self.token = self.token, None
        if token is not None:
            otel_context.detach(token)
            if self.body is not None:
                leave_call_body(self.body)
                self.body = None
            if exc is not None:
                _fail(self.call, self.spec, exc)
                release(self.call, self.spec)
            return False
        # Its result was made recordable, or could not be.
        if isinstance(exc, Exception):
            warn_once(
                "recordable",
                "tracely: could not record the result of %s",
                self.call.label,
                exc_info=True,
            )
            release(self.call, self.spec)
            return True  # the caller has its result, unrecorded
        return False

    def recorded(self, result: Any) -> Any:
        """``result``, once its recording is made (or its stream teed)."""
        outcome = self.outcome
        if outcome is None:  # unrecordable, and already released
            return result
        call, spec = self.call, self.spec
        if isinstance(outcome, CapturedResult):
            succeed(call, outcome)
            release(call, spec)
        else:
            outcome.tee(call, self.started)
        return result


def intercept(spec: InterceptedCall, live: Callable[[], Any]) -> Any:
    """Serve the call from the recording, or run ``live()`` and record it."""
    call = _new_call(spec)  # under strict replay, a miss raises ReplayError here
    if call.served:
        return _serve(call, spec)
    run = _LiveCall(call, spec)
    with run.running():
        result = live()
    with run.recording():
        run.outcome = spec.recordable(result)
    return run.recorded(result)


async def aintercept(spec: InterceptedCall, live: Callable[[], Awaitable[Any]]) -> Any:
    """Async :func:`intercept`: ``live()`` returns an awaitable, awaited only when live."""
    call = _new_call(spec)
    if call.served:
        return _serve(call, spec)
    run = _LiveCall(call, spec)
    with run.running():
        result = await live()
    with run.recording():
        run.outcome = await spec.arecordable(result)
    return run.recorded(result)


__all__ = [
    "Intercepted",
    "InterceptedCall",
    "CapturedResult",
    "Refused",
    "ResponseReader",
    "Reply",
    "WIRE_TAG",
    "TeeStream",
    "aintercept",
    "close_finished_streams",
    "entry_usage",
    "compared_as_messages",
    "in_chain",
    "input_messages",
    "install",
    "intercept",
    "is_installed",
    "json_text",
    "json_value",
    "pieces",
    "refresh_settings",
    "reply_from_genai",
    "request_attributes",
    "response_attributes",
    "served_tag",
    "served_stream",
    "settings",
    "uninstall",
    "warn_once",
    "wrapper_of",
]
