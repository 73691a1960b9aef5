"""llama-index, through the integrations that install beside the OpenAI SDK 3.x tracely is tested
with: ``llama_index.llms.ollama.Ollama`` driving llama-index's own ``FunctionAgent`` tool loop
(ollama's async httpx client), and ``llama_index.llms.litellm.LiteLLM`` (litellm, httpx). The
agent is recorded live at the HTTP client, promoted, and replayed by ``tracely replay`` with no
key and the server stopped; with the server up, a call the recording lacks is never PASS and
never reaches the server. (``llama-index-llms-openai`` requires ``openai<3``;
``llama-index-llms-anthropic`` 0.12 builds ``anthropic.types.MessageParam``, a Union in the
anthropic SDK 2.17, and fails before it sends.)"""

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

AGENT = """
import asyncio
import os

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms import ChatMessage
from llama_index.core.tools import FunctionTool
from llama_index.llms.litellm import LiteLLM
from llama_index.llms.ollama import Ollama

import tracely_sdk as tracely

BASE = os.environ["LLAMA_AGENT_BASE"]


def get_weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    return f"sunny in {city}"


# context_window given: else llama-index asks the server (POST /api/show) before any chat
local = Ollama(model="llama3.2", base_url=BASE, request_timeout=10, context_window=8192)
agent = FunctionAgent(tools=[FunctionTool.from_defaults(get_weather)], llm=local)
# its key from ANTHROPIC_API_KEY, read by litellm when it sends
writer = LiteLLM(model="anthropic/claude-haiku-4-5", api_base=BASE, max_retries=0)


async def find(city):
    return await agent.run(user_msg=f"What is the weather in {city}?")


def summarise(text):
    return writer.chat([ChatMessage(role="user", content=text)]).message.content


def run(city):
    with tracely.agent("llama", input=city) as agent_run:
        found = asyncio.run(find(city))
        agent_run.output = [str(found), summarise(str(found))]
        return agent_run.output
"""

OLLAMA, CLAUDE = "llama3.2", "claude-haiku-4-5"


instrumented = instrumented_fixture("auto")


def test_a_llama_index_agent_records_live_replays_with_no_server_and_no_key_and_never_goes_live(
    capture: Any,
    instrumented: None,
    cli: CLI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("llama_index.llms.ollama")
    pytest.importorskip("llama_index.llms.litellm")
    agent_project(tmp_path, monkeypatch, "llama_agent", AGENT)
    with serve() as (server, _):
        monkeypatch.setenv("LLAMA_AGENT_BASE", server.base_url)
        import llama_agent  # type: ignore[import-not-found]

        trace_id = record(capture, cli, llama_agent.run, "Paris")
        assert server.paths() == ["/api/chat", "/api/chat", "/v1/messages"]
    live = capture.last_bundle
    assert {name: [e["provider"] for e in entries] for name, entries in live["llm"].items()} == {
        OLLAMA: ["httpx.AsyncClient.send"] * 2,  # the tool call asked for, then the answer
        CLAUDE: ["httpx.Client.send"],
    }
    # No key, no server: the models are built again at import.
    case = replayed_offline(cli, monkeypatch, tmp_path, trace_id, "llama_agent", AGENT)
    assert case["served"] == [f"llm:{OLLAMA}", f"llm:{OLLAMA}", f"llm:{CLAUDE}"]
    assert case["unused"] == []
    assert case["output"] == [  # the stand-in's answers, replayed
        "According to get_weather: sunny in Paris",
        "You said: According to get_weather: sunny in Paris",
    ]

    with serve() as (server, _):
        monkeypatch.setenv("LLAMA_AGENT_BASE", server.base_url)
        # A model call the recording lacks: refused at the client, never sent.
        twice = AGENT.replace(
            "        return agent_run.output",
            "        summarise('once more')\n        return agent_run.output",
        )
        missing = f"no recorded call for llm:{CLAUDE}"
        fails_naming(cli, monkeypatch, tmp_path, "llama_agent", twice, missing)
        # Any other request the recording cannot answer: its connection refused by the guard.
        asks = AGENT.replace("context_window=8192", "context_window=-1")
        refused = f"strict replay refused a connection to 127.0.0.1:{server.port}"
        fails_naming(cli, monkeypatch, tmp_path, "llama_agent", asks, refused)
        assert server.requests == []  # nothing reached the live server
