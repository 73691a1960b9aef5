"""``tracely replay``: verdicts, exit statuses, case selection and the report files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import tracely_sdk as tracely
from examples import weather_agent
from tracely_otel import attributes as A
from tracely_sdk import _entrypoints
from tracely_sdk.cli import _replay, main
from tracely_sdk.cli._replay import init_tracing

from ._helpers import CLI, WEATHER, record

ROOT = Path(__file__).resolve().parents[3]


def story(capture: Any, cli: CLI) -> tuple[str, str]:
    """The broken run promoted as a case of ``run``; returns (broken trace, fixed trace)."""
    broken = record(capture, cli, weather_agent.run_broken, "Paris")
    status, _, err = cli(
        "cases", "promote", broken, "--name", "Paris weather", "--entrypoint", f"{WEATHER}:run"
    )
    assert status == 0, err
    fixed = record(capture, cli, weather_agent.run, "Paris")
    return broken, fixed


def verdict_rows(out: str) -> list[list[str]]:
    rows = out.split("\n\n")[0].splitlines()
    assert rows[0].split() == ["CASE", "VERSION", "VERDICT", "REASON"]
    return [row.split(None, 3) for row in rows[1:]]


def test_the_story_through_the_cli(capture: Any, cli: CLI) -> None:
    _, fixed = story(capture, cli)
    status, out, _ = cli("replay")
    assert status == 1
    ((case, version, verdict, reason),) = verdict_rows(out)
    assert (case, version, verdict) == ("paris-weather", "1", "INCOMPLETE")
    assert reason.startswith("no recorded call for tools:get_weather")
    assert "1 case: 1 incomplete in" in out

    assert cli("cases", "recapture", "paris-weather", fixed)[0] == 0
    status, out, _ = cli("replay")
    assert status == 0
    assert verdict_rows(out) == [["paris-weather", "2", "PASS"]]
    assert "1 case: 1 passed in" in out

    status, out, _ = cli("replay", "--entrypoint", f"{WEATHER}:run_broken")
    assert status == 1
    ((_, version, verdict, reason),) = verdict_rows(out)
    assert (version, verdict) == ("2", "FAIL")
    assert reason.startswith("recorded call(s) never made: tools:get_weather")
    assert 'now "Let me check the weather in Paris."' in out  # the diff is in the details


def test_reports_are_written(
    capture: Any, cli: CLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    story(capture, cli)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    status, _, _ = cli(
        "replay", "--junit", str(tmp_path / "j.xml"), "--json", str(tmp_path / "r.json")
    )
    assert status == 1
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "1" and suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert failure is not None and failure.get("type") == "INCOMPLETE"
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["incomplete"] == 1 and report["summary"]["ok"] is False
    assert (
        report["cases"][0]["verdict"] == "INCOMPLETE"
        and report["cases"][0]["case_id"] == "paris-weather"
    )
    assert summary.read_text().startswith("### tracely replay: 1 case: 1 incomplete")


def test_selecting_cases_by_id_and_tag(capture: Any, cli: CLI) -> None:
    for city, tag in (("Paris", "eu"), ("Oslo", "eu"), ("Tokyo", "asia")):
        trace_id = record(capture, cli, weather_agent.run, city)
        cli(
            "cases",
            "promote",
            trace_id,
            "--name",
            city,
            "--tag",
            tag,
            "--entrypoint",
            f"{WEATHER}:run",
        )

    def replayed(*argv: str) -> list[str]:
        status, out, err = cli("replay", *argv)
        assert status == 0, err
        return [row[0] for row in verdict_rows(out)]

    assert replayed() == ["oslo", "paris", "tokyo"]
    assert replayed("--tag", "eu") == ["oslo", "paris"]
    assert replayed("--tag", "asia", "--tag", "eu") == ["oslo", "paris", "tokyo"]
    assert replayed("--case", "tokyo", "--case", "paris") == ["paris", "tokyo"]
    status, _, err = cli("replay", "--case", "lima")
    assert status == 2 and err.startswith("tracely: error: no case 'lima'")
    status, out, err = cli("replay", "--tag", "none")
    assert status == 2 and out == ""
    assert err == (
        f"tracely: error: no cases to replay: the store {cli.url} holds 3 cases, none "
        "selected by --tag none; check the filters for a typo (`tracely cases list` shows "
        "every case and its tags). A gate that replays nothing is not a pass: pass "
        "--allow-empty if that is intended\n"
    )
    status, out, err = cli("replay", "--tag", "none", "--allow-empty")
    assert status == 0 and out == "" and "no cases to replay" in err


def test_replay_from_an_exported_directory(
    capture: Any, cli: CLI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    story(capture, cli)
    cli("cases", "export", str(tmp_path / "cases"))
    capsys.readouterr()
    assert main(["replay", "--cases", str(tmp_path / "cases")]) == 1
    assert verdict_rows(capsys.readouterr().out)[0][2] == "INCOMPLETE"
    # --store and --cases are alternatives
    status, _, err = cli("replay", "--cases", str(tmp_path / "cases"))
    assert status == 2 and "--store and --cases are alternatives" in err
    assert main(["replay", "--cases", str(tmp_path / "nowhere")]) == 2
    assert "no case directory at" in capsys.readouterr().err


def test_a_bad_entrypoint_is_a_usage_error(capture: Any, cli: CLI) -> None:
    story(capture, cli)
    status, out, err = cli("replay", "--entrypoint", f"{WEATHER}:nope")
    assert status == 2 and out == ""
    assert err == (
        f"tracely: error: entrypoint '{WEATHER}:nope': '{WEATHER}' has no attribute 'nope'\n"
    )
    status, _, err = cli("replay", "--entrypoint", "missing_module_abc:run")
    assert status == 2 and "no module named 'missing_module_abc'" in err


def test_a_case_without_an_entrypoint_needs_one(capture: Any, cli: CLI) -> None:
    cli("cases", "promote", record(capture, cli, weather_agent.run, "Paris"), "--name", "Paris")
    status, _, err = cli("replay")
    assert status == 2 and "have no entrypoint: pass --entrypoint" in err
    assert cli("replay", "--entrypoint", f"{WEATHER}:run")[0] == 0


def test_lenient_says_lenient(capture: Any, cli: CLI) -> None:
    _, fixed = story(capture, cli)
    status, out, _ = cli("replay", "--lenient")
    assert status == 1  # the run fell through to live calls and answered differently
    assert verdict_rows(out)[0][2] == "LENIENT"
    assert "lenient (not a recorded pass)" in out
    cli("cases", "recapture", "paris-weather", fixed)
    status, out, _ = cli("replay", "--lenient")
    assert status == 0 and verdict_rows(out)[0][2] == "LENIENT" and "passed" not in out


def test_replay_sets_up_tracing_without_recording(
    capture: Any, cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr("tracely_sdk.init", lambda **kw: calls.append(kw))
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    init_tracing()  # the real one (the cli fixture stubs the module's)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    init_tracing()
    assert calls == [{"record": False, "sampler": ALWAYS_OFF}, {"record": False}]
    seen: list[str] = []
    monkeypatch.setattr(_replay, "init_tracing", lambda: seen.append("init"))
    story(capture, cli)
    cli("replay")
    assert seen == ["init"]


def test_an_empty_store_is_not_a_pass(cli: CLI, tmp_path: Path) -> None:
    cli.store().close()
    status, out, err = cli("replay", "--junit", str(tmp_path / "j.xml"))
    assert status == 2 and out == "" and err.count("\n") == 1
    assert f"no cases to replay: the store {cli.url} holds no cases; promote" in err
    assert not (tmp_path / "j.xml").exists()
    status, out, err = cli("replay", "--junit", str(tmp_path / "j.xml"), "--allow-empty")
    assert status == 0 and out == "" and "no cases to replay" in err
    assert ET.parse(tmp_path / "j.xml").getroot().get("tests") == "0"


def test_the_html_report_is_written_and_the_step_summary_links_to_it(
    capture: Any, cli: CLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(capture, cli, weather_agent.run, "Paris")
    fixed = cli.store().list_recordings()[0].trace_id
    assert (
        cli("cases", "promote", fixed, "--name", "Paris <b>weather</b>", "--tag", "smoke")[0] == 0
    )
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    report = tmp_path / "out" / "report.html"
    status, _, err = cli(
        "replay",
        "--entrypoint",
        f"{WEATHER}:run_rewritten",
        "--html",
        str(report),
        "--html-url",
        "https://ci.example/artifacts/report.html",
    )
    assert status == 1, err
    page = report.read_text()
    assert page.startswith("<!doctype html>")
    assert "Paris &lt;b&gt;weather&lt;/b&gt;" in page and "<b>weather" not in page
    assert 'data-outcome="diverged"' in page and 'data-outcome="never made"' in page
    assert weather_agent.REWRITTEN_SYSTEM in page and weather_agent.SYSTEM in page
    assert "http://" not in page and "https://" not in page  # nothing loaded from anywhere
    assert (
        "[The full report, call by call](https://ci.example/artifacts/report.html)"
        in summary.read_text()
    )


def test_an_empty_case_directory_is_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cases").mkdir()
    assert main(["replay", "--cases", str(tmp_path / "cases")]) == 2
    err = capsys.readouterr().err
    assert f"no cases to replay: the case directory {tmp_path / 'cases'} holds no cases" in err
    assert main(["replay", "--cases", str(tmp_path / "cases"), "--allow-empty"]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["replay"],
        ["replay", "--allow-empty"],
        ["traces", "list"],
        ["traces", "show", "0" * 32],
        ["cases", "list"],
        ["cases", "show", "paris"],
        ["cases", "history", "paris"],
        ["cases", "export", "out"],
    ],
)
def test_read_only_commands_never_create_a_store(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo" / "trcely.db"
    status = main([*argv, "--store", f"sqlite:///{missing.as_posix().lstrip('/')}"])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith(f"tracely: error: no tracely store at {missing} ")
    assert err.count("\n") == 1
    assert not (tmp_path / "typo").exists() and not (tmp_path / "out").exists()


def test_a_case_cannot_choose_code_outside_the_project(
    capture: Any, cli: CLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a server write token (or a committed case file) allows: a recording whose input is
    # a shell command, and a case naming os:system. The store checks the syntax only.
    marker = tmp_path / "executed"
    trace_id = record(capture, cli, weather_agent.run, f"touch {marker}")
    with cli.store() as store:
        store.promote(trace_id, name="evil", entrypoint="os:system")
    monkeypatch.delenv("TRACELY_ENTRYPOINTS", raising=False)

    def refused(*argv: str) -> None:
        status, _, _ = cli("replay", *argv, "--json", str(tmp_path / "r.json"))
        assert status == 1
        (case,) = json.loads((tmp_path / "r.json").read_text())["cases"]
        assert case["verdict"] == "ERRORED" and case["entrypoint"] == "os:system"
        (reason,) = case["reasons"]
        assert reason.startswith("entrypoint 'os:system' is not allowed, so it was not imported")
        assert "to allow it, add it to [tool.tracely] entrypoints in pyproject.toml" in reason
        assert not marker.exists()

    refused()
    refused("-j", "2")
    cli("cases", "export", str(tmp_path / "cases"))
    assert main(["replay", "--cases", str(tmp_path / "cases")]) == 1
    assert not marker.exists()
    fresh = CLI(cli.capsys, f"sqlite:///{(tmp_path / 'fresh.db').as_posix().lstrip('/')}")
    status, _, err = fresh("cases", "import", str(tmp_path / "cases"))
    assert status == 0
    assert err.startswith(
        "tracely: case evil: entrypoint 'os:system' is not allowed, so it was not imported"
    )
    assert err.endswith("; replay will report it ERRORED\n")
    status, out, _ = fresh("replay")
    assert status == 1 and verdict_rows(out)[0][:3] == ["evil", "1", "ERRORED"]
    assert not marker.exists()
    # The project can allow it (it is then the project's choice): the marker proves it ran.
    monkeypatch.setenv("TRACELY_ENTRYPOINTS", "os:system")
    cli("replay")
    assert marker.exists()


def test_a_project_module_does_not_lend_the_functions_it_imported(
    capture: Any, cli: CLI, tmp_path: Path
) -> None:
    # examples.anthropic_agent is the project's and imports os: os.system is reachable from it
    # as an attribute, but it is not the project's code.
    marker = tmp_path / "executed"
    trace_id = record(capture, cli, weather_agent.run, f"touch {marker}")
    with cli.store() as store:
        store.promote(trace_id, name="evil", entrypoint="examples.anthropic_agent:os.system")
    for jobs in ("1", "2"):
        status, _, _ = cli("replay", "-j", jobs, "--json", str(tmp_path / "r.json"))
        assert status == 1
        (case,) = json.loads((tmp_path / "r.json").read_text())["cases"]
        assert case["verdict"] == "ERRORED"
        assert case["reasons"][0].startswith(
            "entrypoint 'examples.anthropic_agent:os.system' is not allowed, so it was not run: "
            "it is defined in 'posix', not in the project"
        )
        assert not marker.exists()
    status, _, err = cli(
        "cases",
        "promote",
        trace_id,
        "--name",
        "again",
        "--entrypoint",
        "examples.weather_agent:json.loads",
    )
    assert status == 2 and "it is defined in 'json', not in the project" in err


KEYLESS_AGENT = """
import openai

import tracely_sdk as tracely

client = openai.OpenAI()  # built at import, as many agents do: the SDK wants a key here


def run(city):
    with tracely.agent("keyless", input=city) as agent_run:
        agent_run.output = tracely.call_tool("lookup", lambda: city.upper(), args={"city": city})
        return agent_run.output
"""


def unset_api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # setenv first, so that whatever replay sets is undone after the test
    for name in _entrypoints.API_KEY_VARIABLES:
        monkeypatch.setenv(name, "x")
        monkeypatch.delenv(name)


def test_replay_gives_a_client_built_at_import_a_placeholder_key(
    capture: Any, cli: CLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unset_api_keys(monkeypatch)
    (tmp_path / "keyless_agent.py").write_text(KEYLESS_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # the project: its own modules may be replayed
    monkeypatch.setenv("OPENAI_API_KEY", "live-key")
    import keyless_agent  # type: ignore[import-not-found]

    trace_id = record(capture, cli, keyless_agent.run, "Paris")
    monkeypatch.delitem(__import__("sys").modules, "keyless_agent")
    monkeypatch.delenv("OPENAI_API_KEY")
    # promote imports the entrypoint to check it (never calls it), replay serves every call
    status, out, err = cli(
        "cases", "promote", trace_id, "--name", "keyless", "--entrypoint", "keyless_agent:run"
    )
    assert status == 0, err
    status, out, err = cli("replay")
    assert status == 0, out + err
    assert verdict_rows(out)[0][:3] == ["keyless", "1", "PASS"]
    assert __import__("os").environ["OPENAI_API_KEY"] == _entrypoints.PLACEHOLDER_API_KEY


def test_placeholders_fill_only_the_keys_that_are_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    unset_api_keys(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "real")
    assert "ANTHROPIC_API_KEY" in _entrypoints.placeholder_api_keys()
    assert __import__("os").environ["OPENAI_API_KEY"] == "real"  # a set key is never replaced


CLIENTS_AGENT = """
import boto3
import groq
from mistralai.client import Mistral

import tracely_sdk as tracely

# built at import, each wanting a key or a region from the environment
groq_client = groq.Groq()
mistral_client = Mistral()
bedrock = boto3.client("bedrock-runtime")


def ask_groq(city):
    messages = [{"role": "user", "content": city}]
    reply = groq_client.chat.completions.create(model="llama-3.3-70b", messages=messages)
    return reply.choices[0].message.content


def ask_mistral(city):
    messages = [{"role": "user", "content": city}]
    reply = mistral_client.chat.complete(model="mistral-small-latest", messages=messages)
    return reply.choices[0].message.content


def ask_bedrock(city):
    messages = [{"role": "user", "content": [{"text": city}]}]
    reply = bedrock.converse(modelId="amazon.nova-lite-v1:0", messages=messages)
    return reply["output"]["message"]["content"][0]["text"]


def run(city):
    with tracely.agent("clients", input=city) as agent_run:
        agent_run.output = [
            tracely.call_llm("llama-3.3-70b", lambda: ask_groq(city), input=city),
            tracely.call_llm("mistral-small-latest", lambda: ask_mistral(city), input=city),
            tracely.call_llm("amazon.nova-lite-v1:0", lambda: ask_bedrock(city), input=city),
        ]
        return agent_run.output
"""


def test_replay_builds_groq_mistral_and_bedrock_clients_without_keys_or_region(
    capture: Any, cli: CLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unset_api_keys(monkeypatch)
    (tmp_path / "clients_agent.py").write_text(CLIENTS_AGENT)
    # tests/sdk/providers/test_wire_clients.py imports a module of the same name
    monkeypatch.delitem(sys.modules, "clients_agent", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # the project: its own modules may be replayed
    for name in _entrypoints.API_KEY_VARIABLES:
        monkeypatch.setenv(name, "live")
    import clients_agent  # type: ignore[import-not-found]

    # the model's replies, recorded without a paid API; replay serves them and never asks
    for client in ("groq", "mistral", "bedrock"):
        monkeypatch.setattr(clients_agent, f"ask_{client}", lambda city, c=client: f"{c}: {city}")
    trace_id = record(capture, cli, clients_agent.run, "Paris")
    monkeypatch.delitem(sys.modules, "clients_agent")
    for name in _entrypoints.API_KEY_VARIABLES:
        monkeypatch.delenv(name)
    status, _, err = cli(
        "cases", "promote", trace_id, "--name", "clients", "--entrypoint", "clients_agent:run"
    )
    assert status == 0, err

    unset = (*_entrypoints.API_KEY_VARIABLES, "AWS_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env = {k: v for k, v in env.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    command = [sys.executable, "-m", "tracely_sdk.cli", "replay", "--store", cli.url]
    command += ["--json", str(tmp_path / "r.json")]
    replay = subprocess.run(
        command,
        env={**env, "PYTHONPATH": str(ROOT), "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert replay.returncode == 0, replay.stdout + replay.stderr
    (case,) = json.loads((tmp_path / "r.json").read_text())["cases"]
    assert case["verdict"] == "PASS", case


def test_live_tools_run_for_real_and_the_summary_says_so(
    capture: Any, cli: CLI, tmp_path: Path
) -> None:
    _, fixed = story(capture, cli)
    assert cli("cases", "recapture", "paris-weather", fixed)[0] == 0
    path = tmp_path / "report.json"
    status, out, err = cli("replay", "--live", "tools:*", "--json", str(path))
    assert status == 0, err
    assert "(live: tools:*)" in out
    report = json.loads(path.read_text())
    (case,) = report["cases"]
    assert case["verdict"] == "PASS" and case["live_patterns"] == ["tools:*"]
    assert [c["label"] for c in case["live_checks"]] == ["tools:get_weather"]
    assert case["live_checks"][0]["equal"] is True
    assert report["summary"]["live_patterns"] == ["tools:*"]


def big_suite(capture: Any, cli: CLI, broken: int) -> None:
    """``broken`` cases city1..cityN that fail alike (their agent drops the tool call), and
    one case, oslo, that passes."""
    paris = record(capture, cli, weather_agent.run, "Paris")
    for n in range(1, broken + 1):
        status, _, err = cli(
            "cases", "promote", paris, "--name", f"City {n}", "--id", f"city{n}",
            "--entrypoint", f"{WEATHER}:run_broken",
        )  # fmt: skip
        assert status == 0, err
    oslo = record(capture, cli, weather_agent.run, "Oslo")
    status, _, err = cli(
        "cases", "promote", oslo, "--name", "Oslo", "--entrypoint", f"{WEATHER}:run"
    )
    assert status == 0, err


def test_all_lists_every_case_in_natural_order_and_alike_failures_once(
    capture: Any, cli: CLI
) -> None:
    big_suite(capture, cli, broken=11)
    status, out, _ = cli("replay", "--all")
    assert status == 1
    rows = verdict_rows(out)
    assert [r[0] for r in rows] == [*(f"city{n}" for n in range(1, 12)), "oslo"]
    assert [r[2] for r in rows] == ["FAIL"] * 11 + ["PASS"]
    blocks = out.split("\n\n")
    assert len(blocks) == 3  # the table, one block for the eleven alike failures, the summary
    group = blocks[1].splitlines()
    assert group[0] == "FAIL 11 cases alike:"
    assert group[1] == "  cases " + ", ".join(f"city{n}" for n in range(1, 12))
    assert group[2].startswith("  - recorded call(s) never made: tools:get_weather")
    assert out.count("recorded call(s) never made") == 11 + 1  # 11 table rows, 1 block
    assert blocks[2].startswith("12 cases: 1 passed, 11 failed in")


def test_failures_only_lists_only_what_failed(capture: Any, cli: CLI) -> None:
    big_suite(capture, cli, broken=2)
    status, out, _ = cli("replay", "--failures-only")
    assert status == 1
    assert "CASE" not in out and "oslo" not in out
    assert out.startswith("FAIL 2 cases alike:\n  cases city1, city2\n")
    last = out.rstrip("\n").splitlines()[-1]
    assert last.startswith("3 cases: 1 passed, 2 failed in")
    assert last.endswith("(1 not listed: --all lists every case)")


def test_failures_only_is_the_default_in_ci_and_all_overrides_it(
    capture: Any, cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    big_suite(capture, cli, broken=1)
    assert "oslo" in cli("replay")[1]
    monkeypatch.setenv("CI", "true")
    status, out, _ = cli("replay")
    assert status == 1 and "oslo" not in out and out.startswith("FAIL city1 v1 (City 1)\n")
    assert "oslo" in cli("replay", "--all")[1]
    status, _, err = cli("replay", "--all", "--failures-only")
    assert status == 2 and "not allowed with argument" in err


def test_an_errored_case_shows_the_agents_traceback_now_and_in_the_kept_run(
    capture: Any, cli: CLI
) -> None:
    handled = record(capture, cli, weather_agent.run_handles, "Atlantis")
    cli("cases", "promote", handled, "--name", "Atlantis", "--entrypoint", f"{WEATHER}:run_handles")
    status, out, err = cli("replay", "--entrypoint", f"{WEATHER}:run")  # run does not handle it
    assert status == 1
    details = out.split("ERRORED atlantis v1 (Atlantis)\n")[1].split("\n  trace ")[0].splitlines()
    assert details[0] == "  - the agent raised WeatherServiceError: no weather data for 'Atlantis'"
    assert details[1] == "    Traceback (most recent call last):"
    assert "weather_agent.py" in details[2] and details[2].endswith(", in run")
    assert details[-2] == "    tracely_sdk.errors.ToolError: no weather data for 'Atlantis'"
    assert details[-1].endswith("of tracely and its runner not shown)")
    assert not any("tracely_sdk/" in line for line in details)
    run_id = re.search(r"run ([0-9a-f]{16}) kept in", err)
    assert run_id is not None
    kept = cli("runs", "show", run_id.group(1))[1]
    assert "\n".join(details[1:]) in kept


# -- spans nobody reads -------------------------------------------------------------------------


def test_init_tracing_samples_nothing_only_without_an_exporter(
    unset_global_provider: None, monkeypatch: pytest.MonkeyPatch, otlp_collector: Any
) -> None:
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    init_tracing()
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider) and provider.sampler is ALWAYS_OFF
    with tracely.agent("unread", input=1) as run:
        assert not run.span.is_recording() and run.span.get_span_context().is_valid
    provider.shutdown()

    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE._done = False
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_collector.endpoint)
    init_tracing()
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider) and provider.sampler is not ALWAYS_OFF
    with tracely.agent("read", input=1) as run:
        assert run.span.is_recording()
    provider.force_flush()
    assert [s.name for s in otlp_collector.spans] == ["invoke_agent read"]


def _tracely_replay(
    cli: CLI, out: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """``tracely replay`` as CI runs it: its own process, every report asked for."""
    out.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    command = [
        sys.executable, "-m", "tracely_sdk.cli", "replay", "--store", cli.url,
        "--json", str(out / "r.json"), "--junit", str(out / "r.xml"), "--html", str(out / "r.html"),
    ]  # fmt: skip
    return subprocess.run(
        command,
        env={**base, "PYTHONPATH": str(ROOT), **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_reports_and_the_kept_run_are_the_same_with_and_without_an_exporter(
    capture: Any, cli: CLI, tmp_path: Path, otlp_collector: Any
) -> None:
    big_suite(capture, cli, broken=1)  # city1 fails, oslo passes
    atlantis = record(capture, cli, weather_agent.run_handles, "Atlantis")
    cli("cases", "promote", atlantis, "--name", "Atlantis", "--entrypoint", f"{WEATHER}:run")
    endpoint = otlp_collector.endpoint
    unread = _tracely_replay(cli, tmp_path / "unread", {})
    read = _tracely_replay(cli, tmp_path / "read", {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
    assert unread.returncode == read.returncode == 1, unread.stderr + read.stderr

    reports = {
        name: json.loads((tmp_path / name / "r.json").read_text()) for name in ("unread", "read")
    }
    cases = {name: report["cases"] for name, report in reports.items()}
    assert [c["verdict"] for c in cases["unread"]] == ["ERRORED", "FAIL", "PASS"]
    trace_ids = {name: [c["trace_id"] for c in cs] for name, cs in cases.items()}
    assert all(re.fullmatch("[0-9a-f]{32}", t) for ids in trace_ids.values() for t in ids)

    # Every span of the exported run reached the receiver: one agent span per case, one per call.
    spans_of = {
        t: [s for s in otlp_collector.spans if s.trace_id.hex() == t] for t in trace_ids["read"]
    }
    for case in cases["read"]:
        spans = spans_of[case["trace_id"]]
        kinds = sorted(a.value.string_value for s in spans for a in s.attributes if a.key == A.KIND)
        calls = [step for step in case["timeline"] if step.get("call")]
        assert kinds.count("agent") == 1 and len(spans) == 1 + len(calls), case["case_id"]
    assert len(otlp_collector.spans) == sum(len(s) for s in spans_of.values())

    def same(text: str, name: str) -> str:
        """``text`` with what differs between two runs of the same cases made alike."""
        for n, trace_id in enumerate(trace_ids[name]):
            text = text.replace(trace_id, f"<trace {n}>")
        text = re.sub(r'"(duration_s|time)": ?[0-9.e-]+', r'"\1": 0', text)
        text = re.sub(r'(time|timestamp)="[^"]*"', r'\1=""', text)
        return re.sub(r"\b[0-9]+\.[0-9]+ ?(s|ms)\b", "0 s", text)

    for report in ("r.json", "r.xml", "r.html"):
        texts = {n: same((tmp_path / n / report).read_text(), n) for n in ("unread", "read")}
        assert texts["unread"] == texts["read"], report

    kept = {}
    for name, proc in (("unread", unread), ("read", read)):
        run_id = re.search(r"run ([0-9a-f]{16}) kept in", proc.stderr)
        assert run_id is not None, proc.stderr
        status, shown, _ = cli("runs", "show", run_id.group(1), "--json")
        assert status == 0
        run = json.loads(shown)
        kept[name] = {k: v for k, v in run.items() if k not in ("run_id", "started_at")}
        kept[name] = json.loads(same(json.dumps(kept[name]), name))
    assert kept["read"].pop("otlp_endpoint") == endpoint  # what only an exporter adds
    assert kept["unread"].pop("otlp_endpoint") is None
    assert kept["unread"] == kept["read"]
