"""Running a scenario over real HTTP against a small scripted service on 127.0.0.1."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tracely_sdk._runner import ERRORED, FAIL, INCOMPLETE, PASS
from tracely_sdk.scenarios import run_scenario, scenario_from_data

Reply = Callable[[dict[str, Any], dict[str, str]], tuple[int, Any]]


class Service(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, reply: Reply) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reply = reply
        self.requests: list[tuple[dict[str, Any], dict[str, str]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Service
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.requests.append((body, headers))
        status, answer = self.server.reply(body, headers)
        data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def service() -> Iterator[Callable[[Reply], Service]]:
    started: list[Service] = []

    def start(reply: Reply) -> Service:
        s = Service(reply)
        threading.Thread(target=s.serve_forever, args=(0.02,), daemon=True).start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.shutdown()
        s.server_close()


def scenario(*turns: dict[str, Any], **fields: Any) -> Any:
    data = {"name": "t", "target": {"shape": "message"}, "turns": list(turns), **fields}
    return scenario_from_data(data, source="t.yaml")


def echo(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    return 200, {"reply": f"you said {body['message']}"}


def test_turns_go_in_order_in_one_conversation_each_with_its_own_traceparent(
    service: Callable[[Reply], Service],
) -> None:
    s = service(echo)
    result = run_scenario(
        scenario({"user": "one", "expect": [{"contains": "one"}]}, {"user": "two"}),
        target_url=s.url,
    )
    assert result.verdict == PASS, result.reasons
    (first, h1), (second, h2) = s.requests
    assert [first["message"], second["message"]] == ["one", "two"]
    assert first["conversation_id"] == second["conversation_id"]
    pattern = re.compile(r"^00-([0-9a-f]{32})-[0-9a-f]{16}-01$")
    ids = [pattern.match(h["traceparent"]) for h in (h1, h2)]
    assert all(ids) and ids[0][1] != ids[1][1]  # type: ignore[index]
    turns = result.report["attempts"][0]["turns"]  # type: ignore[index]
    assert [t["trace_id"] for t in turns] == [m[1] for m in ids]  # type: ignore[index]
    assert h1["tracestate"] == "tracely=t1"


def test_a_failed_check_fails_the_scenario_naming_the_turn(
    service: Callable[[Reply], Service],
) -> None:
    s = service(echo)
    result = run_scenario(
        scenario({"user": "one"}, {"user": "two", "expect": [{"contains": "three"}]}),
        target_url=s.url,
    )
    assert result.verdict == FAIL
    assert result.reasons == [
        "turn 2: contains 'three': expected the reply to contain 'three'; got 'you said two'"
    ]


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (lambda b, h: (503, {"error": "overloaded"}), "answered HTTP 503"),
        (lambda b, h: (400, "bad"), "answered HTTP 400"),
        (lambda b, h: (200, {"text": "no reply key"}), "no reply at $.reply"),
    ],
)
def test_a_service_error_is_errored_not_fail(
    service: Callable[[Reply], Service], reply: Reply, words: str
) -> None:
    s = service(reply)
    result = run_scenario(scenario({"user": "one"}, {"user": "two"}), target_url=s.url)
    assert result.verdict == ERRORED
    assert len(result.reasons) == 1 and result.reasons[0].startswith("turn 1:")
    assert words in result.reasons[0]
    assert len(s.requests) == 1  # the conversation stops at the failed turn


def test_a_service_that_is_down_is_errored() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run_scenario(scenario({"user": "one"}), target_url=f"http://127.0.0.1:{port}")
    assert result.verdict == ERRORED and "cannot reach" in result.reasons[0]


def test_the_openai_shape_sends_the_whole_conversation(
    service: Callable[[Reply], Service],
) -> None:
    def chat(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        last = body["messages"][-1]["content"]
        return 200, {"choices": [{"message": {"role": "assistant", "content": f"re: {last}"}}]}

    s = service(chat)
    target = {"shape": "openai", "model": "m-1", "headers": {"Authorization": "Bearer ${SVC_KEY}"}}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SVC_KEY", "k-123")
        result = run_scenario(
            scenario({"user": "a"}, {"user": "b", "expect": [{"equals": "re: b"}]}, target=target),
            target_url=s.url,
        )
    assert result.verdict == PASS, result.reasons
    body, headers = s.requests[1]
    assert body["model"] == "m-1"
    assert body["messages"] == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "re: a"},
        {"role": "user", "content": "b"},
    ]
    assert headers["authorization"] == "Bearer k-123"


def test_repeat_passes_at_the_threshold_and_says_so(service: Callable[[Reply], Service]) -> None:
    count = iter(range(100))

    def flaky(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        return 200, {"reply": "ok" if next(count) % 3 else "nope"}  # the 1st of every 3 fails

    s = service(flaky)
    result = run_scenario(
        scenario({"user": "x", "expect": [{"equals": "ok"}]}, pass_threshold=0.6),
        target_url=s.url,
        repeat=3,
    )
    assert result.verdict == PASS
    assert result.reasons == ["passed 2 of 3 runs (threshold 0.6)"]
    strict = run_scenario(
        scenario({"user": "x", "expect": [{"equals": "ok"}]}), target_url=s.url, repeat=3
    )
    assert strict.verdict == FAIL
    assert strict.reasons[0] == "passed 2 of 3 runs (threshold 1)"


def test_trace_checks_without_a_store_are_never_a_pass(service: Callable[[Reply], Service]) -> None:
    s = service(echo)
    spec = scenario({"user": "one", "trace": [{"called": "get_weather"}]})
    result = run_scenario(spec, target_url=s.url)
    assert result.verdict == INCOMPLETE
    assert "trace checks not evaluated: no store" in result.reasons[0]
    skipped = run_scenario(spec, target_url=s.url, check_traces=False)
    assert skipped.verdict == PASS
    assert skipped.reasons == ["turn 1: trace checks not evaluated: --no-trace-checks"]
