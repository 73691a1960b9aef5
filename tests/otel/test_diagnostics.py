"""A failure inside tracely is logged once per kind in production and raised in tests."""

from __future__ import annotations

import logging

import pytest

from tracely_otel.diagnostics import RAISE_INTERNAL_ERRORS, WarnOnce

LOGGER = logging.getLogger("tracely.test-diagnostics")


def fail(warn: WarnOnce, key: str) -> None:
    try:
        raise RuntimeError(f"bug in {key}")
    except RuntimeError:
        warn(key, "tracely: %s failed", key, exc_info=True)


def test_each_kind_is_logged_once_with_its_traceback_in_production(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(RAISE_INTERNAL_ERRORS, raising=False)
    warn = WarnOnce(LOGGER)
    with caplog.at_level(logging.WARNING, logger=LOGGER.name):
        for _ in range(3):
            fail(warn, "extract")
        fail(warn, "record")
    assert [r.getMessage() for r in caplog.records] == [
        "tracely: extract failed",
        "tracely: record failed",
    ]
    assert "RuntimeError: bug in extract" in caplog.text
    warn.forget()
    fail(warn, "extract")
    assert len(caplog.records) == 3


def test_under_the_variable_the_exception_is_raised_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(RAISE_INTERNAL_ERRORS, "1")
    warn = WarnOnce(LOGGER)
    with pytest.raises(RuntimeError, match="bug in extract"):
        fail(warn, "extract")
    # A warning that is no caught exception is only logged, once.
    with caplog.at_level(logging.WARNING, logger=LOGGER.name):
        warn("tee", "tracely: cannot record %s streams", "Odd")
        warn("tee", "tracely: cannot record %s streams", "Odd")
    assert [r.getMessage() for r in caplog.records] == ["tracely: cannot record Odd streams"]


def test_the_test_suite_runs_with_the_variable_set() -> None:
    import os

    assert os.environ.get(RAISE_INTERNAL_ERRORS) == "1"
