"""``tracely serve``: run the server until SIGTERM or SIGINT, then drain and exit.

The first line on stdout says where it listens (``tracely server listening on
http://HOST:PORT``, the real port when ``--port 0`` asked for a free one); with OTLP/gRPC on,
the second says where that listens (``tracely server listening for OTLP/gRPC on HOST:PORT``).
Logs go to stderr.
A configuration error is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any, TextIO

from tracely_sdk.errors import ConfigError, MissingDependency

__all__ = ["add_serve_arguments", "add_serve_command", "cmd_serve", "main", "run"]

EXIT_OK = 0
EXIT_USAGE = 2
SERVE_GC_THRESHOLDS = (50_000, 20, 20)
"""The cycle collector's thresholds while ``tracely serve`` runs (see :func:`run`)."""

DESCRIPTION = """\
Run the tracely server: an OTLP/HTTP receiver (POST /v1/traces) that turns the traces of any
OpenTelemetry Collector or exporter into recordings, and the recordings and cases API that
`TRACELY_STORE=http://host:port` points the CLI and CI at. The OpenAPI document is served at
/openapi.json. With --grpc (or --grpc-port N) it also receives OTLP/gRPC on a port of its own.

Tokens: TRACELY_SERVER_TOKENS="ingest:<token>,write:<token>" (scopes ingest, read, write;
write implies read) or --tokens-file. Every other setting also has a TRACELY_SERVER_*
environment variable; an option given here wins.
"""


def add_serve_arguments(parser: argparse.ArgumentParser, *, store_option: bool = True) -> None:
    """The options of ``tracely serve`` (``store_option=False`` when ``--store`` is shared)."""
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", help="TCP port (default 8711; 0 picks a free one, printed on stdout)"
    )
    parser.add_argument(
        "--grpc",
        action="store_true",
        help="also receive OTLP/gRPC, on port 4317 unless --grpc-port says otherwise",
    )
    parser.add_argument(
        "--grpc-port",
        metavar="N",
        help="receive OTLP/gRPC on this TCP port (0 picks a free one, printed on stdout)",
    )
    if store_option:
        parser.add_argument(
            "--store",
            metavar="URL",
            help="sqlite:///path.db or postgresql://... (default: $TRACELY_SERVER_STORE, "
            "$TRACELY_STORE, else .tracely/tracely.db in the project)",
        )
    parser.add_argument(
        "--tokens-file", metavar="FILE", help="scope:token lines (# comments), read at start"
    )
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="accept every request without a token (local demos only)",
    )
    parser.add_argument(
        "--quiet-seconds",
        metavar="S",
        help="assemble a trace once its root arrived and no span came for S seconds (default 2)",
    )
    parser.add_argument(
        "--orphan-seconds",
        metavar="S",
        help="assemble a trace whose root never arrived after S seconds (default 300)",
    )
    parser.add_argument(
        "--journal-dir",
        metavar="DIR",
        help="the write-ahead journal of accepted spans (default: beside the SQLite store)",
    )
    from tracely_sdk.server._config import DEFAULT_MAX_BODY_BYTES, MIB

    parser.add_argument(
        "--max-body-bytes",
        metavar="N",
        help=f"largest request body (default {DEFAULT_MAX_BODY_BYTES // MIB} MiB, the "
        "OpenTelemetry Collector's)",
    )
    parser.add_argument(
        "--rate-limit", metavar="R", help="requests per second per token (default 200; 0: off)"
    )
    parser.add_argument(
        "--trusted-proxies",
        metavar="ADDRS",
        help="proxies (IP addresses or networks, comma-separated) whose X-Forwarded-For "
        "gives the client address (default: none; the TCP peer is the client)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request (stderr)")


def add_serve_command(subparsers: Any, common: argparse.ArgumentParser | None = None) -> Any:
    """Add ``serve`` to the ``tracely`` command's subparsers; returns its parser.

    With ``common`` (the parent parser that already defines ``--store``) the option is shared.
    """
    parser = subparsers.add_parser(
        "serve",
        parents=[common] if common is not None else [],
        help="run the tracely server (OTLP receiver and cases API)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_serve_arguments(parser, store_option=common is None)
    parser.set_defaults(handler=cmd_serve)
    return parser


def _config(args: argparse.Namespace) -> Any:
    from tracely_sdk.server._config import ServerConfig

    return ServerConfig.load(
        insecure_no_auth=bool(getattr(args, "insecure_no_auth", False)),
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
        grpc_port=_grpc_port(args),
        store=getattr(args, "store", None),
        tokens_file=getattr(args, "tokens_file", None),
        quiet_seconds=getattr(args, "quiet_seconds", None),
        orphan_seconds=getattr(args, "orphan_seconds", None),
        journal_dir=getattr(args, "journal_dir", None),
        max_body_bytes=getattr(args, "max_body_bytes", None),
        rate_limit=getattr(args, "rate_limit", None),
        trusted_proxies=getattr(args, "trusted_proxies", None),
    )


def _grpc_port(args: argparse.Namespace) -> Any:
    port = getattr(args, "grpc_port", None)
    if port is None and getattr(args, "grpc", False):
        from tracely_sdk.server._grpc import DEFAULT_GRPC_PORT

        return DEFAULT_GRPC_PORT
    return port


class _TerminalFormatter(logging.Formatter):
    """Log lines with the control characters a client put in a value (a path, a name) escaped,
    as the ``tracely`` command prints everything."""

    def format(self, record: logging.LogRecord) -> str:
        from tracely_sdk._terminal import terminal_safe

        return terminal_safe(super().format(record))


def _setup_logging(verbose: bool) -> None:
    logger = logging.getLogger("tracely")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_TerminalFormatter("tracely server: %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)


def cmd_serve(args: argparse.Namespace, ctx: Any = None) -> int:
    """The handler of ``tracely serve``. Raises ConfigError for an unusable setting."""
    _setup_logging(bool(getattr(args, "verbose", False)))
    return run(_config(args))


# Descriptors beyond the two ports' connections: the store, the journal, logs, worker pipes.
_SPARE_FILES = 256


def _fit_open_files(config: Any) -> None:
    """Raise the open-files limit so both ports' connection caps fit in it, or warn.

    Each port has its own cap, so whatever the gRPC port suffers, the HTTP port (health checks
    included) still has descriptors to accept with."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return
    needed = config.max_connections + _SPARE_FILES
    if config.grpc_port is not None:
        needed += config.grpc_max_connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        target = soft
    if target < needed:
        logging.getLogger("tracely.server").warning(
            "the open-files limit (%d) is below the connection caps plus %d spare (%d): "
            "lower TRACELY_SERVER_MAX_CONNECTIONS / TRACELY_SERVER_GRPC_MAX_CONNECTIONS or "
            "raise the limit (ulimit -n)",
            target,
            _SPARE_FILES,
            needed,
        )


def run(
    config: Any, *, out: TextIO | None = None, banner: str = "tracely server listening on {url}"
) -> int:
    """Serve until SIGTERM/SIGINT (a second one ends the process at once), then drain.

    ``banner`` is the first line printed, once the port is bound (``{url}``: where)."""
    from tracely_sdk.server import create_server

    _fit_open_files(config)
    server = create_server(config)
    stop = threading.Event()
    handlers: dict[signal.Signals, Any] = {}

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()
        # A second signal ends the process without draining; the journal still holds
        # everything that was acknowledged.
        for sig in handlers:
            signal.signal(sig, signal.SIG_DFL)

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            handlers[sig] = signal.signal(sig, on_signal)
    gc_thresholds = gc.get_threshold()
    # The server holds up to max_spans spans (tens of thousands of objects each second) for
    # the quiet and retain periods; with the default thresholds the cycle collector keeps
    # re-scanning them and took a quarter of the ingest CPU. What ingest allocates is freed by
    # reference counting, so collecting rarely costs little memory. The process is the
    # server's own here; create_server() alone leaves an embedding program's settings be.
    gc.freeze()
    gc.set_threshold(*SERVE_GC_THRESHOLDS)
    try:
        server.start()
        print(banner.format(url=server.url), file=out or sys.stdout, flush=True)
        if server.grpc is not None:
            print(
                f"tracely server listening for OTLP/gRPC on {server.grpc.address}",
                file=out or sys.stdout,
                flush=True,
            )
        while not stop.wait(0.5):
            pass
        logging.getLogger("tracely.server").info(
            "shutting down: finishing requests, writing what is held"
        )
    finally:
        server.shutdown()
        for sig, previous in handlers.items():
            signal.signal(sig, previous)
        gc.set_threshold(*gc_thresholds)
        gc.unfreeze()
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tracely_sdk.server [options]``."""
    parser = argparse.ArgumentParser(
        prog="python -m tracely_sdk.server",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_serve_arguments(parser)
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return cmd_serve(args)
    except (ConfigError, MissingDependency) as exc:
        print(f"tracely serve: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
