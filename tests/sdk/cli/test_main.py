"""The command line as a whole: --version, --help everywhere, exit statuses, one-line errors."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracely_sdk import __version__
from tracely_sdk.cli import build_parser, main

from ._helpers import CLI

ROOT = Path(__file__).resolve().parents[3]

COMMANDS = [
    [],
    ["traces"],
    ["traces", "list"],
    ["traces", "show"],
    ["traces", "import"],
    ["cases"],
    *(
        ["cases", name]
        for name in (
            "promote",
            "edit",
            "list",
            "show",
            "history",
            "delete",
            "recapture",
            "export",
            "import",
            "reseal",
        )
    ),
    ["replay"],
    ["reports"],
    ["reports", "merge"],
    ["runs"],
    ["runs", "list"],
    ["runs", "show"],
    ["scenarios"],
    ["scenarios", "run"],
    ["scenarios", "list"],
    ["scenarios", "new"],
    ["run"],
    ["serve"],
    ["tokens"],
    ["ui"],
]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"tracely {__version__}"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "tracely")
def test_every_command_has_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: tracely {' '.join(command)}".rstrip())
    if command and command[-1] not in ("traces", "cases", "scenarios"):
        assert "--store URL" in out and "--no-color" in out


def test_every_command_is_listed_for_help() -> None:
    # guards COMMANDS above against a command added without a test of its --help
    def commands(parser: argparse.ArgumentParser, prefix: list[str]) -> list[list[str]]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append([*prefix, name])
                    found.extend(commands(sub, [*prefix, name]))
        return found

    assert sorted(commands(build_parser(), [])) == sorted(c for c in COMMANDS if c)


@pytest.mark.parametrize(
    "argv",
    [
        ["traces"],
        ["cases"],
        ["nope"],
        ["replay", "--bogus"],
        ["traces", "list", "--limit", "0"],
        ["replay", "-j", "x"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "usage: tracely" in capsys.readouterr().err


def test_bare_tracely_prints_help_like_pip(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: tracely") and "replay" in captured.out
    assert captured.err == ""


@pytest.mark.parametrize(
    ("argv", "meant"),
    [(["replya"], "replay"), (["trace", "list"], "traces"), (["cases", "promte", "x"], "promote")],
)
def test_a_mistyped_command_says_which_was_meant(
    argv: list[str], meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert f"did you mean {meant!r}?" in capsys.readouterr().err


def test_a_command_nothing_like_any_suggests_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["zzzzzz"]) == 2
    assert "did you mean" not in capsys.readouterr().err


def _help(*command: str) -> str:
    parser = build_parser()
    for name in command:
        parser = next(
            a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
        ).choices[name]
    return " ".join(parser.format_help().split())


def test_the_body_limit_in_help_and_readme_is_the_one_the_server_applies() -> None:
    from tracely_sdk.server._config import DEFAULT_MAX_BODY_BYTES, ServerConfig

    mib = DEFAULT_MAX_BODY_BYTES // (1024 * 1024)
    assert ServerConfig.load({}).max_body_bytes == DEFAULT_MAX_BODY_BYTES
    assert f"--max-body-bytes N largest request body (default {mib} MiB" in _help("serve")
    readme = " ".join((ROOT / "docs" / "server.md").read_text().split())
    assert f"Bodies are limited to {mib} MiB (`--max-body-bytes`" in readme
    assert "16 MiB" not in readme


def test_store_help_names_every_kind_of_store() -> None:
    text = _help("traces", "list")
    for form in ("sqlite:///path.db", "http(s)://server", "postgresql://"):
        assert form in text


def test_run_help_lists_every_value_instrument_accepts() -> None:
    from tracely_sdk._config import SETTINGS
    from tracely_sdk.providers import PROVIDERS

    text = _help("run")
    for value in ("auto", "off", *PROVIDERS):
        SETTINGS["instrument"].parse("--instrument", value)  # accepted...
        assert f" {value}," in text or f" {value} (" in text  # ...and listed


def test_help_names_the_token_a_server_store_is_sent(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "TRACELY_TOKEN" in capsys.readouterr().out


def test_a_bad_store_url_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traces", "list", "--store", "ftp://nowhere/x"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("tracely: error: store URL 'ftp://nowhere/x'")
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_the_store_comes_from_the_environment(
    cli: CLI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRACELY_STORE", "ftp://from-env/x")
    assert main(["cases", "list"]) == 2
    assert "ftp://from-env/x" in capsys.readouterr().err
    cli.store().close()  # an empty store
    # --store wins over the environment, before or after the command
    assert main(["--store", cli.url, "cases", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cases"] == []
    assert main(["cases", "list", "--json", "--store", cli.url]) == 0


def test_unknown_trace_and_case_exit_2(cli: CLI) -> None:
    cli.store().close()  # an empty store
    status, out, err = cli("traces", "show", "0" * 32)
    assert status == 2 and out == ""
    assert err.startswith(f"tracely: error: no recording of trace '{'0' * 32}'")
    assert err.count("\n") == 1
    status, _, err = cli("cases", "show", "nope")
    assert status == 2 and err.startswith("tracely: error: no case 'nope'")


def test_python_dash_m_runs_the_cli() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "tracely_sdk.cli", "--version"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"tracely {__version__}"


def test_a_postgresql_store_without_psycopg_is_one_line_with_an_install_hint(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    env["PYTHONPATH"] = str(ROOT)
    # as if psycopg were not installed
    code = (
        "import sys; sys.modules['psycopg'] = None; from tracely_sdk.cli import main; "
        "sys.exit(main())"
    )
    for argv in (["cases", "list"], ["replay"], ["traces", "list"]):
        proc = subprocess.run(
            [sys.executable, "-c", code, *argv, "--store", "postgresql://u:s3cret@127.0.0.1:9/x"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr == (
            "tracely: error: store URL 'postgresql://u:***@127.0.0.1:9/x': psycopg is not "
            "installed; install it with: pip install '.[postgres]' in a tracely checkout "
            "(or 'tracely-replay[postgres]' from an index)\n"
        )
