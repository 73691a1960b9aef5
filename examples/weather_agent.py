"""The reference agent: a small weather assistant wired for hermetic replay.

It runs with no API key: its "model" is :func:`local_model`, a small deterministic local
function standing in for an LLM, and its weather tool reads a local table standing in for a
weather API. Both are wrapped exactly as real calls would be (``tracely.call_llm`` /
``tracely.call_tool``), so recording and replay behave as they do with a hosted model.

- :func:`run` is the fixed agent: it follows the model's tool call, calls ``get_weather``
  and answers from the result.
- :func:`run_broken` is the silent failure: it ignores the model's tool call and answers
  without calling the tool.
- :func:`run_handles` calls ``get_weather`` and handles its failure gracefully.
- :func:`run_rewritten` is a careless rewrite: a changed system prompt, and no tool call.

``tracely replay --entrypoint examples.weather_agent:run`` executes :func:`run`.
"""

from __future__ import annotations

import json
from typing import Any

import tracely_sdk as tracely

MODEL = "local-weather-model"
SYSTEM = "You are a weather assistant. Use get_weather for current conditions."
TOOLS = [{"name": "get_weather", "parameters": {"city": "string"}}]

_WEATHER = {
    "Paris": {"temp_c": 18, "sky": "cloudy"},
    "Lisbon": {"temp_c": 24, "sky": "sunny"},
    "Oslo": {"temp_c": 3, "sky": "snowing"},
    "Tokyo": {"temp_c": 21, "sky": "clear"},
}


class WeatherServiceError(RuntimeError):
    """The weather service has no data for a city."""


def get_weather(city: str) -> dict[str, Any]:
    """The live tool: current conditions for ``city`` (a local table standing in for an API)."""
    if city not in _WEATHER:
        raise WeatherServiceError(f"no weather data for {city!r}")
    return {"city": city, **_WEATHER[city]}


def local_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A deterministic stand-in for an LLM: plans a tool call, then answers from its result."""
    last = messages[-1]
    if last["role"] == "tool":
        result = json.loads(last["content"])
        if "error" in result:
            return {
                "content": f"Sorry, I couldn't get the weather for {result['city']} right now.",
                "tool_call": None,
            }
        return {
            "content": f"It's {result['temp_c']}°C and {result['sky']} in {result['city']}.",
            "tool_call": None,
        }
    city = last["content"].rstrip("?").split()[-1]
    if tools:
        return {
            "content": f"Let me check the weather in {city}.",
            "tool_call": {"name": "get_weather", "arguments": {"city": city}},
        }
    return {"content": f"I'm sure the weather in {city} is lovely!", "tool_call": None}


def _usage(messages: list[dict[str, Any]]) -> Any:
    def count(reply: dict[str, Any]) -> tuple[int, int]:
        words_in = sum(len(str(m["content"]).split()) for m in messages)
        return words_in, len(reply["content"].split())

    return count


def _ask_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    snapshot = [dict(m) for m in messages]
    return tracely.call_llm(
        MODEL,
        lambda: local_model(snapshot, TOOLS),
        input={"messages": snapshot, "tools": TOOLS},
        usage=_usage(snapshot),
    )


def _question(city: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"What's the weather in {city}?"},
    ]


def run(city: str) -> str:
    """The fixed agent: calls get_weather when the model asks for it."""
    with tracely.agent("weather-agent", input=city) as agent_run:
        messages = _question(city)
        reply = _ask_model(messages)
        if reply["tool_call"]:
            args = reply["tool_call"]["arguments"]
            weather = tracely.call_tool("get_weather", lambda: get_weather(**args), args=args)
            messages += [
                {"role": "assistant", "content": reply["content"], "tool_call": reply["tool_call"]},
                {"role": "tool", "content": json.dumps(weather)},
            ]
            reply = _ask_model(messages)
        agent_run.output = reply["content"]
        return str(reply["content"])


def run_broken(city: str) -> str:
    """The silent failure: answers with the model's first message and never calls the tool."""
    with tracely.agent("weather-agent", input=city) as agent_run:
        reply = _ask_model(_question(city))
        agent_run.output = reply["content"]
        return str(reply["content"])


REWRITTEN_SYSTEM = "You are a terse assistant. Answer in one sentence."


def run_rewritten(city: str) -> str:
    """A rewrite with a new system prompt that answers without calling get_weather."""
    with tracely.agent("weather-agent", input=city) as agent_run:
        messages = [{**m} for m in _question(city)]
        messages[0]["content"] = REWRITTEN_SYSTEM
        reply = _ask_model(messages)
        agent_run.output = reply["content"]
        return str(reply["content"])


def run_handles(city: str) -> str:
    """Calls get_weather and, when it fails, tells the user instead of crashing."""
    with tracely.agent("weather-agent", input=city) as agent_run:
        messages = _question(city)
        reply = _ask_model(messages)
        if reply["tool_call"]:
            args = reply["tool_call"]["arguments"]
            try:
                weather = tracely.call_tool("get_weather", lambda: get_weather(**args), args=args)
            except Exception as exc:  # live: WeatherServiceError; replayed: tracely.ToolError
                weather = {"city": args["city"], "error": str(exc)}
            messages += [
                {"role": "assistant", "content": reply["content"], "tool_call": reply["tool_call"]},
                {"role": "tool", "content": json.dumps(weather)},
            ]
            reply = _ask_model(messages)
        agent_run.output = reply["content"]
        return str(reply["content"])


def main(argv: list[str] | None = None) -> int:
    """Run the agent live once, as production would: traced, and recorded into the store."""
    import argparse

    from examples._recording import recorded_run

    parser = argparse.ArgumentParser(
        prog="python -m examples.weather_agent",
        description="Run the reference agent live; the trace is recorded into the tracely store "
        "($TRACELY_STORE, default .tracely/tracely.db).",
    )
    parser.add_argument("city", help="the city to ask about, e.g. Paris")
    parser.add_argument(
        "--fn",
        choices=["run", "run_broken", "run_handles", "run_rewritten"],
        default="run",
        help="which version of the agent to run (default: run)",
    )
    args = parser.parse_args(argv)
    agents = {
        "run": run,
        "run_broken": run_broken,
        "run_handles": run_handles,
        "run_rewritten": run_rewritten,
    }
    with recorded_run(service_name="weather-agent"):
        print(agents[args.fn](args.city))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
