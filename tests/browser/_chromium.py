"""Headless Chromium for the page tests and the README's screenshot: Debian's ``chromium``
driven by Playwright (which cannot download its own browsers here).

Every request a page makes is watched: anything but ``file://``, ``data:`` and 127.0.0.1 is
aborted and remembered, so a test can assert that nothing left the machine.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def find_chromium() -> tuple[str | None, str]:
    """The Chromium executable, or None and the reason there is none."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return None, "playwright is not installed: pip install -e '.[dev]'"
    wanted = os.environ.get("TRACELY_CHROMIUM")
    candidates = [wanted] if wanted else ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
    candidates += [shutil.which("chromium") or "", shutil.which("chromium-browser") or ""]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path, ""
    return None, (
        "no Chromium found (looked for $TRACELY_CHROMIUM, /usr/bin/chromium, chromium on PATH): "
        "bash .ci/install-chromium.sh, or apt-get install chromium"
    )


def is_local(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("file", "data", "about", "blob"):
        return True
    return parts.scheme in ("http", "https") and parts.hostname == "127.0.0.1"


_FAILED_LOAD = re.compile(r"^Failed to load resource: the server responded with a status of (\d+)")


@dataclass
class Watch:
    """What a page did that a person would never want: requests elsewhere, console errors.

    A page answered with an error status (a refused sign-in, a 409) is logged by Chromium as
    a console error; those are kept apart in ``statuses``, for a test to expect them.
    """

    outside: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    expected_statuses: list[int] = field(default_factory=list)

    def _console(self, msg: Any) -> None:
        if msg.type != "error":
            return
        failed = _FAILED_LOAD.match(msg.text)
        if failed:
            self.statuses.append(int(failed.group(1)))
        else:
            self.console_errors.append(msg.text)

    def attach(self, page: Any) -> None:
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.console_errors.append(str(exc)))

        def route(route: Any) -> None:
            url = route.request.url
            if is_local(url):
                route.continue_()
            else:
                self.outside.append(url)
                route.abort()

        page.route("**/*", route)


@contextmanager
def chromium(executable: str) -> Iterator[Any]:
    """A headless Chromium browser (Playwright's ``Browser``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
