"""How long the server's pages take to render on a store of real size.

Seeds a SQLite store with 10,000 recordings (the reference agent's shape: an LLM call, a tool
call, an LLM call), promotes 1,000 of them to cases with tags, and keeps 20 replay runs of
those 1,000 cases; adds one chat agent's trace of 200 LLM calls (each sent the conversation so
far) and one of 200 tool calls of 20 kB each way; then renders every list page (first and last page, filtered) and one of each detail page
through :class:`tracely_sdk._html._views.Pages`, the functions the server calls, and prints the
median and worst time of each over several rounds. The issue's target is under 200 ms of
server time per page.

    python bench/pages.py [--recordings N] [--cases N] [--rounds R] [--store PATH]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracely_otel._bundle import FORMAT, seal  # noqa: E402
from tracely_sdk._html._views import Pages, Viewer  # noqa: E402
from tracely_sdk.store import Recording, Run, SQLiteStore  # noqa: E402
from tracely_sdk.store._model import new_run_id  # noqa: E402

CITIES = ["Paris", "Lisbon", "Oslo", "Tokyo", "Rome", "Lima", "Cairo", "Quito"]
BASE = 1_700_000_000_000_000_000


def bundle(n: int) -> dict[str, Any]:
    city = f"{CITIES[n % len(CITIES)]}-{n}"
    question = [
        {"role": "system", "content": "You are a weather assistant. Use get_weather."},
        {"role": "user", "content": f"What's the weather in {city}?"},
    ]
    return seal(
        {
            "format": FORMAT,
            "trace_id": f"{n:032x}",
            "service": "weather-svc",
            "started_at": BASE + n * 10**9,
            "tools": {
                "get_weather": [{"seq": 1, "args": {"city": city}, "output": {"temp_c": n % 30}}]
            },
            "llm": {
                "local-weather-model": [
                    {
                        "seq": 0,
                        "input": {"messages": question},
                        "output": {"content": "Let me check."},
                    },
                    {
                        "seq": 2,
                        "input": {"messages": question * 2},
                        "output": {"content": f"{n % 30}°C"},
                    },
                ]
            },
            "incomplete": [],
            "agent": {
                "name": "weather-agent",
                "input": {"args": [city], "kwargs": {}},
                "output": f"{n % 30}°C",
            },
        }
    )


LONG_TRACE = "f" * 32


def long_run(calls: int) -> dict[str, Any]:
    """An agent loop of ``calls`` LLM calls, each sent the whole conversation so far (what a
    chat agent records): the inputs grow to ``2 * calls`` messages, 12 MB in all at 200."""
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are helpful. " * 20}]
    entries = []
    for i in range(calls):
        messages.append({"role": "user", "content": f"question {i} " + "y" * 200})
        start = BASE + i * 10**8
        entries.append(
            {
                "seq": i + 1,
                "input": {"messages": list(messages)},
                "output": {"content": "answer " + "z" * 300},
                "usage": [len(messages) * 50, 60],
                "started_at": start,
                "ended_at": start + 9 * 10**7,
            }
        )
        messages.append({"role": "assistant", "content": "answer " + "z" * 300})
    return seal(
        {
            "format": FORMAT,
            "trace_id": LONG_TRACE,
            "service": "chat-svc",
            "started_at": BASE,
            "llm": {"chat-model": entries},
            "agent": {
                "name": "chat-agent",
                "input": {"args": [calls], "kwargs": {}},
                "output": "done",
            },
        }
    )


BIG_TRACE = "e" * 32


def big_values_run(calls: int, size: int, trace_id: str = BIG_TRACE) -> dict[str, Any]:
    """An agent of ``calls`` tool calls, each with arguments and a result of ``size`` bytes of
    JSON in many small tokens (what the issue's 7 MiB ingest request held)."""
    value = {"rows": [[n, f"r{n}", n % 2 == 0] for n in range(size // 20)]}
    entries = [
        {
            "seq": i + 1,
            "args": {"query": value},
            "output": value,
            "started_at": BASE + i * 10**8,
            "ended_at": BASE + i * 10**8 + 5 * 10**7,
        }
        for i in range(calls)
    ]
    return seal(
        {
            "format": FORMAT,
            "trace_id": trace_id,
            "service": "big-svc",
            "started_at": BASE,
            "tools": {"lookup": entries},
            "agent": {
                "name": "big-agent",
                "input": {"args": [calls], "kwargs": {}},
                "output": "ok",
            },
        }
    )


def seed(store: SQLiteStore, recordings: int, cases: int) -> None:
    batch: list[Recording] = []
    for n in range(recordings):
        batch.append(Recording.from_bundle(bundle(n)))
        if len(batch) == 500:
            store.put_recordings(batch)
            batch = []
    store.put_recordings(batch)
    step = max(1, recordings // cases)
    for i in range(cases):
        store.promote(
            f"{i * step:032x}", case_id=f"case-{i:04d}", name=f"Case {i}", tags=[f"group-{i % 10}"]
        )
    for r in range(20):
        results = tuple(
            {
                "case_id": f"case-{i:04d}",
                "version": 1,
                "name": f"Case {i}",
                "verdict": "FAIL" if (i + r) % 7 == 0 else "PASS",
                "reasons": ["output differs from the expected output"] if (i + r) % 7 == 0 else [],
                "duration_s": 0.01,
                "tags": [f"group-{i % 10}"],
            }
            for i in range(cases)
        )
        failed = sum(1 for c in results if c["verdict"] == "FAIL")
        store.save_run(
            Run(
                id=new_run_id(),
                started_at=BASE + r,
                duration_s=1.0,
                mode="recorded",
                ok=failed == 0,
                summary={
                    "total": cases,
                    "passed": cases - failed,
                    "failed": failed,
                    "ok": failed == 0,
                },
                source="sqlite:///bench.db",
                otlp_endpoint=None,
                tracely_version="bench",
                cases=results,
            )
        )


def measure(fn: Callable[[], str], rounds: int) -> tuple[float, float, int]:
    times = []
    size = 0
    for _ in range(rounds):
        started = time.perf_counter()
        size = len(fn())
        times.append(time.perf_counter() - started)
    return statistics.median(times), max(times), size


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recordings", type=int, default=10_000)
    parser.add_argument("--cases", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--store", help="a store file to reuse (seeded when it does not exist)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.store) if args.store else Path(tmp) / "bench.db"
        fresh = not path.exists()
        store = SQLiteStore(path)
        if fresh:
            started = time.perf_counter()
            seed(store, args.recordings, args.cases)
            print(
                f"seeded {args.recordings} recordings, {args.cases} cases, 20 runs in {time.perf_counter() - started:.1f}s"
            )
        store.put_recording(Recording.from_bundle(long_run(200)))  # kept once, by trace id
        store.put_recording(Recording.from_bundle(big_values_run(200, 20_000)))
        pages = Pages(store)
        viewer = Viewer(csrf="x")
        run_id = store.list_runs(limit=1)[0].id
        last = str(max(0, args.recordings - 50))
        checks: list[tuple[str, Callable[[], str]]] = [
            ("cases, first page", lambda: pages.cases({}, viewer)),
            ("cases, last page", lambda: pages.cases({"offset": str(args.cases - 50)}, viewer)),
            ("cases, by tag", lambda: pages.cases({"tag": "group-3"}, viewer)),
            ("cases, by verdict", lambda: pages.cases({"verdict": "FAIL"}, viewer)),
            ("one case", lambda: pages.case("case-0500", {}, viewer)),
            ("traces, first page", lambda: pages.traces({}, viewer)),
            ("traces, last page", lambda: pages.traces({"offset": last}, viewer)),
            ("one trace", lambda: pages.trace(f"{args.recordings // 2:032x}", viewer)),
            ("one trace, 200 LLM calls", lambda: pages.trace(LONG_TRACE, viewer)),
            ("one trace, 200 calls of 20 kB", lambda: pages.trace(BIG_TRACE, viewer)),
            ("  its last calls", lambda: pages.trace(BIG_TRACE, viewer, {"calls": "180"})),
            ("runs", lambda: pages.runs({}, viewer)),
            (f"one run ({args.cases} cases)", lambda: pages.run(run_id, {}, viewer)),
            ("one run, failed only", lambda: pages.run(run_id, {"verdict": "FAIL"}, viewer)),
            ("one case of a run", lambda: pages.run_case(run_id, "7", viewer)),
        ]
        print(f"{'page':<28}{'median ms':>10}{'worst ms':>10}{'KB':>8}")
        worst_all = 0.0
        for name, fn in checks:
            median, worst, size = measure(fn, args.rounds)
            worst_all = max(worst_all, median)
            print(f"{name:<28}{median * 1000:>10.1f}{worst * 1000:>10.1f}{size / 1024:>8.0f}")
        print(f"slowest median: {worst_all * 1000:.1f} ms (target: under 200 ms)")
        first_views(store, viewer)
        store.close()
    return 0


def first_views(store: SQLiteStore, viewer: Viewer) -> None:
    """The memory a first view of a big trace takes (tracemalloc's peak of the Python objects
    made while it is rendered), for a recording of 50 and of 200 calls of 20 kB each way: its
    page, its last calls, one call's value, and one call's value of the case made of it."""
    print("memory per first view (tracemalloc peak; goal: bounded, the same for 50 and 200 calls):")
    print(
        f"{'calls of 20 kB':<16}{'trace page MB':>15}{'its last calls MB':>19}"
        f"{'one value MB':>14}{'a case value MB':>17}"
    )
    for calls in (50, 200):
        trace = f"{'f' * 28}{calls:04d}"
        store.put_recording(Recording.from_bundle(big_values_run(calls, 20_000, trace)))
        store.promote(trace, case_id=f"big-{calls}", name=f"big {calls}")
        pages = Pages(store)
        views: list[Callable[[], object]] = [
            lambda p=pages, t=trace: p.trace(t, viewer),
            lambda p=pages, t=trace, n=calls: p.trace(t, viewer, {"calls": str(n - 20)}),
            lambda p=pages, t=trace, n=calls: p.call_value("traces", t, str(n), "output"),
            lambda p=pages, n=calls: p.call_value("cases", f"big-{n}", str(n), "output"),
        ]
        peaks = []
        for view in views:
            gc.collect()
            tracemalloc.start()
            view()
            peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
            tracemalloc.stop()
        print(f"{calls:<16}{peaks[0]:>15.1f}{peaks[1]:>19.1f}{peaks[2]:>14.1f}{peaks[3]:>17.1f}")


if __name__ == "__main__":
    raise SystemExit(main())
