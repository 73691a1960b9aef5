"""``tracely ui``: the local store's pages, from the README's first steps on."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tracely_sdk.cli import main
from tracely_sdk.store import SQLiteStore

ROOT = Path(__file__).resolve().parents[3]


def test_ui_shows_a_local_store_not_a_server(capsys: object) -> None:
    status = main(["ui", "--store", "https://user:secret@tracely.example"])
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert status == 2
    assert "is a tracely server: open its pages at https://user:***@tracely.example/ui" in err
    assert "secret" not in err


def test_ui_names_a_default_store_that_is_not_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRACELY_STORE", raising=False)
    assert main(["ui", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracely: error: ") and str(tmp_path / ".tracely" / "tracely.db") in err
    assert not (tmp_path / ".tracely" / "tracely.db").exists()


class UI:
    """``tracely ui --port 0`` in a process of its own, and what it printed."""

    def __init__(self, proc: subprocess.Popen[str], banner: str) -> None:
        self.proc = proc
        self.banner = banner
        url = banner.split(": ", 1)[1].split()[0]  # http://127.0.0.1:PORT/ui/
        self.port = int(url.split(":")[2].split("/")[0])
        self.stderr = ""

    def get(self, path: str, host: str | None = None) -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.request("GET", path, headers={"Host": host} if host else {})
        response = conn.getresponse()
        response.read()
        conn.close()
        return response


@contextmanager
def running_ui(cwd: Path, *args: str) -> Iterator[UI]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracely_sdk.cli", "ui", "--port", "0", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline().strip()
        assert banner.startswith("tracely ui: http://127.0.0.1:"), proc.stderr.read()  # type: ignore[union-attr]
        ui = UI(proc, banner)
        yield ui
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    ui.stderr = err


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / ".tracely").mkdir()
    SQLiteStore(tmp_path / ".tracely" / "tracely.db").close()
    return tmp_path


def test_ui_serves_the_default_store_and_leads_from_slash_to_the_pages(project: Path) -> None:
    with running_ui(project) as ui:
        root = ui.get("/")
        assert root.status == 303 and root.headers["Location"] == "/ui/cases"
        assert ui.get("/ui/cases").status == 200
        assert str(project / ".tracely" / "tracely.db") in ui.banner
        assert "no token" in ui.banner


def test_ui_with_a_store_says_nothing_false_about_its_authentication(project: Path) -> None:
    store = f"sqlite:///{(project / '.tracely' / 'tracely.db').as_posix().lstrip('/')}"
    with running_ui(project, "--store", store) as ui:
        assert ui.get("/ui/traces").status == 200
    assert "insecure-no-auth" not in ui.stderr and "authentication is OFF" not in ui.stderr


def test_ui_answers_no_other_host_name(project: Path) -> None:
    with running_ui(project) as ui:
        # DNS rebinding: a page of another site whose name now points at 127.0.0.1
        assert ui.get("/api/cases", host="rebound.example:8712").status == 400
        assert ui.get("/ui/cases", host="rebound.example").status == 400
        assert ui.get("/api/cases", host=f"localhost:{ui.port}").status == 200
