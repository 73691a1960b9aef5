"""The HTTP store client against a local ``tracely serve``: ``get_case`` calls per second.

One server process (a SQLite store in a temporary directory, no rate limit) on 127.0.0.1, one
promoted case, then ``HTTPStore.get_case`` in a loop from one thread for ``--seconds`` after a
warm-up. What it shows is the client's cost per call, a new connection a call included (see
``HTTPStore._request``). Nothing is asserted.

    python bench/store_client.py [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.sdk.store._helpers import make_recording, trace_id  # noqa: E402
from tracely_sdk.store._http import HTTPStore  # noqa: E402

LISTENING = re.compile(r"^tracely server listening on (http://\S+)$")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    token = f"write-{secrets.token_urlsafe(24)}"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stdout"
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TRACELY_SERVER_TOKENS": f"write:{token}",
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
            url = None
            while url is None:
                match = LISTENING.match(out.read_text().split("\n", 1)[0].strip())
                if match:
                    url = match.group(1)
                elif time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start")
                else:
                    time.sleep(0.05)
            store = HTTPStore(url, token=token)
            store.put_recording(make_recording(1))
            case = store.promote(trace_id(1), name="bench")
            for _ in range(50):  # warm-up
                store.get_case(case.id)
            calls = 0
            started = time.perf_counter()
            while (elapsed := time.perf_counter() - started) < args.seconds:
                store.get_case(case.id)
                calls += 1
            store.close()
            print(f"get_case: {calls} calls in {elapsed:.2f}s = {calls / elapsed:.0f} calls/s")
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
