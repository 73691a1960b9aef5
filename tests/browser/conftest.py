"""Pages in a real browser: one headless Chromium per test module, a fresh page per test.

Playwright's sync API keeps an event loop running in the thread while it is open, so the
browser is closed after each module: the tests of other modules run with no loop, as always.

Without Chromium (or Playwright) every test here is skipped with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser._chromium import Watch, chromium, find_chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable, reason = find_chromium()
    if executable is None:
        pytest.skip(reason)
    with chromium(executable) as b:
        yield b


@pytest.fixture
def watch() -> Watch:
    return Watch()


@pytest.fixture
def page(browser: Any, watch: Watch) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    watch.attach(p)
    p.set_default_timeout(15_000)
    try:
        yield p
    finally:
        context.close()
    assert watch.outside == [], f"requests left 127.0.0.1: {watch.outside}"
    assert watch.console_errors == [], f"console errors: {watch.console_errors}"
    assert watch.statuses == watch.expected_statuses, "pages answered with other statuses"
