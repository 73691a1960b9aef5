"""Robustness runs of model calls: each fault served at the SDK's own HTTP client, as the wire
carries it, so the real OpenAI and Anthropic SDKs raise what they raise live.

Every agent is recorded live against the local stand-in model server; the derived runs never
reach it (``server.requests`` stays as the recording left it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import anthropic
import httpx
import httpx2
import openai
import pytest
import requests
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import RetryPolicy
from pydantic import SecretStr

import tracely_sdk as tracely
from examples.llm_server import LLMServer, serve
from tracely_sdk import providers
from tracely_sdk._faults import FaultConfig, derive
from tracely_sdk._replay import load_bundle
from tracely_sdk._robustness import derivation, run_derived
from tracely_sdk._runner import ReplayCase
from tracely_sdk.providers.http._faults import fault_entry

GPT = "gpt-4o"
CLAUDE = "claude-3-5-haiku"
QUESTION = "Tell me about Paris"
PATCHED = ["openai", "anthropic", "httpx", "httpx2"]


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    with serve() as (running, _):
        yield running


@pytest.fixture(autouse=True)
def instrumented() -> Iterator[None]:
    providers.instrument(PATCHED)
    yield
    providers.uninstrument(PATCHED)


# -- the agents ------------------------------------------------------------------------------


def ask_gpt(base_url: str, question: str, stream: bool = False, retries: int = 0) -> str:
    client = openai.OpenAI(api_key="test-key", base_url=base_url, max_retries=retries)
    with tracely.agent("ask-gpt", input=question) as run:
        messages: Any = [{"role": "user", "content": question}]
        if stream:
            parts = []
            for chunk in client.chat.completions.create(model=GPT, messages=messages, stream=True):
                parts.extend(c.delta.content or "" for c in chunk.choices)
            run.output = "".join(parts)
        else:
            reply = client.chat.completions.create(model=GPT, messages=messages)
            run.output = f"{reply.choices[0].finish_reason}: {reply.choices[0].message.content}"
    return str(run.output)


def ask_claude(base_url: str, question: str, stream: bool = False, retries: int = 0) -> str:
    client = anthropic.Anthropic(api_key="test-key", base_url=base_url, max_retries=retries)
    with tracely.agent("ask-claude", input=question) as run:
        messages: Any = [{"role": "user", "content": question}]
        if stream:
            parts = []
            with client.messages.stream(model=CLAUDE, max_tokens=64, messages=messages) as events:
                parts.extend(events.text_stream)
            run.output = "".join(parts)
        else:
            reply = client.messages.create(model=CLAUDE, max_tokens=64, messages=messages)
            text = "".join(b.text for b in reply.content if b.type == "text")
            run.output = f"{reply.stop_reason}: {text}"
    return str(run.output)


def recorded(capture: Any, agent: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    agent(*args, **kwargs)
    return dict(capture.last_bundle)


def derived(bundle: dict[str, Any], kind: str) -> Any:
    (run,) = derive(load_bundle(bundle), [kind], model_fault=fault_entry).runs
    return run


def robustness(
    bundle: dict[str, Any],
    agent: Any,
    kind: str,
    *args: Any,
    retry: str = "incomplete",
    max_calls: str | int = "2x",
    **kwargs: Any,
) -> dict[str, Any]:
    case = ReplayCase("c", "c", 1, None, {"args": list(args), "kwargs": kwargs}, None, bundle)
    config = FaultConfig(retry=retry, max_calls=max_calls)  # type: ignore[arg-type]
    return run_derived(case, agent, derived(bundle, kind), config)


# -- each fault, as the SDK raises it live ------------------------------------------------------


def test_a_rate_limit_is_the_sdks_own_rate_limit_error_and_never_reaches_the_network(
    capture: Any, server: LLMServer
) -> None:
    bundle = recorded(capture, ask_gpt, server.openai_base_url, QUESTION)
    seen = len(server.requests)
    with (
        tracely.fixtures(derived(bundle, "rate_limit").bundle),
        pytest.raises(openai.RateLimitError) as raised,
    ):
        ask_gpt(server.openai_base_url, QUESTION)
    assert raised.value.status_code == 429
    assert raised.value.code == "rate_limit_exceeded"
    assert raised.value.response.headers["retry-after-ms"] == "1"

    row = robustness(bundle, ask_gpt, "rate_limit", server.openai_base_url, QUESTION)
    assert row["verdict"] == "CRASHED"
    assert row["call"] == f"llm:{GPT} #1"
    assert row["error"]["type"] == "RateLimitError"
    assert len(server.requests) == seen  # served at the client, never the network


def test_anthropic_faults_are_anthropics_own_errors(capture: Any, server: LLMServer) -> None:
    bundle = recorded(capture, ask_claude, server.anthropic_base_url, QUESTION)
    with (
        tracely.fixtures(derived(bundle, "rate_limit").bundle),
        pytest.raises(anthropic.RateLimitError) as limited,
    ):
        ask_claude(server.anthropic_base_url, QUESTION)
    assert limited.value.status_code == 429
    assert limited.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]

    with (
        tracely.fixtures(derived(bundle, "server_error").bundle),
        pytest.raises(anthropic.InternalServerError) as overloaded,
    ):
        ask_claude(server.anthropic_base_url, QUESTION)
    assert overloaded.value.status_code == 529
    assert overloaded.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]

    with (
        tracely.fixtures(derived(bundle, "timeout").bundle),
        pytest.raises(anthropic.APITimeoutError),
    ):
        ask_claude(server.anthropic_base_url, QUESTION)

    with tracely.fixtures(derived(bundle, "refusal").bundle):
        assert ask_claude(server.anthropic_base_url, QUESTION) == "refusal: "


def test_openai_server_errors_timeouts_and_content_filters(capture: Any, server: LLMServer) -> None:
    bundle = recorded(capture, ask_gpt, server.openai_base_url, QUESTION)
    with (
        tracely.fixtures(derived(bundle, "server_error").bundle),
        pytest.raises(openai.InternalServerError) as failed,
    ):
        ask_gpt(server.openai_base_url, QUESTION)
    assert failed.value.status_code == 500

    with (
        tracely.fixtures(derived(bundle, "timeout").bundle),
        pytest.raises(openai.APITimeoutError) as timed_out,
    ):
        ask_gpt(server.openai_base_url, QUESTION)
    assert isinstance(timed_out.value.__cause__, httpx2.ReadTimeout)

    with tracely.fixtures(derived(bundle, "refusal").bundle):
        assert ask_gpt(server.openai_base_url, QUESTION) == "content_filter: "

    # The SDK's own parser refuses a content-filtered answer, as it does live.
    client = openai.OpenAI(api_key="test-key", base_url=server.openai_base_url, max_retries=0)
    messages: Any = [{"role": "user", "content": QUESTION}]
    with tracely.agent("parse", input=QUESTION):
        client.chat.completions.parse(model=GPT, messages=messages)
    parsed = dict(capture.last_bundle)
    with (
        tracely.fixtures(derived(parsed, "refusal").bundle),
        pytest.raises(openai.ContentFilterFinishReasonError),
    ):
        client.chat.completions.parse(model=GPT, messages=messages)


def cut_live(agent: Any, base_url: str, server: LLMServer) -> tuple[type, type, str]:
    """What the SDK raises when the server drops a stream midway: its exception, the cause."""
    server.fail_next("cut")
    with pytest.raises(Exception) as raised:
        agent(base_url, QUESTION, stream=True)
    cause = raised.value.__cause__
    assert cause is not None
    return type(raised.value), type(cause), str(cause)


@pytest.mark.parametrize(
    ("agent", "url"), [(ask_gpt, "openai_base_url"), (ask_claude, "anthropic_base_url")]
)
def test_a_cut_stream_raises_what_a_stream_the_server_drops_raises_live(
    capture: Any, server: LLMServer, agent: Any, url: str
) -> None:
    base_url = getattr(server, url)
    live = cut_live(agent, base_url, server)
    bundle = recorded(capture, agent, base_url, QUESTION, stream=True)
    run = derived(bundle, "stream_cut")
    with tracely.fixtures(run.bundle), pytest.raises(Exception) as raised:
        agent(base_url, QUESTION, stream=True)
    cause = raised.value.__cause__
    assert (type(raised.value), type(cause), str(cause)) == live
    assert cause is not None and type(cause).__module__.startswith("httpx2")
    served = run.served["output"]
    assert served["cut"]["type"] == "RemoteProtocolError"
    assert served["events"]  # the first events arrive before the connection drops


def test_a_stream_cut_only_applies_to_a_streamed_call(capture: Any, server: LLMServer) -> None:
    bundle = recorded(capture, ask_gpt, server.openai_base_url, QUESTION)
    skipped = derive(load_bundle(bundle), ["stream_cut"], model_fault=fault_entry).skipped
    assert [s.reason for s in skipped] == ["the call is not streamed: it has no stream to cut"]


def test_a_model_call_of_call_llm_has_no_model_fault() -> None:
    bundle = {"llm": {GPT: [{"input": "hi", "output": "hello"}]}}
    derivation_ = derive(load_bundle(bundle), ["rate_limit"], model_fault=fault_entry)
    assert derivation_.runs == []
    assert "recorded by call_llm" in derivation_.skipped[0].reason


# -- retries -------------------------------------------------------------------------------------


def test_the_sdks_retry_after_a_rate_limit_is_served_the_recorded_answer_under_serve_recorded(
    capture: Any, server: LLMServer
) -> None:
    answer = ask_gpt(server.openai_base_url, QUESTION)
    bundle = dict(capture.last_bundle)
    seen = len(server.requests)
    row = robustness(
        bundle,
        ask_gpt,
        "rate_limit",
        server.openai_base_url,
        QUESTION,
        retry="serve-recorded",
        retries=2,
    )
    assert row["verdict"] == "HANDLED", row
    assert row["output"] == answer
    assert row["steps"] == [f"served llm:{GPT}", f"retried llm:{GPT}"]
    assert len(server.requests) == seen


def test_a_retry_the_recording_cannot_answer_is_incomplete_never_live(
    capture: Any, server: LLMServer
) -> None:
    bundle = recorded(capture, ask_gpt, server.openai_base_url, QUESTION)
    seen = len(server.requests)
    row = robustness(bundle, ask_gpt, "rate_limit", server.openai_base_url, QUESTION, retries=2)
    assert row["verdict"] == "INCOMPLETE", row
    assert "a repeat of the faulted call" in row["reasons"][0]
    assert row["steps"] == [f"served llm:{GPT}", f"missed llm:{GPT}"]  # stopped at the retry
    assert len(server.requests) == seen


def test_a_retry_storm_past_the_budget_is_looped(capture: Any, server: LLMServer) -> None:
    bundle = recorded(capture, ask_gpt, server.openai_base_url, QUESTION)
    row = robustness(
        bundle,
        ask_gpt,
        "rate_limit",
        server.openai_base_url,
        QUESTION,
        retry="serve-fault",
        retries=5,
    )
    assert row["verdict"] == "LOOPED", row
    assert row["calls"] == row["max_calls"] + 1


def ask_with_tools(base_url: str, question: str, retries: int = 0) -> str:
    """Two turns with the same model: it asks for a tool, then answers with its result."""
    client = openai.OpenAI(api_key="test-key", base_url=base_url, max_retries=retries)
    tools: Any = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    with tracely.agent("weather", input=question) as run:
        messages: Any = [{"role": "user", "content": question}]
        while True:
            reply = client.chat.completions.create(model=GPT, messages=messages, tools=tools)
            message = reply.choices[0].message
            if not message.tool_calls:
                run.output = message.content
                break
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = tracely.call_tool("get_weather", lambda: "sunny", args={"city": "Paris"})
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return str(run.output)


def test_a_retry_is_answered_as_the_faulted_call_not_with_the_next_turns_answer(
    capture: Any, server: LLMServer
) -> None:
    question = "What is the weather in Paris?"
    answer = ask_with_tools(server.openai_base_url, question)
    bundle = dict(capture.last_bundle)
    case = ReplayCase(
        "c",
        "c",
        1,
        None,
        {"args": [server.openai_base_url, question, 2], "kwargs": {}},
        None,
        bundle,
    )
    config = FaultConfig(kinds=("rate_limit",), retry="serve-recorded")
    rows = [
        run_derived(case, ask_with_tools, run, config)
        for run in derivation(load_bundle(bundle), config).runs
    ]
    assert [(r["call"], r["verdict"]) for r in rows] == [
        (f"llm:{GPT} #1", "HANDLED"),
        (f"llm:{GPT} #2", "HANDLED"),
    ]
    assert all(r["output"] == answer for r in rows)
    assert rows[0]["steps"] == [
        f"served llm:{GPT}",
        f"retried llm:{GPT}",
        "served tools:get_weather",
        f"served llm:{GPT}",
    ]


# -- a framework's retry ---------------------------------------------------------------------


class Conversation(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def ask_graph(base_url: str, question: str) -> str:
    """A LangGraph agent whose model step LangGraph retries (the SDK itself does not)."""
    model = ChatOpenAI(model=GPT, api_key=SecretStr("test-key"), base_url=base_url, max_retries=0)

    def call_model(state: Conversation) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(Conversation)
    policy = RetryPolicy(initial_interval=0.001, jitter=False, max_attempts=3)
    builder.add_node("model", call_model, retry_policy=policy)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    graph = builder.compile()
    with tracely.agent("graph", input=question) as run:
        state = graph.invoke({"messages": [HumanMessage(question)]})
        run.output = str(state["messages"][-1].content)
    return str(run.output)


def test_a_langgraph_retry_after_a_rate_limit_is_served_by_the_retry_rule(
    capture: Any, server: LLMServer
) -> None:
    answer = ask_graph(server.openai_base_url, QUESTION)
    bundle = dict(capture.last_bundle)
    seen = len(server.requests)

    recovered = robustness(
        bundle, ask_graph, "rate_limit", server.openai_base_url, QUESTION, retry="serve-recorded"
    )
    assert recovered["verdict"] == "HANDLED", recovered
    assert recovered["output"] == answer
    assert recovered["steps"] == [f"served llm:{GPT}", f"retried llm:{GPT}"]

    # Without a rule, LangGraph's first retry is a call the recording cannot answer: the run
    # stops there, INCOMPLETE...
    unanswered = robustness(bundle, ask_graph, "rate_limit", server.openai_base_url, QUESTION)
    assert unanswered["verdict"] == "INCOMPLETE", unanswered
    assert unanswered["calls"] == 2
    # ... and when every retry is served the fault again, its retries run past the budget.
    storm = robustness(
        bundle, ask_graph, "rate_limit", server.openai_base_url, QUESTION, retry="serve-fault"
    )
    assert storm["verdict"] == "LOOPED", storm
    assert len(server.requests) == seen


# -- the async clients -----------------------------------------------------------------------


async def ask_gpt_async(
    base_url: str, question: str, stream: bool = False, retries: int = 0
) -> str:
    client = openai.AsyncOpenAI(api_key="test-key", base_url=base_url, max_retries=retries)
    with tracely.agent("ask-gpt-async", input=question) as run:
        messages: Any = [{"role": "user", "content": question}]
        parts = []
        if stream:
            events = await client.chat.completions.create(model=GPT, messages=messages, stream=True)
            async for chunk in events:
                parts.extend(c.delta.content or "" for c in chunk.choices)
        else:
            reply = await client.chat.completions.create(model=GPT, messages=messages)
            parts.append(reply.choices[0].message.content or "")
        run.output = "".join(parts)
    return str(run.output)


def test_the_async_client_gets_the_same_faults(capture: Any, server: LLMServer) -> None:
    asyncio.run(ask_gpt_async(server.openai_base_url, QUESTION))
    plain = dict(capture.last_bundle)
    with (
        tracely.fixtures(derived(plain, "rate_limit").bundle),
        pytest.raises(openai.RateLimitError),
    ):
        asyncio.run(ask_gpt_async(server.openai_base_url, QUESTION))

    asyncio.run(ask_gpt_async(server.openai_base_url, QUESTION, stream=True))
    streamed = dict(capture.last_bundle)
    with (
        tracely.fixtures(derived(streamed, "stream_cut").bundle),
        pytest.raises(openai.APIConnectionError) as cut,
    ):
        asyncio.run(ask_gpt_async(server.openai_base_url, QUESTION, stream=True))
    assert isinstance(cut.value.__cause__, httpx2.RemoteProtocolError)

    # The SDK's retry, unanswered, stops an async run as it stops a sync one.
    def run_async(base_url: str, question: str) -> str:
        return asyncio.run(ask_gpt_async(base_url, question, retries=2))

    row = robustness(plain, run_async, "rate_limit", server.openai_base_url, QUESTION)
    assert row["verdict"] == "INCOMPLETE", row
    assert row["steps"] == [f"served llm:{GPT}", f"missed llm:{GPT}"]


# -- a home-made client ----------------------------------------------------------------------


def ask_over_httpx(base_url: str, question: str, stream: bool = False) -> str:
    """A client of its own on httpx: recorded at ``Client.send``, as the wire carried it."""
    body = {"model": GPT, "messages": [{"role": "user", "content": question}], "stream": stream}
    with tracely.agent("ask-httpx", input=question) as run, httpx.Client() as client:
        if not stream:
            response = client.post(f"{base_url}/chat/completions", json=body)
            run.output = f"{response.status_code} {response.json()}"
        else:
            with client.stream("POST", f"{base_url}/chat/completions", json=body) as response:
                run.output = str(sum(1 for line in response.iter_lines() if line))
    return str(run.output)


def test_a_client_of_its_own_gets_the_wire_fault(capture: Any, server: LLMServer) -> None:
    bundle = recorded(capture, ask_over_httpx, server.openai_base_url, QUESTION)
    assert load_bundle(bundle)["llm"][GPT][0]["output_type"] == "http.response"
    with tracely.fixtures(derived(bundle, "rate_limit").bundle):
        answer = ask_over_httpx(server.openai_base_url, QUESTION)
    assert answer.startswith("429 {'error': {'message': 'Rate limit reached")

    streamed = recorded(capture, ask_over_httpx, server.openai_base_url, QUESTION, stream=True)
    with (
        tracely.fixtures(derived(streamed, "stream_cut").bundle),
        pytest.raises(httpx.RemoteProtocolError),
    ):
        ask_over_httpx(server.openai_base_url, QUESTION, stream=True)


def test_the_responses_api_gets_openais_errors_and_no_refusal(
    capture: Any, server: LLMServer
) -> None:
    client = openai.OpenAI(api_key="test-key", base_url=server.openai_base_url, max_retries=0)

    def respond() -> str:
        with tracely.agent("respond", input=QUESTION) as run:
            run.output = client.responses.create(model=GPT, input=QUESTION).output_text
        return str(run.output)

    bundle = recorded(capture, respond)
    with (
        tracely.fixtures(derived(bundle, "rate_limit").bundle),
        pytest.raises(openai.RateLimitError),
    ):
        respond()
    (skipped,) = derive(load_bundle(bundle), ["refusal"], model_fault=fault_entry).skipped
    assert skipped.reason == "tracely serves no refusal of this API (openai_responses)"


def ask_over_requests(base_url: str, question: str) -> str:
    """A client of its own on requests: recorded at urllib3, where it is replayed."""
    body = {"model": GPT, "messages": [{"role": "user", "content": question}]}
    with tracely.agent("ask-requests", input=question) as run:
        try:
            response = requests.post(f"{base_url}/chat/completions", json=body, timeout=5)
            error = response.json().get("error") or {"type": "none"}
            run.output = f"{response.status_code} {error['type']}"
        except requests.exceptions.ReadTimeout:
            run.output = "timed out"
    return str(run.output)


def test_a_call_recorded_at_urllib3_gets_urllib3s_faults(capture: Any, server: LLMServer) -> None:
    providers.instrument("urllib3")
    try:
        answer = ask_over_requests(server.openai_base_url, QUESTION)
        assert answer == "200 none"
        bundle = dict(capture.last_bundle)
        with tracely.fixtures(derived(bundle, "rate_limit").bundle):
            assert ask_over_requests(server.openai_base_url, QUESTION) == "429 requests"
        with tracely.fixtures(derived(bundle, "timeout").bundle):
            assert ask_over_requests(server.openai_base_url, QUESTION) == "timed out"
    finally:
        providers.uninstrument("urllib3")
