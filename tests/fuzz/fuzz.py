"""Fuzz tracely's inputs for longer than the test suite does.

    python tests/fuzz/fuzz.py TARGET [libFuzzer flags]   # coverage-guided, under atheris
    python tests/fuzz/fuzz.py TARGET --runs 20000        # without atheris: the suite's mutations

TARGET is ``otlp-proto`` or ``otlp-json`` (bodies for the OTLP receiver and ``traces import``,
through the decoders, the extractor and the store), ``bundle`` (``fixtures()`` and replay of
every recorded call) or ``case-file`` (``tracely cases import``). The seed corpus is recorded
fresh from the reference agent (``examples/weather_agent.py``) on every start and written to
``--corpus`` (a temporary directory by default), where libFuzzer also keeps what it finds.
Install atheris with ``pip install 'tracely-replay[fuzz]'`` (it ships wheels for Linux and macOS).

A finding is any exception other than the documented error types, an extracted bundle its own
validator refuses, a recording the store cannot hold, or extraction work that grows faster
than the spans (each check is in ``fuzz_targets.py``). libFuzzer's ``-timeout`` (10 s here,
unless given) reports an input that takes too long.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

try:
    import atheris
except ImportError:  # the fallback below needs only the dev extras
    atheris = None


def _record_corpus() -> Any:
    from fuzz_corpus import build, run_reference_agent
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    def spans_of(fn: Any) -> list[Any]:
        exporter.clear()
        fn()
        return list(exporter.get_finished_spans())

    corpus = build(run_reference_agent(spans_of))
    provider.shutdown()  # the spans of fuzzed replays are not kept: memory stays flat
    return corpus


def _with_atheris(target: str, seeds: list[bytes], corpus: Path, flags: list[str]) -> None:
    assert atheris is not None
    from fuzz_targets import TARGETS  # instrumented: imported first under main()

    check = TARGETS[target]
    if not any(f.startswith("-timeout=") for f in flags):
        flags.append("-timeout=10")
    atheris.Setup([sys.argv[0], *flags, str(corpus)], check)
    atheris.Fuzz()


def _with_hypothesis(target: str, seeds: list[bytes], runs: int) -> None:
    from fuzz_mutations import mutations
    from fuzz_targets import TARGETS
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    check = TARGETS[target]
    slowest: list[tuple[float, int]] = []

    @settings(
        max_examples=runs,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def one(data: st.DataObject) -> None:
        seed = data.draw(st.sampled_from(seeds))
        value = data.draw(mutations(target, seed))
        started = time.perf_counter()
        check(value)
        slowest.append((time.perf_counter() - started, len(value)))
        slowest.sort(reverse=True)
        del slowest[5:]

    one()
    print(f"{target}: {runs} mutated inputs, no finding; slowest (seconds, bytes): {slowest}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=["otlp-proto", "otlp-json", "bundle", "case-file"])
    parser.add_argument("--corpus", type=Path, help="where the seeds are written")
    parser.add_argument("--runs", type=int, default=0, help="use the fallback, for N inputs")
    args, flags = parser.parse_known_args(argv)
    if atheris is not None and not args.runs:
        # Coverage guidance needs tracely's modules instrumented as they are first imported.
        with atheris.instrument_imports(include=["tracely_otel", "tracely_sdk"]):
            import fuzz_corpus  # noqa: F401
            import fuzz_targets  # noqa: F401
    seeds = _record_corpus().seeds[args.target]
    if atheris is None or args.runs:
        _with_hypothesis(args.target, seeds, args.runs or 10_000)
        return 0
    corpus = args.corpus or Path(tempfile.mkdtemp(prefix=f"tracely-fuzz-{args.target}-"))
    corpus.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(seeds):
        (corpus / f"seed-{i}").write_bytes(seed)
    _with_atheris(args.target, seeds, corpus, flags)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
