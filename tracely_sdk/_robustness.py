"""Running a case's robustness runs (``tracely replay --faults``) and gating on them.

The derivation and the verdicts are :mod:`tracely_sdk._faults`' pure functions; this module
runs each derived recording through the agent, in a strict ``fixtures()`` session of its own
(:func:`tracely_sdk._replay.replay_session`) and a fresh context, as the case itself runs.
Results are plain data (:func:`run_faults` fills ``CaseResult.faults``), so the terminal, the
JSON, JUnit and HTML reports, and a kept run all show the same table.
"""

from __future__ import annotations

import contextvars
import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracely_sdk import _faults
from tracely_sdk._faults import DerivedRun, FaultConfig
from tracely_sdk._matching import LLM
from tracely_sdk._replay import CallBudgetExceeded, RepeatUnanswered, load_bundle, replay_session
from tracely_sdk._runner import (
    CaseResult,
    ReplayCase,
    _await,
    _call_input,
    _exception_identity,
    _plain,
    agent_traceback,
    load_entrypoint,
)
from tracely_sdk.errors import BundleError

__all__ = ["derivation", "fault_table", "gate_failures", "kept_runs", "run_derived", "run_faults"]


def run_derived(
    case: ReplayCase, fn: Callable[..., Any], run: DerivedRun, config: FaultConfig
) -> dict[str, Any]:
    """Replay ``case`` through ``fn`` on the derived recording ``run``; its result as data."""
    row, _, _ = contextvars.Context().run(_run_derived, case, fn, run, config)
    return row


def derivation(
    bundle: Any, config: FaultConfig, errors: Mapping[str, Mapping[str, str]] | None = None
) -> _faults.Derivation:
    """The derived runs of a loaded recording under ``config``, model calls included."""
    from tracely_sdk.providers.http._faults import fault_entry

    return _faults.derive(
        bundle,
        config.kinds,
        errors=errors,
        error_type=config.error_type,
        model_fault=fault_entry,
    )


def _run_derived(
    case: ReplayCase, fn: Callable[..., Any], run: DerivedRun, config: FaultConfig
) -> tuple[dict[str, Any], _faults.RetryRule, list[tuple[str, str, int]]]:
    """The derived run's result, its retry rule (what it answered) and the recorded calls the
    run never made (section, name, index)."""
    started = time.perf_counter()
    fault = run.fault
    budget = config.budget(run.recorded_calls)
    call = _call_input(case.input)
    args, kwargs = call if call is not None else ([], {})
    raised: BaseException | None = None
    output: Any = None
    rule = _faults.RetryRule(run, config.retry)
    with replay_session(
        run.bundle,
        True,
        case_id=case.id,
        case_version=case.version,
        max_calls=budget,
        retry=rule,
    ) as session:
        try:
            output = fn(*args, **kwargs)
            if inspect.isawaitable(output):
                output = _await(output)
        except CallBudgetExceeded:
            pass  # session.stopped says so
        except RepeatUnanswered:
            pass  # the report's errors say so
        except (Exception, SystemExit) as exc:  # the agent's failure is the verdict
            raised = exc
    report = session.report
    error = None
    if raised is not None:
        kind, message = _exception_identity(raised)
        error = {"type": kind, "message": message}
    timeline: list[dict[str, Any]] = [dict(step) for step in report.timeline]
    reached = any(
        s.get("label") == fault.label and s.get("seq") == fault.seq and s.get("call")
        for s in timeline
    )
    verdict, reasons = _faults.decide(
        reached=reached,
        stopped=session.stopped,
        misses=[str(e) for e in report.errors],
        raised=error,
    )
    plain_output = None if raised is not None or session.stopped else _plain(output)
    return (
        {
            "call": fault.call,
            "label": fault.label,
            "seq": fault.seq,
            "args": fault.args,
            "fault": fault.kind,
            "served": {k: run.served[k] for k in ("output", "error") if k in run.served},
            "verdict": verdict,
            "reasons": reasons,
            "next": _faults.what_next(
                timeline, fault, raised=error, output=plain_output, stopped=session.stopped
            ),
            "output": plain_output,
            "error": error,
            "traceback": agent_traceback(raised) if raised is not None else None,
            "calls": session.calls,
            "max_calls": budget,
            "retry": config.retry,
            # The calls in the order made, each with what answered it: the whole timeline of
            # every derived run would make the reports of a large suite heavy.
            "steps": [
                f"{s['outcome']} {s['label']}"
                for s in sorted(
                    (s for s in timeline if s.get("call")), key=lambda s: int(s["call"])
                )
            ],
            "duration_s": round(time.perf_counter() - started, 6),
        },
        rule,
        [(e.kind, e.name, e.index) for e in session.recording.unused()],
    )


def kept_runs(
    case: ReplayCase,
    fn: Callable[..., Any],
    config: FaultConfig,
    selectors: Sequence[tuple[str, str]] = (),
) -> list[tuple[dict[str, Any], Any]]:
    """The derived runs of ``case`` that ``selectors`` choose (all when empty), each as its
    result and, when HANDLED, the recording it is kept as (:func:`_faults.kept_bundle`; None
    for any other verdict: a case of it would not pass)."""
    derived = derivation(load_bundle(case.bundle), config)
    out: list[tuple[dict[str, Any], Any]] = []
    for run in derived.runs:
        fault = run.fault
        chosen = {"call": fault.call, "label": fault.label, "fault": fault.kind}
        if not _faults.selected(chosen, selectors):
            continue
        row, rule, unused = contextvars.Context().run(_run_derived, case, fn, run, config)
        kept = None
        if row["verdict"] == _faults.HANDLED:
            kept = _faults.kept_bundle(run, rule.answers, _answer_entry, unused)
        out.append((row, kept))
    return out


def _answer_entry(section: str, entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """A model call's answer, kept as an entry: its input as the layer that serves it (the
    HTTP client, for a retry the SDK makes itself) compares it."""
    if section != LLM:
        return entry
    from tracely_sdk.providers.http._faults import format_of, served_input

    codec = format_of(entry)
    return entry if codec is None else {**entry, "input": served_input(codec, entry)}


def run_faults(
    cases: Sequence[ReplayCase],
    results: Sequence[CaseResult],
    config: FaultConfig,
    *,
    suite: Sequence[ReplayCase] | None = None,
    entrypoint: str | None = None,
    progress: Callable[[CaseResult], None] | None = None,
) -> None:
    """Run the derived runs of every case that ran, and set each result's ``faults``.

    A case whose agent did not run (its recording or entrypoint refused: ``report`` is None)
    gets none. ``suite`` is every selected case (before sharding): where a tool's recorded
    error type is looked up, so a shard derives the same runs as a whole run.
    """
    by_id = {c.id: c for c in cases}
    catalogue = _faults.recorded_errors(c.bundle for c in (suite or cases))
    fns: dict[str, Callable[..., Any]] = {}
    for result in results:
        case = by_id.get(result.case_id)
        chosen = entrypoint or result.entrypoint
        if case is None or result.report is None or chosen is None:
            continue
        try:
            bundle = load_bundle(case.bundle)
        except BundleError:
            continue
        fn = fns.get(chosen)
        if fn is None:
            fn = fns[chosen] = load_entrypoint(chosen)
        derived = derivation(bundle, config, catalogue)
        rows = [run_derived(case, fn, run, config) for run in derived.runs]
        for row in rows:
            row["gates"] = config.gates(row["fault"], row["verdict"])
        result.faults = rows + [
            {
                "call": s.fault.call,
                "label": s.fault.label,
                "seq": s.fault.seq,
                "args": s.fault.args,
                "fault": s.fault.kind,
                "verdict": "SKIPPED",
                "reasons": [s.reason],
            }
            for s in derived.skipped
        ]
        if progress is not None:
            progress(result)


def gate_failures(results: Sequence[CaseResult], config: FaultConfig) -> list[str]:
    """``case: call / fault → VERDICT`` for each derived run that ``config.fail_on`` fails."""
    failed = []
    for result in results:
        for row in _faults.failing(result.faults or (), config):
            failed.append(f"{result.case_id}: {row['call']} / {row['fault']} → {row['verdict']}")
    return failed


def fault_table(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """A case's robustness table: one row per faulted call, a column per fault kind."""
    kinds = [k for k in _faults.KINDS if any(r.get("fault") == k for r in rows)]
    calls: dict[str, dict[str, Mapping[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (int(r.get("seq") or 0), str(r.get("call")))):
        calls.setdefault(str(row.get("call")), {})[str(row.get("fault"))] = row
    body = []
    for call, by_kind in calls.items():
        cells = [call]
        for kind in kinds:
            found = by_kind.get(kind)
            if found is None:
                cells.append("")
            elif found.get("verdict") == "SKIPPED":
                cells.append("—")
            else:
                cells.append(f"{found['verdict']}: {found.get('next', '')}")
        body.append(cells)
    return ["CALL", *(k.upper() for k in kinds)], body
