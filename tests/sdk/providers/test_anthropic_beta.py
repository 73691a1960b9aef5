"""``client.beta.messages``: recorded like ``messages``, served as the SDK's beta types.

Recorded live against the local stand-in of the API, replayed with the server gone (a closed
port), as the other provider tests do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.types import Message
from anthropic.types.beta import BetaMessage
from anthropic.types.beta.parsed_beta_message import ParsedBetaMessage
from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.providers._helpers import (
    Weather,
    closed_url,
    instrumented_fixture,
    replays_the_story,
    run,
    same,
    user,
)

MODEL = "claude-sonnet-4-5"


def _send(client_cls: Any) -> str:
    """The client method a call of ``client_cls`` is recorded at (the SDK's HTTP client's)."""
    return (
        "httpx2.AsyncClient.send"
        if client_cls is anthropic.AsyncAnthropic
        else "httpx2.Client.send"
    )


Scenario = Callable[[Any], Any]


instrumented = instrumented_fixture("anthropic")


def record(capture: Any, scenario: Scenario, client_cls: Any) -> tuple[Any, dict[str, Any]]:
    with serve() as (server, _):
        client = client_cls(api_key="test-key", base_url=server.anthropic_base_url, max_retries=0)
        with tracely.agent("agent", input="q"):
            value = run(scenario(client))
    return value, json.loads(json.dumps(capture.last_bundle))


def replay(bundle: Any, scenario: Scenario, client_cls: Any) -> tuple[Any, tracely.ReplayReport]:
    client = client_cls(api_key="test-key", base_url=closed_url(), max_retries=0)
    with tracely.fixtures(bundle) as rep:
        value = run(scenario(client))
    return value, rep


def _create(client: Any, text: str = "Hello there", **kwargs: Any) -> Any:
    return client.beta.messages.create(
        model=MODEL, max_tokens=256, messages=user(text), betas=["context-1m-2025-08-07"], **kwargs
    )


CLIENTS = [anthropic.Anthropic, anthropic.AsyncAnthropic]


@pytest.mark.parametrize("client_cls", CLIENTS)
def test_a_beta_message_is_recorded_like_a_message_and_served_as_a_beta_message(
    capture: Any, instrumented: None, client_cls: Any
) -> None:
    live, bundle = record(capture, _create, client_cls)
    assert isinstance(live, BetaMessage)
    (entry,) = bundle["llm"][MODEL]
    assert entry["output_type"] == "http.response"
    assert entry["provider"] == _send(client_cls)
    assert entry["input"]["body"]["messages"] == user("Hello there")
    replayed, rep = replay(bundle, _create, client_cls)
    assert type(replayed) is BetaMessage
    same(replayed, live)
    assert replayed._request_id == live._request_id
    assert rep.clean
    # The wire format is one: the same recording serves the plain surface its own type.
    plain, rep = replay(
        bundle,
        lambda c: c.messages.create(model=MODEL, max_tokens=256, messages=user("Hello there")),
        client_cls,
    )
    assert type(plain) is Message and plain.content[0].text == replayed.content[0].text
    assert rep.clean


def _stream_events(client: Any) -> Any:
    if isinstance(client, anthropic.AsyncAnthropic):

        async def read() -> list[Any]:
            stream = await _create(client, "Stream this", stream=True)
            return [event async for event in stream]

        return read()
    return list(_create(client, "Stream this", stream=True))


@pytest.mark.parametrize("client_cls", CLIENTS)
def test_a_beta_stream_replays_as_the_sdks_stream_of_beta_events(
    capture: Any, instrumented: None, client_cls: Any
) -> None:
    live, bundle = record(capture, _stream_events, client_cls)
    (entry,) = bundle["llm"][MODEL]
    assert entry["output_type"] == "http.response" and entry["output"]["events"]
    replayed, rep = replay(bundle, _stream_events, client_cls)
    assert [type(e) for e in replayed] == [type(e) for e in live]
    assert all(type(e).__name__.startswith("Beta") for e in replayed)
    assert [e.to_dict() for e in replayed] == [e.to_dict() for e in live]
    assert rep.clean


def _stream_helper(client: Any) -> Any:
    manager = client.beta.messages.stream(
        model=MODEL, max_tokens=256, messages=user("Stream helper")
    )
    if isinstance(client, anthropic.AsyncAnthropic):

        async def read() -> tuple[str, Any]:
            async with manager as stream:
                text = "".join([t async for t in stream.text_stream])
                return text, await stream.get_final_message()

        return read()
    with manager as stream:
        return "".join(stream.text_stream), stream.get_final_message()


@pytest.mark.parametrize("client_cls", CLIENTS)
def test_the_beta_stream_helper_replays_text_stream_and_final_message(
    capture: Any, instrumented: None, client_cls: Any
) -> None:
    (text, final), bundle = record(capture, _stream_helper, client_cls)
    assert text == "You said: Stream helper"
    (entry,) = bundle["llm"][MODEL]
    assert entry["provider"] == _send(client_cls)
    (replayed_text, replayed_final), rep = replay(bundle, _stream_helper, client_cls)
    assert replayed_text == text
    assert isinstance(replayed_final, BetaMessage)
    same(replayed_final, final)
    assert rep.clean


def _parse(client: Any) -> Any:
    return client.beta.messages.parse(
        model=MODEL, max_tokens=256, messages=user("weather as json"), output_format=Weather
    )


def test_beta_parse_replays_the_parsed_beta_message(capture: Any, instrumented: None) -> None:
    live, bundle = record(capture, _parse, anthropic.Anthropic)
    (entry,) = bundle["llm"][MODEL]
    assert entry["input"]["body"]["output_config"]["format"]["type"] == "json_schema"
    replayed, rep = replay(bundle, _parse, anthropic.Anthropic)
    assert isinstance(replayed, ParsedBetaMessage)
    assert replayed.parsed_output == live.parsed_output
    assert isinstance(replayed.parsed_output, Weather)
    assert rep.clean


def test_beta_with_raw_response_is_served(capture: Any, instrumented: None) -> None:
    def raw(client: Any) -> Any:
        return client.beta.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, messages=user("raw")
        )

    live, bundle = record(capture, raw, anthropic.Anthropic)
    replayed, rep = replay(bundle, raw, anthropic.Anthropic)
    assert type(replayed.parse()) is BetaMessage
    same(replayed.parse(), live.parse())
    assert rep.clean


@pytest.mark.parametrize("client_cls", CLIENTS)
def test_a_recorded_beta_error_replays_as_the_sdks_exception(
    capture: Any, instrumented: None, client_cls: Any
) -> None:
    def scenario(client: Any) -> Any:
        async def acall() -> Any:
            try:
                await _create(client, "x", extra_headers={"x-test-fault": "429"})
            except anthropic.APIStatusError as exc:
                return exc
            raise AssertionError("no error")

        if isinstance(client, anthropic.AsyncAnthropic):
            return acall()
        try:
            _create(client, "x", extra_headers={"x-test-fault": "429"})
        except anthropic.APIStatusError as exc:
            return exc
        raise AssertionError("no error")

    live, bundle = record(capture, scenario, client_cls)
    assert type(live) is anthropic.RateLimitError
    replayed, rep = replay(bundle, scenario, client_cls)
    assert type(replayed) is anthropic.RateLimitError
    assert (str(replayed), replayed.status_code, replayed.body) == (
        str(live),
        live.status_code,
        live.body,
    )
    assert rep.clean


def test_a_changed_prompt_diverges_and_an_extra_call_is_refused(
    capture: Any, instrumented: None
) -> None:
    _, bundle = record(capture, lambda c: _create(c, "the prompt"), anthropic.Anthropic)
    _, rep = replay(bundle, lambda c: _create(c, "a changed prompt"), anthropic.Anthropic)
    assert rep.diverged == [f"llm:{MODEL}"]
    client = anthropic.Anthropic(api_key="test-key", base_url=closed_url(), max_retries=0)
    with tracely.fixtures(bundle) as rep:
        _create(client, "the prompt")
        # Refused at the client: the SDK wraps the ReplayError in its own connection error.
        with pytest.raises(anthropic.APIConnectionError) as miss:
            _create(client, "one call too many")
    assert isinstance(miss.value.__cause__, tracely.ReplayError)
    assert f"llm:{MODEL}" in str(miss.value.__cause__)


def test_count_tokens_stays_refused_under_recorded_replay() -> None:
    client = anthropic.Anthropic(api_key="test-key", base_url=closed_url(), max_retries=0)
    with tracely.fixtures({"llm": {MODEL: [{"output": "Hello"}]}}) as rep:
        for count in (client.messages.count_tokens, client.beta.messages.count_tokens):
            # not a model call: refused by the network guard, which the SDK wraps in its own error
            with pytest.raises(anthropic.APIConnectionError):
                count(model=MODEL, messages=user("hi"))
        # served: the beta surface sends through the same client
        assert _create(client).content[0].text == "Hello"
    assert len(rep.errors) == 2
    assert all("strict replay refused a connection" in str(e) for e in rep.errors)
    assert "httpx2.Client.send" in rep.providers


@pytest.mark.parametrize("surface", ["messages", "beta"])
def test_a_call_the_sdk_refuses_unstreamed_raises_the_sdks_error_in_replay(
    surface: str,
) -> None:
    client = anthropic.Anthropic(api_key="test-key", base_url=closed_url(), max_retries=0)
    messages = client.messages if surface == "messages" else client.beta.messages
    with tracely.fixtures({"llm": {MODEL: [{"output": "Hello"}]}}) as rep:
        with pytest.raises(ValueError, match="Streaming is required"):
            messages.create(model=MODEL, max_tokens=1_000_000, messages=user("hi"))
        # the recorded call is still there for the streamed retry
        assert messages.create(model=MODEL, max_tokens=64, messages=user("hi")).content
    assert rep.errors == [] and rep.clean


# --------------------------------------------------------------------------- pydantic-ai


def _agent_for(base_url: str) -> Agent[None, str]:
    client = anthropic.AsyncAnthropic(api_key="test-key", base_url=base_url, max_retries=0)
    model = AnthropicModel(MODEL, provider=AnthropicProvider(anthropic_client=client))
    return Agent(model)


def _ask(base_url: str, question: str, *, twice: bool = False) -> str:
    with tracely.agent("pydantic-ai", input=question) as agent_run:
        agent = _agent_for(base_url)
        answer = agent.run_sync(question).output
        if twice:
            answer = agent.run_sync(question + " again").output
        agent_run.output = answer
    return answer


def test_a_pydantic_ai_anthropic_agent_records_promotes_and_replays(
    capture: Any, instrumented: None, tmp_path: Path
) -> None:
    with serve() as (server, _):
        live = _ask(server.anthropic_base_url, "Paris weather?")
        # pydantic-ai calls the beta surface, streamed, even from run_sync
        assert [r.path for r in server.requests] == ["/v1/messages"]
    assert live == "You said: Paris weather?"
    bundle = capture.last_bundle
    (entry,) = bundle["llm"][MODEL]
    assert entry["provider"] == "httpx2.AsyncClient.send"
    assert entry["output_type"] == "http.response" and entry["output"]["events"]
    replays_the_story(bundle, tmp_path, _ask, f"llm:{MODEL}")
