"""The seed corpus: real traces of the reference agent, in every form tracely reads.

Each of the agent's paths (the fixed run, the broken one, a tool failure handled) is run live
once; its finished spans become an OTLP/protobuf request, an OTLP/JSON request, the extracted
bundle and a case file promoted from it. The fuzz properties and ``fuzz.py`` mutate these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from tracely_otel import bundle_from_spans, record_from_readable
from tracely_otel._otlp import encode_records_otlp_json
from tracely_sdk.store import Recording
from tracely_sdk.store._base import plan_promotion
from tracely_sdk.store._files import case_file_bytes

# (entrypoint, city): the paths the reference agent takes
RUNS: tuple[tuple[str, str], ...] = (
    ("run", "Paris"),
    ("run", "Oslo"),
    ("run_broken", "Lisbon"),
    ("run_handles", "Atlantis"),  # the tool fails, and the agent says so
)


@dataclass
class Corpus:
    """Seed inputs by target: ``otlp-proto``, ``otlp-json``, ``bundle``, ``case-file``."""

    seeds: dict[str, list[bytes]] = field(default_factory=dict)

    def add(self, target: str, data: bytes) -> None:
        self.seeds.setdefault(target, []).append(data)


def run_reference_agent(
    spans_of: Callable[[Callable[[], Any]], Sequence[ReadableSpan]],
) -> list[list[ReadableSpan]]:
    """The finished spans of each of :data:`RUNS`; ``spans_of(fn)`` runs ``fn`` and returns
    the spans it ended (from whatever exporter the caller set up)."""
    from examples import weather_agent

    runs = []
    for entrypoint, city in RUNS:
        fn = getattr(weather_agent, entrypoint)
        runs.append(list(spans_of(lambda fn=fn, city=city: fn(city))))
    return runs


def build(runs: Iterable[Sequence[ReadableSpan]]) -> Corpus:
    """The seed corpus made from the spans of real runs."""
    corpus = Corpus()
    for spans in runs:
        corpus.add("otlp-proto", encode_spans(spans).SerializeToString())
        records = [record_from_readable(s) for s in spans]
        corpus.add("otlp-json", orjson.dumps(encode_records_otlp_json(records)))
        bundle = bundle_from_spans(records)
        assert bundle is not None, "the reference agent's trace has a bundle"
        corpus.add("bundle", orjson.dumps(bundle))
        recording = Recording.from_bundle(bundle)
        case, version = plan_promotion(
            recording,
            case_id="seed",
            name="seed case",
            entrypoint="examples.weather_agent:run",
            tags=["fuzz"],
            now=1_700_000_000_000_000_000,
            exists=lambda _: False,
        )
        corpus.add("case-file", case_file_bytes(case, [version]))
    return corpus
