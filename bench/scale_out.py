"""One tracely server against two on one PostgreSQL store, in one run, and what each costs.

Every trace is cut in two requests sent round-robin (with two servers, every trace reaches
both, the worst case for assembling: each trace is split), from the reference agent's spans
as ``bench/ingest.py`` makes them, counted until every trace is a complete recording in the
store. One and two servers alternate for ``--rounds`` rounds, each on a fresh schema, and the
ratio of the medians is printed beside the goal: two servers record at least as fast as one
on this machine.

The model of N servers on N cores is printed from counts, not guesses:

- from each server's store (logged when it closes): transactions, round trips,
  traces and spans assembled, recordings built, lock waits and the time spent taking locks;
- from the database: transactions rolled back (``pg_stat_database``), and the CPU time of
  the servers' PostgreSQL backends (``pg_stat_activity`` pids, ``/proc/PID/stat``);
- the servers' own CPU time, and the load generator's (this process).

    python bench/scale_out.py [--spans N] [--threads T] [--rounds R] [--quiet-seconds S]

PostgreSQL is used as ``bench/ingest.py`` finds it (``TRACELY_TEST_POSTGRES_URL``, or a server
``.ci/install-postgres.sh`` can start without installing anything).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import (
    SPANS_PER_PAYLOAD,
    Result,
    Server,
    SplitTemplate,
    complete_weight,
    find_postgres,
    postgres_schema,
    send,
    serve,
    split_templates,
    wait_recorded,
)

GOAL = 1.0
STORE_LINE = re.compile(
    r"assembled (\d+) trace\(s\) of (\d+) span\(s\) in (\d+) transaction\(s\) of (\d+) "
    r"round trip\(s\); (\d+) built here; (\d+) lock wait\(s\), ([\d.]+)s taking locks"
)
COUNTS = ("traces", "spans", "transactions", "round_trips", "built", "lock_waits", "lock_seconds")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


@dataclass
class Run:
    servers: int
    result: Result
    seconds: float  # the measured part, first request to last complete recording
    recordings: int = 0
    counts: dict[str, float] = field(default_factory=dict)
    rollbacks: int = 0
    server_cpu: float = 0.0
    database_cpu: float = 0.0
    sender_cpu: float = 0.0


def database_stats(conn: Any) -> tuple[int, list[int]]:
    """Transactions rolled back in this database so far, and the pids of tracely's backends."""
    row = conn.execute(
        "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    pids = [
        pid
        for (pid,) in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'tracely'"
        )
    ]
    return int(row[0]), pids


def cpu(servers: Sequence[Server], backends: Sequence[int]) -> tuple[float, float, float]:
    """CPU seconds so far of the servers, of their PostgreSQL backends, and of this process."""
    return (
        sum(cpu_seconds(s.pid) for s in servers),
        sum(cpu_seconds(pid) for pid in backends),
        time.process_time(),
    )


def store_counts(servers: Sequence[Server]) -> dict[str, float]:
    totals = dict.fromkeys(COUNTS, 0.0)
    for server in servers:
        found = STORE_LINE.findall(server.log.read_text(errors="replace"))
        if not found:  # an earlier revision, whose store did not count
            print(f"  (no assembly counts in the server's log {server.log})")
            return dict.fromkeys(COUNTS, 0.0)
        for name, value in zip(COUNTS, found[-1], strict=True):
            totals[name] += float(value)
    return totals


def one_run(
    base: str, count: int, split: list[SplitTemplate], opts: argparse.Namespace, tmp: Path, n: int
) -> Run:
    import psycopg

    weight = complete_weight(split)
    with postgres_schema(base, span_count=weight) as (url, complete):
        admin = psycopg.connect(base, autocommit=True)
        rolled_back, _ = database_stats(admin)
        with ExitStack() as stack:
            servers = [
                stack.enter_context(
                    serve(url, complete, tmp / f"run{n}-{count}-{k}", opts.quiet_seconds)
                )
                for k in range(count)
            ]
            # Warm up (imports, the stores' first connections, the journals), then measure.
            warm = send(servers, split, 2, lambda sent: sent < 4 * SPANS_PER_PAYLOAD)
            wait_recorded(servers[0], warm.traces)
            _, pids = database_stats(admin)
            before = cpu(servers, pids)
            started = time.perf_counter()
            load = send(
                servers, split, opts.threads, lambda sent: sent < opts.spans // opts.threads
            )
            acked = time.perf_counter()
            done = wait_recorded(servers[0], warm.traces + load.traces)
            after = cpu(servers, pids)
            seconds = done - started
            result = Result(
                store="postgresql",
                spans=load.spans,
                accepted_rate=load.spans / (acked - started),
                recorded_rate=load.spans / seconds,
                throttled=load.throttled,
                failures=load.failures,
            )
            server_cpu, database, sender = (b - a for a, b in zip(before, after, strict=True))
        # the servers have stopped (and logged what their stores counted)
        rollbacks = database_stats(admin)[0] - rolled_back
        row = admin.execute(f"SELECT count(*) FROM {url_schema(url)}.recordings").fetchone()
        recordings = int(row[0]) if row else 0
        admin.close()
        run = Run(count, result, seconds, recordings, store_counts(servers), rollbacks)
        run.server_cpu, run.database_cpu, run.sender_cpu = server_cpu, database, sender
        return run


def url_schema(url: str) -> str:
    match = re.search(r"search_path%3D(\w+)", url)
    if match is None:
        raise SystemExit(f"no schema in {url}")
    return match.group(1)


def describe(run: Run) -> list[str]:
    c = run.counts
    spans, recordings = max(1.0, c["spans"]), max(1, run.recordings)
    measured = max(1, run.result.spans)
    return [
        f"{run.servers} server(s): {run.result.recorded_rate:,.0f} spans/s recorded, "
        f"{run.result.accepted_rate:,.0f}/s accepted ({run.result.spans:,} spans in "
        f"{run.seconds:.1f}s; {run.result.throttled} answers 429)",
        f"  transactions per trace {c['transactions'] / recordings:.3f} "
        f"({c['transactions']:,.0f} for {recordings:,} traces, {c['traces'] / recordings:.2f} "
        "assemblies of each: one per server that had spans of it); "
        f"rolled back (pg_stat_database): {run.rollbacks}",
        f"  round trips per span {c['round_trips'] / spans:.4f} "
        f"({c['round_trips'] / max(1, c['transactions']):.1f} per transaction, "
        f"{spans / max(1, c['transactions']):.0f} spans per transaction)",
        f"  recordings built per trace {c['built'] / recordings:.3f}; lock waits per trace "
        f"{c['lock_waits'] / recordings:.3f} ({c['lock_waits']:,.0f}, "
        f"{1000 * c['lock_seconds'] / max(1, c['transactions']):.2f} ms per transaction in the "
        "database taking locks)",
        f"  CPU per 1,000 spans: servers {1000 * run.server_cpu / measured:.3f}s, PostgreSQL "
        f"{1000 * run.database_cpu / measured:.3f}s, load generator "
        f"{1000 * run.sender_cpu / max(1, run.result.spans):.3f}s",
    ]


def model(one: Run, two: Run, cores: int) -> list[str]:
    """Where N servers land on N cores, from what one and two servers measured per span."""

    def us(run: Run, seconds: float) -> float:
        return 1e6 * seconds / max(1, run.result.spans)

    s1, s2 = us(one, one.server_cpu), us(two, two.server_cpu)
    p1, p2 = us(one, one.database_cpu), us(two, two.database_cpu)
    g = us(two, two.sender_cpu)
    c = two.counts
    waits = c["lock_waits"] / max(1, two.recordings)
    wait_ms = 1000 * c["lock_seconds"] / max(1, c["lock_waits"]) if c["lock_waits"] else 0.0
    lines = [
        f"model, per span: servers' CPU {s1:.0f} us with one server, {s2:.0f} us with two "
        f"(each trace split between them: {s2 / s1:.2f}x); PostgreSQL {p1:.0f} / {p2:.0f} us; "
        f"the load generator {g:.0f} us",
        f"  a trace split in two reaches at most two servers, however many there are: its "
        f"lock waits ({waits:.4f} a trace, at most {wait_ms:.1f} ms each, the time the "
        "database spent taking locks), transactions (one per server it reached, shared by the "
        f"{c['traces'] / max(1, c['transactions']):.0f} traces of a batch) and round trips "
        f"({c['round_trips'] / max(1, c['spans']):.4f} a span) stay what two servers "
        "measured, and servers on different traces never wait for each other",
    ]
    for n in (1, 2, 4, 8):
        rate = n * 1e6 / (s2 if n > 1 else s1)
        lines.append(
            f"  {n} server(s) on {n} core(s) of their own: at most {rate:,.0f} spans/s "
            f"(PostgreSQL then needs {rate * (p2 if n > 1 else p1) / 1e6:.2f} core(s))"
        )
    shared = cores * 1e6 / (s2 + p2 + g)
    alone = cores * 1e6 / (s1 + p1 + g)
    lines.append(
        f"  this machine, {cores} cores shared by the servers, PostgreSQL and the load: at most "
        f"{alone:,.0f} spans/s with one server, {shared:,.0f} with two (the ratio of the CPU "
        f"per span, {alone and shared / alone:.2f}x; one server also keeps to one core for "
        "its Python, so two gain when the machine is otherwise idle)"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=60_000, help="spans per run (default 60000)")
    parser.add_argument("--threads", type=int, default=4, help="sending threads (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of 1 then 2 (default 3)")
    parser.add_argument("--payloads", type=int, default=32, help="distinct payloads (default 32)")
    parser.add_argument(
        "--quiet-seconds", type=float, default=0.5, help="the servers' quiet period (0.5)"
    )
    opts = parser.parse_args(argv)
    base = find_postgres()
    if base is None:
        raise SystemExit("no PostgreSQL: set TRACELY_TEST_POSTGRES_URL")
    cores = os.cpu_count() or 1
    print(f"{cores} CPUs; uptime: {os.popen('uptime').read().strip()}", flush=True)
    print("making the payloads from runs of the reference agent ...", flush=True)
    split = split_templates(max(4, opts.payloads // 4))
    runs: dict[int, list[Run]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="tracely-bench-") as tmp:
        for n in range(opts.rounds):
            for count in (1, 2):
                print(f"round {n + 1}: {count} server(s) ...", flush=True)
                run = one_run(base, count, split, opts, Path(tmp), n)
                runs[count].append(run)
                for line in describe(run):
                    print(line, flush=True)
    print(f"uptime at the end: {os.popen('uptime').read().strip()}")
    rates = {k: statistics.median(r.result.recorded_rate for r in v) for k, v in runs.items()}
    ratio = rates[2] / rates[1]
    print()
    print(
        f"recorded spans/s, median of {opts.rounds}: one server {rates[1]:,.0f}, two "
        f"{rates[2]:,.0f}; by round: "
        + ", ".join(
            f"{a.result.recorded_rate:,.0f} / {b.result.recorded_rate:,.0f}"
            for a, b in zip(runs[1], runs[2], strict=True)
        )
    )
    print(
        f"two servers / one: {ratio:.2f}x (goal >= {GOAL:.1f}x on this {cores}-core machine: "
        f"{'met' if ratio >= GOAL else 'NOT met'})"
    )

    def middle(k: int) -> Run:
        return sorted(runs[k], key=lambda r: r.result.recorded_rate)[len(runs[k]) // 2]

    for line in model(middle(1), middle(2), cores):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
