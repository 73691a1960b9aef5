"""Per-call cost of tracely, measured side by side in one run and printed as ratios.

- live ``call_tool`` (BatchSpanProcessor to a no-op exporter, FixtureSpanProcessor attached)
  against a bare OpenTelemetry span with the same attributes set by hand;
- a replayed ``call_tool`` against the same bare span;
- replaying a 10,000-call bundle against a 1,000-call bundle (linearity).

Replay is measured twice: in a process that also records (the FixtureSpanProcessor has a store
callback, so the replayed trace is extracted too), and as ``tracely replay`` runs it in CI
(``init(record=False)``: the processor is attached but has no callback, so it does nothing).

Targets: live <= 1.5x the bare span, replayed <= 1.0x, 10k/1k <= 12x. Rounds of each
variant are interleaved and the median is reported, so machine noise hits all alike.

    python bench/overhead.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

import tracely_sdk as tracely
from tracely_otel import FixtureSpanProcessor

ARGS = {"order_id": 7, "include": ["items", "shipping"]}
OUTPUT = {"status": "shipped", "carrier": "UPS", "eta_days": 2, "items": [{"sku": "A1", "qty": 1}]}


class NoOpExporter(SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def get_order() -> dict[str, Any]:
    return OUTPUT


def on_bundle(trace_id: str, bundle: dict[str, Any]) -> None:
    """Stands in for the store writer's submit (which only enqueues)."""


def setup_providers() -> tuple[TracerProvider, TracerProvider, FixtureSpanProcessor]:
    """The app's provider without tracely (for the bare span) and with it (global)."""
    plain = TracerProvider()
    plain.add_span_processor(BatchSpanProcessor(NoOpExporter(), max_queue_size=1 << 20))
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(NoOpExporter(), max_queue_size=1 << 20))
    recorder = FixtureSpanProcessor(on_bundle)
    provider.add_span_processor(recorder)
    trace.set_tracer_provider(provider)
    return plain, provider, recorder


def bare(tracer: trace.Tracer, calls: int) -> None:
    """What a careful engineer would write by hand: one span, the same attributes."""
    with tracer.start_as_current_span("invoke_agent bench"):
        for _ in range(calls):
            with tracer.start_as_current_span(
                "execute_tool get_order",
                attributes={
                    "tracely.kind": "tool",
                    "tracely.name": "get_order",
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_order",
                    "tracely.args": orjson.dumps(ARGS).decode(),
                },
            ) as span:
                out = get_order()
                span.set_attribute("tracely.output", orjson.dumps(out).decode())


def live(calls: int) -> None:
    with tracely.agent("bench"):
        for _ in range(calls):
            tracely.call_tool("get_order", get_order, args=ARGS)


def make_bundle(calls: int) -> dict[str, Any]:
    return {"tools": {"get_order": [{"args": ARGS, "output": OUTPUT} for _ in range(calls)]}}


def replayed(bundle: dict[str, Any], calls: int) -> None:
    with tracely.fixtures(bundle), tracely.agent("bench"):
        for _ in range(calls):
            tracely.call_tool("get_order", get_order, args=ARGS)


def replayed_in_ci(recorder: FixtureSpanProcessor, bundle: dict[str, Any], calls: int) -> None:
    recorder.remove_callback(on_bundle)  # tracely replay: init(record=False)
    try:
        replayed(bundle, calls)
    finally:
        recorder.add_callback(on_bundle)


def timed(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per round (default 2000)")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    opts = parser.parse_args()
    plain, provider, recorder = setup_providers()
    tracer = plain.get_tracer("bench")
    n = opts.calls
    bundle = make_bundle(n)
    small, large = make_bundle(1_000), make_bundle(10_000)

    variants: dict[str, Callable[[], None]] = {
        "bare": lambda: bare(tracer, n),
        "live": lambda: live(n),
        "replayed": lambda: replayed(bundle, n),
        "replayed_ci": lambda: replayed_in_ci(recorder, bundle, n),
        "replay_1k": lambda: replayed(small, 1_000),
        "replay_10k": lambda: replayed(large, 10_000),
    }
    for fn in variants.values():  # warm up imports, caches and the processor thread
        fn()
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(opts.rounds):
        for name, fn in variants.items():
            samples[name].append(timed(fn))
            plain.force_flush()
            provider.force_flush()
    med = {k: statistics.median(v) for k, v in samples.items()}
    per_call = {k: med[k] / n * 1e6 for k in ("bare", "live", "replayed", "replayed_ci")}
    print(f"per call (median of {opts.rounds} rounds of {n} calls):")
    for k, us in per_call.items():
        print(f"  {k:11s} {us:8.2f} us")
    live_ratio = med["live"] / med["bare"]
    replay_ratio = med["replayed"] / med["bare"]
    replay_ci_ratio = med["replayed_ci"] / med["bare"]
    linear = med["replay_10k"] / med["replay_1k"]
    print(f"live call_tool / bare span      = {live_ratio:5.2f}x  (target <= 1.50x)")
    print(
        f"replayed call_tool / bare span  = {replay_ratio:5.2f}x  (target <= 1.00x; recording too)"
    )
    print(f"  as tracely replay runs it (CI) = {replay_ci_ratio:5.2f}x  (target <= 1.00x)")
    print(f"replay 10k-call / 1k-call bundle = {linear:5.2f}x  (target <= 12x)")
    plain.shutdown()
    provider.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
