"""``tracely replay``: the CI gate. Every selected case, replayed through your code, one verdict each."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tracely_sdk.cli import _faults as fault_cli
from tracely_sdk.cli._traces import positive_int
from tracely_sdk.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from tracely_sdk._runner import CaseResult, ReplayCase, Shard
    from tracely_sdk.cli import Context

__all__ = [
    "add_failures_only_options",
    "add_report_options",
    "failures_only",
    "init_tracing",
    "keep_run",
    "register",
    "write_reports",
]

DESCRIPTION = """\
Replay regression cases through your own code under their recordings: every tool and LLM
call is served from the recording and never runs live. Spans go through the configured
OpenTelemetry pipeline (OTEL_* variables), stamped with the case id and version; with no
exporter configured they would reach nobody, so none is sampled. Replay traces are not
recorded into the store, but each run's results are (see `tracely runs`).

Verdicts: PASS (strict, every recorded call made, output equal to the expected output),
FAIL (output differs, recorded calls never made, or an input diverged), INCOMPLETE (the code
made a call the recording cannot answer, or tried a network connection strict replay refused:
only tracely's own endpoints and --allow-network hosts are reached), ERRORED (the agent raised,
or the case cannot be run: its recording cannot be loaded or its entrypoint is not allowed;
then the agent is not run), LENIENT (--lenient: never a recorded pass), NOT_RUN (interrupted
before it finished).
"""

EPILOG = """\
exit status: 0 every case passed (or ran lenient with nothing to report), 1 any case failed,
was incomplete or errored, 2 usage or configuration error, including a selection of no cases
(unless --allow-empty) and a store that does not exist; 130 / 143 when interrupted by SIGINT /
SIGTERM (the reports are written for the cases that finished, the rest NOT_RUN). With
--shard K/N, a shard that holds none of the selected cases exits 0 with an empty report;
`tracely reports merge` gates the shards' reports as one run. With --faults, derived runs
change the exit status only as [tool.tracely.faults] fail_on says (by default they are
reported and never fail the job).
A Markdown summary is appended to $GITHUB_STEP_SUMMARY when it is set (with a link to the
HTML report when --html-url says where it is published).

A case's own entrypoint is imported only if the project allows it: a module under the project
root, or one matching [tool.tracely] entrypoints / TRACELY_ENTRYPOINTS (e.g.
"examples.weather_agent:*"); --entrypoint is always allowed. Any other case is ERRORED and its
entrypoint is not imported.
"""


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "replay",
        parents=[common],
        help="replay regression cases through your code (the CI gate)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--entrypoint",
        metavar="MODULE:FUNCTION",
        help="the agent function to replay every case through (default: each case's own)",
    )
    p.add_argument(
        "--case",
        dest="case_ids",
        action="append",
        default=[],
        metavar="ID",
        help="replay this case (repeatable; default: every case)",
    )
    p.add_argument(
        "--tag",
        dest="tags",
        action="append",
        default=[],
        metavar="TAG",
        help="replay the cases with this tag (repeatable: any of them)",
    )
    p.add_argument(
        "--lenient",
        action="store_true",
        help="fall through to live calls on a miss; verdicts say LENIENT, never PASS",
    )
    p.add_argument(
        "--live",
        dest="live",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run the calls whose labels match PATTERN live ('tools:*', repeatable) and serve "
        "the rest; a live call whose outcome differs from the recorded one fails its case",
    )
    p.add_argument(
        "--allow-network",
        dest="allow_network",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="let strict replay connect to this host (repeatable; e.g. a database the tests "
        "start); replaces TRACELY_ALLOW_NETWORK and [tool.tracely] allow_network. Any other "
        "connection, loopback included, is refused and fails its case",
    )
    add_report_options(p, "each case's calls, recording beside replay")
    p.add_argument(
        "--cases",
        dest="cases_dir",
        metavar="DIR",
        help="read cases from DIR (as written by `tracely cases export`) instead of the store",
    )
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="exit 0 when no case is selected (by default that is an error: exit 2)",
    )
    p.add_argument(
        "--shard",
        type=_shard,
        metavar="K/N",
        help="replay only shard K of N (1-based): the selected cases whose id hashes to it, so "
        "N jobs replay the suite between them; merge their --json reports with "
        "`tracely reports merge`",
    )
    add_failures_only_options(p)
    fault_cli.add_fault_option(p)
    p.add_argument(
        "-j",
        "--jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="run cases in N worker processes (default 1)",
    )
    p.set_defaults(handler=cmd_replay)


def _shard(text: str) -> Shard:
    from tracely_sdk._runner import Shard

    try:
        return Shard.parse(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_failures_only_options(p: argparse.ArgumentParser) -> None:
    """--failures-only and --all: which cases the terminal lists (see :func:`failures_only`)."""
    shown = p.add_mutually_exclusive_group()
    shown.add_argument(
        "--failures-only",
        dest="failures_only",
        action="store_true",
        default=None,
        help="list only the cases that did not pass, alike failures once (the default when "
        "the CI environment variable is set)",
    )
    shown.add_argument(
        "--all",
        dest="failures_only",
        action="store_false",
        help="list every case, passed ones too (the default outside CI)",
    )


def failures_only(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to list only the failures: as --failures-only / --all say, else when in CI."""
    if args.failures_only is not None:
        return bool(args.failures_only)
    ci = (os.environ if environ is None else environ).get("CI", "").strip().lower()
    return ci not in ("", "0", "false", "no")


def init_tracing() -> None:
    """``tracely.init()`` for a replay run: spans go through the configured pipeline, no recording.

    With no exporter configured (:func:`tracely_otel.exporter_configured`) and no provider of
    the application's, the run's spans would reach nobody: the provider tracely builds then
    samples none (OpenTelemetry's ``ALWAYS_OFF``), so spans cost next to nothing while their
    trace and span ids still exist. The verdicts, reports and the kept run are built from the
    replay's own record either way. A module-level function so that worker processes
    (``-j N``) can run it too.
    """
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    import tracely_otel
    import tracely_sdk as tracely

    if tracely_otel.exporter_configured():
        tracely.init(record=False)
    else:  # an application's own provider keeps its sampler (init does not replace it)
        tracely.init(record=False, sampler=ALWAYS_OFF)


def _flush_tracing() -> None:
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    if callable(flush):
        with contextlib.suppress(Exception):
            flush()


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived during a replay run."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Interrupted` in the main thread while the block runs.

    SIGTERM's default would end the process at once, leaving worker processes behind and
    writing no report; raising lets the runner stop its workers and the reports be written.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupted(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    previous = {
        sig: signal.signal(sig, raise_interrupted) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _not_run(case: ReplayCase, why: str) -> CaseResult:
    from tracely_sdk._runner import NOT_RUN, CaseResult

    return CaseResult(
        case_id=case.id,
        version=case.version,
        name=case.name,
        verdict=NOT_RUN,
        reasons=[why],
        expected_output=case.expected_output,
        entrypoint=case.entrypoint,
    )


def _load(args: argparse.Namespace, ctx: Context) -> tuple[list[ReplayCase], str, int]:
    """The selected cases, where they came from, and how many cases exist there unfiltered."""
    from tracely_sdk._runner import load_case_dir, load_cases

    if args.cases_dir is not None:
        cases = load_cases(cases_dir=args.cases_dir, case_ids=args.case_ids, tags=args.tags)
        source = f"the case directory {args.cases_dir}"
        total = len(load_case_dir(args.cases_dir)) if not cases else len(cases)
        return cases, source, total
    from tracely_sdk.store import redact_url

    store = ctx.store(create=False)
    cases = load_cases(store=store, case_ids=args.case_ids, tags=args.tags)
    total = len(store.list_cases()) if not cases else len(cases)
    return cases, f"the store {redact_url(store.url)}", total


def _nothing_selected(args: argparse.Namespace, source: str, total: int) -> str:
    """What was looked at, and how to fix it, when no case was selected."""
    filters = [f"--tag {t}" for t in args.tags] + [f"--case {c}" for c in args.case_ids]
    if total == 0:
        fix = (
            "export cases into it with `tracely cases export DIR`"
            if args.cases_dir is not None
            else "promote a recording with `tracely cases promote TRACE_ID --name NAME`, or "
            "point --store / TRACELY_STORE (or --cases DIR) at where the cases are"
        )
        found = f"{source} holds no cases"
    else:
        fix = "check the filters for a typo (`tracely cases list` shows every case and its tags)"
        found = (
            f"{source} holds {total} case{'s' if total != 1 else ''}, none selected by "
            f"{' '.join(filters)}"
        )
    return (
        f"no cases to replay: {found}; {fix}. A gate that replays nothing is not a pass: "
        "pass --allow-empty if that is intended"
    )


def cmd_replay(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk._runner import run_cases
    from tracely_sdk.store import redact_url

    if args.cases_dir is not None and getattr(args, "store", None):
        raise ConfigError(
            "--store and --cases are alternatives: replay from a store or from a directory"
        )
    if args.allow_network:
        from tracely_sdk._network_guard import allow_in_process

        allow_in_process(args.allow_network, "--allow-network")
    faults = fault_cli.fault_config(args)
    cases, source, total = _load(args, ctx)
    selected = cases
    out = ctx.out
    if not cases and not args.allow_empty:
        raise ConfigError(_nothing_selected(args, source, total))
    shard_info = None
    if args.shard is not None:  # after the check: an empty shard of a suite is not an error
        shard_info = {"index": args.shard.index, "count": args.shard.count, "selected": len(cases)}
        cases = [c for c in cases if args.shard.holds(c.id)]
    if not args.lenient:
        from tracely_sdk._entrypoints import placeholder_api_keys

        placeholder_api_keys()
    init_tracing()
    started_at = time.time_ns()
    started = time.perf_counter()
    finished: dict[str, CaseResult] = {}
    interrupted: Interrupted | None = None
    try:
        with out.progress(len(cases)) as advance:

            def progress(result: CaseResult) -> None:
                finished[result.case_id] = result
                advance(result)

            try:
                with _interruptible():
                    results = run_cases(
                        cases,
                        args.entrypoint,
                        strict=not args.lenient,
                        jobs=args.jobs,
                        live=args.live,
                        progress=progress,
                        initializer=init_tracing,
                    )
                    if faults is not None:
                        from tracely_sdk._robustness import run_faults

                        run_faults(
                            cases, results, faults, suite=selected, entrypoint=args.entrypoint
                        )
            except Interrupted as exc:
                interrupted = exc
                why = f"tracely replay was interrupted by {exc} before this case finished"
                results = [finished.get(c.id) or _not_run(c, why) for c in cases]
    finally:
        _flush_tracing()
    elapsed = time.perf_counter() - started
    if results:
        out.verdicts(results, elapsed, failures_only=failures_only(args))
        if faults is not None:
            fault_cli.show(out, results, failures_only=failures_only(args))
    elif shard_info and shard_info["selected"]:
        out.note(
            f"shard {args.shard} holds none of the {shard_info['selected']} selected case(s): "
            "nothing to replay in this shard"
        )
    else:
        out.note(f"no cases to replay: {source} holds none selected (--allow-empty)")
    where = args.cases_dir if args.cases_dir is not None else redact_url(ctx.store().url)
    write_reports(args, ctx, results, elapsed, source=where, shard=shard_info)
    if results:
        _keep_run(args, ctx, results, started_at, elapsed)
    if interrupted is not None:
        out.error(
            f"interrupted by {interrupted}: {len(finished)} of {len(cases)} case(s) finished, "
            "the rest were not run"
        )
        return 128 + interrupted.signum
    faults_pass = faults is None or fault_cli.gate(out, results, faults)
    return 0 if all(r.ok for r in results) and faults_pass else 1


def add_report_options(p: argparse.ArgumentParser, html_shows: str) -> None:
    """The report files a gate command writes: --junit, --json, --html and --html-url."""
    p.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    p.add_argument("--json", dest="json_path", metavar="FILE", help="write a JSON report")
    p.add_argument(
        "--html",
        dest="html_path",
        metavar="FILE",
        help=f"write a self-contained HTML report: {html_shows}",
    )
    p.add_argument(
        "--html-url",
        metavar="URL",
        help="where the HTML report will be published; the step summary links to it",
    )


def write_reports(
    args: argparse.Namespace,
    ctx: Context,
    results: Any,
    elapsed: float,
    *,
    source: str | None,
    shard: Mapping[str, int] | None = None,
) -> None:
    """Write the reports ``add_report_options`` asked for, and the GitHub step summary.

    ``shard`` (``index``, ``count``, ``selected``: the cases selected before sharding) goes
    into the JSON report's summary, for ``tracely reports merge`` to check the shards by.
    """
    from tracely_sdk._reports import append_step_summary, write_html, write_json, write_junit

    if args.junit:
        write_junit(results, args.junit, elapsed)
    if args.json_path:
        write_json(results, args.json_path, elapsed, shard=shard)
    if args.html_path:
        write_html(results, args.html_path, elapsed, store=source)
    try:
        append_step_summary(results, elapsed=elapsed, html_url=args.html_url)
    except OSError as exc:
        ctx.out.note(f"could not append to $GITHUB_STEP_SUMMARY: {exc}")


def _keep_run(
    args: argparse.Namespace, ctx: Context, results: Any, started_at: int, elapsed: float
) -> None:
    """Save the run's results in the store, or say in one line why they were not kept.

    The verdicts are already decided: nothing here changes them or the exit status.
    """
    from tracely_sdk._reports import run_of

    out = ctx.out
    if args.cases_dir is not None:
        run = run_of(results, started_at=started_at, elapsed=elapsed, source=args.cases_dir)
        out.note(
            f"run {run.id} not kept: the cases came from {args.cases_dir}, not a store "
            "(replay from a store to keep runs for `tracely runs`)"
        )
        return
    keep_run(ctx, results, started_at=started_at, elapsed=elapsed)


def keep_run(
    ctx: Context, results: Any, *, started_at: int, elapsed: float, mode: str | None = None
) -> None:
    """Save a run's results in the context's store and say so, or say in one line why not."""
    from tracely_sdk._reports import run_of
    from tracely_sdk.store import redact_url

    store = ctx.store()
    where = redact_url(store.url)
    run = run_of(results, started_at=started_at, elapsed=elapsed, source=where, mode=mode)
    try:
        store.save_run(run)
    except Exception as exc:  # the gate's verdict stands whatever the store does
        reason = " ".join(str(exc).split()) if isinstance(exc, StoreError) else repr(exc)
        ctx.out.note(f"run {run.id} not kept: the store {where} refused it: {reason}")
        return
    ctx.out.note(f"run {run.id} kept in {where}: tracely runs show {run.id}")
