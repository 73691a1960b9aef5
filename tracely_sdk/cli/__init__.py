"""The ``tracely`` command: recorded traces, regression cases and the replay gate.

    tracely traces list|show              what was recorded
    tracely cases promote|list|show|...   regression cases made from recordings
    tracely replay                        replay every case through your code; the CI gate
    tracely reports merge                 the JSON reports of replay shards as one gate
    tracely runs list|show                the results of past replay runs
    tracely scenarios run|list|new        multi-turn checks of a live agent service
    tracely run -- CMD                    run a program traced and recorded, code unchanged
    tracely serve                         the team's server: OTLP in, the cases API, pages
    tracely tokens                        bearer tokens for the server
    tracely ui                            the local store's pages in a browser, on 127.0.0.1

Exit status: 0 when everything asked for succeeded (every replayed case passed), 1 when a
replayed case failed, was incomplete or errored, 2 for a usage or configuration error (bad
option, unusable store URL, unknown case or trace, bad entrypoint), printed as one line on
stderr.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tracely_sdk._version import __version__
from tracely_sdk.cli._output import Output
from tracely_sdk.errors import ConfigError, MissingDependency, StoreError

__all__ = ["Context", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class Context:
    """What a command works with: the output, and the store (opened on first use, closed after)."""

    def __init__(self, out: Output, store_url: str | None) -> None:
        self.out = out
        self.store_url = store_url
        self._store: Any = None

    def store(self, *, create: bool = True) -> Any:
        """The store named by ``--store``, else ``TRACELY_STORE``/``[tool.tracely]``, else the default.

        Read-only commands pass ``create=False``: a store that does not exist is then an error
        naming its path, and no file or directory is created.
        """
        if self._store is None:
            from tracely_sdk._config import resolve
            from tracely_sdk.store import open_store

            self._store = open_store(resolve("store", self.store_url), create=create)
        return self._store

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()


def _common(*, top: bool) -> argparse.ArgumentParser:
    """``--store`` and ``--no-color``, accepted before or after the command name."""
    parent = argparse.ArgumentParser(add_help=False)
    # On subcommands the default is SUPPRESS, so a value given before the command survives.
    default: Any = None if top else argparse.SUPPRESS
    parent.add_argument(
        "--store",
        metavar="URL",
        default=default,
        help="the store: sqlite:///path.db, a path ending in .db, http(s)://server, "
        "postgresql://... (default: $TRACELY_STORE, else .tracely/tracely.db in the project)",
    )
    parent.add_argument(
        "--no-color",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="plain text output, no colours or progress bar",
    )
    return parent


class _Parser(argparse.ArgumentParser):
    """argparse's parser, which also says which command a mistyped one was meant to be."""

    def error(self, message: str) -> NoReturn:
        hint = _did_you_mean(self, message)
        super().error(message + hint)


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    # argparse words an unknown command as: argument COMMAND: invalid choice: 'x' (choose from ...)
    match = re.search(r"invalid choice: '([^']*)'", message)
    if match is None:
        return ""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            close = difflib.get_close_matches(match.group(1), list(action.choices), n=1)
            if close:
                return f"; did you mean {close[0]!r}?"
    return ""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the whole command line."""
    from tracely_sdk.cli import (
        _cases,
        _replay,
        _reports,
        _run,
        _runs,
        _scenarios,
        _tokens,
        _traces,
        _ui,
    )
    from tracely_sdk.server._cli import add_serve_command

    parser = _Parser(
        prog="tracely",
        description="Turn production traces of LLM agents into regression cases and replay "
        "them hermetically: no API keys, no cost, no flakiness.",
        epilog="Exit status: 0 all passed, 1 a case failed, 2 usage or configuration error. "
        "A tracely server store (--store http(s)://...) is sent the token in $TRACELY_TOKEN; "
        "`tracely tokens` makes the server's tokens.",
        parents=[_common(top=True)],
    )
    parser.add_argument("--version", action="version", version=f"tracely {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    common = _common(top=False)
    _traces.register(commands, common)
    _cases.register(commands, common)
    _replay.register(commands, common)
    _reports.register(commands, common)
    _runs.register(commands, common)
    _scenarios.register(commands, common)
    _run.register(commands, common)
    add_serve_command(commands, common)
    _tokens.register(commands, common)
    _ui.register(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tracely`` command line; returns the exit status."""
    parser = build_parser()
    if argv is None:
        argv = sys.argv[1:]
    if not argv:  # like pip and git: the bare command is a request for help
        parser.print_help()
        return EXIT_OK
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # --help, --version, or a usage error (argparse says which)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    out = Output(color=not args.no_color)
    ctx = Context(out, args.store)
    try:
        status: int = args.handler(args, ctx)
        return status
    except (ConfigError, StoreError, MissingDependency) as exc:
        out.error(" ".join(str(exc).split()))
        return EXIT_USAGE
    except KeyboardInterrupt:
        out.error("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`tracely traces list | head`): nothing left to say.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_FAILED
    finally:
        try:
            ctx.close()
        except StoreError:
            pass
