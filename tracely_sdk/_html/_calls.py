"""What a recorded call says, for a person: an LLM call's messages as a conversation, its reply,
its duration and token usage, and the run's calls as a waterfall.

Messages are read from the shapes recordings hold: a list of ``{"role", "content"}`` messages
or an object with ``messages`` (OpenAI chat, and Anthropic with its ``system``), content as a
string or a list of blocks (``text``, ``tool_use``, ``tool_result``), OpenAI's ``tool_calls``,
and the GenAI conventions' ``parts`` (``text``, ``tool_call``, ``tool_call_response``) and
Gemini's (``text``, ``functionCall``, ``functionResponse``). Anything else is shown as JSON.

The waterfall is SVG, drawn with attributes only: a page whose Content-Security-Policy allows
no inline style still draws it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from tracely_sdk._html._markup import Html, Node, join, tag
from tracely_sdk._html._values import MAX_SHOWN, cut, json_text, text_of, value_view, whole_view

__all__ = [
    "MAX_FIELDS",
    "MAX_MESSAGES",
    "MAX_PARTS",
    "MAX_WATERFALL",
    "call_facts",
    "conversation_view",
    "duration_text",
    "reply_view",
    "waterfall_view",
]

# A conversation shows at most this many messages (its first and its latest), and a message
# at most this many parts.
MAX_MESSAGES = 60
# An input's fields besides its messages (tools, options) shown one by one, at most this many.
MAX_FIELDS = 20
# A waterfall draws at most this many calls.
MAX_WATERFALL = 300
# A message's text is cut shorter than a value: a conversation shows many of them.
_MESSAGE_SHOWN = 4_000
# A message shows its parts (texts, blocks, tool calls; at most MAX_PARTS of each) while their
# HTML fits in this many times its text's cut.
_MESSAGE_BUDGET = 4
MAX_PARTS = 60
_BAR_WIDTH = 1000


def _compact(value: Any) -> str:
    text = value if isinstance(value, str) else json_text(value)
    return cut(text, 400)[0] + ("…" if len(text) > 400 else "")


_CUT_NOTE = "not shown here"


def _said(text: str, limit: int = _MESSAGE_SHOWN) -> Html:
    shown, more = cut(text, limit)
    note = f"\n… {more:,} more characters {_CUT_NOTE}" if more else None
    return tag("div", shown, note, class_="said")


def _call(name: Any, arguments: Any) -> Html:
    return tag(
        "div",
        "calls ",
        tag("code", str(name)),
        " ",
        tag("code", _compact(arguments)),
        class_="tool-call",
    )


def _result(value: Any) -> Html:
    return tag("div", "tool result: ", tag("code", _compact(value)), class_="tool-call")


def _block(block: Any, said: int = _MESSAGE_SHOWN) -> Html | None:
    """One part of a message's content, in any of the shapes in the module docstring."""
    if isinstance(block, str):
        return _said(block, said)
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "tool_call" or kind == "tool_use":
        return _call(block.get("name"), block.get("arguments", block.get("input")))
    if kind == "tool_call_response" or kind == "tool_result":
        return _result(block.get("response", block.get("content")))
    if "functionCall" in block and isinstance(block["functionCall"], Mapping):
        call = block["functionCall"]
        return _call(call.get("name"), call.get("args"))
    if "functionResponse" in block and isinstance(block["functionResponse"], Mapping):
        return _result(block["functionResponse"].get("response"))
    for key in ("text", "content"):
        if isinstance(block.get(key), str):
            return _said(block[key], said)
    return tag("div", tag("code", _compact(block)), class_="tool-call")


def _message(message: Any, said: int = _MESSAGE_SHOWN) -> tuple[str, list[Html]] | None:
    """A message's role and parts: its text, blocks and tool calls, each text cut to ``said``
    characters, shown while they fit in a few times that (a message may hold thousands)."""
    if not isinstance(message, Mapping):
        return None
    role = message.get("role", "user" if "parts" in message else None)
    if not isinstance(role, str):
        return None
    found: list[Callable[[], Html | None]] = []
    content = message.get("content", message.get("parts"))
    if isinstance(content, str):
        found.append(partial(_said, content, said))
    elif isinstance(content, list):
        found += [partial(_block, b, said) for b in content[:MAX_PARTS]]
    elif content is not None:
        return None
    calls = message.get("tool_calls")
    for call in calls[:MAX_PARTS] if isinstance(calls, list) else ():
        if isinstance(call, Mapping):
            function = call.get("function")
            if not isinstance(function, Mapping):
                function = call
            found.append(partial(_call, function.get("name"), function.get("arguments")))
    single = message.get("tool_call") or message.get("function_call")
    if isinstance(single, Mapping):
        found.append(partial(_call, single.get("name"), single.get("arguments")))
    dropped = sum(max(len(x) - MAX_PARTS, 0) for x in (content, calls) if isinstance(x, list))
    budget = _MESSAGE_BUDGET * said
    shown: list[Html] = []
    used = 0
    for make in found:
        if budget <= 0:
            break
        used += 1
        part = make()
        if part is not None:
            shown.append(part)
            budget -= len(part)
    left = len(found) - used + dropped
    if left:
        shown.append(tag("div", f"… {left:,} more parts {_CUT_NOTE}", class_="muted"))
    return role, shown or [tag("div", "(no content)", class_="muted")]


def _messages(value: Any) -> tuple[list[Any], dict[str, Any]] | None:
    """The messages of an LLM call's input, and the input's other fields (tools, options)."""
    if isinstance(value, Mapping) and "path" in value and isinstance(value.get("body"), Mapping):
        value = value["body"]  # a request recorded at the HTTP client: its JSON body
    if isinstance(value, list):
        return value, {}
    if not isinstance(value, Mapping):
        return None
    for key in ("messages", "contents"):
        if isinstance(value.get(key), list):
            messages = list(value[key])
            rest = {k: v for k, v in value.items() if k != key}
            system = rest.pop("system", None)
            if isinstance(system, (str, list)):
                messages.insert(0, {"role": "system", "content": system})
            elif system is not None:
                rest["system"] = system
            return messages, rest
    return None


def _size(message: Any, said: int) -> int:
    content = message.get("content") if isinstance(message, Mapping) else None
    size = len(content) if isinstance(content, str) else len(json_text(message))
    return min(size, said)


def _said_limit(limit: int) -> int:
    """How much of one message's text a conversation cut to ``limit`` characters shows: a
    third of it, so that the first message and the latest fit (and never more than a value)."""
    return min(_MESSAGE_SHOWN, max(limit // 3, 200))


def _chosen(messages: Sequence[Any], limit: int = MAX_SHOWN) -> list[int]:
    """Which messages a conversation shows: the first (the system prompt, as a rule) and the
    latest that fit in :data:`MAX_MESSAGES` and ``limit`` characters."""
    said = _said_limit(limit)
    budget = limit - _size(messages[0], said)
    latest: list[int] = []
    for i in range(len(messages) - 1, 0, -1):
        cost = _size(messages[i], said)
        if len(latest) + 1 >= MAX_MESSAGES or (cost > budget and latest):
            break
        budget -= cost
        latest.append(i)
    return [0, *reversed(latest)]


def conversation_view(
    value: Any, label: str = "input", *, full: str | None = None, limit: int = MAX_SHOWN
) -> Html | None:
    """An LLM call's input as a conversation, one message after another; None when it does
    not hold messages (the caller shows it as a value). A long one (past ``limit``
    characters) shows its first message and its latest, and the way to the whole input."""
    found = _messages(value)
    if found is None or not found[0]:
        return None
    messages, rest = found
    chosen = _chosen(messages, limit)
    said = _said_limit(limit)
    read = [_message(messages[i], said) for i in chosen]
    items: list[Node] = []
    before = -1
    for i, message in zip(chosen, read, strict=True):
        if message is None:
            return None
        if i > before + 1:
            items.append(tag("li", f"… {i - before - 1} earlier messages", class_="muted"))
        items.append(_turn(*message))
        before = i
    chat = tag("ol", items, class_="chat", aria_label=f"{label}: {len(messages)} messages")
    more: list[Node] = []
    fields = list(rest.items())[:MAX_FIELDS]
    each = max(limit // max(len(fields), 1), 200)  # the fields share the value's cut
    for key, field in fields:
        more.append(tag("div", f"{key}: ", value_view(field, str(key), full=full, limit=each)))
    if len(rest) > MAX_FIELDS:
        more.append(tag("div", f"… {len(rest) - MAX_FIELDS} more fields", class_="muted"))
    if len(chosen) < len(messages) or _CUT_NOTE in chat:
        more.append(whole_view(text_of(value), label, full=full))
    return join(chat, more)


def _turn(role: str, parts: list[Html]) -> Html:
    known = role in ("system", "user", "assistant", "tool", "model", "developer")
    return tag(
        "li", tag("span", role, class_="role"), parts, class_=f"msg r-{role if known else 'other'}"
    )


def reply_view(output: Any, limit: int = MAX_SHOWN) -> Html | None:
    """The assistant's message in an LLM call's output (a provider's response body or a
    message), as a conversation turn (its text cut as a conversation cut to ``limit`` cuts
    it); None when the output holds no message."""
    message: Any = None
    body = output.get("body") if isinstance(output, Mapping) else None
    for candidate in (body, output):
        if not isinstance(candidate, Mapping):
            continue
        choices = candidate.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            message = choices[0].get("message")
        elif candidate.get("type") == "message" or (
            "content" in candidate and ("role" in candidate or "tool_call" in candidate)
        ):
            message = {**candidate, "role": candidate.get("role", "assistant")}
        if message is not None:
            break
    read = _message(message, _said_limit(limit))
    if read is None:
        return None
    return tag("ol", _turn(*read), class_="chat", aria_label="reply")


def duration_text(ns: int) -> str:
    """A duration in nanoseconds as a person reads it: ``812 µs``, ``41.2 ms``, ``3.40 s``."""
    if ns < 1_000_000:
        return f"{ns / 1_000:.0f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1_000_000:.1f} ms"
    return f"{ns / 1_000_000_000:.2f} s"


def _times(step: Any) -> tuple[int, int] | None:
    if not isinstance(step, Mapping):
        return None
    start, end = step.get("started_at"), step.get("ended_at")
    if type(start) is int and type(end) is int and end >= start:
        return start, end
    return None


def _tokens(step: Mapping[str, Any]) -> tuple[int, int] | None:
    usage = step.get("usage")
    if isinstance(usage, (list, tuple)) and len(usage) == 2 and all(type(n) is int for n in usage):
        return usage[0], usage[1]
    return None


def call_facts(step: Mapping[str, Any]) -> list[Html]:
    """A recorded call's duration and token usage, each a small label (none when unknown)."""
    facts = []
    times = _times(step)
    if times is not None:
        facts.append(
            tag("span", duration_text(times[1] - times[0]), class_="fact", title="duration")
        )
    tokens = _tokens(step)
    if tokens is not None:
        facts.append(
            tag(
                "span",
                f"{tokens[0]:,} in · {tokens[1]:,} out tokens",
                class_="fact",
                title="token usage",
            )
        )
    return facts


def waterfall_view(
    steps: Sequence[Any], *, started_at: Any = None, ended_at: Any = None, title: str = "Waterfall"
) -> Html | None:
    """The recorded calls on one time axis, from ``started_at`` to ``ended_at`` (the agent
    run's, when known; else the calls' own), one bar per call; None when no call has times."""
    timed = [(s, t) for s in steps if (t := _times(s)) is not None]
    if not timed:
        return None
    start = min(t[0] for _, t in timed)
    end = max(t[1] for _, t in timed)
    if type(started_at) is int and started_at <= start:
        start = started_at
    if type(ended_at) is int and ended_at >= end:
        end = ended_at
    total = max(end - start, 1)
    rows = []
    for step, (begin, finish) in timed[:MAX_WATERFALL]:
        label = str(step.get("label") or "")
        x = (begin - start) * _BAR_WIDTH / total
        width = max((finish - begin) * _BAR_WIDTH / total, 2)
        kind = "llm" if label.startswith("llm:") else "tool"
        tokens = _tokens(step)
        rows.append(
            tag(
                "li",
                tag("code", label, class_="w-label"),
                tag(
                    "svg",
                    tag(
                        "rect",
                        tag("title", f"{label}: {duration_text(finish - begin)}"),
                        x=f"{min(x, _BAR_WIDTH - 2):.1f}",
                        y="0",
                        width=f"{width:.1f}",
                        height="10",
                        class_=f"w-{kind}",
                    ),
                    viewBox=f"0 0 {_BAR_WIDTH} 10",
                    preserveAspectRatio="none",
                    class_="w-bar",
                    role="img",
                    aria_label=f"from {duration_text(begin - start)} for {duration_text(finish - begin)}",
                ),
                tag(
                    "span",
                    duration_text(finish - begin),
                    f" · {tokens[0] + tokens[1]:,} tokens" if tokens else None,
                    class_="w-time",
                ),
                class_="w-row",
            )
        )
    if len(timed) > MAX_WATERFALL:
        rows.append(tag("li", f"… {len(timed) - MAX_WATERFALL} more calls", class_="muted"))
    usage = [u for s, _ in timed if (u := _tokens(s)) is not None]
    calls = "1 call" if len(timed) == 1 else f"{len(timed)} calls"
    summary = [f"{calls} in {duration_text(end - start)}"]
    if usage:
        summary.append(f"{sum(u[0] for u in usage):,} in · {sum(u[1] for u in usage):,} out tokens")
    return tag(
        "section",
        tag("h3", title, " ", tag("span", " · ".join(summary), class_="muted")),
        tag("ol", rows, class_="waterfall", aria_label="calls on a time axis"),
        class_="waterfall",
    )
