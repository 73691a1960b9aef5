"""A store with recordings of the reference agent, and the CLI run in-process."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
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


def replayed(cli: CLI, report: Path) -> dict[str, Any]:
    """The one case of a ``tracely replay --json REPORT`` run; the exit status agrees with it."""
    status, out, err = cli("replay", "--json", str(report))
    (case,) = json.loads(report.read_text())["cases"]
    assert (status == 0) == (case["verdict"] == "PASS"), out + err
    return dict(case)


def lines(text: str) -> Iterator[str]:
    return (line.rstrip() for line in text.splitlines())
