"""``tracely run -- CMD ...``: run a program traced and recorded, with no change to its code.

Like ``opentelemetry-instrument``: the command replaces this process with ``CMD`` and
``TRACELY_INSTRUMENT`` set (``auto`` unless ``--instrument`` or the environment says
otherwise), which the startup hook installed with tracely acts on in every Python process
of that interpreter. ``--store`` is passed on as ``TRACELY_STORE``.
"""

from __future__ import annotations

import argparse
import os
import shutil
from typing import Any

from tracely_sdk._config import SETTINGS, instrument_values
from tracely_sdk.errors import ConfigError


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "run",
        parents=[common],
        help="run a program with its LLM calls traced and recorded",
        description="Run CMD with the provider SDKs instrumented and every trace recorded, "
        "with no change to its code: tracely run -- python app.py",
    )
    p.add_argument(
        "--instrument",
        metavar="NAMES",
        default=None,
        help=f"provider SDKs to instrument, comma-separated: {', '.join(instrument_values())} "
        "(default: $TRACELY_INSTRUMENT, else auto)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    p.set_defaults(handler=cmd_run)


def _environment(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    instrument = args.instrument or env.get("TRACELY_INSTRUMENT", "").strip() or "auto"
    # Checked here, so a bad value is a usage error and not a warning in the program's output.
    SETTINGS["instrument"].parse("--instrument", instrument)
    env["TRACELY_INSTRUMENT"] = instrument
    if args.store:
        env["TRACELY_STORE"] = args.store
    return env


def cmd_run(args: argparse.Namespace, ctx: Any) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ConfigError(
            "tracely run: give the program to run after --, e.g. tracely run -- python app.py"
        )
    env = _environment(args)
    executable = shutil.which(command[0], path=env.get("PATH"))
    if executable is None:
        raise ConfigError(f"tracely run: {command[0]!r} was not found on PATH")
    ctx.close()  # nothing of this process survives the exec
    os.execve(executable, command, env)
    return 0  # not reached: the process is now the command
