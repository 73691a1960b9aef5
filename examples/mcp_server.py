"""A small MCP server (the ``mcp`` SDK's own ``MCPServer``) with a weather tool, for the MCP
examples and tests: ``python -m examples.mcp_server`` serves it on stdio, ``--http PORT`` over
streamable HTTP on 127.0.0.1. ``WEATHER_SKY`` set makes every city report that sky."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

server = MCPServer("weather")

FORECASTS = {"Oslo": ("cloudy", 4), "Lisbon": ("sunny", 21)}


@server.tool()
def get_weather(city: str) -> str:
    """The current weather in ``city``."""
    sky, temperature = FORECASTS.get(city, ("unknown", 0))
    sky = os.environ.get("WEATHER_SKY", sky)  # a server changed since the recording
    return f"{city}: {sky}, {temperature} C"


@server.tool()
def add(a: int, b: int) -> int:
    """``a + b``, as structured output."""
    return a + b


@server.tool()
def forecast(city: str, days: int) -> str:
    """Refused as a protocol error (not a tool result) for more days than the server keeps."""
    if days > 3:
        raise MCPError(INVALID_PARAMS, f"no forecast {days} days ahead; at most 3")
    return f"{city}: {FORECASTS.get(city, ('unknown', 0))[0]} for {days} day(s)"


def main(argv: list[str]) -> None:
    if argv[:1] == ["--http"]:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(argv[1]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
