"""``tracely runs list|show``: the results of past ``tracely replay`` runs, kept in the store."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tracely_sdk.cli._traces import format_time, positive_int

if TYPE_CHECKING:
    from tracely_sdk.cli import Context

__all__ = ["register"]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    runs = commands.add_parser(
        "runs",
        parents=[common],
        help="list and show past replay runs",
        description="Replay runs: the results `tracely replay` kept in the store, per case.",
    )
    sub = runs.add_subparsers(dest="runs_command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser(
        "list",
        parents=[common],
        help="replay runs, newest first",
        description="Replay runs, newest first.",
    )
    p.add_argument(
        "--limit", type=positive_int, default=20, metavar="N", help="at most N (default 20)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser(
        "show",
        parents=[common],
        help="one run, case by case",
        description="One replay run: each case's verdict, reasons, differences, replay trace "
        "id, duration, and the tracely and agent versions.",
    )
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_show)


def _cases(total: Any) -> str:
    return f"{total} case" if total == 1 else f"{total} cases"


def _counts(summary: Mapping[str, Any]) -> str:
    parts = [
        f"{summary[key]} {key}"
        for key in ("passed", "failed", "incomplete", "errored", "lenient")
        if summary.get(key)
    ]
    return ", ".join(parts) or "nothing run"


def _run_json(run: Any, *, cases: bool) -> dict[str, Any]:
    """A run as the ``--json`` documents write it: ``run_id``, an RFC 3339 ``started_at``."""
    from tracely_sdk.cli._output import rfc3339

    data = run.to_dict() if cases else run.summary_dict()
    return {"run_id": data.pop("id"), **data, "started_at": rfc3339(run.started_at)}


def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    runs = ctx.store().list_runs(limit=args.limit)
    if args.json:
        ctx.out.document("tracely.runs.list/1", {"runs": [_run_json(r, cases=False) for r in runs]})
        return 0
    if not runs:
        ctx.out.note("no replay runs kept yet: `tracely replay` keeps each run in the store")
        return 0
    rows = [
        [
            r.id,
            format_time(r.started_at),
            r.mode,
            "ok" if r.ok else "failed",
            str(r.summary.get("total", "")),
            _counts(r.summary),
        ]
        for r in runs
    ]
    ctx.out.table(["RUN_ID", "STARTED", "MODE", "GATE", "CASES", "VERDICTS"], rows, shrink=5)
    return 0


def cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk._reports import difference_lines

    run = ctx.store().get_run(args.run_id)
    if args.json:
        ctx.out.document("tracely.runs.show/1", _run_json(run, cases=True))
        return 0
    out = ctx.out
    out.fields(
        [
            ("run", run.id),
            ("started", format_time(run.started_at)),
            ("mode", run.mode),
            ("gate", "ok" if run.ok else "failed"),
            ("verdicts", f"{_cases(run.summary.get('total', 0))}: {_counts(run.summary)}"),
            ("duration", f"{run.duration_s:.2f}s"),
            ("cases from", run.source or "-"),
            ("spans sent to", run.otlp_endpoint or "no OTLP endpoint"),
            ("tracely", run.tracely_version),
        ]
    )
    for case in run.cases:
        version = f" v{case['version']}" if case.get("version") is not None else ""
        out.line("")
        out.line(f"{case.get('verdict')} {case['case_id']}{version} ({case.get('name') or '-'})")
        for reason in case.get("reasons") or ():
            out.line(f"  - {reason}")
        for line in difference_lines(case.get("diff"), case.get("divergences") or ()):
            out.line("    " + line)
        traceback = case.get("traceback")
        for line in traceback.rstrip().splitlines() if isinstance(traceback, str) else ():
            out.line(("    " + line).rstrip())
        out.line(f"  trace {case.get('trace_id') or '-'}")
        duration = case.get("duration_s")
        out.line(f"  took {duration:.3f}s" if isinstance(duration, (int, float)) else "  took -")
        out.line(
            f"  tracely {case.get('tracely_version') or '-'}, "
            f"agent {case.get('agent_version') or 'version unknown'}"
        )
    return 0
