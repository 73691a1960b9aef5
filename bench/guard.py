"""What strict replay's network guard costs, measured side by side in one run, printed as ratios.

- per connection: ``socket.create_connection`` to a server on 127.0.0.1 and close, with the
  guard's audit hook installed and no replay active (what a process pays after its first strict
  block, outside any: the baseline), inside a strict block that allows the host (every check
  made, the connection let through), a refused attempt (the check, the stack read that names
  the library, the ReplayError), and the hook's checks for one connection's events by
  themselves (a loopback connection is noisy; the checks alone are not); and, measured first,
  before the hook is installed;
- per audit event with no replay active: any audited operation (``sys._getframe`` here, the
  cheapest) pays one call of the hook that returns at once;
- per replayed case: a strict ``fixtures()`` block serving a 10-call agent, with the guard
  against the same block with the guard replaced by a no-op (and ``allow_network`` not read),
  and the guard's part by itself (reading the setting, entering and leaving the guard).

The hook cannot be removed once installed, so the floors are measured first, then the rest;
rounds of the variants after that are interleaved and the median is reported. Last, the cost
per allowed connection and per replayed case are printed beside each other: each part alone,
and the difference of the two totals it was measured between (on a loaded machine a small
difference of two totals can come out below zero; the part alone is the steadier figure).

    python bench/guard.py [--connections N] [--rounds R]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tracely_sdk as tracely
from tracely_sdk import _config, _network_guard, _replay

BUNDLE = {"tools": {"get_order": [{"args": {"id": i}, "output": {"n": i}} for i in range(10)]}}


@contextlib.contextmanager
def server() -> Iterator[tuple[str, int]]:
    """A TCP server on 127.0.0.1 that accepts and closes every connection."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                listener.accept()[0].close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", listener.getsockname()[1]
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            socket.create_connection(listener.getsockname()).close()
        thread.join(2)
        listener.close()


def connections(address: tuple[str, int], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        socket.create_connection(address).close()
    return (time.perf_counter() - start) / n


def refusals(address: tuple[str, int], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        with contextlib.suppress(tracely.ReplayError):
            socket.create_connection(address)
    return (time.perf_counter() - start) / n


def frames(n: int) -> float:
    getframe = sys._getframe
    start = time.perf_counter()
    for _ in range(n):
        getframe(0)
    return (time.perf_counter() - start) / n


def case() -> None:
    with tracely.fixtures(BUNDLE), tracely.agent("bench"):
        for i in range(10):
            tracely.call_tool("get_order", lambda: None, args={"id": i})


def cases(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        case()
    return (time.perf_counter() - start) / n


class NoGuard:
    """The guard's place in ``fixtures()``, doing nothing: the unguarded case."""

    def __init__(self, *args: Any) -> None:
        pass

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        pass


def empty_hook(event: str, args: tuple[Any, ...]) -> None:
    pass


def median(fn: Callable[[], float], rounds: int) -> float:
    return statistics.median(fn() for _ in range(rounds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=200, help="per round (default 200)")
    parser.add_argument("--rounds", type=int, default=21, help="rounds (default 21)")
    opts = parser.parse_args()
    n, rounds = opts.connections, opts.rounds
    events = n * 200
    with server() as address:
        allowed = [f"{address[0]}:{address[1]}"]
        connections(address, n)  # warm up
        floor = median(lambda: connections(address, n), rounds)
        frame_floor = median(lambda: frames(events), rounds)
        sys.addaudithook(empty_hook)  # what any Python audit hook costs, to compare with
        empty = median(lambda: frames(events), rounds)

        with tracely.fixtures({}):  # installs the hook, for the rest of the process
            pass
        assert _network_guard._installed

        def strict_allowed() -> float:
            with tracely.fixtures({}, allow_network=allowed):
                return connections(address, n)

        probe = socket.socket()

        def checks_alone() -> float:
            """The hook's work for one connection's events (a lookup, a connect), by itself."""
            lookup = ("socket.getaddrinfo", (address[0], address[1], 0, socket.SOCK_STREAM, 0))
            connect = ("socket.connect", (probe, address))
            with tracely.fixtures({}, allow_network=allowed):
                start = time.perf_counter()
                for _ in range(n * 20):
                    _network_guard._audit(*lookup)
                    _network_guard._audit(*connect)
                return (time.perf_counter() - start) / (n * 20)

        def strict_refused() -> float:
            with tracely.fixtures({}) as rep:
                took = refusals(address, n)
            assert len(rep.refused) == n
            return took

        def unguarded_cases() -> float:
            real_guard, real_resolve = _network_guard.Guard, _config.resolve

            def resolve(name: str, *args: Any, **kwargs: Any) -> Any:
                return () if name == "allow_network" else real_resolve(name, *args, **kwargs)

            _network_guard.Guard = NoGuard  # type: ignore[assignment,misc]
            _config.resolve = resolve
            try:
                return cases(n)
            finally:
                _network_guard.Guard = real_guard  # type: ignore[misc]
                _config.resolve = real_resolve

        def guard_alone() -> float:
            """What the guard adds to a case by itself: reading allow_network, entering, leaving."""
            report = _replay.ReplayReport("recorded")
            start = time.perf_counter()
            for _ in range(n * 5):
                with _network_guard.Guard(report, _config.resolve("allow_network")):
                    pass
            return (time.perf_counter() - start) / (n * 5)

        variants: dict[str, Callable[[], float]] = {
            "idle": lambda: connections(address, n),
            "allowed": strict_allowed,
            "refused": strict_refused,
            "checks": checks_alone,
            "idle_events": lambda: frames(events),
            "case": lambda: cases(n),
            "guard_alone": guard_alone,
            "case_unguarded": unguarded_cases,
        }
        for fn in variants.values():
            fn()
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, fn in variants.items():
                samples[name].append(fn())
        got = {name: statistics.median(values) for name, values in samples.items()}

    def row(label: str, value: float, base: float) -> None:
        print(f"  {label:<58} {value * 1e6:9.2f} us  {value / base:6.3f}x")

    print(f"network guard, medians of {rounds} rounds (per item; ratio to its baseline)")
    print("per connection (create_connection + close, 127.0.0.1), rounds interleaved:")
    row("hook installed, no replay active (baseline)", got["idle"], got["idle"])
    row("strict replay, host allowed (checked, let through)", got["allowed"], got["idle"])
    row("strict replay, refused (ReplayError raised and recorded)", got["refused"], got["idle"])
    row("the guard's checks alone for one allowed connection", got["checks"], got["idle"])
    print("  measured before the hook was installed (not interleaved: the hook stays once in):")
    row("no hook installed", floor, got["idle"])
    print("per audited event with no replay active (sys._getframe):")
    ours = got["idle_events"] - empty
    row("floor: no hook", frame_floor, frame_floor)
    row("an empty Python audit hook", empty, frame_floor)
    row("the empty hook and the guard's, no replay active", got["idle_events"], frame_floor)
    print(f"  {'the guard hook alone, per event':<58} {ours * 1e9:9.1f} ns")
    print(f"  {'an empty hook alone, per event':<58} {(empty - frame_floor) * 1e9:9.1f} ns")
    print("per replayed case (strict fixtures(), 10 served tool calls):")
    row(
        "unguarded (no guard, allow_network not read)", got["case_unguarded"], got["case_unguarded"]
    )
    row("guarded", got["case"], got["case_unguarded"])
    row(
        "the guard alone (allow_network read, entered, left)",
        got["guard_alone"],
        got["case_unguarded"],
    )
    # The two costs a user weighs, side by side: each connection a replay lets through, and
    # each case it replays; the differences of two interleaved totals beside the parts alone.
    print("the guard's cost, per connection beside per replayed case:")
    print(
        f"  {'':24} {'alone':>10} {'difference of the totals':>26}\n"
        f"  {'per allowed connection':24} {got['checks'] * 1e6:7.2f} us "
        f"{(got['allowed'] - got['idle']) * 1e6:+23.2f} us  (strict allowed - baseline)\n"
        f"  {'per replayed case':24} {got['guard_alone'] * 1e6:7.2f} us "
        f"{(got['case'] - got['case_unguarded']) * 1e6:+23.2f} us  (guarded - unguarded)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
