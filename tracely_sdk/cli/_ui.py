"""``tracely ui``: the pages of the local store in a browser, served on 127.0.0.1 only."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from tracely_sdk.errors import ConfigError

if TYPE_CHECKING:
    from tracely_sdk.cli import Context

__all__ = ["register"]

DESCRIPTION = """\
Serve the pages of the local store (the cases, the recorded traces, the replay runs, each case
of a run call by call) on 127.0.0.1 and print their URL. No token is needed: the server answers
only on this machine's loopback address and only for 127.0.0.1 or localhost, and its forms
(promote a trace, recapture a case) carry a value a page elsewhere cannot know. For a team's
store use `tracely serve`, whose /ui pages ask for a token.
"""


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "ui",
        parents=[common],
        help="browse the local store's cases, traces and runs on 127.0.0.1",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--port", default="8712", help="TCP port on 127.0.0.1 (default 8712; 0 picks a free one)"
    )
    p.set_defaults(handler=cmd_ui)


def cmd_ui(args: argparse.Namespace, ctx: Context) -> int:
    import dataclasses

    from tracely_sdk._config import resolve
    from tracely_sdk.server._cli import run
    from tracely_sdk.server._config import ServerConfig
    from tracely_sdk.store import default_store_url, redact_url

    url = resolve("store", ctx.store_url) or default_store_url()
    if url.split("://", 1)[0].lower() in ("http", "https"):
        raise ConfigError(
            f"the store {redact_url(url)} is a tracely server: open its pages at "
            f"{redact_url(url).rstrip('/')}/ui instead (tracely ui shows a local store)"
        )
    # A store that is not there is named, not made: the pages of an empty new file help nobody.
    ctx.store(create=False)
    ctx.close()
    # The environment's server settings (tokens, host) are not this command's: it always
    # listens on the loopback address, without tokens.
    config = ServerConfig.load(
        {}, insecure_no_auth=True, host="127.0.0.1", port=args.port, store=url, rate_limit="0"
    )
    config = dataclasses.replace(config, local_ui=True)
    banner = (
        "tracely ui: {url}/ui/ (the store " + redact_url(url) + "; no token: it listens on "
        "127.0.0.1 and answers only requests for 127.0.0.1 or localhost)"
    )
    return run(config, banner=banner)
