"""tracely against the peer OpenAI instrumentors, per call of ``chat.completions.create``.

Every variant runs in its own process (instrumentors patch the SDK for good, and a process
keeps what an earlier variant left in its heap), against the bundled local server
(``examples.llm_server``, one process for the whole run, on 127.0.0.1). Rounds alternate the
variants, so load that comes and goes on the machine hits all alike. In each child process the
application's pipeline is the same: an SDK TracerProvider with a BatchSpanProcessor to a no-op
exporter; the instrumentor is attached to it; a warm-up of calls is left out; then ``--calls``
calls are timed, and the process's CPU is counted until the pipeline is flushed (the exporter's
batching and tracely's recording, store writes included, are in it).

Variants (content capture on where the instrumentor has it):

- ``uninstrumented``: the SDK as it comes;
- ``openai-v2``: OpenTelemetry contrib ``opentelemetry-instrumentation-openai-v2``;
- ``openinference``: ``openinference-instrumentation-openai``;
- ``openllmetry``: Traceloop's ``opentelemetry-instrumentation-openai``;
- ``tracely-spans``: ``tracely.init(instrument="openai", record=False)``;
- ``tracely``: ``tracely.init(instrument="openai")`` with a SQLite store, each call its own
  trace: tracely as a user runs it;
- ``tracely-agent``: the same, all calls in one ``tracely.agent()`` run;
- ``tracely-wire``: ``tracely.init(instrument="httpx2")`` with a SQLite store, each call its own
  trace: the same call recorded at the HTTP client the SDK rides on (``httpx2.Client.send``),
  the path litellm, any other SDK and a home-made client take; the SDK itself is not patched.

Printed per variant: the added process CPU per call (the variant's CPU per call less the
uninstrumented one's of the same round) and the wall time against the uninstrumented one, as
the median and the best round; for tracely's variants, the CPU per call of its own threads (the
recorder's extraction and the store writer's, counted within the added CPU), which varies far
less than the difference of two process totals; then tracely's added CPU against the cheapest
peer's, and the same for ``tracely-wire``. Targets: tracely as a user runs it adds less CPU
per call than the cheapest peer (stretch: <= 0.5x); recorded at the wire, at most as much
(<= 1.0x). Nothing is asserted.

With ``--instructions`` each variant instead runs once under valgrind's callgrind, with 1 call
and with 1 + ``--calls`` calls, and the difference of the two instruction counts (every thread
of the process, user space only: the kernel's side of a write or an fsync is not in it) is its
cost per call, printed whole and per thread (the calling thread, tracely's recorder and store
writer, the exporter's batch thread). A count does not depend on what else the machine is
doing, so this settles a ratio that process CPU on a shared machine cannot (seen: the same
code's process-CPU ratio ranged from 0.5x to 6.8x between runs). So that nothing in the count
depends on timing either, each measured call there is followed by ``tracely.flush()`` (the
recorder and the store writer have delivered and stored its trace before the next call
starts, as they have for an agent whose model calls take longer than their 50 and 100 ms
gathering windows: each trace is a batch of its own; they gather until that flush, so their
work starts at the same point in every run), the exporter's batch thread exports only when
its batch is full or flushed (no timer), threads switch only when one waits (no switch
interval), what the process made before the measured calls is left out of garbage
collection (``gc.freeze()``), the client keeps its one connection however long a call takes,
and hashing and the ids of spans are seeded. Needs
``valgrind``; each variant takes a few minutes.

    python bench/peers.py [--calls N] [--rounds R] [--variants a,b,...] [--instructions]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _callgrind import instructions_by_thread

ROOT = Path(__file__).resolve().parent.parent

MODEL = "gpt-4o"
MESSAGES = [
    {"role": "system", "content": "You are a weather assistant."},
    {"role": "user", "content": "What is the weather like in Paris this afternoon?"},
]
PEERS = ("openai-v2", "openinference", "openllmetry")
TRACELY = ("tracely-spans", "tracely", "tracely-agent", "tracely-wire")
VARIANTS = ("uninstrumented", *PEERS, *TRACELY)
WARMUP = 30
OPENAI_V2_GOAL = 1.0  # tracely's added instructions per recorded call, as a multiple of openai-v2's
# the variants compared with the cheapest peer, and their goals
AGAINST_PEERS = {
    "tracely": "tracely (as a user runs it)",
    "tracely-wire": "tracely recording at the wire (httpx2)",
}
GOALS = {"tracely": "target < 1.0x, stretch <= 0.5x", "tracely-wire": "goal <= 1.0x"}
# tracely's own threads, by name: the recorder (extraction) and the store writer
THREADS = {"recorder": "tracely-fixture-recorder", "writer": "tracely-store-writer"}
# every thread a child has, by name, as the instruction counts show them
SHOWN_THREADS = {"MainThread": "calling", **{v: k for k, v in THREADS.items()}}
EXPORTER_THREAD = "OtelBatchSpanRecordProcessor"
SHOWN_THREADS[EXPORTER_THREAD] = "exporter"
# what makes a child's instruction count the same from run to run (see the docstring)
SETTLED_ENV = {"PYTHONHASHSEED": "0"}


def _thread_cpu(names: dict[str, str]) -> dict[str, float]:
    """The CPU seconds each named live thread has used so far (0 for one not running)."""
    import threading

    out = dict.fromkeys(names, 0.0)
    by_name = {t.name: t for t in threading.enumerate()}
    for key, name in names.items():
        thread = by_name.get(name)
        if thread is not None and thread.ident is not None:
            out[key] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return out


def _child(variant: str, base_url: str, calls: int, settle: bool = False) -> dict[str, Any]:
    """Runs in the variant's own process: set up, warm up, time ``calls`` calls. ``settle``:
    nothing done depends on timing (for ``--instructions``; see the module docstring)."""
    sys.path.insert(0, str(ROOT))
    # Callgrind numbers a thread by the lowest slot free when it is made (slot 0 here: the
    # main thread); a slot whose thread ended is taken again, and the counts of both are one.
    slots: list[list[Any]] = [["MainThread", None]]  # [names, the thread holding it]
    if settle:
        import random
        import threading

        random.seed(0)  # OpenTelemetry's span and trace ids
        start = threading.Thread.start

        def start_named(thread: threading.Thread) -> None:
            free = [s for s in slots[1:] if not s[1].is_alive()]
            if free:
                free[0][0] += "+" + thread.name
                free[0][1] = thread
            else:
                slots.append([thread.name, thread])
            start(thread)

        threading.Thread.start = start_named  # type: ignore[method-assign]
        # A thread gives up the interpreter when it waits, never on a timer: the threads take
        # turns at the same points in every run.
        sys.setswitchinterval(1e3)
    # span_only, not "true": the GenAI utility beneath openai-v2 reads "true" as NO_CONTENT
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "span_only"
    os.environ["TRACELOOP_TRACE_CONTENT"] = "true"
    import contextlib

    import openai
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class NoOpExporter(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

    provider = TracerProvider()
    # settled: a batch goes when it is full or flushed, never on the timer
    delay = {"schedule_delay_millis": 1e9} if settle else {}
    provider.add_span_processor(
        BatchSpanProcessor(NoOpExporter(), max_queue_size=1 << 20, **delay)  # type: ignore[arg-type]
    )
    trace.set_tracer_provider(provider)
    flush = provider.force_flush
    run: Any = contextlib.nullcontext
    drain: Any = lambda: None  # noqa: E731
    if variant == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    elif variant == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        OIInstrumentor().instrument(tracer_provider=provider)
    elif variant == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as TLInstrumentor

        TLInstrumentor().instrument(tracer_provider=provider)
    elif variant in TRACELY:
        import tracely_sdk as tracely

        store = Path(tempfile.mkdtemp()) / "tracely.db"
        tracely.init(
            instrument="httpx2" if variant == "tracely-wire" else "openai",
            record=variant != "tracely-spans",
            store=f"sqlite:///{store}",
        )

        def flush() -> bool:
            provider.force_flush()
            return tracely.flush(timeout=60)

        if settle and variant != "tracely-spans":
            from tracely_otel import _processor
            from tracely_sdk.store import _writer

            # The recorder and the store writer gather until the flush after each call (a
            # flush ends a gathering at once): their work is done at the same point every run,
            # whatever the time a call takes under callgrind.
            _processor._GATHER_SECONDS = _writer._GATHER_SECONDS = 1e3
            drain = lambda: tracely.flush(timeout=60)  # noqa: E731

        if variant == "tracely-agent":
            run = lambda: tracely.agent("bench")  # noqa: E731
    extra: dict[str, Any] = {}
    if settle:
        from openai._constants import DEFAULT_CONNECTION_LIMITS

        # One connection for the whole run: the SDK's pool closes one idle for 5 s, and how
        # long a call takes under callgrind depends on the machine's load.
        limits = DEFAULT_CONNECTION_LIMITS.__class__(
            max_connections=1000, max_keepalive_connections=100, keepalive_expiry=None
        )
        extra["http_client"] = openai.DefaultHttpxClient(limits=limits)
    client = openai.OpenAI(api_key="bench-key", base_url=base_url, max_retries=0, **extra)
    for _ in range(WARMUP):
        client.chat.completions.create(model=MODEL, messages=MESSAGES)  # type: ignore[arg-type]
    flush()
    if settle:
        import gc

        # What was made up to here is never collected again: the collector goes through the
        # objects the calls make, not, at whichever call it happens to, the whole heap.
        gc.collect()
        gc.freeze()
    threads = _thread_cpu(THREADS) if hasattr(time, "pthread_getcpuclockid") else {}
    cpu, wall = time.process_time(), time.perf_counter()
    with run():
        for _ in range(calls):
            client.chat.completions.create(model=MODEL, messages=MESSAGES)  # type: ignore[arg-type]
            drain()
    wall = time.perf_counter() - wall
    flush()
    cpu = time.process_time() - cpu
    result: dict[str, Any] = {"wall": wall / max(calls, 1) * 1e6, "cpu": cpu / max(calls, 1) * 1e6}
    result["threads"] = [slot[0] for slot in slots]
    if threads:
        after = _thread_cpu(THREADS)
        result.update({k: (after[k] - threads[k]) / calls * 1e6 for k in THREADS})
    return result


def _server() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "examples.llm_server", "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    process.stdout.readline()  # the base URL: it is listening
    return process, f"http://127.0.0.1:{port}/v1"


def _child_command(variant: str, base_url: str, calls: int, settle: bool = False) -> list[str]:
    child = ["--child", variant, "--base-url", base_url, "--calls", str(calls)]
    return [sys.executable, __file__, *child, *(["--settle"] if settle else [])]


def _spawn(variant: str, base_url: str, calls: int) -> dict[str, float]:
    out = subprocess.run(
        _child_command(variant, base_url, calls),
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    result: dict[str, Any] = json.loads(out.stdout.decode().strip().splitlines()[-1])
    result.pop("threads", None)
    return result


def _instructions(variant: str, base_url: str, calls: int) -> dict[str, int]:
    """The instructions a child of ``variant`` making ``calls`` calls executes, by thread
    (named as :data:`SHOWN_THREADS` shows them; ``other`` for any other thread)."""
    command = _child_command(variant, base_url, calls, settle=True)
    counts, stdout = instructions_by_thread(command, variant, SETTLED_ENV)
    names = json.loads(stdout.decode().strip().splitlines()[-1])["threads"]
    if len(names) != len(counts):  # a thread ended before the child did: not named
        names = ["MainThread"] + ["?"] * (len(counts) - 1)
    out: dict[str, int] = {}
    for name, count in zip(names, counts, strict=True):
        # a slot two threads held in turn: shown as the last one (the first ended early)
        shown = SHOWN_THREADS.get(name.rsplit("+", 1)[-1], "other")
        out[shown] = out.get(shown, 0) + count
    return out


def _by_instructions(chosen: list[str], base_url: str, calls: int) -> None:
    per_call: dict[str, float] = {}
    by_thread: dict[str, dict[str, float]] = {}
    for variant in chosen:
        one, more = (_instructions(variant, base_url, n) for n in (1, 1 + calls))
        by_thread[variant] = {k: (more.get(k, 0) - one.get(k, 0)) / calls for k in {*one, *more}}
        per_call[variant] = sum(by_thread[variant].values())
    base = per_call["uninstrumented"]
    shown = [*dict.fromkeys(SHOWN_THREADS.values()), "other"]
    print(
        f"instructions per call of chat.completions.create (callgrind, {calls} calls; "
        "by thread: " + ", ".join(shown) + ")"
    )
    print(f"  {'uninstrumented':16s} {base / 1e6:8.3f} M")

    def threads(v: str) -> str:
        base_of = by_thread["uninstrumented"]
        parts = [
            f"{k} {(by_thread[v].get(k, 0) - base_of.get(k, 0)) / 1e3:,.0f} K"
            for k in shown
            if by_thread[v].get(k, 0) or base_of.get(k, 0)
        ]
        return ", ".join(parts)

    for v in chosen[1:]:
        print(
            f"  {v:16s} {per_call[v] / 1e6:8.3f} M   added {(per_call[v] - base) / 1e6:7.3f} M"
            f"  ({threads(v)})"
        )
    peers = [p for p in PEERS if p in chosen]
    if peers:
        cheapest = min(per_call[p] - base for p in peers)
        for v, label in AGAINST_PEERS.items():
            if v in chosen:
                print(
                    f"{label} added instructions / cheapest peer's = "
                    f"{(per_call[v] - base) / cheapest:.2f}x ({GOALS[v]})"
                )
    for v, label in AGAINST_PEERS.items():
        if v in chosen and "openai-v2" in chosen:
            ratio = (per_call[v] - base) / (per_call["openai-v2"] - base)
            met = "met" if ratio <= OPENAI_V2_GOAL else "not met"
            print(
                f"{label} added instructions / contrib openai-v2's, content capture on = "
                f"{ratio:.2f}x (goal <= {OPENAI_V2_GOAL:g}x: {met})"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=300, help="calls per round (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under callgrind"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--settle", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        print(json.dumps(_child(opts.child, opts.base_url, opts.calls, opts.settle)))
        return 0
    chosen = [v for v in opts.variants.split(",") if v]
    unknown = set(chosen) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variant(s) {sorted(unknown)}; choose from {', '.join(VARIANTS)}")
    if "uninstrumented" not in chosen:
        chosen.insert(0, "uninstrumented")
    server, base_url = _server()
    if opts.instructions:
        if shutil.which("valgrind") is None:
            parser.error("--instructions needs valgrind (apt-get install valgrind)")
        try:
            _by_instructions(chosen, base_url, opts.calls)
        finally:
            server.terminate()
            server.wait(timeout=10)
        return 0
    rounds: list[dict[str, dict[str, float]]] = []
    try:
        for index in range(opts.rounds):
            # alternate the order too: no variant always runs right after another
            order = chosen if index % 2 == 0 else chosen[::-1]
            rounds.append({v: _spawn(v, base_url, opts.calls) for v in order})
    finally:
        server.terminate()
        server.wait(timeout=10)

    def added(v: str) -> list[float]:
        return [r[v]["cpu"] - r["uninstrumented"]["cpu"] for r in rounds]

    def slower(v: str) -> list[float]:
        return [r[v]["wall"] / r["uninstrumented"]["wall"] for r in rounds]

    base = [r["uninstrumented"] for r in rounds]
    print(f"per call of chat.completions.create, {opts.rounds} alternating rounds of {opts.calls}")
    print(
        f"uninstrumented: {statistics.median(b['cpu'] for b in base):.0f} us CPU, "
        f"{statistics.median(b['wall'] for b in base):.0f} us wall (median)"
    )
    print(
        f"  {'variant':16s} {'added CPU, median':>18s} {'best':>8s} {'wall x, median':>15s} {'best':>6s}"
    )
    for v in chosen[1:]:
        cpu, wall = added(v), slower(v)
        print(
            f"  {v:16s} {statistics.median(cpu):15.0f} us {min(cpu):5.0f} us "
            f"{statistics.median(wall):14.2f}x {min(wall):5.2f}x"
        )
    own = [v for v in TRACELY if v in chosen and any(r[v].get("writer") for r in rounds)]
    if own:
        print("  tracely's own threads, CPU per call (median; within the added CPU above):")
        for v in own:
            parts = ", ".join(
                f"{k} {statistics.median(r[v].get(k, 0.0) for r in rounds):.0f} us" for k in THREADS
            )
            print(f"  {v:16s} {parts}")
    peers = [p for p in PEERS if p in chosen]
    if peers:
        # The ratio of the medians: a per-round ratio breaks down on a loaded machine, where
        # a peer's added CPU in one round can come out near zero or below it.
        cheapest = min(statistics.median(added(p)) for p in peers)
        for v, label in AGAINST_PEERS.items():
            if v in chosen:
                print(
                    f"{label} added CPU / cheapest peer's = "
                    f"{statistics.median(added(v)) / cheapest:.2f}x (medians; {GOALS[v]})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
