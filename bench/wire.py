"""The HTTP wire path replayed: tracely against vcrpy, the same exchange, the same client.

Tracely records and serves model calls at the HTTP client (``httpx.Client.send``, urllib3's
``HTTPConnectionPool.urlopen`` beneath requests, ``httpx2.Client.send`` beneath the OpenAI SDK);
vcrpy replays cassettes at the same libraries. For each client below, one chat-completions
exchange with the bundled local server (``examples.llm_server``, in its own process) is recorded
by both at once (tracely's hook on that client live, as ``tracely.init(instrument=...)``
records it, and a vcrpy cassette beneath it); then the server is stopped, so nothing can reach a network, and
N replayed calls are timed each way, in alternating rounds in this one process:

- *vcrpy*: ``vcr.use_cassette(..., record_mode="none", allow_playback_repeats=True)``, one
  exchange played again and again (vcrpy's best case: it compares each request with every
  recorded one, so a cassette of N exchanges costs it more);
- *tracely*: the same call inside ``tracely.fixtures()`` and an agent run, as ``tracely replay``
  runs a case: the hook matches the request to the next recorded entry and gives the client a
  response of its own library made of the recorded bytes; the call's span goes through a real
  pipeline (a BatchSpanProcessor to a no-op exporter, and the FixtureSpanProcessor, recording
  nothing, as under ``init(record=False)``). The same replay with spans not sampled is printed
  too.

Clients: a raw ``httpx.Client().post(...)`` to ``/v1/chat/completions``, ``requests.Session``
(urllib3), and the OpenAI SDK's ``chat.completions.create`` (httpx2, where tracely records and
serves the SDK's calls). Both sides return the same JSON body
(checked). Beside them, *client floor*: the same client on an in-memory transport
(``MockTransport``) answering the recorded response, no replay tool at all: what the client
itself costs per call (building the request, reading the response; the SDK's too), which
vcrpy, answering at the transport, pays too, so vcrpy / floor is the most a replay there can
gain on it. Tracely answers at ``send``, before the transport and httpx's authentication and
redirect handling, so with spans not sampled it can come out below the floor. Each tool's
cost above the floor is printed too (requests has no in-memory transport of its own: no floor
is printed for it). Printed: calls/s and µs per call (median and best round), and the median
of each round's vcrpy / tracely ratio beside the goal (at least 20x faster). Only the calls are timed:
opening a cassette or a ``fixtures()`` block is left out on both sides. Asserts nothing.

With ``--instructions`` each variant instead runs in a child process under valgrind's callgrind,
making 1 call and 1 + ``--calls`` calls (the same recording open in both), and the difference
of the two instruction counts is its cost per call: a count the machine's load does not change.
Each child takes tens of seconds; ``--clients httpx --calls 50`` keeps it to a few minutes.

    python bench/wire.py [--calls N] [--rounds R] [--clients httpx,requests,openai]
                         [--instructions]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# The helpers of bench/providers.py: the server process, the pipeline, the timed loop.
import providers as bench
import vcr

import tracely_sdk as tracely
from tracely_sdk import providers

GOAL = 20  # a replayed call at the wire at least this many times faster than vcrpy's
BODY = {"model": bench.MODEL, "messages": bench.MESSAGES}


def _answer(module: Any, output: dict[str, Any]) -> Any:
    """A transport answering every request with the recorded response, from memory."""
    body = json.dumps(output["body"]).encode()
    headers = list(output["headers"].items())
    return module.MockTransport(lambda request: module.Response(200, headers=headers, content=body))


def _httpx(base_url: str, floor: dict[str, Any] | None = None) -> Callable[[], Any]:
    import httpx

    transport = _answer(httpx, floor) if floor else None
    client = httpx.Client(headers={"authorization": "Bearer bench-key"}, transport=transport)
    url = f"{base_url}/chat/completions"
    return lambda: client.post(url, json=BODY).json()


def _requests(base_url: str, floor: dict[str, Any] | None = None) -> Callable[[], Any] | None:
    if floor:
        return None  # no in-memory transport of its own to compare with
    import requests

    session = requests.Session()
    session.headers["authorization"] = "Bearer bench-key"
    url = f"{base_url}/chat/completions"
    return lambda: session.post(url, json=BODY).json()


def _openai(base_url: str, floor: dict[str, Any] | None = None) -> Callable[[], Any]:
    import httpx2
    import openai

    if floor:
        http = httpx2.Client(transport=_answer(httpx2, floor))
        client = openai.OpenAI(
            api_key="bench-key", base_url=base_url, max_retries=0, http_client=http
        )
    else:
        client = bench.client(base_url)
    return lambda: bench.call(client).model_dump()


# name: (the hook that records it, what makes the call against a base URL: with a recorded
# output, the same client on an in-memory transport answering it, or None)
CLIENTS: dict[str, tuple[str, Callable[..., Callable[[], Any] | None]]] = {
    "httpx": ("httpx", _httpx),
    "requests": ("urllib3", _requests),
    "openai": ("httpx2", _openai),
}


VARIANTS = ("vcrpy", "tracely", "tracely, untraced", "client floor")


def _replaying(variant: str, client: str, folder: Path, size: int) -> contextlib.ExitStack:
    """What a variant's calls run inside: vcrpy's cassette, or a fixtures() block and an
    agent run (``size`` recorded calls, the same for every count of calls made)."""
    stack = contextlib.ExitStack()
    if variant == "vcrpy":
        cassette = str(folder / f"{client}.yaml")
        stack.enter_context(
            vcr.use_cassette(cassette, record_mode="none", allow_playback_repeats=True)
        )
    elif variant.startswith("tracely"):
        entry = json.loads((folder / f"{client}.json").read_text())
        stack.enter_context(tracely.fixtures({"llm": {bench.MODEL: [entry] * size}}))
        stack.enter_context(tracely.agent("bench"))
    return stack


def _child(client: str, variant: str, folder: Path, calls: int, size: int) -> None:
    """Runs under callgrind: ``calls`` replayed calls of one variant, set up as in the timed
    run (the pipeline, the recorder recording nothing, spans not sampled when untraced)."""
    provider = bench.pipeline()
    bench.RECORDER.remove_callback(bench.keep_bundle)
    bench.SWITCH.on = variant != "tracely, untraced"
    base_url = (folder / "base_url").read_text()
    floor = json.loads((folder / f"{client}.json").read_text())["output"]
    one = CLIENTS[client][1](base_url, floor if variant == "client floor" else None)
    with _replaying(variant, client, folder, size):
        for _ in range(calls):
            one()
    provider.force_flush()


def _by_instructions(chosen: list[str], folder: Path, calls: int) -> None:
    """Each variant's instructions per call: a child under callgrind making 1 call and one
    making 1 + ``calls``, the difference divided by ``calls`` (bench/peers.py's way)."""
    print("a replayed chat completion at the HTTP client, instructions per call (callgrind,")
    print(f"{calls} calls; the server gone):")
    for client in chosen:
        counts: dict[str, float] = {}
        for variant in VARIANTS:
            output = json.loads((folder / f"{client}.json").read_text())["output"]
            if (
                variant == "client floor"
                and CLIENTS[client][1]("http://127.0.0.1:9", output) is None
            ):
                continue
            args = ["--child", client, "--variant", variant, "--folder", str(folder)]
            one, more = (
                instructions([*args, "--calls", str(k), "--size", str(1 + calls)])
                for k in (1, 1 + calls)
            )
            counts[variant] = (more - one) / calls
        for variant, count in counts.items():
            ratio = ""
            if variant != "vcrpy":
                times = counts["vcrpy"] / count
                ratio = (
                    f"   {times:6.1f}x  (vcrpy's floor: the most a replay at the transport can gain)"
                    if variant == "client floor"
                    else f"   {times:6.1f}x  (goal >= {GOAL}x: {'met' if times >= GOAL else 'not met'})"
                )
            print(f"  {client:9s} {variant:18s} {count / 1e3:9.1f} K{ratio}")
        if "client floor" in counts:
            floor = counts["client floor"]
            print(
                f"  {client:9s} above the floor: vcrpy {(counts['vcrpy'] - floor) / 1e3:+.1f} K, "
                f"tracely {(counts['tracely'] - floor) / 1e3:+.1f} K, untraced "
                f"{(counts['tracely, untraced'] - floor) / 1e3:+.1f} K"
            )


def instructions(args: list[str]) -> int:
    """The instructions this script run with ``args`` executes, in all (every thread)."""
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    out = subprocess.run(
        [*valgrind, sys.executable, __file__, *args],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(bench.ROOT)},
    )
    for line in out.stderr.decode().splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1].strip())
    raise RuntimeError(f"callgrind printed no instruction count for {args}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200, help="calls per round (default 200)")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (default 7)")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count each variant's instructions per call under callgrind instead (needs valgrind)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        _child(opts.child, opts.variant, Path(opts.folder), opts.calls, opts.size)
        return 0
    if opts.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind (apt-get install valgrind)")
    chosen = [c for c in opts.clients.split(",") if c]
    unknown = set(chosen) - set(CLIENTS)
    if unknown:
        parser.error(f"unknown client(s) {sorted(unknown)}; choose from {', '.join(CLIENTS)}")
    n = opts.calls

    server = bench.ServerProcess()
    folder = Path(tempfile.mkdtemp())
    provider = bench.pipeline()
    entries: dict[str, dict[str, Any]] = {}
    try:
        for name in chosen:
            hook, make = CLIENTS[name]
            one = make(server.base_url)
            # One exchange, recorded by both at once: tracely at the client's send, vcrpy
            # beneath it (httpx's transport, urllib3's connection).
            with vcr.use_cassette(str(folder / f"{name}.yaml"), record_mode="once"):
                providers.instrument(hook)
                one()
                providers.uninstrument(hook)
            provider.force_flush()
            (entry,) = bench.LAST_BUNDLE[-1]["llm"][bench.MODEL]
            assert entry["output_type"] == "http.response", entry  # recorded at the client
            entries[name] = {k: v for k, v in entry.items() if k != "seq"}
            (folder / f"{name}.json").write_text(json.dumps(entries[name]))
    finally:
        server.stop()
    bench.RECORDER.remove_callback(bench.keep_bundle)  # as `tracely replay` runs a case
    (folder / "base_url").write_text(server.base_url)
    if opts.instructions:
        _by_instructions(chosen, folder, opts.calls)
        return 0

    print(f"a replayed chat completion at the HTTP client, {opts.rounds} alternating rounds")
    print(f"of {n} calls (the server gone); wall time per call:")
    print(
        f"  {'client':9s} {'variant':18s} {'calls/s':>9s} {'median':>10s} {'best':>10s}"
        f"   vcrpy / this (paired)"
    )
    for name in chosen:
        one = CLIENTS[name][1](server.base_url)
        cassette = str(folder / f"{name}.yaml")

        def by_vcrpy(one: Any = one, name: str = name) -> tuple[float, float]:
            with _replaying("vcrpy", name, folder, n):
                return bench.loop(n, one)

        def by_tracely(one: Any = one, name: str = name) -> tuple[float, float]:
            with _replaying("tracely", name, folder, n):
                return bench.loop(n, one)

        def untraced(one: Any = one, name: str = name) -> tuple[float, float]:
            bench.SWITCH.on = False
            try:
                return by_tracely(one, name)
            finally:
                bench.SWITCH.on = True

        with vcr.use_cassette(cassette, record_mode="none", allow_playback_repeats=True):
            via_vcrpy = one()
        with tracely.fixtures({"llm": {bench.MODEL: [entries[name]]}}) as report:
            via_tracely = one()
        assert report.served == [f"llm:{bench.MODEL}"], report.served
        assert via_vcrpy == via_tracely, (via_vcrpy, via_tracely)

        variants = {"vcrpy": by_vcrpy, "tracely": by_tracely, "tracely, untraced": untraced}
        in_memory = CLIENTS[name][1](server.base_url, entries[name]["output"])
        if in_memory is not None:
            assert in_memory() == via_vcrpy
            variants["client floor"] = lambda in_memory=in_memory: bench.loop(n, in_memory)
        gc.collect()
        timings = bench.interleaved(variants, opts.rounds, provider.force_flush)
        walls = {variant: [w for w, _ in values] for variant, values in timings.items()}
        for variant, values in walls.items():
            median = statistics.median(values) / n
            ratio = ""
            if variant == "client floor":
                paired = statistics.median(
                    v / t for v, t in zip(walls["vcrpy"], values, strict=True)
                )
                ratio = f"   {paired:6.1f}x  (vcrpy's floor: the most a replay at the transport can gain)"
            elif variant != "vcrpy":
                paired = statistics.median(
                    v / t for v, t in zip(walls["vcrpy"], values, strict=True)
                )
                verdict = "met" if paired >= GOAL else "not met"
                ratio = f"   {paired:6.1f}x  (goal >= {GOAL}x: {verdict})"
            print(
                f"  {name:9s} {variant:18s} {1 / median:9.0f} {median * 1e6:7.1f} us "
                f"{min(values) / n * 1e6:7.1f} us{ratio}"
            )
        if "client floor" in walls:
            floor = statistics.median(walls["client floor"])
            added = {v: statistics.median(walls[v]) - floor for v in walls}
            print(
                f"  {name:9s} above the floor (medians): vcrpy {added['vcrpy'] * 1e6 / n:+.1f} us, "
                f"tracely {added['tracely'] * 1e6 / n:+.1f} us, untraced "
                f"{added['tracely, untraced'] * 1e6 / n:+.1f} us"
            )
    provider.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
