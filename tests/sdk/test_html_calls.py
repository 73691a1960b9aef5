"""Recorded calls for a person: messages as a conversation, the reply, duration and token
usage, and the run's waterfall, from recordings of the example agents."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import unescape
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from examples import openai_agent, weather_agent
from examples.llm_server import serve
from tracely_sdk import providers
from tracely_sdk._html._calls import (
    MAX_MESSAGES,
    MAX_WATERFALL,
    call_facts,
    conversation_view,
    duration_text,
    reply_view,
    waterfall_view,
)
from tracely_sdk._html._render import case_page
from tracely_sdk._replay import recorded_calls

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def weather(capture: Any) -> list[Any]:
    weather_agent.run("Paris")
    return recorded_calls(capture.last_bundle)


@pytest.fixture
def openai_calls(capture: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    providers.instrument("auto")
    try:
        with serve() as (_, base_url):
            monkeypatch.setenv("OPENAI_BASE_URL", base_url + "/v1")
            monkeypatch.setenv("OPENAI_API_KEY", "test-key")
            openai_agent.run("What's the weather in Paris?")
    finally:
        providers.uninstrument()
    yield recorded_calls(json.loads(json.dumps(capture.last_bundle)))


def _turns(html: str) -> list[tuple[str, str]]:
    """(role, text) of each message, markup dropped."""
    found = re.findall(
        r'<li class="msg r-[a-z]+"><span class="role">([^<]*)</span>(.*?)</li>', html
    )
    return [(role, unescape(re.sub(r"<[^>]+>", "", body))) for role, body in found]


def test_the_reference_agents_messages_are_a_conversation(weather: list[Any]) -> None:
    last = weather[2]
    chat = conversation_view(last["recorded"])
    assert chat is not None
    assert _turns(chat) == [
        ("system", weather_agent.SYSTEM),
        ("user", "What's the weather in Paris?"),
        ("assistant", 'Let me check the weather in Paris.calls get_weather {"city":"Paris"}'),
        ("tool", '{"city": "Paris", "temp_c": 18, "sky": "cloudy"}'),
    ]
    assert "tools: " in chat  # the input's other fields, as JSON
    reply = reply_view(last["output"])
    assert reply is not None and _turns(reply) == [("assistant", "It's 18°C and cloudy in Paris.")]


def test_an_openai_agents_messages_and_tool_calls_are_a_conversation(
    openai_calls: list[Any],
) -> None:
    first, tool, second = openai_calls
    assert [first["label"], tool["label"], second["label"]] == [
        "llm:gpt-4o-mini",
        "tools:get_weather",
        "llm:gpt-4o-mini",
    ]
    roles = [role for role, _ in _turns(conversation_view(second["recorded"]) or "")]
    assert roles == ["system", "user", "assistant", "tool"]
    (_, assistant_turn) = _turns(conversation_view(second["recorded"]) or "")[2]
    assert assistant_turn == 'calls get_weather {"city":"Paris"}'
    reply = reply_view(first["output"]) or ""
    assert _turns(reply) == [("assistant", 'calls get_weather {"city":"Paris"}')]
    assert "According to get_weather" in (reply_view(second["output"]) or "")


def test_genai_parts_and_anthropic_blocks_are_read_too() -> None:
    genai = [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "name": "f", "arguments": {"x": 1}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "response": {"y": 2}}]},
    ]
    assert [role for role, _ in _turns(conversation_view(genai) or "")] == [
        "user",
        "assistant",
        "tool",
    ]
    anthropic = {
        "system": "be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "max_tokens": 10,
    }
    chat = conversation_view(anthropic) or ""
    assert _turns(chat) == [("system", "be brief"), ("user", "hi")]
    assert "max_tokens: " in chat


def test_what_is_not_messages_is_left_to_be_shown_as_a_value() -> None:
    for value in ("hello", {"prompt": "hi"}, [1, 2], [{"content": "no role"}], [], None):
        assert conversation_view(value) is None
    assert reply_view("plain text") is None and reply_view({"answer": 1}) is None


def test_a_conversation_is_escaped_and_bounded() -> None:
    many = [{"role": "user", "content": HOSTILE}] * (MAX_MESSAGES + 5)
    many.append({"role": HOSTILE, "content": "x"})
    chat = conversation_view(many) or ""
    assert "<script>" not in chat
    assert chat.count('<li class="msg r-') == MAX_MESSAGES  # the first and the latest
    assert chat.count('<li class="msg r-other">') == 1  # the last, with its role escaped
    assert "… 6 earlier messages" in chat
    assert "the whole input (" in chat  # what was left out is one click away
    parts = [{"type": "text", "text": str(i)} for i in range(MAX_MESSAGES + 3)]
    blocks = conversation_view([{"role": "user", "content": parts}]) or ""
    assert blocks.count('class="said"') == MAX_MESSAGES and "… 3 more parts" in blocks
    long = conversation_view([{"role": "user", "content": "z" * 50_000}]) or ""
    assert "more characters not shown here" in long and "the whole input (" in long


def test_each_call_shows_its_duration_and_token_usage(weather: list[Any]) -> None:
    llm, tool, _ = weather
    facts = " ".join(call_facts(llm))
    assert "15 in · 7 out tokens" in facts
    assert duration_text(llm["ended_at"] - llm["started_at"]) in facts
    assert "tokens" not in " ".join(call_facts(tool))
    assert call_facts({"label": "tools:t"}) == []
    assert [duration_text(n) for n in (812_000, 41_240_000, 3_401_000_000)] == [
        "812 µs",
        "41.2 ms",
        "3.40 s",
    ]


def test_the_waterfall_draws_each_call_where_it_ran(weather: list[Any]) -> None:
    start = weather[0]["started_at"]
    end = weather[-1]["ended_at"]
    drawn = waterfall_view(weather, started_at=start, ended_at=end) or ""
    bars = re.findall(r'<rect x="([\d.]+)" y="0" width="([\d.]+)"[^>]*class="w-(llm|tool)"', drawn)
    assert [kind for _, _, kind in bars] == ["llm", "tool", "llm"]
    xs = [float(x) for x, _, _ in bars]
    assert xs[0] == 0 and xs == sorted(xs) and xs[2] < 1000
    assert float(bars[2][0]) + float(bars[2][1]) == pytest.approx(1000, abs=0.2)
    assert "3 calls in" in drawn and "43 in · 13 out tokens" in drawn
    assert " style=" not in drawn  # drawn under a policy that allows no inline style


def test_the_waterfall_is_bounded_and_absent_without_times() -> None:
    steps = [
        {"label": f"tools:{HOSTILE}", "started_at": i, "ended_at": i + 1}
        for i in range(MAX_WATERFALL + 7)
    ]
    drawn = waterfall_view(steps) or ""
    assert drawn.count("<rect") == MAX_WATERFALL and "… 7 more calls" in drawn
    assert "<script>" not in drawn
    assert waterfall_view([{"label": "tools:t", "output": 1}]) is None
    one = waterfall_view([{"label": "tools:t", "started_at": 5, "ended_at": 9}]) or ""
    assert "1 call in 0 µs" in one


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "parts",
                    "messages",
                    "system",
                    "tool_calls",
                    "function",
                    "name",
                    "arguments",
                    "type",
                    "text",
                    "choices",
                    "message",
                    "body",
                    "usage",
                    "started_at",
                    "ended_at",
                    "label",
                    "functionCall",
                    "tool_call",
                    "response",
                    "input",
                ]
            )
            | st.text(max_size=5),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


def _step(value: Any) -> dict[str, Any]:
    """A stored run's step holding ``value`` wherever a step holds a value."""
    keys = ("recorded", "output", "error", "actual", "usage", "started_at", "differences")
    return dict.fromkeys(keys, value)


@settings(max_examples=120, deadline=None)
@given(JSON)
def test_any_recorded_value_renders_without_error_and_escaped(value: Any) -> None:
    for html in (
        conversation_view(value),
        reply_view(value),
        waterfall_view([value, {"label": HOSTILE, "started_at": 1, "ended_at": 2}]),
        call_facts(value) if isinstance(value, dict) else None,
        case_page(
            {"verdict": "FAIL", "timeline": [value, {"label": "llm:m", "seq": 1, **_step(value)}]}
        ),
    ):
        assert "<script" not in str(html or "")


def test_calls_cut_short_stay_small_whatever_their_messages_hold() -> None:
    """Thousands of parts, tool calls and fields of 20,000 characters each: 20 such calls cut
    to 3,000 characters each make well under 1 MB, and each links to its whole values."""
    from tracely_sdk._html._render import timeline_view

    big = "x" * 20_000
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": big}] * 200,
        "tool_calls": [{"function": {"name": "f", "arguments": big}}] * 500,
    }
    steps = [
        {
            "outcome": "recorded",
            "label": "llm:m",
            "seq": i,
            "entry": f"llm:m #{i + 1}",
            "field": "input",
            "recorded": {"messages": [message] * 100, **{f"k{j}": big for j in range(50)}},
            "output": {"choices": [{"message": message}]},
        }
        for i in range(20)
    ]
    page = str(
        timeline_view(steps, right=None, full=lambda at, part: f"/v/{at}/{part}", limit=3_000)
    )
    assert len(page) < 1_000_000
    assert page.count('href="/v/19/input"') >= 1 and 'href="/v/19/output"' in page
    assert "more parts not shown here" in page
