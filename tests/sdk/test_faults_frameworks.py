"""Robustness runs through real agent frameworks (LangGraph, pydantic-ai, the OpenAI Agents
SDK): a tool failure the framework handles is HANDLED, one it lets escape is CRASHED with the
call named.

Each agent is recorded on a good day (the tool answers); the derived run fails that call.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import tracely_sdk as tracely
from tracely_sdk._faults import FaultConfig, derive
from tracely_sdk._replay import load_bundle
from tracely_sdk._robustness import run_derived
from tracely_sdk._runner import ReplayCase

NO_INPUT = {"args": [], "kwargs": {}}


def robustness(
    bundle: dict[str, Any], agent: Any, errors: dict[str, dict[str, str]] | None = None
) -> dict[str, Any]:
    """The derived run of ``bundle`` whose one tool call fails with ``error``."""
    (run,) = derive(load_bundle(bundle), ["error"], errors=errors).runs
    case = ReplayCase("c", "c", 1, None, NO_INPUT, None, bundle)
    return run_derived(case, agent, run, FaultConfig())


# -- LangGraph -------------------------------------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return str(tracely.call_tool("get_weather", lambda: f"sunny in {city}", args={"city": city}))


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _model_node(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    transcript = [str(m.content) for m in state["messages"]]

    def plan() -> dict[str, Any]:
        if isinstance(last, ToolMessage):
            return {"text": f"The tool said: {last.content}"}
        return {"tool_call": {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"}}

    answer = tracely.call_llm("gpt-4o", plan, input=transcript)
    if "tool_call" in answer:
        return {"messages": [AIMessage(content="", tool_calls=[answer["tool_call"]])]}
    return {"messages": [AIMessage(content=answer["text"])]}


def _route(state: State) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def _graph_agent(handle_tool_errors: bool) -> Any:
    builder = StateGraph(State)
    builder.add_node("model", _model_node)
    builder.add_node("tools", ToolNode([get_weather], handle_tool_errors=handle_tool_errors))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", _route, ["tools", END])
    builder.add_edge("tools", "model")
    graph = builder.compile()

    def run() -> str:
        with tracely.agent("weather-graph", input="weather in Paris?") as agent_run:
            state = graph.invoke({"messages": [HumanMessage("weather in Paris?")]})
            agent_run.output = str(state["messages"][-1].content)
        return str(agent_run.output)

    return run


def test_langgraph_handling_tool_errors_is_handled_and_not_handling_them_crashes(
    capture: Any,
) -> None:
    assert _graph_agent(True)() == "The tool said: sunny in Paris"
    bundle = capture.last_bundle

    handled = robustness(bundle, _graph_agent(True))
    assert handled["verdict"] == "HANDLED", handled
    assert handled["next"] == "called llm:gpt-4o"

    crashed = robustness(bundle, _graph_agent(False))
    assert crashed["verdict"] == "CRASHED"
    assert crashed["call"] == "tools:get_weather #1"
    assert crashed["reasons"] == [
        "the agent raised ToolError: tools:get_weather failed (a fault tracely injected)"
    ]


# -- pydantic-ai -----------------------------------------------------------------------------


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    turns = sum(1 for m in messages if isinstance(m, ModelRequest))
    answer = tracely.call_llm(
        "test-model", lambda: {"text": "done"} if turns > 1 else {"call": {"city": "Paris"}}
    )
    if "call" in answer:
        return ModelResponse(parts=[ToolCallPart("weather", answer["call"], tool_call_id="call_1")])
    return ModelResponse(parts=[TextPart(answer["text"])])


def _pydantic_agent(errors: tuple[type[BaseException], ...]) -> Any:
    @tracely.observe(as_type="tool", errors=errors)
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    agent = Agent(FunctionModel(_model), tools=[weather], retries=1)

    def run() -> str:
        with tracely.agent("weather-pydantic", input="weather in Paris?") as agent_run:
            agent_run.output = agent.run_sync("weather in Paris?").output
        return str(agent_run.output)

    return run


def test_pydantic_ai_retrying_a_model_retry_is_handled_and_another_failure_crashes(
    capture: Any,
) -> None:
    assert _pydantic_agent((ModelRetry,))() == "done"
    bundle = capture.last_bundle
    # As if another recording had the tool fail with ModelRetry: the fault is that failure.
    retry = {"weather": {"type": "ModelRetry", "message": "no data; try another city"}}

    handled = robustness(bundle, _pydantic_agent((ModelRetry,)), retry)
    assert (handled["verdict"], handled["output"]) == ("HANDLED", "done"), handled
    assert handled["next"] == "called llm:test-model"

    # pydantic-ai's ModelRetry is on tracely's allowlist: handled without errors= too.
    unchanged = robustness(bundle, _pydantic_agent(()), retry)
    assert (unchanged["verdict"], unchanged["output"]) == ("HANDLED", "done"), unchanged

    timeout = {"weather": {"type": "TimeoutError", "message": "no answer in 5s"}}
    crashed = robustness(bundle, _pydantic_agent((ModelRetry,)), timeout)
    assert crashed["verdict"] == "CRASHED" and crashed["call"] == "tools:weather #1"
    assert crashed["error"] == {"type": "TimeoutError", "message": "no answer in 5s"}


# -- OpenAI Agents SDK -----------------------------------------------------------------------


def _agents_sdk_agent(base_url: str, handle_tool_errors: bool) -> Any:
    """The SDK's own agent on the Responses API of the local model server; a failing tool is
    told to the model (the SDK's default) or, with ``failure_error_function=None``, raised."""
    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)

    @tracely.observe(as_type="tool")
    def get_weather(city: str) -> str:
        """Current weather conditions in a city.

        Args:
            city: The city name.
        """
        return f"sunny in {city}"

    options: dict[str, Any] = {} if handle_tool_errors else {"failure_error_function": None}
    client = openai.AsyncOpenAI(api_key="test-key", base_url=base_url, max_retries=0)
    agent = Agent(
        name="weather assistant",
        instructions="Use get_weather for current conditions.",
        tools=[function_tool(get_weather, **options)],
        model=OpenAIResponsesModel(model="gpt-4o-mini", openai_client=client),
    )

    def run() -> str:
        with tracely.agent("weather-agents-sdk", input="weather in Paris?") as agent_run:
            agent_run.output = str(
                Runner.run_sync(agent, "What's the weather in Paris?").final_output
            )
        return str(agent_run.output)

    return run


def test_the_openai_agents_sdk_telling_the_model_is_handled_and_raising_crashes(
    capture: Any,
) -> None:
    from examples.llm_server import serve
    from tracely_sdk import providers

    providers.instrument(["openai"])
    try:
        with serve() as (server, _):
            base_url = f"{server.base_url}/v1"
            assert "sunny in Paris" in _agents_sdk_agent(base_url, True)()
            bundle = capture.last_bundle
            calls = len(server.requests)

            handled = robustness(bundle, _agents_sdk_agent(base_url, True))
            assert handled["verdict"] == "HANDLED", handled
            assert handled["next"] == "called llm:gpt-4o-mini"

            crashed = robustness(bundle, _agents_sdk_agent(base_url, False))
            assert crashed["verdict"] == "CRASHED", crashed
            assert crashed["call"] == "tools:get_weather #1"
            # The SDK wraps a tool's exception in its own UserError, as it does live.
            assert crashed["reasons"] == [
                "the agent raised UserError: Error running tool get_weather: "
                "tools:get_weather failed (a fault tracely injected)"
            ]
            assert len(server.requests) == calls  # the derived runs never reached the server
    finally:
        providers.uninstrument(["openai"])
