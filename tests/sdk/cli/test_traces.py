"""``tracely traces list|show``."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from typing import Any

import tracely_sdk as tracely
from examples import weather_agent

from ._helpers import CLI, record


def test_list_is_newest_first_with_stable_json(capture: Any, cli: CLI) -> None:
    first = record(capture, cli, weather_agent.run_broken, "Paris")
    second = record(capture, cli, weather_agent.run, "Oslo")
    status, out, _ = cli("traces", "list", "--json")
    assert status == 0
    data = json.loads(out)["traces"]
    assert [t["trace_id"] for t in data] == [second, first]
    assert set(data[0]) == {
        "trace_id",
        "service",
        "agent_name",
        "started_at",
        "status",
        "input",
        "output",
        "call_count",
        "replay_mode",
    }
    assert data[0]["input"] == {"args": ["Oslo"], "kwargs": {}}
    assert data[0]["call_count"] == 3 and data[1]["call_count"] == 1
    assert data[0]["agent_name"] == "weather-agent" and data[0]["status"] == "ok"
    status, out, _ = cli("traces", "list", "--json", "--limit", "1")
    assert [t["trace_id"] for t in json.loads(out)["traces"]] == [second]


def test_list_since_a_time_or_a_time_ago(cli: CLI) -> None:
    from tests.sdk.store._helpers import make_bundle, trace_id
    from tracely_sdk.store import Recording

    day = 86_400 * 10**9
    now = int(datetime.now(timezone.utc).timestamp() * 10**9)
    store = cli.store()
    try:
        for n, age in enumerate((0, 2 * day, 40 * day)):
            bundle = make_bundle(trace_id(n), started_at=now - age)
            store.put_recording(Recording.from_bundle(bundle))
    finally:
        store.close()

    def listed(*args: str) -> list[str]:
        status, out, err = cli("traces", "list", "--json", *args)
        assert status == 0, err
        return [t["trace_id"] for t in json.loads(out)["traces"]]

    assert listed("--since", "1d") == [trace_id(0)]
    assert listed("--since", "3d") == [trace_id(0), trace_id(1)]
    since = datetime.fromtimestamp((now - 39 * day) / 1e9, tz=timezone.utc).date().isoformat()
    assert listed("--since", since) == [trace_id(0), trace_id(1)]
    assert listed("--since", "1w", "--limit", "1") == [trace_id(0)]
    assert len(listed()) == 3
    status, _, err = cli("traces", "list", "--since", "yesterday")
    assert status == 2 and "'yesterday' is neither a date or time" in err


def test_list_as_a_plain_table(capture: Any, cli: CLI) -> None:
    trace_id = record(capture, cli, weather_agent.run, "Paris")
    status, out, _ = cli("traces", "list")
    assert status == 0
    header, row = out.splitlines()
    assert header.split() == ["TRACE_ID", "STARTED", "AGENT", "STATUS", "CALLS", "INPUT"]
    assert row.startswith(trace_id) and "weather-agent" in row and row.endswith('"Paris"')
    assert "\x1b[" not in out  # not a terminal: no colour codes


def test_an_empty_store(cli: CLI) -> None:
    cli.store().close()
    status, out, _ = cli("traces", "list", "--json")
    assert status == 0 and json.loads(out) == {"schema": "tracely.traces.list/1", "traces": []}
    status, out, err = cli("traces", "list")
    assert status == 0 and out == "" and "no traces recorded yet" in err


def test_show_lists_the_calls_in_order(capture: Any, cli: CLI) -> None:
    trace_id = record(capture, cli, weather_agent.run, "Paris")
    status, out, _ = cli("traces", "show", trace_id, "--json")
    assert status == 0
    data = json.loads(out)
    assert data["trace_id"] == trace_id and data["output"] == "It's 18°C and cloudy in Paris."
    assert [(c["seq"], c["label"]) for c in data["calls"]] == [
        (1, "llm:local-weather-model"),
        (2, "tools:get_weather"),
        (3, "llm:local-weather-model"),
    ]
    tool = data["calls"][1]
    assert tool["kind"] == "tool" and tool["args"] == {"city": "Paris"}
    assert tool["output"] == {"city": "Paris", "temp_c": 18, "sky": "cloudy"}
    assert data["calls"][0]["usage"] == [15, 7]

    status, out, _ = cli("traces", "show", trace_id)
    assert status == 0
    assert f"trace    {trace_id}" in out and 'input    "Paris"' in out
    calls = [line.split()[:2] for line in out.splitlines() if line[:1].isdigit()]
    assert calls == [
        ["1", "llm:local-weather-model"],
        ["2", "tools:get_weather"],
        ["3", "llm:local-weather-model"],
    ]


def test_show_a_recorded_failure(capture: Any, cli: CLI) -> None:
    trace_id = record(capture, cli, weather_agent.run_handles, "Atlantis")
    status, out, _ = cli("traces", "show", trace_id)
    assert status == 0
    assert "error WeatherServiceError: no weather data for 'Atlantis'" in out
    data = json.loads(cli("traces", "show", trace_id, "--json")[1])
    assert data["calls"][1]["error"] == {
        "type": "WeatherServiceError",
        "message": "no weather data for 'Atlantis'",
        "repr": "WeatherServiceError(\"no weather data for 'Atlantis'\")",
    }


def test_show_marks_a_replayed_trace(capture: Any, cli: CLI) -> None:
    weather_agent.run("Paris")
    bundle = capture.last_bundle
    with tracely.fixtures(bundle, case_id="paris", case_version=1):
        trace_id = record(capture, cli, weather_agent.run, "Paris")
    status, out, _ = cli("traces", "show", trace_id)
    assert status == 0
    assert "made by a recorded replay run (not promotable)" in out
    assert json.loads(cli("traces", "show", trace_id, "--json")[1])["replay_mode"] == "recorded"


def test_show_a_replay_trace_names_its_run_case_and_otlp_backend(cli: CLI) -> None:
    from tests.sdk.store._helpers import make_run

    run = dataclasses.replace(make_run(9), otlp_endpoint="http://collector:4318")
    store = cli.store()
    try:
        store.save_run(run)
    finally:
        store.close()
    replayed = run.cases[0]["trace_id"]
    status, out, _ = cli("traces", "show", replayed.upper())
    assert status == 0
    assert out.startswith(f"trace {replayed} is a replay trace of case case-0 in run {run.id}")
    assert "its spans went to the OTLP backend at http://collector:4318" in out
