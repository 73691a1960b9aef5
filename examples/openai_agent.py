"""A small tool-using agent on the real OpenAI SDK, recorded and replayed with no rewrite.

The agent calls ``client.chat.completions.create`` directly. The model asks for
``get_weather``; the agent runs the tool and sends the result back (the tool-result turn); the
model answers. Nothing in the agent mentions recording: ``tracely.init(instrument="auto")``
(or ``TRACELY_INSTRUMENT=auto``) records each SDK call as an ``llm`` span, the tool is an
``@tracely.observe(as_type="tool")`` function, and under ``tracely replay`` both are served from
the recording.

It runs unchanged against the OpenAI API (``OPENAI_API_KEY``, and ``OPENAI_BASE_URL`` for a
compatible endpoint) and against the bundled local server::

    python -m examples.llm_server --port 8765 &
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=test-key \\
        python -m examples.openai_agent "What's the weather in Paris?"

``tracely replay --entrypoint examples.openai_agent:run`` executes :func:`run`; replay needs no
key and no network.
"""

from __future__ import annotations

import json
import os
from typing import Any

import openai

import tracely_sdk as tracely
from examples import weather_agent

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
SYSTEM = "You are a weather assistant. Use get_weather for current conditions."
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather conditions in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city name"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]
MAX_TURNS = 4


@tracely.observe(as_type="tool")
def get_weather(city: str) -> dict[str, Any]:
    """Current conditions for ``city`` (a local table standing in for a weather API)."""
    return weather_agent.get_weather(city)


def client_from_env() -> openai.OpenAI:
    """A client configured by the usual ``OPENAI_*`` variables.

    Replay sends nothing, so no key is needed then; a live run without one fails at the API.
    """
    return openai.OpenAI(api_key=os.environ.get("OPENAI_API_KEY") or "no-key-set")


def run(question: str, client: openai.OpenAI | None = None) -> str:
    """Answer ``question``, calling ``get_weather`` when the model asks for it."""
    client = client or client_from_env()
    with tracely.agent("openai-weather-agent", input=question) as agent_run:
        messages: list[Any] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
        ]
        message = (
            client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
            .choices[0]
            .message
        )
        for _ in range(MAX_TURNS):
            if not message.tool_calls:
                break
            messages.append(message)  # the SDK's own message object, as the SDK accepts it
            for call in message.tool_calls:
                if call.type != "function" or call.function.name != "get_weather":
                    result: Any = {"error": f"unknown tool {call.function.name!r}"}
                else:
                    try:
                        result = get_weather(**json.loads(call.function.arguments))
                    except Exception as exc:  # live: WeatherServiceError; replayed: ToolError
                        result = {"error": str(exc)}
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
                )
            message = (
                client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
                .choices[0]
                .message
            )
        answer = message.content or ""
        agent_run.output = answer
        return answer


def main(argv: list[str] | None = None) -> int:
    """Run the agent live once, as production would: traced, and recorded into the store."""
    import argparse

    from examples._recording import recorded_run

    parser = argparse.ArgumentParser(
        prog="python -m examples.openai_agent",
        description="Run the OpenAI agent live; the trace is recorded into the tracely store "
        "($TRACELY_STORE, default .tracely/tracely.db).",
    )
    parser.add_argument("question", help='e.g. "What\'s the weather in Paris?"')
    args = parser.parse_args(argv)
    with recorded_run(service_name="openai-weather-agent", instrument="openai"):
        print(run(args.question))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
