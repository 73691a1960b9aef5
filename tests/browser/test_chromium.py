"""Where no Chromium is found, the page tests say why instead of failing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser._chromium import find_chromium, is_local


def test_no_chromium_is_a_reason_naming_the_install_script(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TRACELY_CHROMIUM", str(tmp_path / "no-such-browser"))
    monkeypatch.setenv("PATH", str(tmp_path))
    executable, reason = find_chromium()
    assert executable is None
    assert "bash .ci/install-chromium.sh" in reason


def test_only_local_addresses_count_as_local() -> None:
    assert is_local("file:///tmp/report.html") and is_local("http://127.0.0.1:8711/ui/cases")
    assert not is_local("https://cdn.example/app.js")
    assert not is_local("http://127.0.0.1.evil.example/x")
