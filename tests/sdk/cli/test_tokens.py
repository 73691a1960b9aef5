"""``tracely tokens``: tokens the server accepts, in the line that configures it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracely_sdk.cli import main
from tracely_sdk.server._auth import TokenSet

ROOT = Path(__file__).resolve().parents[3]


def _assignments(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_the_default_tokens_are_an_ingest_and_a_write_token_the_server_accepts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["tokens"]) == 0
    values = _assignments(capsys.readouterr().out)
    assert list(values) == ["TRACELY_SERVER_TOKENS", "INGEST", "WRITE"]
    assert values["TRACELY_SERVER_TOKENS"] == f"ingest:{values['INGEST']},write:{values['WRITE']}"
    server = TokenSet(TokenSet.parse(values["TRACELY_SERVER_TOKENS"]))
    ingest = server.authenticate(f"Bearer {values['INGEST']}", "127.0.0.1")
    write = server.authenticate(f"Bearer {values['WRITE']}", "127.0.0.1")
    assert ingest is not None and ingest.scopes == {"ingest"}
    assert write is not None and write.scopes == {"read", "write"}
    assert len(values["INGEST"]) >= 43 and values["INGEST"] != values["WRITE"]


def test_each_run_makes_new_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    seen = set()
    for _ in range(3):
        main(["tokens", "read", "--json"])
        seen.add(json.loads(capsys.readouterr().out)["tokens"]["read"])
    assert len(seen) == 3


def test_an_unknown_scope_names_the_scopes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tokens", "admin"]) == 2
    assert "unknown scope 'admin'; the server's scopes are ingest, read, write" in (
        capsys.readouterr().err
    )


def test_eval_in_a_shell_sets_what_the_readme_uses() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = (
        f'eval "$({sys.executable} -m tracely_sdk.cli tokens)" && '
        'test "$TRACELY_SERVER_TOKENS" = "ingest:$INGEST,write:$WRITE" && '
        'test -n "$INGEST" && echo ok'
    )
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.stdout == "ok\n", proc.stderr
