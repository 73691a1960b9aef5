"""Extraction from spans tracely did not make.

The instrumentors here are the real packages from PyPI, run on the real ``openai`` and
``anthropic`` SDKs against the local server (``examples.llm_server``): the contrib GenAI
instrumentation (``opentelemetry-instrumentation-openai-v2``), OpenLLMetry
(``opentelemetry-instrumentation-openai`` / ``-anthropic``), OpenInference
(``openinference-instrumentation-openai`` / ``-anthropic``) and the anthropic SDK's own spans.
A test whose instrumentor is not installed is skipped.

Forms that the current releases no longer emit (OpenLLMetry's flat attributes, the
event-based GenAI conventions, OpenInference's completions-API prompts) are built as
SpanRecords with exactly the attributes the cited source writes; each such test says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import string
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import pytest
import wrapt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracely_sdk as tracely
from examples.llm_server import LLMServer, serve
from tracely_otel import (
    ExtractedCall,
    NotReplayable,
    SpanEvent,
    SpanRecord,
    bundle_from_spans,
    entry_labels,
    record_from_readable,
    validate_bundle,
)
from tracely_otel._extract import _READERS, read_tracely_span
from tracely_otel._foreign import (
    FOREIGN_READERS,
    read_anthropic_sdk_span,
    read_call,
    read_genai_span,
    read_openinference_span,
    read_openllmetry_span,
    user_text,
)
from tracely_otel._otlp import encode_records_otlp_json, records_from_otlp_json

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

QUESTION = "What is the weather in Paris?"
SYSTEM = "Be brief."
TOOL_RESULT = "sunny, 21 C"
OPENAI_MODEL = "gpt-4o"
ANTHROPIC_MODEL = "claude-sonnet-4-5"
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
ANTHROPIC_TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
]
# Every variable that turns an instrumentor's content capture on or off, cleared per test.
CONTENT_VARIABLES = (
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT",
    "TRACELOOP_TRACE_CONTENT",
    "OPENINFERENCE_HIDE_INPUTS",
    "OPENINFERENCE_HIDE_OUTPUTS",
    "OPENINFERENCE_HIDE_INPUT_MESSAGES",
    "OPENINFERENCE_HIDE_OUTPUT_MESSAGES",
    "OPENINFERENCE_HIDE_INPUT_TEXT",
    "OPENINFERENCE_HIDE_OUTPUT_TEXT",
    "ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE",
)


@dataclass(frozen=True)
class Source:
    """One instrumentor, how to turn its content capture on and off, and what it is called."""

    id: str
    module: str | None  # the instrumentor's module; None for the anthropic SDK's own spans
    sdk: str  # "openai" | "anthropic"
    provider: str  # the entry's "provider"
    setting: str  # what a not-captured reason must name
    on: dict[str, str] = field(default_factory=dict)
    off: dict[str, str] = field(default_factory=dict)

    @property
    def instrumentor(self) -> str:
        return "OpenAIInstrumentor" if self.sdk == "openai" else "AnthropicInstrumentor"


SOURCES = [
    Source(
        "otel-genai-openai-v2",
        "opentelemetry.instrumentation.openai_v2",
        "openai",
        "otel-genai",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only",
        on={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"},
    ),
    Source(
        "openllmetry-openai",
        "opentelemetry.instrumentation.openai",
        "openai",
        "openllmetry",
        "TRACELOOP_TRACE_CONTENT=true",
        on={"TRACELOOP_TRACE_CONTENT": "true"},
        off={"TRACELOOP_TRACE_CONTENT": "false"},
    ),
    Source(
        "openinference-openai",
        "openinference.instrumentation.openai",
        "openai",
        "openinference",
        "OPENINFERENCE_HIDE_INPUTS=false",
        off={"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"},
    ),
    Source(
        "openllmetry-anthropic",
        "opentelemetry.instrumentation.anthropic",
        "anthropic",
        "openllmetry",
        "TRACELOOP_TRACE_CONTENT=true",
        on={"TRACELOOP_TRACE_CONTENT": "true"},
        off={"TRACELOOP_TRACE_CONTENT": "false"},
    ),
    Source(
        "openinference-anthropic",
        "openinference.instrumentation.anthropic",
        "anthropic",
        "openinference",
        "OPENINFERENCE_HIDE_INPUTS=false",
        off={"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"},
    ),
    Source(
        "anthropic-sdk",
        None,
        "anthropic",
        "anthropic-sdk",
        "ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content",
    ),
]
OPENAI_SOURCES = [s for s in SOURCES if s.sdk == "openai"]
ANTHROPIC_SOURCES = [s for s in SOURCES if s.sdk == "anthropic"]
BY_ID = {s.id: s for s in SOURCES}


# --------------------------------------------------------------------------------- harness


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    with serve() as (srv, _):
        yield srv


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A fresh TracerProvider, as an app that runs another instrumentor would have."""
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp, exporter
    tp.shutdown()


@pytest.fixture(autouse=True)
def _content_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CONTENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)


_PROXY = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)
_RESOURCES = ("openai.resources", "anthropic.resources", "anthropic.lib")


def _sdk_classes() -> dict[tuple[type, str], Any]:
    """Every method of every resource class of the loaded SDKs (what instrumentors wrap)."""
    found: dict[tuple[type, str], Any] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(_RESOURCES):
            continue
        for cls in list(vars(module).values()):
            if isinstance(cls, type) and cls.__module__.startswith(_RESOURCES):
                for attr, value in list(vars(cls).items()):
                    if callable(value) or isinstance(value, _PROXY):
                        found[(cls, attr)] = value
    return found


def _restore_sdk_classes(before: dict[tuple[type, str], Any]) -> None:
    """Put back what an instrumentor's ``uninstrument()`` left wrapped.

    opentelemetry-instrumentation-openai 0.62.4 passes ``"Class.method"`` to
    ``opentelemetry.instrumentation.utils.unwrap``, which no longer resolves it, so its
    wrappers outlive ``uninstrument()``; other tests in this process must get the SDK back.
    """
    for (cls, attr), value in _sdk_classes().items():
        if (cls, attr) in before:
            if before[(cls, attr)] is not value:
                setattr(cls, attr, before[(cls, attr)])
        elif isinstance(value, _PROXY):
            original = value
            while isinstance(original, _PROXY):
                original = original.__wrapped__
            setattr(cls, attr, original)


@contextlib.contextmanager
def instrumented(
    source: Source,
    tracer_provider: Any,
    monkeypatch: pytest.MonkeyPatch,
    *,
    content: bool = True,
) -> Iterator[None]:
    """``source``'s instrumentor active on ``tracer_provider``, with content capture on/off."""
    for name, value in (source.on if content else source.off).items():
        monkeypatch.setenv(name, value)
    if source.module is None:
        yield
        return
    module = pytest.importorskip(source.module, reason=f"{source.id} is not installed")
    before = _sdk_classes()
    instrumentor = getattr(module, source.instrumentor)()
    instrumentor.instrument(tracer_provider=tracer_provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        _restore_sdk_classes(before)
        after = _sdk_classes()
        assert all(after[key] is value for key, value in before.items())
        assert not any(isinstance(v, _PROXY) for k, v in after.items() if k not in before)


def openai_client(server: LLMServer) -> Any:
    return openai.OpenAI(api_key="test-key", base_url=server.openai_base_url, max_retries=0)


def anthropic_client(
    server: LLMServer, source: Source, tracer_provider: Any, *, content: bool = True, **traces: Any
) -> Any:
    """A client whose own spans are on only when ``source`` is the anthropic SDK itself."""
    if source.module is None:
        mode = "content" if content else "metadata_only"
        option: Any = {
            "tracer_provider": tracer_provider,
            "traces": {"content_mode": mode, **traces},
        }
    else:
        option = False
    return anthropic.Anthropic(
        api_key="test-key", base_url=server.anthropic_base_url, max_retries=0, open_telemetry=option
    )


def openai_conversation(client: Any) -> list[Any]:
    """A tool-call turn and the answer after the tool's result, as an agent makes them."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
    ]
    first = client.chat.completions.create(
        model=OPENAI_MODEL, messages=messages, tools=OPENAI_TOOLS
    )
    call = first.choices[0].message.tool_calls[0]
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT})
    second = client.chat.completions.create(
        model=OPENAI_MODEL, messages=messages, tools=OPENAI_TOOLS
    )
    return [first, second]


def anthropic_conversation(client: Any) -> list[Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    first = client.messages.create(
        model=ANTHROPIC_MODEL,
        max_tokens=64,
        system=SYSTEM,
        messages=messages,
        tools=ANTHROPIC_TOOLS,
    )
    use = first.content[0]
    messages.append({"role": "assistant", "content": [use.model_dump(exclude_none=True)]})
    messages.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": TOOL_RESULT}],
        }
    )
    second = client.messages.create(
        model=ANTHROPIC_MODEL,
        max_tokens=64,
        system=SYSTEM,
        messages=messages,
        tools=ANTHROPIC_TOOLS,
    )
    return [first, second]


def one_bundle(tp: TracerProvider, exporter: InMemorySpanExporter, run: Any) -> dict[str, Any]:
    """Run ``run()`` under one root span of ``tp`` and extract the bundle of its trace."""
    with tp.get_tracer("app").start_as_current_span("handle request"):
        run()
    bundle = bundle_from_spans(exporter.get_finished_spans())
    assert bundle is not None
    validate_bundle(bundle)
    return bundle


def texts(message: dict[str, Any]) -> str:
    return "".join(p["content"] for p in message["parts"] if p["type"] == "text")


def response_text(part: dict[str, Any]) -> str:
    """A tool result as text, whether the source kept it as text or as content blocks."""
    response = part["response"]
    if isinstance(response, list):
        return "".join(b.get("text", "") for b in response if isinstance(b, dict))
    return str(response)


def parts_of(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [p for m in messages for p in m["parts"] if p["type"] == kind]


def check_shape(entry: dict[str, Any]) -> None:
    """The one normalised shape, whatever the source."""
    assert entry["output_type"] == "gen_ai.messages"
    assert set(entry["output"]) == {"messages", "model", "id"}
    for message in entry["input"] + entry["output"]["messages"]:
        assert isinstance(message["role"], str) and isinstance(message["parts"], list)
        for part in message["parts"]:
            assert isinstance(part["type"], str)
            if part["type"] == "text":
                assert isinstance(part["content"], str)
            elif part["type"] == "tool_call":
                assert set(part) == {"type", "id", "name", "arguments"}
            elif part["type"] == "tool_call_response":
                assert set(part) == {"type", "id", "response"}
    for message in entry["output"]["messages"]:
        assert isinstance(message["finish_reason"], str)
    orjson.dumps(entry)


# --------------------------------------------------------------------------------- real instrumentors


def test_the_foreign_readers_come_after_tracelys_own() -> None:
    assert _READERS[0] is read_tracely_span
    assert _READERS[1:] == list(FOREIGN_READERS)


@pytest.mark.parametrize("source", OPENAI_SOURCES, ids=lambda s: s.id)
def test_openai_calls_become_entries(
    source: Source, server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, exporter = provider
    responses: list[Any] = []
    with instrumented(source, tp, monkeypatch):
        client = openai_client(server)
        bundle = one_bundle(tp, exporter, lambda: responses.extend(openai_conversation(client)))
    first, second = responses
    assert "incomplete" not in bundle and list(bundle["llm"]) == [OPENAI_MODEL]
    call, answer = bundle["llm"][OPENAI_MODEL]
    for entry, response in ((call, first), (answer, second)):
        check_shape(entry)
        assert entry["provider"] == source.provider
        assert entry["output"]["model"] == response.model
        assert entry["output"]["id"] == response.id
        assert entry["usage"] == [response.usage.prompt_tokens, response.usage.completion_tokens]
        assert entry["input"][0] == {
            "role": "system",
            "parts": [{"type": "text", "content": SYSTEM}],
        }
        assert entry["input"][1] == {
            "role": "user",
            "parts": [{"type": "text", "content": QUESTION}],
        }
    assert [call["seq"], answer["seq"]] == [1, 2]
    tool_call = first.choices[0].message.tool_calls[0]
    (out,) = call["output"]["messages"]
    assert out["role"] == "assistant" and out["finish_reason"] == "tool_call"
    assert out["parts"] == [
        {
            "type": "tool_call",
            "id": tool_call.id,
            "name": "get_weather",
            "arguments": {"city": "Paris"},
        }
    ]
    (recalled,) = parts_of(answer["input"], "tool_call")
    assert recalled["id"] == tool_call.id and recalled["arguments"] == {"city": "Paris"}
    (result,) = parts_of(answer["input"], "tool_call_response")
    assert result["id"] == tool_call.id and response_text(result) == TOOL_RESULT
    (reply,) = answer["output"]["messages"]
    assert (
        texts(reply)
        == second.choices[0].message.content
        == f"According to get_weather: {TOOL_RESULT}"
    )
    assert reply["finish_reason"] == "stop"


@pytest.mark.parametrize("source", ANTHROPIC_SOURCES, ids=lambda s: s.id)
def test_anthropic_calls_become_entries(
    source: Source, server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, exporter = provider
    responses: list[Any] = []
    with instrumented(source, tp, monkeypatch):
        client = anthropic_client(server, source, tp)
        bundle = one_bundle(tp, exporter, lambda: responses.extend(anthropic_conversation(client)))
    first, second = responses
    assert "incomplete" not in bundle and list(bundle["llm"]) == [ANTHROPIC_MODEL]
    call, answer = bundle["llm"][ANTHROPIC_MODEL]
    for entry, response in ((call, first), (answer, second)):
        check_shape(entry)
        assert entry["provider"] == source.provider
        assert entry["output"]["model"] == response.model
        assert entry["output"]["id"] == response.id
        assert entry["usage"] == [response.usage.input_tokens, response.usage.output_tokens]
        # However the source keeps the system prompt, it leads the input.
        assert entry["input"][0] == {
            "role": "system",
            "parts": [{"type": "text", "content": SYSTEM}],
        }
        assert entry["input"][1] == {
            "role": "user",
            "parts": [{"type": "text", "content": QUESTION}],
        }
    use = first.content[0]
    (out,) = call["output"]["messages"]
    assert out["finish_reason"] == "tool_call"
    assert out["parts"] == [
        {"type": "tool_call", "id": use.id, "name": "get_weather", "arguments": {"city": "Paris"}}
    ]
    assert [p["id"] for p in parts_of(answer["input"], "tool_call")] == [use.id]
    (result,) = parts_of(answer["input"], "tool_call_response")
    assert result["id"] == use.id and response_text(result) == TOOL_RESULT
    (reply,) = answer["output"]["messages"]
    assert texts(reply) == second.content[0].text and reply["finish_reason"] == "stop"


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.id)
def test_without_captured_content_the_reason_names_the_setting(
    source: Source, server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, exporter = provider
    with instrumented(source, tp, monkeypatch, content=False):
        if source.sdk == "openai":
            client = openai_client(server)
            run = lambda: openai_conversation(client)  # noqa: E731
            model = OPENAI_MODEL
        else:
            client = anthropic_client(server, source, tp, content=False)
            run = lambda: anthropic_conversation(client)  # noqa: E731
            model = ANTHROPIC_MODEL
        bundle = one_bundle(tp, exporter, run)
    assert bundle["llm"] == {}  # never a half entry
    assert [i["label"] for i in bundle["incomplete"]] == [f"llm:{model}"] * 2
    for item in bundle["incomplete"]:
        assert item["reason"].startswith("not replayable: content was not captured (set ")
        assert source.setting in item["reason"]


@pytest.mark.parametrize("source", OPENAI_SOURCES, ids=lambda s: s.id)
def test_a_streamed_openai_call_is_an_entry(
    source: Source, server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, exporter = provider
    with instrumented(source, tp, monkeypatch):
        client = openai_client(server)

        def run() -> None:
            stream = client.chat.completions.create(
                model=OPENAI_MODEL,
                messages=[{"role": "user", "content": "hello there"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

        bundle = one_bundle(tp, exporter, run)
    (entry,) = bundle["llm"][OPENAI_MODEL]
    check_shape(entry)
    (reply,) = entry["output"]["messages"]
    assert texts(reply) == "You said: hello there" and reply["finish_reason"] == "stop"


@pytest.mark.parametrize("source", ANTHROPIC_SOURCES, ids=lambda s: s.id)
def test_a_streamed_anthropic_call_read_by_the_helper_is_an_entry(
    source: Source, server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, exporter = provider
    with instrumented(source, tp, monkeypatch):
        client = anthropic_client(server, source, tp)

        def run() -> None:
            with client.messages.stream(
                model=ANTHROPIC_MODEL,
                max_tokens=64,
                messages=[{"role": "user", "content": "hello there"}],
            ) as stream:
                assert "".join(stream.text_stream) == "You said: hello there"

        bundle = one_bundle(tp, exporter, run)
    (entry,) = bundle["llm"][ANTHROPIC_MODEL]
    check_shape(entry)
    assert entry["provider"] == source.provider
    (reply,) = entry["output"]["messages"]
    assert texts(reply) == "You said: hello there" and reply["finish_reason"] == "stop"


def test_an_async_call_is_an_entry(
    server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, exporter = provider
    source = BY_ID["otel-genai-openai-v2"]
    with instrumented(source, tp, monkeypatch):

        async def run() -> None:
            client = openai.AsyncOpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
            reply = await client.chat.completions.create(
                model=OPENAI_MODEL, messages=[{"role": "user", "content": "hello there"}]
            )
            assert reply.choices[0].message.content == "You said: hello there"
            await client.close()

        bundle = one_bundle(tp, exporter, lambda: asyncio.run(run()))
    (entry,) = bundle["llm"][OPENAI_MODEL]
    assert texts(entry["output"]["messages"][0]) == "You said: hello there"


def test_the_anthropic_sdk_streamed_without_its_helper_says_why(
    server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, exporter = provider
    client = anthropic_client(server, BY_ID["anthropic-sdk"], tp)

    def run() -> None:
        events = client.messages.create(
            model=ANTHROPIC_MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": "hello there"}],
            stream=True,
        )
        with events:
            assert list(events)

    bundle = one_bundle(tp, exporter, run)
    (item,) = bundle["incomplete"]
    assert "the output content was not captured" in item["reason"]
    assert "messages.stream(...)" in item["reason"]


def test_the_anthropic_sdk_cutting_content_short_is_never_served(
    server: LLMServer, provider: Any
) -> None:
    tp, exporter = provider
    client = anthropic_client(server, BY_ID["anthropic-sdk"], tp, max_content_bytes=20)
    bundle = one_bundle(tp, exporter, lambda: anthropic_conversation(client))
    assert bundle["llm"] == {}
    assert all(
        "ANTHROPIC_OPEN_TELEMETRY_TRACES_MAX_CONTENT_BYTES" in i["reason"]
        for i in bundle["incomplete"]
    )


def test_openinference_hidden_text_names_its_own_setting(
    server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, exporter = provider
    monkeypatch.setenv("OPENINFERENCE_HIDE_INPUT_TEXT", "true")
    with instrumented(BY_ID["openinference-openai"], tp, monkeypatch):
        client = openai_client(server)
        bundle = one_bundle(tp, exporter, lambda: openai_conversation(client))
    assert bundle["llm"] == {}
    assert all("OPENINFERENCE_HIDE_INPUT_TEXT=false" in i["reason"] for i in bundle["incomplete"])


def test_a_failed_call_is_not_served(
    server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, exporter = provider
    with instrumented(BY_ID["otel-genai-openai-v2"], tp, monkeypatch):
        client = openai_client(server)

        def run() -> None:
            server.fail_next("500")
            with pytest.raises(openai.InternalServerError):
                client.chat.completions.create(
                    model=OPENAI_MODEL, messages=[{"role": "user", "content": "hi"}]
                )

        bundle = one_bundle(tp, exporter, run)
    (item,) = bundle["incomplete"]
    assert item["label"] == f"llm:{OPENAI_MODEL}" and "the call failed" in item["reason"]


def test_foreign_entries_survive_the_wire(
    server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through OTLP/JSON (a collector, the tracely server), the same entries come out."""
    tp, exporter = provider
    with instrumented(BY_ID["otel-genai-openai-v2"], tp, monkeypatch):
        client = openai_client(server)
        local = one_bundle(tp, exporter, lambda: openai_conversation(client))
    records = [record_from_readable(s) for s in exporter.get_finished_spans()]
    remote = bundle_from_spans(
        records_from_otlp_json(orjson.dumps(encode_records_otlp_json(records)))
    )
    assert remote is not None and remote["llm"] == local["llm"]


# --------------------------------------------------------------------------------- replaying them


def closed_port_url() -> str:
    with contextlib.closing(__import__("socket").socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.id)
def test_a_replayed_entry_diverges_only_when_the_prompt_changed(
    source: Source, server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry read from another instrumentor's span holds its input as GenAI messages; the
    patched SDK call compares its own arguments with it in that form."""
    tp, exporter = provider
    with instrumented(source, tp, monkeypatch):
        if source.sdk == "openai":
            live_client: Any = openai_client(server)
            conversation: Any = openai_conversation
        else:
            live_client = anthropic_client(server, source, tp)
            conversation = anthropic_conversation
        live = []
        bundle = one_bundle(tp, exporter, lambda: live.extend(conversation(live_client)))
    assert len(bundle["llm"][OPENAI_MODEL if source.sdk == "openai" else ANTHROPIC_MODEL]) == 2
    url = closed_port_url()
    if source.sdk == "openai":
        client: Any = openai.OpenAI(api_key="k", base_url=url + "/v1", max_retries=0)
    else:
        client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
    with tracely.fixtures(bundle) as rep:
        replayed = conversation(client)
    assert rep.diverged == [] and len(rep.served) == 2 and rep.clean
    for got, want in zip(replayed, live, strict=True):
        assert got.model_dump(warnings=False)["id"] == want.id
    monkeypatch.setattr(sys.modules[__name__], "QUESTION", "And in Oslo?")
    with tracely.fixtures(bundle) as rep:
        conversation(client)
    assert len(rep.diverged) == 2 and not rep.errors


# --------------------------------------------------------------------------------- one call, two spans


@pytest.fixture
def global_provider() -> Any:
    return trace.get_tracer_provider()


def test_tracely_around_a_foreign_span_is_one_entry(
    capture: Any, server: LLMServer, global_provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with instrumented(BY_ID["otel-genai-openai-v2"], global_provider, monkeypatch):
        client = openai_client(server)
        messages = [{"role": "user", "content": "hello there"}]
        with tracely.agent("outer", input="q"):
            tracely.call_llm(
                OPENAI_MODEL,
                lambda: client.chat.completions.create(model=OPENAI_MODEL, messages=messages),
                input=messages,
            )
    (own,) = [s for s in capture.spans if s.attributes.get("tracely.kind") == "llm"]
    (foreign,) = [
        s for s in capture.spans if s.instrumentation_scope.name.startswith("opentelemetry.")
    ]
    assert foreign.parent is not None and foreign.parent.span_id == own.context.span_id
    bundle = capture.last_bundle
    (entry,) = bundle["llm"][OPENAI_MODEL]
    assert "incomplete" not in bundle and entry.get("output_type") != "gen_ai.messages"


def test_a_foreign_span_around_tracely_is_one_entry(
    capture: Any, server: LLMServer, global_provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with instrumented(BY_ID["otel-genai-openai-v2"], global_provider, monkeypatch):
        client = openai_client(server)
        post = client.post
        # tracely records the HTTP exchange inside the instrumentor's span of the same call
        client.post = lambda *a, **k: tracely.call_llm(OPENAI_MODEL, lambda: post(*a, **k))
        with tracely.agent("inner", input="q"):
            client.chat.completions.create(
                model=OPENAI_MODEL, messages=[{"role": "user", "content": "hello there"}]
            )
    (own,) = [s for s in capture.spans if s.attributes.get("tracely.kind") == "llm"]
    (foreign,) = [
        s for s in capture.spans if s.instrumentation_scope.name.startswith("opentelemetry.")
    ]
    assert own.parent is not None and own.parent.span_id == foreign.context.span_id
    bundle = capture.last_bundle
    (entry,) = bundle["llm"][OPENAI_MODEL]
    assert "incomplete" not in bundle and entry.get("output_type") != "gen_ai.messages"


def test_the_anthropic_sdks_own_span_inside_tracelys_is_one_entry(
    capture: Any, server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK's spans on the app's (global) provider, with and without content.
    for mode in ("content", "metadata_only"):
        monkeypatch.setenv("ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE", mode)
        client = anthropic.Anthropic(api_key="k", base_url=server.anthropic_base_url, max_retries=0)
        with tracely.agent(f"sdk-{mode}", input="q"):
            tracely.call_llm(
                ANTHROPIC_MODEL,
                lambda c=client: c.messages.create(
                    model=ANTHROPIC_MODEL,
                    max_tokens=64,
                    messages=[{"role": "user", "content": "hi"}],
                ),
            )
        assert "anthropic.messages.create" in [s.name for s in capture.spans]
        bundle = capture.last_bundle
        (entry,) = bundle["llm"][ANTHROPIC_MODEL]
        assert "incomplete" not in bundle and entry.get("output_type") != "gen_ai.messages"


def test_calls_from_mixed_sources_keep_trace_order(
    capture: Any, server: LLMServer, global_provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE", "content")
    with instrumented(BY_ID["otel-genai-openai-v2"], global_provider, monkeypatch):
        chat = openai_client(server)
        claude = anthropic.Anthropic(api_key="k", base_url=server.anthropic_base_url, max_retries=0)
        with tracely.agent("mixed", input="q"):
            tracely.call_tool("lookup", lambda: {"city": "Paris"}, args={"q": "weather"})
            chat.chat.completions.create(
                model=OPENAI_MODEL, messages=[{"role": "user", "content": "one"}]
            )
            tracely.call_llm("local-model", lambda: "two", input="two")
            claude.messages.create(
                model=ANTHROPIC_MODEL,
                max_tokens=64,
                messages=[{"role": "user", "content": "three"}],
            )
            chat.chat.completions.create(
                model=OPENAI_MODEL, messages=[{"role": "user", "content": "four"}]
            )
    bundle = capture.last_bundle
    validate_bundle(bundle)
    assert entry_labels(bundle) == [
        "tools:lookup",
        f"llm:{OPENAI_MODEL}",
        "llm:local-model",
        f"llm:{ANTHROPIC_MODEL}",
        f"llm:{OPENAI_MODEL}",
    ]
    assert [e["seq"] for e in bundle["llm"][OPENAI_MODEL]] == [2, 5]
    assert bundle["llm"][ANTHROPIC_MODEL][0]["seq"] == 4
    assert bundle["llm"][ANTHROPIC_MODEL][0]["provider"] == "anthropic-sdk"
    assert [texts(e["output"]["messages"][0]) for e in bundle["llm"][OPENAI_MODEL]] == [
        "You said: one",
        "You said: four",
    ]


@pytest.mark.parametrize(
    "source",
    [BY_ID["openinference-anthropic"], BY_ID["openllmetry-anthropic"]],
    ids=lambda s: s.id,
)
def test_an_instrumentor_span_and_the_sdks_own_are_one_entry(
    source: Source, server: LLMServer, provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An instrumentor's span (content) and the anthropic SDK's own (no content), one call.

    OpenInference makes its span current, so the SDK's span is its child; OpenLLMetry does
    not, so the SDK's span is its sibling, and the shared response id makes them one call.
    """
    tp, exporter = provider
    with instrumented(source, tp, monkeypatch):
        client = anthropic.Anthropic(
            api_key="k",
            base_url=server.anthropic_base_url,
            max_retries=0,
            open_telemetry={"tracer_provider": tp},
        )
        bundle = one_bundle(
            tp,
            exporter,
            lambda: client.messages.create(
                model=ANTHROPIC_MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            ),
        )
    assert "anthropic.messages.create" in {s.name for s in exporter.get_finished_spans()}
    (entry,) = bundle["llm"][ANTHROPIC_MODEL]
    assert entry["provider"] == source.provider and "incomplete" not in bundle


# --------------------------------------------------------------------------------- built spans


def span(
    name: str,
    attributes: dict[str, Any],
    *,
    scope: str = "",
    events: tuple[SpanEvent, ...] = (),
    status: str = "OK",
    span_id: str = "00000000000000a1",
    parent: str | None = None,
    start: int = 1,
    dropped: int = 0,
) -> SpanRecord:
    return SpanRecord(
        trace_id="0" * 31 + "1",
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_time_unix_nano=start,
        end_time_unix_nano=start + 1,
        attributes=attributes,
        status_code=status,
        events=events,
        scope_name=scope,
        kind="CLIENT",
        dropped_attributes_count=dropped,
    )


def read(record: SpanRecord) -> ExtractedCall | NotReplayable | None:
    """What the extractor's readers make of ``record`` (the first that answers)."""
    for reader in _READERS:
        result = reader(record)
        if result is not None:
            return result
    return None


# Built from traceloop/openllmetry
# packages/opentelemetry-instrumentation-openai/opentelemetry/instrumentation/openai/shared/
# chat_wrappers.py (_set_prompts, _set_completions; the releases before the JSON attributes),
# shared/__init__.py (_set_request_attributes, _set_response_attributes) and
# opentelemetry-semantic-conventions-ai's SpanAttributes: what those releases wrote.
OPENLLMETRY_FLAT_OPENAI = {
    "llm.request.type": "chat",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o",
    "llm.headers": "None",
    "llm.is_streaming": False,
    "gen_ai.openai.api_base": "https://api.openai.com/v1/",
    "gen_ai.prompt.0.role": "system",
    "gen_ai.prompt.0.content": SYSTEM,
    "gen_ai.prompt.1.role": "user",
    "gen_ai.prompt.1.content": QUESTION,
    "gen_ai.prompt.2.role": "assistant",
    "gen_ai.prompt.2.tool_calls.0.id": "call_1",
    "gen_ai.prompt.2.tool_calls.0.name": "get_weather",
    "gen_ai.prompt.2.tool_calls.0.arguments": '{"city":"Paris"}',
    "gen_ai.prompt.3.role": "tool",
    "gen_ai.prompt.3.content": TOOL_RESULT,
    "gen_ai.prompt.3.tool_call_id": "call_1",
    "llm.request.functions.0.name": "get_weather",
    "llm.request.functions.0.description": "The weather in a city.",
    "llm.request.functions.0.parameters": json.dumps(OPENAI_TOOLS[0]["function"]["parameters"]),
    "gen_ai.response.model": "gpt-4o-2024-08-06",
    "gen_ai.response.id": "chatcmpl-9",
    "gen_ai.openai.system_fingerprint": "fp_1",
    "llm.usage.total_tokens": 31,
    "gen_ai.usage.completion_tokens": 6,
    "gen_ai.usage.prompt_tokens": 25,
    "gen_ai.completion.0.finish_reason": "stop",
    "gen_ai.completion.0.role": "assistant",
    "gen_ai.completion.0.content": "Sunny, 21 C in Paris.",
}


def test_openllmetry_flat_attributes_are_read() -> None:
    """Built spans: OpenLLMetry's flat attributes, as its openai instrumentation wrote them."""
    result = read(
        span(
            "openai.chat", OPENLLMETRY_FLAT_OPENAI, scope="opentelemetry.instrumentation.openai.v1"
        )
    )
    assert isinstance(result, ExtractedCall) and result.name == "gpt-4o" and result.foreign
    entry = result.entry
    check_shape(entry)
    assert entry["provider"] == "openllmetry" and entry["usage"] == [25, 6]
    assert entry["output"] == {
        "messages": [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Sunny, 21 C in Paris."}],
                "finish_reason": "stop",
            }
        ],
        "model": "gpt-4o-2024-08-06",
        "id": "chatcmpl-9",
    }
    assert entry["input"] == [
        {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "get_weather",
                    "arguments": {"city": "Paris"},
                }
            ],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_1", "response": TOOL_RESULT}],
        },
    ]


def test_openllmetry_flat_anthropic_attributes_are_read() -> None:
    """Built spans: traceloop/openllmetry packages/opentelemetry-instrumentation-anthropic/
    opentelemetry/instrumentation/anthropic/span_utils.py (aset_input_attributes,
    _set_span_completions): the system prompt is message 0, a list content is its JSON text
    (tool_use blocks included, and again as tool_calls.N), thinking is a completion of its own
    that carries the stop reason, and empty text is not set."""
    assistant_blocks = [
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    ]
    user_blocks = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": TOOL_RESULT}]
    attrs = {
        "llm.request.type": "chat",
        "gen_ai.system": "Anthropic",
        "gen_ai.request.model": ANTHROPIC_MODEL,
        "gen_ai.prompt.0.content": SYSTEM,
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.1.content": QUESTION,
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.2.content": json.dumps(assistant_blocks),
        "gen_ai.prompt.2.role": "assistant",
        "gen_ai.prompt.2.tool_calls.0.id": "toolu_1",
        "gen_ai.prompt.2.tool_calls.0.name": "get_weather",
        "gen_ai.prompt.2.tool_calls.0.arguments": json.dumps({"city": "Paris"}),
        "gen_ai.prompt.3.content": json.dumps(user_blocks),
        "gen_ai.prompt.3.role": "user",
        "gen_ai.response.model": ANTHROPIC_MODEL,
        "gen_ai.response.id": "msg_1",
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 12,
        "llm.usage.total_tokens": 52,
        "gen_ai.completion.0.finish_reason": "tool_use",
        "gen_ai.completion.0.role": "thinking",
        "gen_ai.completion.0.content": "I should call the tool again.",
        "gen_ai.completion.1.role": "assistant",
        "gen_ai.completion.1.tool_calls.0.id": "toolu_2",
        "gen_ai.completion.1.tool_calls.0.name": "get_weather",
        "gen_ai.completion.1.tool_calls.0.arguments": json.dumps({"city": "Lyon"}),
    }
    result = read(span("anthropic.chat", attrs, scope="opentelemetry.instrumentation.anthropic"))
    assert isinstance(result, ExtractedCall)
    entry = result.entry
    check_shape(entry)
    assert [p["id"] for p in parts_of(entry["input"], "tool_call")] == ["toolu_1"]  # not twice
    (response,) = parts_of(entry["input"], "tool_call_response")
    assert response == {"type": "tool_call_response", "id": "toolu_1", "response": TOOL_RESULT}
    assert entry["output"]["messages"] == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "I should call the tool again."},
                {
                    "type": "tool_call",
                    "id": "toolu_2",
                    "name": "get_weather",
                    "arguments": {"city": "Lyon"},
                },
            ],
            "finish_reason": "tool_call",
        }
    ]


def test_openllmetry_completions_prompt_is_read() -> None:
    """Built spans: OpenLLMetry's anthropic completions API, ``gen_ai.prompt.0.user``."""
    attrs = {
        "llm.request.type": "completion",
        "gen_ai.request.model": "claude-2.1",
        "gen_ai.prompt.0.user": "\n\nHuman: hi\n\nAssistant:",
        "gen_ai.completion.0.finish_reason": "stop_sequence",
        "gen_ai.completion.0.content": " Hello!",
    }
    result = read(
        span("anthropic.completion", attrs, scope="opentelemetry.instrumentation.anthropic")
    )
    assert isinstance(result, ExtractedCall)
    assert result.entry["input"] == [
        {"role": "user", "parts": [{"type": "text", "content": "\n\nHuman: hi\n\nAssistant:"}]}
    ]
    # a reason the conventions have no value for is kept as the source wrote it
    assert result.entry["output"]["messages"][0]["finish_reason"] == "stop_sequence"
    assert "usage" not in result.entry  # only when both counts are known


def test_openllmetry_flat_without_content_names_its_setting() -> None:
    attrs = {
        k: v
        for k, v in OPENLLMETRY_FLAT_OPENAI.items()
        if ".prompt." not in k and "completion." not in k
    }
    result = read(span("openai.chat", attrs, scope="opentelemetry.instrumentation.openai.v1"))
    assert isinstance(result, NotReplayable) and "TRACELOOP_TRACE_CONTENT=true" in result.reason


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {
                "gen_ai.prompt.2.role": None,
                "gen_ai.prompt.2.tool_calls.0.id": None,
                "gen_ai.prompt.2.tool_calls.0.name": None,
                "gen_ai.prompt.2.tool_calls.0.arguments": None,
            },
            "prompt message 2 is missing",
        ),
        ({"gen_ai.prompt.123456789012345678901234567890.role": "user"}, "index out of range"),
        ({"gen_ai.completion.0.tool_calls.4.name": "x"}, "is missing"),
    ],
)
def test_flat_attributes_with_gaps_are_never_served(change: dict[str, Any], reason: str) -> None:
    attrs = {**OPENLLMETRY_FLAT_OPENAI, **change}
    attrs = {k: v for k, v in attrs.items() if v is not None}
    result = read(span("openai.chat", attrs, scope="opentelemetry.instrumentation.openai.v1"))
    assert isinstance(result, NotReplayable) and reason in result.reason


def test_flat_attributes_of_a_span_that_dropped_some_are_never_served() -> None:
    result = read(span("openai.chat", OPENLLMETRY_FLAT_OPENAI, scope="x", dropped=3))
    assert isinstance(result, NotReplayable) and "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT" in result.reason


# Built from the GenAI semantic conventions v1.28-v1.36 (docs/gen-ai/gen-ai-events.md): the
# message events' bodies ({"content"}, {"tool_calls": [...]}, {"id", "content"}, the choice's
# {"index", "finish_reason", "message"}), as a span event carries them: as its attributes.
GENAI_SPAN_ATTRIBUTES = {
    "gen_ai.operation.name": "chat",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.response.model": "gpt-4o-2024-08-06",
    "gen_ai.response.id": "chatcmpl-7",
    "gen_ai.response.finish_reasons": ("stop",),
    "gen_ai.usage.input_tokens": 25,
    "gen_ai.usage.output_tokens": 6,
}


def _beside(
    span_id: str, scope: str, start: int, end: int, *, content: bool = True, rid: str = "r-1"
) -> SpanRecord:
    """An LLM span of ``scope`` under the root span ``...0f``, from ``start`` to ``end``."""
    attrs: dict[str, Any] = {**GENAI_SPAN_ATTRIBUTES, "gen_ai.response.id": rid}
    if content:
        attrs["gen_ai.input.messages"] = json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
        )
        attrs["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "hello"}]}]
        )
    record = span("chat gpt-4o", attrs, scope=scope, span_id=span_id, parent="0" * 15 + "f")
    return replace(record, start_time_unix_nano=start, end_time_unix_nano=end)


def test_spans_of_one_call_beside_each_other_are_one_entry() -> None:
    """Siblings of different scopes with one response id, overlapping in time: one call,
    and the read that can be served is kept, whichever came first."""
    for first_content in (True, False):
        outer = _beside("00000000000000a1", "instrumentor.a", 10, 40, content=first_content)
        inner = _beside("00000000000000a2", "instrumentor.b", 20, 30, content=not first_content)
        bundle = bundle_from_spans([outer, inner])
        assert bundle is not None and "incomplete" not in bundle
        (entry,) = bundle["llm"]["gpt-4o"]
        assert entry["seq"] == 1 and texts(entry["output"]["messages"][0]) == "hello"


@pytest.mark.parametrize(
    "second",
    [
        _beside("00000000000000a2", "instrumentor.b", 50, 60),  # after the first: another call
        _beside("00000000000000a2", "instrumentor.a", 20, 30),  # one instrumentor, two calls
        _beside("00000000000000a2", "instrumentor.b", 20, 30, rid="r-2"),
    ],
    ids=["later", "same-scope", "other-id"],
)
def test_spans_beside_each_other_that_are_not_one_call_stay_two(second: SpanRecord) -> None:
    first = _beside("00000000000000a1", "instrumentor.a", 10, 40)
    bundle = bundle_from_spans([first, second])
    assert bundle is not None and len(bundle["llm"]["gpt-4o"]) == 2


def test_the_event_based_conventions_are_read() -> None:
    calls = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    events = (
        SpanEvent("gen_ai.system.message", 1, {"gen_ai.system": "openai", "content": SYSTEM}),
        SpanEvent("gen_ai.user.message", 2, {"gen_ai.system": "openai", "content": QUESTION}),
        SpanEvent(
            "gen_ai.assistant.message",
            3,
            {"gen_ai.system": "openai", "tool_calls": json.dumps(calls)},
        ),
        SpanEvent(
            "gen_ai.tool.message",
            4,
            {"gen_ai.system": "openai", "id": "call_1", "content": TOOL_RESULT},
        ),
        SpanEvent(
            "gen_ai.choice",
            5,
            {
                "gen_ai.system": "openai",
                "index": 0,
                "finish_reason": "stop",
                "message": json.dumps({"role": "assistant", "content": "Sunny."}),
            },
        ),
    )
    result = read(
        span(
            "chat gpt-4o", GENAI_SPAN_ATTRIBUTES, scope="some.genai.instrumentation", events=events
        )
    )
    assert isinstance(result, ExtractedCall) and result.name == "gpt-4o"
    entry = result.entry
    check_shape(entry)
    assert entry["provider"] == "otel-genai" and entry["usage"] == [25, 6]
    assert [m["role"] for m in entry["input"]] == ["system", "user", "assistant", "tool"]
    assert parts_of(entry["input"], "tool_call") == [
        {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}
    ]
    assert parts_of(entry["input"], "tool_call_response") == [
        {"type": "tool_call_response", "id": "call_1", "response": TOOL_RESULT}
    ]
    assert entry["output"]["messages"] == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Sunny."}],
            "finish_reason": "stop",
        }
    ]


def test_the_operation_details_event_is_read() -> None:
    """Built spans: the ``gen_ai.client.inference.operation.details`` event of the current
    conventions, as a span event (a library that records it on the span, not as a log)."""
    details = {
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
        ),
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": "hello"}],
                    "finish_reason": "stop",
                }
            ]
        ),
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
    }
    events = (SpanEvent("gen_ai.client.inference.operation.details", 1, details),)
    result = read(span("chat gpt-4o", GENAI_SPAN_ATTRIBUTES, events=events))
    assert isinstance(result, ExtractedCall)
    assert result.entry["input"][0] == {
        "role": "system",
        "parts": [{"type": "text", "content": SYSTEM}],
    }
    assert texts(result.entry["output"]["messages"][0]) == "hello"


def test_structured_message_attributes_from_the_wire_are_read() -> None:
    """Over OTLP, an array of kvlists decodes to a tuple of JSON texts."""
    attrs = {
        **GENAI_SPAN_ATTRIBUTES,
        "gen_ai.input.messages": (
            json.dumps({"role": "user", "parts": [{"type": "text", "content": "hi"}]}),
        ),
        "gen_ai.output.messages": (
            json.dumps({"role": "assistant", "parts": [{"type": "text", "content": "yo"}]}),
        ),
    }
    result = read(span("chat gpt-4o", attrs))
    assert isinstance(result, ExtractedCall)
    assert result.entry["output"]["messages"][0] == {
        "role": "assistant",
        "parts": [{"type": "text", "content": "yo"}],
        "finish_reason": "stop",
    }


def test_a_cut_short_message_attribute_is_never_served() -> None:
    attrs = {
        **GENAI_SPAN_ATTRIBUTES,
        "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]',
        "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"te',
    }
    result = read(span("chat gpt-4o", attrs))
    assert isinstance(result, NotReplayable)
    assert "gen_ai.output.messages is not valid JSON" in result.reason
    assert "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" in result.reason


def test_a_genai_span_without_content_names_the_setting() -> None:
    result = read(
        span("chat gpt-4o", GENAI_SPAN_ATTRIBUTES, scope="opentelemetry.instrumentation.openai_v2")
    )
    assert isinstance(result, NotReplayable) and result.foreign and result.name == "gpt-4o"
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only" in result.reason


def test_only_the_output_missing_says_so() -> None:
    attrs = {**GENAI_SPAN_ATTRIBUTES, "gen_ai.input.messages": "[]"}
    result = read(span("chat gpt-4o", attrs))
    assert (
        isinstance(result, NotReplayable) and "the output content was not captured" in result.reason
    )


def test_openinference_completions_prompts_are_read() -> None:
    """Built spans: Arize-ai/openinference python/instrumentation/
    openinference-instrumentation-openai/.../_request_attributes_extractor.py and
    _response_attributes_extractor.py for ``completions.create``: ``llm.prompts.N.prompt.text``
    and ``llm.choices.N.completion.text``."""
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.system": "openai",
        "llm.model_name": "gpt-3.5-turbo-instruct",
        "llm.invocation_parameters": '{"model": "gpt-3.5-turbo-instruct", "max_tokens": 7}',
        "llm.prompts.0.prompt.text": "Say hi",
        "llm.choices.0.completion.text": "Hi!",
        "llm.token_count.prompt": 2,
        "llm.token_count.completion": 2,
        "output.mime_type": "application/json",
        "output.value": json.dumps({"id": "cmpl-1", "object": "text_completion"}),
    }
    result = read(span("Completion", attrs, scope="openinference.instrumentation.openai"))
    assert isinstance(result, ExtractedCall) and result.name == "gpt-3.5-turbo-instruct"
    assert result.entry["input"] == [
        {"role": "user", "parts": [{"type": "text", "content": "Say hi"}]}
    ]
    assert result.entry["output"]["id"] == "cmpl-1" and result.entry["usage"] == [2, 2]


@pytest.mark.parametrize(
    ("attrs", "name", "scope"),
    [
        ({"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "e"}, "embeddings e", ""),
        ({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}, "execute_tool t", ""),
        ({"gen_ai.operation.name": "invoke_agent"}, "invoke_agent a", ""),
        ({"openinference.span.kind": "TOOL", "tool.name": "t", "input.value": "{}"}, "t", ""),
        ({"openinference.span.kind": "EMBEDDING"}, "Embedding", ""),
        ({"llm.request.type": "embedding", "gen_ai.request.model": "e"}, "openai.embeddings", ""),
        (
            {"traceloop.span.kind": "tool", "traceloop.entity.name": "t"},
            "t.tool",
            "opentelemetry.instrumentation.x",
        ),
        (
            {"gen_ai.request.model": "m"},
            "anthropic.messages.count_tokens",
            "com.anthropic.sdk.python",
        ),
        (
            {"gen_ai.operation.name": "invoke_agent"},
            "anthropic.messages.tool_runner",
            "com.anthropic.sdk.python",
        ),
        ({"http.request.method": "GET"}, "GET /", ""),
    ],
)
def test_spans_that_are_not_llm_calls_are_not_read(
    attrs: dict[str, Any], name: str, scope: str
) -> None:
    assert read(span(name, attrs, scope=scope)) is None


def test_tracelys_own_spans_are_left_to_tracelys_reader() -> None:
    attrs = {
        "tracely.kind": "llm",
        **GENAI_SPAN_ATTRIBUTES,
        "gen_ai.input.messages": "[]",
        "gen_ai.output.messages": "[]",
    }
    record = span("chat gpt-4o", attrs, scope="tracely_sdk")
    assert all(reader(record) is None for reader in FOREIGN_READERS)
    evicted = replace(record, attributes={k: v for k, v in attrs.items() if k != "tracely.kind"})
    assert all(reader(evicted) is None for reader in FOREIGN_READERS)


def test_each_source_has_its_own_reader() -> None:
    genai = span("chat gpt-4o", GENAI_SPAN_ATTRIBUTES)
    flat = span(
        "openai.chat", OPENLLMETRY_FLAT_OPENAI, scope="opentelemetry.instrumentation.openai.v1"
    )
    oi = span("ChatCompletion", {"openinference.span.kind": "LLM", "llm.model_name": "m"})
    sdk = span(
        "anthropic.messages.create",
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "c"},
        scope="com.anthropic.sdk.python",
    )
    owners = {
        "genai": read_genai_span,
        "flat": read_openllmetry_span,
        "oi": read_openinference_span,
        "sdk": read_anthropic_sdk_span,
    }
    for label, record in (("genai", genai), ("flat", flat), ("oi", oi), ("sdk", sdk)):
        answered = [name for name, reader in owners.items() if reader(record) is not None]
        assert answered == [label]


# --------------------------------------------------------------------------------- never raises


_KEYS = [
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.system",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.request.stream",
    "anthropic.content.truncated",
    "anthropic.message.stop_reason",
    "llm.request.type",
    "llm.usage.total_tokens",
    "openinference.span.kind",
    "llm.model_name",
    "llm.request.model_name",
    "llm.invocation_parameters",
    "llm.finish_reason",
    "llm.token_count.prompt",
    "llm.token_count.completion",
    "llm.prompts",
    "output.value",
    "output.mime_type",
    "tracely.kind",
    "error.type",
]
_INDEXED = [
    "gen_ai.prompt.{i}.role",
    "gen_ai.prompt.{i}.content",
    "gen_ai.prompt.{i}.user",
    "gen_ai.prompt.{i}.tool_call_id",
    "gen_ai.prompt.{i}.tool_calls.{j}.id",
    "gen_ai.prompt.{i}.tool_calls.{j}.name",
    "gen_ai.prompt.{i}.tool_calls.{j}.arguments",
    "gen_ai.completion.{i}.role",
    "gen_ai.completion.{i}.content",
    "gen_ai.completion.{i}.finish_reason",
    "gen_ai.completion.{i}.tool_calls.{j}.arguments",
    "llm.prompts.{i}.role",
    "llm.input_messages.{i}.message.role",
    "llm.input_messages.{i}.message.content",
    "llm.input_messages.{i}.message.tool_call_id",
    "llm.input_messages.{i}.message.contents.{j}.message_content.type",
    "llm.input_messages.{i}.message.contents.{j}.message_content.text",
    "llm.output_messages.{i}.message.role",
    "llm.output_messages.{i}.message.content",
    "llm.output_messages.{i}.message.tool_calls.{j}.tool_call.function.name",
    "llm.output_messages.{i}.message.tool_calls.{j}.tool_call.function.arguments",
    "llm.output_messages.{i}.message.contents.{j}.tool_call.function.name",
    "llm.output_messages.{i}.message.function_call_name",
    "llm.prompts.{i}.prompt.text",
    "llm.choices.{i}.completion.text",
]
_index = st.one_of(
    st.integers(0, 3), st.just(10**6), st.text(string.digits, min_size=1, max_size=40)
)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "parts",
                    "type",
                    "content",
                    "id",
                    "name",
                    "arguments",
                    "response",
                    "finish_reason",
                    "text",
                    "tool_calls",
                    "function",
                    "message",
                    "input",
                    "tool_use_id",
                ]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)
_value = st.one_of(
    st.text(max_size=20),
    st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=4),
    st.sampled_from(
        [
            "chat",
            "LLM",
            "text_completion",
            "embeddings",
            "TOOL",
            "completion",
            "__REDACTED__",
            "[",
            "{",
            "[{",
            "application/json",
        ]
    ),
    st.integers(-5, 2**70),
    st.floats(allow_nan=True),
    st.booleans(),
    st.tuples(st.text(max_size=5), st.integers()),
    st.lists(_json.map(lambda v: orjson.dumps(v).decode()), max_size=3).map(tuple),
    _json.map(lambda v: orjson.dumps(v).decode()),
)
_key = st.one_of(
    st.sampled_from(_KEYS),
    st.builds(lambda t, i, j: t.format(i=i, j=j), st.sampled_from(_INDEXED), _index, _index),
)
_events = st.lists(
    st.builds(
        lambda name, attrs: SpanEvent(name, 0, attrs),
        st.sampled_from(
            [
                "gen_ai.user.message",
                "gen_ai.system.message",
                "gen_ai.assistant.message",
                "gen_ai.tool.message",
                "gen_ai.choice",
                "gen_ai.client.inference.operation.details",
                "gen_ai.content.prompt",
                "gen_ai.content.completion",
                "other",
            ]
        ),
        st.dictionaries(
            st.sampled_from(
                [
                    "content",
                    "message",
                    "role",
                    "id",
                    "tool_calls",
                    "finish_reason",
                    "index",
                    "message.content",
                    "gen_ai.input.messages",
                    "gen_ai.output.messages",
                    "gen_ai.prompt",
                    "gen_ai.completion",
                ]
            ),
            _value,
            max_size=4,
        ),
    ),
    max_size=4,
)


# Whole spans of each source, which the strategy below breaks in every way it can.
_BASES: list[tuple[str, str, dict[str, Any]]] = [
    (
        "chat gpt-4o",
        "opentelemetry.util.genai.handler",
        {
            **GENAI_SPAN_ATTRIBUTES,
            "gen_ai.input.messages": json.dumps(
                [
                    {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
                    {
                        "role": "assistant",
                        "parts": [
                            {"type": "tool_call", "id": "c", "name": "f", "arguments": {"a": 1}}
                        ],
                    },
                    {
                        "role": "tool",
                        "parts": [{"type": "tool_call_response", "id": "c", "response": "r"}],
                    },
                ]
            ),
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": "ok"}],
                        "finish_reason": "stop",
                    }
                ]
            ),
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
        },
    ),
    ("openai.chat", "opentelemetry.instrumentation.openai.v1", OPENLLMETRY_FLAT_OPENAI),
    (
        "ChatCompletion",
        "openinference.instrumentation.openai",
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": QUESTION,
            "llm.input_messages.1.message.role": "assistant",
            "llm.input_messages.1.message.tool_calls.0.tool_call.id": "c",
            "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "f",
            "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments": "{}",
            "llm.input_messages.2.message.role": "tool",
            "llm.input_messages.2.message.tool_call_id": "c",
            "llm.input_messages.2.message.content": "r",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.contents.0.message_content.type": "text",
            "llm.output_messages.0.message.contents.0.message_content.text": "ok",
            "llm.token_count.prompt": 3,
            "llm.token_count.completion": 1,
            "llm.finish_reason": "stop",
            "output.mime_type": "application/json",
            "output.value": '{"id": "chatcmpl-1"}',
        },
    ),
    (
        "anthropic.messages.create",
        "com.anthropic.sdk.python",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": ANTHROPIC_MODEL,
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "yo"}]}]
            ),
            "anthropic.message.stop_reason": "end_turn",
            "gen_ai.usage.input_tokens": 1,
            "gen_ai.usage.output_tokens": 1,
        },
    ),
]


@st.composite
def _broken_spans(draw: st.DrawFn) -> SpanRecord:
    """A real span of one source with keys dropped, values replaced and junk keys added."""
    name, scope, base = draw(st.sampled_from(_BASES))
    attrs = dict(base)
    for key in draw(st.sets(st.sampled_from(sorted(base)), max_size=4)):
        del attrs[key]
    replaced = draw(st.dictionaries(st.sampled_from(sorted(base)), _value, max_size=3))
    attrs.update(replaced)
    attrs.update(draw(st.dictionaries(_key, _value, max_size=4)))
    return span(
        draw(st.sampled_from([name, name, "chat gpt-4o", "openai.chat", "", "x"])),
        attrs,
        scope=draw(st.sampled_from([scope, scope, "", "tracely_sdk", "com.anthropic.sdk.python"])),
        events=tuple(draw(_events)),
        status=draw(st.sampled_from(["OK", "OK", "UNSET", "ERROR"])),
        dropped=draw(st.sampled_from([0, 0, 0, 2])),
    )


@st.composite
def _junk_spans(draw: st.DrawFn) -> SpanRecord:
    """Attributes drawn from the instrumentors' namespaces, with junk values."""
    return span(
        draw(
            st.sampled_from(
                [
                    "chat gpt-4o",
                    "openai.chat",
                    "anthropic.messages.create",
                    "ChatCompletion",
                    "",
                    "x",
                ]
            )
        ),
        draw(st.dictionaries(_key, _value, max_size=14)),
        scope=draw(
            st.sampled_from(
                [
                    "",
                    "com.anthropic.sdk.python",
                    "opentelemetry.instrumentation.openai.v1",
                    "opentelemetry.util.genai.handler",
                    "openinference.instrumentation.openai",
                    "tracely_sdk",
                ]
            )
        ),
        events=tuple(draw(_events)),
        status=draw(st.sampled_from(["OK", "UNSET", "ERROR"])),
        dropped=draw(st.sampled_from([0, 0, 2])),
    )


def test_the_broken_span_strategy_starts_from_spans_that_read() -> None:
    for name, scope, base in _BASES:
        assert isinstance(read(span(name, base, scope=scope)), ExtractedCall)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=st.one_of(_broken_spans(), _junk_spans()))
def test_readers_never_raise(record: SpanRecord) -> None:
    for reader in FOREIGN_READERS:
        result = reader(record)
        assert result is None or isinstance(result, (ExtractedCall, NotReplayable))
        if isinstance(result, ExtractedCall):
            assert result.kind == "llm" and result.foreign and result.name
            check_shape(result.entry)
        elif isinstance(result, NotReplayable):
            assert (
                result.kind == "llm"
                and result.foreign
                and result.reason.startswith("not replayable")
            )
    bundle = bundle_from_spans([record])
    if bundle is not None:
        validate_bundle(orjson.loads(orjson.dumps(bundle)))


def test_secrets_in_another_instrumentors_content_never_reach_the_bundle() -> None:
    leaky = {
        **OPENLLMETRY_FLAT_OPENAI,
        "gen_ai.prompt.1.content": "use key sk-proj-" + "Q" * 24 + " for this",
        "gen_ai.prompt.2.tool_calls.0.arguments": '{"city":"Paris","password":"hunter2-xyz"}',
    }
    result = read(span("openai.chat", leaky, scope="opentelemetry.instrumentation.openai.v1"))
    assert isinstance(result, ExtractedCall)
    text = json.dumps(result.entry)
    assert "Q" * 24 not in text and "hunter2-xyz" not in text
    call = result.entry["input"][2]["parts"][0]
    assert call["arguments"] == {"city": "Paris", "password": "[REDACTED]"}


# --------------------------------------------------------------------------------- every call


def test_a_genai_tool_span_is_a_call_with_its_arguments_result_and_error() -> None:
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "issue_refund",
        "gen_ai.tool.call.arguments": '{"order_id": "13"}',
        "error.type": "RefundDenied",
    }
    call = read_call(span("execute_tool issue_refund", attrs, status="ERROR"))
    assert call == {
        "kind": "tool",
        "name": "issue_refund",
        "by": "otel-genai",
        "args": {"order_id": "13"},
        "error": "RefundDenied",
        "span_id": "00000000000000a1",
    }
    ok = {**attrs, "gen_ai.tool.call.result": '{"refunded": true}'}
    del ok["error.type"]
    call = read_call(span("execute_tool issue_refund", ok))
    assert call is not None and call["result"] == {"refunded": True} and "error" not in call
    # A failed span with no error.type still failed.
    call = read_call(
        replace(span("execute_tool issue_refund", ok, status="ERROR"), status_message="boom")
    )
    assert call is not None and call["error"] == "boom"


def test_agent_and_llm_spans_of_the_conventions_are_calls() -> None:
    agent = read_call(
        span(
            "invoke_agent support",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support",
                "gen_ai.conversation.id": "c-1",
                "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
            },
        )
    )
    assert agent is not None and (agent["kind"], agent["name"], agent["conversation"]) == (
        "agent",
        "support",
        "c-1",
    )
    assert user_text(agent["input"]) == "hi"
    llm = read_call(span("chat gpt-4o", GENAI_SPAN_ATTRIBUTES))
    assert llm is not None and (llm["kind"], llm["name"], llm["by"]) == (
        "llm",
        "gpt-4o",
        "otel-genai",
    )
    assert llm["usage"] == [
        GENAI_SPAN_ATTRIBUTES["gen_ai.usage.input_tokens"],
        GENAI_SPAN_ATTRIBUTES["gen_ai.usage.output_tokens"],
    ]
    assert read_call(span("GET /", {"http.route": "/"})) is None
    assert read_call(span("embeddings m", {"gen_ai.operation.name": "embeddings"})) is None


def test_openinference_and_openllmetry_tool_and_agent_spans_are_calls() -> None:
    oi_tool = read_call(
        span(
            "lookup_order",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "lookup_order",
                "tool.parameters": '{"order_id": "42"}',
                "output.value": '{"status": "shipped"}',
                "session.id": "s-9",
            },
        )
    )
    assert oi_tool is not None
    assert (oi_tool["by"], oi_tool["args"], oi_tool["result"], oi_tool["conversation"]) == (
        "openinference",
        {"order_id": "42"},
        {"status": "shipped"},
        "s-9",
    )
    oi_agent = read_call(
        span("agent", {"openinference.span.kind": "AGENT", "input.value": "hello"})
    )
    assert oi_agent is not None and oi_agent["kind"] == "agent" and oi_agent["input"] == "hello"
    assert read_call(span("chain", {"openinference.span.kind": "CHAIN"})) is None
    traceloop = read_call(
        span(
            "get_weather.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "get_weather",
                "traceloop.entity.input": '{"args": [], "kwargs": {"city": "Paris"}}',
                "traceloop.entity.output": '{"temp_c": 18}',
            },
        )
    )
    assert traceloop is not None
    assert (traceloop["by"], traceloop["name"], traceloop["args"], traceloop["result"]) == (
        "openllmetry",
        "get_weather",
        {"city": "Paris"},
        {"temp_c": 18},
    )
    assert read_call(span("w", {"traceloop.span.kind": "workflow"})) is None


def test_the_trace_summary_lists_every_call_once_whoever_made_it() -> None:
    agent = span(
        "invoke_agent support",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
        span_id="00000000000000a1",
        start=1,
    )
    outer = span(
        "execute_tool get_weather",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"},
        span_id="00000000000000a2",
        parent="00000000000000a1",
        start=2,
    )
    # tracely's own span of the same call, inside the other instrumentor's: one call.
    inner = span(
        "execute_tool get_weather",
        {
            "tracely.kind": "tool",
            "tracely.name": "get_weather",
            "tracely.args": '{"city": "Paris"}',
            "tracely.output": '{"temp_c": 18}',
            "tracely.digest": json.dumps({"tracely.args": [17, "x"], "tracely.output": [14, "x"]}),
        },
        span_id="00000000000000a3",
        parent="00000000000000a2",
        start=3,
        scope="tracely",
    )
    other = span("GET /weather", {"http.route": "/weather"}, span_id="00000000000000a4", start=4)
    bundle = bundle_from_spans([agent, outer, inner, other])
    assert bundle is not None
    summary = bundle["trace"]
    assert summary["spans"] == 4
    assert [(c["kind"], c["name"], c["by"]) for c in summary["calls"]] == [
        ("agent", "support", "otel-genai"),
        ("tool", "get_weather", "tracely"),
    ]
    validate_bundle(orjson.loads(orjson.dumps(bundle)))


def test_a_trace_with_no_call_is_recorded_only_when_its_caller_asked() -> None:
    plain = span("POST /chat", {"http.route": "/chat"})
    assert bundle_from_spans([plain]) is None
    asked = replace(plain, trace_state="tracely=t1,other=x")
    bundle = bundle_from_spans([asked])
    assert bundle is not None and bundle["trace"]["spans"] == 1 and bundle["trace"]["calls"] == []
    assert bundle_from_spans([replace(plain, trace_state="vendor=tracely")]) is None


def test_calls_started_in_one_millisecond_keep_the_order_they_arrived_in() -> None:
    """OpenTelemetry JS stamps starts to the millisecond, and ends from that start."""

    def tool(name: str, span_id: str, end: int) -> SpanRecord:
        record = span(
            f"execute_tool {name}",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name},
            span_id=span_id,
            start=5_000_000,
        )
        return replace(record, end_time_unix_nano=end)

    first, second = (
        tool("lookup_order", "00000000000000b1", 5_000_900),
        tool("issue_refund", "00000000000000b2", 5_000_100),
    )
    bundle = bundle_from_spans([first, second])
    assert bundle is not None
    assert [c["name"] for c in bundle["trace"]["calls"]] == ["lookup_order", "issue_refund"]


def test_a_tool_call_with_arguments_too_deep_for_a_bundle_is_kept_with_them_as_text() -> None:
    deep = "[" * 300 + "]" * 300
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "t",
        "gen_ai.tool.call.arguments": deep,
    }
    bundle = bundle_from_spans([span("execute_tool t", attrs)])
    assert bundle is not None
    (call,) = bundle["trace"]["calls"]
    assert (call["name"], call["args"]) == ("t", deep)
    validate_bundle(orjson.loads(orjson.dumps(bundle)))


def test_a_failed_root_span_is_named_even_when_its_remote_parent_is_not_flagged() -> None:
    request = span("POST /chat", {"http.route": "/chat"}, status="ERROR", parent="00000000000000ff")
    agent = span(
        "invoke_agent a",
        {"gen_ai.operation.name": "invoke_agent"},
        span_id="00000000000000a2",
        parent="00000000000000a1",
    )
    bundle = bundle_from_spans([request, agent])
    assert bundle is not None and bundle["trace"]["errored"] == ["POST /chat"]


def test_secrets_in_another_instrumentors_tool_span_never_reach_the_summary() -> None:
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "login",
        "gen_ai.tool.call.arguments": '{"user": "ann", "password": "hunter2-xyz"}',
        "gen_ai.tool.call.result": "token sk-proj-" + "Q" * 24,
    }
    call = read_call(span("execute_tool login", attrs))
    assert call is not None and call["args"] == {"user": "ann", "password": "[REDACTED]"}
    assert "Q" * 24 not in json.dumps(call)
