"""The tool calls a model asked for, so that the tool span answering one carries its id.

An LLM response that asks for tools (an OpenAI ``tool_calls`` entry, a Responses
``function_call`` item, an Anthropic ``tool_use`` block) leaves its calls here, in the
current context; the next ``call_tool`` or ``@observe`` tool of that name takes the id as
``gen_ai.tool.call.id``. A call whose arguments equal the asked ones (canonically) is
preferred, else the first asked call of that name. A newer response's calls replace older
ones: the application answers the latest request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, NamedTuple

from tracely_otel.genai import ChatMessage
from tracely_sdk._canonical import canonical_equal


class AskedCall(NamedTuple):
    """One tool call a model asked for."""

    id: str
    name: str
    arguments: Any


_asked: ContextVar[tuple[AskedCall, ...]] = ContextVar("tracely_asked_tool_calls", default=())


def expect(messages: Iterable[ChatMessage]) -> None:
    """Remember the ``tool_call`` parts of a response's GenAI output messages."""
    asked = tuple(
        AskedCall(call_id, name, part.get("arguments"))
        for message in messages
        for part in _parts(message)
        if part.get("type") == "tool_call"
        and isinstance(call_id := part.get("id"), str)
        and isinstance(name := part.get("name"), str)
    )
    if asked or _asked.get():
        _asked.set(asked)


def _parts(message: ChatMessage) -> Sequence[Mapping[str, object]]:
    return message.get("parts") or ()


def answer(name: str, args: Any) -> str | None:
    """The id of the asked call that a call to tool ``name`` with ``args`` answers, if any."""
    asked = _asked.get()
    chosen: int | None = None
    for index, call in enumerate(asked):
        if call.name != name:
            continue
        if chosen is None:
            chosen = index
        if args is not None and call.arguments is not None and _same(call.arguments, args):
            chosen = index
            break
    if chosen is None:
        return None
    _asked.set(asked[:chosen] + asked[chosen + 1 :])
    return asked[chosen].id


def _same(asked: Any, args: Any) -> bool:
    try:
        return canonical_equal(asked, args)
    except Exception:
        return False  # arguments the canonicaliser cannot read answer by name alone
