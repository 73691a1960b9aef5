"""The provider example agents: run live against the local server, replay with no network.

The agents read their endpoint and key from the usual ``OPENAI_*`` / ``ANTHROPIC_*``
variables, exactly as they would against the real APIs.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tracely_sdk as tracely
from examples import anthropic_agent, openai_agent
from examples.llm_server import serve
from tracely_sdk import providers

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def instrumented() -> Iterator[None]:
    providers.instrument("auto")
    yield
    providers.uninstrument()


AGENTS: list[Any] = [
    pytest.param(
        openai_agent, "OPENAI", "/v1", "What's the weather in Paris?", "Paris", id="openai"
    ),
    pytest.param(
        anthropic_agent, "ANTHROPIC", "", "What's the weather in Lisbon?", "Lisbon", id="anthropic"
    ),
]


@pytest.mark.parametrize(("agent", "prefix", "path", "question", "city"), AGENTS)
def test_the_agent_records_live_and_replays_with_no_network(
    capture: Any,
    instrumented: None,
    monkeypatch: pytest.MonkeyPatch,
    agent: Any,
    prefix: str,
    path: str,
    question: str,
    city: str,
) -> None:
    with serve() as (server, base_url):
        monkeypatch.setenv(f"{prefix}_BASE_URL", base_url + path)
        monkeypatch.setenv(f"{prefix}_API_KEY", "test-key")
        answer = agent.run(question)
        assert len(server.requests) == 2  # the tool-call turn and the tool-result turn
    assert city in answer and "According to get_weather" in answer
    bundle = json.loads(json.dumps(capture.last_bundle))
    (model,) = bundle["llm"]
    assert [e["seq"] for e in bundle["llm"][model]] == [1, 3]
    assert bundle["tools"]["get_weather"][0]["args"] == {"city": city}

    monkeypatch.setenv(f"{prefix}_BASE_URL", f"http://127.0.0.1:{closed_port()}{path}")
    monkeypatch.delenv(f"{prefix}_API_KEY")  # replay needs no key
    providers.uninstrument()  # as in CI: nothing instrumented, fixtures() patches
    with tracely.fixtures(bundle) as rep:
        replayed = agent.run(question)
    assert replayed == answer
    assert rep.clean
    assert rep.served == [f"llm:{model}", "tools:get_weather", f"llm:{model}"]


@pytest.mark.parametrize(("agent", "prefix", "path", "question", "city"), AGENTS)
def test_main_runs_the_agent_live_and_records_it(
    tmp_path: Path, agent: Any, prefix: str, path: str, question: str, city: str
) -> None:
    store = tmp_path / "tracely.db"
    with serve() as (server, base_url):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
        env.update(
            PYTHONPATH=str(ROOT),
            TRACELY_STORE=f"sqlite:///{store.as_posix().lstrip('/')}",
            OTEL_TRACES_EXPORTER="none",
            **{f"{prefix}_BASE_URL": base_url + path, f"{prefix}_API_KEY": "test-key"},
        )
        result = subprocess.run(
            [sys.executable, "-m", agent.__name__, question],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr
        assert len(server.requests) == 2
    assert city in result.stdout
    assert "recorded trace" in result.stderr
    from tracely_sdk.store import open_store

    with open_store(f"sqlite:///{store.as_posix().lstrip('/')}") as opened:
        (recording,) = opened.list_recordings()
    assert len(next(iter(recording.bundle["llm"].values()))) == 2
