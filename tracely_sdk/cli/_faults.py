"""``tracely replay --faults``: the option, the robustness tables, and the gate on them."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tracely_sdk.errors import ConfigError

if TYPE_CHECKING:
    from tracely_sdk._faults import FaultConfig
    from tracely_sdk._runner import CaseResult
    from tracely_sdk.cli._output import Output

__all__ = ["add_fault_option", "fault_config", "gate", "show"]

HELP = (
    "besides each case, replay it once per (recorded call, fault kind) with that call "
    "failing: KINDS is error, timeout, empty for tool calls, rate_limit, server_error, "
    "timeout, stream_cut, refusal for model calls (comma-separated; default: "
    "[tool.tracely.faults] kinds, else all). A model fault is served at the SDK's HTTP "
    "client, so the SDK raises its own error. Each derived run is HANDLED, CRASHED, LOOPED, "
    "INCOMPLETE or UNREACHED, "
    "shown in a table per case and in the reports. Derived verdicts only fail the job as "
    "[tool.tracely.faults] fail_on says (default: reported, never failing)"
)

_STYLES = {
    "HANDLED": "bold green",
    "CRASHED": "bold red",
    "LOOPED": "bold magenta",
    "INCOMPLETE": "bold yellow",
    "UNREACHED": "dim",
}


def add_fault_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--faults", nargs="?", const="", default=None, metavar="KINDS", help=HELP)


def fault_config(args: argparse.Namespace) -> FaultConfig | None:
    """The faults to derive (None without --faults); ConfigError for what cannot go with it."""
    if args.faults is None:
        return None
    import dataclasses

    from tracely_sdk import _config
    from tracely_sdk._faults import parse_kinds

    if args.lenient or args.live:
        raise ConfigError(
            "--faults derives runs under strict replay: it cannot be combined with "
            f"{'--lenient' if args.lenient else '--live'}"
        )
    config: FaultConfig = _config.resolve("faults")
    if args.faults.strip():
        config = dataclasses.replace(config, kinds=parse_kinds(args.faults))
    return config


def show(out: Output, results: Sequence[CaseResult], *, failures_only: bool = False) -> None:
    """Each case's robustness table: its faulted calls / the fault kinds, with what followed;
    with ``failures_only``, only the tables with a derived run that was not HANDLED."""
    from tracely_sdk._reports import in_case_order
    from tracely_sdk._robustness import fault_table

    derived = skipped = 0
    counts: dict[str, int] = {}
    for result in in_case_order(results):
        if not result.faults:
            continue
        for row in result.faults:
            if row.get("verdict") == "SKIPPED":
                skipped += 1
            else:
                derived += 1
                counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
        if failures_only and all(
            row.get("verdict") in ("HANDLED", "SKIPPED") for row in result.faults
        ):
            continue
        headers, rows = fault_table(result.faults)
        styles: list[Any] = [lambda c: None] + [
            (lambda c: _STYLES.get(c.partition(":")[0])) for _ in headers[1:]
        ]
        out.line("")
        out.table(headers, rows, title=f"robustness of {result.case_id}", styles=styles)
    if derived:
        shown = ", ".join(f"{n} {v.lower()}" for v, n in sorted(counts.items()))
        out.line("")
        out.line(f"{derived} derived run{'s' if derived != 1 else ''}: {shown}")
    if skipped:
        out.line(
            f"— {skipped} pair(s) skipped: the call is recorded failing that way, its output "
            "has no empty value, or the fault does not apply to it (the JSON report says which)"
        )


def gate(out: Output, results: Sequence[CaseResult], config: FaultConfig) -> bool:
    """Whether the derived runs pass the gate ``config.fail_on`` sets; says which fail."""
    from tracely_sdk._robustness import gate_failures

    failed = gate_failures(results, config)
    if failed:
        out.error(
            f"{len(failed)} derived run(s) fail the gate ([tool.tracely.faults] fail_on = "
            f"{list(config.fail_on)}): " + "; ".join(failed[:10])
        )
    return not failed
