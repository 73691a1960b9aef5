"""Recordings and bundles for the store tests."""

from __future__ import annotations

import hashlib
from typing import Any

from tracely_otel._bundle import FORMAT, seal
from tracely_sdk.store import Recording, SQLiteStore


def trace_id(n: int | str) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()[:32]


def make_bundle(
    tid: str,
    *,
    city: str = "Paris",
    output: Any = "Sunny in Paris",
    tools: int = 1,
    agent: bool = True,
    with_input: bool = True,
    error: bool = False,
    replay: str | None = None,
    service: str = "weather-svc",
    name: str = "weather-agent",
    started_at: int = 1_700_000_000_000_000_000,
) -> dict[str, Any]:
    bundle: dict[str, Any] = {
        "format": FORMAT,
        "trace_id": tid,
        "service": service,
        "started_at": started_at,
        "tools": {
            "get_weather": [
                {"seq": i, "args": {"city": city}, "output": {"temp": 20 + i}} for i in range(tools)
            ]
        },
        "llm": {
            "gpt-4o": [{"seq": tools, "input": [{"role": "user", "content": city}], "output": "ok"}]
        },
        "incomplete": [],
    }
    if agent:
        a: dict[str, Any] = {"name": name}
        if with_input:
            a["input"] = {"args": [city], "kwargs": {}}
        if error:
            a["error"] = {"type": "RuntimeError", "message": "boom"}
        else:
            a["output"] = output
        bundle["agent"] = a
    if replay is not None:
        bundle["replay"] = {"mode": replay, "case_id": "c", "case_version": 1}
    return seal(bundle)


def make_recording(n: int | str, **kwargs: Any) -> Recording:
    return Recording.from_bundle(make_bundle(trace_id(n), **kwargs))


def write_many(path: str, worker: int, count: int) -> None:
    """Run in a separate process: ``count`` recordings, one transaction each."""
    store = SQLiteStore(path)
    try:
        for i in range(count):
            rec = make_recording(f"{worker}-{i}", started_at=1_700_000_000_000_000_000 + i)
            assert store.put_recording(rec) is True
    finally:
        store.close()


def crash_mid_write(spool: str, db: str, count: int) -> None:
    """Run in a separate process: the process dies while the store is writing a batch.

    Every write waits until all recordings have been submitted; the batch that holds the last
    of them is cut short: the process is killed after committing half of it, with nothing left
    in the writer's memory.
    """
    import os
    import threading
    import time

    from tracely_sdk.store import BackgroundWriter

    all_submitted = threading.Event()
    calls = []

    class Crashing(SQLiteStore):
        def put_recordings(self, recordings):  # type: ignore[no-untyped-def]
            recordings = list(recordings)
            calls.append(len(recordings))
            all_submitted.wait(30)
            if len(calls) == 1 and len(recordings) < count:
                # the writer took a first batch while recordings were still arriving: the
                # next batch holds every other one, so nothing is left in memory at the crash
                return super().put_recordings(recordings)
            super().put_recordings(recordings[: len(recordings) // 2])  # half committed...
            os._exit(3)  # ...then the process is killed

    writer = BackgroundWriter(lambda: Crashing(db), spool_path=spool, batch_size=10_000)
    for i in range(count):
        writer.submit(make_recording(f"crash-{i}"))
    all_submitted.set()
    time.sleep(30)  # the writer thread kills the process long before this
    os._exit(0)


def make_run(n: int, *, cases: int = 2, started_at: int | None = None, **case: Any) -> Any:
    """A replay run of ``cases`` cases (the first FAIL on a changed prompt, the rest PASS)."""
    from tracely_sdk.store import Run

    entries = []
    for i in range(cases):
        entry: dict[str, Any] = {
            "case_id": f"case-{i}",
            "version": 1,
            "verdict": "PASS" if i else "FAIL",
            "reasons": [] if i else ["served despite a different input: llm:m"],
            "diff": None,
            "divergences": [],
            "trace_id": trace_id(f"run-{n}-{i}"),
            "duration_s": 0.01,
            "agent_version": None,
            "tracely_version": "1.0",
        }
        entries.append({**entry, **case} if i == 0 else entry)
    return Run(
        id=f"{n:016x}",
        started_at=1_700_000_000_000_000_000 + n if started_at is None else started_at,
        duration_s=0.5,
        mode="recorded",
        ok=False,
        summary={"total": cases, "passed": cases - 1, "failed": 1, "ok": False},
        source="sqlite:///x.db",
        otlp_endpoint=None,
        tracely_version="1.0",
        cases=tuple(entries),
    )
