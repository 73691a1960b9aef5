"""Instruction counts under valgrind's callgrind, for the bench scripts' ``--instructions``:
unlike wall time, the count does not change with the machine's load."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def instructions(command: Sequence[str], what: str) -> tuple[int, bytes]:
    """The instructions ``command`` executes in all, run under callgrind with this tree on
    PYTHONPATH, and what it printed on stdout; ``what`` names it if callgrind counts nothing."""
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    out = subprocess.run(
        [*valgrind, *command],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    for line in out.stderr.decode().splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1].strip()), out.stdout
    raise RuntimeError(f"callgrind printed no instruction count for {what}")
