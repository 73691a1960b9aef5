"""What the provider tests share: a structured-output model, a message helper, a tool, a
comparison of replayed with live values, a port nothing listens on, a scenario recorded against
the local stand-in and replayed, and tracely's hooks stacked with another instrumentor's."""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import tracely_sdk as tracely
from examples.llm_server import serve
from tracely_sdk import ReplayReport, providers


class Weather(BaseModel):
    city: str
    temperature: int


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def same(replayed: Any, live: Any) -> None:
    """The replayed value is the live one's type and dumps the same."""
    assert type(replayed) is type(live)
    assert replayed.model_dump(warnings=False) == live.model_dump(warnings=False)


def closed_url(path: str = "") -> str:
    """A base URL on 127.0.0.1 where nothing listens: a call that reaches it fails."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
"""A tool in the chat-completions form, as the OpenAI-compatible clients send it."""


def record(capture: Any, scenario: Callable[[str], Any]) -> tuple[Any, dict[str, Any]]:
    """``scenario(base_url)`` run live against the local stand-in, in an agent span: its value
    and the recording made of it (through JSON, as a store would give it back)."""
    with serve() as (server, _), tracely.agent("agent", input="q"):
        value = scenario(server.base_url)
    return value, json.loads(json.dumps(capture.last_bundle))


def replay(bundle: Any, scenario: Callable[[str], Any]) -> tuple[Any, ReplayReport]:
    """``scenario`` replayed from ``bundle`` against a URL where nothing listens."""
    with tracely.fixtures(bundle) as rep, tracely.agent("agent", input="q"):
        value = scenario(closed_url())
    return value, rep


def run(value: Any) -> Any:
    """``value``, awaited first when it is a coroutine (an async client's call)."""
    return asyncio.run(value) if inspect.iscoroutine(value) else value


@contextmanager
def stacked_with(other: Any, provider: str, *, tracely_outermost: bool) -> Iterator[None]:
    """tracely's patches for ``provider`` and ``other`` instrumentor's, the outermost installed
    last; both removed last in first out, since OpenTelemetry's ``unwrap`` removes whatever
    wrapper is outermost."""
    steps = [
        (other.instrument, other.uninstrument),
        (lambda: providers.instrument(provider), lambda: providers.uninstrument(provider)),
    ]
    if not tracely_outermost:
        steps.reverse()
    with ExitStack() as stack:
        for install, remove in steps:
            install()
            stack.callback(remove)
        yield


def replays_the_story(bundle: dict[str, Any], path: Any, ask: Any, label: str) -> None:
    """The story every provider passes: the recorded trace promoted to a case replays with the
    provider gone (``ask(url, question, twice=False)`` against a closed port) as PASS; a changed
    prompt FAILs with the prompt in the diff; an extra call is INCOMPLETE."""
    from tracely_sdk._runner import FAIL, INCOMPLETE, PASS, load_cases, run_case
    from tracely_sdk.store import Recording, SQLiteStore

    store = SQLiteStore(path / "cases.db")
    try:
        store.put_recording(Recording.from_bundle(bundle))
        store.promote(bundle["trace_id"], name="Paris weather")
        (case,) = load_cases(store=store)
    finally:
        store.close()
    gone = closed_url()
    passed = run_case(case, lambda q: ask(gone, q))
    assert passed.verdict == PASS, passed.reasons
    changed = run_case(case, lambda q: ask(gone, q + " Answer briefly."))
    assert changed.verdict == FAIL
    assert changed.diverged == [label]
    (divergence,) = changed.divergences
    assert divergence["field"] == "input"
    assert any("Answer briefly." in str(d["actual"]) for d in divergence["differences"])
    extra = run_case(case, lambda q: ask(gone, q, twice=True))
    assert extra.verdict == INCOMPLETE
    assert extra.reasons[0].startswith(f"no recorded call for {label}")


@contextmanager
def capturing_content(monkeypatch: Any, provider: str) -> Iterator[None]:
    """``provider`` instrumented with message content captured (the GenAI conventions'
    opt-in variable), and both undone after."""
    from tracely_sdk.providers import _patching

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    providers.instrument(provider)
    try:
        yield
    finally:
        providers.uninstrument(provider)
        monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        _patching.refresh_settings()


def instrumented_fixture(provider: str | list[str]) -> Any:
    """A fixture that instruments ``provider`` (a name, ``"auto"`` or a list of names) for the
    test and uninstruments it after."""
    import pytest

    @pytest.fixture
    def instrumented() -> Iterator[None]:
        providers.instrument(provider)
        yield
        providers.uninstrument(provider)

    return instrumented


def agent_module(project: Path, monkeypatch: Any, name: str, source: str) -> None:
    """The agent's module ``name``, written in the project and not yet imported."""
    (project / f"{name}.py").write_text(source)
    monkeypatch.delitem(sys.modules, name, raising=False)


def bedrock(base: str) -> Any:
    """A bedrock-runtime client of the stand-in, with keys that no server checks."""
    import boto3
    import botocore.config

    return boto3.client(
        "bedrock-runtime",
        endpoint_url=base,
        region_name="us-east-1",
        aws_access_key_id="test-key",
        aws_secret_access_key="test-secret",
        config=botocore.config.Config(retries={"total_max_attempts": 1}),
    )


def replayed_offline(
    cli: Any, monkeypatch: Any, project: Path, trace_id: str, agent: str, source: str
) -> dict[str, Any]:
    """Promote ``trace_id`` as the case of ``agent``'s ``run`` and replay it with no key and no
    server (``AGENT_BASE`` a closed port), ``agent`` written again so that its clients are built
    again at import. The case, which passed."""
    from tests.sdk.cli._helpers import replayed
    from tracely_sdk import _entrypoints

    status, _, err = cli(
        "cases", "promote", trace_id, "--name", agent, "--entrypoint", f"{agent}:run"
    )
    assert status == 0, err
    for name in _entrypoints.API_KEY_VARIABLES:
        monkeypatch.delenv(name)
    monkeypatch.setenv(f"{agent.upper()}_BASE", closed_url())
    agent_module(project, monkeypatch, agent, source)
    case = replayed(cli, project / "report.json")
    assert case["verdict"] == "PASS", case
    return case


def fails_naming(
    cli: Any, monkeypatch: Any, project: Path, agent: str, source: str, reason: str
) -> None:
    """With ``agent`` written as ``source``, the promoted case's replay is not PASS and one of
    its reasons says ``reason``."""
    from tests.sdk.cli._helpers import replayed

    agent_module(project, monkeypatch, agent, source)
    case = replayed(cli, project / "report.json")
    assert case["verdict"] != "PASS"
    assert any(reason in r for r in case["reasons"]), case


def agent_project(project: Path, monkeypatch: Any, agent: str, source: str) -> None:
    """``project`` the working directory, on the path, with ``agent`` written in it as
    ``source``; every provider's key set to one the stand-in takes."""
    from tracely_sdk import _entrypoints

    monkeypatch.syspath_prepend(str(project))
    monkeypatch.chdir(project)  # the project: its own modules may be replayed
    agent_module(project, monkeypatch, agent, source)
    for name in _entrypoints.API_KEY_VARIABLES:
        monkeypatch.setenv(name, "test-key")


def llm_spans(capture: Any) -> list[Any]:
    """The captured spans of LLM calls."""
    return [s for s in capture.spans if s.attributes.get("tracely.kind") == "llm"]
