"""Provider patches: replay against vcrpy, and the live cost of auto-instrumentation.

Both measurements use the real ``openai`` SDK and the bundled local server
(``examples.llm_server``, run as a separate process so that it does not share this process's
interpreter lock). Every variant runs in the same process, in interleaved rounds; the median
and the best round are reported (the best is the least disturbed by other load on the
machine), and so is the median of each round's own ratio (the two sides of a round ran back to
back, so load that comes and goes over the run shifts both alike). Only the calls are timed:
opening a cassette or a ``fixtures()`` block, and ending an agent run, are left out on both
sides.

(a) One replayed ``client.chat.completions.create(...)``. One HTTP exchange with the local
server is recorded by both at once (vcrpy at the transport, tracely at ``create``); then the
server is stopped, so nothing can reach a network.

- *vcrpy*: vcrpy 9.4 hooks httpx2 (the HTTP library the SDK rides on) at
  ``httpx2.HTTPTransport.handle_request``, so the cassette is replayed under the real SDK,
  unchanged: each call goes through the SDK's whole request path (building the request, the
  retry loop, the client, vcrpy's request matching at the transport) and the SDK's own
  response parsing into a ``ChatCompletion``. The cassette is open (``allow_playback_repeats``).
- *tracely*: the patched ``create`` inside ``tracely.fixtures()`` and an agent run, as
  ``tracely replay`` runs a case: the matcher finds the entry and the codec rebuilds the
  ``ChatCompletion`` (pydantic ``model_validate``); the call's span goes through a real
  pipeline (a BatchSpanProcessor to a no-op exporter, and the FixtureSpanProcessor with no
  bundle callback, as under ``init(record=False)``). The same replay with tracing off (spans
  not sampled) is printed too.

  Both return equal ``ChatCompletion`` objects (checked). Target: tracely at least 30x faster.
  This is vcrpy's best case: one recorded exchange, played again and again. *vcrpy, same
  recording* is the fair counterpart of tracely's side (a recording of N calls, each served
  once): a cassette of the same N exchanges, recorded in one session, each played once. vcrpy
  compares every request with each recorded one, so its cost grows with the cassette; tracely
  serves the next entry. The target is judged on the best case.
  For scale, *seam floor* is the same entry replayed through ``tracely.call_llm`` (the generic
  call seam, no provider patch) followed by ``ChatCompletion.model_validate`` of the body: what
  a replayed call costs before anything provider-specific.

(b) The live overhead of ``tracely.init(instrument="openai")`` on a call to the local server:
the same ``create`` recorded by tracely (its span, ``tracely.input``/``output``, the
FixtureSpanProcessor making a bundle per call, each call being its own trace; and, second,
the calls inside one agent run) against the call with the SDK unpatched (``uninstrument()``
puts the original function back). Target: <= 1.10x. The recorder is attached as ``init()``
attaches it, extracting bundles on its own thread; the CPU column counts the process until
the pipeline was flushed, so that work is in it.

(c) Replay against live, per provider surface: one call made live to the local server (the
SDK unpatched) against the same call replayed from its recording with the server gone (inside
``fixtures()`` and an agent run), for ``openai`` ``chat.completions.create``, ``anthropic``
``messages.create``, ``anthropic`` ``beta.messages.create`` and ``google-genai``
``models.generate_content`` (each plain and streamed).
Printed as live / replay: how many times faster the replay is than the call it stands for.

(c) One MCP ``ClientSession.call_tool`` (the ``mcp`` SDK's client and its own server,
``examples.mcp_server``, over stdio): the call live, uninstrumented, against the same call
served by tracely inside ``fixtures()`` and an agent run (the recording of one live call,
served N times). Printed as live / replayed.

    python bench/providers.py [--calls N] [--rounds R]

Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402
import vcr  # noqa: E402
from openai.types.chat import ChatCompletion  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult  # noqa: E402

import tracely_sdk as tracely  # noqa: E402
from tracely_otel import FixtureSpanProcessor  # noqa: E402
from tracely_sdk import providers  # noqa: E402

MODEL = "gpt-4o"
TARGET_REPLAY = 30  # (a): replayed create at least this many times faster than vcrpy
MESSAGES = [
    {"role": "system", "content": "You are a weather assistant."},
    {"role": "user", "content": "What is the weather like in Paris this afternoon?"},
]


class NoOpExporter(SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class ServerProcess:
    """``python -m examples.llm_server`` on a free port, in its own process."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "examples.llm_server", "--port", str(self.port)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.process.stdout is not None
        self.process.stdout.readline()  # the base URL: it is listening
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(api_key="bench-key", base_url=base_url, max_retries=0)


def call(c: openai.OpenAI) -> Any:
    return c.chat.completions.create(model=MODEL, messages=MESSAGES)


def loop(n: int, fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU seconds (this process only) that ``n`` calls of ``fn`` take: the per-call
    cost, with setup and teardown left out."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn()
    return time.perf_counter() - wall, time.process_time() - cpu


class Switch(Sampler):
    """Samples every span while ``on``; none (non-recording spans, as with tracing off) else."""

    on = True

    def should_sample(
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: Any = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        # The span starts with the attributes the sampler passes on.
        decision = Decision.RECORD_AND_SAMPLE if self.on else Decision.DROP
        return SamplingResult(decision, attributes if self.on else None)

    def get_description(self) -> str:
        return "Switch"


SWITCH = Switch()
LAST_BUNDLE: list[dict[str, Any]] = []


def keep_bundle(trace_id: str, bundle: dict[str, Any]) -> None:
    # Only the latest: a store writer keeps none in memory. A list of every bundle of the run
    # (thousands) grows the heap the garbage collector walks, a cost of this script, not of
    # recording, and it fell on the instrumented variants only.
    LAST_BUNDLE[:] = [bundle]


RECORDER = FixtureSpanProcessor(keep_bundle, background=True)


def pipeline() -> TracerProvider:
    """A real pipeline: a BatchSpanProcessor to a no-op exporter and the FixtureSpanProcessor,
    attached as ``tracely.init()`` attaches it (extracting bundles on its own thread)."""
    provider = TracerProvider(sampler=SWITCH)
    provider.add_span_processor(BatchSpanProcessor(NoOpExporter(), max_queue_size=1 << 20))
    provider.add_span_processor(RECORDER)
    trace.set_tracer_provider(provider)
    return provider


def record_entry(base_url: str, provider: TracerProvider) -> dict[str, Any]:
    providers.instrument("openai")
    call(client(base_url))
    providers.uninstrument("openai")
    provider.force_flush()
    (entry,) = LAST_BUNDLE[-1]["llm"][MODEL]
    return {k: v for k, v in entry.items() if k != "seq"}


def interleaved(
    variants: dict[str, Callable[[], tuple[float, float]]], rounds: int, after: Callable[[], Any]
) -> dict[str, list[tuple[float, float]]]:
    """Each variant's (wall, CPU) timings over ``rounds`` interleaved rounds, after a warm-up."""
    for fn in variants.values():  # warm up imports, caches, connections
        fn()
        after()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            # Each variant starts on a collected heap: the garbage one leaves behind (vcrpy's
            # cassette of many exchanges) is not collected on the next one's time.
            gc.collect()
            wall, cpu = fn()
            # The process's CPU runs until the pipeline is flushed: work handed to the
            # recorder's thread (bundle extraction) counts too.
            flushing = time.process_time()
            after()
            samples[name].append((wall, cpu + time.process_time() - flushing))
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=300, help="calls per round (default 300)")
    parser.add_argument("--rounds", type=int, default=11, help="interleaved rounds (default 11)")
    opts = parser.parse_args()
    n = opts.calls

    server = ServerProcess()
    cassette = Path(tempfile.mkdtemp()) / "chat.yaml"
    session_cassette = cassette.with_name("session.yaml")
    provider = pipeline()
    try:
        with vcr.use_cassette(str(cassette), record_mode="once"):
            # One HTTP exchange, recorded by both: vcrpy at the transport, tracely at `create`.
            entry = record_entry(server.base_url, provider)
        live_client = client(server.base_url)
        with vcr.use_cassette(str(session_cassette), record_mode="once"):
            for _ in range(n):  # a session of n exchanges
                call(live_client)

        def plain() -> tuple[float, float]:
            return loop(n, lambda: call(live_client))

        def traced() -> tuple[float, float]:
            providers.instrument("openai")
            try:
                return loop(n, lambda: call(live_client))
            finally:
                providers.uninstrument("openai")

        def traced_in_agent() -> tuple[float, float]:
            providers.instrument("openai")
            try:
                with tracely.agent("bench"):
                    return loop(n, lambda: call(live_client))
            finally:
                providers.uninstrument("openai")

        live = interleaved(
            {"live_plain": plain, "live_traced": traced, "live_traced_in_agent": traced_in_agent},
            opts.rounds,
            provider.force_flush,
        )
        surfaces = surface_ratios(server, n, opts.rounds, provider)
    finally:
        server.stop()

    # (a) replay, the server gone; as `tracely replay` runs a case (init(record=False)): the
    # recorder is attached but records nothing
    RECORDER.remove_callback(keep_bundle)
    closed = client(server.base_url)
    bundle = {"llm": {MODEL: [entry] * n}}

    def vcr_calls() -> tuple[float, float]:
        with vcr.use_cassette(str(cassette), record_mode="none", allow_playback_repeats=True):
            return loop(n, lambda: call(closed))

    def vcr_session_calls() -> tuple[float, float]:
        with vcr.use_cassette(str(session_cassette), record_mode="none"):
            return loop(n, lambda: call(closed))

    def tracely_calls() -> tuple[float, float]:
        with tracely.fixtures(bundle), tracely.agent("bench"):
            return loop(n, lambda: call(closed))

    key = {"messages": MESSAGES}
    plain_entry = {k: v for k, v in entry.items() if k not in ("output_type", "provider")}
    plain_bundle = {"llm": {MODEL: [plain_entry] * n}}

    def seam_floor() -> tuple[float, float]:
        def one() -> Any:
            recorded = tracely.call_llm(MODEL, lambda: None, input=key)
            return ChatCompletion.model_validate(recorded["body"])

        with tracely.fixtures(plain_bundle), tracely.agent("bench"):
            return loop(n, one)

    def tracely_untraced() -> tuple[float, float]:
        SWITCH.on = False  # tracing off: the same replay, with non-recording spans
        try:
            return tracely_calls()
        finally:
            SWITCH.on = True

    # The same value both ways: the SDK's own ChatCompletion, equal to the live one.
    by_vcr, by_tracely = _one(closed, cassette), _one_tracely(bundle, closed)
    assert type(by_vcr) is type(by_tracely)
    assert by_vcr.model_dump() == by_tracely.model_dump()
    replayed = interleaved(
        {
            "vcrpy": vcr_calls,
            "vcrpy_same_recording": vcr_session_calls,
            "tracely": tracely_calls,
            "tracely_untraced": tracely_untraced,
            "seam_floor": seam_floor,
        },
        opts.rounds,
        provider.force_flush,
    )
    timings = {**replayed, **live}
    stats = {"median": statistics.median, "best": min}
    wall = {
        how: {name: pick(w for w, _ in values) / n * 1e6 for name, values in timings.items()}
        for how, pick in stats.items()
    }
    cpu = {
        name: statistics.median(c for _, c in values) / n * 1e6 for name, values in timings.items()
    }
    print(f"per call, over {opts.rounds} interleaved rounds of {n} calls:")
    print(f"  {'':22s} {'median':>10s} {'best':>10s} {'cpu, median':>12s}")
    for name in timings:
        print(
            f"  {name:22s} {wall['median'][name]:7.1f} us {wall['best'][name]:7.1f} us "
            f"{cpu[name]:9.1f} us"
        )
    for how in stats:
        w = wall[how]
        print(f"{how}:")
        print(
            f"  (a) replayed create, vcrpy / tracely            = "
            f"{w['vcrpy'] / w['tracely']:6.1f}x  (target >= {TARGET_REPLAY}x); "
            f"tracing off {w['vcrpy'] / w['tracely_untraced']:.1f}x; "
            f"seam floor {w['vcrpy'] / w['seam_floor']:.1f}x"
        )
        print(
            f"      vcrpy, same recording of {n} calls / tracely = "
            f"{w['vcrpy_same_recording'] / w['tracely']:6.1f}x"
        )
        print(
            f"  (b) live create, instrumented / uninstrumented  = "
            f"{w['live_traced'] / w['live_plain']:6.3f}x  (target <= 1.10x); "
            f"in one agent run {w['live_traced_in_agent'] / w['live_plain']:.3f}x"
        )

    def paired(over: str, under: str) -> float:
        rounds = zip(timings[over], timings[under], strict=True)
        return statistics.median(o / u for (o, _), (u, _) in rounds)

    print("paired (the median of each round's ratio):")
    replay_ratio = paired("vcrpy", "tracely")
    print(
        f"  (a) replayed create, vcrpy / tracely            = "
        f"{replay_ratio:6.1f}x  (target >= {TARGET_REPLAY}x: "
        f"{'met' if replay_ratio >= TARGET_REPLAY else 'not met'}); "
        f"tracing off {paired('vcrpy', 'tracely_untraced'):.1f}x; "
        f"seam floor {paired('vcrpy', 'seam_floor'):.1f}x"
    )
    print(
        f"  (b) live create, instrumented / uninstrumented  = "
        f"{paired('live_traced', 'live_plain'):6.3f}x  (target <= 1.10x); "
        f"in one agent run {paired('live_traced_in_agent', 'live_plain'):.3f}x"
    )
    print("(c) live / replay, per surface (the median of each round's ratio; higher is faster):")
    for name, ratio in surfaces.items():
        print(f"  {name:36s} = {ratio:6.1f}x")

    mcp_replay_ratio(n, opts.rounds, provider)
    provider.shutdown()
    return 0


def _surfaces() -> dict[str, tuple[str, Callable[[Any], Any], Callable[[str], Any]]]:
    """Each surface: (provider name, the call, a client for a base URL)."""
    import anthropic
    from google import genai
    from google.genai import types

    user = [{"role": "user", "content": "What is the weather like in Paris this afternoon?"}]

    def chat(c: Any) -> Any:
        return c.chat.completions.create(model=MODEL, messages=MESSAGES)

    def chat_stream(c: Any) -> Any:
        return list(c.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True))

    def messages(beta: bool, stream: bool) -> Callable[[Any], Any]:
        def one(c: Any) -> Any:
            surface = c.beta.messages if beta else c.messages
            result = surface.create(model=MODEL, max_tokens=256, messages=user, stream=stream)
            return list(result) if stream else result

        return one

    gemini_config = types.GenerateContentConfig(system_instruction=MESSAGES[0]["content"])

    def generate(stream: bool) -> Callable[[Any], Any]:
        def one(c: Any) -> Any:
            if stream:
                chunks = c.models.generate_content_stream(
                    model=MODEL, contents=MESSAGES[1]["content"], config=gemini_config
                )
                return list(chunks)
            return c.models.generate_content(
                model=MODEL, contents=MESSAGES[1]["content"], config=gemini_config
            )

        return one

    def stainless(cls: Any) -> Callable[[str], Any]:
        return lambda base: cls(api_key="bench-key", base_url=base, max_retries=0)

    def gemini(base: str) -> Any:
        return genai.Client(api_key="bench-key", http_options=types.HttpOptions(base_url=base))

    return {
        "openai chat.completions.create": ("openai", chat, stainless(openai.OpenAI)),
        "openai chat.completions (stream)": ("openai", chat_stream, stainless(openai.OpenAI)),
        "anthropic messages.create": (
            "anthropic",
            messages(False, False),
            stainless(anthropic.Anthropic),
        ),
        "anthropic messages (stream)": (
            "anthropic",
            messages(False, True),
            stainless(anthropic.Anthropic),
        ),
        "anthropic beta.messages.create": (
            "anthropic",
            messages(True, False),
            stainless(anthropic.Anthropic),
        ),
        "anthropic beta.messages (stream)": (
            "anthropic",
            messages(True, True),
            stainless(anthropic.Anthropic),
        ),
        "google-genai generate_content": ("google", generate(False), gemini),
        "google-genai generate_content_stream": ("google", generate(True), gemini),
    }


def surface_ratios(
    server: ServerProcess, n: int, rounds: int, provider: TracerProvider
) -> dict[str, float]:
    """(c): each surface's live / replay ratio, the median of interleaved rounds."""
    root = server.base_url.removesuffix("/v1")
    out: dict[str, float] = {}
    for name, (sdk, one, make_client) in _surfaces().items():
        base = server.base_url if sdk == "openai" else root
        live_client = make_client(base)
        closed = make_client("http://127.0.0.1:9")
        providers.instrument(sdk)
        one(live_client)
        providers.uninstrument(sdk)
        provider.force_flush()
        (entry,) = next(iter(LAST_BUNDLE[-1]["llm"].values()))
        entry = {k: v for k, v in entry.items() if k != "seq"}
        bundle = {"llm": {MODEL: [entry] * n}}

        def live(live_client: Any = live_client, one: Any = one) -> tuple[float, float]:
            return loop(n, lambda: one(live_client))

        def replay(
            bundle: Any = bundle, closed: Any = closed, one: Any = one
        ) -> tuple[float, float]:
            # As `tracely replay` runs a case: the recorder attached, recording nothing.
            RECORDER.remove_callback(keep_bundle)
            try:
                with tracely.fixtures(bundle), tracely.agent("bench"):
                    return loop(n, lambda: one(closed))
            finally:
                RECORDER.add_callback(keep_bundle)

        timings = interleaved({"live": live, "replay": replay}, rounds, provider.force_flush)
        pairs = zip(timings["live"], timings["replay"], strict=True)
        out[name] = statistics.median(lv / rp for (lv, _), (rp, _) in pairs)
    return out


def mcp_replay_ratio(n: int, rounds: int, provider: TracerProvider) -> None:
    """(c): MCP call_tool live against replayed; prints the ratio."""
    import asyncio

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    root = Path(__file__).resolve().parents[1]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "examples.mcp_server"], cwd=root
    )
    args = {"city": "Oslo"}

    async def run() -> dict[str, list[float]]:
        async with stdio_client(params) as streams, ClientSession(*streams) as session:
            await session.initialize()
            RECORDER.add_callback(keep_bundle)
            providers.instrument("mcp")
            with tracely.agent("bench-mcp"):
                live_value = await session.call_tool("get_weather", args)
            providers.uninstrument("mcp")
            provider.force_flush()
            RECORDER.remove_callback(keep_bundle)
            (entry,) = LAST_BUNDLE[-1]["tools"]["get_weather"]
            bundle = {"tools": {"get_weather": [entry] * n}}

            async def live() -> float:
                start = time.perf_counter()
                for _ in range(n):
                    await session.call_tool("get_weather", args)
                return time.perf_counter() - start

            async def replayed() -> float:
                with tracely.fixtures(bundle), tracely.agent("bench-mcp"):
                    start = time.perf_counter()
                    for _ in range(n):
                        value = await session.call_tool("get_weather", args)
                    elapsed = time.perf_counter() - start
                assert type(value) is type(live_value) and value == live_value
                return elapsed

            samples: dict[str, list[float]] = {"live": [], "replayed": []}
            await live()
            await replayed()
            for _ in range(rounds):
                gc.collect()
                samples["live"].append(await live())
                gc.collect()
                samples["replayed"].append(await replayed())
                provider.force_flush()
            return samples

    samples = asyncio.run(run())
    live_us = statistics.median(samples["live"]) / n * 1e6
    replay_us = statistics.median(samples["replayed"]) / n * 1e6
    paired = statistics.median(
        lv / rp for lv, rp in zip(samples["live"], samples["replayed"], strict=True)
    )
    print(
        f"  (c) MCP call_tool over stdio, live {live_us:.1f} us / replayed {replay_us:.1f} us "
        f"= {live_us / replay_us:6.1f}x  (paired {paired:.1f}x)"
    )


def _one(closed: openai.OpenAI, cassette: Path) -> Any:
    with vcr.use_cassette(str(cassette), record_mode="none", allow_playback_repeats=True):
        return call(closed)


def _one_tracely(bundle: dict[str, Any], closed: openai.OpenAI) -> Any:
    with tracely.fixtures({"llm": {MODEL: bundle["llm"][MODEL][:1]}}):
        return call(closed)


if __name__ == "__main__":
    raise SystemExit(main())
