"""An OpenAI Agents SDK agent, recorded and replayed with no rewrite.

The agent is the SDK's own: ``Agent(name=..., instructions=..., tools=[get_weather])``, run with
``Runner.run_sync``, on the Responses API. Nothing in it mentions recording:
``tracely.init(instrument="openai")`` records each model call the SDK makes through the OpenAI
client as an ``llm`` span, the tool is an ``@tracely.observe(as_type="tool")`` function, and
under ``tracely replay`` both are served from the recording. The SDK's own trace export (to
OpenAI's platform) is turned off here: the run is traced through OpenTelemetry instead.

It runs unchanged against the OpenAI API (``OPENAI_API_KEY``, and ``OPENAI_BASE_URL`` for a
compatible endpoint) and against the bundled local server::

    python -m examples.llm_server --port 8765 &
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=test-key \\
        python -m examples.openai_agents_agent "What's the weather in Paris?"

``tracely replay --entrypoint examples.openai_agents_agent:run`` executes :func:`run`; replay
needs no key and no network. Needs ``pip install openai-agents``.
"""

from __future__ import annotations

import json
import os

from agents import Agent, Runner, function_tool, set_tracing_disabled

import tracely_sdk as tracely
from examples import weather_agent

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
SYSTEM = "You are a weather assistant. Use get_weather for current conditions."

set_tracing_disabled(True)


@function_tool
@tracely.observe(as_type="tool")
def get_weather(city: str) -> str:
    """Current weather conditions in a city.

    Args:
        city: The city name.
    """
    return json.dumps(weather_agent.get_weather(city))


AGENT = Agent(name="weather assistant", instructions=SYSTEM, tools=[get_weather], model=MODEL)


def run(question: str) -> str:
    """Answer ``question``, calling ``get_weather`` when the model asks for it."""
    with tracely.agent("openai-agents-weather-agent", input=question) as agent_run:
        answer = str(Runner.run_sync(AGENT, question).final_output)
        agent_run.output = answer
        return answer


def main(argv: list[str] | None = None) -> int:
    """Run the agent live once, as production would: traced, and recorded into the store."""
    import argparse

    from examples._recording import recorded_run

    parser = argparse.ArgumentParser(
        prog="python -m examples.openai_agents_agent",
        description="Run the OpenAI Agents SDK agent live; the trace is recorded into the "
        "tracely store ($TRACELY_STORE, default .tracely/tracely.db).",
    )
    parser.add_argument("question", help='e.g. "What\'s the weather in Paris?"')
    args = parser.parse_args(argv)
    with recorded_run(service_name="openai-agents-weather-agent", instrument="openai"):
        print(run(args.question))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
