"""Fixtures: a shared ``tracely serve`` process, fresh ones on demand, and live agent runs."""

from __future__ import annotations

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
