"""The whole loop through the server: a live run exported over OTLP, promoted over HTTP, then
``tracely replay`` against the server gives the same verdicts as against a SQLite store."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from server._support import ROOT, ServerProcess, wait_for
from server.test_server_otlp import run_agent
from tracely_sdk.store import Case, CaseVersion, SQLiteStore

try:
    from tracely_sdk.store._http import HTTPStore  # noqa: F401
except ImportError as exc:  # pragma: no cover - written separately
    pytest.skip(f"the HTTP store client is not available ({exc})", allow_module_level=True)


def replay(store: str, entrypoint: str, report: Path, *, token: str = "") -> dict[str, Any]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracely_sdk.cli",
            "--no-color",
            "replay",
            "--entrypoint",
            entrypoint,
            "--json",
            str(report),
        ],
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TRACELY_STORE": store,
            "TRACELY_TOKEN": token,
            "OTEL_TRACES_EXPORTER": "none",
        },
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode in (0, 1), result.stderr
    assert token == "" or token not in result.stdout + result.stderr
    doc = orjson.loads(report.read_bytes())
    doc["exit"] = result.returncode
    return doc  # type: ignore[no-any-return]


def verdicts(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (c["case_id"], c["version"], c["verdict"], c["served"], c["unused"], c["output"])
        for c in doc["cases"]
    ] + [("exit", doc["exit"])]


@pytest.mark.slow
def test_replay_against_the_server_matches_sqlite(make_server: Any, tmp_path: Path) -> None:
    proc: ServerProcess = make_server("--quiet-seconds", "0.2", "--rate-limit", "0")
    recorded: list[str] = []
    for city in ("Paris", "Lisbon"):
        (bundle,) = run_agent(proc, "run", city)["bundles"]
        trace_id: str = bundle["trace_id"]
        wait_for(functools.partial(proc.recording, trace_id), what="the recording")
        recorded.append(trace_id)
    for trace_id, name in zip(recorded, ("paris", "lisbon"), strict=True):
        answer = proc.request(
            "POST",
            "/api/cases",
            {"trace_id": trace_id, "name": name, "entrypoint": "examples.weather_agent:run"},
        )
        assert answer.status == 201, answer

    # The same cases in a local SQLite store, copied over the API.
    local = SQLiteStore(tmp_path / "local.db")
    for case in proc.get("/api/cases", token="read").json()["cases"]:
        history = proc.get(f"/api/cases/{case['id']}/versions", token="read").json()["versions"]
        local.put_case(
            Case(**{**case, "tags": tuple(case["tags"])}),
            [CaseVersion(case_id=case["id"], **v) for v in history],
        )
    local.close()

    for entrypoint, exit_status in (
        ("examples.weather_agent:run", 0),
        ("examples.weather_agent:run_broken", 1),
    ):
        served = replay(proc.url, entrypoint, tmp_path / "server.json", token=proc.tokens.read)
        sqlite = replay(f"sqlite:///{tmp_path / 'local.db'}", entrypoint, tmp_path / "local.json")
        assert verdicts(served) == verdicts(sqlite)
        assert served["exit"] == exit_status
        expected = "PASS" if exit_status == 0 else "FAIL"
        assert {c["verdict"] for c in served["cases"]} == {expected}
