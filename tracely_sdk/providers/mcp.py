"""The MCP client patch: ``ClientSession`` tool calls recorded live and served on replay.

Every ``ClientSession.call_tool(name, arguments)`` is a tracely tool call: a ``tools:NAME``
entry (span ``execute_tool NAME``, ``gen_ai.tool.type`` ``extension``: the tool runs in
another process, the MCP server, not in the application), matched on replay by its
arguments like any ``call_tool``. The session's own protocol calls that an agent makes before
calling tools are recorded as tool calls too, under names no MCP tool can have (a tool name
holds no ``:``):

- ``tools:mcp:initialize``: the handshake's result (server info, capabilities);
- ``tools:mcp:tools/list``: ``list_tools`` (its pagination params are the args).

So a recorded run replays with the MCP server gone: the session serves its handshake, its
tool list and its tool results from the recording. Replay serves the SDK's own result types
(``InitializeResult``, ``ListToolsResult``, ``CallToolResult``), each rebuilt from the recorded
JSON by the model this module names for the method, never by a name read from the recording.
A tool call the server answered with a JSON-RPC error is recorded as the failure and raised
again on replay as the SDK's ``MCPError`` with the recorded code and message.

In recorded (strict) replay any other request the session would send (``list_resources``,
``read_resource``, ``get_prompt``, ``send_ping``, ...) raises ReplayError instead of waiting
on a server that is not there: wrap such a call in ``tracely.acall_tool`` to record it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from tracely_otel import attributes as A
from tracely_sdk import _replay
from tracely_sdk._seam import Call, _async_call
from tracely_sdk.errors import RecordedError, ReplayError
from tracely_sdk.providers import _install
from tracely_sdk.providers._install import Wrapper

__all__ = ["INITIALIZE", "LIST_TOOLS", "install", "patched", "set_live", "uninstall"]

NAME = "mcp"
INITIALIZE = "mcp:initialize"
"""The tool name the session handshake is recorded under (label ``tools:mcp:initialize``)."""
LIST_TOOLS = "mcp:tools/list"
"""The tool name ``list_tools`` is recorded under (label ``tools:mcp:tools/list``)."""

TOOL_TYPE_EXTENSION = "extension"  # the conventions' type of a tool run outside the application
MCP_METHOD_NAME = "mcp.method.name"

_live = False
# Set while a patched method runs live: the requests it sends are the call's own, not ones the
# recorded-mode net must stop.
_running: contextvars.ContextVar[bool] = contextvars.ContextVar("tracely_mcp_live", default=False)


def _session_class() -> type:
    from mcp.client.session import ClientSession

    return ClientSession


class _ResultCodec:
    """Records an MCP result as its JSON (by alias, as on the wire) and rebuilds it with the
    SDK's model for the method."""

    def __init__(self, model: type, tag: str) -> None:
        self.model = model
        self.tag = tag

    def record(self, result: Any) -> tuple[Any, str | None]:
        dump = getattr(result, "model_dump", None)
        if dump is None:  # not the SDK's model (another wrapper changed it): record it as is
            return result, None
        return dump(mode="json", by_alias=True, exclude_none=True), self.tag

    def rebuild(self, output_json: bytes, entry: Mapping[str, Any]) -> Any:
        return self.model.model_validate_json(output_json)  # type: ignore[attr-defined]

    def served_attributes(self, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return None

    def record_error(self, exc: BaseException) -> dict[str, Any]:
        record: dict[str, Any] = {"type": type(exc).__qualname__, "message": str(exc)}
        error = getattr(exc, "error", None)
        code = getattr(error, "code", None)
        if type(exc).__qualname__ == "MCPError" and type(code) is int:
            record["message"] = str(getattr(error, "message", exc))
            record["code"] = code
        return record

    def raise_error(self, error: Mapping[str, Any], label: str) -> NoReturn:
        code = error.get("code")
        if error.get("type") == "MCPError" and type(code) is int:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code, str(error.get("message")))
        raise RecordedError(label, str(error.get("type")), str(error.get("message")))


def _codecs() -> dict[str, _ResultCodec]:
    import mcp_types

    return {
        "call_tool": _ResultCodec(mcp_types.CallToolResult, "mcp.CallToolResult"),
        "list_tools": _ResultCodec(mcp_types.ListToolsResult, "mcp.ListToolsResult"),
        "initialize": _ResultCodec(mcp_types.InitializeResult, "mcp.InitializeResult"),
    }


def _wanted() -> bool:
    return _live or _replay.current_session() is not None


async def _run(call: Call, fn: Callable[[], Any]) -> Any:
    async def live() -> Any:
        token = _running.set(True)
        try:
            return await fn()
        finally:
            _running.reset(token)

    return await _async_call(call, live)


def _call(name: str, args: Any, codec: _ResultCodec, method: str) -> Call:
    return Call(
        A.KIND_TOOL,
        name,
        args=args,
        codec=codec,
        attributes={A.GEN_AI_TOOL_TYPE: TOOL_TYPE_EXTENSION, MCP_METHOD_NAME: method},
    )


def _wrappers() -> list[tuple[str, Wrapper]]:
    codecs = _codecs()

    async def call_tool(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        if not _wanted() or _running.get():
            return await wrapped(*args, **kwargs)
        name = args[0] if args else kwargs.get("name")
        arguments = args[1] if len(args) > 1 else kwargs.get("arguments")
        call = _call(str(name), arguments or {}, codecs["call_tool"], "tools/call")
        return await _run(call, lambda: wrapped(*args, **kwargs))

    async def list_tools(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        if not _wanted() or _running.get():
            return await wrapped(*args, **kwargs)
        params = kwargs.get("params")
        if params is not None and hasattr(params, "model_dump"):
            params = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        call = _call(LIST_TOOLS, params or {}, codecs["list_tools"], "tools/list")
        return await _run(call, lambda: wrapped(*args, **kwargs))

    async def initialize(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        if not _wanted() or _running.get():
            return await wrapped(*args, **kwargs)
        if getattr(instance, "_initialize_result", None) is not None:
            return await wrapped(*args, **kwargs)  # already done: no request, nothing to record
        call = _call(INITIALIZE, {}, codecs["initialize"], "initialize")
        result = await _run(call, lambda: wrapped(*args, **kwargs))
        if call.served:
            # The served handshake sets the session up as the live one did, without the wire.
            instance.adopt(result)
        return result

    async def send_request(
        wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
    ) -> Any:
        session = None if _running.get() else _replay.current_session()
        if session is not None and session.strict:
            request = args[0] if args else kwargs.get("request")
            method = getattr(request, "method", type(request).__name__)
            raise ReplayError(
                f"an MCP {method!r} request would reach the server during a recorded replay; "
                "tracely records ClientSession.initialize, list_tools and call_tool. Wrap this "
                "call in tracely.acall_tool(...) so it is recorded and served too",
                label=f"tools:mcp:{method}",
            )
        return await wrapped(*args, **kwargs)

    return list(zip(_METHODS, (call_tool, list_tools, initialize, send_request), strict=True))


_METHODS = ("call_tool", "list_tools", "initialize", "send_request")


def install() -> None:
    """Patch ``ClientSession`` (idempotent)."""
    owner = _session_class()
    for method, wrapper in _wrappers():
        _install.install(owner, method, wrapper)


def uninstall() -> None:
    """Remove the patches (see :func:`tracely_sdk.providers.uninstrument`)."""
    owner = _session_class()
    for method in _METHODS:
        _install.uninstall(owner, method)


def set_live(live: bool) -> None:
    """Record calls outside fixtures() blocks too (``instrument``)."""
    global _live
    _live = live


def patched() -> list[str]:
    """The patched methods, as ``rep.providers`` names them."""
    owner = _session_class()
    return [
        f"ClientSession.{method}" for method in _METHODS[:3] if _install.is_installed(owner, method)
    ]
