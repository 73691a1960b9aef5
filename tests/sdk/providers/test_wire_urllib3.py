"""Model calls sent through urllib3, as requests and boto3 send them: recorded as the wire carried
them at ``HTTPConnectionPool.urlopen``, served on replay as a real ``urllib3.HTTPResponse``
(``tracely_sdk.providers.http``), Bedrock's Converse, ConverseStream and InvokeModel included."""

from __future__ import annotations

import gzip
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest
import requests
import urllib3

import tracely_sdk as tracely
from examples.llm_server import serve
from tests.sdk.providers._helpers import (
    bedrock,
    capturing_content,
    closed_url,
    llm_spans,
    replays_the_story,
)
from tracely_sdk import _entrypoints, providers
from tracely_sdk.store import Recording, SQLiteStore

ROOT = Path(__file__).resolve().parents[3]
GPT = "gpt-4o"
CLAUDE = "anthropic.claude-3-haiku-20240307-v1:0"  # botocore sends it URL-encoded: %3A
PROVIDER = "urllib3.HTTPConnectionPool.urlopen"


@pytest.fixture
def instrumented() -> Iterator[None]:
    assert PROVIDER in providers.instrument("urllib3")
    yield
    providers.uninstrument("urllib3")


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"text": text}]}]


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": GPT, "messages": [{"role": "user", "content": text}], **extra}


class Live:
    def __init__(self, value: Any, bundle: dict[str, Any], requests: int) -> None:
        self.value = value
        self.bundle = json.loads(json.dumps(bundle))
        self.requests = requests


def record(capture: Any, scenario: Callable[[str], Any]) -> Live:
    """``scenario(base_url)`` run live against the stand-in, inside an agent run."""
    with serve() as (server, _):
        with tracely.agent("agent", input="q"):
            value = scenario(server.base_url)
        count = len(server.requests)
    return Live(value, capture.last_bundle, count)


def replay(bundle: Any, scenario: Callable[[str], Any]) -> tuple[Any, tracely.ReplayReport]:
    """``scenario`` run under the strict recording, against a port where nothing listens."""
    with tracely.fixtures(bundle) as rep, tracely.agent("agent", input="q"):
        value = scenario(closed_url())
    return value, rep


# --------------------------------------------------------------------------- requests


def test_a_requests_post_is_recorded_as_the_wire_carried_it_and_served_as_a_urllib3_response(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> requests.Response:
        return requests.post(f"{base}/v1/chat/completions", json=chat("Hello there"), timeout=10)

    live = record(capture, scenario)
    assert live.requests == 1
    (entry,) = live.bundle["llm"][GPT]
    assert entry["provider"] == PROVIDER and entry["output_type"] == "http.response"
    assert entry["input"] == {
        "method": "POST",
        "path": "/v1/chat/completions",
        "body": chat("Hello there"),
    }
    assert entry["output"]["body"] == live.value.json()
    assert entry["output"]["headers"]["x-request-id"] == live.value.headers["x-request-id"]
    assert entry["usage"] == [2, 4]
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.provider.name"] == "openai"
    assert span.attributes["server.address"] == "127.0.0.1"
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)

    replayed, rep = replay(live.bundle, scenario)
    assert type(replayed) is requests.Response
    assert isinstance(replayed.raw, urllib3.HTTPResponse)
    assert replayed.status_code == 200 and replayed.reason == "OK"
    assert replayed.json() == live.value.json()
    assert replayed.headers["x-request-id"] == live.value.headers["x-request-id"]
    assert rep.served == [f"llm:{GPT}"] and rep.clean
    assert PROVIDER in rep.providers


@pytest.mark.parametrize("kept", ["content-length", "content-encoding"])
def test_a_served_body_has_the_length_of_its_own_bytes_and_no_recorded_encoding(
    capture: Any, instrumented: None, kept: str
) -> None:
    def scenario(base: str) -> tuple[dict[str, str], bytes]:
        # urllib3 checks the bytes it reads against the content-length it was given.
        response = urllib3.request(
            "POST", f"{base}/v1/chat/completions", json=chat("Hello there"), retries=False
        )
        return dict(response.headers), response.data

    live = record(capture, scenario)
    del live.bundle["checksum"]  # edited by hand
    (entry,) = live.bundle["llm"][GPT]
    # A hand-edited recording that kept the framing of the wire it came from (a server that
    # indented its JSON, or compressed it): the body is served compact and uncompressed.
    framing = {
        "content-length": str(len(json.dumps(entry["output"]["body"], indent=2))),
        "content-encoding": "gzip",
    }
    entry["output"]["headers"][kept] = framing[kept]
    (headers, data), rep = replay(live.bundle, scenario)
    assert json.loads(data) == json.loads(live.value[1]) and rep.clean
    assert headers["content-length"] == str(len(data))
    assert "content-encoding" not in headers


def test_a_streamed_requests_call_is_recorded_event_by_event_as_it_is_read(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> list[str]:
        body = chat("one two three", stream=True, stream_options={"include_usage": True})
        url = f"{base}/v1/chat/completions"
        with requests.post(url, json=body, stream=True, timeout=10) as response:
            return [line.decode() for line in response.iter_lines() if line]

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][GPT]
    events = entry["output"]["events"]
    assert events[-1] == {"text": "[DONE]"}
    assert [e["data"] for e in events[:-1]] == [json.loads(x[6:]) for x in live.value[:-1]]
    assert entry["usage"] == [3, 5]
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.request.stream"] is True
    assert "gen_ai.response.time_to_first_chunk" in span.attributes

    replayed, rep = replay(live.bundle, scenario)
    assert [json.loads(x[6:]) for x in replayed if x != "data: [DONE]"] == [
        json.loads(x[6:]) for x in live.value if x != "data: [DONE]"
    ]
    assert replayed[-1] == "data: [DONE]" and rep.clean


def test_an_error_status_is_served_as_the_same_response_and_requests_raises_the_same(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> tuple[int, Any, str]:
        response = requests.post(
            f"{base}/v1/chat/completions",
            json=chat("hi"),
            headers={"x-test-fault": "429"},
            timeout=10,
        )
        try:
            response.raise_for_status()
        except requests.HTTPError as exc:
            return response.status_code, response.json(), str(exc).split(" for url")[0]
        return response.status_code, response.json(), ""

    live = record(capture, scenario)
    assert live.value[0] == 429 and live.value[2] == "429 Client Error: Too Many Requests"
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.clean


def test_a_connection_failure_is_recorded_and_raised_again_as_requests_raised_it(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> str:
        try:
            requests.post(f"{closed_url()}/v1/chat/completions", json=chat("hi"), timeout=10)
        except requests.ConnectionError as exc:
            return f"{type(exc).__name__}: {type(exc.args[0].reason).__name__}"
        return "answered"

    live = record(capture, scenario)
    assert live.value == "ConnectionError: NewConnectionError"
    (entry,) = live.bundle["llm"][GPT]
    assert entry["error"]["type"] == "MaxRetryError"
    assert entry["error"]["reason"]["type"] == "NewConnectionError"
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.served == [f"llm:{GPT}"]


def test_a_request_that_is_no_model_call_goes_on_untouched(
    capture: Any, instrumented: None
) -> None:
    with serve() as (server, _):
        with tracely.agent("agent", input="q"):
            requests.post(f"{server.base_url}/v1/moderations", json={"model": GPT}, timeout=10)
            requests.get(f"{server.base_url}/v1/chat/completions", timeout=10)
            urllib3.request("POST", f"{server.base_url}/v1/chat/completions", body=b"not json")
        assert len(server.requests) == 3
    assert llm_spans(capture) == []


def test_urllib3s_own_request_is_recorded_with_its_body_read_inside_urlopen(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> Any:
        response = urllib3.request("POST", f"{base}/v1/chat/completions", json=chat("Hi"))
        return response.status, response.json()

    live = record(capture, scenario)
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.clean


class _Gzipped(http.server.BaseHTTPRequestHandler):
    """A chat completion sent gzip-compressed, as OpenAI sends a JSON answer."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        answer = {"id": "chatcmpl-1", "model": GPT, "choices": [], "usage": {}}
        body = gzip.compress(json.dumps(answer).encode())
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def gzip_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Gzipped)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


READERS: dict[str, Callable[[str], Any]] = {
    "requests": lambda url: requests.post(url, json=chat("Hi"), timeout=10).json(),
    "urllib3 decoded": lambda url: urllib3.request("POST", url, json=chat("Hi")).json(),
    "urllib3 raw": lambda url: gzip.decompress(
        urllib3.request("POST", url, json=chat("Hi"), decode_content=False).data
    ),
    "urllib3 raw, read later": lambda url: gzip.decompress(
        urllib3.request(
            "POST", url, json=chat("Hi"), preload_content=False, decode_content=False
        ).read()
    ),
}


@pytest.mark.parametrize("reader", READERS)
def test_a_compressed_answer_is_recorded_decoded_however_the_caller_reads_it(
    capture: Any, instrumented: None, gzip_server: str, reader: str
) -> None:
    url = f"{gzip_server}/v1/chat/completions"
    with tracely.agent("agent", input="q"):
        live = READERS[reader](url)
    (entry,) = capture.last_bundle["llm"][GPT]
    assert entry["output"]["body"]["id"] == "chatcmpl-1"
    assert "content-encoding" not in entry["output"]["headers"]
    if reader.startswith("urllib3 raw"):
        return  # served as recorded, uncompressed: a caller reading raw bytes gets JSON
    with tracely.fixtures(json.loads(json.dumps(capture.last_bundle))) as rep:
        assert READERS[reader](f"{closed_url()}/v1/chat/completions") == live
    assert rep.clean


# --------------------------------------------------------------------------- boto3 bedrock-runtime


def converse(base: str, text: str = "Hello there") -> Any:
    reply = bedrock(base).converse(
        modelId=CLAUDE,
        messages=user(text),
        system=[{"text": "Be brief."}],
        inferenceConfig={"maxTokens": 64, "temperature": 0.5},
    )
    reply.pop("ResponseMetadata")
    return reply


def test_a_boto3_converse_call_is_recorded_with_the_model_from_its_path(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, converse)
    assert live.value["output"]["message"]["content"] == [{"text": "You said: Hello there"}]
    (entry,) = live.bundle["llm"][CLAUDE]
    assert entry["provider"] == PROVIDER
    assert entry["input"]["path"] == f"/model/{CLAUDE}/converse"
    assert entry["input"]["body"]["messages"] == user("Hello there")
    assert entry["output"]["body"]["stopReason"] == "end_turn"
    assert entry["output"]["headers"]["x-amzn-requestid"] == "req-000001"
    assert entry["usage"] == [4, 4]
    (span,) = llm_spans(capture)
    assert span.name == f"chat {CLAUDE}"
    assert span.attributes["gen_ai.provider.name"] == "aws.bedrock"
    assert span.attributes["gen_ai.request.model"] == CLAUDE
    assert span.attributes["gen_ai.request.max_tokens"] == 64
    assert span.attributes["gen_ai.request.temperature"] == 0.5
    assert span.attributes["gen_ai.usage.input_tokens"] == 4
    assert span.attributes["gen_ai.usage.output_tokens"] == 4
    assert span.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)

    replayed, rep = replay(live.bundle, converse)
    assert replayed == live.value
    assert rep.served == [f"llm:{CLAUDE}"] and rep.clean


def test_bedrock_messages_are_on_the_span_in_the_genai_shape_when_content_is_captured(
    capture: Any, instrumented: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with capturing_content(monkeypatch, "urllib3"):
        record(capture, converse)
    (span,) = llm_spans(capture)
    assert json.loads(span.attributes["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Hello there"}]},
    ]
    assert json.loads(span.attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "You said: Hello there"}],
            "finish_reason": "stop",
        }
    ]


def test_a_tool_call_asked_for_in_a_converse_stream_is_on_the_span_as_the_model_asked_it(
    capture: Any, instrumented: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with capturing_content(monkeypatch, "urllib3"):
        record(capture, converse_stream)
    (span,) = llm_spans(capture)
    ((part,),) = [m["parts"] for m in json.loads(span.attributes["gen_ai.output.messages"])]
    assert part == {
        "type": "tool_call",
        "id": "tooluse_000001",
        "name": "get_weather",
        "arguments": {"city": "Paris"},
    }


TOOLS = {
    "tools": [
        {
            "toolSpec": {
                "name": "get_weather",
                "inputSchema": {
                    "json": {"type": "object", "properties": {"city": {"type": "string"}}}
                },
            }
        }
    ]
}


def converse_stream(base: str, text: str = "What is the weather in Paris?") -> list[Any]:
    reply = bedrock(base).converse_stream(modelId=CLAUDE, messages=user(text), toolConfig=TOOLS)
    return list(reply["stream"])


def test_a_boto3_converse_stream_is_recorded_event_by_event_and_served_as_an_event_stream(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, converse_stream)
    assert live.value[0] == {"messageStart": {"role": "assistant"}}
    (entry,) = live.bundle["llm"][CLAUDE]
    assert entry["input"]["path"] == f"/model/{CLAUDE}/converse-stream"
    output = entry["output"]
    assert output["headers"]["content-type"] == "application/vnd.amazon.eventstream"
    events = output["events"]
    assert [e["headers"][":event-type"] for e in events] == [next(iter(e)) for e in live.value]
    assert [e["data"] for e in events] == [next(iter(e.values())) for e in live.value]
    assert events[0]["headers"][":message-type"] == "event"
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.provider.name"] == "aws.bedrock"
    assert span.attributes["gen_ai.request.stream"] is True
    assert span.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    tokens = live.value[-1]["metadata"]["usage"]
    assert entry["usage"] == [tokens["inputTokens"], tokens["outputTokens"]]

    replayed, rep = replay(live.bundle, converse_stream)
    assert replayed == live.value
    assert rep.served == [f"llm:{CLAUDE}"] and rep.clean


def test_a_converse_stream_closed_early_records_the_events_that_were_read(
    capture: Any, instrumented: None
) -> None:
    def scenario(base: str) -> list[Any]:
        reply = bedrock(base).converse_stream(modelId=CLAUDE, messages=user("one two three four"))
        stream = reply["stream"]
        first = [next(iter(stream))]
        stream.close()
        return first

    live = record(capture, scenario)
    (entry,) = live.bundle["llm"][CLAUDE]
    events = entry["output"]["events"]
    assert events and events[0]["headers"][":event-type"] == "messageStart"
    replayed, rep = replay(live.bundle, scenario)
    assert replayed == live.value and rep.clean


def invoke(base: str, text: str = "Hello invoke") -> Any:
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": text}],
    }
    reply = bedrock(base).invoke_model(modelId=CLAUDE, body=json.dumps(body))
    return reply["contentType"], json.loads(reply["body"].read())


def test_a_boto3_invoke_model_call_is_recorded_with_the_models_own_body(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, invoke)
    content_type, message = live.value
    assert content_type == "application/json"
    (entry,) = live.bundle["llm"][CLAUDE]
    assert entry["input"]["path"] == f"/model/{CLAUDE}/invoke"
    assert entry["output"]["body"] == message
    assert entry["output"]["headers"]["x-amzn-bedrock-input-token-count"] == "2"
    assert entry["usage"] == [2, 4]
    (span,) = llm_spans(capture)
    assert span.attributes["gen_ai.provider.name"] == "aws.bedrock"
    assert span.attributes["gen_ai.request.max_tokens"] == 50
    assert span.attributes["gen_ai.response.id"] == message["id"]
    assert span.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)

    replayed, rep = replay(live.bundle, invoke)
    assert replayed == live.value and rep.clean


def test_a_changed_converse_prompt_is_served_and_reported_with_where_it_differs(
    capture: Any, instrumented: None
) -> None:
    live = record(capture, converse)
    replayed, rep = replay(live.bundle, lambda base: converse(base, "Hello, changed"))
    assert replayed == live.value
    assert rep.diverged == [f"llm:{CLAUDE}"] and not rep.clean
    (divergence,) = rep.divergences
    assert any(d["actual"] == "Hello, changed" for d in divergence["differences"])


def test_a_bedrock_call_the_recording_lacks_is_refused_before_it_reaches_the_server(
    capture: Any, instrumented: None
) -> None:
    with serve() as (server, _):
        with tracely.fixtures({}) as rep, pytest.raises(botocore.exceptions.HTTPClientError):
            converse(server.base_url)  # botocore wraps what its HTTP client raised
        assert server.requests == []
    (error,) = rep.errors
    assert isinstance(error, tracely.ReplayError) and error.label == f"llm:{CLAUDE}"


def test_a_hand_written_answer_is_served_as_converse_and_as_converse_stream(
    instrumented: None,
) -> None:
    bundle = {"llm": {CLAUDE: [{"output": "Written by hand"}, {"output": "Streamed by hand"}]}}
    with tracely.fixtures(bundle) as rep:
        plain = converse(closed_url())
        streamed = converse_stream(closed_url(), "Hi")
    assert plain["output"]["message"]["content"] == [{"text": "Written by hand"}]
    text = "".join(
        e["contentBlockDelta"]["delta"]["text"] for e in streamed if "contentBlockDelta" in e
    )
    assert text == "Streamed by hand"
    assert streamed[-2] == {"messageStop": {"stopReason": "end_turn"}}
    assert len(rep.served) == 2 and not rep.errors


# --------------------------------------------------------------------------- the story


def _ask(base_url: str, question: str, *, twice: bool = False) -> str:
    with tracely.agent("bedrock-agent", input=question) as agent_run:
        events = bedrock(base_url).converse_stream(modelId=CLAUDE, messages=user(question))
        answer = "".join(
            e["contentBlockDelta"]["delta"].get("text", "")
            for e in events["stream"]
            if "contentBlockDelta" in e
        )
        if twice:
            answer = converse(base_url, question + " again")["output"]["message"]["content"][0][
                "text"
            ]
        agent_run.output = answer
    return answer


def test_a_recorded_bedrock_case_passes_fails_on_a_changed_prompt_and_is_incomplete_on_an_extra_call(
    capture: Any, instrumented: None, tmp_path: Path
) -> None:
    with serve() as (server, _):
        live = _ask(server.base_url, "Paris weather?")
    assert live == "You said: Paris weather?"
    replays_the_story(capture.last_bundle, tmp_path, _ask, f"llm:{CLAUDE}")


# --------------------------------------------------------------------------- tracely replay

AGENT = """
import gzip
import http.server
import json
import os

import boto3
import requests

import tracely_sdk as tracely

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


def run(question):
    base = os.environ["BEDROCK_AGENT_BASE"]
    client = boto3.client("bedrock-runtime", endpoint_url=base)
    messages = [{"role": "user", "content": [{"text": question}]}]
    with tracely.agent("bedrock-agent", input=question) as agent_run:
        plan = client.converse(modelId=MODEL, messages=messages)
        text = plan["output"]["message"]["content"][0]["text"]
        stream = client.converse_stream(modelId=MODEL, messages=messages)["stream"]
        streamed = "".join(
            e["contentBlockDelta"]["delta"]["text"] for e in stream if "contentBlockDelta" in e
        )
        body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64,
                "messages": [{"role": "user", "content": streamed}]}
        invoked = json.loads(client.invoke_model(modelId=MODEL, body=json.dumps(body))["body"].read())
        chat = requests.post(
            base + "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": [{"role": "user", "content": text}]},
            timeout=10,
        ).json()
        extra = os.environ.get("BEDROCK_AGENT_EXTRA")
        if extra == "converse":
            client.converse(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "more"}]}])
        elif extra == "guardrail":
            client.apply_guardrail(
                guardrailIdentifier="g1", guardrailVersion="1", source="INPUT",
                content=[{"text": {"text": question}}],
            )
        agent_run.output = [text, streamed, invoked["content"][0]["text"],
                            chat["choices"][0]["message"]["content"]]
        return agent_run.output
"""


def _replay_cli(tmp_path: Path, store: str, base: str, extra: str = "") -> dict[str, Any]:
    """``tracely replay`` in a process of its own, with no AWS or model keys anywhere, the agent
    pointed at ``base``; the case's JSON report entry."""
    unset = (*_entrypoints.API_KEY_VARIABLES, "AWS_REGION", "AWS_PROFILE", "AWS_SESSION_TOKEN")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env = {k: v for k, v in env.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        BEDROCK_AGENT_BASE=base,
        BEDROCK_AGENT_EXTRA=extra,
        AWS_CONFIG_FILE=str(tmp_path / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-aws-credentials"),
    )
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracely_sdk.cli",
            "replay",
            "--store",
            store,
            "--json",
            str(report),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    (case,) = json.loads(report.read_text())["cases"]
    return dict(case)


def test_tracely_replay_passes_a_boto3_and_requests_agent_with_no_server_and_no_credentials(
    capture: Any, instrumented: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bedrock_agent.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # the project: its own modules may be replayed
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "live-key")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    import bedrock_agent  # type: ignore[import-not-found]

    with serve() as (server, _):
        monkeypatch.setenv("BEDROCK_AGENT_BASE", server.base_url)
        live = bedrock_agent.run("Paris weather?")
        assert len(server.requests) == 4
    bundle = capture.last_bundle
    assert {m: [e["provider"] for e in es] for m, es in bundle["llm"].items()} == {
        CLAUDE: [PROVIDER] * 3,
        GPT: [PROVIDER],
    }
    store_path = tmp_path / "store.db"
    store = SQLiteStore(store_path)
    try:
        store.put_recording(Recording.from_bundle(bundle))
        store.promote(str(bundle["trace_id"]), name="bedrock", entrypoint="bedrock_agent:run")
        (stored,) = store.list_cases()
        assert stored.expected_output == live
    finally:
        store.close()
    url = f"sqlite:///{store_path.as_posix().lstrip('/')}"

    case = _replay_cli(tmp_path, url, closed_url())
    assert case["verdict"] == "PASS", case

    with serve() as (server, _):
        port = server.port
        missing = _replay_cli(tmp_path, url, server.base_url, extra="converse")
        assert missing["verdict"] == "INCOMPLETE", missing
        assert missing["reasons"][0].startswith(f"no recorded call for llm:{CLAUDE}")
        refused = _replay_cli(tmp_path, url, server.base_url, extra="guardrail")
        assert refused["verdict"] == "INCOMPLETE", refused
        assert refused["reasons"][0].startswith(
            f"strict replay refused a connection to 127.0.0.1:{port}"
        )
        assert server.requests == []  # with the server up, nothing reached it
