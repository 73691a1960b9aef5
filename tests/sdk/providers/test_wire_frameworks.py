"""Agent frameworks users reach models through, each recorded live against the local stand-in,
promoted, and replayed by ``tracely replay``: smolagents (``LiteLLMModel``, ``OpenAIServerModel``),
langchain-anthropic (``ChatAnthropic``), langchain-google-genai (``ChatGoogleGenerativeAI``) and
DSPy's ``dspy.LM`` with ``engine="litellm"``. Each agent builds its model at import, with no key
of its own (the framework reads the provider's variable); the replay PASSes with no key and the
server stopped, and with the server up a call the recording lacks is never PASS and never
reaches the server. DSPy's default engine sends through its own HTTP client over raw sockets,
beneath every hook: it is not recorded, and strict replay refuses its connection by name."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of prices at import

from examples.llm_server import serve
from tests.sdk.cli._helpers import CLI, record
from tests.sdk.providers._helpers import (
    agent_project,
    fails_naming,
    instrumented_fixture,
    replayed_offline,
)
from tracely_sdk import _entrypoints

HEADER = """
import os

import tracely_sdk as tracely

BASE = os.environ["FRAMEWORK_AGENT_BASE"]
"""

RUN = """

def run(city):
    with tracely.agent("framework", input=city) as agent_run:
        agent_run.output = ask(f"Weather in {city}?")
        return agent_run.output
"""

SMOLAGENTS_MESSAGE = """

def ask(question):
    message = {"role": "user", "content": [{"type": "text", "text": question}]}
    return model.generate([message]).content
"""

# How the call the recording lacks is refused at the client beneath the framework.
NO_RECORDED_CALL = "no recorded call for llm:{label}"

FRAMEWORKS = [
    pytest.param(
        "smolagents",
        """
from smolagents import LiteLLMModel

model = LiteLLMModel(model_id="openai/gpt-4o", api_base=f"{BASE}/v1", num_retries=0)
"""
        + SMOLAGENTS_MESSAGE,
        "gpt-4o",
        "/v1/chat/completions",
        NO_RECORDED_CALL,
        "httpx.Client.send",
        id="smolagents-LiteLLMModel",
    ),
    pytest.param(
        "smolagents",
        """
from smolagents import OpenAIServerModel

model = OpenAIServerModel(
    model_id="gpt-4o", api_base=f"{BASE}/v1", client_kwargs={"max_retries": 0}
)
"""
        + SMOLAGENTS_MESSAGE,
        "gpt-4o",
        "/v1/chat/completions",
        NO_RECORDED_CALL,
        "httpx2.Client.send",
        id="smolagents-OpenAIServerModel",
    ),
    pytest.param(
        "langchain_anthropic",
        """
from langchain_anthropic import ChatAnthropic

model = ChatAnthropic(model="claude-3-5-haiku", base_url=BASE, max_retries=0)


def ask(question):
    return model.invoke(question).content
""",
        "claude-3-5-haiku",
        "/v1/messages",
        NO_RECORDED_CALL,
        "httpx2.Client.send",
        id="langchain-anthropic",
    ),
    pytest.param(
        "langchain_google_genai",
        """
from langchain_google_genai import ChatGoogleGenerativeAI

model = ChatGoogleGenerativeAI(model="gemini-2.0-flash", base_url=BASE, max_retries=0)


def ask(question):
    return model.invoke(question).content
""",
        "gemini-2.0-flash",
        "/v1/models/gemini-2.0-flash:generateContent",
        NO_RECORDED_CALL,
        "httpx2.Client.send",
        id="langchain-google-genai",
    ),
    pytest.param(
        "dspy",
        """
import dspy

# DSPy's own cache would answer a repeated prompt before any client is asked
lm = dspy.LM(
    "openai/gpt-4o", api_base=f"{BASE}/v1", engine="litellm", cache=False, num_retries=0
)


def ask(question):
    return lm(question)[0]
""",
        "gpt-4o",
        "/v1/chat/completions",
        NO_RECORDED_CALL,
        "httpx.Client.send",
        id="dspy-litellm",
    ),
]


instrumented = instrumented_fixture("auto")


@pytest.mark.parametrize(("package", "model", "label", "path", "refusal", "provider"), FRAMEWORKS)
def test_the_framework_records_live_replays_with_no_server_and_no_key_and_never_goes_live(
    capture: Any,
    instrumented: None,
    cli: CLI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    package: str,
    model: str,
    label: str,
    path: str,
    refusal: str,
    provider: str,
) -> None:
    pytest.importorskip(package)
    monkeypatch.setenv("DSPY_CACHEDIR", str(tmp_path / "dspy-cache"))
    agent = HEADER + model + RUN
    agent_project(tmp_path, monkeypatch, "framework_agent", agent)
    with serve() as (server, _):
        monkeypatch.setenv("FRAMEWORK_AGENT_BASE", server.base_url)
        import framework_agent  # type: ignore[import-not-found]

        trace_id = record(capture, cli, framework_agent.run, "Paris")
        assert server.paths() == [path]
    recorded = capture.last_bundle["llm"]
    assert {name: [e["provider"] for e in entries] for name, entries in recorded.items()} == {
        label: [provider]
    }
    # No key, no server: the model is built again at import with a placeholder key.
    case = replayed_offline(cli, monkeypatch, tmp_path, trace_id, "framework_agent", agent)
    assert case["served"] == [f"llm:{label}"] and case["unused"] == []
    assert case["output"] == "You said: Weather in Paris?"  # the stand-in's answer, replayed

    with serve() as (server, _):
        monkeypatch.setenv("FRAMEWORK_AGENT_BASE", server.base_url)
        # A model call the recording lacks: refused at the client, never sent.
        twice = agent.replace(
            "        return agent_run.output",
            "        ask('once more')\n        return agent_run.output",
        )
        missing = refusal.format(label=label)
        fails_naming(cli, monkeypatch, tmp_path, "framework_agent", twice, missing)
        assert server.requests == []  # nothing reached the live server


DSPY_DEFAULT_ENGINE = """
import dspy

# engine "auto", DSPy's default: its own HTTP client over raw sockets, beneath every hook
lm = dspy.LM("openai/gpt-4o", api_base=f"{BASE}/v1", cache=False, num_retries=0)


def ask(question):
    return lm(question)[0]
"""


def test_dspy_default_engine_is_not_recorded_and_strict_replay_refuses_its_connection(
    capture: Any,
    instrumented: None,
    cli: CLI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("dspy")
    monkeypatch.setenv("DSPY_CACHEDIR", str(tmp_path / "dspy-cache"))
    agent = HEADER + DSPY_DEFAULT_ENGINE + RUN
    agent_project(tmp_path, monkeypatch, "framework_agent", agent)
    with serve() as (server, _):
        monkeypatch.setenv("FRAMEWORK_AGENT_BASE", server.base_url)
        import framework_agent  # type: ignore[import-not-found]

        trace_id = record(capture, cli, framework_agent.run, "Paris")
        assert server.paths() == ["/v1/chat/completions"]
    assert capture.last_bundle["llm"] == {}  # sent where no hook sees it
    status, _, err = cli(
        "cases", "promote", trace_id, "--name", "framework", "--entrypoint", "framework_agent:run"
    )
    assert status == 0, err

    for name in _entrypoints.API_KEY_VARIABLES:
        monkeypatch.delenv(name)
    with serve() as (server, _):
        monkeypatch.setenv("FRAMEWORK_AGENT_BASE", server.base_url)
        refused = f"strict replay refused a connection to 127.0.0.1:{server.port}"
        fails_naming(cli, monkeypatch, tmp_path, "framework_agent", agent, refused)
        assert server.requests == []
