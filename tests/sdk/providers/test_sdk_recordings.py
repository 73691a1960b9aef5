"""Recordings made by the SDK patches of tracely-replay 0.5 and earlier: the call's arguments as
its input, the SDK's response as its output, with the SDK's own type tags
(``data/sdk_recordings_0.json``, recorded by that version against the local stand-in).

Today every SDK call is recorded and served at the HTTP client. Such an entry still replays
where the response it holds is the body (or the events) the wire carried, for the same shape of
call; anything else is refused, naming the version that reads it and saying to re-record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

import tracely_sdk as tracely
from tests.sdk.providers._helpers import closed_url, user

RECORDINGS: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "sdk_recordings_0.json").read_text()
)
GPT = "gpt-4o"


def _openai() -> openai.OpenAI:
    return openai.OpenAI(api_key="k", base_url=closed_url("/v1"), max_retries=0)


def test_the_recordings_are_in_the_sdk_patches_form() -> None:
    (entry,) = RECORDINGS["openai_chat"]["llm"][GPT]
    assert entry["output_type"] == "openai.chat.completion"
    assert entry["provider"] == "OpenAI.chat.completions.create"
    assert entry["input"] == {"messages": user("Hello there")}


def test_an_openai_chat_completion_replays_clean() -> None:
    with tracely.fixtures(RECORDINGS["openai_chat"]) as rep:
        reply = _openai().chat.completions.create(model=GPT, messages=user("Hello there"))
    assert reply.choices[0].message.content == "You said: Hello there"
    assert reply.usage is not None and reply.usage.completion_tokens == 4
    assert rep.clean and rep.served == [f"llm:{GPT}"]


def test_a_changed_prompt_still_shows_as_divergence() -> None:
    with tracely.fixtures(RECORDINGS["openai_chat"]) as rep:
        _openai().chat.completions.create(model=GPT, messages=user("Hello, changed"))
    assert rep.diverged == [f"llm:{GPT}"]
    (divergence,) = rep.divergences
    assert "Hello, changed" in json.dumps(divergence["differences"])


def test_an_openai_stream_replays_as_its_chunks() -> None:
    with tracely.fixtures(RECORDINGS["openai_chat_stream"]) as rep:
        stream = _openai().chat.completions.create(
            model=GPT, messages=user("Hello streamed"), stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "You said: Hello streamed"
    assert rep.clean


def test_an_openai_response_replays_clean() -> None:
    with tracely.fixtures(RECORDINGS["openai_response"]) as rep:
        response = _openai().responses.create(model=GPT, input="Hello responses")
    assert response.output_text == "You said: Hello responses"
    assert rep.clean


def test_a_call_of_another_shape_is_refused_naming_the_version_that_reads_it() -> None:
    with (
        tracely.fixtures(RECORDINGS["openai_chat"]) as rep,
        pytest.raises(tracely.ReplayError) as raised,
    ):
        list(
            _openai().chat.completions.create(model=GPT, messages=user("Hello there"), stream=True)
        )
    message = str(raised.value)
    assert "openai.chat.completion by OpenAI.chat.completions.create" in message
    assert "tracely-replay 0.5" in message and "re-record" in message
    assert not rep.clean


def test_an_anthropic_message_replays_clean() -> None:
    client = anthropic.Anthropic(api_key="k", base_url=closed_url(), max_retries=0)
    with tracely.fixtures(RECORDINGS["anthropic_message"]) as rep:
        message = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=256, messages=user("Hello there")
        )
    assert message.content[0].text == "You said: Hello there"
    assert rep.clean


def test_a_google_genai_response_is_refused_naming_the_version_that_reads_it() -> None:
    client = genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url=closed_url(), retry_options=None)
    )
    with tracely.fixtures(RECORDINGS["google_response"]) as rep, pytest.raises(tracely.ReplayError):
        client.models.generate_content(model="gemini-2.5-flash", contents="Hello there")
    (refused,) = rep.errors
    message = str(refused)
    assert "google.genai.response by Client.models.generate_content" in message
    assert "tracely-replay 0.5" in message and "re-record" in message
    assert not rep.clean
