"""``tracely serve``: its settings, its configuration errors (one line, exit 2), its wiring."""

from __future__ import annotations

import argparse
import gc
import io
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from server._support import ROOT, Tokens
from tracely_sdk.errors import ConfigError
from tracely_sdk.server import ServerConfig, create_server
from tracely_sdk.server._cli import SERVE_GC_THRESHOLDS, add_serve_command, main, run
from tracely_sdk.store import SQLiteStore


def serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tracely_sdk.server",
            "--port",
            "0",
            "--store",
            f"sqlite:///{tmp_path}/t.db",
            *args,
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT), "TRACELY_SERVER_TOKENS": Tokens().env, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("package", ["starlette", "uvicorn", "pydantic"])
@pytest.mark.parametrize("command", ["tracely_sdk.cli", "tracely_sdk.server._cli"])
def test_serve_without_the_server_extra_names_the_extra(
    tmp_path: Path, package: str, command: str
) -> None:
    # None in sys.modules makes the import fail as if the package were not installed.
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        f"from {command} import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    argv = ["--port", "0", "--store", f"sqlite:///{tmp_path}/t.db"]
    if command == "tracely_sdk.cli":
        argv.insert(0, "serve")
    result = subprocess.run(
        [sys.executable, "-c", code, *argv],
        env={**os.environ, "PYTHONPATH": str(ROOT), "TRACELY_SERVER_TOKENS": Tokens().env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{package} is not installed" in result.stderr
    assert "tracely-replay[server]" in result.stderr


@pytest.mark.parametrize(
    "args,env,expected",
    [
        (["--quiet-seconds", "soon"], {}, "--quiet-seconds='soon' is not a number of seconds"),
        (["--port", "70000"], {}, "--port='70000' is not a TCP port"),
        (["--max-body-bytes", "0"], {}, "--max-body-bytes='0' must be at least 1"),
        ([], {"TRACELY_SERVER_QUIET_SECONDS": "-1"}, "TRACELY_SERVER_QUIET_SECONDS='-1'"),
        (["--store", "http://elsewhere:8711"], {}, "not in another tracely server"),
        (["--store", "ftp://x"], {}, "unknown scheme 'ftp'"),
        (["--tokens-file", "/nonexistent/tokens"], {}, "--tokens-file /nonexistent/tokens"),
    ],
)
def test_configuration_errors_are_one_line_and_exit_2(
    tmp_path: Path, args: list[str], env: dict[str, str], expected: str
) -> None:
    result = serve(tmp_path, *args, **env)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tracely serve: error: ") and expected in lines[0], lines[0]


def test_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "tracely_sdk.server",
                "--port",
                str(port),
                "--store",
                f"sqlite:///{tmp_path}/t.db",
            ],
            env={**os.environ, "PYTHONPATH": str(ROOT), "TRACELY_SERVER_TOKENS": Tokens().env},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr.strip().splitlines()[-1]


def test_settings_precedence_and_defaults() -> None:
    config = ServerConfig.load({})
    assert (config.host, config.port, config.quiet_seconds) == ("127.0.0.1", 8711, 2.0)
    assert config.max_body_bytes == 20 * 1024 * 1024 and config.rate_burst == 400
    env = {
        "TRACELY_SERVER_QUIET_SECONDS": "5",
        "TRACELY_SERVER_PORT": "9000",
        "TRACELY_SERVER_MAX_BODY_BYTES": " ",
    }
    config = ServerConfig.load(env)
    assert (config.quiet_seconds, config.port) == (5.0, 9000)
    assert config.max_body_bytes == 20 * 1024 * 1024  # blank is unset
    assert ServerConfig.load(env, quiet_seconds="0.5").quiet_seconds == 0.5
    assert ServerConfig.load({"TRACELY_STORE": "sqlite:///x.db"}).store == "sqlite:///x.db"
    assert (
        ServerConfig.load(
            {"TRACELY_STORE": "sqlite:///x.db", "TRACELY_SERVER_STORE": "sqlite:///y.db"}
        ).store
        == "sqlite:///y.db"
    )
    with pytest.raises(ConfigError, match="TRACELY_SERVER_MAX_SPANS='many'"):
        ServerConfig.load({"TRACELY_SERVER_MAX_SPANS": "many"})


def test_the_journal_lives_beside_a_sqlite_store(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "data" / "t.db")
    assert ServerConfig().journal_path(store) == tmp_path / "data" / "ingest-journal"
    assert ServerConfig(journal_dir=str(tmp_path / "j")).journal_path(store) == tmp_path / "j"
    assert ServerConfig().journal_path(SQLiteStore(":memory:")) is None
    store.close()


def test_create_server_in_process(tmp_path: Path) -> None:
    config = ServerConfig.load({}, port=0, tokens=Tokens().env, store=f"sqlite:///{tmp_path}/t.db")
    with create_server(config).start() as server:
        assert server.port != 0 and server.url == f"http://127.0.0.1:{server.port}"
        import urllib.request

        with urllib.request.urlopen(f"{server.url}/healthz", timeout=5) as response:
            assert response.read() == b'{"status":"ok"}'
    server.shutdown()  # twice is harmless


@pytest.mark.skipif(not hasattr(signal, "SIGTERM"), reason="needs POSIX signals")
def test_run_tunes_the_cycle_collector_only_while_it_serves(tmp_path: Path) -> None:
    config = ServerConfig.load({}, port=0, tokens=Tokens().env, store=f"sqlite:///{tmp_path}/t.db")
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("run() handles signals only in the main thread")
    before = gc.get_threshold()
    handler = signal.getsignal(signal.SIGTERM)
    seen: list[tuple[int, ...]] = []

    class Out(io.StringIO):
        def write(self, text: str) -> int:
            if "listening on" in text:
                seen.append(gc.get_threshold())
                os.kill(os.getpid(), signal.SIGTERM)  # run() handles it: drain and return
            return super().write(text)

    assert run(config, out=Out()) == 0
    assert seen == [SERVE_GC_THRESHOLDS]
    assert gc.get_threshold() == before
    assert signal.getsignal(signal.SIGTERM) == handler


def test_serve_is_a_subcommand_sharing_store_with_the_cli() -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(prog="tracely")
    add_serve_command(parser.add_subparsers(dest="command"), common)
    args = parser.parse_args(
        ["serve", "--store", "sqlite:///x.db", "--port", "0", "--insecure-no-auth"]
    )
    assert args.store == "sqlite:///x.db" and args.port == "0" and args.insecure_no_auth
    assert callable(args.handler)
    standalone = argparse.ArgumentParser(prog="tracely")
    add_serve_command(standalone.add_subparsers(dest="command"))
    assert standalone.parse_args(["serve", "--store", "s.db"]).store == "s.db"


def test_help(capsys: Any) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--insecure-no-auth" in out and "TRACELY_SERVER_TOKENS" in out


def test_importing_the_package_is_light() -> None:
    code = (
        "import sys, tracely_sdk.server; "
        "heavy = [m for m in ('tracely_sdk.server._app', 'tracely_sdk.server._ingest', "
        "'http.server', 'google.rpc.status_pb2') if m in sys.modules]; print(heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.strip() == "[]", result.stderr
    import tracely_sdk.server  # noqa: F401
    from tracely_sdk.store import _backends

    assert {"http", "https", "postgresql", "postgres"} <= set(_backends)


def test_grpc_is_off_unless_asked_for_and_4317_by_default() -> None:
    from tracely_sdk.server._cli import _config, add_serve_arguments

    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    assert _config(parser.parse_args([])).grpc_port is None
    assert _config(parser.parse_args(["--grpc"])).grpc_port == 4317
    assert _config(parser.parse_args(["--grpc", "--grpc-port", "0"])).grpc_port == 0
    assert ServerConfig.load({"TRACELY_SERVER_GRPC_PORT": "4400"}).grpc_port == 4400
    with pytest.raises(ConfigError, match="--grpc-port='70000' is not a TCP port"):
        _config(parser.parse_args(["--grpc-port", "70000"]))


def test_a_grpc_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve(tmp_path, "--grpc-port", str(port))
    assert result.returncode == 2, result
    line = result.stderr.strip().splitlines()[-1]
    assert f"cannot listen for OTLP/gRPC on 127.0.0.1:{port}" in line, line


FIT_OPEN_FILES = """
import logging, resource, sys
logging.basicConfig(stream=sys.stderr)
from tracely_sdk.server import ServerConfig
from tracely_sdk.server._cli import _fit_open_files
_fit_open_files(ServerConfig.load({}, grpc_port=0, grpc_max_connections=300))
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


@pytest.mark.parametrize(("soft", "hard", "raised"), [(128, 4096, 812), (128, 512, 512)])
def test_serve_makes_room_for_both_ports_connection_caps(soft: int, hard: int, raised: int) -> None:
    # 256 HTTP connections + 300 gRPC ones + 256 spare: raised when it may be, else a warning.
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    done = subprocess.run(
        [sys.executable, "-c", FIT_OPEN_FILES],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == raised
    assert ("below the connection caps" in done.stderr) is (raised < 812)
