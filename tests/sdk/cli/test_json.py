"""Every ``--json`` output: a versioned document (``"schema": "tracely.<command>/1"``) with
the top-level keys docs/json-output.md describes, and times as RFC 3339 strings."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from examples import weather_agent

from ._helpers import CLI, WEATHER, record

DOCS = Path(__file__).resolve().parents[3] / "docs" / "json-output.md"

TRACE = {"trace_id", "service", "agent_name", "started_at", "status", "input", "output"}
TRACE |= {"call_count", "replay_mode"}
CASE = {"case_id", "name", "version", "entrypoint", "tags", "source_trace_id"}
CASE |= {"created_at", "updated_at"}
RUN = {"run_id", "started_at", "duration_s", "mode", "ok", "summary", "source"}
RUN |= {"otlp_endpoint", "tracely_version"}

# Each command's schema and its top-level keys (besides "schema"): the contract this pins.
KEYS: dict[str, set[str]] = {
    "tracely.traces.list/1": {"traces"},
    "tracely.traces.show/1": {"kind", *TRACE, "calls", "incomplete"},
    "tracely.traces.import/1": {"source", "span_count", "trace_count", "recording_count"}
    | {"stored", "unchanged", "skipped", "traces"},
    "tracely.cases.promote/1": CASE,
    "tracely.cases.edit/1": CASE | {"previous_version", "changed"},
    "tracely.cases.recapture/1": CASE | {"previous_version", "changed"},
    "tracely.cases.list/1": {"cases"},
    "tracely.cases.show/1": CASE | {"input", "expected_output", "calls", "bundle"},
    "tracely.cases.history/1": {"case_id", "versions"},
    "tracely.runs.list/1": {"runs"},
    "tracely.runs.show/1": RUN | {"cases"},
    "tracely.replay/1": {"format", "summary", "cases"},
}
REPLAY_TRACE_KEYS = {"kind", "trace_id", "replay"}


def times(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every ``*_at`` value in a document, with where it is."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key.endswith("_at"):
                found.append((f"{path}.{key}", item))
            found += times(item, f"{path}.{key}")
    elif isinstance(value, list):
        for n, item in enumerate(value):
            found += times(item, f"{path}[{n}]")
    return found


def check(doc: dict[str, Any], schema: str, keys: set[str] | None = None) -> dict[str, Any]:
    assert doc["schema"] == schema
    assert set(doc) - {"schema"} == (KEYS[schema] if keys is None else keys)
    stamps = times(doc)
    for where, value in stamps:
        if where.startswith(".cases[") or where.startswith(".bundle"):
            continue  # a case's recorded values are the agent's, not a time of tracely's
        assert isinstance(value, str) and value.endswith("Z"), (where, value)
        assert datetime.fromisoformat(value).utcoffset() is not None, where
    return doc


def run_json(cli: CLI, *argv: str) -> dict[str, Any]:
    status, out, err = cli(*argv, "--json")
    assert status == 0, err
    return dict(json.loads(out))


def test_every_command_writes_its_versioned_document(
    capture: Any, cli: CLI, tmp_path: Path
) -> None:
    before = len(capture.spans)
    weather_agent.run("Oslo")
    otlp = tmp_path / "oslo.pb"
    otlp.write_bytes(encode_spans(capture.spans[before:]).SerializeToString())
    imported = check(run_json(cli, "traces", "import", str(otlp)), "tracely.traces.import/1")
    assert imported["recording_count"] == 1 and imported["traces"][0]["span_count"] >= 1

    broken = record(capture, cli, weather_agent.run_broken, "Paris")
    fixed = record(capture, cli, weather_agent.run, "Paris")
    listed = check(run_json(cli, "traces", "list"), "tracely.traces.list/1")
    assert {t["trace_id"] for t in listed["traces"]} >= {broken, fixed}
    assert all(set(t) == TRACE for t in listed["traces"])
    assert len(times(listed)) == len(listed["traces"])  # every started_at checked
    shown = check(run_json(cli, "traces", "show", fixed), "tracely.traces.show/1")
    assert shown["kind"] == "recording" and shown["call_count"] == len(shown["calls"]) == 3

    promote = ("cases", "promote", broken, "--name", "Paris", "--entrypoint", f"{WEATHER}:run")
    check(run_json(cli, *promote), "tracely.cases.promote/1")
    edited = check(run_json(cli, "cases", "edit", "paris", "--tag", "eu"), "tracely.cases.edit/1")
    assert edited["changed"] is True and edited["previous_version"] == 1
    check(run_json(cli, "cases", "recapture", "paris", fixed), "tracely.cases.recapture/1")
    cases = check(run_json(cli, "cases", "list"), "tracely.cases.list/1")
    assert [set(c) for c in cases["cases"]] == [CASE]
    case = check(run_json(cli, "cases", "show", "paris"), "tracely.cases.show/1")
    assert case["calls"] == shown["calls"]  # a call is written alike by every command
    history = check(run_json(cli, "cases", "history", "paris"), "tracely.cases.history/1")
    assert history["case_id"] == "paris" and [v["version"] for v in history["versions"]] == [
        1,
        2,
        3,
    ]

    status, _, err = cli("replay", "--json", str(tmp_path / "r.json"))
    assert status == 0, err
    report = check(json.loads((tmp_path / "r.json").read_text()), "tracely.replay/1")
    assert report["format"] == "tracely.replay-report/1"  # kept for readers of the old name
    merged = tmp_path / "merged.json"
    assert cli("reports", "merge", str(tmp_path / "r.json"), "--json", str(merged))[0] == 0
    check(json.loads(merged.read_text()), "tracely.replay/1")

    (run,) = check(run_json(cli, "runs", "list"), "tracely.runs.list/1")["runs"]
    assert set(run) == RUN
    kept = check(run_json(cli, "runs", "show", run["run_id"]), "tracely.runs.show/1")
    assert kept["started_at"] == run["started_at"]
    replayed = kept["cases"][0]["trace_id"]
    replay_trace = run_json(cli, "traces", "show", replayed)
    check(replay_trace, "tracely.traces.show/1", REPLAY_TRACE_KEYS)
    assert replay_trace["kind"] == "replay"
    assert replay_trace["replay"]["started_at"] == run["started_at"]


def test_every_json_option_is_pinned_and_documented() -> None:
    """Each command with --json writes a schema pinned above, described in the docs."""
    source = Path(__file__).resolve().parents[3] / "tracely_sdk" / "cli"
    written = set()
    for path in source.glob("*.py"):
        written |= set(re.findall(r'"(tracely\.[a-z.]+/\d+)"', path.read_text()))
    assert written - {"tracely.replay-report/1"} <= set(KEYS)
    doc = DOCS.read_text()
    sections = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^## `(tracely\.[a-z.]+/\d+)`(.*?)(?=^## |\Z)", doc, re.M | re.S)
    }
    assert set(sections) == set(KEYS)
    for schema, keys in KEYS.items():
        missing = [k for k in sorted(keys | {"schema"}) if f"`{k}`" not in sections[schema]]
        assert not missing, f"{schema}: {missing} not described in {DOCS.name}"
