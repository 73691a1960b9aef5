"""Instruction counts under valgrind's callgrind, for the bench scripts' ``--instructions``:
unlike wall time, the count does not change with the machine's load."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def instructions(
    command: Sequence[str], what: str, env: Mapping[str, str] | None = None
) -> tuple[int, bytes]:
    """The instructions ``command`` executes in all, run under callgrind with this tree on
    PYTHONPATH (and ``env`` added), and what it printed on stdout; ``what`` names it if
    callgrind counts nothing."""
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    out = subprocess.run(
        [*valgrind, *command],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    for line in out.stderr.decode().splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1].strip()), out.stdout
    raise RuntimeError(f"callgrind printed no instruction count for {what}")


def instructions_by_thread(
    command: Sequence[str], what: str, env: Mapping[str, str] | None = None
) -> tuple[list[int], bytes]:
    """The instructions each thread of ``command`` executes, in the order callgrind numbers
    the threads (the main thread first, then each thread as it was started), and what it
    printed on stdout. Run as :func:`instructions`, with ``--separate-threads=yes``."""
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp) / "callgrind.out"
        valgrind = [
            "valgrind",
            "--tool=callgrind",
            "--separate-threads=yes",
            f"--callgrind-out-file={prefix}",
        ]
        out = subprocess.run(
            [*valgrind, *command],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
        counts: dict[int, int] = {}
        for path in Path(tmp).glob("callgrind.out-*"):
            thread = int(path.name.rsplit("-", 1)[1])
            text = path.read_text(errors="replace")
            found = re.search(r"^(?:totals|summary): (\d+)", text, re.MULTILINE)
            if found is None:
                raise RuntimeError(f"callgrind wrote no total for {what}, thread {thread}")
            counts[thread] = int(found.group(1))
    if not counts:
        raise RuntimeError(f"callgrind printed no instruction count for {what}")
    return [counts.get(t, 0) for t in range(1, max(counts) + 1)], out.stdout
