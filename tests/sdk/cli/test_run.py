"""``tracely run``: what it refuses before running anything (the run itself is exercised in
tests/sdk/test_startup.py, in a subprocess, as it replaces the process)."""

from __future__ import annotations

from typing import Any

from tracely_sdk.cli import EXIT_USAGE


def test_run_without_a_program_says_how_to_give_one(cli: Any) -> None:
    status, _, err = cli("run")
    assert status == EXIT_USAGE
    assert "tracely run -- python app.py" in err


def test_run_of_a_program_not_on_path_names_it(cli: Any) -> None:
    status, _, err = cli("run", "--", "no-such-program-anywhere")
    assert status == EXIT_USAGE
    assert "'no-such-program-anywhere' was not found on PATH" in err


def test_run_with_an_unknown_provider_names_the_option(cli: Any) -> None:
    status, _, err = cli("run", "--instrument", "opneai", "--", "python")
    assert status == EXIT_USAGE
    assert "--instrument" in err and "opneai" in err
