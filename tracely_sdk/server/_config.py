"""The server's settings, once each: environment variable, default and meaning.

The settings are :class:`tracely_sdk._config.Setting` entries, parsed and resolved as every other
tracely setting (:func:`tracely_sdk._config.resolve_setting`): a command-line option (or an
explicit argument to :meth:`ServerConfig.load`), then the environment, then the default; not
``[tool.tracely]``, which configures a project, not a server that may serve many (a server given
no store opens the project's, as every command does). An empty string counts as unset. A value that cannot be used raises
:class:`~tracely_sdk.errors.ConfigError` naming the option or variable it came from.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tracely_sdk._config import (
    Setting,
    _networks,
    _port,
    _positive,
    _rate,
    _seconds,
    _text,
    _timeout,
    resolve_setting,
)
from tracely_sdk.errors import ConfigError

__all__ = ["DEFAULT_PORT", "SERVER_SETTINGS", "ServerConfig"]

DEFAULT_PORT = 8711
MIB = 1024 * 1024
# The OTLP/HTTP receiver of the OpenTelemetry Collector refuses bodies over 20 MiB by default;
# exporters batch to stay under it, so the same figure accepts what they send.
DEFAULT_MAX_BODY_BYTES = 20 * MIB


SERVER_SETTINGS: dict[str, Setting] = {
    s.name: dataclasses.replace(s, project=False)
    for s in (
        Setting("host", ("TRACELY_SERVER_HOST",), "127.0.0.1", _text, "Address to listen on."),
        Setting(
            "port",
            ("TRACELY_SERVER_PORT",),
            DEFAULT_PORT,
            _port,
            "TCP port to listen on (0 picks a free one and prints it).",
        ),
        Setting(
            "grpc_port",
            ("TRACELY_SERVER_GRPC_PORT",),
            None,
            _port,
            "TCP port of the OTLP/gRPC receiver (off unless set; 4317 by convention; 0 picks a "
            "free one and prints it).",
        ),
        Setting(
            "store",
            ("TRACELY_SERVER_STORE", "TRACELY_STORE"),
            None,
            _text,
            "Where the server keeps recordings and cases: sqlite:///path.db (default "
            ".tracely/tracely.db in the project) or postgresql://...",
        ),
        Setting(
            "tokens",
            ("TRACELY_SERVER_TOKENS",),
            "",
            _text,
            "Bearer tokens, comma-separated scope:token pairs (scopes: ingest, read, write).",
        ),
        Setting(
            "tokens_file",
            ("TRACELY_SERVER_TOKENS_FILE",),
            None,
            _text,
            "A file of scope:token lines (# starts a comment), read at start.",
        ),
        Setting(
            "quiet_seconds",
            ("TRACELY_SERVER_QUIET_SECONDS",),
            2.0,
            _seconds,
            "How long a trace must receive no spans, once its root has arrived, before its "
            "recording is assembled.",
        ),
        Setting(
            "orphan_seconds",
            ("TRACELY_SERVER_ORPHAN_SECONDS",),
            300.0,
            _seconds,
            "How long a trace whose root span never arrived is held before it is assembled "
            "from the spans it has.",
        ),
        Setting(
            "retain_seconds",
            ("TRACELY_SERVER_RETAIN_SECONDS",),
            30.0,
            _seconds,
            "How long an assembled trace's spans stay in memory so that late spans update its "
            "recording (later ones can no longer be merged).",
        ),
        Setting(
            "max_body_bytes",
            ("TRACELY_SERVER_MAX_BODY_BYTES",),
            DEFAULT_MAX_BODY_BYTES,
            _positive,
            "Largest request body, compressed and decompressed; larger ones get 413 (the "
            "default is the OpenTelemetry Collector's OTLP/HTTP receiver limit).",
        ),
        Setting(
            "write_queue_size",
            ("TRACELY_SERVER_WRITE_QUEUE_SIZE",),
            2048,
            _positive,
            "Assembled recordings waiting for the store; when full, /v1/traces answers 429.",
        ),
        Setting(
            "write_batch_size",
            ("TRACELY_SERVER_WRITE_BATCH_SIZE",),
            256,
            _positive,
            "Recordings written to the store in one transaction.",
        ),
        Setting(
            "max_spans",
            ("TRACELY_SERVER_MAX_SPANS",),
            100_000,
            _positive,
            "Spans held in memory across all traces; above it /v1/traces answers 429.",
        ),
        Setting(
            "max_traces",
            ("TRACELY_SERVER_MAX_TRACES",),
            50_000,
            _positive,
            "Traces held in memory; above it /v1/traces answers 429.",
        ),
        Setting(
            "max_held_bytes",
            ("TRACELY_SERVER_MAX_HELD_BYTES",),
            128 * MIB,
            _positive,
            "Bytes of spans (as received, decompressed) held in memory across all traces, "
            "orphans included; above it /v1/traces answers 429.",
        ),
        Setting(
            "max_journal_bytes",
            ("TRACELY_SERVER_MAX_JOURNAL_BYTES",),
            1024 * MIB,
            _positive,
            "Bytes in the ingest journal on disk; above it /v1/traces answers 429.",
        ),
        Setting(
            "max_spans_per_trace",
            ("TRACELY_SERVER_MAX_SPANS_PER_TRACE",),
            10_000,
            _positive,
            "Spans kept of one trace; further ones are rejected (OTLP partial success).",
        ),
        Setting(
            "rate_limit",
            ("TRACELY_SERVER_RATE_LIMIT",),
            200.0,
            _rate,
            "Requests per second per token (a token bucket; 0 turns it off); above it 429.",
        ),
        Setting(
            "rate_burst",
            ("TRACELY_SERVER_RATE_BURST",),
            None,
            _positive,
            "Requests a token may make at once before the rate applies (default: 2 x rate).",
        ),
        Setting(
            "sign_in_failures",
            ("TRACELY_SERVER_SIGN_IN_FAILURES",),
            10,
            _positive,
            "Failed sign-ins to the pages allowed a minute from one client, and with tokens "
            "sharing their first 6 characters; further sign-ins get 429 until the minute "
            "refills.",
        ),
        Setting(
            "session_seconds",
            ("TRACELY_SERVER_SESSION_SECONDS",),
            12 * 3600.0,
            _timeout,
            "How long a sign-in to the pages lasts (a session kept in the store; signing out "
            "ends it at once, on every server sharing the store).",
        ),
        Setting(
            "trusted_proxies",
            ("TRACELY_SERVER_TRUSTED_PROXIES",),
            (),
            _networks,
            "Addresses or networks of the proxies in front of the server, comma-separated: "
            "only a request from one of them has its client address (for rate limits and "
            "sign-in throttling) taken from X-Forwarded-For. Empty: the TCP peer, always.",
        ),
        Setting(
            "max_concurrent_requests",
            ("TRACELY_SERVER_MAX_CONCURRENT_REQUESTS",),
            32,
            _positive,
            "Requests handled at the same time; others wait briefly, then get 503.",
        ),
        Setting(
            "max_connections",
            ("TRACELY_SERVER_MAX_CONNECTIONS",),
            256,
            _positive,
            "Open client connections. At the cap the oldest idle one is closed to make room; "
            "when every one has a request in flight, a further one is answered 503 and closed "
            "(/healthz and /readyz are answered all the same).",
        ),
        Setting(
            "grpc_max_connections",
            ("TRACELY_SERVER_GRPC_MAX_CONNECTIONS",),
            256,
            _positive,
            "Open connections to the OTLP/gRPC port; further ones are closed as they are accepted.",
        ),
        Setting(
            "grpc_idle_timeout",
            ("TRACELY_SERVER_GRPC_IDLE_TIMEOUT",),
            300.0,
            _timeout,
            "How long an OTLP/gRPC connection with no call in flight is kept open; then it is "
            "sent a GOAWAY and closed (clients reconnect when they next export).",
        ),
        Setting(
            "grpc_max_streams",
            ("TRACELY_SERVER_GRPC_MAX_STREAMS",),
            16,
            _positive,
            "OTLP/gRPC calls one connection may have in flight at once.",
        ),
        Setting(
            "header_timeout",
            ("TRACELY_SERVER_HEADER_TIMEOUT",),
            10.0,
            _timeout,
            "How long a request's head may take to arrive, from its first byte (or from the "
            "connection's opening); then the connection is closed.",
        ),
        Setting(
            "body_timeout",
            ("TRACELY_SERVER_BODY_TIMEOUT",),
            60.0,
            _timeout,
            "How long a request's body may take to arrive; then it is answered 408 (400 when "
            "the client has stopped sending) and the connection closed. The body is read "
            "before the request takes a slot.",
        ),
        Setting(
            "keep_alive_timeout",
            ("TRACELY_SERVER_KEEP_ALIVE_TIMEOUT",),
            15.0,
            _timeout,
            "How long an idle connection is kept open between requests.",
        ),
        Setting(
            "journal_dir",
            ("TRACELY_SERVER_JOURNAL_DIR",),
            None,
            _text,
            "The write-ahead journal of accepted spans (default: ingest-journal/ beside a SQLite "
            "store, else .tracely/ingest-journal/<store> in the project).",
        ),
        Setting(
            "shutdown_timeout",
            ("TRACELY_SERVER_SHUTDOWN_TIMEOUT",),
            30.0,
            _seconds,
            "How long shutdown waits for in-flight requests and store writes.",
        ),
    )
}


@dataclass(frozen=True)
class ServerConfig:
    """Everything ``tracely serve`` is configured with. Build one with :meth:`load`."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    grpc_port: int | None = None
    store: str | None = None
    tokens: str = ""
    tokens_file: str | None = None
    insecure_no_auth: bool = False
    # ``tracely ui``: no tokens by design (loopback only, its pages check the Host), so the
    # warning meant for --insecure-no-auth would be false there.
    local_ui: bool = False
    quiet_seconds: float = 2.0
    orphan_seconds: float = 300.0
    retain_seconds: float = 30.0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    write_queue_size: int = 2048
    write_batch_size: int = 256
    max_spans: int = 100_000
    max_traces: int = 50_000
    max_spans_per_trace: int = 10_000
    max_held_bytes: int = 128 * MIB
    max_journal_bytes: int = 1024 * MIB
    rate_limit: float = 200.0
    rate_burst: int | None = None
    sign_in_failures: int = 10
    session_seconds: float = 12 * 3600.0
    trusted_proxies: tuple[str, ...] = ()
    max_concurrent_requests: int = 32
    max_connections: int = 256
    grpc_max_connections: int = 256
    grpc_idle_timeout: float = 300.0
    grpc_max_streams: int = 16
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    keep_alive_timeout: float = 15.0
    journal_dir: str | None = None
    shutdown_timeout: float = 30.0

    @classmethod
    def load(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        insecure_no_auth: bool = False,
        **arguments: Any,
    ) -> ServerConfig:
        """Resolve every setting: ``arguments`` (``None`` = not given), then ``environ``
        (default ``os.environ``), then the default."""
        env = os.environ if environ is None else environ
        unknown = set(arguments) - set(SERVER_SETTINGS)
        if unknown:
            raise TypeError(f"unknown server settings: {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {"insecure_no_auth": bool(insecure_no_auth)}
        for name, setting in SERVER_SETTINGS.items():
            option = "--" + name.replace("_", "-")
            values[name] = resolve_setting(setting, arguments.get(name), env, argument=option)
        return cls(**values).checked()

    def checked(self) -> ServerConfig:
        """This configuration, or ConfigError for settings that contradict each other."""
        if not self.host:
            raise ConfigError("--host / TRACELY_SERVER_HOST is empty")
        if self.rate_limit > 0 and self.rate_burst is None:
            return replace(self, rate_burst=max(1, math.ceil(2 * self.rate_limit))).checked()
        if self.store and self.store.split("://", 1)[0].lower() in ("http", "https"):
            from tracely_sdk.store import redact_url

            raise ConfigError(
                f"the store {redact_url(self.store)} is a tracely server: the server keeps its "
                "data in SQLite or PostgreSQL, not in another tracely server; pass --store or set "
                "TRACELY_SERVER_STORE (it takes precedence over TRACELY_STORE)"
            )
        return self

    def journal_path(self, store: Any) -> Path | None:
        """The journal directory for ``store`` (None for an in-memory store: nothing survives)."""
        if self.journal_dir:
            return Path(self.journal_dir).expanduser().absolute()
        if getattr(store, "memory", False):
            return None
        path = getattr(store, "path", None)
        if isinstance(path, Path):
            return path.parent / "ingest-journal"
        import hashlib

        from tracely_sdk.store import redact_url, tracely_dir

        url = redact_url(str(getattr(store, "url", "")))
        return tracely_dir() / "ingest-journal" / hashlib.sha256(url.encode()).hexdigest()[:16]
