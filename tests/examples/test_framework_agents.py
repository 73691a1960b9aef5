"""The LangGraph, OpenAI Agents SDK and pydantic-ai example agents, as the README runs them.

Each runs live against the local stand-in of the OpenAI API (recorded into a store), is
promoted to a case, and replays PASS with the stand-in stopped and no ``OPENAI_*`` variable
set: every model call and the tool call served from the recording.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from examples.llm_server import serve

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What's the weather in Paris?"

AGENTS = [
    pytest.param("langgraph_agent", ("langgraph", "langchain_openai"), id="langgraph"),
    pytest.param("openai_agents_agent", ("agents",), id="openai-agents"),
    pytest.param("pydantic_ai_agent", ("pydantic_ai",), id="pydantic-ai"),
]


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(("module", "needs"), AGENTS)
def test_the_agent_records_live_and_replays_pass_with_no_server_and_no_key(
    tmp_path: Path, module: str, needs: tuple[str, ...]
) -> None:
    for package in needs:
        pytest.importorskip(package)
    (tmp_path / "pyproject.toml").write_text('[tool.tracely]\nentrypoints = ["examples.*"]\n')
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "TRACELY_", "OPENAI_", "ANTHROPIC_", "GOOGLE_"))
    }
    env.update(
        PYTHONPATH=str(ROOT),
        TRACELY_STORE=f"sqlite:///{(tmp_path / 'tracely.db').as_posix().lstrip('/')}",
        OTEL_TRACES_EXPORTER="none",
    )
    with serve() as (server, base_url):
        live_env = {**env, "OPENAI_BASE_URL": f"{base_url}/v1", "OPENAI_API_KEY": "test-key"}
        live = _run(["-m", f"examples.{module}", QUESTION], live_env, tmp_path)
        assert live.returncode == 0, live.stderr
        assert len(server.requests) == 2  # the tool-call turn and the tool-result turn
    assert "According to get_weather" in live.stdout and "Paris" in live.stdout
    (trace_id,) = re.findall(r"^recorded trace ([0-9a-f]{32})$", live.stderr, re.MULTILINE)

    cli = ["-m", "tracely_sdk.cli"]
    entrypoint = f"examples.{module}:run"
    promote = _run(
        [*cli, "cases", "promote", trace_id, "--name", "Paris", "--entrypoint", entrypoint],
        env,
        tmp_path,
    )
    assert promote.returncode == 0, promote.stderr

    replay = _run([*cli, "replay", "--json", "replay.json"], env, tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    (case,) = json.loads((tmp_path / "replay.json").read_text())["cases"]
    assert case["verdict"] == "PASS" and case["mode"] == "recorded"
    assert case["served"] == ["llm:gpt-4o-mini", "tools:get_weather", "llm:gpt-4o-mini"]
    assert case["unused"] == [] and case["diverged"] == []
    assert case["output"] == live.stdout.rstrip("\n")

    # Robustness: the recorded tool call failing. The Agents SDK turns a tool's failure into
    # the next model turn; these LangGraph and pydantic-ai agents let it escape.
    faults = _run([*cli, "replay", "--faults", "--json", "faults.json"], env, tmp_path)
    assert faults.returncode == 0, faults.stdout + faults.stderr
    (case,) = json.loads((tmp_path / "faults.json").read_text())["cases"]
    verdicts = {(r["call"], r["fault"]): (r["verdict"], r.get("next")) for r in case["faults"]}
    error = verdicts[("tools:get_weather #1", "error")]
    if module == "openai_agents_agent":
        assert error == ("HANDLED", "called llm:gpt-4o-mini")
    else:
        assert error == (
            "CRASHED",
            "raised ToolError: tools:get_weather failed (a fault tracely injected)",
        )
    assert verdicts[("tools:get_weather #1", "empty")] == ("HANDLED", "called llm:gpt-4o-mini")
    # The model's 429, served at the OpenAI SDK's client beneath the framework: the SDK's own
    # retry is a call the recording cannot answer, so INCOMPLETE (never live) by default...
    retried = "retried llm:gpt-4o-mini, which the recording cannot answer"
    assert verdicts[("llm:gpt-4o-mini #1", "rate_limit")] == ("INCOMPLETE", retried)
    # ...and HANDLED once the project serves a retry the recorded answer.
    serve_recorded = {**env, "TRACELY_FAULTS": json.dumps({"retry": "serve-recorded"})}
    args = [*cli, "replay", "--faults", "rate_limit", "--json", "retried.json"]
    retried_run = _run(args, serve_recorded, tmp_path)
    assert retried_run.returncode == 0, retried_run.stdout + retried_run.stderr
    (case,) = json.loads((tmp_path / "retried.json").read_text())["cases"]
    verdicts = {(r["call"], r["fault"]): r["verdict"] for r in case["faults"]}
    assert verdicts[("llm:gpt-4o-mini #1", "rate_limit")] == "HANDLED", case["faults"]
