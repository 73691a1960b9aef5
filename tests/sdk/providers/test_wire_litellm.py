"""litellm, which tracely does not patch, recorded and replayed at the HTTP client beneath it:
``openai/...`` (through the OpenAI SDK's ``client.post``) and ``anthropic/...`` (its own
httpx calls), plain, async and streamed."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of prices at import

import litellm

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.cli._helpers import CLI, record
from tests.sdk.providers._helpers import closed_url, llm_spans
from tracely_sdk import _entrypoints, providers

litellm.suppress_debug_info = True

GPT = "gpt-4o"
CLAUDE = "claude-3-5-haiku"


@pytest.fixture
def instrumented() -> Iterator[None]:
    names = providers.instrument("auto")
    assert "httpx.Client.send" in names
    yield
    providers.uninstrument()


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def ask_all(base: str, question: str) -> list[str | None]:
    """Every way litellm is asked here: sync, async and streamed, OpenAI and Anthropic."""
    key = {"api_key": "test-key"}
    openai_base, anthropic_base = f"{base}/v1", base
    answers: list[str | None] = []
    for model, api_base in (
        (f"openai/{GPT}", openai_base),
        (f"anthropic/{CLAUDE}", anthropic_base),
    ):
        reply = litellm.completion(model=model, messages=user(question), api_base=api_base, **key)
        answers.append(reply.choices[0].message.content)
        stream = litellm.completion(
            model=model, messages=user(question), api_base=api_base, stream=True, **key
        )
        answers.append("".join(chunk.choices[0].delta.content or "" for chunk in stream))

    async def both() -> list[str | None]:
        out: list[str | None] = []
        for model, api_base in (
            (f"openai/{GPT}", openai_base),
            (f"anthropic/{CLAUDE}", anthropic_base),
        ):
            reply = await litellm.acompletion(
                model=model, messages=user(question), api_base=api_base, **key
            )
            out.append(reply.choices[0].message.content)
        stream = await litellm.acompletion(
            model=f"openai/{GPT}", messages=user(question), api_base=openai_base, stream=True, **key
        )
        out.append("".join([chunk.choices[0].delta.content or "" async for chunk in stream]))
        return out

    return answers + asyncio.run(both())


def test_litellm_calls_are_recorded_at_the_client_and_replayed_without_the_server(
    capture: Any, instrumented: None
) -> None:
    with serve() as (server, _):
        with tracely.agent("agent", input="q"):
            live = ask_all(server.base_url, "Hello there")
        assert len(server.requests) == 7
    assert live == ["You said: Hello there"] * 7
    bundle = json.loads(json.dumps(capture.last_bundle))
    assert {
        model: [e["provider"] for e in entries] for model, entries in bundle["llm"].items()
    } == {
        GPT: ["httpx.Client.send", "httpx.Client.send", "httpx.AsyncClient.send"] * 1
        + ["httpx.AsyncClient.send"],
        CLAUDE: ["httpx.Client.send", "httpx.Client.send", "httpx.AsyncClient.send"],
    }
    assert len(llm_spans(capture)) == 7  # one span per call, whatever layers saw it
    first = bundle["llm"][GPT][0]
    assert first["input"]["path"] == "/v1/chat/completions"
    assert first["input"]["body"]["messages"] == user("Hello there")
    assert first["output"]["body"]["choices"][0]["message"]["content"] == "You said: Hello there"
    streamed = bundle["llm"][CLAUDE][1]
    assert streamed["input"]["body"]["stream"] is True
    assert streamed["output"]["events"][0]["event"] == "message_start"

    with tracely.fixtures(bundle) as rep, tracely.agent("agent", input="q"):
        replayed = ask_all(closed_url(), "Hello there")
    assert replayed == live
    assert len(rep.served) == 7 and rep.clean, (rep.errors, rep.divergences)


def test_a_litellm_call_the_recording_lacks_raises_and_a_changed_prompt_diverges(
    capture: Any, instrumented: None
) -> None:
    def ask(base: str, text: str) -> Any:
        return litellm.completion(
            model=f"anthropic/{CLAUDE}", messages=user(text), api_base=base, api_key="k"
        )

    with serve() as (server, _), tracely.agent("agent", input="q"):
        live = ask(server.base_url, "Hello").choices[0].message.content
    bundle = json.loads(json.dumps(capture.last_bundle))
    with tracely.fixtures(bundle) as rep:
        assert ask(closed_url(), "Hello, changed").choices[0].message.content == live
        # litellm wraps whatever its client raises in its own error; the miss is still raised
        # at the client (never a live call) and the report holds it.
        with pytest.raises(Exception, match=f"no recorded call for llm:{CLAUDE}") as raised:
            ask(closed_url(), "once more")
    assert rep.diverged == [f"llm:{CLAUDE}"]
    (miss,) = rep.errors
    assert isinstance(miss, tracely.ReplayError) and miss.label == f"llm:{CLAUDE}"
    chain = []
    error: BaseException | None = raised.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert miss in chain


AGENT = """
import os

import litellm

import tracely_sdk as tracely

litellm.suppress_debug_info = True


def run(question):
    base = os.environ["LITELLM_AGENT_BASE"]
    with tracely.agent("litellm-agent", input=question) as agent_run:
        plan = litellm.completion(
            model="anthropic/claude-3-5-haiku",
            messages=[{"role": "user", "content": question}],
            api_base=base,
        ).choices[0].message.content
        stream = litellm.completion(
            model="openai/gpt-4o",
            messages=[{"role": "user", "content": plan}],
            api_base=base + "/v1",
            stream=True,
        )
        agent_run.output = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
        return agent_run.output
"""


def test_tracely_replay_runs_a_litellm_agent_with_no_server_and_no_key(
    capture: Any,
    instrumented: None,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("tracely_sdk.cli._replay.init_tracing", lambda: None)
    monkeypatch.delenv("TRACELY_STORE", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    cli = CLI(capsys, f"sqlite:///{(tmp_path / 'tracely.db').as_posix().lstrip('/')}")
    (tmp_path / "litellm_agent.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # the project: its own modules may be replayed
    for name in _entrypoints.API_KEY_VARIABLES:
        monkeypatch.setenv(name, "test-key")
    import litellm_agent  # type: ignore[import-not-found]

    with serve() as (server, _):
        monkeypatch.setenv("LITELLM_AGENT_BASE", server.base_url)
        trace_id = record(capture, cli, litellm_agent.run, "Paris weather?")
    assert litellm_agent.run.__module__ == "litellm_agent"
    for name in _entrypoints.API_KEY_VARIABLES:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LITELLM_AGENT_BASE", closed_url())
    status, _, err = cli(
        "cases", "promote", trace_id, "--name", "litellm", "--entrypoint", "litellm_agent:run"
    )
    assert status == 0, err
    report = tmp_path / "report.json"
    status, out, err = cli("replay", "--json", str(report))
    assert status == 0, out + err
    (case,) = json.loads(report.read_text())["cases"]
    assert case["verdict"] == "PASS"
    assert os.environ["OPENAI_API_KEY"] == _entrypoints.PLACEHOLDER_API_KEY

    # The same case with the agent's prompt changed is served, and fails on the divergence.
    monkeypatch.setattr(litellm_agent, "run", lambda q: None)
    changed = AGENT.replace('"content": question}', '"content": question + " Be brief."}')
    (tmp_path / "litellm_agent.py").write_text(changed)
    monkeypatch.delitem(__import__("sys").modules, "litellm_agent")
    status, out, _ = cli("replay", "--json", str(report))
    assert status == 1
    (case,) = json.loads(report.read_text())["cases"]
    assert case["verdict"] == "FAIL" and case["diverged"] == [f"llm:{CLAUDE}"]


def test_entries_written_by_hand_or_recorded_by_the_sdk_are_served_at_the_client(
    capture: Any, instrumented: None
) -> None:
    openai_sdk = __import__("openai")
    with serve() as (server, _):
        client = openai_sdk.OpenAI(api_key="k", base_url=f"{server.base_url}/v1", max_retries=0)
        with tracely.agent("agent", input="q"):
            live = client.chat.completions.create(model=GPT, messages=user("Hello"))
    (recorded,) = capture.last_bundle["llm"][GPT]
    assert recorded["provider"] == "httpx2.Client.send"  # the OpenAI SDK's own client
    bundle = {
        "llm": {
            GPT: [recorded, {"output": "Streamed by hand", "usage": [3, 3]}],
            CLAUDE: [{"output": "Written by hand"}, {"output": "Streamed too"}],
        }
    }
    base = closed_url()
    url = f"{base}/v1/chat/completions"
    with tracely.fixtures(bundle) as rep:
        plain = httpx.post(url, json={"model": GPT, "messages": user("Hello")}).json()
        body = {"model": GPT, "messages": user("Hi"), "stream": True}
        with httpx.stream("POST", url, json=body) as response:
            lines = [line for line in response.iter_lines() if line.startswith("data: {")]
        streamed = "".join(
            json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
            for line in lines
            if json.loads(line[6:])["choices"]
        )
        claude = litellm.completion(
            model=f"anthropic/{CLAUDE}", messages=user("Hi"), api_base=base, api_key="k"
        )
        claude_stream = litellm.completion(
            model=f"anthropic/{CLAUDE}",
            messages=user("Hi"),
            api_base=base,
            api_key="k",
            stream=True,
        )
        claude_streamed = "".join(c.choices[0].delta.content or "" for c in claude_stream)
    assert plain == live.model_dump(mode="json", exclude_unset=True)
    assert streamed == "Streamed by hand"
    assert claude.choices[0].message.content == "Written by hand"
    assert claude_streamed == "Streamed too"
    assert len(rep.served) == 4 and not rep.errors


def test_litellms_openai_models_sent_through_the_sdks_client_post_are_served_at_the_client(
    instrumented: None,
) -> None:
    # litellm sends openai/... models with the OpenAI SDK's generic client.post, not create:
    # served where every OpenAI call is, at the HTTP client beneath the SDK.
    bundle = {"llm": {GPT: [{"output": "Hello"}]}}
    with tracely.fixtures(bundle) as rep:
        answer = litellm.completion(
            model=f"openai/{GPT}", messages=user("Hi"), api_base=closed_url("/v1"), api_key="k"
        )
    assert answer.choices[0].message.content == "Hello"
    assert rep.served == [f"llm:{GPT}"] and not rep.errors
