"""Activating a recording: ``fixtures()``, ``fixture()`` and the ReplayReport.

The active recording is per context (a ContextVar), so concurrent asyncio tasks each replaying
their own bundle never cross-talk. Threads do not inherit context variables: run work in a
worker thread with ``contextvars.copy_context().run`` (or ``asyncio.to_thread``) so the call is
served from the same bundle and its span joins the same trace. As a safety net, a thread with no
context of its own while exactly one ``fixtures()`` block is active in the process is served
from that block (so a ``ThreadPoolExecutor`` inside a replayed agent works as is); with several
blocks active such a call raises ReplayError rather than guess, because a recorded run must
never quietly become a live one.
"""

from __future__ import annotations

import contextvars
import fnmatch
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypedDict, TypeVar, cast, overload

import orjson

from tracely_otel import Bundle, BundleFormatError, validate_bundle
from tracely_sdk import _config, _network_guard
from tracely_sdk._diff import Difference, diff_values
from tracely_sdk._masks import NO_MASKS, Masks
from tracely_sdk._matching import LLM, TOOLS, CallKey, Entry, Match, ServedEntries, call_key
from tracely_sdk._types import rebuild
from tracely_sdk.errors import BundleError, ConfigError, ReplayError

Mode = Literal["recorded", "lenient", "live"]


class Divergence(TypedDict):
    """A call served from the recording although what it was called with differs.

    ``field`` is ``"input"`` (an LLM call) or ``"args"`` (a tool call in lenient mode);
    ``recorded`` and ``actual`` are the whole values in canonical form (``None`` when that
    side has none), ``differences`` where they differ (see :mod:`tracely_sdk._diff`) and
    ``omitted`` how many more differences there are than are listed.
    """

    label: str
    entry: str
    seq: int
    field: str
    recorded: Any
    actual: Any
    differences: list[Difference]
    omitted: int


def divergence_of(entry: Entry, key: CallKey | None) -> Divergence:
    """What differs between the recorded ``entry`` and the call (``key``) it served."""
    field = "input" if entry.kind == LLM else "args"
    recorded = entry.raw.get(field)
    actual = orjson.loads(key.text) if key is not None else None
    if key is not None and key.masks is not None and entry.key is not None:
        # What differs as the call compared it: a masked volatile value is no difference.
        differences, total = diff_values(
            key.recorded_view(entry.key), orjson.loads(key.canonical())
        )
    else:
        differences, total = diff_values(recorded, actual)
    return Divergence(
        label=entry.label,
        entry=entry.describe(),
        seq=entry.seq,
        field=field,
        recorded=recorded,
        actual=actual,
        differences=differences,
        omitted=total - len(differences),
    )


Outcome = Literal["served", "diverged", "missed", "live", "never made", "recorded", "retried"]


class Step(TypedDict, total=False):
    """One call of a replay's timeline: a recorded call and what the replay did with it, or a
    call the replay made that the recording does not have.

    Steps come in the recording's ``seq`` order; a call the recording cannot answer (``missed``
    in strict mode, ``live`` in lenient mode) comes right after the recorded call served before
    it. ``call`` is the step's place (1-based) among the calls the replay made, None when the
    recorded call was never made. ``recorded``, ``output`` and ``error`` are the recorded args
    (tools) or input (LLM), output and error; a key is left out when the recording has none.
    ``actual`` is what the replay called with where it differs (``diverged``, ``missed``,
    ``live``); ``differences`` and ``omitted`` say where (diverged), ``message`` why a
    ``missed`` call matched nothing. ``usage`` (LLM) and ``started_at``/``ended_at``
    (nanoseconds since the epoch) are the recorded call's, when the recording has them.
    ``retried``: a call the recording cannot answer, answered by a robustness run's retry rule
    (see :mod:`tracely_sdk._faults`).
    """

    outcome: Outcome
    label: str
    seq: int | None
    entry: str | None
    call: int | None
    field: str
    recorded: Any
    output: Any
    error: Any
    actual: Any
    differences: list[Difference]
    omitted: int
    message: str
    usage: list[int]
    started_at: int
    ended_at: int


class LiveCheck(TypedDict):
    """A call run live under ``fixtures(live=...)``, compared with the recorded one."""

    label: str
    equal: bool  # the live outcome (output, or failure type and message) is the recorded one
    differences: list[Difference]  # where they differ, path by path (``output.content[0]``)
    omitted: int  # differences beyond those listed


_V = TypeVar("_V")
_UNREAD: Any = object()  # a MadeOnRead field neither given nor read yet


class MadeOnRead(Generic[_V]):
    """A dataclass field that, unless given, is made from its instance (``make(obj)``) when it
    is first read: a report's parts that only a report reads cost a passing case nothing.

    Set (as ``__init__`` does, the default being "not given"), it holds what it was set to.
    """

    def __init__(self, make: Callable[[Any], _V]) -> None:
        self._make = make
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = f"_{name}_value"

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Any: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> _V: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            return _UNREAD  # the dataclass field's default
        held = obj.__dict__
        value = held.get(self._name, _UNREAD)
        if value is _UNREAD:
            value = held[self._name] = self._make(obj)
        return value

    def __set__(self, obj: object, value: _V) -> None:
        obj.__dict__[self._name] = value


def _timeline_of(report: ReplayReport) -> list[Step]:
    """A finished block's timeline, from the recorded entries and the calls it kept."""
    source = report.__dict__.pop("_timeline_source", None)
    return [] if source is None else timeline(*source)


@dataclass
class ReplayReport:
    """What a ``fixtures()`` block did. Filled in while the block runs, final when it exits."""

    mode: Mode
    served: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)
    # One per label in ``diverged``, in the same order: what each served call differed in.
    divergences: list[Divergence] = field(default_factory=list)
    errors: list[ReplayError] = field(default_factory=list)
    providers: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)  # lenient fall-throughs that ran live
    # label -> the masks that applied to its calls (where recorded and actual values differed)
    masked: dict[str, list[str]] = field(default_factory=dict)
    # Every recorded call and every call made, in the recording's order (final on exit; made
    # when first read).
    timeline: MadeOnRead[list[Step]] = MadeOnRead(_timeline_of)
    case_id: str | None = None
    case_version: int | None = None
    # fixtures(live=...): the label patterns run live, and each such call's comparison
    live_patterns: list[str] = field(default_factory=list)
    live_checks: list[LiveCheck] = field(default_factory=list)
    # Network operations the strict block refused (each also a ReplayError in ``errors``).
    refused: list[_network_guard.Refusal] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """A strict run that reproduced the recording exactly."""
        return (
            self.mode == "recorded"
            and not self.errors
            and not self.unused
            and not self.diverged
            and not self.live
            and all(check["equal"] for check in self.live_checks)
        )

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-compatible data."""
        return {
            "mode": self.mode,
            "clean": self.clean,
            "served": list(self.served),
            "unused": list(self.unused),
            "diverged": list(self.diverged),
            "divergences": [dict(d) for d in self.divergences],
            "errors": [str(e) for e in self.errors],
            "live": list(self.live),
            "providers": list(self.providers),
            "masked": {label: list(specs) for label, specs in self.masked.items()},
            "timeline": [dict(step) for step in self.timeline],
            "case_id": self.case_id,
            "case_version": self.case_version,
            "live_patterns": list(self.live_patterns),
            "live_checks": [dict(c) for c in self.live_checks],
            "refused": [dict(r) for r in self.refused],
        }


class CallBudgetExceeded(BaseException):
    """A robustness run made more calls than its budget allows.

    A BaseException, like KeyboardInterrupt: an agent that retries inside ``except Exception``
    must not swallow it and go on looping.
    """


class RepeatUnanswered(BaseException):
    """A robustness run repeated its faulted model call and nothing answers the repeat.

    The run stops there (it is INCOMPLETE): a BaseException, so that neither the SDK's own
    retry loop, which retries any Exception after a backoff of its own, nor the agent goes on
    asking.
    """


class RetryAnswer(Protocol):
    """What answers the calls of a robustness run that its recording cannot (see
    :class:`tracely_sdk._faults.RetryRule`).

    ``repeats``: whether a call now is a repeat of the faulted model call, answered by the rule
    before the recording is looked at (an LLM call is served in order, so the next recorded
    answer would otherwise be taken for it); ``answer``: the entry that answers a repeat or a
    tool call the recording misses, None when nothing does; ``served``: told of every recorded
    entry served and the name it was called by, so the rule knows when the faulted call was
    made.
    """

    def repeats(self, kind: str, name: str) -> bool: ...

    def answer(self, kind: str, name: str, key: CallKey | None) -> Mapping[str, Any] | None: ...

    def served(self, entry: Entry, name: str) -> None: ...


class ReplaySession:
    """One active recording: the matcher state and the report, shared by threads.

    ``max_calls`` (robustness runs) stops the run with :class:`CallBudgetExceeded` at the call
    past it; ``retry`` answers a call the recording cannot (a retry of a faulted call) with an
    entry of its own, or None to let it miss. ``json_data``: the bundle was read from JSON
    text (see :class:`~tracely_sdk._matching.ServedEntries`).
    """

    def __init__(
        self,
        bundle: Bundle,
        *,
        strict: bool,
        report: ReplayReport,
        masks: Masks = NO_MASKS,
        live: tuple[str, ...] = (),
        max_calls: int | None = None,
        retry: RetryAnswer | None = None,
        json_data: bool = False,
    ) -> None:
        self.recording = ServedEntries(bundle, json_data=json_data)
        self.max_calls = max_calls
        self.retry = retry
        self.calls = 0  # calls decided, answered or not
        self.stopped = False  # the budget of calls ran out
        self.live = live  # label patterns whose calls run live, compared with the recording
        self.strict = strict
        self.report = report
        self.masks = masks  # the project's, applied to every call with the call's own
        self._lock = threading.Lock()
        # Each call made, in order: the entry that answered it (None: none did) and its step.
        self._calls: list[tuple[Entry | None, Step]] = []
        self._on_end: list[Callable[[], None]] = []
        # The trace of the first tracely span started in the block, read from the span's
        # context: it exists whether or not the span is sampled, which a span processor is not.
        self.trace_id: int | None = None

    def note_span(self, span: Any) -> None:
        """Note the trace of ``span``, a tracely span started in the block, if it is the first."""
        if self.trace_id is None:
            context = span.get_span_context()
            if context.is_valid:
                self.trace_id = context.trace_id

    @property
    def mode(self) -> Mode:
        return self.report.mode

    def decide(
        self, kind: str, name: str, key_text: bytes | None, masks: Masks = NO_MASKS
    ) -> Match | None:
        """The entry that answers a call whose args/input are ``key_text`` (recorded JSON),
        compared under the project's masks and the call's own ``masks``.

        None means run live (lenient mode only); a strict miss raises ReplayError.
        """
        key = None if key_text is None else CallKey(key_text, self.masks + masks)
        label = f"{kind}:{name}"
        retry = self.retry
        with self._lock:
            self.calls += 1
            if self.max_calls is not None and self.calls > self.max_calls:
                self.stopped = True
                raise CallBudgetExceeded(
                    f"{label}: call {self.calls} is past the budget of {self.max_calls} calls"
                )
            if retry is not None and retry.repeats(kind, name):
                return self._retried(retry, kind, name, key)
            if kind == TOOLS:
                match = self.recording.match_tool(name, key, strict=self.strict)
            else:
                match = self.recording.match_llm(name, key)
            if match is not None:
                if self.live and self.runs_live(label):
                    return match  # the caller runs it live and compares (check_live)
                self.report.served.append(label)
                step = Step(outcome="served")
                if match.diverged:
                    divergence = divergence_of(match.entry, key)
                    self.report.diverged.append(label)
                    self.report.divergences.append(divergence)
                    step = Step(
                        outcome="diverged",
                        actual=divergence["actual"],
                        differences=divergence["differences"],
                        omitted=divergence["omitted"],
                    )
                if match.masked:
                    specs = self.report.masked.setdefault(label, [])
                    specs.extend(m for m in match.masked if m not in specs)
                self._calls.append((match.entry, step))
                if retry is not None:
                    retry.served(match.entry, name)
                return match
            actual = orjson.loads(key.text) if key is not None else None
            answer = retry.answer(kind, name, key) if retry is not None else None
            if answer is not None:
                return self._answered(kind, name, answer, actual)
            if not self.strict or self.runs_live(label):
                self.report.live.append(label)
                self._calls.append((None, Step(outcome="live", label=label, actual=actual)))
                return None
            message, closest = self.recording.explain_miss(kind, name, key)
            error = ReplayError(message, label=label, closest=closest)
            self.report.errors.append(error)
            self._calls.append(
                (None, Step(outcome="missed", label=label, actual=actual, message=message))
            )
        raise error

    def _answered(self, kind: str, name: str, answer: Mapping[str, Any], actual: Any) -> Match:
        label = f"{kind}:{name}"
        entry = ServedEntries(cast(Bundle, {kind: {name: [answer]}})).entries()[0]
        self.report.served.append(label)
        self._calls.append((None, Step(outcome="retried", label=label, actual=actual)))
        return Match(entry)

    def _retried(self, retry: RetryAnswer, kind: str, name: str, key: CallKey | None) -> Match:
        """A repeat of a robustness run's faulted call: answered by its retry rule, or a miss
        that stops the run (never the next recorded answer, never live)."""
        actual = orjson.loads(key.text) if key is not None else None
        answer = retry.answer(kind, name, key)
        if answer is not None:
            return self._answered(kind, name, answer, actual)
        label = f"{kind}:{name}"
        message = (
            f"no recorded call for {label}: a repeat of the faulted call (a retry), which the "
            'faulted recording cannot answer; [tool.tracely.faults] retry = "serve-recorded" '
            "serves a retry the recorded answer. Strict replay never runs the call live"
        )
        self.report.errors.append(ReplayError(message, label=label))
        self._calls.append(
            (None, Step(outcome="missed", label=label, actual=actual, message=message))
        )
        raise RepeatUnanswered(message)

    def runs_live(self, label: str) -> bool:
        """Whether a call labelled ``label`` runs live (``fixtures(live=...)``)."""
        return any(fnmatch.fnmatchcase(label, pattern) for pattern in self.live)

    def check_live(self, label: str, entry: Entry, outcome: Mapping[str, Any]) -> None:
        """Compare a live call's ``outcome`` (``{"output": ...}`` or ``{"error": {"type",
        "message"}}``) with the recorded ``entry`` it took the place of, for the report."""
        error = entry.error
        recorded: dict[str, Any] = (
            {"error": {"type": error.get("type"), "message": error.get("message")}}
            if error is not None
            else {"output": entry.raw.get("output")}
        )
        differences, total = diff_values(recorded, dict(outcome))
        check = LiveCheck(
            label=label,
            equal=total == 0,
            differences=differences,
            omitted=total - len(differences),
        )
        with self._lock:
            self.report.live_checks.append(check)

    def on_end(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once when this session's fixtures() block ends."""
        with self._lock:
            self._on_end.append(callback)

    def finish(self) -> None:
        with self._lock:
            self.report.unused = [e.label for e in self.recording.unused()]
            # Kept as it is now, and made into the timeline when a report reads it.
            self.report.__dict__["_timeline_source"] = (self.recording.entries(), list(self._calls))
            self.report.__dict__.pop("_timeline_value", None)
            callbacks, self._on_end = self._on_end, []
        for callback in callbacks:
            callback()


def timeline(
    entries: list[Entry],
    calls: list[tuple[Entry | None, Step]],
    *,
    unmade: Outcome = "never made",
) -> list[Step]:
    """The recorded ``entries`` (in seq order) beside the ``calls`` made (see :class:`Step`).

    An entry no call used has the outcome ``unmade``: ``"recorded"`` shows a recording alone.
    """
    # Entries by kind, name and index, which tell them apart; not by id(), an audit event
    # that strict replay's network guard hears.
    made: dict[tuple[str, str, int], tuple[int, Step]] = {}
    # A call the recording has no answer for follows the recorded call served before it.
    unanswered: dict[tuple[str, str, int] | None, list[Step]] = {}
    after: tuple[str, str, int] | None = None
    for number, (entry, step) in enumerate(calls, start=1):
        if entry is None:
            unanswered.setdefault(after, []).append(Step(**step, seq=None, entry=None, call=number))
        else:
            after = (entry.kind, entry.name, entry.index)
            made[after] = (number, step)
    steps = [*unanswered.get(None, ())]
    # Built as plain dicts, key by key: this runs for every recorded call of every case.
    for entry in entries:
        raw = entry.raw
        label = f"{entry.kind}:{entry.name}"
        field = "input" if entry.kind == LLM else "args"
        place = (entry.kind, entry.name, entry.index)
        found = made.get(place)
        shown: dict[str, Any] = {
            "outcome": unmade if found is None else found[1]["outcome"],
            "label": label,
            "seq": entry.seq,
            "entry": f"{label} #{entry.index + 1} (seq {entry.seq})",
            "call": None if found is None else found[0],
            "field": field,
        }
        if field in raw:
            shown["recorded"] = raw[field]
        if "output" in raw:
            shown["output"] = raw["output"]
        error = entry.error
        if error is not None:
            shown["error"] = dict(error)
        for key in ("usage", "started_at", "ended_at"):
            if key in raw:
                shown[key] = raw[key]
        if found is not None:
            for key, value in found[1].items():
                if key != "outcome":
                    shown[key] = value
        steps.append(cast(Step, shown))
        steps.extend(unanswered.get(place, ()))
    return steps


_session: contextvars.ContextVar[ReplaySession | None] = contextvars.ContextVar(
    "tracely_replay_session", default=None
)
_active: list[ReplaySession] = []
_active_lock = threading.Lock()
_main_thread = threading.main_thread()

# Called on entering a fixtures() block; each returns the names of the provider methods it
# patched (the provider modules register here so this module never imports an SDK). The
# argument is the run's RunSettings when the block is one case of a run (the runner's), else
# None: a hook may then answer from its activation for an earlier case of the same run, when
# nothing it would look at again has changed since.
ActivationHook = Callable[["RunSettings | None"], list[str]]
_activation_hooks: list[ActivationHook] = []


def register_activation_hook(hook: ActivationHook) -> None:
    """Run ``hook`` whenever a fixtures() block starts (idempotent)."""
    if hook not in _activation_hooks:
        _activation_hooks.append(hook)


def current_session() -> ReplaySession | None:
    """The recording that answers calls made here, or None when calls run live."""
    session = _session.get()
    if session is not None or not _active:
        return session
    if threading.current_thread() is _main_thread:
        return None
    with _active_lock:
        if len(_active) == 1:
            return _active[0]
        if not _active:
            return None
        count = len(_active)
    raise ReplayError(
        f"a call from thread {threading.current_thread().name!r} has no replay context while "
        f"{count} fixtures() blocks are active; submit the work with "
        "contextvars.copy_context().run so it is served from its own recording"
    )


def recorded_calls(bundle: Bundle) -> list[Step]:
    """A recording's calls in seq order, as a timeline with nothing replayed."""
    return timeline(ServedEntries(bundle).entries(), [], unmade="recorded")


def load_bundle(bundle: Any) -> Bundle:
    """Validate a bundle for replay; raises BundleError when it is not a recording."""
    try:
        return validate_bundle(bundle)
    except BundleFormatError as exc:
        raise BundleError(str(exc)) from exc


@contextmanager
def fixtures(
    bundle: Mapping[str, Any] | str | bytes | None,
    strict: bool = True,
    *,
    case_id: str | None = None,
    case_version: int | None = None,
    ignore: Any = None,
    live: Iterable[str] | None = None,
    allow_network: Iterable[str] | None = None,
) -> Iterator[ReplayReport]:
    """Serve every call in the block from ``bundle`` and yield the :class:`ReplayReport`.

    ``None`` means no replay: calls run live and the report's mode is ``"live"``. Any other
    bundle, ``{}`` included, is a recording: strict by default, so a call it cannot answer
    raises :class:`~tracely_sdk.ReplayError` instead of running. ``strict=False`` is the
    lenient mode (live fall-through on a miss, ordered serve on an args mismatch).
    ``ignore`` is the project's masks (default: the ``ignore`` setting, ``[tool.tracely]
    ignore`` in pyproject.toml), applied to every call besides the call's own ``ignore=``.
    ``live`` is label patterns (``["tools:*"]``, ``fnmatch`` syntax): the calls they match run
    live while the rest are served, and each is compared with the recorded call it replaces
    (``rep.live_checks``; a difference makes the run unclean, and a case FAIL).
    A strict block refuses every network connection and name lookup except tracely's own and
    the hosts in ``allow_network`` (``HOST[:PORT]``; default: the ``allow_network`` setting),
    raising ReplayError and recording it in ``rep.errors`` and ``rep.refused`` (see
    :mod:`tracely_sdk._network_guard`).
    """
    if bundle is None:
        report = ReplayReport("live", case_id=case_id, case_version=case_version)
        with _network_guard.open_scope():
            yield report
        return
    with replay_session(
        bundle,
        strict,
        case_id=case_id,
        case_version=case_version,
        ignore=ignore,
        live=live,
        allow_network=allow_network,
    ) as session:
        yield session.report


@contextmanager
def replay_session(
    bundle: Mapping[str, Any] | str | bytes,
    strict: bool = True,
    *,
    case_id: str | None = None,
    case_version: int | None = None,
    ignore: Any = None,
    live: Iterable[str] | None = None,
    allow_network: Iterable[str] | None = None,
    max_calls: int | None = None,
    retry: RetryAnswer | None = None,
    validated: bool = False,
    settings: RunSettings | None = None,
) -> Iterator[ReplaySession]:
    """The block of :func:`fixtures` over a recording, yielding its :class:`ReplaySession`;
    ``max_calls`` and ``retry`` are the session's (robustness runs set them).

    For the runner only: ``validated`` says ``bundle`` was validated when its case was loaded
    (a stored case or a case file), so it is not validated again; ``settings`` are the run's
    resolved settings, used when ``ignore``/``allow_network`` are not given. A bundle from
    anywhere else is always validated.
    """
    patterns = live_patterns(live)
    loaded = (
        cast(Bundle, dict(bundle))  # what load_bundle returns of a valid bundle
        if validated and isinstance(bundle, Mapping)
        else load_bundle(bundle)
    )
    run = settings
    if settings is None:
        settings = RunSettings.resolve()
    masks = settings.masks if ignore is None else _config.resolve("ignore", ignore)
    network = (
        settings.network
        if allow_network is None
        else _network_guard.Rules(_config.resolve("allow_network", allow_network))
    )
    report = ReplayReport(
        "recorded" if strict else "lenient",
        case_id=case_id,
        case_version=case_version,
        live_patterns=list(patterns),
    )
    session = ReplaySession(
        loaded,
        strict=strict,
        report=report,
        masks=masks,
        live=patterns,
        max_calls=max_calls,
        retry=retry,
        json_data=validated or isinstance(bundle, (str, bytes)),
    )
    patched: list[str] = []
    for hook in _activation_hooks:
        patched.extend(hook(run))
    report.providers = sorted(set(patched))
    token = _session.set(session)
    with _active_lock:
        _active.append(session)
    try:
        with _network_guard.Guard(report, network) if strict else _network_guard.open_scope():
            yield session
    finally:
        with _active_lock:
            _active.remove(session)
        _session.reset(token)
        session.finish()


@dataclass(frozen=True, eq=False)
class RunSettings:
    """The settings a replay block reads, resolved once for a run of many cases.

    Each resolution is a run of its own: the provider patches activated for its first case
    serve its other cases while nothing they depend on changes (see ``ActivationHook``).
    """

    masks: Any
    network: _network_guard.Rules  # allow_network and the exporter's endpoints, by host

    @classmethod
    def resolve(cls) -> RunSettings:
        """The settings as the environment and pyproject.toml say now."""
        allowed = _network_guard.Rules(_config.resolve("allow_network"))
        return cls(_config.resolve("ignore"), allowed)


def live_patterns(live: Iterable[str] | None) -> tuple[str, ...]:
    """``live=`` as a tuple of label patterns; ConfigError for anything else."""
    if live is None:
        return ()
    items = [live] if isinstance(live, str) else list(live)
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(
                f"live= takes label patterns such as 'tools:*' or 'tools:get_weather'; "
                f"{item!r} is not one"
            )
    return tuple(items)


def fixture(kind: str, name: str) -> Any:
    """Peek the next recorded output for ``kind`` ("tools"/"tool" or "llm") and ``name``.

    Nothing is consumed. Returns None when no fixtures are active or nothing is left.
    """
    section = {"tool": TOOLS, "tools": TOOLS, "llm": LLM}.get(kind)
    if section is None:
        raise ValueError(f"fixture(kind={kind!r}): kind must be 'tools' or 'llm'")
    session = current_session()
    if session is None:
        return None
    entry = session.recording.peek(section, name)
    if entry is None:
        return None
    if entry.error is not None:
        return dict(entry.error)
    text = entry.output_json
    try:
        # A fresh copy, as a served call gets: the caller may change what it is given.
        output = None if text is None else orjson.loads(text)
        return rebuild(output, type_tag=entry.raw.get("output_type"))
    except Exception as exc:
        raise unrebuildable(entry.label, exc) from exc


def unrebuildable(label: str, exc: Exception) -> ReplayError:
    """The error for a recorded output that cannot be rebuilt into the type the code returns."""
    return ReplayError(
        f"{label}: the recorded output cannot be rebuilt into the type the code returns "
        f"({exc}); re-record the case",
        label=label,
    )


__all__ = [
    "CallBudgetExceeded",
    "MadeOnRead",
    "Divergence",
    "ReplayReport",
    "ReplaySession",
    "RunSettings",
    "Step",
    "call_key",
    "current_session",
    "fixture",
    "fixtures",
    "load_bundle",
    "recorded_calls",
    "register_activation_hook",
    "replay_session",
    "timeline",
    "unrebuildable",
]
