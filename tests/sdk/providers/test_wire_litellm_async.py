"""litellm's async calls (sent by aiohttp, beneath litellm's httpx client), its Gemini models,
and a home-made aiohttp client, in one agent: recorded live at the HTTP client layer, replayed
by ``tracely replay`` with no server and no key, and refused, never sent, when the recording
lacks a call."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of prices at import

import litellm

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.cli._helpers import CLI, record
from tests.sdk.providers._helpers import closed_url, llm_spans
from tracely_sdk import _entrypoints, providers

litellm.suppress_debug_info = True

# One model per kind of call, so that a call the recording lacks is named by its own model.
KINDS = {
    "anthropic-async": "claude-3-5-haiku",
    "openai-async-stream": "gpt-4o",
    "gemini-async": "gemini-2.0-flash",
    "gemini-async-stream": "gemini-2.5-flash",
    "gemini-sync": "gemini-1.5-pro",
    "aiohttp-post": "gpt-4o-mini",
}
SENT_BY_AIOHTTP = {"anthropic-async", "openai-async-stream", "gemini-async", "gemini-async-stream"}

AGENT = """
import asyncio
import os

import aiohttp
import litellm

import tracely_sdk as tracely

litellm.suppress_debug_info = True


def user(question):
    return [{"role": "user", "content": question}]


async def anthropic_async(base, question):
    reply = await litellm.acompletion(
        model="anthropic/claude-3-5-haiku", messages=user(question), api_base=base
    )
    return reply.choices[0].message.content


async def openai_async_stream(base, question):
    stream = await litellm.acompletion(
        model="openai/gpt-4o", messages=user(question), api_base=base + "/v1", stream=True
    )
    return "".join([chunk.choices[0].delta.content or "" async for chunk in stream])


async def gemini_async(base, question):
    reply = await litellm.acompletion(
        model="gemini/gemini-2.0-flash", messages=user(question), api_base=base + "/v1beta"
    )
    return reply.choices[0].message.content


async def gemini_async_stream(base, question):
    stream = await litellm.acompletion(
        model="gemini/gemini-2.5-flash",
        messages=user(question),
        api_base=base + "/v1beta",
        stream=True,
    )
    return "".join([chunk.choices[0].delta.content or "" async for chunk in stream])


def gemini_sync(base, question):
    reply = litellm.completion(
        model="gemini/gemini-1.5-pro", messages=user(question), api_base=base + "/v1beta"
    )
    return reply.choices[0].message.content


async def aiohttp_post(base, question):
    body = {"model": "gpt-4o-mini", "messages": user(question)}
    async with aiohttp.ClientSession() as session:
        async with session.post(base + "/v1/chat/completions", json=body) as response:
            return (await response.json())["choices"][0]["message"]["content"]


def run(question):
    base = os.environ["AGENT_BASE"]
    with tracely.agent("litellm-agent", input=question) as agent_run:
        answers = []
        for kind in os.environ["AGENT_CALLS"].split(","):
            call = globals()[kind.replace("-", "_")]
            answer = call(base, question)
            answers.append(asyncio.run(answer) if asyncio.iscoroutine(answer) else answer)
        agent_run.output = " | ".join(answers)
        return agent_run.output
"""


@pytest.fixture
def sent_by_aiohttp(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths aiohttp's connector was asked to send a request to, from now on: which
    requests aiohttp itself carried (a layer above it may record them)."""
    paths: list[str] = []
    connect = aiohttp.BaseConnector.connect

    async def seen(self: Any, req: Any, *args: Any, **kwargs: Any) -> Any:
        paths.append(req.url.path)
        return await connect(self, req, *args, **kwargs)

    monkeypatch.setattr(aiohttp.BaseConnector, "connect", seen)
    return paths


@pytest.fixture
def project(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[CLI, Any]]:
    """The agent as a project's own module, the CLI on a store of its own, and API keys set
    for the live run only."""
    monkeypatch.setattr("tracely_sdk.cli._replay.init_tracing", lambda: None)
    monkeypatch.delenv("TRACELY_STORE", raising=False)
    cli = CLI(capsys, f"sqlite:///{(tmp_path / 'tracely.db').as_posix().lstrip('/')}")
    (tmp_path / "litellm_async_agent.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for name in _entrypoints.API_KEY_VARIABLES:
        monkeypatch.setenv(name, "test-key")
    names = providers.instrument("auto")
    assert {"httpx.AsyncClient.send", "aiohttp.ClientSession._request"} <= set(names)
    import litellm_async_agent  # type: ignore[import-not-found]

    try:
        yield cli, litellm_async_agent
    finally:
        providers.uninstrument()
        sys.modules.pop("litellm_async_agent", None)


def _replay_case(
    cli: CLI, trace_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    for name in _entrypoints.API_KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    status, _, err = cli(
        "cases",
        "promote",
        trace_id,
        "--name",
        "litellm async",
        "--entrypoint",
        "litellm_async_agent:run",
    )
    assert status == 0, err
    report = tmp_path / "report.json"
    cli("replay", "--json", str(report))
    (case,) = json.loads(report.read_text())["cases"]
    return dict(case)


def test_every_kind_of_call_is_recorded_once_and_replays_pass_with_no_server_and_no_key(
    capture: Any,
    project: tuple[CLI, Any],
    sent_by_aiohttp: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cli, agent = project
    monkeypatch.setenv("AGENT_CALLS", ",".join(KINDS))
    with serve() as (server, _):
        monkeypatch.setenv("AGENT_BASE", server.base_url)
        trace_id = record(capture, cli, agent.run, "Paris weather?")
        assert len(server.requests) == len(KINDS)
    assert capture.last_bundle["agent"]["output"] == " | ".join(["You said: Paris weather?"] * 6)

    # aiohttp carried litellm's async requests and the home-made client's; httpx the sync one
    targets = {kind: request.path for kind, request in zip(KINDS, server.requests, strict=True)}
    assert targets["gemini-async-stream"].endswith(":streamGenerateContent?alt=sse")
    paths = {kind: target.split("?")[0] for kind, target in targets.items()}
    assert sorted(sent_by_aiohttp) == sorted(
        paths[kind] for kind in KINDS if kind in SENT_BY_AIOHTTP | {"aiohttp-post"}
    )
    assert paths["gemini-sync"] not in sent_by_aiohttp

    bundle = capture.last_bundle
    providers_of = {
        model: [e["provider"] for e in bundle["llm"][model]] for model in KINDS.values()
    }
    # Recorded once each, by the outermost client library that saw the request.
    assert providers_of == {
        "claude-3-5-haiku": ["httpx.AsyncClient.send"],
        "gpt-4o": ["httpx.AsyncClient.send"],
        "gemini-2.0-flash": ["httpx.AsyncClient.send"],
        "gemini-2.5-flash": ["httpx.AsyncClient.send"],
        "gemini-1.5-pro": ["httpx.Client.send"],
        "gpt-4o-mini": ["aiohttp.ClientSession._request"],
    }
    assert len(llm_spans(capture)) == len(KINDS)
    gemini = {s.name: s.attributes for s in llm_spans(capture)}["chat gemini-2.5-flash"]
    assert gemini["gen_ai.provider.name"] == "gcp.gemini"
    assert gemini["gen_ai.request.stream"] is True

    monkeypatch.setenv("AGENT_BASE", closed_url())
    case = _replay_case(cli, trace_id, tmp_path, monkeypatch)
    assert case["verdict"] == "PASS", case


@pytest.mark.parametrize("missing", list(KINDS))
def test_a_call_the_recording_lacks_is_refused_with_the_server_up_and_the_case_is_not_pass(
    capture: Any,
    project: tuple[CLI, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    missing: str,
) -> None:
    cli, agent = project
    others = [kind for kind in KINDS if kind != missing]
    with serve() as (server, _):
        monkeypatch.setenv("AGENT_BASE", server.base_url)
        monkeypatch.setenv("AGENT_CALLS", ",".join(others))
        trace_id = record(capture, cli, agent.run, "Paris weather?")
        recorded = len(server.requests)
        # The agent now makes the call last, with the server up: the recording cannot answer it.
        monkeypatch.setenv("AGENT_CALLS", ",".join([*others, missing]))
        case = _replay_case(cli, trace_id, tmp_path, monkeypatch)
        assert len(server.requests) == recorded  # nothing reached the server
    assert case["verdict"] == "INCOMPLETE", case
    refused = f"no recorded call for llm:{KINDS[missing]}"
    assert any(refused in reason for reason in case["reasons"]), case["reasons"]


def test_litellm_recorded_by_aiohttp_alone_is_read_through_its_transport_and_served(
    capture: Any, sent_by_aiohttp: list[str]
) -> None:
    """Only aiohttp instrumented: litellm's transport reads the teed ``content`` live, and the
    recording (the same shape whichever client made it) is served on replay."""

    async def ask(base: str) -> list[str | None]:
        key = {"api_key": "test-key", "api_base": base + "/v1beta"}
        messages = [{"role": "user", "content": "Hello there"}]
        reply = await litellm.acompletion(model="gemini/gemini-2.0-flash", messages=messages, **key)
        stream = await litellm.acompletion(
            model="gemini/gemini-2.0-flash", messages=messages, stream=True, **key
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream])
        return [reply.choices[0].message.content, streamed]

    providers.instrument("aiohttp")
    try:
        with serve() as (server, _), tracely.agent("agent", input="q"):
            live = asyncio.run(ask(server.base_url))
        assert live == ["You said: Hello there"] * 2
        assert len(sent_by_aiohttp) == 2
        bundle = json.loads(json.dumps(capture.last_bundle))
        entries = bundle["llm"]["gemini-2.0-flash"]
        assert [e["provider"] for e in entries] == ["aiohttp.ClientSession._request"] * 2
        assert entries[1]["output"]["events"][-1]["data"]["candidates"][0]["finishReason"] == "STOP"
        with tracely.fixtures(bundle) as rep, tracely.agent("agent", input="q"):
            replayed = asyncio.run(ask(closed_url()))
        assert replayed == live
        assert rep.served == ["llm:gemini-2.0-flash"] * 2 and rep.clean
    finally:
        providers.uninstrument("aiohttp")
