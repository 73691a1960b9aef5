"""Message content on a call's span: the GenAI conventions' ``gen_ai.input.messages`` /
``gen_ai.output.messages`` exactly when content capture is on, and an input that is those
messages carried once (the extractor reads it there, and still reads spans that carry it
twice)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import tracely_sdk as tracely
from tests.sdk.providers._helpers import capturing_content, closed_url, llm_spans
from tracely_otel import SpanRecord, bundle_from_spans, digest_item
from tracely_otel.otlp import records_from_otlp_proto
from tracely_sdk import providers

MODEL = "gpt-4o"
MESSAGES = [{"role": "user", "parts": [{"type": "text", "content": "Hello there"}]}]
# A recording whose input is the conventions' messages (read from another instrumentor's span,
# or written by hand): replay compares the call's input in that form.
BUNDLE = {"llm": {MODEL: [{"input": MESSAGES, "output": "Hi", "usage": [3, 1]}]}}


@contextmanager
def _httpx(monkeypatch: pytest.MonkeyPatch, captured: bool) -> Iterator[None]:
    if captured:
        with capturing_content(monkeypatch, "httpx"):
            yield
        return
    providers.instrument("httpx")
    try:
        yield
    finally:
        providers.uninstrument("httpx")


def _replayed_call(capture: Any) -> tuple[Any, dict[str, Any]]:
    """Replay ``BUNDLE``'s call through httpx; the call's span and the replay run's bundle."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hello there"}]}
    with tracely.fixtures(BUNDLE) as rep, tracely.agent("agent", input="q"):
        httpx.post(f"{closed_url()}/v1/chat/completions", json=body)
    assert rep.clean, rep
    (span,) = llm_spans(capture)
    return span, capture.last_bundle


@pytest.mark.parametrize("captured", [False, True], ids=["capture off", "capture on"])
def test_the_genai_messages_are_on_the_span_exactly_when_content_is_captured(
    capture: Any, monkeypatch: pytest.MonkeyPatch, captured: bool
) -> None:
    with _httpx(monkeypatch, captured):
        span, _ = _replayed_call(capture)
    assert ("gen_ai.input.messages" in span.attributes) is captured
    assert ("gen_ai.output.messages" in span.attributes) is captured


def test_an_input_that_is_the_captured_messages_is_carried_once(
    capture: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _httpx(monkeypatch, True):
        span, bundle = _replayed_call(capture)
    attributes = span.attributes
    assert json.loads(attributes["gen_ai.input.messages"]) == MESSAGES
    assert "tracely.input" not in attributes
    digest = json.loads(attributes["tracely.digest"])
    assert "gen_ai.input.messages" in digest
    assert "tracely.input" not in digest
    (entry,) = bundle["llm"][MODEL]
    assert entry["input"] == MESSAGES


def test_the_recording_is_the_same_whichever_attribute_carried_the_input(
    capture: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = {}
    for captured in (False, True):
        capture.exporter.clear()
        with _httpx(monkeypatch, captured):
            _, bundle = _replayed_call(capture)
        spans = capture.spans
        wire = bundle_from_spans(records_from_otlp_proto(encode_spans(spans).SerializeToString()))
        assert wire is not None
        assert orjson.dumps(wire) == orjson.dumps(bundle)  # the server reads it alike
        (entry,) = bundle["llm"][MODEL]
        recorded[captured] = {k: v for k, v in entry.items() if k not in ("started_at", "ended_at")}
    assert recorded[True] == recorded[False]


def test_a_cut_messages_input_is_never_served(
    capture: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _httpx(monkeypatch, True):
        _replayed_call(capture)
    records = records_from_otlp_proto(encode_spans(capture.spans).SerializeToString())
    for record in records:
        text = record.attributes.get("gen_ai.input.messages")
        if isinstance(text, str):
            record.attributes = {**record.attributes, "gen_ai.input.messages": text[:-5]}
    bundle = bundle_from_spans(records)
    assert bundle is not None
    assert bundle["llm"] == {}
    (item,) = bundle["incomplete"]
    assert "gen_ai.input.messages does not match its recorded length/hash" in item["reason"]


def _span(attributes: dict[str, Any]) -> SpanRecord:
    return SpanRecord("ab" * 16, "cd" * 8, None, f"chat {MODEL}", 1, 2, attributes)


def test_a_span_of_the_earlier_version_with_both_copies_reads_tracely_input() -> None:
    given = '{"messages":[{"role":"user","content":"hi"}]}'
    digest = [digest_item("tracely.input", given), digest_item("tracely.output", '"Hi"')]
    attributes = {
        "tracely.kind": "llm",
        "tracely.name": MODEL,
        "gen_ai.input.messages": json.dumps(MESSAGES),
        "tracely.input": given,
        "tracely.output": '"Hi"',
        "tracely.digest": "{" + ",".join(digest) + "}",
    }
    bundle = bundle_from_spans([_span(attributes)])
    assert bundle is not None
    (entry,) = bundle["llm"][MODEL]
    assert entry["input"] == {"messages": [{"role": "user", "content": "hi"}]}


def test_a_span_of_the_earlier_version_without_an_input_still_has_none() -> None:
    # Captured messages on a call recorded without an input, as the earlier version wrote it:
    # they are what the model was sent, not the call's recorded input.
    attributes = {
        "tracely.kind": "llm",
        "tracely.name": MODEL,
        "gen_ai.input.messages": json.dumps(MESSAGES),
        "tracely.output": '"Hi"',
        "tracely.digest": "{" + digest_item("tracely.output", '"Hi"') + "}",
    }
    bundle = bundle_from_spans([_span(attributes)])
    assert bundle is not None
    (entry,) = bundle["llm"][MODEL]
    assert "input" not in entry
