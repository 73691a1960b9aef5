"""Who may call the server, and how often.

Tokens are configured as ``scope:token`` pairs (``TRACELY_SERVER_TOKENS``, comma-separated, or a
tokens file with one pair a line and ``#`` comments). Scopes:

* ``ingest`` — ``POST /v1/traces`` (what a collector or an app's OTLP exporter holds);
* ``read`` — every ``GET /api/...``;
* ``write`` — every change under ``/api/...``, and reading (``write`` implies ``read``).

A presented token is hashed and compared with :func:`hmac.compare_digest` against the hash of
every configured token, without stopping at a match, so the time taken says nothing about which
token (or how much of one) matched. No token is ever logged or echoed in an error: messages
about the configuration name the entry's position, never its text.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tracely_sdk.errors import ConfigError

__all__ = [
    "INGEST",
    "READ",
    "SCOPES",
    "WRITE",
    "Principal",
    "RateLimiter",
    "SignInThrottle",
    "TokenSet",
    "load_tokens",
]

logger = logging.getLogger("tracely.server")

INGEST = "ingest"
READ = "read"
WRITE = "write"
SCOPES = (INGEST, READ, WRITE)
_IMPLIED = {INGEST: {INGEST}, READ: {READ}, WRITE: {WRITE, READ}}
_TOKEN_RE = re.compile(r"^[!-+\--~]+$")  # visible ASCII except the comma that separates pairs
_SHORT = 16


@dataclass(frozen=True)
class Principal:
    """Who a request comes from: a description safe to log, its scopes and its rate-limit key."""

    name: str
    scopes: frozenset[str]
    key: str

    def may(self, scope: str) -> bool:
        return scope in self.scopes


@dataclass(frozen=True)
class _Entry:
    digest: bytes
    scopes: frozenset[str]
    where: str


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def _entry(pair: str, where: str) -> _Entry:
    scope, sep, token = pair.strip().partition(":")
    scope = scope.strip().lower()
    if not sep:
        raise ConfigError(f"{where} is not scope:token (scopes: {', '.join(SCOPES)})")
    if scope not in _IMPLIED:
        shown = scope if len(scope) <= 20 else scope[:20] + "..."
        raise ConfigError(f"{where}: unknown scope {shown!r}; use {', '.join(SCOPES)}")
    token = token.strip()
    if not token:
        raise ConfigError(f"{where}: the {scope} token is empty")
    if not _TOKEN_RE.fullmatch(token):
        raise ConfigError(
            f"{where}: the {scope} token must be visible ASCII characters without spaces or commas"
        )
    if len(token) < _SHORT:
        logger.warning(
            "%s: the %s token is shorter than %d characters; use a long random token "
            "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)",
            where,
            scope,
            _SHORT,
        )
    return _Entry(_digest(token), frozenset(_IMPLIED[scope]), where)


class TokenSet:
    """The configured tokens; :meth:`authenticate` tells who an ``Authorization`` header is."""

    def __init__(self, entries: Iterable[_Entry] = (), *, insecure: bool = False) -> None:
        self._entries = tuple(entries)
        self.insecure = insecure
        if not self._entries and not insecure:
            raise ConfigError(
                "no tokens are configured: set TRACELY_SERVER_TOKENS (e.g. "
                "'ingest:<token>,write:<token>') or pass --tokens-file, or pass "
                "--insecure-no-auth to allow every request (local demos only)"
            )

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def parse(cls, text: str, source: str = "TRACELY_SERVER_TOKENS") -> list[_Entry]:
        """The entries of a comma-separated ``scope:token`` list."""
        return [
            _entry(pair, f"{source} entry {n}")
            for n, pair in enumerate((p for p in text.split(",") if p.strip()), 1)
        ]

    @classmethod
    def read_file(cls, path: str | Path) -> list[_Entry]:
        """The entries of a tokens file: one ``scope:token`` a line, ``#`` comment lines."""
        file = Path(path).expanduser()
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(f"--tokens-file {file}: cannot read it ({reason})") from None
        entries = []
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            entries.append(_entry(stripped, f"tokens file {file} line {number}"))
        if not entries:
            raise ConfigError(f"--tokens-file {file} holds no scope:token line")
        return entries

    def authenticate(self, authorization: str | None, client: str) -> Principal | None:
        """The principal of an ``Authorization: Bearer <token>`` header; None when the header is
        missing or names no configured token. Every request is a principal in insecure mode."""
        if self.insecure and not self._entries:
            return Principal("anonymous (no auth)", frozenset(SCOPES), f"client:{client}")
        token = _bearer(authorization)
        if token is None:
            return None
        return self._principal(_digest(token))

    def token_digest(self, token: str) -> str:
        """What a sign-in session keeps of its token (hex): enough to find it again here."""
        return _digest(token).hex()

    def authenticate_digest(self, digest: str) -> Principal | None:
        """The principal of a token known by :meth:`token_digest` (a sign-in session's); None
        when no configured token has it (any more)."""
        try:
            presented = bytes.fromhex(digest)
        except ValueError:
            return None
        return self._principal(presented)

    def _principal(self, presented: bytes) -> Principal | None:
        scopes: set[str] = set()
        matched = -1
        for index, entry in enumerate(self._entries):
            # No early exit: every configured token is compared, whatever matched before.
            if hmac.compare_digest(presented, entry.digest):
                scopes |= entry.scopes
                matched = index
        if matched < 0:
            return None
        label = "+".join(s for s in SCOPES if s in scopes)
        return Principal(f"token #{matched + 1} ({label})", frozenset(scopes), f"token:{matched}")


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    value = value.strip()
    return value or None


def load_tokens(
    tokens: str, tokens_file: str | None, *, insecure: bool, warn: bool = True
) -> TokenSet:
    """The token set from ``TRACELY_SERVER_TOKENS`` text and an optional tokens file;
    ``warn=False`` when the caller says itself why no token is asked."""
    entries = TokenSet.parse(tokens) if tokens else []
    if tokens_file:
        entries += TokenSet.read_file(tokens_file)
    token_set = TokenSet(entries, insecure=insecure)
    if insecure and not entries and warn:
        logger.warning(
            "authentication is OFF (--insecure-no-auth): anyone who can reach this server may "
            "send traces and change cases; use it for local demos only"
        )
    elif insecure and entries:
        logger.warning("--insecure-no-auth is ignored because tokens are configured")
    return token_set


class RateLimiter:
    """A token bucket per key: ``rate`` requests a second, up to ``burst`` at once.

    :meth:`acquire` takes one request's worth and returns 0.0, or how many seconds until one
    is available (nothing is taken then). A rate of 0 allows everything.
    """

    _MAX_KEYS = 10_000

    def __init__(self, rate: float, burst: int | None = None) -> None:
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else max(1, int(2 * rate)))
        self._buckets: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def wait(self, key: str) -> float:
        """How many seconds until ``key`` has a request's worth (0.0: now); takes nothing."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                return 0.0
            level = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
            return 0.0 if level >= 1.0 else (1.0 - level) / self.rate

    def acquire(self, key: str) -> float:
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= self._MAX_KEYS:
                    self._forget_full(now)
                bucket = self._buckets[key] = [self.burst, now]
            level = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
            bucket[1] = now
            if level >= 1.0:
                bucket[0] = level - 1.0
                return 0.0
            bucket[0] = level
            return (1.0 - level) / self.rate

    def _forget_full(self, now: float) -> None:
        # A bucket that has refilled carries no state worth keeping.
        for key, (level, last) in list(self._buckets.items()):
            if level + (now - last) * self.rate >= self.burst:
                del self._buckets[key]
        if len(self._buckets) >= self._MAX_KEYS:
            self._buckets.clear()


class SignInThrottle:
    """Failed sign-ins, counted per client and per token prefix: ``per_minute`` of each a
    minute, as many at once.

    The prefix is a token's first :attr:`PREFIX` characters (kept hashed): guesses spread over
    many clients still share it. A sign-in is checked with :meth:`wait` before its token is, so
    that a throttled guesser learns nothing, and only a failure is counted (:meth:`failed`).
    """

    PREFIX = 6

    def __init__(self, per_minute: int) -> None:
        self._limiter = RateLimiter(per_minute / 60.0, per_minute)

    def _keys(self, client: str, token: str) -> tuple[str, str]:
        prefix = hashlib.sha256(token[: self.PREFIX].encode("utf-8", "surrogateescape"))
        return f"client:{client}", f"prefix:{prefix.hexdigest()[:32]}"

    def wait(self, client: str, token: str) -> float:
        """Seconds until this client may try this token (0.0: now)."""
        return max(self._limiter.wait(key) for key in self._keys(client, token))

    def failed(self, client: str, token: str) -> None:
        for key in self._keys(client, token):
            self._limiter.acquire(key)
