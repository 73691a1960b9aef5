"""The CI gate at scale: 1,000 cases of the reference agent replayed through the runner.

Measured side by side in one run, each the median of interleaved rounds:

- the floor: ``examples.weather_agent.run`` called 1,000 times with no tracing at all (no SDK
  TracerProvider, so every span is a no-op);
- the gate in-process: the cases loaded from a SQLite store and replayed, with the pipeline
  ``tracely replay`` sets up (``tracely.init(record=False)``: an SDK provider with the
  FixtureSpanProcessor, no exporter configured);
- the same with the cases already in memory, and with spans to a bare SDK provider;
- the gate with ``-j 2`` (two spawned worker processes, start-up included).

Printed as cases per second and as a ratio to the floor: the ratio of the medians, and the
paired ratio (the median of each round's own ratio; the two ran back to back, so load that
comes and goes over the run shifts both alike); then the peak memory (tracemalloc) of the
in-process gate for 200 and for 1,000 cases. Target: the 1,000-case gate at most 3x the floor.
Nothing is asserted on time.

The suite is recorded by a callback on the pipeline's recorder, which is removed before
anything is timed: ``tracely replay`` records nothing (``init(record=False)``), so its
recorder has no callback and makes no bundles of the replayed runs.

    python bench/replay_suite.py [--cases 1000] [--small 200] [--rounds 5] [--jobs 2]
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import tracely_otel
import tracely_sdk as tracely
from examples import weather_agent
from tracely_sdk._runner import CaseResult, load_cases, run_cases
from tracely_sdk.store import Recording, SQLiteStore

ENTRYPOINT = "examples.weather_agent:run"
TARGET = 3.0  # the in-process gate at most this many times the floor
CITIES = ("Paris", "Lisbon", "Oslo", "Tokyo")


@contextlib.contextmanager
def global_provider(provider: Any) -> Iterator[None]:
    """Make ``provider`` the global one for a while (OpenTelemetry lets a process set it once)."""
    saved = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER = provider
    try:
        yield
    finally:
        trace._TRACER_PROVIDER = saved


def build_store(path: Path, count: int, recorder: list[dict[str, Any]]) -> None:
    """``count`` live runs of the reference agent, each recorded and promoted to a case."""
    store = SQLiteStore(path, synchronous="NORMAL")
    try:
        recorder.clear()
        for i in range(count):
            weather_agent.run(CITIES[i % len(CITIES)])
        recordings = [Recording.from_bundle(b) for b in recorder]
        recorder.clear()
        store.put_recordings(recordings)
        for i, rec in enumerate(recordings):
            store.promote(rec.trace_id, name=f"case {i:05d}", entrypoint=ENTRYPOINT)
    finally:
        store.close()


def gate(path: Path, jobs: int = 1) -> list[CaseResult]:
    """What ``tracely replay`` does: load every case from the store, run them, give verdicts."""
    store = SQLiteStore(path)
    try:
        cases = load_cases(store=store)
    finally:
        store.close()
    return run_cases(cases, ENTRYPOINT, jobs=jobs, initializer=worker_init if jobs > 1 else None)


def worker_init() -> None:
    """Each worker sets up tracing the way ``tracely replay -j N`` does."""
    tracely.init(record=False)


def floor(count: int) -> None:
    for i in range(count):
        weather_agent.run(CITIES[i % len(CITIES)])


def fixtures_loop(cases: list[Any]) -> None:
    """The replay itself with no runner around it: what the runner's own work is measured against."""
    for case in cases:
        with tracely.fixtures(case.bundle, case_id=case.id, case_version=case.version):
            weather_agent.run(*case.input["args"], **case.input["kwargs"])


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the -j workers)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall-clock and CPU seconds of ``fn()``, and its value."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    value = fn()
    return time.perf_counter() - wall, cpu_seconds() - cpu, value


def peak_memory(fn: Callable[[], Any]) -> tuple[int, int]:
    """Peak and retained bytes allocated while ``fn`` runs (tracemalloc)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        value = fn()
        retained, peak = tracemalloc.get_traced_memory()
        del value
    finally:
        tracemalloc.stop()
    return peak - before, retained - before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="cases in the suite (default 1000)")
    parser.add_argument(
        "--small", type=int, default=200, help="the smaller suite for memory (default 200)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes for -j (default 2)")
    opts = parser.parse_args()
    n = opts.cases

    # The pipeline of a replay run, and a recorder that is on only while the suite is built.
    recorder: list[dict[str, Any]] = []
    recording = [True]

    def on_bundle(trace_id: str, bundle: dict[str, Any]) -> None:
        if recording[0]:
            recorder.append(bundle)

    provider = tracely.init(record=False, on_bundle=on_bundle)
    assert isinstance(provider, TracerProvider)
    bare = TracerProvider()
    no_tracing = trace.NoOpTracerProvider()
    assert tracely_otel.find_fixture_processor(provider) is not None

    tmp = Path(tempfile.mkdtemp(prefix="tracely-bench-"))
    big, small = tmp / "suite.db", tmp / "small.db"
    build_store(big, n, recorder)
    build_store(small, opts.small, recorder)
    recording[0] = False
    # As `tracely replay` sets it up: the recorder attached, with no callback.
    fixture_processor = tracely_otel.find_fixture_processor(provider)
    assert fixture_processor is not None
    fixture_processor.remove_callback(on_bundle)

    loaded_store = SQLiteStore(big)
    loaded = load_cases(store=loaded_store)
    loaded_store.close()

    variants: dict[str, Callable[[], Any]] = {
        "floor": lambda: floor(n),
        "gate": lambda: gate(big),
        "gate_loaded": lambda: run_cases(loaded, ENTRYPOINT),
        "gate_bare": lambda: run_cases(loaded, ENTRYPOINT),
        "fixtures_loop": lambda: fixtures_loop(loaded),
        "gate_j": lambda: gate(big, jobs=opts.jobs),
        # the fixed cost of -j: spawning the workers, importing and setting up tracing in each
        "j_startup": lambda: run_cases(
            loaded[: opts.jobs], ENTRYPOINT, jobs=opts.jobs, initializer=worker_init
        ),
    }
    providers = {"floor": no_tracing, "gate_bare": bare}
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    verdicts: dict[str, Counter[str]] = {}
    for name, fn in variants.items():  # warm up imports and caches
        if name not in ("gate_j", "j_startup"):
            with global_provider(providers.get(name, provider)):
                fn()
    for _ in range(opts.rounds):
        for name, fn in variants.items():
            with global_provider(providers.get(name, provider)):
                seconds, cpu_s, value = timed(fn)
            wall[name].append(seconds)
            cpu[name].append(cpu_s)
            if isinstance(value, list):
                verdicts[name] = Counter(r.verdict for r in value)
    # Medians of interleaved rounds. CPU time is what a busy machine disturbs least: other
    # processes add wall-clock time to every variant, but not CPU time to this one.
    w = {k: statistics.median(v) for k, v in wall.items()}
    c = {k: statistics.median(v) for k, v in cpu.items()}

    def paired(samples: dict[str, list[float]], key: str) -> float:
        """The median of each round's own ratio of ``key`` to the floor."""
        rounds = zip(samples[key], samples["floor"], strict=True)
        return statistics.median(a / b for a, b in rounds)

    with global_provider(provider):
        small_peak, small_kept = peak_memory(lambda: gate(small))
        big_peak, big_kept = peak_memory(lambda: gate(big))
        # The runner alone, the cases already loaded: its working memory beyond the results it
        # returns must not grow with the number of cases.
        small_cases = loaded[: opts.small]
        small_run = peak_memory(lambda: run_cases(small_cases, ENTRYPOINT))
        big_run = peak_memory(lambda: run_cases(loaded, ENTRYPOINT))

    print(f"tracely replay: {n} cases of {ENTRYPOINT}, median of {opts.rounds} interleaved rounds")
    print(
        f"  {'':44s} {'wall':>8s} {'cases/s':>8s} {'x floor':>8s} {'paired':>7s}"
        f"   {'cpu':>7s} {'x floor':>8s} {'paired':>7s}"
    )
    rows = [
        (f"floor: run() x{n}, no tracing", "floor"),
        ("gate in-process (store -> verdicts)", "gate"),
        ("gate in-process, cases already loaded", "gate_loaded"),
        ("  ... spans to a bare SDK provider", "gate_bare"),
        ("  fixtures() + run() in a loop, no runner", "fixtures_loop"),
        (f"gate -j {opts.jobs} (worker start-up included)", "gate_j"),
        (f"  -j {opts.jobs} start-up alone ({opts.jobs} cases)", "j_startup"),
    ]
    for label, key in rows:
        rate = f"{n / w[key]:8.0f}" if key != "j_startup" else f"{'':8s}"
        print(
            f"  {label:44s} {w[key]:7.3f}s {rate} {w[key] / w['floor']:7.2f}x "
            f"{paired(wall, key):6.2f}x   {c[key]:6.3f}s {c[key] / c['floor']:7.2f}x "
            f"{paired(cpu, key):6.2f}x"
        )
    if w["gate_j"] > w["j_startup"]:
        steady = (n - opts.jobs) / (w["gate_j"] - w["j_startup"])
        print(f"  -j {opts.jobs} after start-up: {steady:.0f} cases/s")
    for key, counts in verdicts.items():
        if set(counts) != {"PASS"}:
            print(f"  note: {key} verdicts were {dict(counts)}")
    mb = 1024 * 1024
    per_case = (big_peak - small_peak) / max(1, n - opts.small) / 1024
    print(
        f"  memory peak (tracemalloc): {opts.small} cases {small_peak / mb:.1f} MB, "
        f"{n} cases {big_peak / mb:.1f} MB ({per_case:.1f} KB per extra case: the loaded cases "
        f"and the results kept for the report; results held after the run: "
        f"{small_kept / mb:.1f} MB / {big_kept / mb:.1f} MB)"
    )
    print(
        f"  runner working memory beyond its results: {opts.small} cases "
        f"{(small_run[0] - small_run[1]) / mb:.2f} MB, {n} cases {(big_run[0] - big_run[1]) / mb:.2f} MB"
    )
    verdict = {True: "met", False: "not met"}
    print(
        f"  target: the {n}-case gate at most {TARGET:g}x the floor: in-process, paired "
        f"{paired(wall, 'gate'):.2f}x wall ({verdict[paired(wall, 'gate') <= TARGET]}), "
        f"{paired(cpu, 'gate'):.2f}x cpu ({verdict[paired(cpu, 'gate') <= TARGET]}); "
        f"medians {w['gate'] / w['floor']:.2f}x wall, {c['gate'] / c['floor']:.2f}x cpu; "
        f"-j {opts.jobs} paired {paired(wall, 'gate_j'):.2f}x wall"
    )
    for path in (big, small):
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        tmp.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
