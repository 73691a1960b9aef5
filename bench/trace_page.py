"""What one trace page costs a real server: its size, the time to answer, and the server's
memory, for one view at a time and for several at once.

Seeds a SQLite store with the trace of 200 tool calls of 20 kB each way (bench/pages.py's
``big_values_run``), starts ``python -m tracely_sdk.server`` on it (127.0.0.1, no tokens),
then asks for the trace page ``--concurrent`` times at once, and (on a fresh server) for the
trace page, one call's whole output and the recording's JSON one after another, reading the
server's resident memory and its peak (``/proc``, Linux) before and after. Last, the memory
of a first view on a fresh server for a recording of 50 and of 200 such calls: the goal is a
cost bounded whatever the recording holds, the same for both.

    python bench/trace_page.py [--calls N] [--size BYTES] [--rounds R] [--concurrent C]
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pages import BIG_TRACE, big_values_run  # noqa: E402

from tracely_sdk.store import Recording, SQLiteStore  # noqa: E402
from tracely_sdk.store._model import dumps_json  # noqa: E402

LISTENING = re.compile(r"^tracely server listening on http://([^\s:]+):(\d+)")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def get(port: int, path: str) -> tuple[int, int, float]:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
        answer = conn.getresponse()
        body = answer.read()
    finally:
        conn.close()
    return answer.status, len(body), time.perf_counter() - started


def start(store: Path, directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    out = directory / "stdout.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("TRACELY_STORE", None)
    with out.open("wb") as stdout:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracely_sdk.server",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--store",
                f"sqlite:///{store}",
                "--insecure-no-auth",
                "--rate-limit",
                "0",
            ],
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = LISTENING.match(out.read_text())
        if match:
            return process, int(match.group(2))
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}")
        time.sleep(0.05)
    process.kill()
    raise SystemExit("the server did not start")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrent", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store_path = Path(tmp) / "bench.db"
        store = SQLiteStore(store_path)
        store.put_recording(Recording.from_bundle(big_values_run(args.calls, args.size)))
        store.close()
        process, port = start(store_path, Path(tmp))
        try:
            path = f"/ui/traces/{BIG_TRACE}"
            start_rss = rss_mb(process.pid)
            results: list[tuple[int, int, float]] = []

            def view() -> None:
                results.append(get(port, path))

            started = time.perf_counter()
            threads = [threading.Thread(target=view) for _ in range(args.concurrent)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - started
            statuses = sorted({r[0] for r in results})
            print(
                f"{args.concurrent} concurrent trace pages on a fresh server: "
                f"{wall * 1000:.0f} ms in all, slowest {max(r[2] for r in results) * 1000:.0f} ms, "
                f"statuses {statuses}, RSS {start_rss:.0f} MB at start, "
                f"peak {hwm_mb(process.pid):.0f} MB (+{hwm_mb(process.pid) - start_rss:.0f} MB)"
            )
        finally:
            process.terminate()
            process.wait(timeout=30)
        process, port = start(store_path, Path(tmp))
        try:
            paths = [
                ("trace page", f"/ui/traces/{BIG_TRACE}"),
                ("  its last calls", f"/ui/traces/{BIG_TRACE}?calls={args.calls - 20}"),
                ("one call's output", f"/ui/traces/{BIG_TRACE}/calls/1/output"),
                ("whole recording JSON", f"/ui/traces/{BIG_TRACE}/raw"),
            ]
            print(f"one view at a time, on a fresh server (RSS {rss_mb(process.pid):.0f} MB):")
            print(f"{'request':<24}{'status':>7}{'KB':>9}{'median ms':>11}{'peak +MB':>10}")
            for name, path in paths:
                times = []
                before = hwm_mb(process.pid)
                status = size = 0
                for _ in range(args.rounds):
                    status, size, took = get(port, path)
                    times.append(took)
                grown = hwm_mb(process.pid) - before
                print(
                    f"{name:<24}{status:>7}{size / 1024:>9.0f}"
                    f"{statistics.median(times) * 1000:>11.0f}{grown:>10.0f}"
                )
        finally:
            process.terminate()
            process.wait(timeout=30)
    first_views(args.size)
    return 0


def first_views(size: int) -> None:
    """Each first view on a fresh server: how much the server's peak resident memory grew."""
    print(
        "memory per first view, on a fresh server (peak RSS growth; goal: bounded, "
        "the same for 50 and 200 calls):"
    )
    print(
        f"{'calls':<8}{'recording MB':>13}{'trace page MB':>15}{'its last calls MB':>19}{'one value MB':>14}"
    )
    for calls in (50, 200):
        with tempfile.TemporaryDirectory() as tmp:
            store_path = Path(tmp) / "bench.db"
            store = SQLiteStore(store_path)
            recording = Recording.from_bundle(big_values_run(calls, size))
            store.put_recording(recording)
            store.close()
            megabytes = len(dumps_json(recording.bundle)) / 2**20
            grown = []
            for path in (
                f"/ui/traces/{BIG_TRACE}",
                f"/ui/traces/{BIG_TRACE}?calls={calls - 20}",
                f"/ui/traces/{BIG_TRACE}/calls/{calls}/output",
            ):
                process, port = start(store_path, Path(tmp))
                try:
                    get(port, "/ui/cases")  # the pages' code loaded, no recording read
                    before = hwm_mb(process.pid)
                    status, _, _ = get(port, path)
                    assert status == 200, (path, status)
                    grown.append(hwm_mb(process.pid) - before)
                finally:
                    process.terminate()
                    process.wait(timeout=30)
            print(
                f"{calls:<8}{megabytes:>13.1f}{grown[0]:>15.0f}{grown[1]:>19.0f}{grown[2]:>14.0f}"
            )


if __name__ == "__main__":
    raise SystemExit(main())
