"""boto3's ``bedrock-runtime.invoke_model_with_response_stream``, recorded at urllib3 as the AWS
event stream the wire carried (``providers.http._bedrock_invoke_stream``): its ``chunk`` events
served back as the same bytes, the Anthropic events they carry read for the span. An agent using
it is recorded live, promoted and replayed by ``tracely replay`` with no AWS credentials and the
server stopped; with the server up, a call the recording lacks is never PASS and never reaches
the server."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.cli._helpers import CLI, record
from tests.sdk.providers._helpers import (
    agent_project,
    bedrock,
    capturing_content,
    closed_url,
    fails_naming,
    llm_spans,
    replayed_offline,
)
from tracely_sdk import _entrypoints, providers
from tracely_sdk.providers.http import _bedrock_invoke_stream

CLAUDE = "anthropic.claude-3-haiku-20240307-v1:0"
PROVIDER = "urllib3.HTTPConnectionPool.urlopen"
PATH = f"/model/{CLAUDE}/invoke-with-response-stream"


@pytest.fixture
def instrumented() -> Iterator[None]:
    assert PROVIDER in providers.instrument("urllib3")
    yield
    providers.uninstrument("urllib3")


TOOLS = [
    {
        "name": "get_weather",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def invoke_stream(base: str, text: str = "Hello stream", **extra: Any) -> list[Any]:
    """The Anthropic events a streamed InvokeModel answers with, as the caller decodes them."""
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }
    reply = bedrock(base).invoke_model_with_response_stream(modelId=CLAUDE, body=json.dumps(body))
    return [json.loads(event["chunk"]["bytes"]) for event in reply["body"]]


def recorded(capture: Any, scenario: Any) -> tuple[Any, dict[str, Any]]:
    with serve() as (server, _), tracely.agent("agent", input="q"):
        value = scenario(server.base_url)
    return value, json.loads(json.dumps(capture.last_bundle))


def test_a_streamed_invoke_model_is_recorded_chunk_by_chunk_and_served_as_the_same_stream(
    capture: Any, instrumented: None
) -> None:
    live, bundle = recorded(capture, invoke_stream)
    assert live[0]["type"] == "message_start"
    text = "".join(e["delta"]["text"] for e in live if e["type"] == "content_block_delta")
    assert text == "You said: Hello stream"
    (entry,) = bundle["llm"][CLAUDE]
    assert entry["provider"] == PROVIDER
    assert entry["input"]["path"] == PATH
    assert entry["input"]["body"]["messages"] == [{"role": "user", "content": "Hello stream"}]
    output = entry["output"]
    assert output["headers"]["content-type"] == "application/vnd.amazon.eventstream"
    assert {e["headers"][":event-type"] for e in output["events"]} == {"chunk"}
    assert [json.loads(base64.b64decode(e["data"]["bytes"])) for e in output["events"]] == live
    assert entry["usage"] == [2, 4]
    (span,) = llm_spans(capture)
    assert span.name == f"chat {CLAUDE}"
    assert span.attributes["gen_ai.provider.name"] == "aws.bedrock"
    assert span.attributes["gen_ai.request.model"] == CLAUDE
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.request.max_tokens"] == 50
    assert span.attributes["gen_ai.response.id"] == live[0]["message"]["id"]
    assert span.attributes["gen_ai.response.model"] == CLAUDE
    assert span.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert span.attributes["gen_ai.usage.input_tokens"] == 2
    assert span.attributes["gen_ai.usage.output_tokens"] == 4

    with tracely.fixtures(bundle) as rep, tracely.agent("agent", input="q"):
        replayed_events = invoke_stream(closed_url())
    assert replayed_events == live
    assert rep.served == [f"llm:{CLAUDE}"] and rep.clean


def test_a_tool_call_streamed_by_invoke_model_is_on_the_span_as_the_model_asked_it(
    capture: Any, instrumented: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with capturing_content(monkeypatch, "urllib3"):
        recorded(capture, lambda base: invoke_stream(base, "Weather in Paris?", tools=TOOLS))
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    ((part,),) = [m["parts"] for m in json.loads(span.attributes["gen_ai.output.messages"])]
    assert part == {
        "type": "tool_call",
        "id": "toolu_bdrk_000001",
        "name": "get_weather",
        "arguments": {"city": "Paris"},
    }
    assert json.loads(span.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}
    ]


def test_a_stream_closed_early_records_the_chunks_that_were_read(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> Any:
        body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 50, "messages": []}
        reply = bedrock(base).invoke_model_with_response_stream(
            modelId=CLAUDE, body=json.dumps(body)
        )
        stream = reply["body"]
        first = json.loads(next(iter(stream))["chunk"]["bytes"])
        stream.close()
        return first

    live, bundle = recorded(capture, scenario)
    (entry,) = bundle["llm"][CLAUDE]
    events = entry["output"]["events"]
    assert events and json.loads(base64.b64decode(events[0]["data"]["bytes"])) == live
    with tracely.fixtures(bundle) as rep:
        assert scenario(closed_url()) == live
    assert rep.clean


def test_a_hand_written_answer_is_served_as_anthropic_events_in_chunks(instrumented: None) -> None:
    bundle = {"llm": {CLAUDE: [{"output": "Written by hand", "usage": [3, 3]}]}}
    with tracely.fixtures(bundle) as rep:
        events = invoke_stream(closed_url())
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == "Written by hand"
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    assert rep.served == [f"llm:{CLAUDE}"] and not rep.errors


def _chunk(event: dict[str, Any]) -> dict[str, Any]:
    encoded = base64.b64encode(json.dumps(event).encode()).decode()
    return {"headers": {":event-type": "chunk"}, "data": {"bytes": encoded}}


def test_a_family_not_read_as_anthropic_still_gives_its_usage_from_bedrocks_metrics() -> None:
    metrics = {"inputTokenCount": 7, "outputTokenCount": 9}
    titan = [
        _chunk({"outputText": "Hi", "index": 0}),
        _chunk(
            {"outputText": "!", "completionReason": "FINISH"}
            | {"amazon-bedrock-invocationMetrics": metrics}
        ),
    ]
    body = _bedrock_invoke_stream.body_from_events(titan)
    assert _bedrock_invoke_stream.CODEC.usage(body) == (7, 9)
    assert _bedrock_invoke_stream.CODEC.reasons(body) == []


def test_chunks_that_cannot_be_read_are_left_out_and_a_stream_of_none_has_no_body() -> None:
    unreadable = [
        {"headers": {":event-type": "chunk"}, "data": {"bytes": "not base64!"}},
        {"headers": {":event-type": "chunk"}, "data": {"bytes": base64.b64encode(b"[1]").decode()}},
        {"headers": {":event-type": "internalServerException"}, "data": {"message": "boom"}},
    ]
    assert _bedrock_invoke_stream.model_events(unreadable) == []
    with pytest.raises(ValueError, match="no message_start and no metrics"):
        _bedrock_invoke_stream.body_from_events(unreadable)


# --------------------------------------------------------------------------- tracely replay

AGENT = """
import json
import os

import boto3

import tracely_sdk as tracely

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
# built at import, its credentials and region from the environment
client = boto3.session.Session().client(
    "bedrock-runtime", endpoint_url=os.environ["STREAM_AGENT_BASE"]
)


def ask(question):
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64,
            "messages": [{"role": "user", "content": question}]}
    reply = client.invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(body))
    events = [json.loads(event["chunk"]["bytes"]) for event in reply["body"]]
    return "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")


def run(city):
    with tracely.agent("stream", input=city) as agent_run:
        agent_run.output = ask(f"Weather in {city}?")
        return agent_run.output
"""

AWS_SETTINGS = ("AWS_REGION", "AWS_PROFILE", "AWS_SESSION_TOKEN")


def test_tracely_replay_passes_a_streamed_invoke_model_agent_with_no_server_and_no_credentials(
    capture: Any,
    instrumented: None,
    cli: CLI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    for name in AWS_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    agent_project(tmp_path, monkeypatch, "stream_agent", AGENT)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with serve() as (server, _):
        monkeypatch.setenv("STREAM_AGENT_BASE", server.base_url)
        import stream_agent  # type: ignore[import-not-found]

        trace_id = record(capture, cli, stream_agent.run, "Paris")
        assert server.paths() == [PATH.replace(":", "%3A")]  # as botocore sends it
    assert [e["provider"] for e in capture.last_bundle["llm"][CLAUDE]] == [PROVIDER]
    # No credentials, no region, no server: the client is built again at import.
    case = replayed_offline(cli, monkeypatch, tmp_path, trace_id, "stream_agent", AGENT)
    assert case["served"] == [f"llm:{CLAUDE}"] and case["unused"] == []
    assert case["output"] == "You said: Weather in Paris?"
    credentials = sys.modules["stream_agent"].client._request_signer._credentials
    assert credentials.access_key == _entrypoints.PLACEHOLDER_API_KEY

    with serve() as (server, _):
        monkeypatch.setenv("STREAM_AGENT_BASE", server.base_url)
        # A model call the recording lacks: refused at the client, never sent.
        twice = AGENT.replace(
            "        return agent_run.output",
            "        ask('once more')\n        return agent_run.output",
        )
        missing = f"no recorded call for llm:{CLAUDE}"
        fails_naming(cli, monkeypatch, tmp_path, "stream_agent", twice, missing)
        # Any other Bedrock request: no model call, its connection refused by the guard.
        guarded = AGENT.replace(
            "        return agent_run.output",
            "        client.apply_guardrail(guardrailIdentifier='g1', guardrailVersion='1',\n"
            "                               source='INPUT', content=[{'text': {'text': city}}])\n"
            "        return agent_run.output",
        )
        refused = f"strict replay refused a connection to 127.0.0.1:{server.port}"
        fails_naming(cli, monkeypatch, tmp_path, "stream_agent", guarded, refused)
        assert server.requests == []  # nothing reached the live server
