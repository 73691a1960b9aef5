"""tracely's spans say what the GenAI semantic conventions ask, checked against their table.

``data/gen_ai_spans.json`` is the conventions' span definitions (``model/gen-ai/spans.yaml``
of the semantic-conventions-genai repository, at the commit it names) reduced to each span
type's attributes and requirement levels. Each test makes real spans (the real OpenAI and
Anthropic SDKs against the local LLM server) and checks them against that table: a required
attribute missing, or an attribute the span type does not define, fails here.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.providers._helpers import closed_url
from tests.sdk.providers.test_openai_patch import WEATHER_TOOL
from tracely_otel import attributes as A
from tracely_sdk import providers

_TABLE = json.loads((Path(__file__).parent / "data" / "gen_ai_spans.json").read_text())
SPANS: dict[str, dict[str, str]] = _TABLE["spans"]
# The namespaces the conventions define for these spans; tracely.* is tracely's own.
_CONVENTION_NAMESPACES = ("gen_ai.", "openai.", "server.", "error.")


def conforms(span: ReadableSpan, span_type: str) -> None:
    """``span`` has every attribute ``span_type`` requires and none it does not define."""
    table = SPANS[span_type]
    attributes = dict(span.attributes or {})
    missing = [
        name for name, level in table.items() if level == "required" and name not in attributes
    ]
    assert not missing, f"{span.name}: required by {span_type} but missing: {missing}"
    unknown = [
        name for name in attributes if name.startswith(_CONVENTION_NAMESPACES) and name not in table
    ]
    assert not unknown, f"{span.name}: not defined for {span_type}: {unknown}"


def kind(capture: Any, value: str) -> list[ReadableSpan]:
    return [s for s in capture.spans if (s.attributes or {}).get(A.KIND) == value]


@pytest.fixture
def instrumented() -> Any:
    providers.instrument("openai")
    providers.instrument("anthropic")
    yield
    providers.uninstrument("openai")
    providers.uninstrument("anthropic")


def test_the_vendored_table_names_its_source_commit() -> None:
    source = _TABLE["source"]
    assert source["repository"].endswith("/semantic-conventions-genai")
    assert len(source["commit"]) == 40 and int(source["commit"], 16) >= 0


def test_every_gen_ai_name_tracely_writes_is_one_the_conventions_define() -> None:
    defined = {name for table in SPANS.values() for name in table}
    legacy = {A.GEN_AI_SYSTEM}  # only read, from spans of older instrumentors
    written = {
        value
        for key, value in vars(A).items()
        if key.startswith(("GEN_AI_", "OPENAI_")) and isinstance(value, str)
    }
    assert written - legacy - defined == set()


def test_a_call_llm_span_names_the_provider_the_model_id_tells(capture: Any) -> None:
    with tracely.agent("support-agent"):
        tracely.call_llm("gpt-4o", lambda: "hi")
        tracely.call_llm("claude-sonnet-4-5", lambda: "hi")
        tracely.call_llm("in-house-7b", lambda: "hi")
    providers_named = [s.attributes[A.GEN_AI_PROVIDER_NAME] for s in kind(capture, A.KIND_LLM)]
    assert providers_named == ["openai", "anthropic", A.PROVIDER_OTHER]
    for span in kind(capture, A.KIND_LLM):
        conforms(span, "gen_ai.inference.client")


def test_call_llm_takes_the_provider_it_is_given(capture: Any) -> None:
    tracely.call_llm("in-house-7b", lambda: "hi", provider="aws.bedrock")
    (span,) = kind(capture, A.KIND_LLM)
    assert span.attributes[A.GEN_AI_PROVIDER_NAME] == "aws.bedrock"


def test_a_provider_that_is_not_a_name_is_refused() -> None:
    with pytest.raises(TypeError, match="provider='openai'"):
        tracely.call_llm("gpt-4o", lambda: "hi", provider="")


def test_acall_llm_takes_the_provider_it_is_given(capture: Any) -> None:
    async def answer() -> str:
        return "hi"

    asyncio.run(tracely.acall_llm("in-house-7b", answer, provider="groq"))
    (span,) = kind(capture, A.KIND_LLM)
    assert span.attributes[A.GEN_AI_PROVIDER_NAME] == "groq"


def test_an_agent_span_names_the_provider_of_its_first_llm_call(capture: Any) -> None:
    with tracely.agent("support-agent"):
        tracely.call_llm("model-x", lambda: "hi", provider="mistral_ai")
        tracely.call_llm("gpt-4o", lambda: "hi")
    with tracely.agent("no-llm-agent"):
        tracely.call_tool("lookup", lambda: 1)
    first, second = kind(capture, A.KIND_AGENT)
    assert first.attributes[A.GEN_AI_PROVIDER_NAME] == "mistral_ai"
    assert second.attributes[A.GEN_AI_PROVIDER_NAME] == A.PROVIDER_OTHER
    for span in (first, second):
        conforms(span, "gen_ai.invoke_agent.internal")


def test_a_tool_span_has_its_type_and_an_observed_tools_docstring(capture: Any) -> None:
    @tracely.observe(as_type="tool")
    def get_weather(city: str) -> str:
        """The current weather in ``city``."""
        return "sunny"

    get_weather("Paris")
    tracely.call_tool("lookup", lambda: 1, args={"id": 1})
    observed, plain = kind(capture, A.KIND_TOOL)
    assert observed.attributes[A.GEN_AI_TOOL_TYPE] == "function"
    assert observed.attributes[A.GEN_AI_TOOL_DESCRIPTION] == "The current weather in ``city``."
    assert plain.attributes[A.GEN_AI_TOOL_TYPE] == "function"
    assert A.GEN_AI_TOOL_DESCRIPTION not in plain.attributes
    for span in (observed, plain):
        conforms(span, "gen_ai.execute_tool.internal")


def _ask_for_weather(client: Any) -> Any:
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER_TOOL],
    )


def test_a_tool_span_answering_a_models_tool_call_carries_its_id(
    capture: Any, instrumented: None
) -> None:
    with serve() as (server, _):
        client = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
        with tracely.agent("agent"):
            completion = _ask_for_weather(client)
            (asked,) = completion.choices[0].message.tool_calls
            tracely.call_tool("get_weather", lambda: "rainy", args={"city": "Paris"})
            tracely.call_tool("get_weather", lambda: "rainy", args={"city": "Paris"})
    bundle = capture.last_bundle
    answered, unasked = kind(capture, A.KIND_TOOL)
    assert answered.attributes[A.GEN_AI_TOOL_CALL_ID] == asked.id
    assert A.GEN_AI_TOOL_CALL_ID not in unasked.attributes  # the one call was answered once

    # Replayed, the served response asks for the same call, and the tool span says so again.
    client = openai.OpenAI(api_key="k", base_url=closed_url("/v1"), max_retries=0)
    with tracely.fixtures(bundle):
        _ask_for_weather(client)
        tracely.call_tool("get_weather", lambda: "rainy", args={"city": "Paris"})
    replayed = kind(capture, A.KIND_TOOL)[-1]
    assert replayed.attributes[A.GEN_AI_TOOL_CALL_ID] == asked.id


def test_a_tool_call_id_goes_to_the_call_with_the_asked_arguments() -> None:
    from tracely_sdk import _tool_calls

    _tool_calls.expect(
        [
            {
                "role": "assistant",
                "parts": [
                    {
                        "type": "tool_call",
                        "id": "a",
                        "name": "get_weather",
                        "arguments": '{"city": "Oslo"}',
                    },
                    {
                        "type": "tool_call",
                        "id": "b",
                        "name": "get_weather",
                        "arguments": {"city": "Rome"},
                    },
                ],
            }
        ]
    )
    assert _tool_calls.answer("get_weather", {"city": "Rome"}) == "b"
    assert _tool_calls.answer("get_time", None) is None
    assert _tool_calls.answer("get_weather", {"city": "Paris"}) == "a"
    assert _tool_calls.answer("get_weather", {"city": "Oslo"}) is None


def test_an_openai_stream_says_it_streamed_and_when_its_first_chunk_came(
    capture: Any, instrumented: None
) -> None:
    with serve() as (server, _):
        client = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
        with tracely.agent("agent"):
            stream = client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi there"}], stream=True
            )
            with stream:
                list(stream)
            client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
    streamed, plain = kind(capture, A.KIND_LLM)
    assert streamed.attributes[A.GEN_AI_REQUEST_STREAM] is True
    first_chunk = streamed.attributes[A.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
    assert isinstance(first_chunk, float) and first_chunk >= 0
    # "If and only if the request is streaming": a plain call carries neither.
    assert A.GEN_AI_REQUEST_STREAM not in plain.attributes
    assert A.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in plain.attributes
    for span in (streamed, plain):
        assert span.attributes[A.OPENAI_API_TYPE] == "chat_completions"
        assert span.attributes[A.OPENAI_RESPONSE_SERVICE_TIER] == "default"
        assert span.attributes[A.OPENAI_RESPONSE_SYSTEM_FINGERPRINT] == "fp_llm_server"
        conforms(span, "openai.inference.client")


def test_an_openai_request_names_a_service_tier_other_than_auto(
    capture: Any, instrumented: None
) -> None:
    with serve() as (server, _):
        client = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
        for tier in ("flex", "auto"):
            client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}], service_tier=tier
            )
    flex, auto = kind(capture, A.KIND_LLM)
    assert flex.attributes[A.OPENAI_REQUEST_SERVICE_TIER] == "flex"
    assert A.OPENAI_REQUEST_SERVICE_TIER not in auto.attributes


def test_a_responses_api_span_names_its_api(capture: Any, instrumented: None) -> None:
    with serve() as (server, _):
        client = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
        client.responses.create(model="gpt-4o", input="hi")
    (span,) = kind(capture, A.KIND_LLM)
    assert span.attributes[A.OPENAI_API_TYPE] == "responses"
    conforms(span, "openai.inference.client")


def test_an_anthropic_stream_says_it_streamed(capture: Any, instrumented: None) -> None:
    with serve() as (server, _):
        client = anthropic.Anthropic(api_key="k", base_url=server.anthropic_base_url, max_retries=0)
        with client.messages.stream(
            model="claude-sonnet-4-5",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi there"}],
        ) as stream:
            stream.get_final_message()
    (span,) = kind(capture, A.KIND_LLM)
    assert span.attributes[A.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert span.attributes[A.GEN_AI_REQUEST_STREAM] is True
    assert span.attributes[A.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0
    conforms(span, "anthropic.inference.client")


def test_a_failed_call_has_the_error_type_the_conventions_require(capture: Any) -> None:
    def broken() -> str:
        raise TimeoutError("upstream")

    with pytest.raises(TimeoutError):
        tracely.call_llm("gpt-4o", broken)
    (span,) = kind(capture, A.KIND_LLM)
    assert span.attributes[A.ERROR_TYPE] == "TimeoutError"
    conforms(span, "gen_ai.inference.client")


def test_a_tool_span_answering_an_anthropic_tool_use_carries_its_id(
    capture: Any, instrumented: None
) -> None:
    tool = {
        "name": "get_weather",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    with serve() as (server, _):
        client = anthropic.Anthropic(api_key="k", base_url=server.anthropic_base_url, max_retries=0)
        with tracely.agent("agent"):
            message = client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=64,
                messages=[{"role": "user", "content": "What is the weather in Paris?"}],
                tools=[tool],
            )
            (asked,) = [b for b in message.content if b.type == "tool_use"]
            tracely.call_tool("get_weather", lambda: "rainy", args=asked.input)
            tracely.call_tool("get_weather", lambda: "rainy", args=asked.input)
    answered, unasked = kind(capture, A.KIND_TOOL)
    assert answered.attributes[A.GEN_AI_TOOL_CALL_ID] == asked.id
    assert A.GEN_AI_TOOL_CALL_ID not in unasked.attributes


def test_a_google_genai_span_conforms_plain_and_streamed(capture: Any) -> None:
    from google import genai
    from google.genai import types

    providers.instrument("google")
    try:
        with serve() as (server, _):
            options = types.HttpOptions(base_url=server.gemini_base_url)
            client = genai.Client(api_key="k", http_options=options)
            config = types.GenerateContentConfig(temperature=0.2, top_p=0.9, max_output_tokens=64)
            client.models.generate_content(model="gemini-2.5-flash", contents="hi", config=config)
            list(client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"))
    finally:
        providers.uninstrument("google")
    plain, streamed = kind(capture, A.KIND_LLM)
    # The Gemini API's own name (Vertex AI's is gcp.vertex_ai), read from the host called.
    assert plain.attributes[A.GEN_AI_PROVIDER_NAME] == "gcp.gemini"
    assert streamed.attributes[A.GEN_AI_REQUEST_STREAM] is True
    assert streamed.attributes[A.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0
    for span in (plain, streamed):
        conforms(span, "gen_ai.inference.client")
