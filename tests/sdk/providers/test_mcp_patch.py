"""The MCP patch: a real ``mcp`` client against the SDK's own server, over stdio and streamable
HTTP, recorded live; replayed with the server gone (a stdio command that is not the server, an
HTTP port where nothing listens)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

import tracely_sdk as tracely
from tests.sdk.providers._helpers import closed_url, instrumented_fixture
from tracely_sdk._runner import ReplayCase, run_case

ROOT = Path(__file__).resolve().parents[3]
SERVER = StdioServerParameters(command=sys.executable, args=["-m", "examples.mcp_server"], cwd=ROOT)
# What replay starts instead of the server: a process that exits at once, reading nothing.
GONE = StdioServerParameters(command=sys.executable, args=["-c", "pass"], cwd=ROOT)

Connect = Callable[[], AbstractAsyncContextManager[Any]]


def stdio(params: StdioServerParameters) -> Connect:
    return lambda: stdio_client(params)


def http(url: str) -> Connect:
    return lambda: streamable_http_client(url)


@asynccontextmanager
async def session(connect: Connect) -> AsyncIterator[ClientSession]:
    async with connect() as streams, ClientSession(*streams) as client:
        await client.initialize()
        yield client


async def weather(connect: Connect, city: str, *, extra: bool = False) -> str:
    """The agent: lists the server's tools, then calls the weather tool."""
    async with session(connect) as client:
        listed = await client.list_tools()
        assert "get_weather" in [t.name for t in listed.tools]
        result = await client.call_tool("get_weather", {"city": city})
        if extra:
            await client.call_tool("add", {"a": 1, "b": 2})
        block = result.content[0]
        assert isinstance(block, mcp_types.TextContent)
        return block.text


instrumented = instrumented_fixture("mcp")


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """The example server over streamable HTTP, on a free port; its URL."""
    port = int(closed_url().rsplit(":", 1)[1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "examples.mcp_server", "--http", str(port)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # uvicorn says when it listens
            if "Uvicorn running on" in line:
                break
        else:
            pytest.fail(f"the MCP server exited with {proc.wait()}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait()


def record(capture: Any, connect: Connect, city: str = "Oslo") -> tuple[str, dict[str, Any]]:
    with tracely.agent("weather", input={"args": [city], "kwargs": {}}) as run:
        run.output = asyncio.run(weather(connect, city))
    return run.output, json.loads(json.dumps(capture.last_bundle))


def case(bundle: dict[str, Any], output: str, city: str = "Oslo") -> ReplayCase:
    return ReplayCase(
        id="oslo",
        name="Oslo weather",
        version=1,
        entrypoint=None,
        input={"args": [city], "kwargs": {}},
        expected_output=output,
        bundle=bundle,
    )


def test_tool_calls_over_stdio_are_recorded_as_tool_entries(
    capture: Any, instrumented: None
) -> None:
    output, bundle = record(capture, stdio(SERVER))
    assert output == "Oslo: cloudy, 4 C"
    tools = bundle["tools"]
    assert list(tools) == ["mcp:initialize", "mcp:tools/list", "get_weather"]
    (entry,) = tools["get_weather"]
    assert entry["args"] == {"city": "Oslo"}
    assert entry["output_type"] == "mcp.CallToolResult"
    assert entry["output"]["content"] == [{"type": "text", "text": "Oslo: cloudy, 4 C"}]
    (span,) = [s for s in capture.spans if s.name == "execute_tool get_weather"]
    assert span.attributes["gen_ai.tool.type"] == "extension"
    assert span.attributes["gen_ai.tool.name"] == "get_weather"
    assert span.attributes["mcp.method.name"] == "tools/call"


def test_a_stdio_recording_replays_with_the_server_gone(capture: Any, instrumented: None) -> None:
    output, bundle = record(capture, stdio(SERVER))
    result = run_case(case(bundle, output), lambda city: weather(stdio(GONE), city))
    assert result.verdict == "PASS", result.reasons
    assert result.output == output
    assert result.served == ["tools:mcp:initialize", "tools:mcp:tools/list", "tools:get_weather"]


def test_replay_serves_the_sdks_own_result_types(capture: Any, instrumented: None) -> None:
    _, bundle = record(capture, stdio(SERVER))

    async def agent() -> tuple[Any, Any, Any]:
        async with stdio_client(GONE) as streams, ClientSession(*streams) as client:
            init = await client.initialize()
            return (
                init,
                await client.list_tools(),
                await client.call_tool("get_weather", {"city": "Oslo"}),
            )

    with tracely.fixtures(bundle) as rep:
        init, listed, called = asyncio.run(agent())
    assert isinstance(init, mcp_types.InitializeResult)
    assert init.server_info.name == "weather"
    assert isinstance(listed, mcp_types.ListToolsResult)
    assert {t.name for t in listed.tools} == {"get_weather", "add", "forecast"}
    assert isinstance(called, mcp_types.CallToolResult)
    assert called.structured_content == {"result": "Oslo: cloudy, 4 C"}
    assert rep.clean
    assert "ClientSession.call_tool" in rep.providers


def test_a_streamable_http_recording_replays_with_nothing_listening(
    capture: Any, instrumented: None, http_server: str
) -> None:
    output, bundle = record(capture, http(http_server))
    assert output == "Oslo: cloudy, 4 C"
    gone = closed_url("/mcp")
    result = run_case(case(bundle, output), lambda city: weather(http(gone), city))
    assert result.verdict == "PASS", result.reasons


def test_changed_arguments_are_incomplete_with_the_difference(
    capture: Any, instrumented: None
) -> None:
    output, bundle = record(capture, stdio(SERVER))
    result = run_case(case(bundle, output), lambda city: weather(stdio(GONE), "Lisbon"))
    assert result.verdict == "INCOMPLETE"
    assert "tools:get_weather" in result.reasons[0]
    assert "Lisbon" in result.reasons[0] and "Oslo" in result.reasons[0]


def test_an_extra_tool_call_is_incomplete(capture: Any, instrumented: None) -> None:
    output, bundle = record(capture, stdio(SERVER))
    result = run_case(case(bundle, output), lambda city: weather(stdio(GONE), city, extra=True))
    assert result.verdict == "INCOMPLETE"
    assert "tools:add" in result.reasons[0]


def test_another_request_in_recorded_replay_is_refused_not_sent(
    capture: Any, instrumented: None
) -> None:
    _, bundle = record(capture, stdio(SERVER))

    async def agent() -> Any:
        async with session(stdio(GONE)) as client:
            return await _outcome(client.list_resources())

    with tracely.fixtures(bundle):
        refused = asyncio.run(agent())
    assert isinstance(refused, tracely.ReplayError)
    assert "'resources/list'" in str(refused) and "acall_tool" in str(refused)


def test_a_protocol_error_is_recorded_and_replayed_as_the_sdks_error(
    capture: Any, instrumented: None
) -> None:
    from mcp.shared.exceptions import MCPError

    async def agent(connect: Connect) -> tuple[Any, Any]:
        async with session(connect) as client:
            refused = await _outcome(client.call_tool("forecast", {"city": "Oslo", "days": 9}))
            unknown = await client.call_tool("no_such_tool", {})
            return refused, unknown

    with tracely.agent("weather", input="q"):
        live_refused, live_unknown = asyncio.run(agent(stdio(SERVER)))
    assert isinstance(live_refused, MCPError)
    bundle = json.loads(json.dumps(capture.last_bundle))
    assert bundle["tools"]["forecast"][0]["error"]["code"] == live_refused.code
    with tracely.fixtures(bundle) as rep:
        refused, unknown = asyncio.run(agent(stdio(GONE)))
    assert isinstance(refused, MCPError)
    assert (refused.code, refused.message) == (live_refused.code, live_refused.message)
    assert unknown.is_error and unknown == live_unknown
    assert rep.clean


def test_live_tools_run_against_the_server_with_the_model_side_served(
    capture: Any, instrumented: None
) -> None:
    output, bundle = record(capture, stdio(SERVER))
    result = run_case(
        case(bundle, output), lambda city: weather(stdio(SERVER), city), live=["tools:*"]
    )
    assert result.verdict == "PASS", result.reasons
    checks = result.report["live_checks"]
    assert [c["label"] for c in checks] == [
        "tools:mcp:initialize",
        "tools:mcp:tools/list",
        "tools:get_weather",
    ]
    assert all(c["equal"] for c in checks)


def test_a_server_that_answers_differently_fails_live_replay_with_the_diff(
    capture: Any, instrumented: None
) -> None:
    output, bundle = record(capture, stdio(SERVER))
    changed = SERVER.model_copy(update={"env": {"WEATHER_SKY": "sunny"}})
    result = run_case(
        case(bundle, output), lambda city: weather(stdio(changed), city), live=["tools:*"]
    )
    assert result.verdict == "FAIL"
    (live_reason,) = [r for r in result.reasons if "ran live" in r]
    assert live_reason.startswith("tools:get_weather ran live and differs from the recording:")
    assert 'output.content[0].text: recorded "Oslo: cloudy, 4 C" now "Oslo: sunny, 4 C"' in (
        live_reason
    )


async def _outcome(coro: Any) -> Any:
    """What ``coro`` returned, or the exception it raised."""
    try:
        return await coro
    except Exception as exc:
        return exc
