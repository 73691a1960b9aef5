"""The provider layer every adapter shares: its on/off state, and replayed streams closed when
their block has ended."""

from __future__ import annotations

from typing import Any

import openai

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.providers._helpers import closed_url, user
from tracely_sdk import providers
from tracely_sdk._replay import current_session
from tracely_sdk.providers import anthropic as tracely_anthropic
from tracely_sdk.providers import openai as tracely_openai
from tracely_sdk.providers.http import _anthropic_messages, _openai_chat


def _stream(client: Any) -> Any:
    return client.chat.completions.create(
        model="gpt-4o", messages=user("stream these words"), stream=True
    )


def test_a_replayed_stream_outliving_its_block_is_closed_when_the_next_block_starts(
    capture: Any,
) -> None:
    providers.instrument("openai")
    try:
        with serve() as (server, _):
            live = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
            with tracely.agent("agent"):
                list(_stream(live))
        bundle = capture.last_bundle
        client = openai.OpenAI(api_key="k", base_url=closed_url("/v1"), max_retries=0)
        with tracely.fixtures(bundle):
            session = current_session()  # kept alive past its block
            stream = _stream(client)
        assert not stream.response.is_closed  # still readable after the block
        with tracely.fixtures({}):
            pass
        assert stream.response.is_closed
        assert session is not None
    finally:
        providers.uninstrument("openai")


def test_each_adapter_has_its_own_on_off_state() -> None:
    providers.instrument("openai")
    try:
        assert tracely_openai.LAYER.live
        assert not tracely_anthropic.LAYER.live
    finally:
        providers.uninstrument("openai")
    assert not tracely_openai.LAYER.live


def test_both_wire_codecs_and_the_span_readers_convert_message_parts_alike() -> None:
    from tracely_otel._foreign import input_messages

    tool_result = [{"type": "text", "text": "rainy, "}, {"type": "text", "text": "57F"}]
    chat = [{"role": "tool", "tool_call_id": "call_1", "content": tool_result}]
    (openai_message,) = _openai_chat.messages({"messages": chat})
    assert openai_message["parts"] == [
        {"type": "tool_call_response", "id": "call_1", "response": "rainy, 57F"}
    ]
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
    }
    blocks = [
        {"type": "tool_result", "tool_use_id": "call_1", "content": tool_result},
        image,
    ]
    (anthropic_message,) = _anthropic_messages.messages(
        {"messages": [{"role": "user", "content": blocks}]}
    )
    expected = [
        {"type": "tool_call_response", "id": "call_1", "response": "rainy, 57F"},
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "iVBO"},
    ]
    assert anthropic_message["parts"] == expected
    (read,) = input_messages([{"role": "user", "content": blocks}])
    assert read["parts"] == expected
