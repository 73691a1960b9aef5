"""Replay runs kept through the API: a case field of the wrong type is refused with a 400 that
names it, and a run an older server kept with such fields still shows, in the pages and in
``tracely runs show``."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from server._support import ServerProcess
from server.test_server_ui import cookie_of, sign_in
from tests.sdk.store._helpers import make_run
from tracely_sdk.cli import main
from tracely_sdk.store import SQLiteStore

BAD_FIELDS = [
    ("tags", 5, "cases[0]: tags must be a list of strings"),
    ("duration_s", {}, "cases[0]: duration_s must be a number"),
    ("reasons", 5, "cases[0]: reasons must be a list of strings"),
    ("traceback", 5, "cases[0]: traceback must be a string"),
    ("divergences", 5, "cases[0]: divergences must be a list of objects"),
    ("timeline", [5], "cases[0]: timeline must be a list of objects"),
    ("version", "2", "cases[0]: version must be an integer"),
    ("error", "boom", "cases[0]: error must be an object"),
]


def _run_doc(**case: Any) -> dict[str, Any]:
    doc: dict[str, Any] = make_run(1).to_dict()
    doc["id"] = secrets.token_hex(8)
    doc["cases"][0].update(case)
    return doc


@pytest.mark.parametrize(("field", "value", "message"), BAD_FIELDS)
def test_a_case_field_of_the_wrong_type_is_refused_by_name(
    server: ServerProcess, field: str, value: Any, message: str
) -> None:
    doc = _run_doc(**{field: value})
    answer = server.request("POST", "/api/runs", doc)
    assert answer.status == 400, answer
    assert message in answer.error["message"]
    assert server.get(f"/api/runs/{doc['id']}", token="read").status == 404


def test_a_summary_count_of_the_wrong_type_is_refused(server: ServerProcess) -> None:
    doc = _run_doc()
    doc["summary"]["failed"] = "one"
    answer = server.request("POST", "/api/runs", doc)
    assert answer.status == 400 and "summary.failed" in answer.error["message"]


def test_a_well_formed_run_is_still_kept(server: ServerProcess) -> None:
    doc = _run_doc(tags=["weather"], error={"type": "ValueError", "message": "x"}, version=None)
    assert server.request("POST", "/api/runs", doc).status == 201
    assert server.get(f"/api/runs/{doc['id']}", token="read").json()["cases"] == doc["cases"]


def test_a_run_kept_with_bad_types_still_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a server that took any type kept: the store itself holds it as it came.
    db = tmp_path / "ui" / "tracely.db"
    db.parent.mkdir()
    bad = {field: value for field, value, _ in BAD_FIELDS}
    run = make_run(3, **bad, output_differences=7, masked=[1])
    store = SQLiteStore(db)
    store.save_run(run)
    store.close()

    server = ServerProcess(db.parent, args=["--rate-limit", "0"]).start()
    try:
        cookie = cookie_of(sign_in(server, server.tokens.read))
        for path in (f"/ui/runs/{run.id}", f"/ui/runs/{run.id}/cases/1", "/ui/runs"):
            page = server.get(path, token=None, headers={"Cookie": cookie})
            assert page.status == 200, (path, page.body[-2000:])
        case_page = server.get(
            f"/ui/runs/{run.id}/cases/1", token=None, headers={"Cookie": cookie}
        ).body.decode()
        assert "case-0" in case_page
        # the API gives the run back as it was kept
        assert server.get(f"/api/runs/{run.id}", token="read").json()["cases"][0]["tags"] == 5
    finally:
        assert server.stop() == 0

    capsys.readouterr()
    status = main(["runs", "show", run.id, "--store", f"sqlite:///{db}"])
    out = capsys.readouterr().out
    assert status == 0
    assert "FAIL case-0" in out and "  - 5" in out and "took -" in out
