"""The call seam: ``agent``, ``call_tool``/``call_llm`` (and async twins) and ``@observe``.

Live, a call runs ``fn``, records its output (or error) on a span and returns it. Under
``fixtures()``, the recorded output is served and ``fn`` is never called. Provider patches
use the same :class:`Call` so that every path records and replays alike.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar, Token
from typing import Any, NoReturn, Protocol, TypeVar, cast, overload

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tracely_otel import attributes as A
from tracely_otel import digest_item
from tracely_otel.diagnostics import WarnOnce
from tracely_sdk import _redact, _tool_calls
from tracely_sdk._masks import NO_MASKS, Masks, masks_from
from tracely_sdk._matching import LLM, TOOLS, Entry, Match
from tracely_sdk._replay import ReplaySession, current_session, unrebuildable
from tracely_sdk._types import (
    NO_ANNOTATION,
    dumps,
    encode_value,
    is_lossy,
    rebuild,
    return_annotation,
)
from tracely_sdk._version import __version__
from tracely_sdk.errors import ConfigError, LLMError, RecordedError, ReplayError, ToolError

logger = logging.getLogger("tracely")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class _BeforeNextSpan:
    """What runs once before the next tracely span starts: set by start-up code
    (``_startup``), which must attach the recorder only once the application has set its
    provider. The seam only calls it, so it depends on nothing above it."""

    __slots__ = ("hook",)

    def __init__(self) -> None:
        self.hook: Callable[[], None] | None = None


before_next_span = _BeforeNextSpan()


class _TracerCache:
    """The tracer of the current global provider, re-fetched only when the provider changes.

    ``drops`` says that every span the tracer starts is a non-recording one whatever its
    attributes: a no-op tracer, or the SDK's with the ``ALWAYS_OFF`` sampler (what ``tracely
    replay`` sets up with no exporter). Nobody can read such a span's attributes, so the seam
    does not compute the ones it would set when the call ends (the digest, a served output).
    """

    __slots__ = ("drops", "provider", "tracer")

    def __init__(self) -> None:
        self.provider: object = None
        self.tracer: trace.Tracer = trace.NoOpTracer()
        self.drops = False

    def get(self) -> trace.Tracer:
        hook = before_next_span.hook
        if hook is not None:
            hook()
        provider = trace.get_tracer_provider()
        if provider is not self.provider:
            self.tracer = provider.get_tracer("tracely_sdk", __version__)
            self.provider = provider
            self.drops = isinstance(self.tracer, trace.NoOpTracer) or (
                getattr(self.tracer, "sampler", None) is ALWAYS_OFF
            )
        return self.tracer


_tracers = _TracerCache()


def _drops_spans() -> bool:
    """Whether the span the seam starts next records nothing (see ``_TracerCache``)."""
    _tracers.get()
    return _tracers.drops


_UNSET: Any = object()
_warn_once = WarnOnce(logger)


class _CallCount:
    """The tool and LLM calls one agent run made, recorded on its span when it ends.

    Only calls the extractor turns into entries count: a call made inside another call is
    served as part of it, so it is not counted (the run marks its body with :data:`_IN_CALL`).
    """

    __slots__ = ("llm", "lock", "tools", "trace_id")

    def __init__(self, trace_id: int) -> None:
        self.trace_id = trace_id
        self.tools = 0
        self.llm = 0
        self.lock = threading.Lock()  # calls of one run may end on several threads

    def add(self, kind: str, span: Span) -> None:
        if span.get_span_context().trace_id != self.trace_id:
            return  # started in a trace of its own: not part of this run's recording
        with self.lock:
            if kind == A.KIND_TOOL:
                self.tools += 1
            else:
                self.llm += 1

    def attributes(self) -> dict[str, int]:
        with self.lock:
            return {
                A.CALLS_TOOLS: self.tools,
                A.CALLS_LLM: self.llm,
                A.CALLS_LAST_SEQ: self.tools + self.llm,
            }


_IN_CALL: Any = object()  # what _run_calls holds while a live call's fn runs
# The count of the outermost agent run in this context, _IN_CALL inside a call's body, or None.
_run_calls: contextvars.ContextVar[Any] = contextvars.ContextVar("tracely_run_calls", default=None)


def enter_call_body() -> Token[Any]:
    """Mark the code that runs from here as a live call's body (undo with
    :func:`leave_call_body`): a call made inside it is part of that call, recorded and served
    with it, so it is neither counted nor recorded again by a lower layer."""
    return _run_calls.set(_IN_CALL)


def leave_call_body(token: Token[Any]) -> None:
    _run_calls.reset(token)


def in_call_body() -> bool:
    """Whether a live call's body is running in this context (see :func:`enter_call_body`)."""
    return _run_calls.get() is _IN_CALL


def _encode_input(value: Any) -> tuple[str, bool]:
    """A call's args or input as recorded (redacted JSON text), and whether anything was lost."""
    text = dumps(value).decode("utf-8")
    return _redact.redact(text), is_lossy(text)


def _digest_json(items: list[str]) -> str:
    """The ``tracely.digest`` attribute from :func:`digest_item` members."""
    return "{" + ",".join(items) + "}"


# The closing values whose digests _flush adds to the input's (set by the call's start).
_CLOSING_DIGESTED = tuple(k for k in A.DIGESTED if k not in (A.ARGS, A.INPUT))


class _Encoded:
    """A value as it is recorded: redacted JSON text, type tag, marker flag."""

    __slots__ = ("json", "tag", "unserialisable")

    def __init__(self, value: Any) -> None:
        encoded = encode_value(value)
        self.json = _redact.redact(encoded.json)
        self.tag = encoded.type_tag
        self.unserialisable = encoded.unserialisable


class OutputCodec(Protocol):
    """How a call's result is recorded and rebuilt; provider patches supply their own."""

    def record(self, result: Any) -> tuple[Any, str | None]:
        """The JSON-compatible value to record for ``result``, and a type tag (or None)."""

    def rebuild(self, output_json: bytes, entry: Mapping[str, Any]) -> Any:
        """The value to serve from a recorded output, given as its JSON text: each serve
        parses it afresh, since the agent may change what it is given."""

    def served_attributes(self, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The span attributes of a served ``entry``'s response (model, id, finish reasons)."""

    def record_error(self, exc: BaseException) -> dict[str, Any]:
        """The recorded form of a live failure: at least ``type`` and ``message``."""

    def raise_error(self, error: Mapping[str, Any], label: str) -> NoReturn:
        """Raise the replayed form of a recorded failure."""


def _error_record(exc: BaseException) -> dict[str, Any]:
    return _with_repr({"type": type(exc).__qualname__, "message": str(exc)}, exc)


def _with_repr(record: Mapping[str, Any], exc: BaseException) -> dict[str, Any]:
    """``record`` with the live exception's ``repr()``, which frameworks put into the next
    prompt (LangGraph's ``ToolNode``), so that replay can show them the same text."""
    out = dict(record)
    if "repr" not in out:
        try:
            out["repr"] = repr(exc)
        except Exception:  # a broken __repr__ must not lose the rest of the failure
            pass
    return out


ExpectedErrors = tuple[type[BaseException], ...]


def expected_errors(errors: Any, where: str) -> ExpectedErrors:
    """The exception classes named by ``errors=`` (one class or an iterable of them)."""
    if errors is None:
        return ()
    items = (errors,) if isinstance(errors, (type, str)) else errors
    try:
        classes = tuple(items)
    except TypeError:
        classes = (items,)
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise ConfigError(
                f"{where}: errors= takes the exception classes the code expects back from a "
                f"replayed failure (e.g. errors=(ModelRetry,)); {cls!r} is not one"
            )
    return classes


# The control-flow exceptions a framework catches by class from the tools it runs, rebuilt on
# replay without errors= so that an unchanged agent replays as it ran: recorded type name ->
# (module, attribute). Only this table chooses a class, and only from a module the process has
# already imported: a recording that names a framework never makes tracely import it. (The
# OpenAI Agents SDK is absent on purpose: its function tools catch every exception alike.)
FRAMEWORK_TOOL_ERRORS: Mapping[str, tuple[str, str]] = {
    "ModelRetry": ("pydantic_ai.exceptions", "ModelRetry"),
    "ToolException": ("langchain_core.tools.base", "ToolException"),
}


def framework_tool_error(type_name: str) -> type[BaseException] | None:
    """The allowlisted framework exception class for a recorded tool failure's type name, if
    its framework is imported in this process."""
    where = FRAMEWORK_TOOL_ERRORS.get(type_name)
    if where is None:
        return None
    module = sys.modules.get(where[0])
    cls = getattr(module, where[1], None) if module is not None else None
    return cls if isinstance(cls, type) and issubclass(cls, BaseException) else None


def error_status(exc: BaseException) -> Status:
    """The ERROR status of a span that ``exc`` ended, its description redacted."""
    return Status(StatusCode.ERROR, _redact.redact_text(f"{type(exc).__qualname__}: {exc}"))


def record_exception(span: Span, exc: BaseException) -> None:
    """Add the ``exception`` event the OpenTelemetry SDK's ``record_exception`` would, with
    the message and stack trace redacted (exporters see the event as it is set)."""
    cls = type(exc)
    module = cls.__module__
    span.add_event(
        "exception",
        {
            "exception.type": f"{module}.{cls.__qualname__}"
            if module and module != "builtins"
            else cls.__qualname__,
            "exception.message": _redact.redact_text(str(exc)),
            "exception.stacktrace": _redact.redact_text("".join(traceback.format_exception(exc))),
            "exception.escaped": "False",
        },
    )


class Call:
    """One tool or LLM call: its span, and either a served entry or the live run."""

    __slots__ = (
        "_attrs",
        "_check",
        "_count",
        "_done",
        "_ended",
        "_input",
        "_input_key",
        "_span",
        "annotation",
        "codec",
        "errors",
        "kind",
        "match",
        "name",
        "session",
        "usage",
    )

    def __init__(
        self,
        kind: str,
        name: str,
        *,
        args: Any = _UNSET,
        input: Any = _UNSET,
        usage: Any = None,
        annotation: Any = NO_ANNOTATION,
        codec: OutputCodec | None = None,
        attributes: Mapping[str, Any] | None = None,
        provider: str | None = None,
        errors: ExpectedErrors = (),
        ignore: Masks = NO_MASKS,
    ) -> None:
        self.kind = kind
        self.name = name
        self.annotation = annotation
        self.codec = codec
        self.errors = errors
        self.usage = usage
        self._done = False
        self._ended = False
        self._span: Span | None = None
        self.match: Match | None = None
        self._check: Entry | None = None  # the recorded call a live=... call is compared with
        count = _run_calls.get()
        self._count: _CallCount | None = count if count.__class__ is _CallCount else None
        tool = kind == A.KIND_TOOL
        if tool:
            attrs: dict[str, Any] = {
                A.KIND: kind,
                A.NAME: name,
                A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
                A.GEN_AI_TOOL_NAME: name,
                A.GEN_AI_TOOL_TYPE: A.TOOL_TYPE_FUNCTION,
            }
            call_id = _tool_calls.answer(name, None if args is _UNSET else args)
            if call_id is not None:
                attrs[A.GEN_AI_TOOL_CALL_ID] = call_id
        else:
            attrs = {
                A.KIND: kind,
                A.NAME: name,
                A.GEN_AI_OPERATION_NAME: A.OP_CHAT,
                A.GEN_AI_REQUEST_MODEL: name,
            }
        if provider is not None:
            attrs[A.PROVIDER] = provider
        if attributes:
            attrs.update(attributes)
        if not tool:
            if A.GEN_AI_PROVIDER_NAME not in attrs:
                attrs[A.GEN_AI_PROVIDER_NAME] = A.provider_for_model(name)
            _agent_uses(attrs[A.GEN_AI_PROVIDER_NAME])
        value = args if tool else input
        text: str | None = None
        key = A.ARGS if tool else A.INPUT
        if value is not _UNSET and value is not None:
            text, unserialisable = _encode_input(value)
            if not tool and attrs.get(A.GEN_AI_INPUT_MESSAGES) == text:
                # The input is the conventions' messages, which content capture has already
                # put on the span: the span carries them once, digested there.
                key = A.GEN_AI_INPUT_MESSAGES
            else:
                attrs[key] = text
            if unserialisable:
                attrs[A.UNSERIALISABLE] = key
        self._input = text
        self._input_key = key
        self._attrs = attrs
        self.session = session = current_session()
        if session is not None:
            self._decide(session, TOOLS if tool else LLM, text, ignore)

    @property
    def label(self) -> str:
        """``tools:NAME`` or ``llm:MODEL``, as reports name the call."""
        return f"{TOOLS if self.kind == A.KIND_TOOL else LLM}:{self.name}"

    @property
    def span(self) -> Span:
        """The call's span, started on first use.

        A live call starts it before ``fn`` runs. A served call starts it when the recorded
        value is known, with every attribute at once: one pass of the SDK's attribute checks
        instead of one per attribute, which is most of what a replayed call costs.
        """
        span = self._span
        if span is None:
            span = self._span = self._start(self._attrs)
        return span

    def _start(self, attributes: Mapping[str, Any]) -> Span:
        span = _tracers.get().start_span(
            # "<operation> <name>": chat, unless the call says otherwise (an embeddings call)
            f"{attributes[A.GEN_AI_OPERATION_NAME]} {self.name}",
            kind=SpanKind.CLIENT if self.kind == A.KIND_LLM else SpanKind.INTERNAL,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        if self._count is not None:
            self._count.add(self.kind, span)
        if self.session is not None:
            self.session.note_span(span)
        return span

    def _decide(self, session: ReplaySession, section: str, text: str | None, masks: Masks) -> None:
        attrs = self._attrs
        try:
            match = session.decide(
                section, self.name, None if text is None else text.encode(), masks
            )
        except ReplayError as exc:
            attrs[A.REPLAY_MISS] = True
            attrs[A.ERROR_TYPE] = "ReplayError"
            self.span.set_status(Status(StatusCode.ERROR, _redact.redact_text(str(exc))))
            self.end()
            raise
        if match is None:
            attrs[A.REPLAY_LIVE] = True
            return
        if session.live and session.runs_live(self.label):
            self._check = match.entry
            attrs[A.REPLAY_LIVE] = True
            return
        self.match = match
        attrs[A.REPLAY_SERVED] = True
        if match.diverged:
            attrs[A.REPLAY_DIVERGENCE] = "input" if section == LLM else "args"
        if match.fallback:
            attrs[A.REPLAY_RECORDED_NAME] = match.entry.name

    @property
    def served(self) -> bool:
        """True when the call is answered from the recording (``fn`` must not run)."""
        return self.match is not None

    # -- replay --------------------------------------------------------------------------

    def serve(self) -> Any:
        """The recorded value (rebuilt to its live type), or raise the recorded failure."""
        assert self.match is not None
        entry = self.match.entry
        raw = entry.raw
        self._done = True
        codec = self.codec
        output_json = entry.output_json
        if output_json is not None and self._span is None and _drops_spans():
            self._span = self._start(self._attrs)  # a span nobody reads: nothing more to set
            return self._rebuild(output_json, raw)
        out: dict[str, Any] = {}
        if codec is not None and "output" in raw:
            # The response's attributes go first, as a live call sets them (see succeeded).
            try:
                served = codec.served_attributes(raw)
            except Exception:
                served = None
                _warn_once(
                    "served-attrs",
                    "tracely: could not work out the response attributes of %s",
                    self.label,
                    exc_info=True,
                )
            if served:
                out.update(served)
        if output_json is None:
            error = raw["error"]
            type_name, message = str(error.get("type")), str(error.get("message"))
            status = self._error_attrs(orjson.dumps(dict(error)).decode(), type_name, message, out)
            self._flush(out, raw.get("usage"))
            self.span.set_status(status)
            if codec is not None:
                try:
                    codec.raise_error(error, self.label)
                except RecordedError:
                    pass  # no exception of the SDK's own: the seam's, which has the live repr
            raise self._replayed_error(error)
        out[A.OUTPUT] = output_json.decode()
        tag = raw.get("output_type")
        if isinstance(tag, str):
            out[A.OUTPUT_TYPE] = tag
        self._flush(out, raw.get("usage"))
        return self._rebuild(output_json, raw)

    def _rebuild(self, output_json: bytes, raw: Mapping[str, Any]) -> Any:
        """The served value of the recorded output ``output_json`` of entry ``raw``."""
        tag = raw.get("output_type")
        try:
            if self.codec is not None:
                return self.codec.rebuild(output_json, raw)
            output = orjson.loads(output_json)  # a fresh copy: the agent may mutate it
            return rebuild(
                output, type_tag=tag if isinstance(tag, str) else None, annotation=self.annotation
            )
        except ReplayError:
            raise
        except Exception as exc:
            raise unrebuildable(self.label, exc) from exc

    def _replayed_error(self, error: Mapping[str, Any]) -> BaseException:
        """The exception a recorded failure is raised as: ToolError/LLMError, or an instance of
        the ``errors=`` class whose qualified name is the recorded type, made from the message;
        failing that, for a tool, the framework's class from ``FRAMEWORK_TOOL_ERRORS``.

        Only classes the calling code names or the allowlist holds are ever constructed; the
        recording chooses among them by name and supplies nothing but the message.
        """
        cls = ToolError if self.kind == A.KIND_TOOL else LLMError
        recorded = cls.from_record(self.label, error)
        expected = next((c for c in self.errors if c.__qualname__ == recorded.type), None)
        if expected is None and self.kind == A.KIND_TOOL:
            expected = framework_tool_error(recorded.type)
        if expected is None:
            return recorded
        try:
            exc = expected(recorded.message)
            shown = (str(exc), repr(exc))
        except Exception as exc:  # the application's class, not a failure of tracely's
            _warn_once(
                f"errors-construct:{expected.__module__}.{expected.__qualname__}",
                "tracely: %s: cannot make %s(message) for its recorded failure (%s: %s); "
                "raising %s instead",
                self.label,
                expected.__qualname__,
                type(exc).__name__,
                exc,
                cls.__name__,
            )
            return recorded
        if shown != (recorded.message, recorded.live_repr):
            _warn_once(
                f"errors-text:{expected.__module__}.{expected.__qualname__}",
                "tracely: %s: the replayed %s reads %r where the live one read %r",
                self.label,
                expected.__qualname__,
                shown[1],
                recorded.live_repr,
            )
        return exc

    # -- live ----------------------------------------------------------------------------

    def run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` live with the span current, recording its result or failure."""
        token = otel_context.attach(trace.set_span_in_context(self.span))
        inside = enter_call_body()
        try:
            result = fn()
        except BaseException as exc:
            self.failed(exc)
            raise
        finally:
            leave_call_body(inside)
            otel_context.detach(token)
        if inspect.isawaitable(result):
            _warn_once(
                "awaitable",
                "tracely: %s returned an awaitable; use acall_tool/acall_llm so the awaited "
                "value is recorded (and replay can serve it)",
                self.label,
            )
        return self.succeeded(result)

    async def arun(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Await ``fn()`` live with the span current, recording its result or failure."""
        token = otel_context.attach(trace.set_span_in_context(self.span))
        inside = enter_call_body()
        try:
            result = await fn()
        except BaseException as exc:
            self.failed(exc)
            raise
        finally:
            leave_call_body(inside)
            otel_context.detach(token)
        return self.succeeded(result)

    def succeeded(self, result: T, attributes: Mapping[str, Any] | None = None) -> T:
        """Record ``result`` as the call's output. Never raises: tracing never breaks the call.

        ``attributes`` (a provider's response attributes) are set in the same pass, first.
        """
        if self._done:
            return result
        self._done = True
        try:
            if self.codec is not None:
                value, tag = self.codec.record(result)
            else:
                value, tag = result, None
            encoded = _Encoded(value)
            tag = tag or encoded.tag
            out: dict[str, Any] = dict(attributes) if attributes else {}
            out[A.OUTPUT] = encoded.json
            if tag:
                out[A.OUTPUT_TYPE] = tag
            if encoded.unserialisable:
                out[A.UNSERIALISABLE] = A.OUTPUT
            self._flush(out, self.usage(result) if callable(self.usage) else self.usage)
            if self._check is not None and self.session is not None:
                self.session.check_live(
                    self.label, self._check, {"output": orjson.loads(encoded.json)}
                )
        except Exception:
            _warn_once(
                "record", "tracely: could not record the output of %s", self.label, exc_info=True
            )
        return result

    def failed(self, exc: BaseException) -> None:
        """Record a live failure on the span (the exception itself propagates unchanged)."""
        if self._done:
            return
        self._done = True
        try:
            record = (
                _with_repr(self.codec.record_error(exc), exc)
                if self.codec is not None
                else _error_record(exc)
            )
            text = _redact.redact(orjson.dumps(record, default=str).decode())
            out: dict[str, Any] = {}
            status = self._error_attrs(
                text, str(record.get("type")), _redact.redact_text(str(record.get("message"))), out
            )
            self.span.set_status(status)
            record_exception(self.span, exc)
            self._flush(out)
            if self._check is not None and self.session is not None:
                message = _redact.redact_text(str(record.get("message")))
                error = {"type": record.get("type"), "message": message}
                self.session.check_live(self.label, self._check, {"error": error})
        except Exception:
            _warn_once(
                "record-error",
                "tracely: could not record the failure of %s",
                self.label,
                exc_info=True,
            )

    # -- span bookkeeping ----------------------------------------------------------------

    def _usage_attrs(self, usage: Any, out: dict[str, Any]) -> None:
        try:
            tokens_in, tokens_out = usage
            if type(tokens_in) is not int or type(tokens_out) is not int:
                tokens_in, tokens_out = int(tokens_in), int(tokens_out)
        except (TypeError, ValueError):
            _warn_once(
                "usage", "tracely: usage for %s must be (input_tokens, output_tokens)", self.label
            )
            return
        out[A.GEN_AI_USAGE_INPUT_TOKENS] = tokens_in
        out[A.GEN_AI_USAGE_OUTPUT_TOKENS] = tokens_out

    @staticmethod
    def _error_attrs(text: str, type_name: str, message: str, out: dict[str, Any]) -> Status:
        """Put a failure's attributes in ``out``; the span's status to set is returned."""
        out[A.ERROR] = text
        out[A.ERROR_TYPE] = type_name
        return Status(StatusCode.ERROR, f"{type_name}: {message}")

    def _flush(self, out: dict[str, Any], usage: Any = None) -> None:
        """Set the call's closing attributes at once: ``out``, the token counts of ``usage``,
        the integrity digest."""
        if self._span is not None and not self._span.is_recording():
            return  # its attributes would be ignored: nothing to compute
        if usage is not None:
            # After the recorded values: the attribute count limit evicts the oldest first, so
            # the counts cannot be lost while the output the digest checks is kept.
            self._usage_attrs(usage, out)
        items = []
        if self._input is not None:
            items.append(digest_item(self._input_key, self._input))
        for key in _CLOSING_DIGESTED:
            text = out.get(key)
            if text is not None:
                items.append(digest_item(key, text))
        out[A.DIGEST] = _digest_json(items)
        # tracely.kind again, last: a span over the attribute count limit then evicts the
        # recorded values first, and the extractor sees what is missing and refuses the call.
        out[A.KIND] = self.kind
        if self._span is not None:
            self._span.set_attributes(out)
            return
        # Not started yet (a served call): start it with everything, in the same order.
        attrs = self._attrs
        del attrs[A.KIND]
        attrs.update(out)
        self._span = self._start(attrs)

    def end(self) -> None:
        """End the span (idempotent)."""
        if not self._ended:
            self._ended = True
            self.span.end()


def _sync_call(call: Call, fn: Callable[[], T]) -> T:
    try:
        if call.served:
            return cast(T, call.serve())
        return call.run(fn)
    finally:
        call.end()


async def _async_call(call: Call, fn: Callable[[], Awaitable[T]]) -> T:
    try:
        if call.served:
            return cast(T, call.serve())
        return await call.arun(fn)
    finally:
        call.end()


def call_tool(
    name: str,
    fn: Callable[[], T],
    args: Any = None,
    *,
    returns: Any = NO_ANNOTATION,
    errors: Any = None,
    ignore: Any = None,
) -> T:
    """Run tool ``name`` via ``fn()`` and record it; under fixtures, serve the recording.

    ``args`` identify the call for matching. ``returns`` (or ``fn``'s return annotation) is
    the type a replayed value is rebuilt into. ``errors`` names the exception classes the
    code expects back: a recorded failure of one of them (by qualified name) is raised as that
    class, made from the recorded message; a framework's own (pydantic-ai's ``ModelRetry``,
    LangChain's ``ToolException``) likewise when that framework is imported; any other as
    :class:`~tracely_sdk.ToolError`. ``ignore`` lists masks (JSON paths, ``re:PATTERN``, ``@iso-timestamp``, ``@uuid``) for the
    volatile parts of ``args``, left out when replay compares them with the recording.
    """
    annotation = returns if returns is not NO_ANNOTATION else return_annotation(fn)
    call = Call(
        A.KIND_TOOL,
        name,
        args=args,
        annotation=annotation,
        errors=expected_errors(errors, f"call_tool({name!r})"),
        ignore=masks_from(ignore, f"call_tool({name!r})"),
    )
    return _sync_call(call, fn)


def call_llm(
    model: str,
    fn: Callable[[], T],
    input: Any = None,
    usage: tuple[int, int] | Callable[[T], tuple[int, int]] | None = None,
    *,
    returns: Any = NO_ANNOTATION,
    errors: Any = None,
    ignore: Any = None,
    provider: str | None = None,
) -> T:
    """Run an LLM call to ``model`` via ``fn()`` and record it; under fixtures, serve it.

    ``input`` is compared with the recording (a difference is served and reported as
    divergence); ``usage`` is ``(input_tokens, output_tokens)`` or a function of the result.
    ``errors`` is as for :func:`call_tool` (other recorded failures raise LLMError), and so is
    ``ignore``, for the volatile parts of ``input`` (a date in the system prompt).
    ``provider`` is the span's ``gen_ai.provider.name`` (``"openai"``, ``"aws.bedrock"``, ...);
    without it, the provider is told from the model id.
    """
    call = _llm_call("call_llm", model, fn, input, usage, returns, errors, ignore, provider)
    return _sync_call(call, fn)


async def acall_tool(
    name: str,
    fn: Callable[[], Awaitable[T]],
    args: Any = None,
    *,
    returns: Any = NO_ANNOTATION,
    errors: Any = None,
    ignore: Any = None,
) -> T:
    """Async :func:`call_tool`: ``fn()`` returns an awaitable, awaited only when live."""
    annotation = returns if returns is not NO_ANNOTATION else return_annotation(fn)
    call = Call(
        A.KIND_TOOL,
        name,
        args=args,
        annotation=annotation,
        errors=expected_errors(errors, f"acall_tool({name!r})"),
        ignore=masks_from(ignore, f"acall_tool({name!r})"),
    )
    return await _async_call(call, fn)


async def acall_llm(
    model: str,
    fn: Callable[[], Awaitable[T]],
    input: Any = None,
    usage: tuple[int, int] | Callable[[T], tuple[int, int]] | None = None,
    *,
    returns: Any = NO_ANNOTATION,
    errors: Any = None,
    ignore: Any = None,
    provider: str | None = None,
) -> T:
    """Async :func:`call_llm`: ``fn()`` returns an awaitable, awaited only when live."""
    call = _llm_call("acall_llm", model, fn, input, usage, returns, errors, ignore, provider)
    return await _async_call(call, fn)


def _llm_call(
    caller: str,
    model: str,
    fn: Callable[[], Any],
    input: Any,
    usage: Any,
    returns: Any,
    errors: Any,
    ignore: Any,
    provider: str | None,
) -> Call:
    annotation = returns if returns is not NO_ANNOTATION else return_annotation(fn)
    return Call(
        A.KIND_LLM,
        model,
        input=input,
        usage=usage,
        annotation=annotation,
        attributes=_provider_attributes(provider),
        errors=expected_errors(errors, f"{caller}({model!r})"),
        ignore=masks_from(ignore, f"{caller}({model!r})"),
    )


def _provider_attributes(provider: str | None) -> dict[str, Any] | None:
    if provider is None:
        return None
    if not isinstance(provider, str) or not provider:
        raise TypeError(
            f"call_llm(provider={provider!r}): give the provider's name as a non-empty string, "
            "e.g. provider='openai'"
        )
    return {A.GEN_AI_PROVIDER_NAME: provider}


# -- agents ----------------------------------------------------------------------------------


# The innermost agent run of the current context: its span names the provider of the first
# LLM call made inside it, as gen_ai.provider.name is required on invoke_agent spans too.
_current_agent: ContextVar[AgentRun | None] = ContextVar("tracely_agent", default=None)


def _agent_uses(provider: str) -> None:
    run = _current_agent.get()
    if run is not None and run.provider is None:
        run.provider = provider


class AgentRun:
    """The span of one agent run. Set :attr:`output` to record what the run answered."""

    def __init__(self, name: str, call_input: dict[str, Any] | None) -> None:
        self.name = name
        self.provider: str | None = None
        self._input = call_input
        self._output: Any = _UNSET
        self._span: Span | None = None
        self._token: object | None = None
        self._count: _CallCount | None = None
        self._count_token: contextvars.Token[Any] | None = None
        self._agent_token: Token[AgentRun | None] | None = None

    @property
    def output(self) -> Any:
        return None if self._output is _UNSET else self._output

    @output.setter
    def output(self, value: Any) -> None:
        self._output = value

    @property
    def trace_id(self) -> str:
        """The run's trace id as 32 hex characters (the id its recording is stored under)."""
        return format(self.span.get_span_context().trace_id, "032x")

    @property
    def span(self) -> Span:
        """The agent's OpenTelemetry span (valid inside the block)."""
        assert self._span is not None, "AgentRun.span is only available inside the block"
        return self._span

    def __enter__(self) -> AgentRun:
        attrs: dict[str, Any] = {
            A.KIND: A.KIND_AGENT,
            A.NAME: self.name,
            A.GEN_AI_OPERATION_NAME: A.OP_INVOKE_AGENT,
            A.GEN_AI_AGENT_NAME: self.name,
            A.SDK_VERSION: __version__,
        }
        digest: list[str] = []
        session = None
        tracer = _tracers.get()
        try:
            if self._input is not None and not _tracers.drops:
                encoded = _Encoded(self._input)
                attrs[A.INPUT] = encoded.json
                digest.append(digest_item(A.INPUT, encoded.json))
            session = current_session()
            if session is not None:
                _stamp_session(attrs, session)
        except ReplayError:
            raise
        except Exception:
            _warn_once(
                "agent-input",
                "tracely: could not record the input of agent %s",
                self.name,
                exc_info=True,
            )
        self._digest = digest
        self._span = tracer.start_span(
            A.span_name(A.KIND_AGENT, self.name),
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        )
        if session is not None:
            session.note_span(self._span)
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        if _run_calls.get() is None:  # the outermost run counts; nested ones share its count
            self._count = _CallCount(self._span.get_span_context().trace_id)
            self._count_token = _run_calls.set(self._count)
        self._agent_token = _current_agent.set(self)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        span = self._span
        assert span is not None
        # The closing attributes, set at once when the span ends (one pass of the SDK's checks).
        out: dict[str, Any] = {}
        recording = span.is_recording()  # else its attributes and status would be ignored
        try:
            if recording:
                self._closing_attributes(span, exc, out)
        except Exception:
            _warn_once(
                "agent-output",
                "tracely: could not record the output of agent %s",
                self.name,
                exc_info=True,
            )
        finally:
            if self._count_token is not None:
                try:
                    _run_calls.reset(self._count_token)
                except ValueError:  # exited in another context than it was entered in
                    _run_calls.set(None)
                self._count_token = None
            if self._agent_token is not None:
                try:
                    _current_agent.reset(self._agent_token)
                except ValueError:  # exited in another context than it was entered in
                    _current_agent.set(None)
                self._agent_token = None
            if recording:
                out[A.GEN_AI_PROVIDER_NAME] = self.provider or A.PROVIDER_OTHER
                span.set_attributes(out)
            if self._token is not None:
                otel_context.detach(self._token)  # type: ignore[arg-type]
            span.end()

    def _closing_attributes(
        self, span: Span, exc: BaseException | None, out: dict[str, Any]
    ) -> None:
        """Put the run's outcome, its call counts and the digest in ``out`` (the status too)."""
        digest = self._digest
        if exc is not None:
            text = _redact.redact(orjson.dumps(_error_record(exc), default=str).decode())
            out[A.ERROR] = text
            out[A.ERROR_TYPE] = type(exc).__qualname__
            span.set_status(error_status(exc))
            record_exception(span, exc)
            digest.append(digest_item(A.ERROR, text))
        elif self._output is not _UNSET:
            encoded = _Encoded(self._output)
            out[A.OUTPUT] = encoded.json
            if encoded.tag:
                out[A.OUTPUT_TYPE] = encoded.tag
            digest.append(digest_item(A.OUTPUT, encoded.json))
        if self._count is not None:
            out.update(self._count.attributes())
        out[A.DIGEST] = _digest_json(digest)
        out[A.KIND] = A.KIND_AGENT  # set again: it moves after the recorded values

    async def __aenter__(self) -> AgentRun:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)


def _stamp_session(attrs: dict[str, Any], session: ReplaySession) -> None:
    report = session.report
    attrs[A.REPLAY_MODE] = report.mode
    if report.case_id is not None:
        attrs[A.CASE_ID] = report.case_id
    if report.case_version is not None:
        attrs[A.CASE_VERSION] = report.case_version


def agent(name: str, input: Any = _UNSET) -> AgentRun:
    """Trace an agent run: ``with tracely.agent("support-agent", input=q) as run: ...``.

    ``input`` is recorded as the entrypoint's single positional argument (so ``tracely
    replay`` can call the agent with it); set ``run.output`` to record the answer.
    """
    call_input = None if input is _UNSET else {"args": [input], "kwargs": {}}
    return AgentRun(name, call_input)


# -- @observe --------------------------------------------------------------------------------

_AS_TYPES = ("tool", "llm", "agent", "span")


@functools.lru_cache(maxsize=4096)
def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(fn)


def _bound_args(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    try:
        bound = _signature(fn).bind(*args, **kwargs)
    except TypeError:
        raise  # the call itself is wrong; let Python's own error surface
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    params = list(_signature(fn).parameters)
    if params and params[0] in ("self", "cls"):
        arguments.pop(params[0], None)
    # **kwargs parameters are flattened into the call's named arguments
    for param in _signature(fn).parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD and param.name in arguments:
            arguments.update(arguments.pop(param.name))
    return arguments


@overload
def observe(fn: F) -> F: ...
@overload
def observe(
    *, as_type: str = "span", name: str | None = None, errors: Any = None, ignore: Any = None
) -> Callable[[F], F]: ...


def observe(
    fn: Any = None,
    *,
    as_type: str = "span",
    name: str | None = None,
    errors: Any = None,
    ignore: Any = None,
) -> Any:
    """Decorate a function so each call is a span; ``as_type`` says what it is.

    - ``"tool"``: a tool call, recorded with its arguments; under fixtures the recorded
      output is served (or the recorded failure re-raised as ToolError) and the body never runs.
    - ``"llm"``: an LLM call to model ``name`` (default: the function name), likewise replayed.
    - ``"agent"``: an agent run; records the call's positional and keyword arguments and its
      return value, which ``tracely replay`` uses as the case's input and expected output.
    - ``"span"`` (default): a plain span named after the function, nothing recorded.

    ``errors`` (tool and llm) names the exception classes the code expects back from a
    replayed failure, as for :func:`call_tool` (``errors=(ModelRetry,)``); ``ignore`` (tool and
    llm) lists masks for the volatile parts of the arguments, as for :func:`call_tool`.
    """
    if as_type not in _AS_TYPES:
        raise ValueError(f"observe(as_type={as_type!r}): use one of {', '.join(_AS_TYPES)}")
    where = f"observe(as_type={as_type!r})"
    for option, value in (("errors", errors), ("ignore", ignore)):
        if value is not None and as_type not in ("tool", "llm"):
            raise ConfigError(f"{where}: {option}= applies to tool and llm calls")
    expected = expected_errors(errors, where)
    masks = masks_from(ignore, where)

    def decorate(func: F) -> F:
        if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
            raise TypeError(
                f"@observe cannot trace generator function {func.__qualname__}: a generator's "
                "output is not known when it returns; return a list instead"
            )
        label = name or func.__name__
        is_async = inspect.iscoroutinefunction(func)
        annotation = return_annotation(func)

        if as_type == "agent":
            if is_async:

                @functools.wraps(func)
                async def agent_async(*args: Any, **kwargs: Any) -> Any:
                    with AgentRun(label, {"args": list(args), "kwargs": kwargs}) as run:
                        result = await func(*args, **kwargs)
                        run.output = result
                        return result

                return cast(F, agent_async)

            @functools.wraps(func)
            def agent_sync(*args: Any, **kwargs: Any) -> Any:
                with AgentRun(label, {"args": list(args), "kwargs": kwargs}) as run:
                    result = func(*args, **kwargs)
                    run.output = result
                    return result

            return cast(F, agent_sync)

        if as_type == "span":
            span_name = name or func.__qualname__
            if is_async:

                @functools.wraps(func)
                async def span_async(*args: Any, **kwargs: Any) -> Any:
                    with _tracers.get().start_as_current_span(
                        span_name, attributes={A.NAME: span_name}
                    ):
                        return await func(*args, **kwargs)

                return cast(F, span_async)

            @functools.wraps(func)
            def span_sync(*args: Any, **kwargs: Any) -> Any:
                with _tracers.get().start_as_current_span(
                    span_name, attributes={A.NAME: span_name}
                ):
                    return func(*args, **kwargs)

            return cast(F, span_sync)

        kind = A.KIND_TOOL if as_type == "tool" else A.KIND_LLM

        description = inspect.getdoc(func) if kind == A.KIND_TOOL else None
        tool_attributes = {A.GEN_AI_TOOL_DESCRIPTION: description} if description else None

        def make_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call:
            arguments = _bound_args(func, args, kwargs)
            if kind == A.KIND_TOOL:
                return Call(
                    kind,
                    label,
                    args=arguments,
                    annotation=annotation,
                    attributes=tool_attributes,
                    errors=expected,
                    ignore=masks,
                )
            return Call(
                kind, label, input=arguments, annotation=annotation, errors=expected, ignore=masks
            )

        if is_async:

            @functools.wraps(func)
            async def call_async(*args: Any, **kwargs: Any) -> Any:
                return await _async_call(make_call(args, kwargs), lambda: func(*args, **kwargs))

            return cast(F, call_async)

        @functools.wraps(func)
        def call_sync(*args: Any, **kwargs: Any) -> Any:
            return _sync_call(make_call(args, kwargs), lambda: func(*args, **kwargs))

        return cast(F, call_sync)

    if fn is not None:
        return decorate(fn)
    return decorate
