"""``tracely run``: what it refuses before running anything (the run itself is exercised in
tests/sdk/test_startup.py, in a subprocess, as it replaces the process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tracely_sdk.cli import EXIT_USAGE

ROOT = Path(__file__).resolve().parents[3]


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


APP = """
import sys

import openai


def ask(question: str) -> str:
    client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    reply = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": question}]
    )
    return reply.choices[0].message.content


if __name__ == "__main__":
    print(ask(sys.argv[1]))
"""


def test_a_run_recorded_by_tracely_run_is_promoted_with_its_input_and_replayed(
    tmp_path: Path,
) -> None:
    """The README's no-code-change path end to end: no agent span, so the case's input and
    expected output are stated at promote time; replay then needs no model server."""
    from examples.llm_server import serve
    from tracely_sdk.store import sqlite_url

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "app.py").write_text(APP)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_", "OPENAI_"))
    }
    env.update({"PYTHONPATH": str(ROOT), "TRACELY_STORE": sqlite_url(tmp_path / "tracely.db")})

    def tracely(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tracely_sdk.cli", *args],
            env={**env, **extra},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    with serve() as (server, _):
        ran = tracely(
            "run",
            "--",
            sys.executable,
            "app.py",
            "Weather in Paris?",
            OPENAI_BASE_URL=server.openai_base_url,
            OPENAI_API_KEY="test-key",
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout == "You said: Weather in Paris?\n"
        assert len(server.requests) == 1

    plain = tracely("cases", "promote", "--latest", "--name", "paris")
    assert plain.returncode == 2
    assert "no recorded agent input" in plain.stderr and "--input JSON" in plain.stderr

    promoted = tracely(
        "cases",
        "promote",
        "--latest",
        "--name",
        "paris",
        "--entrypoint",
        "app:ask",
        "--input",
        '["Weather in Paris?"]',
        "--expected",
        '"You said: Weather in Paris?"',
    )
    assert promoted.returncode == 0, promoted.stderr
    assert promoted.stdout.endswith("as case paris (version 1)\n1 case promoted\n")

    replayed = tracely("replay")  # the model server is gone: every call from the recording
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "PASS" in replayed.stdout and "1 passed" in replayed.stdout
