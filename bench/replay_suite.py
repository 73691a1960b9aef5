"""The CI gate at scale: 1,000 cases of the reference agent replayed through the runner.

Measured side by side in one run, each the median of interleaved rounds:

- the floor: ``examples.weather_agent.run`` called 1,000 times with no tracing at all (no SDK
  TracerProvider, so every span is a no-op);
- the gate in-process: the cases loaded from a SQLite store and replayed, with the pipeline
  ``tracely replay`` sets up when no exporter is configured (its ``init_tracing()``: an SDK
  provider that samples nothing, since nobody would read the spans);
- the same with the cases already in memory; with every span sampled, as when an exporter is
  configured (the recorder attached, exporting nowhere: the cost of the spans themselves); and
  with spans to a bare SDK provider;
- the gate with ``-j 2`` (two spawned worker processes, start-up included);
- the gate's loading alone: every case read from the store (``load_cases``).

Printed as cases per second and as a ratio to the floor: the ratio of the medians, and the
paired ratio (the median of each round's own ratio; the two ran back to back, so load that
comes and goes over the run shifts both alike); each goal beside its figure; then the peak
memory (tracemalloc) of the in-process gate for 200 and for 1,000 cases. Goal: the 1,000-case
gate (no exporter) at most 2x the floor. Nothing is asserted on time.

With ``--instructions`` the in-process variants instead run under valgrind's callgrind, each in
a process of its own that builds the suite and runs the variant once and then twice: the
difference of the two instruction counts is one run's, whatever else the machine is doing
(process CPU on a shared machine is not: the same code's ratio moves by 2x between runs).
Needs ``valgrind``; use a smaller suite (``--cases 200``), each variant takes minutes.

The suite is recorded by a callback on the sampled pipeline's recorder, which is removed before
anything is timed: ``tracely replay`` records nothing (``init(record=False)``), so its
recorder has no callback and makes no bundles of the replayed runs.

    python bench/replay_suite.py [--cases 1000] [--small 200] [--rounds 5] [--jobs 2]
    python bench/replay_suite.py --instructions [--cases 200]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _callgrind import instructions

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import tracely_otel
import tracely_sdk as tracely
from examples import weather_agent
from tracely_sdk._runner import CaseResult, load_cases, run_cases
from tracely_sdk.cli._replay import init_tracing
from tracely_sdk.store import Recording, SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = "examples.weather_agent:run"
GOAL = 2.0  # the in-process gate (no exporter) at most this many times the floor
CITIES = ("Paris", "Lisbon", "Oslo", "Tokyo")
# The variants --instructions counts (the -j ones spawn processes callgrind would not follow).
COUNTED = ("floor", "gate", "gate_loaded", "gate_sampled", "fixtures_loop", "load")


@contextlib.contextmanager
def global_provider(provider: Any) -> Iterator[None]:
    """Make ``provider`` the global one for a while (OpenTelemetry lets a process set it once)."""
    saved = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER = provider
    try:
        yield
    finally:
        trace._TRACER_PROVIDER = saved


def build_store(path: Path, count: int, recorder: list[dict[str, Any]], sampled: Any) -> None:
    """``count`` live runs of the reference agent, each recorded and promoted to a case."""
    store = SQLiteStore(path, synchronous="NORMAL")
    try:
        recorder.clear()
        with global_provider(sampled):
            for i in range(count):
                weather_agent.run(CITIES[i % len(CITIES)])
            sampled.force_flush()
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
    return run_cases(cases, ENTRYPOINT, jobs=jobs, initializer=init_tracing if jobs > 1 else None)


def load(path: Path) -> list[Any]:
    """The gate's loading alone: every case read from the store for replay."""
    store = SQLiteStore(path)
    try:
        return load_cases(store=store)
    finally:
        store.close()


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


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def goal_text(ratio: float) -> str:
    return f"goal <= {GOAL:g}x: {'met' if ratio <= GOAL else 'not met'}"


class Pipelines:
    """The providers measured, the suite's recorder, and the built stores."""

    def __init__(self) -> None:
        for name in [k for k in os.environ if k.startswith(("OTEL_EXPORTER_OTLP", "OTEL_TRACES"))]:
            del os.environ[name]  # the gate as run with no exporter configured
        self.recorder: list[dict[str, Any]] = []
        init_tracing()  # what `tracely replay` sets up
        replay = trace.get_tracer_provider()
        assert isinstance(replay, TracerProvider) and replay.sampler is ALWAYS_OFF
        self.replay = replay
        # Every span sampled, as when an exporter is configured (init(record=False) then
        # attaches the recorder beside the exporter); it also records the suite, then stops.
        self.sampled = TracerProvider()
        self.sampled.add_span_processor(
            tracely_otel.FixtureSpanProcessor(self._on_bundle, background=True)
        )
        self.bare = TracerProvider()
        self.no_tracing = trace.NoOpTracerProvider()

    def _on_bundle(self, trace_id: str, bundle: dict[str, Any]) -> None:
        self.recorder.append(bundle)

    def build(self, path: Path, count: int) -> None:
        build_store(path, count, self.recorder, self.sampled)

    def stop_recording(self) -> None:
        processor = tracely_otel.find_fixture_processor(self.sampled)
        assert processor is not None
        processor.remove_callback(self._on_bundle)


def variants_of(
    pipes: Pipelines, big: Path, loaded: list[Any], n: int, jobs: int
) -> dict[str, tuple[Any, Callable[[], Any]]]:
    """Each variant: the global provider it runs under, and what it runs."""
    return {
        "floor": (pipes.no_tracing, lambda: floor(n)),
        "gate": (pipes.replay, lambda: gate(big)),
        "gate_loaded": (pipes.replay, lambda: run_cases(loaded, ENTRYPOINT)),
        "gate_sampled": (pipes.sampled, lambda: run_cases(loaded, ENTRYPOINT)),
        "gate_bare": (pipes.bare, lambda: run_cases(loaded, ENTRYPOINT)),
        "fixtures_loop": (pipes.replay, lambda: fixtures_loop(loaded)),
        "load": (pipes.replay, lambda: len(load(big))),
        "gate_j": (pipes.replay, lambda: gate(big, jobs=jobs)),
        # the fixed cost of -j: spawning the workers, importing and setting up tracing in each
        "j_startup": (
            pipes.replay,
            lambda: run_cases(loaded[:jobs], ENTRYPOINT, jobs=jobs, initializer=init_tracing),
        ),
    }


LABELS = {
    "floor": "floor: run() x{n}, no tracing",
    "gate": "gate in-process (store -> verdicts)",
    "gate_loaded": "gate in-process, cases already loaded",
    "gate_sampled": "  ... every span sampled (an exporter set)",
    "gate_bare": "  ... spans to a bare SDK provider",
    "fixtures_loop": "  fixtures() + run() in a loop, no runner",
    "load": "  loading alone (load_cases from the store)",
    "gate_j": "gate -j {jobs} (worker start-up included)",
    "j_startup": "  -j {jobs} start-up alone ({jobs} cases)",
}


def child(variant: str, n: int, reps: int) -> int:
    """Build an ``n``-case suite, then run ``variant`` ``reps`` times (under callgrind)."""
    pipes = Pipelines()
    tmp = Path(tempfile.mkdtemp(prefix="tracely-bench-"))
    big = tmp / "suite.db"
    try:
        pipes.build(big, n)
        pipes.stop_recording()
        store = SQLiteStore(big)
        loaded = load_cases(store=store)
        store.close()
        provider, fn = variants_of(pipes, big, loaded, n, 1)[variant]
        verdicts: Counter[str] = Counter()
        for _ in range(reps):
            with global_provider(provider):
                value = fn()
            if isinstance(value, list):
                verdicts = Counter(r.verdict for r in value)
        print(json.dumps(dict(verdicts)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _child_instructions(variant: str, n: int, reps: int) -> int:
    """The instructions a child running ``variant`` ``reps`` times executes, in all."""
    command = [sys.executable, __file__, "--child", variant, "--cases", str(n), "--reps", str(reps)]
    count, out = instructions(command, variant)
    verdicts = json.loads(out.decode().strip().splitlines()[-1] or "{}")
    if verdicts and set(verdicts) != {"PASS"}:
        print(f"  note: {variant} verdicts were {verdicts}")
    return count


def by_instructions(n: int) -> None:
    print(f"tracely replay: {n} cases of {ENTRYPOINT}, instructions of one run (callgrind)")
    print(f"  {'':44s} {'instructions':>14s} {'per case':>10s} {'x floor':>8s}")
    counted: dict[str, int] = {}
    for variant in COUNTED:
        once, twice = (_child_instructions(variant, n, reps) for reps in (1, 2))
        counted[variant] = twice - once
    for variant in COUNTED:
        ratio = counted[variant] / counted["floor"]
        goal = f"   {goal_text(ratio)}" if variant == "gate" else ""
        print(
            f"  {LABELS[variant].format(n=n, jobs=1):44s} {counted[variant] / 1e6:12.1f} M "
            f"{counted[variant] / n / 1e3:8.0f} K {ratio:7.2f}x{goal}"
        )
    print(f"  {load_average()} (instruction counts do not depend on it)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="cases in the suite (default 1000)")
    parser.add_argument(
        "--small", type=int, default=200, help="the smaller suite for memory (default 200)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes for -j (default 2)")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under callgrind"
    )
    parser.add_argument("--child", choices=COUNTED, help=argparse.SUPPRESS)
    parser.add_argument("--reps", type=int, default=1, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    n = opts.cases
    if opts.child:
        return child(opts.child, n, opts.reps)
    if opts.instructions:
        if shutil.which("valgrind") is None:
            parser.error("--instructions needs valgrind (apt-get install valgrind)")
        by_instructions(n)
        return 0
    start_load = load_average()

    pipes = Pipelines()
    tmp = Path(tempfile.mkdtemp(prefix="tracely-bench-"))
    big, small = tmp / "suite.db", tmp / "small.db"
    pipes.build(big, n)
    pipes.build(small, opts.small)
    pipes.stop_recording()

    loaded_store = SQLiteStore(big)
    loaded = load_cases(store=loaded_store)
    loaded_store.close()

    variants = variants_of(pipes, big, loaded, n, opts.jobs)
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    verdicts: dict[str, Counter[str]] = {}
    for name, (provider, fn) in variants.items():  # warm up imports and caches
        if name not in ("gate_j", "j_startup"):
            with global_provider(provider):
                fn()
    for _ in range(opts.rounds):
        for name, (provider, fn) in variants.items():
            with global_provider(provider):
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

    with global_provider(pipes.replay):
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
    for key in variants:
        label = LABELS[key].format(n=n, jobs=opts.jobs)
        rate = f"{n / w[key]:8.0f}" if key != "j_startup" else f"{'':8s}"
        goal = f"   {goal_text(paired(cpu, key))} (paired cpu)" if key == "gate" else ""
        print(
            f"  {label:44s} {w[key]:7.3f}s {rate} {w[key] / w['floor']:7.2f}x "
            f"{paired(wall, key):6.2f}x   {c[key]:6.3f}s {c[key] / c['floor']:7.2f}x "
            f"{paired(cpu, key):6.2f}x{goal}"
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
    print(
        f"  the {n}-case gate, no exporter: paired {paired(wall, 'gate'):.2f}x wall, "
        f"{paired(cpu, 'gate'):.2f}x cpu ({goal_text(paired(cpu, 'gate'))}); medians "
        f"{w['gate'] / w['floor']:.2f}x wall, {c['gate'] / c['floor']:.2f}x cpu; every span "
        f"sampled paired {paired(cpu, 'gate_sampled'):.2f}x cpu; -j {opts.jobs} paired "
        f"{paired(wall, 'gate_j'):.2f}x wall"
    )
    print(f"  {start_load} at the start, {load_average()} at the end")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
