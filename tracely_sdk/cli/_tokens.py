"""``tracely tokens``: new bearer tokens for ``tracely serve``, and the line that configures them.

Each token is 32 random bytes from :mod:`secrets`, URL-safe base64 (43 characters of
``A-Z a-z 0-9 - _``: what the server accepts, and safe unquoted in a shell). The output is
shell assignments, so ``eval "$(tracely tokens)"`` sets them::

    TRACELY_SERVER_TOKENS=ingest:...,write:...
    INGEST=...
    WRITE=...

The first line is the server's setting; the others are what each client is given, as
``TRACELY_TOKEN`` (the CLI and CI against the server) or in a collector's or exporter's
``Authorization: Bearer`` header (ingest).
"""

from __future__ import annotations

import argparse
import secrets
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracely_sdk.cli import Context

__all__ = ["new_token", "register"]

DEFAULT_SCOPES = ("ingest", "write")


def new_token() -> str:
    """A new bearer token: 256 random bits, URL-safe base64 without padding."""
    return secrets.token_urlsafe(32)


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    from tracely_sdk.server._auth import SCOPES

    p = commands.add_parser(
        "tokens",
        parents=[common],
        help="make bearer tokens for tracely serve, and the TRACELY_SERVER_TOKENS line",
        description="Print new random bearer tokens for the tracely server, one per SCOPE "
        f"(default: {' '.join(DEFAULT_SCOPES)}; scopes: {', '.join(SCOPES)}; write implies "
        "read), as shell assignments: TRACELY_SERVER_TOKENS=... for the server, then one "
        "variable per scope (INGEST=..., WRITE=...) for its clients. "
        'eval "$(tracely tokens)" sets them in a shell. Clients send theirs as '
        "TRACELY_TOKEN (the CLI, CI) or in an Authorization: Bearer header (a collector). "
        "Keep them secret: nothing else stores them.",
    )
    p.add_argument(
        "scopes",
        nargs="*",
        metavar="SCOPE",
        help=f"the scopes to make a token for, each once ({', '.join(SCOPES)})",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_tokens)


def cmd_tokens(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk.errors import ConfigError
    from tracely_sdk.server._auth import SCOPES

    scopes = list(dict.fromkeys(s.lower() for s in args.scopes or DEFAULT_SCOPES))
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown:
        raise ConfigError(
            f"tracely tokens: unknown scope {unknown[0]!r}; the server's scopes are "
            f"{', '.join(SCOPES)}"
        )
    tokens = {scope: new_token() for scope in scopes}
    setting = ",".join(f"{scope}:{token}" for scope, token in tokens.items())
    if args.json:
        ctx.out.json({"TRACELY_SERVER_TOKENS": setting, "tokens": tokens})
        return 0
    ctx.out.line(f"TRACELY_SERVER_TOKENS={setting}")
    for scope, token in tokens.items():
        ctx.out.line(f"{scope.upper()}={token}")
    return 0
