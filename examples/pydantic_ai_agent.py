"""A pydantic-ai agent on the OpenAI chat model, recorded and replayed with no rewrite.

The agent is pydantic-ai's own: ``Agent(OpenAIChatModel(...), tools=[get_weather])``, run with
``run_sync``. Nothing in it mentions recording: ``tracely.init(instrument="openai")`` records
each model call pydantic-ai makes through the OpenAI SDK as an ``llm`` span, the tool is an
``@tracely.observe(as_type="tool")`` function, and under ``tracely replay`` both are served
from the recording.

It runs unchanged against the OpenAI API (``OPENAI_API_KEY``, and ``OPENAI_BASE_URL`` for a
compatible endpoint) and against the bundled local server::

    python -m examples.llm_server --port 8765 &
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=test-key \\
        python -m examples.pydantic_ai_agent "What's the weather in Paris?"

``tracely replay --entrypoint examples.pydantic_ai_agent:run`` executes :func:`run`; replay
needs no key and no network. Needs ``pip install 'pydantic-ai-slim[openai]'``.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel

import tracely_sdk as tracely
from examples import weather_agent

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
SYSTEM = "You are a weather assistant. Use get_weather for current conditions."


@tracely.observe(as_type="tool")
def get_weather(city: str) -> dict[str, Any]:
    """Current weather conditions in a city."""
    return weather_agent.get_weather(city)


def build_agent() -> Agent[None, str]:
    """The agent; its model reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` when it is built."""
    return Agent(OpenAIChatModel(MODEL), instructions=SYSTEM, tools=[get_weather])


def run(question: str) -> str:
    """Answer ``question``, calling ``get_weather`` when the model asks for it."""
    with tracely.agent("pydantic-ai-weather-agent", input=question) as agent_run:
        answer = build_agent().run_sync(question).output
        agent_run.output = answer
        return answer


def main(argv: list[str] | None = None) -> int:
    """Run the agent live once, as production would: traced, and recorded into the store."""
    import argparse

    from examples._recording import recorded_run

    parser = argparse.ArgumentParser(
        prog="python -m examples.pydantic_ai_agent",
        description="Run the pydantic-ai agent live; the trace is recorded into the tracely "
        "store ($TRACELY_STORE, default .tracely/tracely.db).",
    )
    parser.add_argument("question", help='e.g. "What\'s the weather in Paris?"')
    args = parser.parse_args(argv)
    with recorded_run(service_name="pydantic-ai-weather-agent", instrument="openai"):
        print(run(args.question))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
