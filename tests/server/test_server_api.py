"""The recordings and cases API: promote, list, show, versions, recapture, update, import,
delete, and the recordings an SDK's store writer posts."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from server._support import ServerProcess, exporter, wait_for
from tracely_otel import seal
from tracely_sdk.store import Recording


@pytest.fixture
def ingest(server: ServerProcess, weather_run: Any) -> Any:
    """Run the agent, export its spans to the server, return the stored recording."""
    send = exporter(server)

    def run(city: str) -> dict[str, Any]:
        spans, bundle = weather_run(city)
        assert send.export(spans) is SpanExportResult.SUCCESS
        return wait_for(  # type: ignore[no-any-return]
            lambda: server.recording(bundle["trace_id"]), what="the recording"
        )

    yield run
    send.shutdown()  # type: ignore[no-untyped-call]


def unique(prefix: str) -> str:
    return f"{prefix} {secrets.token_hex(4)}"


def test_the_case_lifecycle(server: ServerProcess, ingest: Any) -> None:
    first = ingest("Paris")
    name = unique("Paris weather")
    tag = f"smoke-{secrets.token_hex(3)}"

    created = server.request(
        "POST", "/api/cases", {"trace_id": first["trace_id"], "name": name, "tags": [tag]}
    )
    assert created.status == 201, created
    case = created.json()
    assert created.headers["location"] == f"/api/cases/{case['id']}"
    assert case["version"] == 1 and case["source_trace_id"] == first["trace_id"]
    assert case["input"] == {"args": ["Paris"], "kwargs": {}}
    assert case["bundle"] == first["bundle"] and case["tags"] == [tag]

    listed = server.get(f"/api/cases?tag={tag}", token="read").json()["cases"]
    assert listed == [case]  # full cases, bundle included: CI replays from this
    assert server.get(f"/api/cases/{case['id']}", token="read").json() == case

    taken = server.request(
        "POST", "/api/cases", {"trace_id": first["trace_id"], "name": name, "id": case["id"]}
    )
    assert taken.status == 409 and taken.error["code"] == "conflict"
    assert "already exists" in taken.error["message"]

    # Recapture from a newer run of the same input: version 2, version 1 kept.
    second = ingest("Paris")
    recaptured = server.request(
        "POST",
        f"/api/cases/{case['id']}/recapture",
        {"trace_id": second["trace_id"], "note": "model upgrade"},
    )
    assert recaptured.status == 200, recaptured
    v2 = recaptured.json()
    assert v2["version"] == 2 and v2["source_trace_id"] == second["trace_id"]
    versions = server.get(f"/api/cases/{case['id']}/versions", token="read").json()["versions"]
    assert [v["version"] for v in versions] == [1, 2]
    assert versions[0]["source_trace_id"] == first["trace_id"]
    assert versions[1]["note"] == "model upgrade"

    # A run with another input is refused, with the difference.
    other = ingest("Oslo")
    refused = server.request(
        "POST", f"/api/cases/{case['id']}/recapture", {"trace_id": other["trace_id"]}
    )
    assert refused.status == 409
    assert "different input" in refused.error["message"]
    assert refused.error["detail"] == {
        "case_input": {"args": ["Paris"], "kwargs": {}},
        "trace_input": {"args": ["Oslo"], "kwargs": {}},
    }
    assert server.get(f"/api/cases/{case['id']}", token="read").json()["version"] == 2

    # Name, tags, entrypoint change; the recorded content does not, and the edit is kept in
    # the history as a new version.
    patched = server.request(
        "PATCH",
        f"/api/cases/{case['id']}",
        {"name": "renamed", "tags": ["b", "a"], "entrypoint": "examples.weather_agent:run"},
    )
    assert patched.status == 200, patched
    p = patched.json()
    assert (p["name"], p["tags"], p["entrypoint"]) == (
        "renamed",
        ["a", "b"],
        "examples.weather_agent:run",
    )
    assert p["bundle"] == v2["bundle"] and p["version"] == 3
    cleared = server.request("PATCH", f"/api/cases/{case['id']}", {"entrypoint": ""}).json()
    assert cleared["entrypoint"] is None and cleared["version"] == 4
    versions = server.get(f"/api/cases/{case['id']}/versions", token="read").json()["versions"]
    assert versions[2]["note"].startswith("edited: name ")
    assert versions[2]["note"].endswith("-> [a, b]; entrypoint - -> 'examples.weather_agent:run'")
    assert versions[3]["note"] == "edited: entrypoint 'examples.weather_agent:run' -> -"

    # Import: the case with exactly this history, under a new id.
    new_id = f"imported-{secrets.token_hex(4)}"
    imported = server.request(
        "PUT", f"/api/cases/{new_id}", {"case": {**cleared, "id": new_id}, "history": versions}
    )
    assert imported.status == 200, imported
    assert imported.json() == {**cleared, "id": new_id}
    assert server.get(f"/api/cases/{new_id}/versions", token="read").json()["versions"] == versions
    mismatch = server.request(
        "PUT", f"/api/cases/{new_id}", {"case": {**cleared, "id": "elsewhere"}, "history": versions}
    )
    assert mismatch.status == 400 and "not the id in the path" in mismatch.error["message"]
    bad_history = server.request(
        "PUT", f"/api/cases/{new_id}", {"case": {**cleared, "id": new_id}, "history": versions[:1]}
    )
    assert bad_history.status == 400 and "history ends at v1" in bad_history.error["message"]

    # Delete: gone with its history.
    for case_id in (case["id"], new_id):
        assert server.request("DELETE", f"/api/cases/{case_id}").status == 204
        assert server.get(f"/api/cases/{case_id}", token="read").status == 404
        assert server.get(f"/api/cases/{case_id}/versions", token="read").status == 404
    again = server.request("DELETE", f"/api/cases/{case['id']}")
    assert again.status == 404 and again.error["code"] == "not_found"


def test_promotion_refusals(server: ServerProcess, ingest: Any) -> None:
    missing = server.request("POST", "/api/cases", {"trace_id": "ab" * 16, "name": "x"})
    assert missing.status == 404 and missing.error["code"] == "not_found"
    assert "sqlite" not in missing.error["message"]  # the store's location is not shown
    rec = ingest("Tokyo")
    replayed = dict(rec["bundle"])
    replayed["trace_id"] = secrets.token_hex(16)
    replayed["replay"] = {"mode": "recorded", "case_id": "c", "case_version": 1}
    stored = server.request(
        "POST", "/api/recordings", Recording.from_bundle(seal(replayed)).to_dict()
    )
    assert stored.status == 201
    refused = server.request("POST", "/api/cases", {"trace_id": replayed["trace_id"], "name": "r"})
    assert refused.status == 409 and "replay run" in refused.error["message"]
    bad = server.request(
        "POST", "/api/cases", {"trace_id": rec["trace_id"], "name": "x", "entrypoint": "no colon"}
    )
    assert bad.status == 400 and bad.error["code"] == "invalid"


def test_batch_promotion_refusals(server: ServerProcess, ingest: Any) -> None:
    rec = ingest("Oslo")
    one = {"trace_id": rec["trace_id"], "name": "oslo"}
    for body, says in [
        ({"promotions": []}, "non-empty list"),
        ({"promotions": [one], "all": True}, "unknown field"),
        ({"promotions": [{**one, "colour": "red"}]}, "promotions[0]: unknown field"),
        ({"promotions": [{**one, "stated": {"input": {"args": [], "kwargs": {}}}}]}, "missing"),
        ({"promotions": [{**one, "stated": {"input": [], "expected_output": 1}}]}, "stated input"),
    ]:
        answer = server.request("POST", "/api/promotions", body)
        assert answer.status == 400 and says in answer.error["message"], (body, answer.error)
    refused = server.request(
        "POST", "/api/promotions", {"promotions": [one, {"trace_id": "ab" * 16, "name": "x"}]}
    )
    assert refused.status == 404 and "ab" * 16 in refused.error["message"]
    assert server.get(f"/api/cases/{'oslo'}", token="read").status == 404  # none of the batch
    assert (
        server.request("POST", "/api/promotions", {"promotions": [one]}, token="read").status == 403
    )


def test_recordings_posted_by_a_store_writer(server: ServerProcess, ingest: Any) -> None:
    rec = ingest("Lisbon")
    bundle = dict(rec["bundle"])
    bundle["trace_id"] = secrets.token_hex(16)
    recording = Recording.from_bundle(seal(bundle)).to_dict()
    first = server.request("POST", "/api/recordings", recording)
    assert (first.status, first.json()) == (201, {"stored": True})
    again = server.request("POST", "/api/recordings", recording)
    assert (again.status, again.json()) == (201, {"stored": False})  # idempotent
    assert server.recording(bundle["trace_id"]) == recording
    without_time = {k: v for k, v in recording.items() if k != "received_at"}
    without_time["trace_id"] = without_time["bundle"]["trace_id"]
    assert server.request("POST", "/api/recordings", without_time).status == 201

    tampered = dict(recording, bundle={**recording["bundle"], "service": "tampered"})
    answer = server.request("POST", "/api/recordings", tampered)
    assert answer.status == 400 and "checksum" in answer.error["message"]
    answer = server.request("POST", "/api/recordings", {**recording, "status": "maybe"})
    assert answer.status == 400 and answer.error["code"] == "invalid"
    answer = server.request("POST", "/api/recordings", {**recording, "color": "red"})
    assert answer.status == 400 and "'color'" in answer.error["message"]


def test_listing_traces(server: ServerProcess, ingest: Any) -> None:
    for city in ("Paris", "Oslo", "Tokyo"):
        ingest(city)
    page = server.get("/api/traces?limit=2", token="read").json()["traces"]
    assert len(page) == 2
    assert page[0]["started_at"] >= page[1]["started_at"]  # newest first
    rest = server.get("/api/traces?limit=2&offset=2", token="read").json()["traces"]
    assert {t["trace_id"] for t in page}.isdisjoint(t["trace_id"] for t in rest)
    assert server.get("/api/traces?service=nope", token="read").json() == {"traces": []}
    agent = server.get("/api/traces?agent=weather-agent&limit=1000", token="read").json()
    assert agent["traces"] and all(t["agent_name"] == "weather-agent" for t in agent["traces"])
    for listed in page + rest:  # each listed as it is stored, without its bundle
        whole = server.get(f"/api/traces/{listed['trace_id']}", token="read").json()
        del whole["bundle"]
        assert listed == whole


def test_health_and_openapi_need_no_token(server: ServerProcess) -> None:
    assert server.get("/healthz", token=None).json() == {"status": "ok"}
    doc = server.get("/openapi.json", token=None).json()
    assert doc["openapi"] == "3.1.0"


@pytest.mark.parametrize("path", ["/nope", "/ui/nope", "/api/cases/x/nope"])
def test_an_unknown_path_is_the_apis_404(server: ServerProcess, path: str) -> None:
    answer = server.get(path, token="read")
    assert answer.status == 404 and answer.error["code"] == "not_found", answer
    assert path in answer.error["message"]


def test_a_wrong_method_is_405_naming_every_method_of_the_path(server: ServerProcess) -> None:
    answer = server.request("DELETE", "/api/cases", token="write")
    assert answer.status == 405 and answer.headers["allow"] == "GET, POST", answer
    assert answer.error["code"] == "method_not_allowed"
