"""The server's HTTP layer: requests per second for ``GET /healthz`` and a small OTLP/HTTP export.

One ``tracely serve`` process (a SQLite store in a temporary directory, no rate limit) on
127.0.0.1, then, from ``--threads`` threads each with one kept-alive connection, for
``--seconds`` each after a warm-up:

- ``GET /healthz``: the HTTP layer's own cost per request (no store, no body);
- ``POST /v1/traces``: an OTLP/JSON export of one span (about 400 bytes), a new trace id per
  request, with an ingest token: the body read, the token checked, the request decoded and
  journalled before it is acknowledged.

Besides requests per second (which other work on the machine moves), the server process's CPU
time per request is printed: the steadier figure to compare two versions by.
Nothing is asserted. ``--root`` runs another checkout's server, to compare two versions.

    python bench/server_http.py [--seconds S] [--threads T] [--root PATH]
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
LISTENING = re.compile(r"^tracely server listening on http://([^:\s]+):(\d+)$")


def _export(n: int) -> bytes:
    trace = f"{n + 1:032x}"
    span = {
        "traceId": trace,
        "spanId": f"{n + 1:016x}",
        "name": "get_weather",
        "kind": 1,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000100000000",
        "attributes": [{"key": "tracely.kind", "value": {"stringValue": "tool"}}],
    }
    return orjson.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "b"}}]
                    },
                    "scopeSpans": [{"spans": [span]}],
                }
            ]
        }
    )


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rate(
    host: str, port: int, threads: int, seconds: float, ask: Callable[[Any, int], None]
) -> tuple[int, float]:
    counts = [0] * threads
    stop = threading.Event()
    failures: list[BaseException] = []

    def worker(index: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=30)
        n = index * 10_000_000
        try:
            while not stop.is_set():
                ask(conn, n)
                n += 1
                counts[index] += 1
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            conn.close()

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for t in workers:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in workers:
        t.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise SystemExit(f"a request failed: {failures[0]!r}")
    return sum(counts), elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args()
    token = f"ingest-{secrets.token_urlsafe(24)}"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stdout"
        env = {
            **os.environ,
            "PYTHONPATH": str(args.root.resolve()),
            "TRACELY_SERVER_TOKENS": f"ingest:{token}",
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("TRACELY_STORE", None)
        with out.open("wb") as sink:
            server = subprocess.Popen(
                [
                    *(sys.executable, "-m", "tracely_sdk.server", "--host", "127.0.0.1"),
                    *("--port", "0", "--store", f"sqlite://{tmp}/store.db", "--rate-limit", "0"),
                ],
                stdout=sink,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=tmp,
            )
        try:
            deadline = time.monotonic() + 30
            address = None
            while address is None:
                match = LISTENING.match(out.read_text().split("\n", 1)[0].strip())
                if match:
                    address = match.group(1), int(match.group(2))
                elif time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start")
                else:
                    time.sleep(0.05)
            host, port = address

            def healthz(conn: http.client.HTTPConnection, n: int) -> None:
                conn.request("GET", "/healthz")
                answer = conn.getresponse()
                answer.read()
                if answer.status != 200:
                    raise RuntimeError(f"/healthz answered {answer.status}")

            headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}

            def export(conn: http.client.HTTPConnection, n: int) -> None:
                conn.request("POST", "/v1/traces", _export(n), headers)
                answer = conn.getresponse()
                answer.read()
                if answer.status != 200:
                    raise RuntimeError(f"/v1/traces answered {answer.status}")

            _rate(host, port, args.threads, 1.0, healthz)  # warm-up
            for name, ask in (("GET /healthz", healthz), ("POST /v1/traces", export)):
                cpu = _cpu_seconds(server.pid)
                count, elapsed = _rate(host, port, args.threads, args.seconds, ask)
                cpu = _cpu_seconds(server.pid) - cpu
                print(
                    f"{name}: {count / elapsed:.0f} requests/s ({args.threads} connections), "
                    f"{cpu / count * 1e6:.0f} µs of server CPU a request"
                )
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
