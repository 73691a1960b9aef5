"""A small tool-using agent on the real Anthropic SDK, recorded and replayed with no rewrite.

The agent calls ``client.messages.create`` directly. The model answers with a ``tool_use``
block; the agent runs the tool and sends a ``tool_result`` back (the tool-result turn); the
model answers in text. ``tracely.init(instrument="auto")`` (or ``TRACELY_INSTRUMENT=auto``)
records each SDK call as an ``llm`` span, the tool is an ``@tracely.observe(as_type="tool")``
function, and under ``tracely replay`` both are served from the recording.

It runs unchanged against the Anthropic API (``ANTHROPIC_API_KEY``, and ``ANTHROPIC_BASE_URL``
for another endpoint) and against the bundled local server::

    python -m examples.llm_server --port 8765 &
    ANTHROPIC_BASE_URL=http://127.0.0.1:8765 ANTHROPIC_API_KEY=test-key \\
        python -m examples.anthropic_agent "What's the weather in Lisbon?"

``tracely replay --entrypoint examples.anthropic_agent:run`` executes :func:`run`; replay needs
no key and no network.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anthropic

import tracely_sdk as tracely
from examples import weather_agent

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5")
SYSTEM = "You are a weather assistant. Use get_weather for current conditions."
TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "Current weather conditions in a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name"}},
            "required": ["city"],
        },
    }
]
MAX_TURNS = 4


@tracely.observe(as_type="tool")
def get_weather(city: str) -> dict[str, Any]:
    """Current conditions for ``city`` (a local table standing in for a weather API)."""
    return weather_agent.get_weather(city)


def client_from_env() -> anthropic.Anthropic:
    """A client configured by the usual ``ANTHROPIC_*`` variables.

    Replay sends nothing, so no key is needed then; a live run without one fails at the API.
    """
    return anthropic.Anthropic(api_key=os.environ.get("ANTHROPIC_API_KEY") or "no-key-set")


def _ask(client: anthropic.Anthropic, messages: list[Any]) -> Any:
    return client.messages.create(
        model=MODEL, max_tokens=1024, system=SYSTEM, messages=messages, tools=TOOLS
    )


def run(question: str, client: anthropic.Anthropic | None = None) -> str:
    """Answer ``question``, calling ``get_weather`` when the model asks for it."""
    client = client or client_from_env()
    with tracely.agent("anthropic-weather-agent", input=question) as agent_run:
        messages: list[Any] = [{"role": "user", "content": question}]
        message = _ask(client, messages)
        for _ in range(MAX_TURNS):
            calls = [block for block in message.content if block.type == "tool_use"]
            if message.stop_reason != "tool_use" or not calls:
                break
            messages.append({"role": "assistant", "content": message.content})
            results = []
            for call in calls:
                if call.name != "get_weather":
                    result: Any = {"error": f"unknown tool {call.name!r}"}
                else:
                    try:
                        result = get_weather(**call.input)
                    except Exception as exc:  # live: WeatherServiceError; replayed: ToolError
                        result = {"error": str(exc)}
                results.append(
                    {"type": "tool_result", "tool_use_id": call.id, "content": json.dumps(result)}
                )
            messages.append({"role": "user", "content": results})
            message = _ask(client, messages)
        answer = "".join(block.text for block in message.content if block.type == "text")
        agent_run.output = answer
        return answer


def main(argv: list[str] | None = None) -> int:
    """Run the agent live once, as production would: traced, and recorded into the store."""
    import argparse

    from examples._recording import recorded_run

    parser = argparse.ArgumentParser(
        prog="python -m examples.anthropic_agent",
        description="Run the Anthropic agent live; the trace is recorded into the tracely store "
        "($TRACELY_STORE, default .tracely/tracely.db).",
    )
    parser.add_argument("question", help='e.g. "What\'s the weather in Lisbon?"')
    args = parser.parse_args(argv)
    with recorded_run(service_name="anthropic-weather-agent", instrument="anthropic"):
        print(run(args.question))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
