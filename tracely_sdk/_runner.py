"""Running regression cases: load each case's recording, replay the agent on it, give a verdict.

One case, one verdict, each with the reasons a person can act on:

- ``PASS``: strict replay, every recorded call served and none left over, no divergence, and
  the output canonically equal to the expected output.
- ``FAIL``: the output differs (with a path-level diff), recorded calls were never made (the
  regression that drops a tool call fails on the missing tool), or an input diverged.
- ``INCOMPLETE``: a strict miss (the recording cannot answer a call the code made), or a
  network operation strict replay refused (``tracely_sdk._network_guard``; the reason names
  the host and port), even if the agent swallowed the ReplayError; nothing ran live.
- ``ERRORED``: the agent raised, or the case's recording cannot be loaded. In that second case
  the agent is not run at all and a trace for the case is emitted with ERROR status.
- ``LENIENT``: a lenient run (``strict=False``); the reasons are listed as for a strict run,
  but the verdict is never PASS, because a lenient run is not a recorded run.
- ``NOT_RUN``: the run was interrupted (SIGINT, SIGTERM) before the case finished.

Each case runs in a fresh :class:`contextvars.Context`, so nothing set by one case (the
active recording, the current span, any context variable of the agent's) is seen by the next.
:func:`run_cases` with ``jobs > 1`` runs cases in spawned worker processes; each worker
imports the entrypoint once and results travel back as plain data.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import difflib
import functools
import hashlib
import importlib
import importlib.metadata
import inspect
import math
import os
import re
import sysconfig
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import Status, StatusCode

from tracely_otel import attributes as A
from tracely_otel import value_digest
from tracely_sdk._canonical import canonical_equal
from tracely_sdk._diff import Difference, diff_values, render
from tracely_sdk._entrypoints import EntrypointPolicy, ensure_cwd_on_path
from tracely_sdk._redact import redact_text
from tracely_sdk._replay import (
    MadeOnRead,
    ReplayReport,
    RunSettings,
    current_session,
    fixtures,
    replay_session,
)
from tracely_sdk._types import dumps
from tracely_sdk._version import __version__
from tracely_sdk.errors import BundleError, ConfigError, RecordedError, StoreError

__all__ = [
    "ERRORED",
    "FAIL",
    "INCOMPLETE",
    "LENIENT",
    "NOT_RUN",
    "PASS",
    "VERDICTS",
    "CaseResult",
    "Decision",
    "EntrypointError",
    "ReplayCase",
    "Shard",
    "Verdict",
    "agent_traceback",
    "check_entrypoint",
    "decide",
    "load_case_dir",
    "load_cases",
    "entrypoint_version",
    "load_entrypoint",
    "natural_key",
    "output_diff",
    "refuse_disallowed",
    "run_case",
    "run_cases",
]

Verdict = Literal["PASS", "FAIL", "INCOMPLETE", "ERRORED", "LENIENT", "NOT_RUN"]
PASS: Verdict = "PASS"
FAIL: Verdict = "FAIL"
INCOMPLETE: Verdict = "INCOMPLETE"
ERRORED: Verdict = "ERRORED"
LENIENT: Verdict = "LENIENT"
NOT_RUN: Verdict = "NOT_RUN"
VERDICTS: tuple[Verdict, ...] = (PASS, FAIL, INCOMPLETE, ERRORED, LENIENT, NOT_RUN)

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_ENTRYPOINT_RE = re.compile(rf"^{_IDENT}(\.{_IDENT})*:{_IDENT}(\.{_IDENT})*$")


class EntrypointError(ConfigError):
    """The agent entrypoint (``module:function``) cannot be loaded; the message says why."""


# -- cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayCase:
    """What the runner needs of a case: a stored case, or a case file that may be broken.

    ``problem`` is set when the case cannot be run: a corrupt file (``problem_type``
    BundleError), or an entrypoint the project does not allow (EntrypointError). Such a case
    is never run, its verdict is ERRORED with ``problem`` as the reason.
    """

    id: str
    name: str
    version: int | None
    entrypoint: str | None
    input: Any
    expected_output: Any
    bundle: Any
    tags: tuple[str, ...] = ()
    source_trace_id: str | None = None
    problem: str | None = None
    agent_version: str | None = None  # the version of the agent the case is for, if it says
    problem_type: str = "BundleError"
    # Set only by the loaders, whose bundles were validated when the case was loaded (a case
    # file) or written (a local store, whose seal shows the row is what was written).
    validated: bool = field(default=False, compare=False, repr=False)

    @classmethod
    def of(cls, case: Any, *, validated: bool = False) -> ReplayCase:
        """``case`` (a :class:`~tracely_sdk.store.Case` or a ReplayCase) as a ReplayCase;
        ``validated`` as the loaders set it, for a case that loads."""
        if isinstance(case, ReplayCase):
            return case
        problem = getattr(case, "problem", None)
        return cls(
            id=case.id,
            name=case.name,
            version=case.version,
            entrypoint=case.entrypoint,
            input=case.input,
            expected_output=case.expected_output,
            bundle=case.bundle,
            tags=tuple(case.tags),
            source_trace_id=case.source_trace_id,
            agent_version=_optional_str(getattr(case, "agent_version", None)),
            problem=None
            if problem is None
            else f"the stored case cannot be loaded, so the agent was not run: {problem}",
            validated=validated and problem is None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "entrypoint": self.entrypoint,
            "input": self.input,
            "expected_output": self.expected_output,
            "bundle": self.bundle,
            "tags": list(self.tags),
            "source_trace_id": self.source_trace_id,
            "problem": self.problem,
            "agent_version": self.agent_version,
            "problem_type": self.problem_type,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplayCase:
        return cls(
            id=data["id"],
            name=data["name"],
            version=data.get("version"),
            entrypoint=data.get("entrypoint"),
            input=data.get("input"),
            expected_output=data.get("expected_output"),
            bundle=data.get("bundle"),
            tags=tuple(data.get("tags") or ()),
            source_trace_id=data.get("source_trace_id"),
            problem=data.get("problem"),
            agent_version=_optional_str(data.get("agent_version")),
            problem_type=data.get("problem_type") or "BundleError",
        )


_DIGITS = re.compile(r"([0-9]+)")


def natural_key(text: str) -> tuple[Any, ...]:
    """The key that sorts names as people read them: ``city2`` before ``city10``.

    Runs of digits compare as numbers, the text between them without regard to case; ties
    (``city02``, ``city2``, ``City2``) fall back to the plain text, so the order is total.
    """
    parts = _DIGITS.split(text)
    return (
        tuple(int(p) if i % 2 else p.casefold() for i, p in enumerate(parts)),
        text,
    )


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based): the cases whose id hashes to it.

    A case's shard depends on its id alone, never on the other cases, so adding or removing a
    case moves no other case to another shard; every case is in exactly one shard.
    """

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ConfigError(
                f"shard {self.index}/{self.count} does not exist: K/N needs 1 <= K <= N"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"`` as Shard(2, 4); ConfigError naming the expected form otherwise."""
        index, sep, count = text.strip().partition("/")
        if not (
            sep and index.isascii() and index.isdigit() and count.isascii() and count.isdigit()
        ):
            raise ConfigError(f"invalid shard {text!r}: expected K/N, e.g. 2/4 (the 2nd of 4)")
        return cls(int(index), int(count))

    def holds(self, case_id: str) -> bool:
        digest = hashlib.sha256(case_id.encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _broken_case_file(path: Path, problem: str) -> ReplayCase:
    """A case file that does not load, described from whatever of it can be read."""
    doc: Any = None
    with contextlib.suppress(OSError, orjson.JSONDecodeError):
        doc = orjson.loads(path.read_bytes())
    doc = doc if isinstance(doc, Mapping) else {}
    case_id = doc.get("id") if isinstance(doc.get("id"), str) and doc.get("id") else path.stem
    version = doc.get("version")
    tags = doc.get("tags")
    entrypoint = doc.get("entrypoint")
    name = doc.get("name")
    return ReplayCase(
        id=case_id,
        name=name if isinstance(name, str) and name.strip() else case_id,
        version=version if isinstance(version, int) and not isinstance(version, bool) else None,
        entrypoint=entrypoint
        if isinstance(entrypoint, str) and _ENTRYPOINT_RE.fullmatch(entrypoint)
        else None,
        input=None,
        expected_output=None,
        bundle=None,
        tags=tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else (),
        problem=f"the case file cannot be loaded, so the case was not run: {problem}",
    )


def load_case_dir(directory: str | os.PathLike[str]) -> list[ReplayCase]:
    """Every case file in ``directory`` (as written by ``tracely cases export``), in the
    natural order of their ids.

    A file that does not load is not skipped: it becomes a case with a ``problem``, which the
    runner reports ERRORED without running anything. A missing directory raises StoreError.
    """
    from tracely_sdk.store import CaseFileError, read_case_file

    source = Path(directory)
    if source.is_file():
        files = [source]
    elif source.is_dir():
        files = sorted(
            p for p in source.glob("*.json") if p.is_file() and not p.name.startswith(".")
        )
    else:
        raise StoreError(f"no case directory at {source}")
    cases = []
    for path in files:
        try:
            case, _ = read_case_file(path)
        except CaseFileError as exc:
            cases.append(_broken_case_file(path, str(exc)))
        else:
            cases.append(ReplayCase.of(case, validated=True))
    return _in_order(cases)


def _in_order(cases: Iterable[ReplayCase]) -> list[ReplayCase]:
    return sorted(cases, key=lambda c: natural_key(c.id))


def load_cases(
    *,
    store: Any = None,
    cases_dir: str | os.PathLike[str] | None = None,
    case_ids: Sequence[str] = (),
    tags: Sequence[str] = (),
) -> list[ReplayCase]:
    """The selected cases, from a store (an open :class:`~tracely_sdk.store.Store`) or a directory,
    in the natural order of their ids (:func:`natural_key`).

    ``case_ids`` picks cases by id (an unknown id raises NotFound); ``tags`` keeps the cases with
    any of the tags. A case file too broken to tell its tags is kept whatever the tags, so a
    corrupt file never silently drops out of a gate.
    """
    return _in_order(_select(store, cases_dir, case_ids, tags))


def _select(
    store: Any,
    cases_dir: str | os.PathLike[str] | None,
    case_ids: Sequence[str],
    tags: Sequence[str],
) -> list[ReplayCase]:
    from tracely_sdk.errors import NotFound

    if cases_dir is not None:
        found = load_case_dir(cases_dir)
        if case_ids:
            by_id = {c.id: c for c in found}
            missing = [cid for cid in case_ids if cid not in by_id]
            if missing:
                raise NotFound(f"no case {missing[0]!r} in {cases_dir}")
            found = [by_id[cid] for cid in dict.fromkeys(case_ids)]
        if tags:
            wanted = set(tags)
            found = [
                c for c in found if wanted & set(c.tags) or (c.problem is not None and not c.tags)
            ]
        return found
    if store is None:
        raise ValueError("load_cases needs a store or a cases directory")

    validates = bool(getattr(store, "validates_bundles", False))
    # A store that proves a case sound from its row builds the ReplayCase itself; the others
    # give Cases, copied here.
    make = functools.partial(ReplayCase, validated=validates)

    def read(**which: Any) -> list[ReplayCase]:
        return [
            ReplayCase.of(c, validated=validates) for c in store.cases_for_replay(make, **which)
        ]

    if case_ids:
        selected = [read(case_id=cid)[0] for cid in dict.fromkeys(case_ids)]
        if tags:
            wanted = set(tags)
            selected = [c for c in selected if wanted & set(c.tags)]
        return selected
    if tags:
        tagged: dict[str, ReplayCase] = {}
        for tag in dict.fromkeys(tags):
            for case in read(tag=tag):
                tagged.setdefault(case.id, case)
        return list(tagged.values())
    return read()


# -- entrypoints ---------------------------------------------------------------------------


def load_entrypoint(spec: str) -> Callable[..., Any]:
    """The function named by ``"module:function"`` (the function part may be dotted).

    The working directory is put on ``sys.path`` as ``python -m`` does. Raises
    :class:`EntrypointError` with a message saying what is missing.
    """
    if not isinstance(spec, str) or not _ENTRYPOINT_RE.fullmatch(spec.strip()):
        raise EntrypointError(
            f"invalid entrypoint {spec!r}: expected 'module:function' "
            "(e.g. examples.weather_agent:run)"
        )
    module_name, _, attr_path = spec.strip().partition(":")
    ensure_cwd_on_path()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == module_name or module_name.startswith(missing + "."):
            raise EntrypointError(
                f"entrypoint {spec!r}: no module named {missing!r} (looked in the current "
                f"directory {os.getcwd()} and sys.path; run from the project root or set "
                "PYTHONPATH)"
            ) from None
        raise EntrypointError(
            f"entrypoint {spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise EntrypointError(
            f"entrypoint {spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    target: Any = module
    walked = module_name
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            names = [n for n in dir(target) if not n.startswith("_")]
            near = difflib.get_close_matches(part, names, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise EntrypointError(
                f"entrypoint {spec!r}: {walked!r} has no attribute {part!r}{hint}"
            ) from None
        walked = f"{walked}.{part}" if walked != module_name else f"{module_name}:{part}"
    if not callable(target):
        raise EntrypointError(f"entrypoint {spec!r} is a {type(target).__name__}, not a function")
    fn: Callable[..., Any] = target
    return fn


def check_entrypoint(
    spec: str, case_input: Any, policy: EntrypointPolicy | None = None
) -> Callable[..., Any]:
    """The function ``spec`` names, checked as replay will call it for a case with ``case_input``.

    Raises :class:`EntrypointError` when the project's ``policy`` does not allow it (then it is
    not imported), when it cannot be imported or is not callable, and when its signature does
    not accept the recorded ``{"args": [...], "kwargs": {...}}`` input.
    """
    policy = policy or EntrypointPolicy.for_project()
    refusal = policy.refusal(spec)
    if refusal is not None:
        raise EntrypointError(refusal)
    fn = load_entrypoint(spec)
    refusal = policy.refusal_of(spec, fn)
    if refusal is not None:
        raise EntrypointError(refusal)
    call = _call_input(case_input)
    if call is None:
        return fn
    args, kwargs = call
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (some builtins): replay will tell
        return fn
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        shown = orjson.dumps(case_input, default=str).decode()
        raise EntrypointError(
            f"entrypoint {spec!r} does not accept the recorded input {_shorten(shown)}: "
            f"{exc} (its signature is {spec.partition(':')[2]}{signature}); name the function "
            "the recorded agent run called"
        ) from None
    return fn


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- results -------------------------------------------------------------------------------


def _report_of(result: CaseResult) -> dict[str, Any] | None:
    return None if result.replay is None else result.replay.to_dict()


@dataclass
class CaseResult:
    """The verdict on one case, with everything needed to report it; plain data throughout.

    ``replay`` is the live :class:`~tracely_sdk.ReplayReport` when the case ran in this process
    (``report`` is its ``to_dict()``); it does not travel between processes.
    """

    case_id: str
    version: int | None
    name: str
    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    output: Any = None
    expected_output: Any = None
    diff: str | None = None
    # ``replay.to_dict()`` when the case ran here, made when first read (see MadeOnRead).
    report: MadeOnRead[dict[str, Any] | None] = MadeOnRead(_report_of)  # noqa: RUF009 - a descriptor
    duration: float = 0.0
    trace_id: str | None = None
    entrypoint: str | None = None
    traceback: str | None = None
    # Where the output differs from the expected output; ``diff`` is their text.
    output_differences: list[Difference] = field(default_factory=list)
    agent_version: str | None = None
    tags: list[str] = field(default_factory=list)
    # What the agent raised: {"type": ..., "message": ...}, redacted; ``traceback`` its frames.
    error: dict[str, str] | None = None
    replay: ReplayReport | None = field(default=None, repr=False, compare=False)
    # ``replay --faults``: the case's robustness runs (see tracely_sdk._robustness), or None.
    faults: list[dict[str, Any]] | None = None

    @property
    def ok(self) -> bool:
        """True when the case does not fail the gate: PASS, or LENIENT with nothing to report."""
        return self.verdict == PASS or (self.verdict == LENIENT and not self.reasons)

    @property
    def served(self) -> list[str]:
        return list((self.report or {}).get("served", ()))

    @property
    def unused(self) -> list[str]:
        return list((self.report or {}).get("unused", ()))

    @property
    def diverged(self) -> list[str]:
        return list((self.report or {}).get("diverged", ()))

    @property
    def divergences(self) -> list[dict[str, Any]]:
        """What each call in :attr:`diverged` differed in (see :class:`~tracely_sdk._replay.Divergence`)."""
        return list((self.report or {}).get("divergences", ()))

    @property
    def timeline(self) -> list[dict[str, Any]]:
        """Each recorded call beside what the replay did (see :class:`~tracely_sdk._replay.Step`)."""
        return list((self.report or {}).get("timeline", ()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "version": self.version,
            "name": self.name,
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "output": self.output,
            "expected_output": self.expected_output,
            "diff": self.diff,
            "report": self.report,
            "duration": self.duration,
            "trace_id": self.trace_id,
            "entrypoint": self.entrypoint,
            "traceback": self.traceback,
            "output_differences": list(self.output_differences),
            "agent_version": self.agent_version,
            "tags": list(self.tags),
            "error": self.error,
            "faults": self.faults,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseResult:
        return cls(
            case_id=data["case_id"],
            version=data.get("version"),
            name=data.get("name", data["case_id"]),
            verdict=data["verdict"],
            reasons=list(data.get("reasons") or ()),
            output=data.get("output"),
            expected_output=data.get("expected_output"),
            diff=data.get("diff"),
            report=data.get("report"),
            duration=float(data.get("duration") or 0.0),
            trace_id=data.get("trace_id"),
            entrypoint=data.get("entrypoint"),
            traceback=data.get("traceback"),
            output_differences=list(data.get("output_differences") or ()),
            agent_version=data.get("agent_version"),
            tags=list(data.get("tags") or ()),
            error=data.get("error"),
            faults=data.get("faults"),
        )


def _plain(value: Any) -> Any:
    """``value`` as JSON-compatible data, encoded the way tracely records values."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return orjson.loads(dumps(value))


def output_diff(expected: Any, actual: Any) -> tuple[list[Difference], str]:
    """Where ``actual`` differs from the expected (recorded) output, and that as text.

    Paths start at ``output`` (``output.temp: recorded 3 now 4``).
    """
    differences, total = diff_values(expected, actual, "output")
    return differences, "\n".join(render(differences, total - len(differences)))


@functools.lru_cache(maxsize=64)
def entrypoint_version(entrypoint: str | None) -> str | None:
    """The version of the installed distribution that provides the entrypoint's top-level
    package, or None when it is not one (a module of the project under test)."""
    if not entrypoint:
        return None
    top = entrypoint.split(":", 1)[0].split(".", 1)[0]
    try:
        distributions = importlib.metadata.packages_distributions().get(top) or []
        for name in distributions:
            return importlib.metadata.version(name)
    except Exception:  # broken metadata never decides anything
        return None
    return None


# -- the trace id of a replayed case ------------------------------------------------------

_trace_sink: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "tracely_case_trace", default=None
)


class _TraceIdProbe(SpanProcessor):
    """Notes the trace id of the first span a case starts (it runs in the case's own context)."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        sink = _trace_sink.get()
        if sink is not None and not sink:
            with contextlib.suppress(Exception):
                sink.append(span.get_span_context().trace_id)

    def on_end(self, span: ReadableSpan) -> None:
        return None

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_probed: weakref.WeakSet[TracerProvider] = weakref.WeakSet()
_probe_lock = threading.Lock()


def _ensure_probe() -> None:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider) or provider in _probed:
        return
    with _probe_lock:
        if provider not in _probed:
            provider.add_span_processor(_TraceIdProbe())
            _probed.add(provider)


def _emit_unloadable(case: ReplayCase, reason: str, mode: str) -> str | None:
    """The trace of a case that cannot be run: one agent span, status ERROR."""
    agent_name = case.id
    bundle = case.bundle
    if isinstance(bundle, Mapping) and isinstance(bundle.get("agent"), Mapping):
        recorded_name = bundle["agent"].get("name")
        if isinstance(recorded_name, str) and recorded_name:
            agent_name = recorded_name
    error_type = case.problem_type if case.problem is not None else "BundleError"
    error_text = orjson.dumps({"type": error_type, "message": reason}).decode()
    attrs: dict[str, Any] = {
        A.KIND: A.KIND_AGENT,
        A.NAME: agent_name,
        A.GEN_AI_OPERATION_NAME: A.OP_INVOKE_AGENT,
        A.GEN_AI_AGENT_NAME: agent_name,
        A.GEN_AI_PROVIDER_NAME: A.PROVIDER_OTHER,  # the run never started: no LLM call named one
        A.SDK_VERSION: __version__,
        A.REPLAY_MODE: mode,
        A.CASE_ID: case.id,
        A.ERROR: error_text,
        A.ERROR_TYPE: error_type,
        A.DIGEST: orjson.dumps({A.ERROR: value_digest(error_text)}).decode(),
    }
    if case.version is not None:
        attrs[A.CASE_VERSION] = case.version
    try:
        tracer = trace.get_tracer("tracely_sdk", __version__)
        span = tracer.start_span(
            A.span_name(A.KIND_AGENT, case.id), context=otel_context.Context(), attributes=attrs
        )
        span.set_status(Status(StatusCode.ERROR, f"{error_type}: {reason}"))
        span.end()
        ctx = span.get_span_context()
    except Exception:  # tracing never decides a verdict
        return None
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


# -- running one case ----------------------------------------------------------------------


def _call_input(value: Any) -> tuple[list[Any], dict[str, Any]] | None:
    if not isinstance(value, Mapping) or set(value) - {"args", "kwargs"}:
        return None
    args = value.get("args", [])
    kwargs = value.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, Mapping):
        return None
    if not all(isinstance(k, str) for k in kwargs):
        return None
    return list(args), dict(kwargs)


def _await(coro: Any) -> Any:
    import asyncio  # here, not at the top: most agents are synchronous, and it is slow to import
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    if not running:  # outside the except block: the agent's failure is not chained to ours
        return asyncio.run(coro)
    # Called from inside a running event loop: run the coroutine on its own loop in a thread,
    # in a copy of this context so it is served from the same recording.
    ctx = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tracely-case") as pool:
        return pool.submit(ctx.run, asyncio.run, coro).result()


def _exception_identity(exc: BaseException) -> tuple[str, str]:
    """The exception's type name and its message, redacted (a recorded one already is)."""
    if isinstance(exc, RecordedError):
        return exc.type, exc.message
    return type(exc).__qualname__, redact_text(str(exc))


def _package_dirs() -> tuple[str, ...]:
    import tracely_otel
    import tracely_sdk

    return tuple(
        os.path.join(os.path.dirname(os.path.abspath(m.__file__ or "")), "")
        for m in (tracely_sdk, tracely_otel)
    )


@functools.lru_cache(maxsize=1)
def _frame_places() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Where tracely's own code, the standard library, and installed packages live."""
    paths = sysconfig.get_paths()
    stdlib = {os.path.join(os.path.abspath(paths[k]), "") for k in ("stdlib", "platstdlib")}
    installed = {os.path.join(os.path.abspath(paths[k]), "") for k in ("purelib", "platlib")}
    return _package_dirs(), tuple(stdlib), tuple(installed)


def _frame_kind(filename: str) -> str:
    """``tracely``, ``stdlib`` or ``agent`` (the project's code, or a library it uses)."""
    own, stdlib, installed = _frame_places()
    if filename.startswith("<frozen "):
        return "stdlib"
    path = os.path.abspath(filename)
    if path.startswith(own):
        return "tracely"
    if path.startswith(stdlib) and not path.startswith(installed):
        return "stdlib"
    return "agent"


def _agent_frames(stack: traceback.StackSummary) -> tuple[traceback.StackSummary, int]:
    """The frames of ``stack`` that belong to the agent's run, and how many were left out.

    tracely's frames (the runner that called the agent, the seam and replay code the agent
    called) are left out; so is a standard-library frame reached only through them (the event
    loop the runner awaits the agent on). A standard-library frame the agent's code called is
    kept: it is where the agent's call failed.
    """
    kept = []
    caller = "tracely"  # the kind of the nearest frame above that is not the standard library
    for frame in stack:
        kind = _frame_kind(frame.filename)
        if kind != "stdlib":
            caller = kind
        if kind == "agent" or (kind == "stdlib" and caller == "agent"):
            kept.append(frame)
    if not kept:  # nothing of the agent's own: the innermost frame still says where it failed
        kept = list(stack)[-1:]
    return traceback.StackSummary.from_list(kept), len(stack) - len(kept)


def agent_traceback(exc: BaseException) -> str:
    """``exc``'s traceback (with its causes) as text: the agent's frames only, redacted.

    Each exception of the chain keeps the frames of the agent's code (see
    :func:`_agent_frames`); a line says how many of tracely's frames were left out.
    """
    top = traceback.TracebackException.from_exception(exc)
    seen: set[int] = set()
    pending = [top]
    hidden = 0
    while pending:
        te = pending.pop()
        if id(te) in seen:
            continue
        seen.add(id(te))
        te.stack, left_out = _agent_frames(te.stack)
        hidden += left_out
        pending += [t for t in (te.__cause__, te.__context__) if t is not None]
    text = "".join(top.format())
    if hidden:
        text += (
            f"({hidden} frame{'s' if hidden != 1 else ''} of tracely and its runner not shown)\n"
        )
    return redact_text(text)


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _labels(labels: Sequence[str]) -> str:
    """``tools:get_weather, llm:m (x2)``: each label once, with its count."""
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{k} (x{n})" if n > 1 else k for k, n in counts.items())


def _unloadable(
    case: ReplayCase, reason: str, mode: str, started: float, entrypoint: str | None
) -> CaseResult:
    trace_id = _emit_unloadable(case, reason, mode)
    return CaseResult(
        case_id=case.id,
        version=case.version,
        name=case.name,
        verdict=ERRORED,
        reasons=[reason],
        expected_output=_plain(case.expected_output),
        duration=time.perf_counter() - started,
        trace_id=trace_id,
        entrypoint=entrypoint,
    )


def run_case(
    case: Any,
    fn: Callable[..., Any],
    *,
    strict: bool = True,
    entrypoint: str | None = None,
    live: Sequence[str] = (),
    settings: RunSettings | None = None,
) -> CaseResult:
    """Replay ``case`` through ``fn`` under its recording and return the verdict.

    ``case`` is a :class:`~tracely_sdk.store.Case` or a :class:`ReplayCase`. If its recording
    cannot be loaded, ``fn`` is not called: the verdict is ERRORED and an ERROR trace for the
    case is emitted. Otherwise ``fn(*input["args"], **input["kwargs"])`` runs (awaited if it
    returns a coroutine) in a fresh context under ``fixtures(bundle, strict, live=live)``:
    the calls whose labels match a ``live`` pattern run live, and one whose outcome differs
    from the recorded call's is a FAIL reason with the difference. ``settings`` are the
    ``ignore``/``allow_network`` settings resolved for a run (default: resolved now).
    """
    rcase = ReplayCase.of(case)
    chosen = entrypoint or rcase.entrypoint
    result = contextvars.Context().run(_run_case, rcase, fn, strict, chosen, tuple(live), settings)
    result.agent_version = rcase.agent_version or entrypoint_version(chosen)
    result.tags = list(rcase.tags)
    return result


def _run_case(
    case: ReplayCase,
    fn: Callable[..., Any],
    strict: bool,
    entrypoint: str | None,
    live: tuple[str, ...] = (),
    settings: RunSettings | None = None,
) -> CaseResult:
    started = time.perf_counter()
    mode = "recorded" if strict else "lenient"
    if case.problem is not None:
        return _unloadable(case, case.problem, mode, started, entrypoint)
    call = _call_input(case.input)
    if call is None:
        return _unloadable(
            case,
            f"the case's input {orjson.dumps(case.input, default=str).decode()[:200]} is not a "
            'recorded call ({"args": [...], "kwargs": {...}}), so the case was not run',
            mode,
            started,
            entrypoint,
        )
    args, kwargs = call
    _ensure_probe()
    sink: list[int] = []
    _trace_sink.set(sink)

    raised: BaseException | None = None
    tb_text: str | None = None
    output: Any = None
    with contextlib.ExitStack() as stack:
        try:
            if case.bundle is None:
                report = stack.enter_context(
                    fixtures(None, strict, case_id=case.id, case_version=case.version)
                )
            else:
                report = stack.enter_context(
                    replay_session(
                        case.bundle,
                        strict,
                        case_id=case.id,
                        case_version=case.version,
                        live=live,
                        validated=case.validated,
                        settings=settings,
                    )
                ).report
        except BundleError as exc:
            return _unloadable(
                case,
                f"the case's recording cannot be loaded, so the agent was not run: {exc}",
                mode,
                started,
                entrypoint,
            )
        session = current_session()
        try:
            output = fn(*args, **kwargs)
            if inspect.isawaitable(output):
                output = _await(output)
        except (Exception, SystemExit) as exc:  # the agent's failure is the verdict, not ours
            raised = exc
            tb_text = agent_traceback(exc)
    # the block has exited: report.unused is final

    # The probe sees the first span of any instrumentor, when spans are sampled; the session
    # notes tracely's own, sampled or not.
    noted = sink[0] if sink else session.trace_id if session is not None else None
    trace_id = format(noted, "032x") if noted else None
    result = CaseResult(
        case_id=case.id,
        version=case.version,
        name=case.name,
        verdict=PASS,
        expected_output=_plain(case.expected_output),
        trace_id=trace_id,
        entrypoint=entrypoint,
        replay=report,
    )
    raised_identity = None if raised is None else _exception_identity(raised)
    recorded_error = _recorded_agent_error(case.bundle)
    # Compared only where the verdict reads it: a refusal or a recorded failure decides first.
    compared = raised is None and not report.errors and recorded_error is None
    decision = decide(
        errors=_dedupe(str(e) for e in report.errors),
        unused=report.unused,
        diverged=report.diverged,
        live=report.live,
        live_checks=report.live_checks,
        raised=raised_identity,
        raised_was_refused=raised is not None and any(raised is e for e in report.errors),
        output_differs=compared and not _equal(output, case.expected_output),
        recorded_error=recorded_error,
        strict=strict,
    )
    result.verdict = decision.verdict
    result.reasons = decision.reasons
    if raised is None:
        result.output = _plain(output)
        if decision.output_differs:
            result.output_differences, result.diff = output_diff(
                case.expected_output, result.output
            )
    elif decision.shows_error and raised_identity is not None:
        result.error = {"type": raised_identity[0], "message": raised_identity[1]}
        result.traceback = tb_text
    result.duration = time.perf_counter() - started
    return result


@dataclass(frozen=True)
class Decision:
    """A replayed case's verdict and its reasons, as :func:`decide` gives them."""

    verdict: Verdict
    reasons: list[str]
    shows_error: bool = False
    """Whether the agent's exception (and its traceback) belongs in the result."""
    output_differs: bool = False
    """Whether the reasons include the output's difference from the expected one."""


def decide(
    *,
    errors: Sequence[str],
    unused: Sequence[str],
    diverged: Sequence[str],
    live: Sequence[str],
    live_checks: Sequence[Mapping[str, Any]],
    raised: tuple[str, str] | None,
    raised_was_refused: bool,
    output_differs: bool,
    recorded_error: tuple[str, str] | None,
    strict: bool,
) -> Decision:
    """The verdict of a replayed case from what its run did; no side effects.

    ``errors``: what replay refused (a call the recording lacks, a refused connection), which
    makes the run INCOMPLETE whatever the agent did next; ``raised``: the type and message of
    the exception the agent raised (``raised_was_refused`` when it is one of ``errors``);
    ``recorded_error``: how the recorded run failed, if it did (reproducing it is no error);
    ``unused``/``diverged``/``live``/``live_checks``: the calls not made, served despite a
    different input, or run live; ``output_differs``: the returned output is not the expected
    one. Calls come first in the reasons: a dropped or changed call is the cause, a different
    output its effect. Not ``strict``, a run with no errors is LENIENT whatever its reasons.
    """
    if errors:
        reasons = list(errors)
        shows_error = raised is not None and not raised_was_refused
        if shows_error and raised is not None:
            reasons.append(f"the agent then raised {raised[0]}: {raised[1]}")
        return Decision(INCOMPLETE, reasons, shows_error=shows_error)

    reasons = []
    if raised is not None and raised != recorded_error:
        reasons.append(f"the agent raised {raised[0]}: {raised[1]}")
        if recorded_error is not None:
            reasons.append(f"the recorded run raised {recorded_error[0]}: {recorded_error[1]}")
        return Decision(ERRORED, reasons, shows_error=True)

    if unused:
        reasons.append(f"recorded call(s) never made: {_labels(unused)}")
    if diverged:
        reasons.append(f"served despite a different input: {_labels(diverged)}")
    if live:
        reasons.append(f"not in the recording, ran live: {_labels(live)}")
    for check in live_checks:
        if not check["equal"]:
            shown = "; ".join(render(check["differences"], check["omitted"]))
            reasons.append(f"{check['label']} ran live and differs from the recording: {shown}")
    differs = False
    if raised is None:
        if recorded_error is not None:
            reasons.append(
                f"the recorded run raised {recorded_error[0]}: {recorded_error[1]}; "
                "the replayed agent returned instead"
            )
        elif output_differs:
            reasons.append("output differs from the expected output")
            differs = True
    if not strict:
        return Decision(LENIENT, reasons, output_differs=differs)
    return Decision(FAIL if reasons else PASS, reasons, output_differs=differs)


def _equal(output: Any, expected: Any) -> bool:
    try:
        return canonical_equal(output, expected)
    except ValueError:  # nested too deep to compare canonically: compare the recorded JSON
        return dumps(output) == dumps(expected)


def _recorded_agent_error(bundle: Any) -> tuple[str, str] | None:
    agent = bundle.get("agent") if isinstance(bundle, Mapping) else None
    error = agent.get("error") if isinstance(agent, Mapping) else None
    if isinstance(error, Mapping):
        return str(error.get("type")), str(error.get("message"))
    return None


# -- running many --------------------------------------------------------------------------

ProgressCallback = Callable[[CaseResult], None]


def refuse_disallowed(
    cases: Sequence[ReplayCase],
    override: str | None,
    policy: EntrypointPolicy,
    loaded: Mapping[str, Callable[..., Any]] | None = None,
) -> list[ReplayCase]:
    """``cases``, each whose own entrypoint the project does not allow marked not to be run.

    Such a case keeps its entrypoint for the report, and gets the refusal as its ``problem``:
    it is ERRORED with the reason. Before import (``loaded`` None) the entrypoint's module is
    checked, so a refused one is never imported; after it (``loaded``: each entrypoint's
    function) the function itself must be defined in the project, not merely reachable from it.
    """
    if override:
        return list(cases)
    marked = []
    refusals: dict[str, str | None] = {}  # many cases share a few entrypoints
    for case in cases:
        reason = None
        ep = case.entrypoint
        if case.problem is None and ep and (loaded is None or ep in loaded):
            if ep not in refusals:
                refusals[ep] = (
                    policy.refusal(ep) if loaded is None else policy.refusal_of(ep, loaded[ep])
                )
            reason = refusals[ep]
        if reason is not None:
            case = dataclasses.replace(case, problem=reason, problem_type="EntrypointError")
        marked.append(case)
    return marked


def _entrypoints(cases: Sequence[ReplayCase], override: str | None) -> dict[str, str | None]:
    """Each runnable case's entrypoint; raises EntrypointError for cases that have none."""
    chosen: dict[str, str | None] = {}
    missing = []
    for case in cases:
        ep = override or case.entrypoint
        if ep is None and case.problem is None:
            missing.append(case.id)
        chosen[case.id] = ep
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise EntrypointError(
            f"case(s) {shown} have no entrypoint: pass --entrypoint module:function, or set one "
            "with `tracely cases promote ... --entrypoint module:function`"
        )
    return chosen


def _run_one(
    case: ReplayCase,
    entrypoint: str | None,
    strict: bool,
    fns: dict[str, Callable[..., Any]],
    live: Sequence[str] = (),
    settings: RunSettings | None = None,
) -> CaseResult:
    if case.problem is not None or entrypoint is None:
        return run_case(case, _never_called, strict=strict, entrypoint=entrypoint)
    fn = fns.get(entrypoint)
    if fn is None:
        fn = fns[entrypoint] = load_entrypoint(entrypoint)
    return run_case(case, fn, strict=strict, entrypoint=entrypoint, live=live, settings=settings)


def _never_called(*args: Any, **kwargs: Any) -> Any:  # pragma: no cover - unreachable
    raise AssertionError("a case that cannot be loaded is never run")


def run_cases(
    cases: Iterable[Any],
    entrypoint: str | None = None,
    *,
    strict: bool = True,
    jobs: int = 1,
    progress: ProgressCallback | None = None,
    initializer: Callable[[], None] | None = None,
    policy: EntrypointPolicy | None = None,
    live: Sequence[str] = (),
) -> list[CaseResult]:
    """Run every case and return the results in the order of ``cases``.

    ``live`` (label patterns, ``"tools:*"``) runs the matching calls live (see :func:`run_case`).

    ``entrypoint`` (``"module:function"``) overrides each case's own. A case's own entrypoint
    is imported only if ``policy`` (default: the project's, see ``_entrypoints``) allows it;
    otherwise the case is ERRORED with the reason and nothing of it is imported. With
    ``jobs > 1`` the cases run in that many spawned worker processes; ``initializer`` (a module-level function)
    runs once in each worker first, e.g. to set up tracing. ``progress(result)`` is called in
    this process as each case finishes. Every entrypoint is loaded before any case runs, so a
    bad one raises :class:`EntrypointError` and nothing is run.
    """
    if jobs < 1:
        raise ConfigError(f"jobs must be at least 1, got {jobs}")
    if policy is None:
        policy = EntrypointPolicy.for_project(explicit=[entrypoint])
    selected = refuse_disallowed([ReplayCase.of(c) for c in cases], entrypoint, policy)
    chosen = _entrypoints(selected, entrypoint)
    fns: dict[str, Callable[..., Any]] = {}
    # An explicit entrypoint is checked even when no case needs it: a typo fails the gate.
    needed = [entrypoint, *(chosen[c.id] for c in selected if c.problem is None)]
    for ep in dict.fromkeys(e for e in needed if e):
        fns[ep] = load_entrypoint(ep)
    if not entrypoint:
        selected = refuse_disallowed(selected, None, policy, fns)
        chosen = _entrypoints(selected, None)
    if jobs == 1 or len(selected) <= 1:
        # Read once for the run, and only when a case runs (as each fixtures() block would).
        runs = any(c.problem is None for c in selected)
        settings = RunSettings.resolve() if runs else None
        results = []
        for case in selected:
            result = _run_one(case, chosen[case.id], strict, fns, live, settings)
            results.append(result)
            if progress is not None:
                progress(result)
        return results
    return _run_parallel(selected, chosen, (strict, tuple(live)), jobs, progress, initializer)


# A worker process keeps the entrypoints it has imported for the cases that follow.
_worker_fns: dict[str, Callable[..., Any]] = {}


def _worker_init(initializer: Callable[[], None] | None) -> None:
    import signal

    # Ctrl-C reaches the whole process group; the parent decides when its workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer()


def _stop_workers(pool: Any) -> None:
    """End every worker of ``pool`` now: terminate, then kill whatever is still alive."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.terminate()
    deadline = time.monotonic() + 0.5
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(0.5)


def _worker_chunk(
    items: list[tuple[dict[str, Any], str | None]], how: tuple[bool, tuple[str, ...]]
) -> list[dict[str, Any]]:
    strict, live = how
    settings = RunSettings.resolve()
    out = []
    for data, ep in items:
        case = ReplayCase.from_dict(data)
        try:
            result = _run_one(case, ep, strict, _worker_fns, live, settings)
        except EntrypointError as exc:
            result = CaseResult(
                case.id, case.version, case.name, ERRORED, [str(exc)], entrypoint=ep
            )
        out.append(result.to_dict())
    return out


def _run_parallel(
    cases: list[ReplayCase],
    chosen: dict[str, str | None],
    how: tuple[bool, tuple[str, ...]],  # strict, and the live patterns
    jobs: int,
    progress: ProgressCallback | None,
    initializer: Callable[[], None] | None,
) -> list[CaseResult]:
    import concurrent.futures  # here, not at the top: only -j N needs the process machinery
    import multiprocessing

    jobs = min(jobs, len(cases))
    # Several cases per task keep the inter-process traffic small; enough tasks keep workers busy.
    size = max(1, min(64, math.ceil(len(cases) / (jobs * 4))))
    chunks = [list(range(i, min(i + size, len(cases)))) for i in range(0, len(cases), size)]
    results: list[CaseResult | None] = [None] * len(cases)
    ctx = multiprocessing.get_context("spawn")
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=jobs, mp_context=ctx, initializer=_worker_init, initargs=(initializer,)
    )
    futures: dict[concurrent.futures.Future[Any], list[int]] = {}
    taken: set[concurrent.futures.Future[Any]] = set()
    try:
        futures = {
            pool.submit(
                _worker_chunk,
                [(cases[i].to_dict(), chosen[cases[i].id]) for i in chunk],
                how,
            ): chunk
            for chunk in chunks
        }
        for future in concurrent.futures.as_completed(futures):
            taken.add(future)
            chunk = futures[future]
            try:
                done = [CaseResult.from_dict(d) for d in future.result()]
            except Exception as exc:  # the worker died (or its result could not travel back)
                reason = f"the worker process running this case failed: {type(exc).__name__}: {exc}"
                done = [
                    CaseResult(
                        cases[i].id,
                        cases[i].version,
                        cases[i].name,
                        ERRORED,
                        [reason],
                        entrypoint=chosen[cases[i].id],
                    )
                    for i in chunk
                ]
            for i, result in zip(chunk, done, strict=True):
                results[i] = result
                if progress is not None:
                    progress(result)
    except BaseException:  # interrupted: no worker may outlive the run, nor keep it waiting
        # A chunk a worker finished just before the signal may still be on its way back: take
        # what arrives in a moment, so a finished case is reported as finished, not as not run.
        try:
            pending = [f for f in futures if f not in taken]
            if pending and progress is not None:
                concurrent.futures.wait(pending, timeout=0.25)
                for future in pending:
                    if future.done() and not future.cancelled() and future.exception() is None:
                        for d in future.result():
                            progress(CaseResult.from_dict(d))
        finally:
            _stop_workers(pool)
        raise
    pool.shutdown(wait=True)
    return [r for r in results if r is not None]
