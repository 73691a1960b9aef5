"""``tracely ui``: the local store's pages on 127.0.0.1, no token, in Chromium."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.test_server_pages import Seeded

ROOT = Path(__file__).resolve().parents[2]
BANNER = re.compile(r"^tracely ui: (http://127\.0\.0\.1:\d+)/ui/ \(the store sqlite:///.*\)$")


@pytest.fixture
def ui(capture: Any, tmp_path: Path) -> Iterator[tuple[str, Seeded]]:
    seeded = Seeded(capture, tmp_path / "store")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRACELY_SERVER_TOKENS": "read:ignored-here"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracely_sdk.cli", "ui", "--port", "0", "--store", seeded.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()  # printed once the port is bound
        match = BANNER.match(line)
        assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield match.group(1), seeded
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_the_local_pages_need_no_sign_in_and_offer_the_write_actions(
    page: Any, ui: tuple[str, Seeded]
) -> None:
    url, seeded = ui
    page.goto(url + "/ui/")
    page.wait_for_url(re.compile(r"/ui/cases$"))
    assert page.get_by_role("link", name="paris-weather").is_visible()
    page.get_by_role("link", name="Runs").click()
    page.get_by_role("link", name=seeded.run_id).click()
    page.get_by_role("link", name="paris-weather").click()
    assert page.locator("li.step").first.get_attribute("data-outcome") == "diverged"
    page.goto(f"{url}/ui/traces/{seeded.oslo}")
    page.get_by_label("name").fill("Oslo")
    page.get_by_role("button", name="Promote").click()
    page.wait_for_url(re.compile(r"/ui/cases/oslo\?done=promoted$"))


def test_a_request_for_another_host_name_is_refused(ui: tuple[str, Seeded]) -> None:
    import http.client

    url, _ = ui
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/ui/cases", headers={"Host": f"rebound.example:{port}"})
        answer = conn.getresponse()
        assert answer.status == 400
        assert b"this server answers for 127.0.0.1 only" in answer.read()
    finally:
        conn.close()
