"""Recorded tool failures consumed by real agent frameworks replay as they ran live.

LangGraph's ``ToolNode(handle_tool_errors=True)`` writes ``repr(exc)`` into the message the
next LLM call sees; pydantic-ai catches ``ModelRetry`` by class. An unchanged agent must replay
clean through both.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
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

import tracely_sdk as tracely

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
    assert rep.diverged == [] and rep.clean, rep.to_dict()


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


def test_without_errors_the_model_retry_is_a_tool_error_the_framework_does_not_catch(
    capture: Any,
) -> None:
    @tracely.observe(as_type="tool")
    def weather(city: str) -> str:  # the same tool, without errors=
        """The weather in a city."""
        return _lookup(city)

    agent = Agent(FunctionModel(_pydantic_model), tools=[weather], retries=1)
    bundle = {
        "tools": {
            "weather": [
                {
                    "args": {"city": "Atlantis"},
                    "error": {"type": "ModelRetry", "message": "no weather data for Atlantis"},
                }
            ]
        },
        "llm": {"test-model": [{"output": {"call": {"city": "Atlantis"}}}]},
    }
    with tracely.fixtures(bundle), pytest.raises(tracely.ToolError):
        agent.run_sync("weather in Atlantis?")
