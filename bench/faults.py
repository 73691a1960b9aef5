"""What ``tracely replay --faults`` costs: a 100-case suite with 5 tool calls per case.

Each case's agent makes 5 tool calls (handling a failed one) and one LLM call, so the suite
has 500 recorded tool calls and ``--faults`` (error, timeout, empty) derives 1,500 runs.
With ``--sdk`` the LLM call goes through the OpenAI SDK (recorded as the SDK records it, a
client with ``max_retries=0``, an agent that answers "the model is unavailable" on its
errors), and the model faults are derived too: ``rate_limit``, ``server_error``, ``timeout``
and ``refusal`` of each case's model call, served at the SDK's HTTP client (a plain call has
no ``stream_cut``: 100 pairs skipped).
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
from tracely_sdk._faults import KINDS, TOOL_KINDS, FaultConfig
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


_client: Any = None


def sdk_agent(calls: int) -> str:
    """:func:`agent`, its model call made with the OpenAI SDK."""
    import openai

    global _client
    if _client is None:  # never sends: every call is served from the recording
        _client = openai.OpenAI(api_key="bench", base_url=SDK_URL, max_retries=0)
    with tracely.agent("bench-agent", input=calls):
        found = []
        for i in range(calls):
            try:
                value = tracely.call_tool("lookup", lambda i=i: {"value": i}, args={"i": i})
            except Exception:
                continue
            if isinstance(value, dict) and "value" in value:
                found.append(value["value"])
        try:
            reply = _client.chat.completions.create(model="model", messages=_messages(found))
        except openai.APIError:
            return "the model is unavailable"
        return str(reply.choices[0].message.content)


SDK_ENTRYPOINT = "__main__:sdk_agent"
SDK_URL = "http://127.0.0.1:9/v1"


def _messages(found: list[int]) -> list[Any]:
    return [{"role": "user", "content": f"found {found}"}]


def _sdk_entry(calls: int) -> dict[str, Any]:
    """The model call as the OpenAI SDK records it."""
    from tracely_sdk.providers.http import _openai_chat

    answer = f"found {list(range(calls))}"
    body = _openai_chat.text_body(answer, model="model", usage=(10, 3))
    return {
        "input": {"messages": _messages(list(range(calls)))},
        "output": {"object": "chat.completion", "body": body},
        "output_type": "openai.chat.completion",
        "provider": "OpenAI.chat.completions.create",
        "seq": calls + 1,
    }


def suite(cases: int, calls: int, sdk: bool = False) -> list[ReplayCase]:
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
    if sdk:
        bundle["llm"] = {"model": [_sdk_entry(calls)]}
    return [
        ReplayCase(
            id=f"case{n}",
            name=f"case {n}",
            version=1,
            entrypoint=SDK_ENTRYPOINT if sdk else ENTRYPOINT,
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
    parser.add_argument(
        "--sdk", action="store_true", help="the model call through the OpenAI SDK, faulted too"
    )
    args = parser.parse_args()
    tracely.init(record=False)
    cases = suite(args.cases, args.calls, args.sdk)
    entrypoint = SDK_ENTRYPOINT if args.sdk else ENTRYPOINT
    kinds = KINDS if args.sdk else TOOL_KINDS
    config = FaultConfig(kinds=kinds)
    base_times: list[float] = []
    fault_times: list[float] = []
    derived = 0
    verdicts: dict[str, int] = {}
    for _ in range(args.rounds):
        started = time.perf_counter()
        results = run_cases(cases, entrypoint)
        base_times.append(time.perf_counter() - started)
        assert all(r.verdict == "PASS" for r in results), [r.reasons for r in results][:1]
        started = time.perf_counter()
        run_faults(cases, results, config, entrypoint=entrypoint)
        fault_times.append(time.perf_counter() - started)
        rows: list[Any] = [row for r in results for row in r.faults or ()]
        derived = sum(1 for row in rows if row["verdict"] != "SKIPPED")
        verdicts = {}
        for row in rows:
            verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
    base = statistics.median(base_times)
    faults = statistics.median(fault_times)
    model = " and one OpenAI SDK model call" if args.sdk else ""
    print(f"{args.cases} cases x {args.calls} tool calls{model}, kinds {', '.join(config.kinds)}")
    print(f"suite:        {base:.3f}s  ({base / args.cases * 1000:.2f} ms per case)")
    print(
        f"derived runs: {faults:.3f}s  for {derived} runs ({faults / max(derived, 1) * 1000:.2f} "
        f"ms per run), {faults / base:.1f}x the suite"
    )
    print(f"verdicts:     {verdicts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
