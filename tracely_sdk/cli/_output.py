"""What the CLI prints: rich tables and a progress bar on a terminal, plain text elsewhere.

rich is the optional extra ``tracely-replay[cli]`` and is imported only when it will be used: output
is plain when stdout is not a terminal, with ``--no-color``, with ``TERM=dumb``, or when rich
is not installed. JSON output (``--json``) never depends on any of that.

Every text printed goes through :func:`terminal_safe` here, whichever command prints it: stored
values (an agent or service name sent with an ingest token, a run saved with a write token) are
untrusted, and a control character in one must not clear the screen, move the cursor, set the
window title or make a hyperlink. JSON keeps C0 controls escaped by JSON itself and gets the
rest escaped as ``\\uXXXX``, the same value to any JSON reader.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TextIO

import orjson

from tracely_sdk._terminal import terminal_safe

if TYPE_CHECKING:
    from tracely_sdk._runner import CaseResult

__all__ = ["Output", "rfc3339", "rich_available", "terminal_safe"]

_UNSAFE_IN_JSON = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _json_escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


_STYLES = {
    "PASS": "bold green",
    "FAIL": "bold red",
    "INCOMPLETE": "bold yellow",
    "ERRORED": "bold magenta",
    "LENIENT": "bold cyan",
    "NOT_RUN": "dim",
}


def rich_available() -> bool:
    """True when rich can be imported (it is the optional extra ``tracely-replay[cli]``)."""
    try:
        importlib.import_module("rich")
    except ImportError:
        return False
    return True


def rfc3339(ns: int | None) -> str | None:
    """Unix nanoseconds as an RFC 3339 time in UTC, ``2026-12-04T20:33:32.123456Z`` (None
    when unknown, as 0 is in a store): how every ``--json`` document writes a time."""
    if not ns or isinstance(ns, bool) or not isinstance(ns, int):
        return None
    seconds, rest = divmod(ns, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{rest // 1000:06d}Z"


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


class Output:
    """The CLI's stdout and stderr; ``fancy`` says whether rich renders the output."""

    def __init__(
        self,
        *,
        color: bool = True,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.isatty = bool(getattr(self.stdout, "isatty", lambda: False)())
        dumb = os.environ.get("TERM", "") == "dumb"
        self.fancy = color and self.isatty and not dumb and rich_available()
        self._console: Any = None

    @property
    def console(self) -> Any:
        """The rich Console (only when ``fancy``)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.stdout, highlight=False)
        return self._console

    @property
    def width(self) -> int:
        if self.fancy:
            return int(self.console.width)
        if self.isatty:
            return max(60, shutil.get_terminal_size((120, 24)).columns)
        # A log or a pipe: wide enough to keep most of a line, deterministic whatever runs it.
        return 160

    # -- primitives ------------------------------------------------------------------------

    def line(self, text: str = "") -> None:
        """Print ``text`` (never interpreted as markup, control characters escaped)."""
        text = terminal_safe(text)
        if self.fancy:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            self.stdout.write(text + "\n")

    def error(self, message: str) -> None:
        """One line on stderr: ``tracely: error: message``."""
        self.stderr.write(f"tracely: error: {terminal_safe(message)}\n")
        self.stderr.flush()

    def note(self, message: str) -> None:
        """A remark on stderr that is not an error (so stdout stays machine-readable)."""
        self.stderr.write(f"tracely: {terminal_safe(message)}\n")

    def confirm(self, question: str) -> bool | None:
        """Ask ``question`` on the terminal: whether the answer was yes, or None when stdin
        is not a terminal (nobody to ask: the caller refuses, or acts on an explicit --yes)."""
        stdin = sys.stdin
        if stdin is None or not stdin.isatty():
            return None
        self.stderr.write(f"{question} [y/N] ")
        self.stderr.flush()
        return stdin.readline().strip().lower() in ("y", "yes")

    def json(self, data: Any) -> None:
        """``data`` as indented JSON on stdout (plain, whatever the terminal)."""
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str)
        self.stdout.write(_UNSAFE_IN_JSON.sub(_json_escaped, text.decode()) + "\n")

    def document(self, schema: str, body: Mapping[str, Any]) -> None:
        """A command's ``--json`` output: ``{"schema": schema, **body}`` (see docs/json-output.md)."""
        self.json({"schema": schema, **body})

    def fields(self, pairs: Sequence[tuple[str, str]]) -> None:
        """``key  value`` lines, keys aligned."""
        pairs = [(terminal_safe(k), terminal_safe(v)) for k, v in pairs]
        width = max((len(k) for k, _ in pairs), default=0)
        if self.fancy:
            from rich.table import Table

            table = Table.grid(padding=(0, 2))
            table.add_column(style="bold")
            table.add_column()
            for key, value in pairs:
                table.add_row(key, value)
            self.console.print(table)
            return
        for key, value in pairs:
            self.stdout.write(f"{key.ljust(width)}  {value}\n")

    def table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        title: str | None = None,
        styles: Sequence[Callable[[str], str | None]] | None = None,
        shrink: int | None = None,
    ) -> None:
        """A table; ``shrink`` is the column that is cut short to fit the width in plain text."""
        headers = [terminal_safe(h) for h in headers]
        rows = [[terminal_safe(cell) for cell in row] for row in rows]
        title = terminal_safe(title) if title is not None else None
        if self.fancy:
            from rich.table import Table
            from rich.text import Text

            table = Table(title=title, title_justify="left", header_style="bold")
            for i, header in enumerate(headers):
                table.add_column(header, overflow="fold", no_wrap=i != shrink)
            for row in rows:
                cells = []
                for i, cell in enumerate(row):
                    style = styles[i](cell) if styles is not None and i < len(styles) else None
                    cells.append(Text(cell, style=style or ""))
                table.add_row(*cells)
            self.console.print(table)
            return
        if title:
            self.stdout.write(title + "\n")
        widths = [len(h) for h in headers]
        for row in rows:
            for i, cell in enumerate(row):
                if i != shrink:
                    widths[i] = max(widths[i], len(cell))
        if shrink is not None:
            others = sum(w + 2 for i, w in enumerate(widths) if i != shrink)
            room = max(20, self.width - others)
            widths[shrink] = max(
                len(headers[shrink]), min(room, max((len(r[shrink]) for r in rows), default=0))
            )
        for row in [list(headers), *rows]:
            shown = [
                _shorten(cell, widths[i]) if i == shrink else cell for i, cell in enumerate(row)
            ]
            text = "  ".join(c.ljust(widths[i]) for i, c in enumerate(shown))
            self.stdout.write(text.rstrip() + "\n")

    # -- replay ----------------------------------------------------------------------------

    @contextmanager
    def progress(
        self, total: int, label: str = "replaying"
    ) -> Iterator[Callable[[CaseResult], None]]:
        """Yield a callback to call as each case finishes: a progress bar on a terminal."""
        if not self.fancy or total == 0:
            yield lambda result: None
            return
        from rich.markup import escape
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        columns = (
            TextColumn(f"[bold]{escape(terminal_safe(label))}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[last]}"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=self.console, transient=True) as bar:
            task = bar.add_task("replay", total=total, last="")

            def advance(result: CaseResult) -> None:
                last = terminal_safe(f"{result.verdict} {result.case_id}")
                bar.update(task, advance=1, last=escape(last))

            yield advance

    def verdicts(
        self,
        results: Sequence[CaseResult],
        elapsed: float | None = None,
        *,
        failures_only: bool = False,
    ) -> None:
        """A replay run: the table of every case (not with ``failures_only``), the details of
        the cases that did not pass, alike ones shown once, and the summary line."""
        from tracely_sdk._reports import failure_groups, format_group, in_case_order, summary_line

        if not failures_only:
            rows = []
            for r in in_case_order(results):
                first = r.reasons[0] if r.reasons else ""
                more = f" (+{len(r.reasons) - 1} more)" if len(r.reasons) > 1 else ""
                version = "" if r.version is None else str(r.version)
                rows.append([r.case_id, version, r.verdict, first + more])
            styles = [lambda c: None, lambda c: None, lambda c: _STYLES.get(c), lambda c: None]
            self.table(["CASE", "VERSION", "VERDICT", "REASON"], rows, styles=styles, shrink=3)
        groups = failure_groups(results)
        for n, group in enumerate(groups):
            if n or not failures_only:
                self.line("")
            text = terminal_safe(format_group(group, self.width))
            if self.fancy:
                from rich.text import Text

                head, _, rest = text.partition("\n")
                self.console.print(Text(head, style=_STYLES.get(group[0].verdict, "")))
                if rest:
                    self.console.print(Text(rest), soft_wrap=True)
            else:
                self.stdout.write(text + "\n")
        if groups or not failures_only:
            self.line("")
        summary = terminal_safe(summary_line(results, elapsed))
        if failures_only:
            listed = sum(len(g) for g in groups)
            if listed < len(results):
                summary += f" ({len(results) - listed} not listed: --all lists every case)"
        if self.fancy:
            from rich.text import Text

            ok = all(r.ok for r in results)
            self.console.print(Text(summary, style="bold green" if ok else "bold red"))
        else:
            self.stdout.write(summary + "\n")
