"""``tracely reports merge``: the JSON reports of a sharded replay run as one gate."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from tracely_sdk.cli._replay import add_failures_only_options, failures_only, write_reports

if TYPE_CHECKING:
    from tracely_sdk.cli import Context

__all__ = ["register"]

DESCRIPTION = """\
Merge the JSON reports of `tracely replay --shard K/N --json FILE` (one per shard) into one
run: the verdicts of every case, the summary, and the reports asked for (--junit, --json,
--html, and the Markdown step summary when $GITHUB_STEP_SUMMARY is set). Reports of shards
must be every shard of one run, each once; a case in two reports is refused.
"""

EPILOG = """\
exit status: 0 every merged case passed, 1 any case failed, was incomplete, errored or was not
run, 2 a file that is not a replay report, a shard missing or given twice, or no cases at all
(unless --allow-empty).
"""


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    from tracely_sdk.cli._replay import add_report_options

    reports = commands.add_parser(
        "reports",
        parents=[common],
        help="merge the JSON reports of replay shards",
        description="The report files of replay runs.",
    )
    sub = reports.add_subparsers(dest="reports_command", metavar="COMMAND")
    sub.required = True
    p = sub.add_parser(
        "merge",
        parents=[common],
        help="merge shards' JSON reports into one run, with its exit status",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("reports", metavar="REPORT", nargs="+", help="a JSON report of a shard")
    add_report_options(p, "every merged case, recording beside replay")
    add_failures_only_options(p)
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="exit 0 when the reports hold no case (by default that is an error: exit 2)",
    )
    p.set_defaults(handler=cmd_merge)


def cmd_merge(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk._reports import merge_reports
    from tracely_sdk.errors import ConfigError

    results, elapsed = merge_reports(args.reports)
    if not results:
        if not args.allow_empty:
            raise ConfigError(
                f"the {len(args.reports)} report(s) hold no cases: a gate that replays nothing "
                "is not a pass (pass --allow-empty if that is intended)"
            )
        ctx.out.note("no cases in the reports (--allow-empty)")
    else:
        ctx.out.verdicts(results, elapsed, failures_only=failures_only(args))
    write_reports(args, ctx, results, elapsed, source=None)
    return 0 if all(r.ok for r in results) else 1
