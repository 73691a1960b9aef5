"""Live spans: attributes, GenAI conventions, errors, redaction, and never breaking the host."""

from __future__ import annotations

import threading
from typing import Any

import orjson
import pytest

import tracely_sdk as tracely
from tracely_otel import attributes as A
from tracely_otel import value_digest
from tracely_otel.diagnostics import RAISE_INTERNAL_ERRORS


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes)


def test_tool_span_carries_tracely_and_gen_ai_attributes(capture: Any) -> None:
    out = tracely.call_tool("get_order", lambda: {"status": "shipped"}, args={"order_id": 7})
    assert out == {"status": "shipped"}
    a = attrs(capture.span("execute_tool get_order"))
    assert a[A.KIND] == "tool" and a[A.NAME] == "get_order"
    assert a[A.GEN_AI_OPERATION_NAME] == "execute_tool" and a[A.GEN_AI_TOOL_NAME] == "get_order"
    assert orjson.loads(a[A.ARGS]) == {"order_id": 7}
    assert orjson.loads(a[A.OUTPUT]) == {"status": "shipped"}
    digest = orjson.loads(a[A.DIGEST])
    assert digest[A.OUTPUT] == value_digest(a[A.OUTPUT]) and digest[A.ARGS] == value_digest(
        a[A.ARGS]
    )


def test_llm_span_is_a_chat_span_with_usage(capture: Any) -> None:
    tracely.call_llm(
        "gpt-4o", lambda: "Hello", input=[{"role": "user", "content": "hi"}], usage=(812, 96)
    )
    span = capture.span("chat gpt-4o")
    a = attrs(span)
    assert span.kind.name == "CLIENT"
    assert a[A.GEN_AI_OPERATION_NAME] == "chat" and a[A.GEN_AI_REQUEST_MODEL] == "gpt-4o"
    assert a[A.GEN_AI_USAGE_INPUT_TOKENS] == 812 and a[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 96
    assert capture.last_bundle["llm"]["gpt-4o"][0]["usage"] == [812, 96]


def test_usage_may_be_computed_from_the_result(capture: Any) -> None:
    tracely.call_llm("m", lambda: "a b c", usage=lambda r: (2, len(r.split())))
    assert attrs(capture.span("chat m"))[A.GEN_AI_USAGE_OUTPUT_TOKENS] == 3


def test_agent_span_records_input_and_output(capture: Any) -> None:
    with tracely.agent("support-agent", input="where is my order?") as run:
        tracely.call_tool("get_order", lambda: {"status": "shipped"}, args={"order_id": 7})
        run.output = "It shipped."
    span = capture.span("invoke_agent support-agent")
    a = attrs(span)
    assert (
        a[A.GEN_AI_AGENT_NAME] == "support-agent" and a[A.GEN_AI_OPERATION_NAME] == "invoke_agent"
    )
    tool = capture.span("execute_tool get_order")
    assert tool.parent.span_id == span.context.span_id
    agent = capture.last_bundle["agent"]
    assert agent["input"] == {"args": ["where is my order?"], "kwargs": {}}
    assert agent["output"] == "It shipped."


def test_observed_agent_records_positional_and_keyword_arguments(capture: Any) -> None:
    @tracely.observe(as_type="agent", name="triage")
    def triage(ticket: str, *, priority: int = 1) -> str:
        return f"{ticket}:{priority}"

    assert triage("T-1", priority=3) == "T-1:3"
    agent = capture.last_bundle["agent"]
    assert agent["input"] == {"args": ["T-1"], "kwargs": {"priority": 3}}
    assert agent["output"] == "T-1:3"


def test_live_error_is_recorded_and_propagates_unchanged(capture: Any) -> None:
    class Down(Exception):
        pass

    def fail() -> Any:
        raise Down("service down")

    with pytest.raises(Down, match="service down"):
        tracely.call_tool("get_weather", fail, args={"city": "Oslo"})
    span = capture.span("execute_tool get_weather")
    assert span.status.status_code.name == "ERROR"
    a = attrs(span)
    assert a[A.ERROR_TYPE].endswith("Down")
    assert orjson.loads(a[A.ERROR])["message"] == "service down"
    assert span.events and span.events[0].name == "exception"


def test_agent_error_marks_the_span_errored(capture: Any) -> None:
    with pytest.raises(KeyError), tracely.agent("a", input=1):
        raise KeyError("x")
    assert capture.span("invoke_agent a").status.status_code.name == "ERROR"
    assert "error" in capture.last_bundle["agent"]


def test_unserialisable_output_is_recorded_with_a_marker_not_raised(capture: Any) -> None:
    lock = threading.Lock()
    assert tracely.call_tool("make_lock", lambda: lock) is lock
    a = attrs(capture.span("execute_tool make_lock"))
    assert A.OUTPUT in a[A.UNSERIALISABLE]
    bundle = capture.last_bundle
    assert "make_lock" not in bundle["tools"]
    assert bundle["incomplete"][0]["label"] == "tools:make_lock"
    with (
        tracely.fixtures(bundle),
        pytest.raises(tracely.ReplayError, match="could not be serialised"),
    ):
        tracely.call_tool("make_lock", lambda: lock)


def test_secrets_are_redacted_before_attributes_are_set(capture: Any) -> None:
    tracely.call_tool(
        "call_api",
        lambda: {"echo": "Authorization: Bearer abc.def.ghi-123"},
        args={"api_key": "sk-proj-0123456789abcdefghij", "q": "weather"},
    )
    a = attrs(capture.span("execute_tool call_api"))
    assert "sk-proj" not in a[A.ARGS] and "abc.def" not in a[A.OUTPUT]
    assert orjson.loads(a[A.ARGS]) == {"api_key": "[REDACTED]", "q": "weather"}


def test_redacted_args_compare_as_redacted(capture: Any) -> None:
    tracely.call_tool("call_api", lambda: "ok", args={"api_key": "sk-live-key-aaaaaaaaaaaaaaaa"})
    bundle = capture.last_bundle
    with tracely.fixtures(bundle) as rep:
        tracely.call_tool(
            "call_api", lambda: "live", args={"api_key": "sk-ci-key-bbbbbbbbbbbbbbbbbbb"}
        )
    assert rep.clean


def test_user_redaction_hook_runs_after_the_defaults(unset_global_provider: None) -> None:
    def hook(value: Any) -> Any:
        if isinstance(value, dict) and "email" in value:
            return {**value, "email": "<email>"}
        return value

    bundles: list[dict[str, Any]] = []
    provider = tracely.init(redact=hook, record=False, on_bundle=lambda t, b: bundles.append(b))
    assert provider is not None
    try:
        tracely.call_tool("lookup", lambda: "ok", args={"email": "a@b.c", "api_key": "k"})
        provider.force_flush()
    finally:
        from tracely_sdk import _redact

        _redact.configure(None)
    assert bundles[0]["tools"]["lookup"][0]["args"] == {"email": "<email>", "api_key": "[REDACTED]"}


def test_a_failing_extractor_never_breaks_the_call(
    capture: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(RAISE_INTERNAL_ERRORS)  # the failure is the test's: logged, as in production
    import tracely_otel._processor as processor

    def explode(spans: Any) -> Any:
        raise RuntimeError("extractor bug")

    monkeypatch.setattr(processor, "bundle_from_spans", explode)
    with tracely.agent("a", input=1) as run:
        run.output = tracely.call_tool("t", lambda: 5)
    assert run.output == 5
    assert "fixture extraction failed" in caplog.text


def test_a_failing_bundle_callback_never_breaks_the_call(
    capture: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RAISE_INTERNAL_ERRORS)  # the failure is the test's: logged, as in production

    def explode(trace_id: str, bundle: dict[str, Any]) -> None:
        raise RuntimeError("store down")

    capture.fixture_processor.add_callback(explode)
    with tracely.agent("a", input=1) as run:
        run.output = tracely.call_tool("t", lambda: 5)
    assert run.output == 5 and capture.bundles


def test_replay_works_with_tracing_disabled(unset_global_provider: None) -> None:
    # No SDK provider at all: spans are non-recording, replay still serves.
    with tracely.fixtures({"tools": {"t": [{"output": 1}]}}) as rep:
        assert tracely.call_tool("t", lambda: 2) == 1
    assert rep.clean
