"""Robustness runs: a case replayed with one recorded call failing, one way at a time.

A recording shows the agent on a good day. For each recorded tool or model call of a case and
each fault kind that applies to it, :func:`derive` makes a *derived recording*: the case's
recording with that one call's outcome replaced by the fault, every other call exactly as
recorded. A derived run is an ordinary strict ``fixtures()`` session over it, so a tool fault
reaches the agent the way a recorded failure does (:mod:`tracely_sdk._seam`): as
:class:`~tracely_sdk.ToolError`, or as the class the call names in ``errors=`` when its name is
the fault's type. A model fault is served at the HTTP client, as the wire carries it, so the
SDK raises its own exception (``tracely_sdk.providers.http._faults``, passed in as
``model_fault``).

Fault kinds (tools):

- ``error``: the call raised. The type, message and ``repr`` are those the same tool was
  recorded raising, in this case's recording first, then in any other selected case; a tool
  never recorded failing raises the project's ``error_type`` (default ``ToolError``).
- ``timeout``: the call timed out: type ``TimeoutError`` (Python's, which ``asyncio``,
  ``socket`` and most clients raise or subclass), so code that names ``errors=(TimeoutError,)``
  gets a real ``TimeoutError``.
- ``empty``: the call returned the empty value of its recorded output's JSON type: ``{}``,
  ``[]`` or ``""``. An output that is null, a number or a boolean has no empty value, and one
  recorded with a type tag (a dataclass, a pydantic model) may have none tracely can make; such
  a pair is skipped, with the reason.

Fault kinds (model calls): ``rate_limit`` (HTTP 429), ``server_error`` (500, Anthropic's 529),
``timeout`` (the client's read timeout), ``stream_cut`` (a streamed reply whose connection
drops after its first events) and ``refusal`` (the provider's content-filter or refusal
finish). A model call recorded by ``call_llm`` or by hand never reaches an HTTP client on
replay, so it has none: skipped, with the reason.

A call whose recording already is the fault (an ``error`` on a call recorded failing) is
skipped: the case itself replays it.

Retries: a call the derived recording cannot answer because it repeats the faulted call (an
SDK's own retry after a 429, a framework's retry of a step) is answered by the ``retry`` rule
(:class:`RetryRule`): ``serve-recorded`` gives it the recorded outcome, ``serve-fault`` the
fault again, ``incomplete`` nothing (a miss: the run is INCOMPLETE, never live). A model call
is a repeat when it calls the faulted model after the fault and before an answer of that
model was served: model calls are served in order, so the next recorded answer must not be
taken for the retry.

A derived run's verdict (:func:`decide`) is not the case's:

- ``HANDLED``: the agent returned, within the budget of calls.
- ``CRASHED``: an exception escaped the agent (the fault itself, or one it caused).
- ``LOOPED``: the agent made more calls than the budget (``max_calls``, default twice the
  recorded calls) allows; the run was stopped.
- ``INCOMPLETE``: the agent made a call the derived recording cannot answer (a retry, with the
  ``retry`` rule ``incomplete``); nothing ran live.
- ``UNREACHED``: the run never made the faulted call, so the fault says nothing.

The derivation and the verdicts are pure functions of their arguments: the same recording and
kinds give the same derived runs in the same order. :class:`RetryRule` holds the one state of a
derived run this module keeps: whether its faulted model call awaits an answer.
"""

from __future__ import annotations

import copy
import fnmatch
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from tracely_otel import Bundle, seal
from tracely_sdk._matching import LLM, TOOLS, CallKey, Entry, ServedEntries, call_key
from tracely_sdk.errors import ConfigError

__all__ = [
    "CRASHED",
    "FAULT_VERDICTS",
    "HANDLED",
    "INCOMPLETE",
    "KINDS",
    "LOOPED",
    "MODEL_KINDS",
    "RETRY_RULES",
    "TIMEOUT_TYPE",
    "TOOL_KINDS",
    "UNREACHED",
    "DerivedRun",
    "Fault",
    "FaultConfig",
    "ModelFault",
    "RetryRule",
    "decide",
    "derive",
    "failing",
    "fault_config",
    "kept_bundle",
    "parse_selectors",
    "selected",
    "parse_kinds",
    "recorded_errors",
    "what_next",
]

FaultKind = Literal[
    "error", "timeout", "empty", "rate_limit", "server_error", "stream_cut", "refusal"
]
TOOL_KINDS: tuple[FaultKind, ...] = ("error", "timeout", "empty")
MODEL_KINDS: tuple[FaultKind, ...] = (
    "rate_limit",
    "server_error",
    "timeout",
    "stream_cut",
    "refusal",
)
KINDS: tuple[FaultKind, ...] = (
    "error",
    "timeout",
    "empty",
    "rate_limit",
    "server_error",
    "stream_cut",
    "refusal",
)

ModelFault = Callable[[Mapping[str, Any], str, str], tuple[dict[str, Any] | None, str]]
"""``(recorded entry, kind, model) -> (the entry serving the fault, or None and why not)``."""

FaultVerdict = Literal["HANDLED", "CRASHED", "LOOPED", "INCOMPLETE", "UNREACHED"]
HANDLED: FaultVerdict = "HANDLED"
CRASHED: FaultVerdict = "CRASHED"
LOOPED: FaultVerdict = "LOOPED"
INCOMPLETE: FaultVerdict = "INCOMPLETE"
UNREACHED: FaultVerdict = "UNREACHED"
FAULT_VERDICTS: tuple[FaultVerdict, ...] = (HANDLED, CRASHED, LOOPED, INCOMPLETE, UNREACHED)

RetryName = Literal["incomplete", "serve-recorded", "serve-fault"]
RETRY_RULES: tuple[RetryName, ...] = ("incomplete", "serve-recorded", "serve-fault")

TIMEOUT_TYPE = "TimeoutError"
GENERIC_ERROR_TYPE = "ToolError"


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FaultConfig:
    """``[tool.tracely] faults``: which kinds, the budget, the retry rule, and what gates CI.

    ``max_calls`` is ``"Nx"`` (N times the case's recorded calls) or a number of calls.
    ``fail_on`` holds ``VERDICT`` or ``KIND:VERDICT`` patterns (``"CRASHED"``,
    ``"error:CRASHED"``, ``"*:LOOPED"``); a derived verdict matching one fails the job. Empty
    (the default): derived runs are reported and never fail the job.
    """

    kinds: tuple[FaultKind, ...] = KINDS
    max_calls: str | int = "2x"
    retry: RetryName = "incomplete"
    error_type: str = GENERIC_ERROR_TYPE
    fail_on: tuple[str, ...] = ()

    def budget(self, recorded_calls: int) -> int:
        """The most calls a derived run of a recording of ``recorded_calls`` calls may make."""
        if isinstance(self.max_calls, int):
            return self.max_calls
        factor = float(self.max_calls[:-1])
        return max(1, int(factor * recorded_calls))

    def gates(self, kind: str, verdict: str) -> bool:
        """Whether a derived ``verdict`` of fault ``kind`` fails the job."""
        for pattern in self.fail_on:
            want_kind, sep, want_verdict = pattern.rpartition(":")
            if not sep:
                want_kind = "*"
            if fnmatch.fnmatchcase(kind, want_kind) and fnmatch.fnmatchcase(verdict, want_verdict):
                return True
        return False


_CONFIG_KEYS = ("kinds", "max_calls", "retry", "error_type", "fail_on")


def parse_kinds(text: str | Iterable[str], source: str = "--faults") -> tuple[FaultKind, ...]:
    """``"error,timeout"`` (or a list) as fault kinds, in the order of :data:`KINDS`."""
    items = text.split(",") if isinstance(text, str) else list(text)
    names: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"{source}: {item!r} is not a fault kind; use {', '.join(KINDS)}")
        name = item.strip().lower()
        if not name:
            continue
        if name == "all":
            names.extend(KINDS)
        elif name in KINDS:
            names.append(name)
        else:
            raise ConfigError(
                f"{source}: unknown fault kind {item.strip()!r}; use {', '.join(KINDS)} "
                "(comma-separated) or all"
            )
    if not names:
        raise ConfigError(f"{source}: no fault kind given; use {', '.join(KINDS)} or all")
    return tuple(k for k in KINDS if k in names)


def fault_config(source: str, value: Any) -> FaultConfig:
    """The faults setting from a ``[tool.tracely.faults]`` table or a JSON object (the
    ``TRACELY_FAULTS`` variable); ConfigError naming ``source`` and the bad key."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(
                f'{source} must be a JSON object such as {{"fail_on": ["CRASHED"]}}'
            ) from None
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source} must be a table (JSON object) with keys {_CONFIG_KEYS}")
    table = {str(k).replace("-", "_"): v for k, v in value.items()}
    unknown = sorted(set(table) - set(_CONFIG_KEYS))
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {unknown}; use {', '.join(_CONFIG_KEYS)}")
    config = FaultConfig()
    kinds = config.kinds
    if "kinds" in table:
        kinds = parse_kinds(table["kinds"], f"{source} kinds")
    max_calls = table.get("max_calls", config.max_calls)
    if isinstance(max_calls, bool) or not (
        (isinstance(max_calls, int) and max_calls > 0) or _is_factor(max_calls)
    ):
        raise ConfigError(
            f"{source} max_calls={max_calls!r}: use a number of calls (e.g. 10) or a multiple "
            'of the recorded calls (e.g. "2x")'
        )
    retry = table.get("retry", config.retry)
    if retry not in RETRY_RULES:
        raise ConfigError(f"{source} retry={retry!r}: use one of {', '.join(RETRY_RULES)}")
    error_type = table.get("error_type", config.error_type)
    if not isinstance(error_type, str) or not error_type.strip():
        raise ConfigError(f"{source} error_type={error_type!r}: use an exception class name")
    fail_on = table.get("fail_on", ())
    if isinstance(fail_on, str):
        fail_on = [fail_on]
    if not isinstance(fail_on, (list, tuple)):
        raise ConfigError(f'{source} fail_on must be a list such as ["CRASHED", "timeout:LOOPED"]')
    for pattern in fail_on:
        verdict = str(pattern).rpartition(":")[2]
        if not isinstance(pattern, str) or not any(
            fnmatch.fnmatchcase(v, verdict) for v in FAULT_VERDICTS
        ):
            raise ConfigError(
                f"{source} fail_on: {pattern!r} names no verdict; use VERDICT or KIND:VERDICT "
                f"with a verdict of {', '.join(FAULT_VERDICTS)}"
            )
    return FaultConfig(
        kinds=kinds,
        max_calls=max_calls if isinstance(max_calls, int) else max_calls.strip().lower(),
        retry=cast(RetryName, retry),
        error_type=error_type.strip(),
        fail_on=tuple(fail_on),
    )


def _is_factor(value: Any) -> bool:
    if not isinstance(value, str) or not value.strip().lower().endswith("x"):
        return False
    try:
        return float(value.strip()[:-1]) > 0
    except ValueError:
        return False


# -- derivation -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """One recorded call and the way it fails in a derived run."""

    kind: FaultKind
    name: str  # the tool, or the model
    index: int  # its place among the recorded calls of that name (0-based)
    seq: int  # its place in the trace's order of calls
    args: Any = None
    has_args: bool = False
    section: str = TOOLS  # tools, or llm

    @property
    def label(self) -> str:
        return f"{self.section}:{self.name}"

    @property
    def call(self) -> str:
        """``tools:get_weather #1``: the call as reports name it."""
        return f"{self.label} #{self.index + 1}"


@dataclass(frozen=True)
class DerivedRun:
    """A case's recording with one call's outcome replaced by a fault."""

    fault: Fault
    bundle: Bundle  # the derived recording
    recorded: Mapping[str, Any]  # the call's entry as recorded
    served: Mapping[str, Any]  # the call's entry in the derived recording
    recorded_calls: int  # how many calls the recording holds, tools and LLM


@dataclass(frozen=True)
class Skipped:
    fault: Fault
    reason: str


@dataclass
class Derivation:
    runs: list[DerivedRun] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def recorded_errors(bundles: Iterable[Any]) -> dict[str, dict[str, str]]:
    """Each tool's first recorded failure across ``bundles`` (in their order, then the calls'
    order): ``{"get_weather": {"type": ..., "message": ..., "repr": ...}}``."""
    found: dict[str, dict[str, str]] = {}
    for bundle in bundles:
        if not isinstance(bundle, Mapping) or not isinstance(bundle.get("tools"), Mapping):
            continue
        for entry in _tool_entries(cast(Bundle, bundle)):
            error = entry.raw.get("error")
            if entry.name not in found and isinstance(error, Mapping):
                found[entry.name] = _error_fields(error)
    return found


def _error_fields(error: Mapping[str, Any]) -> dict[str, str]:
    kept = {"type": str(error.get("type")), "message": str(error.get("message"))}
    if isinstance(error.get("repr"), str):
        kept["repr"] = error["repr"]
    return kept


def _tool_entries(bundle: Bundle) -> list[Any]:
    return [e for e in ServedEntries(bundle).entries() if e.kind == TOOLS]


def derive(
    bundle: Bundle,
    kinds: Sequence[str],
    *,
    errors: Mapping[str, Mapping[str, str]] | None = None,
    error_type: str = GENERIC_ERROR_TYPE,
    model_fault: ModelFault | None = None,
) -> Derivation:
    """The derived runs of ``bundle`` (a loaded recording): one per recorded call (in the
    trace's order) and kind that applies to it (in the order of :data:`KINDS`), and the pairs
    skipped, with why.

    ``errors`` is :func:`recorded_errors` of the selected cases; this recording's own failures
    come first. ``model_fault`` makes a model call's fault entry; without it, model calls get
    no derived runs. ``bundle`` is never changed: each derived recording is a copy, resealed
    when the original carries a checksum.
    """
    own = recorded_errors([bundle])
    catalogue = {**(errors or {}), **own}
    entries = ServedEntries(bundle).entries()
    total = len(entries)
    out = Derivation()
    for entry in entries:
        raw = entry.raw
        tool = entry.kind == TOOLS
        if not tool and model_fault is None:
            continue
        applies = TOOL_KINDS if tool else MODEL_KINDS
        for kind in (k for k in KINDS if k in kinds and k in applies):
            fault = Fault(
                kind=kind,
                name=entry.name,
                index=entry.index,
                seq=entry.seq,
                args=raw.get("args") if tool else None,
                has_args=tool and "args" in raw,
                section=entry.kind,
            )
            if tool:
                served, why_not = _faulted_entry(raw, fault, catalogue, error_type)
            else:
                assert model_fault is not None
                served, why_not = model_fault(raw, kind, entry.name)
            if served is None:
                out.skipped.append(Skipped(fault, why_not))
                continue
            out.runs.append(
                DerivedRun(
                    fault=fault,
                    bundle=_replace_entry(bundle, fault, served),
                    recorded=raw,
                    served=served,
                    recorded_calls=total,
                )
            )
    return out


def _faulted_entry(
    raw: Mapping[str, Any],
    fault: Fault,
    catalogue: Mapping[str, Mapping[str, str]],
    error_type: str,
) -> tuple[dict[str, Any] | None, str]:
    """The entry that serves ``fault`` in place of the recorded ``raw``, or None and why not."""
    kept = {k: v for k, v in raw.items() if k not in ("output", "error", "output_type")}
    recorded_error = raw.get("error")
    if fault.kind == "error":
        if isinstance(recorded_error, Mapping):
            return None, "the call is recorded failing: the case itself replays that failure"
        error = catalogue.get(fault.name) or {
            "type": error_type,
            "message": f"{fault.label} failed (a fault tracely injected)",
        }
        return {**kept, "error": dict(error)}, ""
    if fault.kind == "timeout":
        if isinstance(recorded_error, Mapping) and recorded_error.get("type") == TIMEOUT_TYPE:
            return None, "the call is recorded timing out: the case itself replays that"
        message = f"{fault.label} timed out (a fault tracely injected)"
        return {
            **kept,
            "error": {
                "type": TIMEOUT_TYPE,
                "message": message,
                "repr": f"TimeoutError({message!r})",
            },
        }, ""
    if "output" not in raw:
        return None, "the call is recorded failing: it has no output type to empty"
    tag = raw.get("output_type")
    if isinstance(tag, str):
        return None, f"the output is recorded as {tag}: tracely cannot make an empty one"
    empty = _empty_of(raw["output"])
    if empty is None:
        shown = "null" if raw["output"] is None else type(raw["output"]).__name__
        return None, f"the recorded output is {shown}, which has no empty value"
    if empty == raw["output"]:
        return None, "the recorded output is already empty"
    return {**kept, "output": empty}, ""


def _empty_of(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {}
    if isinstance(value, list):
        return []
    if isinstance(value, str):
        return ""
    return None


def _replace_entry(bundle: Bundle, fault: Fault, entry: Mapping[str, Any]) -> Bundle:
    derived: Any = copy.deepcopy(dict(bundle))
    section = dict(derived.get(fault.section) or {})
    calls = list(section[fault.name])
    calls[fault.index] = dict(entry)
    section[fault.name] = calls
    derived[fault.section] = section
    if "checksum" in derived:
        seal(derived)
    return cast(Bundle, derived)


# -- a derived run's calls the recording cannot answer ------------------------------------------


class RetryRule:
    """What answers the calls of a derived run that its recording cannot: a repeat of the
    faulted call, under the ``retry`` rule (``serve-recorded``: the recorded outcome;
    ``serve-fault``: the fault again; ``incomplete``: nothing, the call misses).

    A tool call is a repeat when the recording misses it and it has the faulted call's tool
    and args. A model call is a repeat when it calls the faulted model after the fault was
    served and before an answer of that model was (:meth:`repeats`): it is answered here, never
    by the next recorded answer. ``answers`` keeps what was answered, in order.
    """

    def __init__(self, run: DerivedRun, rule: str) -> None:
        self.run = run
        self.rule = rule
        fault = run.fault
        self.expected = call_key(fault.args) if fault.has_args else None
        # The name the faulted model call was made with, until an answer to it is served.
        self.pending: str | None = None
        self.answers: list[tuple[str, str, Mapping[str, Any]]] = []

    def served(self, entry: Entry, name: str) -> None:
        fault = self.run.fault
        if fault.section != LLM or entry.kind != LLM:
            return
        if entry.name == fault.name and entry.index == fault.index:
            self.pending = name
        elif name == self.pending:
            self.pending = None

    def repeats(self, kind: str, name: str) -> bool:
        return kind == LLM and self.pending is not None and name == self.pending

    def answer(self, kind: str, name: str, key: CallKey | None) -> Mapping[str, Any] | None:
        fault = self.run.fault
        if kind != fault.section or (
            name != fault.name if kind == TOOLS else not self.repeats(kind, name)
        ):
            return None
        if (
            kind == TOOLS
            and self.expected is not None
            and (key is None or not key.matches(self.expected))
        ):
            return None
        if self.rule == "incomplete":
            return None
        answer = self.run.recorded if self.rule == "serve-recorded" else self.run.served
        if self.rule == "serve-recorded":
            self.pending = None
        self.answers.append((kind, name, answer))
        return answer


# -- the verdict --------------------------------------------------------------------------------


def decide(
    *,
    reached: bool,
    stopped: bool,
    misses: Sequence[str],
    raised: Mapping[str, str] | None,
) -> tuple[FaultVerdict, list[str]]:
    """A derived run's verdict and its reasons, from what happened in it.

    ``reached``: the faulted call was made; ``stopped``: the budget of calls ran out;
    ``misses``: the calls the derived recording could not answer; ``raised``: what escaped
    the agent (``{"type", "message"}``), None when it returned.
    """
    if not reached:
        reasons = ["the run never made the faulted call, so the fault was not exercised"]
        if raised is not None:
            reasons.append(f"the agent raised {raised['type']}: {raised['message']}")
        return UNREACHED, reasons
    if stopped:
        return LOOPED, ["the agent went on making calls past the budget and was stopped"]
    if misses:
        return INCOMPLETE, [
            *misses,
            "the faulted run made a call its recording cannot answer; nothing ran live",
        ]
    if raised is not None:
        return CRASHED, [f"the agent raised {raised['type']}: {raised['message']}"]
    return HANDLED, []


def what_next(
    timeline: Sequence[Mapping[str, Any]],
    fault: Fault,
    *,
    raised: Mapping[str, str] | None,
    output: Any,
    stopped: bool,
) -> str:
    """What the agent did after the faulted call: its next call, or how it ended."""
    faulted = next(
        (
            s
            for s in timeline
            if s.get("label") == fault.label and s.get("seq") == fault.seq and s.get("call")
        ),
        None,
    )
    if faulted is None:
        return "never made the faulted call"
    number = int(faulted["call"]) + 1
    step = next((s for s in timeline if s.get("call") == number), None)
    if step is not None:
        label = step.get("label")
        outcome = step.get("outcome")
        verb = "retried" if label == fault.label else "called"
        if outcome == "missed":
            return f"{verb} {label}, which the recording cannot answer"
        if outcome == "retried":
            return f"retried {label} (served by the retry rule)"
        return f"{verb} {label}"
    if stopped:
        return "was stopped: the budget of calls ran out"
    if raised is not None:
        return f"raised {raised['type']}: {_short(raised['message'])}"
    return f"returned {_short(json.dumps(output, ensure_ascii=False, default=str))}"


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failing(results: Iterable[Mapping[str, Any]], config: FaultConfig) -> list[Mapping[str, Any]]:
    """The derived runs (as reported) whose verdict ``config.fail_on`` says fails the job."""
    return [r for r in results if config.gates(str(r.get("fault")), str(r.get("verdict")))]


# -- derived runs kept as cases ---------------------------------------------------------------


def parse_selectors(text: str, source: str = "--with-faults") -> tuple[tuple[str, str], ...]:
    """``"llm:gpt-4o:rate_limit, tools:*:timeout"`` as ``(CALL, KIND)`` patterns: CALL is matched
    against a derived run's call (``llm:gpt-4o``, or ``llm:gpt-4o #2`` for one of its calls),
    KIND against its fault kind; both may use ``*``."""
    selectors: list[tuple[str, str]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        call, sep, kind = item.rpartition(":")
        if not sep or ":" not in call or not kind:
            raise ConfigError(
                f"{source}: {item!r} is not CALL:KIND; e.g. llm:gpt-4o:rate_limit, "
                "'tools:get_weather #1:timeout' or llm:*:*"
            )
        if not any(fnmatch.fnmatchcase(k, kind) for k in KINDS):
            raise ConfigError(
                f"{source}: {item!r} names no fault kind; use one of {', '.join(KINDS)} or *"
            )
        selectors.append((call.strip(), kind.strip()))
    if not selectors:
        raise ConfigError(f"{source}: no CALL:KIND given, e.g. llm:gpt-4o:rate_limit")
    return tuple(selectors)


def selected(row: Mapping[str, Any], selectors: Sequence[tuple[str, str]]) -> bool:
    """Whether a derived run (as reported) matches one of ``selectors`` (all match none)."""
    if not selectors:
        return True
    call, label, kind = str(row.get("call")), str(row.get("label")), str(row.get("fault"))
    return any(
        (fnmatch.fnmatchcase(call, want_call) or fnmatch.fnmatchcase(label, want_call))
        and fnmatch.fnmatchcase(kind, want_kind)
        for want_call, want_kind in selectors
    )


def kept_bundle(
    run: DerivedRun,
    answers: Sequence[tuple[str, str, Mapping[str, Any]]],
    prepare: Callable[[str, Mapping[str, Any]], Mapping[str, Any]] | None = None,
    unused: Iterable[tuple[str, str, int]] = (),
) -> Bundle:
    """The recording a derived run is kept as: what the run was served. Its derived
    recording, without the calls it never made (``unused``: section, name, index), and with
    each call its retry rule answered (``answers``, in order) recorded right after the faulted
    call, so the kept case replays as the run did, with no retry rule. ``prepare`` makes an
    answer an entry of its section (a model call's input as the layer serving it compares it)."""
    derived: Any = copy.deepcopy(dict(run.bundle))
    fault = run.fault
    dropped = set(unused)
    for section in (TOOLS, LLM):
        calls = derived.get(section) or {}
        for name in list(calls):
            calls[name] = [
                e for i, e in enumerate(calls[name]) if (section, name, i) not in dropped
            ]
            if not calls[name]:
                del calls[name]
    added = [
        dict(prepare(kind, entry) if prepare is not None else entry)
        for kind, name, entry in answers
        if kind == fault.section and name == fault.name
    ]
    for section in (TOOLS, LLM):
        for entries in (derived.get(section) or {}).values():
            for entry in entries:
                if isinstance(entry.get("seq"), int) and entry["seq"] > fault.seq:
                    entry["seq"] += len(added)
    for offset, entry in enumerate(added, start=1):
        if "seq" in entry:
            entry["seq"] = fault.seq + offset
    before = sum(1 for i in range(fault.index) if (fault.section, fault.name, i) not in dropped)
    calls = derived[fault.section][fault.name]
    calls[before + 1 : before + 1] = added
    if "checksum" in derived:
        seal(derived)
    return cast(Bundle, derived)
