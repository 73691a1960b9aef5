"""The ``cli`` fixture: the tracely command line run in-process against a fresh store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sdk.cli._helpers import CLI


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CLI:
    # The replay command sets up tracing with tracely.init(); the test session has its own.
    monkeypatch.setattr("tracely_sdk.cli._replay.init_tracing", lambda: None)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("TRACELY_STORE", raising=False)
    monkeypatch.delenv("CI", raising=False)  # CI changes what replay lists by default
    return CLI(capsys, f"sqlite:///{(tmp_path / 'tracely.db').as_posix().lstrip('/')}")
