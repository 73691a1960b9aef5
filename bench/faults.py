"""What ``tracely replay --faults`` costs: a 100-case suite with 5 tool calls per case.

Each case's agent makes 5 tool calls (handling a failed one) and one LLM call, so the suite
has 500 recorded tool calls and ``--faults`` (error, timeout, empty) derives 1,500 runs.
Measured in one process with the pipeline ``tracely replay`` sets up
(``tracely.init(record=False)``), the median of interleaved rounds:

- the suite alone (``run_cases``), and
- its derived runs (``run_faults``: derivation, the runs and their verdicts),

printed as seconds, milliseconds per run, and the derived runs' time as a multiple of the
suite's. Nothing is asserted on time.

    python bench/faults.py [--cases 100] [--calls 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tracely_sdk as tracely
from tracely_sdk._faults import FaultConfig
from tracely_sdk._robustness import run_faults
from tracely_sdk._runner import ReplayCase, run_cases

ENTRYPOINT = "__main__:agent"


def agent(calls: int) -> str:
    """Look ``calls`` things up (a failed or empty lookup is skipped), then answer."""
    with tracely.agent("bench-agent", input=calls):
        found = []
        for i in range(calls):
            try:
                value = tracely.call_tool("lookup", lambda i=i: {"value": i}, args={"i": i})
            except Exception:
                continue
            if isinstance(value, dict) and "value" in value:
                found.append(value["value"])
        return str(tracely.call_llm("model", lambda: f"found {found}", input=found))


def suite(cases: int, calls: int) -> list[ReplayCase]:
    bundle = {
        "tools": {
            "lookup": [
                {"args": {"i": i}, "output": {"value": i}, "seq": i + 1} for i in range(calls)
            ]
        },
        "llm": {
            "model": [
                {
                    "input": list(range(calls)),
                    "output": f"found {list(range(calls))}",
                    "seq": calls + 1,
                }
            ]
        },
    }
    return [
        ReplayCase(
            id=f"case{n}",
            name=f"case {n}",
            version=1,
            entrypoint=ENTRYPOINT,
            input={"args": [calls], "kwargs": {}},
            expected_output=f"found {list(range(calls))}",
            bundle=bundle,
        )
        for n in range(cases)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tracely.init(record=False)
    cases = suite(args.cases, args.calls)
    config = FaultConfig()
    base_times: list[float] = []
    fault_times: list[float] = []
    derived = 0
    verdicts: dict[str, int] = {}
    for _ in range(args.rounds):
        started = time.perf_counter()
        results = run_cases(cases, ENTRYPOINT)
        base_times.append(time.perf_counter() - started)
        assert all(r.verdict == "PASS" for r in results), [r.reasons for r in results][:1]
        started = time.perf_counter()
        run_faults(cases, results, config, entrypoint=ENTRYPOINT)
        fault_times.append(time.perf_counter() - started)
        rows: list[Any] = [row for r in results for row in r.faults or ()]
        derived = sum(1 for row in rows if row["verdict"] != "SKIPPED")
        verdicts = {}
        for row in rows:
            verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
    base = statistics.median(base_times)
    faults = statistics.median(fault_times)
    print(f"{args.cases} cases x {args.calls} tool calls, kinds {', '.join(config.kinds)}")
    print(f"suite:        {base:.3f}s  ({base / args.cases * 1000:.2f} ms per case)")
    print(
        f"derived runs: {faults:.3f}s  for {derived} runs ({faults / max(derived, 1) * 1000:.2f} "
        f"ms per run), {faults / base:.1f}x the suite"
    )
    print(f"verdicts:     {verdicts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
