"""A LangGraph agent on LangChain's ChatOpenAI, recorded and replayed with no rewrite.

The graph is LangGraph's usual tool loop: a ``model`` node (``ChatOpenAI`` with the tool bound)
and a ``tools`` node (``ToolNode``), joined by ``tools_condition``. Nothing in it mentions
recording: ``tracely.init(instrument="openai")`` records each model call the OpenAI SDK under
``ChatOpenAI`` makes as an ``llm`` span, the tool is an ``@tracely.observe(as_type="tool")``
function, and under ``tracely replay`` both are served from the recording.

It runs unchanged against the OpenAI API (``OPENAI_API_KEY``, and ``OPENAI_BASE_URL`` for a
compatible endpoint) and against the bundled local server::

    python -m examples.llm_server --port 8765 &
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=test-key \\
        python -m examples.langgraph_agent "What's the weather in Paris?"

``tracely replay --entrypoint examples.langgraph_agent:run`` executes :func:`run`; replay needs
no key and no network. Needs ``pip install langgraph langchain-openai``.
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

import tracely_sdk as tracely
from examples import weather_agent

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
SYSTEM = "You are a weather assistant. Use get_weather for current conditions."


@tool
@tracely.observe(as_type="tool")
def get_weather(city: str) -> dict[str, Any]:
    """Current weather conditions in a city."""
    return weather_agent.get_weather(city)


def build_graph(model: ChatOpenAI | None = None) -> Any:
    """The compiled graph: the model node and the tool node, until the model stops calling."""
    llm = (model or ChatOpenAI(model=MODEL)).bind_tools([get_weather])

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([get_weather]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def run(question: str) -> str:
    """Answer ``question`` through the graph, calling ``get_weather`` when the model asks."""
    with tracely.agent("langgraph-weather-agent", input=question) as agent_run:
        state = build_graph().invoke({"messages": [SystemMessage(SYSTEM), HumanMessage(question)]})
        answer = str(state["messages"][-1].content)
        agent_run.output = answer
        return answer


def main(argv: list[str] | None = None) -> int:
    """Run the agent live once, as production would: traced, and recorded into the store."""
    import argparse

    from examples._recording import recorded_run

    parser = argparse.ArgumentParser(
        prog="python -m examples.langgraph_agent",
        description="Run the LangGraph agent live; the trace is recorded into the tracely store "
        "($TRACELY_STORE, default .tracely/tracely.db).",
    )
    parser.add_argument("question", help='e.g. "What\'s the weather in Paris?"')
    args = parser.parse_args(argv)
    with recorded_run(service_name="langgraph-weather-agent", instrument="openai"):
        print(run(args.question))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
