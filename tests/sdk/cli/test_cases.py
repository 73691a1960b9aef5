"""``tracely cases promote|list|show|history|delete|recapture|export|import``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tracely_sdk as tracely
from examples import weather_agent

from ._helpers import CLI, WEATHER, record


def promote(cli: CLI, trace_id: str, *extra: str) -> dict[str, Any]:
    status, out, err = cli(
        "cases", "promote", trace_id, "--name", "Paris weather", "--json", *extra
    )
    assert status == 0, err
    return dict(json.loads(out))


def test_promote_then_list_and_show(capture: Any, cli: CLI) -> None:
    trace_id = record(capture, cli, weather_agent.run_broken, "Paris")
    status, out, _ = cli(
        "cases", "promote", trace_id, "--name", "Paris weather", "--entrypoint", f"{WEATHER}:run"
    )
    assert status == 0
    assert out == f"promoted trace {trace_id} as case paris-weather (version 1)\n"

    status, out, _ = cli("cases", "list", "--json")
    (case,) = json.loads(out)["cases"]
    assert case == {
        "case_id": "paris-weather",
        "name": "Paris weather",
        "version": 1,
        "entrypoint": f"{WEATHER}:run",
        "tags": [],
        "source_trace_id": trace_id,
        "created_at": case["created_at"],
        "updated_at": case["updated_at"],
    }
    status, out, _ = cli("cases", "list")
    assert out.splitlines()[0].split() == [
        "CASE",
        "VERSION",
        "NAME",
        "ENTRYPOINT",
        "TAGS",
        "UPDATED",
    ]
    assert out.splitlines()[1].startswith("paris-weather  1")

    status, out, _ = cli("cases", "show", "paris-weather", "--json")
    shown = json.loads(out)
    assert shown["case_id"] == "paris-weather" and shown["version"] == 1
    assert shown["input"] == {"args": ["Paris"], "kwargs": {}}
    assert shown["expected_output"] == "Let me check the weather in Paris."
    assert [c["label"] for c in shown["calls"]] == ["llm:local-weather-model"]
    assert shown["bundle"]["trace_id"] == trace_id
    status, out, _ = cli("cases", "show", "paris-weather")
    assert 'expected      "Let me check the weather in Paris."' in out
    assert "llm:local-weather-model" in out


def test_promote_with_id_and_tags(capture: Any, cli: CLI) -> None:
    trace_id = record(capture, cli, weather_agent.run, "Paris")
    case = promote(cli, trace_id, "--id", "paris", "--tag", "smoke", "--tag", "eu")
    assert (
        case["case_id"] == "paris"
        and case["tags"] == ["eu", "smoke"]
        and case["entrypoint"] is None
    )
    other = record(capture, cli, weather_agent.run, "Oslo")
    cli("cases", "promote", other, "--name", "Oslo")
    assert [
        c["case_id"]
        for c in json.loads(cli("cases", "list", "--json", "--tag", "smoke")[1])["cases"]
    ] == ["paris"]
    status, _, err = cli("cases", "promote", other, "--name", "again", "--id", "paris")
    assert status == 2 and "already exists" in err


def test_promote_refuses_a_trace_without_an_input(capture: Any, cli: CLI) -> None:
    def no_input() -> None:
        with tracely.agent("anonymous"):
            tracely.call_tool("t", lambda: 1, args={})

    trace_id = record(capture, cli, no_input)
    status, out, err = cli("cases", "promote", trace_id, "--name", "x")
    assert status == 2 and out == ""
    assert "has no recorded agent input" in err and "tracely.agent(name, input=...)" in err
    assert err.count("\n") == 1


def test_promote_rejects_a_bad_id_and_entrypoint(capture: Any, cli: CLI) -> None:
    trace_id = record(capture, cli, weather_agent.run, "Paris")
    status, _, err = cli("cases", "promote", trace_id, "--name", "x", "--id", "../escape")
    assert status == 2 and "invalid case id" in err
    status, _, err = cli(
        "cases", "promote", trace_id, "--name", "x", "--entrypoint", "not an entrypoint"
    )
    assert status == 2 and "invalid entrypoint" in err
    assert json.loads(cli("cases", "list", "--json")[1])["cases"] == []


def test_recapture_bumps_the_version_and_keeps_history(capture: Any, cli: CLI) -> None:
    broken = record(capture, cli, weather_agent.run_broken, "Paris")
    promote(cli, broken)
    fixed = record(capture, cli, weather_agent.run, "Paris")
    status, out, _ = cli("cases", "recapture", "paris-weather", fixed)
    assert status == 0
    assert out == f"recaptured case paris-weather from trace {fixed}: version 1 -> 2\n"
    status, out, _ = cli("cases", "recapture", "paris-weather", fixed)
    assert status == 0 and "nothing changed" in out

    status, out, _ = cli("cases", "history", "paris-weather", "--json")
    history = json.loads(out)["versions"]
    assert [(v["version"], v["source_trace_id"]) for v in history] == [(1, broken), (2, fixed)]
    assert [c["label"] for c in history[0]["calls"]] == ["llm:local-weather-model"]
    assert [c["label"] for c in history[1]["calls"]] == [
        "llm:local-weather-model",
        "tools:get_weather",
        "llm:local-weather-model",
    ]
    assert history[1]["note"] == f"recaptured from trace {fixed}"
    assert history[1]["expected_output"] == "It's 18°C and cloudy in Paris."
    status, out, _ = cli("cases", "history", "paris-weather")
    assert [line.split()[0] for line in out.splitlines()] == ["VERSION", "1", "2"]


def test_recapture_with_another_input_changes_nothing(capture: Any, cli: CLI) -> None:
    promote(cli, record(capture, cli, weather_agent.run_broken, "Paris"))
    oslo = record(capture, cli, weather_agent.run, "Oslo")
    status, out, err = cli("cases", "recapture", "paris-weather", oslo, "--json")
    assert status == 2 and out == ""
    assert "different input" in err and err.count("\n") == 1
    assert json.loads(cli("cases", "show", "paris-weather", "--json")[1])["version"] == 1


def test_delete_with_yes(capture: Any, cli: CLI) -> None:
    promote(cli, record(capture, cli, weather_agent.run, "Paris"))
    assert cli("cases", "delete", "paris-weather", "--yes")[:2] == (
        0,
        "deleted case paris-weather (1 version)\n",
    )
    assert cli("cases", "delete", "paris-weather", "--yes")[0] == 2
    assert json.loads(cli("cases", "list", "--json")[1])["cases"] == []


def test_delete_without_a_terminal_refuses_unless_yes(capture: Any, cli: CLI) -> None:
    promote(cli, record(capture, cli, weather_agent.run, "Paris"))
    status, out, err = cli("cases", "delete", "paris-weather")  # stdin is not a terminal here
    assert status == 2 and out == ""
    assert "not deleting case paris-weather and its 1 version without a confirmation" in err
    assert "--yes" in err
    assert [c["case_id"] for c in json.loads(cli("cases", "list", "--json")[1])["cases"]] == [
        "paris-weather"
    ]


def _delete_on_a_terminal(cli: CLI, answer: bytes) -> tuple[int, str]:
    """``tracely cases delete paris-weather`` with its stdin a terminal that types ``answer``."""
    import os
    import pty
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tracely_sdk.cli", "cases", "delete", "paris-weather"],
            stdin=secondary,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(root), "TRACELY_STORE": cli.url},
        )
        os.write(primary, answer)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(primary)
        os.close(secondary)
    assert b"delete case paris-weather and its 1 version? There is no undo. [y/N]" in err
    return proc.returncode, out.decode()


def test_delete_on_a_terminal_asks_first(capture: Any, cli: CLI) -> None:
    promote(cli, record(capture, cli, weather_agent.run, "Paris"))
    assert _delete_on_a_terminal(cli, b"n\n") == (1, "nothing deleted\n")
    assert len(json.loads(cli("cases", "list", "--json")[1])["cases"]) == 1
    assert _delete_on_a_terminal(cli, b"y\n") == (0, "deleted case paris-weather (1 version)\n")
    assert json.loads(cli("cases", "list", "--json")[1])["cases"] == []


def test_export_then_import_into_a_fresh_store(capture: Any, cli: CLI, tmp_path: Path) -> None:
    broken = record(capture, cli, weather_agent.run_broken, "Paris")
    promote(cli, broken, "--tag", "smoke")
    cli("cases", "recapture", "paris-weather", record(capture, cli, weather_agent.run, "Paris"))
    status, out, _ = cli("cases", "export", str(tmp_path / "cases"))
    assert status == 0 and out == f"exported 1 case file to {tmp_path / 'cases'}\n"
    exported = (tmp_path / "cases" / "paris-weather.json").read_bytes()
    assert json.loads(exported)["version"] == 2

    fresh = CLI(cli.capsys, cli.url.replace("tracely.db", "fresh.db"))
    status, out, _ = fresh("cases", "import", str(tmp_path / "cases"))
    assert status == 0 and out == f"imported 1 case from {tmp_path / 'cases'}\n"
    assert json.loads(fresh("cases", "show", "paris-weather", "--json")[1])["version"] == 2
    assert len(json.loads(fresh("cases", "history", "paris-weather", "--json")[1])["versions"]) == 2
    fresh("cases", "export", str(tmp_path / "again"))
    assert (tmp_path / "again" / "paris-weather.json").read_bytes() == exported


def test_import_of_a_malformed_file_imports_nothing(capture: Any, cli: CLI, tmp_path: Path) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "bad.json").write_text("{not json")
    status, out, err = cli("cases", "import", str(tmp_path / "cases"))
    assert status == 2 and out == ""
    assert "bad.json" in err and "is not JSON" in err
    status, _, err = cli("cases", "import", str(tmp_path / "missing"))
    assert status == 2 and "no case file or directory" in err


def test_promote_checks_the_entrypoint_before_storing_it(capture: Any, cli: CLI) -> None:
    trace_id = record(capture, cli, weather_agent.run, "Paris")

    def refused(entrypoint: str) -> str:
        status, out, err = cli(
            "cases", "promote", trace_id, "--name", "x", "--entrypoint", entrypoint
        )
        assert status == 2 and out == "" and err.count("\n") == 1
        return err

    assert "no module named 'nosuchmod'" in refused("nosuchmod:run")
    assert f"'{WEATHER}' has no attribute 'rnu'; did you mean 'run'?" in refused(f"{WEATHER}:rnu")
    err = refused(f"{WEATHER}:local_model")
    assert f"entrypoint '{WEATHER}:local_model' does not accept the recorded input" in err
    assert "missing a required argument: 'tools'" in err
    err = refused("os:system")
    assert "entrypoint 'os:system' is not allowed, so it was not imported" in err
    assert '[tool.tracely] entrypoints in pyproject.toml (e.g. entrypoints = ["os:*"])' in err
    assert json.loads(cli("cases", "list", "--json")[1])["cases"] == []  # nothing was stored
    assert (
        promote(cli, trace_id, "--entrypoint", f"{WEATHER}:run")["entrypoint"] == f"{WEATHER}:run"
    )


def test_edit_changes_a_case_in_place_and_keeps_the_change_in_its_history(
    capture: Any, cli: CLI
) -> None:
    trace_id = record(capture, cli, weather_agent.run, "Paris")
    promote(cli, trace_id, "--entrypoint", f"{WEATHER}:run_broken", "--tag", "eu")
    status, out, err = cli(
        "cases", "edit", "paris-weather", "--entrypoint", f"{WEATHER}:run", "--name", "Paris"
    )
    assert status == 0, err
    assert out == (
        "case paris-weather version 1 -> 2: edited: name 'Paris weather' -> 'Paris'; "
        f"entrypoint '{WEATHER}:run_broken' -> '{WEATHER}:run'\n"
    )
    status, out, _ = cli(
        "cases", "edit", "paris-weather", "--tag", "smoke", "--tag", "eu", "--json"
    )
    assert status == 0
    assert json.loads(out)["tags"] == ["eu", "smoke"] and json.loads(out)["version"] == 3
    listed = json.loads(cli("cases", "list", "--json")[1])["cases"]
    assert [(c["case_id"], c["entrypoint"]) for c in listed] == [
        ("paris-weather", f"{WEATHER}:run")
    ]
    history = json.loads(cli("cases", "history", "paris-weather", "--json")[1])["versions"]
    assert [v["note"] for v in history] == [
        f"promoted from trace {trace_id}",
        f"edited: name 'Paris weather' -> 'Paris'; entrypoint '{WEATHER}:run_broken' -> '{WEATHER}:run'",
        "edited: tags [eu] -> [eu, smoke]",
    ]
    assert len({json.dumps(v["calls"]) for v in history}) == 1  # the recording is unchanged
    assert cli("replay")[0] == 0
    # a new entrypoint is checked as at promote time; a refused edit changes nothing
    status, _, err = cli("cases", "edit", "paris-weather", "--entrypoint", "os:system")
    assert status == 2 and "'os:system' is not allowed" in err
    status, _, err = cli("cases", "edit", "paris-weather")
    assert status == 2 and "nothing to change" in err
    status, out, _ = cli("cases", "edit", "paris-weather", "--name", "Paris")
    assert status == 0 and out == "case paris-weather already is so; nothing changed\n"
    assert len(json.loads(cli("cases", "history", "paris-weather", "--json")[1])["versions"]) == 3


def test_reseal_prints_what_a_hand_edit_changed(capture: Any, cli: CLI, tmp_path: Path) -> None:
    promote(cli, record(capture, cli, weather_agent.run_broken, "Paris"))
    cli("cases", "export", str(tmp_path / "cases"))
    path = tmp_path / "cases" / "paris-weather.json"
    doc = json.loads(path.read_text())
    doc["history"][0]["expected_output"] = "Sunny in Paris."
    path.write_text(json.dumps(doc))

    status, out, err = cli("cases", "import", str(tmp_path / "cases"))
    assert status == 2 and out == ""
    assert f"{path}: history[0].expected_output: does not match the file's checksum" in err
    assert f"tracely cases reseal {path}" in err

    status, out, _ = cli("cases", "reseal", str(path))
    assert status == 0 and out == f"resealed {path}: changed history[0].expected_output\n"
    status, out, _ = cli("cases", "reseal", str(path))
    assert out == f"{path}: already sealed, nothing changed\n"
    status, out, _ = cli("cases", "import", str(tmp_path / "cases"))
    assert status == 0
    shown = json.loads(cli("cases", "show", "paris-weather", "--json")[1])
    assert shown["expected_output"] == "Sunny in Paris."


def test_import_of_an_integer_the_store_cannot_hold_names_it_and_imports_nothing(
    capture: Any, cli: CLI, tmp_path: Path
) -> None:
    promote(cli, record(capture, cli, weather_agent.run, "Paris"))
    promote(cli, record(capture, cli, weather_agent.run, "Oslo"), "--name", "z oslo")
    cli("cases", "export", str(tmp_path / "cases"))
    bad = tmp_path / "cases" / "z-oslo.json"  # sorted after the good file
    doc = json.loads(bad.read_bytes())
    doc["history"][0]["created_at"] = 2**63
    bad.write_text(json.dumps(doc))
    fresh = CLI(cli.capsys, cli.url.replace("tracely.db", "fresh.db"))
    status, out, err = fresh("cases", "import", str(tmp_path / "cases"))
    assert status == 2 and out == ""
    assert "z-oslo.json: history[0].created_at: must be an integer" in err
    assert json.loads(fresh("cases", "list", "--json")[1])["cases"] == []


def _unreplayable_run(city: str) -> str:
    """An agent whose tool returns a value that cannot be recorded as JSON."""
    with tracely.agent("weather", input={"args": [city], "kwargs": {}}) as run:
        tracely.call_tool("get_station", lambda: object(), args={"city": city})
        run.output = f"checked {city}"
    return str(run.output)


def test_promote_warns_naming_calls_that_cannot_be_replayed_and_the_fix(
    capture: Any, cli: CLI
) -> None:
    trace_id = record(capture, cli, _unreplayable_run, "Paris")
    status, out, err = cli("cases", "promote", trace_id, "--name", "Paris station")
    assert status == 0
    assert out == f"promoted trace {trace_id} as case paris-station (version 1)\n"
    assert "warning: trace" in err and "1 call(s) tracely could not record" in err
    assert "tools:get_station: its output could not be serialised to JSON" in err
    assert "return JSON data, a pydantic model or a dataclass" in err


def test_strict_promote_refuses_a_trace_with_calls_that_cannot_be_replayed(
    capture: Any, cli: CLI
) -> None:
    trace_id = record(capture, cli, _unreplayable_run, "Paris")
    status, out, err = cli("cases", "promote", trace_id, "--name", "Paris station", "--strict")
    assert status == 2 and out == ""
    assert "tools:get_station" in err and "not promoted (--strict)" in err
    status, out, _ = cli("cases", "list", "--json")
    assert json.loads(out)["cases"] == []


def test_strict_promote_takes_a_whole_recording(capture: Any, cli: CLI) -> None:
    trace_id = record(capture, cli, weather_agent.run_broken, "Paris")
    status, _, err = cli("cases", "promote", trace_id, "--name", "Paris weather", "--strict")
    assert status == 0 and err == ""


def test_reseal_of_an_edit_inside_the_recording_is_deliberate_and_shows_it(
    capture: Any, cli: CLI, tmp_path: Path
) -> None:
    promote(cli, record(capture, cli, weather_agent.run_broken, "Paris"))
    cli("cases", "export", str(tmp_path / "cases"))
    path = tmp_path / "cases" / "paris-weather.json"
    doc = json.loads(path.read_text())
    (entry,) = doc["history"][0]["bundle"]["llm"]["local-weather-model"]
    entry["output"] = "Rain all week in Paris."
    path.write_text(json.dumps(doc))

    status, out, err = cli("cases", "reseal", str(path))
    assert status == 2 and out == ""
    assert f"{path}: history[0].bundle: the recording was changed after it was recorded" in err
    assert f"tracely cases reseal --accept-recording-edit {path}" in err
    assert json.loads(path.read_text()) == doc  # left as it was

    status, out, err = cli("cases", "reseal", "--accept-recording-edit", str(path))
    assert status == 0, err
    assert out.splitlines()[:2] == [
        f"{path}: history[0].bundle: the recording was edited by hand",
        "  compared with case paris-weather v1 in the store:",
    ]
    assert "llm.local-weather-model[0].output: recorded " in out.splitlines()[2]
    assert out.splitlines()[2].endswith('now "Rain all week in Paris."')
    assert out.splitlines()[-1] == f"resealed {path}: changed history[0].bundle"

    status, _, err = cli("cases", "import", str(tmp_path / "cases"))
    assert status == 0, err
    shown = json.loads(cli("cases", "show", "paris-weather", "--json")[1])
    assert shown["bundle"]["llm"]["local-weather-model"][0]["output"] == "Rain all week in Paris."


def test_an_accepted_recording_edit_with_no_copy_in_the_store_lists_what_it_holds(
    capture: Any, cli: CLI, tmp_path: Path
) -> None:
    promote(cli, record(capture, cli, weather_agent.run_broken, "Paris"))
    cli("cases", "export", str(tmp_path / "cases"))
    cli("cases", "delete", "paris-weather", "--yes")
    store = cli.store()
    try:
        # the trace it was recorded from is gone too: a store elsewhere
        store._connection().execute("DELETE FROM recordings")
    finally:
        store.close()
    path = tmp_path / "cases" / "paris-weather.json"
    doc = json.loads(path.read_text())
    doc["history"][0]["bundle"]["llm"]["local-weather-model"][0]["output"] = "Rain."
    path.write_text(json.dumps(doc))
    status, out, err = cli("cases", "reseal", "--accept-recording-edit", str(path))
    assert status == 0, err
    assert "no copy of it in the store to compare with; it now holds:" in out
    assert '  llm:local-weather-model: "Rain."' in out


# -- promoting many traces ------------------------------------------------------------------


def test_promote_every_trace_a_filter_selects_in_one_go(capture: Any, cli: CLI) -> None:
    ids = [record(capture, cli, weather_agent.run, city) for city in ("Paris", "Oslo", "Rome")]

    def other_agent() -> None:
        with tracely.agent("other-agent", input="x"):
            tracely.call_tool("t", lambda: 1, args={})

    record(capture, cli, other_agent)
    status, out, err = cli(
        "cases",
        "promote",
        "--agent",
        "weather-agent",
        "--name",
        "Weather",
        "--entrypoint",
        f"{WEATHER}:run",
        "--tag",
        "nightly",
        "--json",
    )
    assert status == 0, err
    cases = json.loads(out)["cases"]
    assert sorted(c["source_trace_id"] for c in cases) == sorted(ids)
    assert sorted(c["case_id"] for c in cases) == ["weather", "weather-2", "weather-3"]
    for case in cases:
        assert (case["name"], case["entrypoint"], case["tags"]) == (
            "Weather",
            f"{WEATHER}:run",
            ["nightly"],
        )
    assert cli("replay")[0] == 0  # each replays through the entrypoint given once


def test_promote_latest_takes_the_newest_trace(capture: Any, cli: CLI) -> None:
    record(capture, cli, weather_agent.run, "Paris")
    newest = record(capture, cli, weather_agent.run, "Oslo")
    status, out, _ = cli("cases", "promote", "--latest", "--name", "Newest")
    assert status == 0
    assert out == f"promoted trace {newest} as case newest (version 1)\n1 case promoted\n"


def test_promote_limit_and_since_choose_the_newest(capture: Any, cli: CLI) -> None:
    ids = [record(capture, cli, weather_agent.run, city) for city in ("Paris", "Oslo", "Rome")]
    status, out, _ = cli(
        "cases", "promote", "--limit", "2", "--since", "1h", "--name", "W", "--json"
    )
    assert status == 0
    assert {c["source_trace_id"] for c in json.loads(out)["cases"]} == set(ids[1:])
    status, _, err = cli("cases", "promote", "--since", "2999-01-01", "--name", "W")
    assert status == 2 and "no recorded trace in" in err and "--since 2999-01-01T00:00:00Z" in err


def test_a_refused_trace_in_a_batch_promotes_none(capture: Any, cli: CLI) -> None:
    def no_input() -> None:
        with tracely.agent("weather-agent"):
            tracely.call_tool("t", lambda: 1, args={})

    record(capture, cli, weather_agent.run, "Paris")
    bad = record(capture, cli, no_input)
    record(capture, cli, weather_agent.run, "Oslo")
    status, out, err = cli("cases", "promote", "--agent", "weather-agent", "--name", "W")
    assert status == 2 and out == ""
    assert f"trace {bad} has no recorded agent input" in err
    assert json.loads(cli("cases", "list", "--json")[1])["cases"] == []


def test_promote_says_which_traces_to_choose(capture: Any, cli: CLI) -> None:
    trace_id = record(capture, cli, weather_agent.run, "Paris")
    record(capture, cli, weather_agent.run, "Oslo")
    status, _, err = cli("cases", "promote", "--name", "W")
    assert status == 2 and "say which traces to promote: TRACE_ID ..., --latest" in err
    status, _, err = cli("cases", "promote", trace_id, "--latest", "--name", "W")
    assert status == 2 and "not both" in err
    status, _, err = cli("cases", "promote", "--limit", "2", "--name", "W", "--id", "w")
    assert status == 2 and "--id names one case, but 2 traces were chosen" in err
    assert json.loads(cli("cases", "list", "--json")[1])["cases"] == []


# -- a trace recorded without an agent span ---------------------------------------------------


def test_input_and_expected_are_for_a_trace_without_an_agent_input(capture: Any, cli: CLI) -> None:
    def bare() -> None:
        tracely.call_tool("get_weather", lambda: {"temp": 20}, args={"city": "Paris"})

    trace_id = record(capture, cli, bare)
    status, _, err = cli("cases", "promote", trace_id, "--name", "x", "--input", '["Paris"]')
    assert status == 2 and "--input needs --expected JSON too" in err
    status, _, err = cli(
        "cases", "promote", trace_id, "--name", "x", "--input", "Paris", "--expected", "1"
    )
    assert status == 2 and "--input 'Paris' is not JSON" in err
    case = promote(cli, trace_id, "--input", '"Paris"', "--expected", '{"temp": 20}')
    shown = json.loads(cli("cases", "show", case["case_id"], "--json")[1])
    assert shown["input"] == {"args": ["Paris"], "kwargs": {}}
    assert shown["expected_output"] == {"temp": 20}

    with_agent = record(capture, cli, weather_agent.run, "Oslo")
    status, _, err = cli(
        "cases", "promote", with_agent, "--name", "y", "--input", "[]", "--expected", "1"
    )
    assert status == 2 and "has a recorded agent input" in err
