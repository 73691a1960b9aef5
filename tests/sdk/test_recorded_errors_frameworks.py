"""Recorded tool failures consumed by real agent frameworks replay as they ran live.

LangGraph's ``ToolNode(handle_tool_errors=True)`` writes ``repr(exc)`` into the message the
next LLM call sees; pydantic-ai catches ``ModelRetry`` and a LangChain tool ``ToolException`` by
class. An unchanged agent must replay clean through each, with or without ``errors=``.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool, ToolException, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.providers._helpers import closed_url, instrumented_fixture

# -- LangGraph -------------------------------------------------------------------------------


def _fetch_weather(city: str) -> str:
    raise ValueError(f"no weather data for {city}")


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return tracely.call_tool("get_weather", lambda: _fetch_weather(city), args={"city": city})


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _plan(transcript: list[dict[str, str]]) -> dict[str, Any]:
    """A scripted model: look the weather up, then answer with what the tool said."""
    if transcript[-1]["role"] == "tool":
        return {"text": "Sorry, I could not find it: " + transcript[-1]["content"]}
    return {"tool_call": {"name": "get_weather", "args": {"city": "Atlantis"}, "id": "call_1"}}


def _model_node(state: State) -> dict[str, Any]:
    transcript = [
        {"role": "tool" if isinstance(m, ToolMessage) else m.type, "content": str(m.content)}
        for m in state["messages"]
    ]
    answer = tracely.call_llm("gpt-4o", lambda: _plan(transcript), input=transcript)
    if "tool_call" in answer:
        return {"messages": [AIMessage(content="", tool_calls=[answer["tool_call"]])]}
    return {"messages": [AIMessage(content=answer["text"])]}


def _route(state: State) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def _graph() -> Any:
    builder = StateGraph(State)
    builder.add_node("model", _model_node)
    builder.add_node("tools", ToolNode([get_weather], handle_tool_errors=True))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", _route, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile()


def _run_graph() -> str:
    with tracely.agent("weather-graph", input="weather in Atlantis?") as run:
        state = _graph().invoke({"messages": [HumanMessage("weather in Atlantis?")]})
        run.output = str(state["messages"][-1].content)
    return run.output


def test_a_langgraph_tool_error_replays_into_the_next_prompt_unchanged(capture: Any) -> None:
    live = _run_graph()
    assert "ValueError('no weather data for Atlantis')" in live
    bundle = capture.last_bundle
    with tracely.fixtures(bundle) as rep:
        replayed = _run_graph()
    assert replayed == live
    assert rep.diverged == [] and rep.clean, rep.to_dict()["divergences"]


# -- pydantic-ai -----------------------------------------------------------------------------


def _lookup(city: str) -> str:
    raise ModelRetry(f"no weather data for {city}; ask the user for a real city")


@tracely.observe(as_type="tool", errors=(ModelRetry,))
def weather(city: str) -> str:
    """The weather in a city."""
    return _lookup(city)


def _text(part: Any) -> str:
    # What the model is shown of the tool's failure: ModelRetry's message, as a retry prompt
    # or a tool return part depending on the pydantic-ai version.
    if isinstance(part, (RetryPromptPart, ToolReturnPart)):
        return f"tool said: {part.content}"
    if isinstance(part, (UserPromptPart, TextPart)):
        return f"{type(part).__name__}: {part.content}"
    if isinstance(part, ToolCallPart):
        return f"call {part.tool_name}({part.args_as_json_str()})"
    return type(part).__name__


def _decide(transcript: list[str]) -> dict[str, Any]:
    said = [line for line in transcript if line.startswith("tool said: ")]
    if said:
        return {"text": "I need a real city: " + said[-1]}
    return {"call": {"city": "Atlantis"}}


def _pydantic_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    transcript = [
        _text(part)
        for message in messages
        if isinstance(message, (ModelRequest, ModelResponse))
        for part in message.parts
    ]
    answer = tracely.call_llm("test-model", lambda: _decide(transcript), input=transcript)
    if "call" in answer:
        return ModelResponse(parts=[ToolCallPart("weather", answer["call"], tool_call_id="call_1")])
    return ModelResponse(parts=[TextPart(answer["text"])])


def _run_pydantic_agent() -> str:
    agent = Agent(FunctionModel(_pydantic_model), tools=[weather], retries=1)
    with tracely.agent("weather-pydantic", input="weather in Atlantis?") as run:
        run.output = agent.run_sync("weather in Atlantis?").output
    return str(run.output)


def test_a_pydantic_ai_model_retry_replays_as_model_retry(capture: Any) -> None:
    live = _run_pydantic_agent()
    assert "no weather data for Atlantis" in live
    bundle = capture.last_bundle
    assert bundle["tools"]["weather"][0]["error"]["type"] == "ModelRetry"
    with tracely.fixtures(bundle) as rep:
        replayed = _run_pydantic_agent()
    assert replayed == live
    assert rep.clean, rep.to_dict()


def _run_unchanged_pydantic_agent() -> str:
    @tracely.observe(as_type="tool")
    def weather(city: str) -> str:  # the same tool, without errors=
        """The weather in a city."""
        return _lookup(city)

    agent = Agent(FunctionModel(_pydantic_model), tools=[weather], retries=1)
    with tracely.agent("weather-pydantic", input="weather in Atlantis?") as run:
        run.output = agent.run_sync("weather in Atlantis?").output
    return str(run.output)


def test_without_errors_a_model_retry_still_replays_as_model_retry(capture: Any) -> None:
    live = _run_unchanged_pydantic_agent()
    assert "no weather data for Atlantis" in live
    bundle = capture.last_bundle
    with tracely.fixtures(bundle) as rep:
        replayed = _run_unchanged_pydantic_agent()
    assert replayed == live
    assert rep.clean, rep.to_dict()


# -- LangChain ToolException -----------------------------------------------------------------


def _fetch_or_refuse(city: str) -> str:
    raise ToolException(f"no weather data for {city}")


def _refusing_weather(city: str) -> str:
    return tracely.call_tool("weather", lambda: _fetch_or_refuse(city), args={"city": city})


def _run_tool_exception_graph() -> str:
    # The tool itself turns a ToolException (and only that) into its answer; ToolNode would
    # turn any other failure into its repr.
    weather = StructuredTool.from_function(
        _refusing_weather, name="get_weather", description="The weather.", handle_tool_error=True
    )
    builder = StateGraph(State)
    builder.add_node("model", _model_node)
    builder.add_node("tools", ToolNode([weather], handle_tool_errors=True))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", _route, ["tools", END])
    builder.add_edge("tools", "model")
    with tracely.agent("weather-graph", input="weather in Atlantis?") as run:
        state = builder.compile().invoke({"messages": [HumanMessage("weather in Atlantis?")]})
        run.output = str(state["messages"][-1].content)
    return run.output


def test_without_errors_a_langchain_tool_exception_replays_as_tool_exception(capture: Any) -> None:
    live = _run_tool_exception_graph()
    assert live == "Sorry, I could not find it: no weather data for Atlantis"
    bundle = capture.last_bundle
    assert bundle["tools"]["weather"][0]["error"]["type"] == "ToolException"
    with tracely.fixtures(bundle) as rep:
        replayed = _run_tool_exception_graph()
    assert replayed == live
    assert rep.diverged == [] and rep.clean, rep.to_dict()["divergences"]


# -- what the allowlist does not rebuild -----------------------------------------------------


def test_a_recorded_type_off_the_allowlist_stays_a_tool_error() -> None:
    @tracely.observe(as_type="tool")
    def weather(city: str) -> str:
        """The weather in a city."""
        raise AssertionError("replay must not run the body")

    bundle = {
        "tools": {
            "weather": [
                {"args": {"city": "Atlantis"}, "error": {"type": "Retry", "message": "again"}}
            ]
        }
    }
    with tracely.fixtures(bundle), pytest.raises(tracely.ToolError) as raised:
        weather("Atlantis")
    assert raised.value.type == "Retry"


_NOT_IMPORTED = """
import sys
import tracely_sdk as tracely

@tracely.observe(as_type="tool")
def weather(city):
    raise AssertionError("replay must not run the body")

bundle = {"tools": {"weather": [{"args": {"city": "Atlantis"},
    "error": {"type": "ModelRetry", "message": "no weather data for Atlantis"}}]}}
with tracely.fixtures(bundle):
    try:
        weather("Atlantis")
    except tracely.ToolError as exc:
        print(type(exc).__name__, exc.type, str(exc))
print("pydantic_ai" in sys.modules)
"""


def test_a_recorded_model_retry_stays_a_tool_error_when_pydantic_ai_is_not_imported() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _NOT_IMPORTED], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ToolError ModelRetry no weather data for Atlantis",
        "False",  # and tracely did not import pydantic-ai because the recording named it
    ]


# -- pydantic-ai on the OpenAI chat model, against the local stand-in ------------------------

instrumented = instrumented_fixture("openai")


@tracely.observe(as_type="tool")
def forecast(city: str) -> str:
    """The weather in a city."""
    return _lookup(city)


def _run_openai_pydantic_agent(base_url: str) -> str:
    model = OpenAIChatModel(
        "gpt-4o-mini", provider=OpenAIProvider(base_url=base_url, api_key="test-key")
    )
    agent = Agent(model, tools=[forecast], retries=1)
    with tracely.agent("weather-pydantic", input="weather in Atlantis?") as run:
        run.output = agent.run_sync("What is the weather in Atlantis?").output
    return str(run.output)


def test_an_unchanged_pydantic_ai_agent_on_openai_replays_its_model_retry(
    capture: Any, instrumented: None
) -> None:
    with serve() as (server, base_url):
        live = _run_openai_pydantic_agent(f"{base_url}/v1")
        assert len(server.requests) == 2  # the tool call, then the answer to the retry prompt
    assert "no weather data for Atlantis" in live
    bundle = capture.last_bundle
    assert bundle["tools"]["forecast"][0]["error"]["type"] == "ModelRetry"
    with tracely.fixtures(bundle) as rep:
        # The same API path as live (/v1): a recorded request's path is part of its input.
        replayed = _run_openai_pydantic_agent(closed_url("/v1"))
    assert replayed == live
    assert rep.diverged == [] and rep.clean, rep.to_dict()
