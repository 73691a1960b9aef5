"""Provider SDKs that tracely does not patch, whose model calls the HTTP client layer records
and serves: groq (httpx) and mistralai (httpx2) through the OpenAI-compatible chat completions
format, cohere (httpx, Cohere v2 chat) and ollama (httpx, its native API). An agent using all
four is recorded live, promoted, and replayed by ``tracely replay`` with its clients built at
import with no key and the server stopped; with the server up, a call the recording lacks is
never PASS and never reaches the server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from examples.llm_server import serve
from tests.sdk.cli._helpers import CLI, record
from tests.sdk.providers._helpers import (
    agent_project,
    fails_naming,
    instrumented_fixture,
    replayed_offline,
)
from tracely_sdk import _entrypoints

AGENT = """
import os

import cohere
import groq
import ollama
from mistralai.client import Mistral

import tracely_sdk as tracely

# built at import, each wanting a key from the environment (but ollama's)
BASE = os.environ["CLIENTS_AGENT_BASE"]
groq_client = groq.Groq(base_url=BASE, max_retries=0)
mistral_client = Mistral(server_url=BASE)
cohere_client = cohere.ClientV2(base_url=BASE)
ollama_client = ollama.Client(host=BASE)


def run(city):
    question = [{"role": "user", "content": f"Weather in {city}?"}]
    with tracely.agent("clients", input=city) as agent_run:
        groq_reply = groq_client.chat.completions.create(model="llama-3.3-70b", messages=question)
        mistral_stream = mistral_client.chat.stream(model="mistral-small-latest", messages=question)
        cohere_reply = cohere_client.chat(model="command-a-03-2025", messages=question)
        ollama_stream = ollama_client.chat("llama3.2", messages=question, stream=True)
        agent_run.output = [
            groq_reply.choices[0].message.content,
            "".join(chunk.data.choices[0].delta.content or "" for chunk in mistral_stream),
            cohere_reply.message.content[0].text,
            "".join(part.message.content for part in ollama_stream),
        ]
        return agent_run.output
"""

LABELS = ["llama-3.3-70b", "mistral-small-latest", "command-a-03-2025", "llama3.2"]


instrumented = instrumented_fixture("auto")


def test_groq_mistral_cohere_and_ollama_replay_with_no_server_and_no_key_and_never_go_live(
    capture: Any,
    instrumented: None,
    cli: CLI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent_project(tmp_path, monkeypatch, "clients_agent", AGENT)
    with serve() as (server, _):
        monkeypatch.setenv("CLIENTS_AGENT_BASE", server.base_url)
        import clients_agent  # type: ignore[import-not-found]

        trace_id = record(capture, cli, clients_agent.run, "Paris")
        paths = ["/openai/v1/chat/completions", "/v1/chat/completions", "/v2/chat", "/api/chat"]
        assert server.paths() == paths
    bundle = capture.last_bundle
    assert {label: [e["provider"] for e in bundle["llm"][label]] for label in LABELS} == {
        "llama-3.3-70b": ["httpx.Client.send"],
        "mistral-small-latest": ["httpx2.Client.send"],
        "command-a-03-2025": ["httpx.Client.send"],
        "llama3.2": ["httpx.Client.send"],
    }
    # No key, no server: the clients are built again at import with placeholder keys.
    replayed_offline(cli, monkeypatch, tmp_path, trace_id, "clients_agent", AGENT)
    assert sys.modules["clients_agent"].groq_client.api_key == _entrypoints.PLACEHOLDER_API_KEY

    with serve() as (server, _):
        monkeypatch.setenv("CLIENTS_AGENT_BASE", server.base_url)
        # A model call the recording lacks: refused at the client, never sent.
        twice = AGENT.replace(
            "        return agent_run.output",
            "        groq_client.chat.completions.create(model='llama-3.3-70b', messages=question)\n"
            "        return agent_run.output",
        )
        refused = "no recorded call for llm:llama-3.3-70b"
        fails_naming(cli, monkeypatch, tmp_path, "clients_agent", twice, refused)
        # Any other request the recording cannot answer: its connection refused by the guard.
        listing = AGENT.replace(
            "        return agent_run.output",
            "        groq_client.models.list()\n        return agent_run.output",
        )
        refused = f"strict replay refused a connection to 127.0.0.1:{server.port}"
        fails_naming(cli, monkeypatch, tmp_path, "clients_agent", listing, refused)
        assert server.requests == []  # nothing reached the live server
