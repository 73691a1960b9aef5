"""``tracely traces list|show``: what was recorded, newest first, and the calls of one trace."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import orjson

from tracely_sdk.cli._output import rfc3339
from tracely_sdk.errors import NotFound

if TYPE_CHECKING:
    from tracely_sdk.cli import Context

__all__ = [
    "add_trace_filters",
    "calls_of",
    "format_input",
    "format_time",
    "register",
    "select_recordings",
]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    traces = commands.add_parser(
        "traces",
        parents=[common],
        help="list and show recorded traces",
        description="Recorded traces: every live run that tracely.init() recorded into the store.",
    )
    sub = traces.add_subparsers(dest="traces_command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser(
        "list",
        parents=[common],
        help="recorded traces, newest first",
        description="Recorded traces, newest first.",
    )
    add_trace_filters(p, limit=20)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser(
        "show",
        parents=[common],
        help="the calls of one trace, in order",
        description="One recorded trace: its agent input and output and its tool and LLM calls in order.",
    )
    p.add_argument("trace_id", metavar="TRACE_ID")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_show)

    from tracely_sdk.cli._import import add_import_command

    add_import_command(sub, common)


# -- choosing traces, shared with `cases promote` -------------------------------------------


def add_trace_filters(p: argparse.ArgumentParser, *, limit: int | None) -> None:
    """``--service``, ``--agent``, ``--since`` and ``--limit`` (default ``limit``; None: all)."""
    p.add_argument("--service", help="only traces of this service")
    p.add_argument("--agent", help="only traces of this agent")
    p.add_argument(
        "--since",
        type=since_ns,
        metavar="WHEN",
        help="only traces started at or after WHEN: a date or time (2026-12-01, "
        "2026-12-01T08:00:00Z; UTC unless it says) or a time ago (30m, 2h, 7d)",
    )
    p.add_argument(
        "--limit",
        type=positive_int,
        default=limit,
        metavar="N",
        help=f"at most N, the newest (default {limit})" if limit else "at most N, the newest",
    )


_AGO = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def since_ns(text: str) -> int:
    """``--since``: a time ago (``30m``, ``2h``, ``7d``) or an ISO 8601 date or time, in Unix ns."""
    value = text.strip()
    if len(value) > 1 and value[-1] in _AGO and value[:-1].isdigit():
        seconds = int(value[:-1]) * _AGO[value[-1]]
        return int((datetime.now(timezone.utc).timestamp() - seconds) * 1e9)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a date or time (2026-12-01, 2026-12-01T08:00:00Z) nor a time "
            "ago (30m, 2h, 7d)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1e9)


def select_recordings(
    store: Any,
    args: argparse.Namespace,
    *,
    limit: int | None,
    keep: Callable[[Any], bool] = lambda recording: True,
) -> list[Any]:
    """The newest recordings that ``args``' filters select and ``keep`` accepts, at most
    ``limit`` (None: every one)."""
    since = getattr(args, "since", None)
    chosen: list[Any] = []
    offset = 0
    while limit is None or len(chosen) < limit:
        size = _PAGE if limit is None else min(_PAGE, limit - len(chosen))
        page = store.list_recordings(
            limit=size, offset=offset, service=args.service, agent=args.agent
        )
        for recording in page:
            if since is not None and (recording.started_at or 0) < since:
                return chosen  # newest first: every later one started earlier still
            if keep(recording):
                chosen.append(recording)
                if limit is not None and len(chosen) == limit:
                    break
        if len(page) < size:
            break
        offset += len(page)
    return chosen


_PAGE = 200


# -- formatting shared with the cases commands ----------------------------------------------


def format_time(ns: int | None) -> str:
    """Unix nanoseconds as ``2024-06-10T08:00:00Z`` (``-`` when unknown)."""
    if not ns:
        return "-"
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def compact(value: Any) -> str:
    """``value`` as one line of JSON."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()


def format_input(value: Any) -> str:
    """A recorded agent input ``{"args": [...], "kwargs": {...}}`` as call arguments."""
    if isinstance(value, Mapping) and set(value) <= {"args", "kwargs"}:
        args = value.get("args") or []
        kwargs = value.get("kwargs") or {}
        if isinstance(args, list) and isinstance(kwargs, Mapping):
            parts = [compact(a) for a in args] + [f"{k}={compact(v)}" for k, v in kwargs.items()]
            return ", ".join(parts)
    return "-" if value is None else compact(value)


def calls_of(bundle: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every recorded call of a bundle, in the trace's order of calls."""
    calls: list[tuple[int, int, dict[str, Any]]] = []
    order = 0
    for section, kind in (("tools", "tool"), ("llm", "llm")):
        entries_by_name = bundle.get(section)
        if not isinstance(entries_by_name, Mapping):
            continue
        for name, entries in entries_by_name.items():
            for entry in entries if isinstance(entries, list) else ():
                if not isinstance(entry, Mapping):
                    continue
                seq = entry.get("seq")
                call: dict[str, Any] = {
                    "seq": seq,
                    "label": f"{section}:{name}",
                    "kind": kind,
                    "name": name,
                }
                call["args" if kind == "tool" else "input"] = entry.get(
                    "args" if kind == "tool" else "input"
                )
                call["output"] = entry.get("output")
                call["error"] = entry.get("error")
                if kind == "llm":
                    call["usage"] = entry.get("usage")
                calls.append((seq if isinstance(seq, int) else 1 << 62, order, call))
                order += 1
    return [c for _, _, c in sorted(calls, key=lambda t: (t[0], t[1]))]


def call_count(bundle: Mapping[str, Any]) -> int:
    total = 0
    for section in ("tools", "llm"):
        entries_by_name = bundle.get(section)
        if isinstance(entries_by_name, Mapping):
            total += sum(len(v) for v in entries_by_name.values() if isinstance(v, list))
    return total


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, with an ellipsis when cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


# -- commands ------------------------------------------------------------------------------


def _summary(rec: Any) -> dict[str, Any]:
    return {
        "trace_id": rec.trace_id,
        "service": rec.service,
        "agent_name": rec.agent_name,
        "started_at": rfc3339(rec.started_at),
        "status": rec.status,
        "input": rec.input,
        "output": rec.output,
        "call_count": call_count(rec.bundle),
        "replay_mode": rec.replay_mode,
    }


def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    recordings = select_recordings(ctx.store(create=False), args, limit=args.limit)
    if args.json:
        ctx.out.document("tracely.traces.list/1", {"traces": [_summary(r) for r in recordings]})
        return 0
    if not recordings:
        ctx.out.note("no traces recorded yet: run your agent after tracely.init()")
        return 0
    rows = [
        [
            r.trace_id,
            format_time(r.started_at),
            r.agent_name or "-",
            r.status + (f" ({r.replay_mode} replay)" if r.replay_mode else ""),
            str(call_count(r.bundle)),
            shorten(format_input(r.input), 60),
        ]
        for r in recordings
    ]
    ctx.out.table(["TRACE_ID", "STARTED", "AGENT", "STATUS", "CALLS", "INPUT"], rows, shrink=5)
    return 0


def _replay_trace(args: argparse.Namespace, ctx: Context) -> int | None:
    """When ``args.trace_id`` is the trace of a case in a kept replay run, say where it lives."""
    trace_id = args.trace_id.lower()
    runs = ctx.store(create=False).list_runs(limit=1, trace_id=trace_id)
    if not runs:
        return None
    run = ctx.store(create=False).get_run(runs[0].id)
    case_id = run.trace_ids().get(trace_id)
    if args.json:
        ctx.out.document(
            "tracely.traces.show/1",
            {
                "kind": "replay",
                "trace_id": trace_id,
                "replay": {
                    "run_id": run.id,
                    "case_id": case_id,
                    "started_at": rfc3339(run.started_at),
                    "otlp_endpoint": run.otlp_endpoint,
                },
            },
        )
        return 0
    where = (
        f"its spans went to the OTLP backend at {run.otlp_endpoint} "
        "(OTEL_EXPORTER_OTLP_ENDPOINT of the replay run): look it up there"
        if run.otlp_endpoint
        else "no OTLP backend was configured for that run (OTEL_EXPORTER_OTLP_ENDPOINT was "
        "not set), so its spans were not kept anywhere"
    )
    ctx.out.line(
        f"trace {trace_id} is a replay trace of case {case_id} in run {run.id} "
        f"(tracely runs show {run.id}), not a recording: replay traces are not stored; {where}"
    )
    return 0


def cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    try:
        rec = ctx.store(create=False).get_recording(args.trace_id)
    except NotFound:
        shown = _replay_trace(args, ctx)
        if shown is None:
            raise
        return shown
    bundle = rec.bundle
    calls = calls_of(bundle)
    incomplete = list(bundle.get("incomplete") or [])
    if args.json:
        data = {"kind": "recording", **_summary(rec), "calls": calls, "incomplete": incomplete}
        ctx.out.document("tracely.traces.show/1", data)
        return 0
    out = ctx.out
    pairs = [
        ("trace", rec.trace_id),
        ("service", rec.service),
        ("agent", rec.agent_name or "-"),
        ("started", format_time(rec.started_at)),
        ("status", rec.status),
        ("input", format_input(rec.input)),
        ("output", compact(rec.output) if rec.output is not None else "-"),
    ]
    agent = bundle.get("agent")
    if isinstance(agent, Mapping) and isinstance(agent.get("error"), Mapping):
        err = agent["error"]
        pairs.append(("error", f"{err.get('type')}: {err.get('message')}"))
    if rec.replay_mode:
        pairs.append(("replay", f"made by a {rec.replay_mode} replay run (not promotable)"))
    out.fields(pairs)
    out.line("")
    rows = []
    for call in calls:
        sent = call.get("args") if call["kind"] == "tool" else call.get("input")
        if call.get("error") is not None:
            err = call["error"]
            result = f"error {err.get('type')}: {err.get('message')}"
        else:
            result = compact(call.get("output"))
        rows.append(
            [
                "" if call["seq"] is None else str(call["seq"]),
                call["label"],
                shorten("-" if sent is None else compact(sent), 50),
                result,
            ]
        )
    if rows:
        out.table(["SEQ", "CALL", "ARGS/INPUT", "RESULT"], rows, shrink=3)
    else:
        out.line("no tool or LLM calls recorded")
    for item in incomplete:
        out.line(f"not replayable: {item.get('label')}: {item.get('reason')}")
    return 0
