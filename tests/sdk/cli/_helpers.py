"""A store with recordings of the reference agent, and the CLI run in-process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tracely_sdk.cli import main
from tracely_sdk.store import Recording, SQLiteStore, open_store

WEATHER = "examples.weather_agent"


class CLI:
    """Runs ``tracely ...`` in this process against one store; returns (status, stdout, stderr)."""

    def __init__(self, capsys: pytest.CaptureFixture[str], url: str) -> None:
        self.capsys = capsys
        self.url = url

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        status = main([*argv, "--store", self.url])
        captured = self.capsys.readouterr()
        return status, captured.out, captured.err

    def store(self) -> SQLiteStore:
        store = open_store(self.url)
        assert isinstance(store, SQLiteStore)
        return store


def record(capture: Any, cli: CLI, fn: Callable[..., Any], *args: Any) -> str:
    """Run ``fn`` live and store its trace as a recording; returns the trace id."""
    before = len(capture.bundles)
    try:
        fn(*args)
    except Exception:
        pass  # a recorded failure is a recording too
    assert len(capture.bundles) == before + 1
    bundle = capture.last_bundle
    store = cli.store()
    try:
        store.put_recording(Recording.from_bundle(bundle))
    finally:
        store.close()
    return str(bundle["trace_id"])


def lines(text: str) -> Iterator[str]:
    return (line.rstrip() for line in text.splitlines())
