"""``tracely scenarios run|list|new``: multi-turn checks of a live agent service, any language."""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracely_sdk.cli._replay import add_report_options, keep_run, write_reports
from tracely_sdk.cli._traces import positive_int
from tracely_sdk.errors import ConfigError

if TYPE_CHECKING:
    from tracely_sdk.cli import Context
    from tracely_sdk.scenarios import Scenario

__all__ = ["register"]

DEFAULT_DIR = "scenarios"

RUN_DESCRIPTION = """\
Send each scenario's turns, in order, to the live agent service and check every reply; trace
checks read the trace the service exported for each turn (each turn carries a W3C traceparent)
from the store: --store / TRACELY_STORE, usually the tracely server the service exports to.

Verdicts: PASS (every check held), FAIL (a check did not: which turn and check, what was
expected, what came back), INCOMPLETE (trace checks could not be evaluated: no store, or the
trace did not arrive in time; never a pass), ERRORED (the service could not be reached, did
not answer in full within the turn's timeout_s, answered with an HTTP error, or redirected to
an origin the scenario does not allow).
"""

RUN_EPILOG = """\
exit status: 0 every scenario passed, 1 any did not, 2 usage or configuration error (a bad
scenario file, or no scenario selected unless --allow-empty).
"""


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    group = commands.add_parser(
        "scenarios",
        parents=[common],
        help="multi-turn checks of a live agent service",
        description="Scenarios: gate multi-turn behaviour of a live agent service, in any "
        "language, on its replies and on the trace it exports.",
    )
    sub = group.add_subparsers(dest="scenarios_command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser(
        "run",
        parents=[common],
        help="run scenarios against a live service (a CI gate)",
        description=RUN_DESCRIPTION,
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="DIR|FILE",
        help=f"scenario files, or directories searched for *.yaml/*.yml/*.json "
        f"(default: ./{DEFAULT_DIR})",
    )
    p.add_argument("--target", metavar="URL", help="the service's base URL (overrides the files')")
    p.add_argument(
        "--tag",
        dest="tags",
        action="append",
        default=[],
        metavar="TAG",
        help="run the scenarios with this tag (repeatable: any of them)",
    )
    p.add_argument("-j", "--jobs", type=positive_int, default=1, metavar="N", help="N at a time")
    p.add_argument(
        "--repeat",
        type=positive_int,
        metavar="N",
        help="run each scenario N times; it passes when its pass_threshold share of runs pass",
    )
    p.add_argument(
        "--trace-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for a turn's trace to reach the store (default 30)",
    )
    p.add_argument(
        "--no-trace-checks",
        action="store_true",
        help="skip trace checks (reported as not evaluated, never as passed)",
    )
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="exit 0 when no scenario is selected (default: exit 2)",
    )
    add_report_options(p, "every turn, its reply, checks and calls")
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("list", parents=[common], help="list scenarios and their turns")
    p.add_argument("paths", nargs="*", metavar="DIR|FILE")
    p.add_argument("--tag", dest="tags", action="append", default=[], metavar="TAG")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser(
        "new",
        parents=[common],
        help="write a scenario from recorded traces of a conversation",
        description="Write a scenario whose turns are the user messages of recorded traces "
        "(one trace per turn, in the order given, or every trace of a conversation) and whose "
        "checks are a starting point: the "
        "tools each turn called, with their args, and the reply's key facts as `contains`. "
        "Edit it before committing it.",
    )
    p.add_argument(
        "--from-trace",
        dest="trace_ids",
        action="append",
        default=[],
        metavar="TRACE_ID",
        help="a recorded trace of one turn (repeat for each turn of the conversation)",
    )
    p.add_argument(
        "--conversation",
        metavar="ID",
        help="every recorded turn of this conversation (the traces sharing "
        "gen_ai.conversation.id or session.id), in order",
    )
    p.add_argument("--name", help="the scenario's name (default: from the first message)")
    p.add_argument("--target", metavar="URL", help="the service's base URL, written to the file")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    p.set_defaults(handler=cmd_new)


def _select(paths: Sequence[str], tags: Sequence[str]) -> tuple[list[Scenario], int, list[str]]:
    from tracely_sdk.scenarios import load_scenarios

    looked = list(paths) or [DEFAULT_DIR]
    if not paths and not Path(DEFAULT_DIR).is_dir():
        raise ConfigError(
            f"no scenarios: ./{DEFAULT_DIR} does not exist; give scenario files or directories "
            "(tracely scenarios run DIR|FILE ...)"
        )
    everything = load_scenarios(looked)
    chosen = [s for s in everything if not tags or set(tags) & set(s.tags)]
    return chosen, len(everything), looked


def _store_url(ctx: Context) -> str | None:
    """The store named on purpose (``--store`` / ``TRACELY_STORE`` / ``[tool.tracely] store``):
    the service's traces and the kept runs live there. The implicit local default is not it: a
    service runs elsewhere."""
    from tracely_sdk._config import resolve

    return resolve("store", ctx.store_url) or None


def _trace_source(ctx: Context, timeout: float) -> Any:
    from tracely_sdk.scenarios import TraceSource
    from tracely_sdk.store import redact_url

    url = _store_url(ctx)
    if not url:
        return None
    if timeout <= 0:
        raise ConfigError(f"--trace-timeout must be more than 0 seconds, got {timeout:g}")
    return TraceSource(ctx.store(create=False), timeout=timeout, describe=redact_url(url))


def cmd_run(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk.scenarios import run_scenarios

    scenarios, total, looked = _select(args.paths, args.tags)
    out = ctx.out
    if not scenarios:
        what = f"{total} scenario(s) in {', '.join(looked)}"
        if args.tags:
            what += f", none tagged {' or '.join(args.tags)}"
        if args.allow_empty:
            out.note(f"no scenarios to run ({what}); --allow-empty")
            return 0
        raise ConfigError(
            f"no scenarios to run: {what}; check the paths and --tag, or pass --allow-empty"
        )
    targetless = [s.id for s in scenarios if args.target is None and s.target.url is None]
    if targetless:
        raise ConfigError(
            f"no target URL for {', '.join(targetless)}: give --target URL or `target.url`"
        )
    traces = None if args.no_trace_checks else _trace_source(ctx, args.trace_timeout)
    started_at = time.time_ns()
    started = time.perf_counter()
    with out.progress(len(scenarios), label="running") as advance:
        results = run_scenarios(
            scenarios,
            target_url=args.target,
            traces=traces,
            check_traces=not args.no_trace_checks,
            repeat=args.repeat,
            jobs=args.jobs,
            progress=advance,
        )
    elapsed = time.perf_counter() - started
    out.verdicts(results, elapsed)
    write_reports(args, ctx, results, elapsed, source=args.target)
    if _store_url(ctx):
        keep_run(ctx, results, started_at=started_at, elapsed=elapsed, mode="scenarios")
    else:
        out.note("run not kept: no store configured (--store or TRACELY_STORE)")
    return 0 if all(r.ok for r in results) else 1


def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    scenarios, _, _ = _select(args.paths, args.tags)
    rows = [[s.id, s.name, ",".join(s.tags), str(len(s.turns)), s.source or ""] for s in scenarios]
    ctx.out.table(["ID", "NAME", "TAGS", "TURNS", "FILE"], rows)
    return 0


# -- from a recording to a scenario --------------------------------------------------------

# Facts worth checking in a reply: numbers with their unit, and capitalised words that do not
# start a sentence (names of places, people, products).
_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)?\s?(?:°[CF]|%|[A-Za-z]{1,3}\b)?")
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]{2,}\b")


def key_facts(reply: str, limit: int = 4) -> list[str]:
    """The reply's numbers and names, as a starting point for `contains` checks."""
    facts: list[str] = []
    for match in [*_NUMBER.finditer(reply), *_NAME.finditer(reply)]:
        fact = match.group(0).strip()
        if fact and fact not in facts:
            facts.append(fact)
    return facts[:limit]


def _user_message(recording: Any, calls: Any) -> str:
    """The user's message of a turn: an agent run's input messages (the GenAI conventions'
    ``gen_ai.input.messages``, OpenInference's ``input.value``, ...), else the first LLM
    call's last user message, else the text tracely's agent was called with."""
    from tracely_otel.genai import user_text
    from tracely_sdk.scenarios import MISSING

    for kind in ("agent", "llm"):
        for call in calls.calls:
            if call.kind == kind and call.input is not MISSING:
                text = user_text(call.input)
                if text:
                    return text
    data = recording.input
    if isinstance(data, dict):
        args = data.get("args") or []
        kwargs = data.get("kwargs") or {}
        for value in [*args, *kwargs.values()]:
            if isinstance(value, str) and value.strip():
                return value
    if isinstance(data, str) and data.strip():
        return data
    raise ConfigError(
        f"trace {recording.trace_id}: no user message in it: no agent span's input messages, "
        "no LLM call's input and no text input of tracely's agent were recorded (record the "
        "turn's messages: gen_ai.input.messages on the invoke_agent span, or turn on the "
        "instrumentor's content capture)"
    )


def _turn_of(recording: Any) -> dict[str, Any]:
    from tracely_sdk.scenarios import TraceCalls

    calls = TraceCalls.of(recording.bundle, recording.status)
    turn: dict[str, Any] = {"user": _user_message(recording, calls)}
    reply = recording.output
    if isinstance(reply, str):
        facts = key_facts(reply)
        if facts:
            turn["expect"] = [{"contains": facts}]
    trace: list[dict[str, Any]] = []
    for call in calls.tools:
        check: dict[str, Any] = {"called": call.name}
        if isinstance(call.args, dict) and call.args:
            check["args"] = call.args
        if check not in trace:
            trace.append(check)
    if calls.llm:
        trace.append({"max_llm_calls": len(calls.llm)})
    trace.append({"no_errors": True})
    turn["trace"] = trace
    return turn


def _conversation(store: Any, conversation: str, scan: int = 1000) -> list[Any]:
    """The recorded turns of ``conversation`` (``gen_ai.conversation.id`` / ``session.id``),
    oldest first, among the ``scan`` most recent recordings."""
    found: list[Any] = []
    page = 100
    for offset in range(0, scan, page):
        batch = store.list_recordings(limit=page, offset=offset)
        turns = [
            r for r in batch if (r.bundle.get("trace") or {}).get("conversation") == conversation
        ]
        found.extend(turns)
        if len(batch) < page or (found and not turns):
            break  # a conversation's turns are recorded together: past them, none is left
    if not found:
        raise ConfigError(
            f"no recorded trace of conversation {conversation!r} among the {scan} most recent "
            "recordings (its spans carry gen_ai.conversation.id or session.id?)"
        )
    return sorted(found, key=lambda r: r.started_at)


def cmd_new(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk.scenarios import TraceCalls, scenario_from_data, slug, yaml_module

    yaml = yaml_module()

    store = ctx.store(create=False)
    if args.conversation:
        if args.trace_ids:
            raise ConfigError("give --from-trace or --conversation, not both")
        recordings = _conversation(store, args.conversation)
    elif args.trace_ids:
        recordings = [store.get_recording(t) for t in args.trace_ids]
    else:
        raise ConfigError("give the turns' traces (--from-trace ID ...) or --conversation ID")
    turns = [_turn_of(r) for r in recordings]
    sources = sorted(
        {c.by for r in recordings for c in TraceCalls.of(r.bundle).calls if c.kind != "agent"}
    )
    name = args.name or turns[0]["user"][:60]
    data: dict[str, Any] = {
        "id": slug(name),
        "name": name,
        "tags": ["from-trace"],
        "target": {"shape": "message"},
    }
    if args.target:
        data["target"]["url"] = args.target.rstrip("/")
    if sources:
        data["span_format"] = sources  # what the service was seen to trace its calls with
    data["turns"] = turns
    # What we write must load: the same validation as `run`.
    scenario_from_data(data, source="<new scenario>", default_id=slug(name))
    traces = ", ".join(r.trace_id for r in recordings)
    header = (
        f"# Written by `tracely scenarios new` from trace(s) {traces}.\n"
        "# The checks are a starting point: keep the facts that matter, drop the rest.\n"
    )
    text = header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    if args.output:
        path = Path(args.output)
        if path.exists():
            raise ConfigError(f"{path} exists; choose another -o FILE (nothing was written)")
        path.write_text(text, encoding="utf-8")
        ctx.out.note(f"wrote scenario {slug(name)!r} to {path} ({len(turns)} turn(s))")
    else:
        sys.stdout.write(text)
    return 0
