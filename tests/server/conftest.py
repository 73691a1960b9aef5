"""Fixtures: a shared ``tracely serve`` process, fresh ones on demand, live agent runs, and a
PostgreSQL schema of a test's own."""

from __future__ import annotations

import os
import re
import subprocess
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from server._support import Contract, ServerProcess

FAST = ["--quiet-seconds", "0.2", "--rate-limit", "0"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: a load or restart test (in the default run; -m 'not slow' skips it)"
    )


@pytest.fixture(scope="session")
def contract() -> Contract:
    return Contract()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, contract: Contract) -> Iterator[ServerProcess]:
    """One server for the tests that do not restart it (quiet period 0.2 s, no rate limit)."""
    proc = ServerProcess(tmp_path_factory.mktemp("shared-server"), args=FAST, contract=contract)
    proc.start()
    try:
        yield proc
    finally:
        status = proc.stop()
        assert status == 0, proc.logs()


@pytest.fixture
def make_server(tmp_path: Path, contract: Contract) -> Iterator[Callable[..., ServerProcess]]:
    """Start a dedicated server (``args`` are extra options); every one is stopped after."""
    made: list[ServerProcess] = []

    def make(*args: str, name: str = "server", start: bool = True, **kwargs: Any) -> ServerProcess:
        proc = ServerProcess(tmp_path / name, args=list(args), contract=contract, **kwargs)
        made.append(proc)
        return proc.start() if start else proc

    yield make
    for proc in made:
        if proc.alive():
            proc.stop()


@pytest.fixture
def weather_run(capture: Any) -> Callable[[str], tuple[list[Any], dict[str, Any]]]:
    """Run the reference agent live in-process: its finished spans and the in-process bundle."""
    from examples import weather_agent

    def run(city: str = "Paris") -> tuple[list[Any], dict[str, Any]]:
        before = len(capture.spans)
        weather_agent.run(city)
        spans = capture.spans[before:]
        trace_ids = {s.context.trace_id for s in spans}
        assert len(trace_ids) == 1
        return spans, capture.bundles[format(trace_ids.pop(), "032x")]

    return run


# PostgreSQL --------------------------------------------------------------------------------

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "install-postgres.sh"
START_TIMEOUT = 120


def _start_with_script() -> tuple[str | None, str]:
    """Start a throwaway server with the CI script (no install); (URL, or None and why)."""
    if not SCRIPT.is_file():
        return None, f"{SCRIPT} is missing"
    env = dict(os.environ, TRACELY_PG_NO_INSTALL="1")
    try:
        done = subprocess.run(
            ["bash", str(SCRIPT)],
            env=env,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"{SCRIPT.name} did not start PostgreSQL within {START_TIMEOUT}s"
    except OSError as exc:
        return None, f"cannot run {SCRIPT.name}: {exc}"
    match = re.search(r"^export TRACELY_TEST_POSTGRES_URL=(\S+)$", done.stdout, re.M)
    if done.returncode != 0 or match is None:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"{SCRIPT.name} could not start PostgreSQL ({last})"
    return match.group(1), ""


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A PostgreSQL server's URL: $TRACELY_TEST_POSTGRES_URL, else one started here, else skip."""
    url = os.environ.get("TRACELY_TEST_POSTGRES_URL")
    if url:
        return url
    url, why = _start_with_script()
    if url is None:
        pytest.skip(
            "no PostgreSQL server: set TRACELY_TEST_POSTGRES_URL, or run "
            f'`eval "$(.ci/install-postgres.sh)"` first ({why})'
        )
    return url


def with_schema(url: str, schema: str) -> str:
    """``url`` connecting with ``schema`` as the current schema."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={urllib.parse.quote(f'-csearch_path={schema}')}"


@pytest.fixture
def schema_url(postgres_url: str) -> Iterator[str]:
    """The URL of a fresh, empty schema (dropped afterwards)."""
    psycopg = pytest.importorskip(
        "psycopg", reason="psycopg is not installed (tracely-replay[postgres])"
    )
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    yield with_schema(postgres_url, name)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {name} CASCADE")
