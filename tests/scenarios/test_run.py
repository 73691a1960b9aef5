"""Running a scenario over real HTTP against a small scripted service on 127.0.0.1."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tracely_sdk._runner import ERRORED, FAIL, INCOMPLETE, PASS
from tracely_sdk.cli import main
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
        _answer(self, status, answer.encode() if isinstance(answer, str) else answer)


def _answer(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: Any,
    headers: dict[str, str] | None = None,
) -> None:
    """A whole answer: ``body`` as it is if bytes, else as JSON."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    handler.send_response(status)
    for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


_S = TypeVar("_S", bound=ThreadingHTTPServer)


@contextmanager
def _serving(make: Callable[[Any], _S]) -> Iterator[Callable[[Any], _S]]:
    """A function that starts a server made by ``make`` in a thread; all stopped at the end."""
    started: list[_S] = []

    def start(arg: Any) -> _S:
        s = make(arg)
        threading.Thread(target=s.serve_forever, args=(0.02,), daemon=True).start()
        started.append(s)
        return s

    try:
        yield start
    finally:
        for s in started:
            s.shutdown()
            s.server_close()


@pytest.fixture
def service() -> Iterator[Callable[[Reply], Service]]:
    with _serving(Service) as start:
        yield start


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


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://127.0.0.1:21", "is not an http(s) URL"),
        ("http://127.0.0.1:99999", "bad port"),
    ],
)
def test_a_target_that_is_no_http_url_is_errored(url: str, words: str) -> None:
    result = run_scenario(scenario({"user": "one"}), target_url=url)
    assert result.verdict == ERRORED and words in result.reasons[0]


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
            scenario(
                {"user": "a"},
                {"user": "b", "expect": [{"equals": "re: b"}]},
                target=target,
                env=["SVC_KEY"],
            ),
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


# -- services that answer in other ways: raw handlers -------------------------------------

Handle = Callable[["_RawHandler", Any], None]


class RawService(ThreadingHTTPServer):
    """A service whose handler writes the whole answer itself (redirects, streams, trickles)."""

    daemon_threads = True

    def __init__(self, handle: Handle) -> None:
        super().__init__(("127.0.0.1", 0), _RawHandler)
        self.handle = handle
        self.requests: list[tuple[str, str, Any, dict[str, str]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _RawHandler(BaseHTTPRequestHandler):
    server: RawService
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.requests.append((self.command, self.path, body, headers))
        self.server.handle(self, body)

    do_GET = do_POST = do_CONNECT = _any

    def answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        _answer(self, status, body, headers)


@pytest.fixture
def raw_service() -> Iterator[Callable[[Handle], RawService]]:
    with _serving(RawService) as start:
        yield start


def custom(turns: list[dict[str, Any]], **target: Any) -> Any:
    data = {
        "name": "t",
        "target": {"path": "/", "body": {"message": "{{message}}"}, "reply": "$.reply", **target},
        "turns": turns,
    }
    return scenario_from_data(data, source="t.yaml")


def test_a_conversation_carries_the_id_the_service_issued(
    raw_service: Callable[[Handle], RawService],
) -> None:
    """Turn 1 starts a conversation and gets its id; turn 2 must name it in path and header."""
    issued = "c-7f3a"

    def conversations(h: _RawHandler, body: Any) -> None:
        if h.path == "/conversations":
            h.answer(201, {"id": issued, "reply": f"started: {body['message']}"})
        elif h.path == f"/conversations/{issued}" and h.headers["X-Conversation"] == issued:
            h.answer(200, {"reply": f"continued {issued}: {body['message']}"})
        else:
            h.answer(404, {"error": "no such conversation"})

    s = raw_service(conversations)
    spec = custom(
        [
            {"user": "hello", "save": {"cid": "$.id"}, "expect": [{"contains": "started"}]},
            {
                "user": "again",
                "path": "/conversations/{{cid}}",
                "headers": {"X-Conversation": "{{cid}}"},
                "expect": [{"equals": f"continued {issued}: again"}],
            },
        ],
        path="/conversations",
    )
    result = run_scenario(spec, target_url=s.url)
    assert result.verdict == PASS, result.reasons
    assert [(m, p) for m, p, _, _ in s.requests] == [
        ("POST", "/conversations"),
        ("POST", f"/conversations/{issued}"),
    ]


def test_a_saved_value_goes_into_the_path_as_one_segment(
    raw_service: Callable[[Handle], RawService],
) -> None:
    s = raw_service(lambda h, body: h.answer(200, {"id": "../admin?x=1", "reply": "ok"}))
    spec = custom(
        [{"user": "a", "save": {"cid": "$.id"}}, {"user": "b", "path": "/c/{{cid}}"}], path="/c"
    )
    assert run_scenario(spec, target_url=s.url).verdict == PASS
    assert s.requests[1][1] == "/c/..%2Fadmin%3Fx%3D1"


@pytest.mark.parametrize(
    ("saved", "words"),
    [
        ("c1\r\nX-Injected: yes", "holds a line break, not valid in a header"),
        ({"an": "object"}, 'is {"an": "object"}; only a string or a number goes inside text'),
    ],
)
def test_a_saved_value_that_cannot_be_a_header_errs_the_turn(
    raw_service: Callable[[Handle], RawService], saved: Any, words: str
) -> None:
    s = raw_service(lambda h, body: h.answer(200, {"id": saved, "reply": "ok"}))
    spec = custom(
        [{"user": "a", "save": {"cid": "$.id"}}, {"user": "b", "headers": {"X-Id": "{{cid}}"}}]
    )
    result = run_scenario(spec, target_url=s.url)
    assert result.verdict == ERRORED
    assert result.reasons == [f"turn 2: {{{{cid}}}} {words}"]
    assert len(s.requests) == 1


def test_a_value_to_save_that_is_not_there_errs_the_turn(
    raw_service: Callable[[Handle], RawService],
) -> None:
    s = raw_service(lambda h, body: h.answer(200, {"reply": "no id here"}))
    spec = custom([{"user": "a", "save": {"cid": "$.id"}}, {"user": "b", "path": "/c/{{cid}}"}])
    result = run_scenario(spec, target_url=s.url)
    assert result.verdict == ERRORED
    assert result.reasons[0].startswith("turn 1: the response has no value at $.id to save as cid")
    assert len(s.requests) == 1


def test_the_timeout_bounds_the_whole_turn_not_each_read(
    raw_service: Callable[[Handle], RawService],
) -> None:
    """A service sending a byte at a time, each well within the timeout, the whole not."""
    stop = threading.Event()

    def trickle(h: _RawHandler, body: Any) -> None:
        data = json.dumps({"reply": "x" * 20}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        for byte in data:
            try:
                h.wfile.write(bytes([byte]))
                h.wfile.flush()
            except OSError:
                return  # the runner hung up: the turn is over
            if stop.wait(0.1):
                return

    s = raw_service(trickle)
    try:
        result = run_scenario(custom([{"user": "a"}], timeout_s=0.5), target_url=s.url)
    finally:
        stop.set()
    assert result.verdict == ERRORED
    assert (
        "did not answer in full within 0.5 s (target.timeout_s, for the whole turn)"
        in (result.reasons[0])
    )


def sse(h: _RawHandler, events: list[str]) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream; charset=utf-8")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    for event in events:
        chunk = event.encode()
        h.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        h.wfile.flush()
    h.wfile.write(b"0\r\n\r\n")


def test_a_streamed_reply_is_read_to_the_end_and_checked_like_any_other(
    raw_service: Callable[[Handle], RawService],
) -> None:
    def chat(h: _RawHandler, body: Any) -> None:
        last = body["messages"][-1]["content"]
        pieces = [{"role": "assistant"}, {"content": "re: "}, {"content": last}]
        sse(
            h,
            [f"data: {json.dumps({'id': 'chunk', 'choices': [{'delta': p}]})}\n\n" for p in pieces]
            + [": keep-alive\n\n", "data: [DONE]\n\n"],
        )

    s = raw_service(chat)
    spec = scenario_from_data(
        {
            "name": "t",
            "target": {"shape": "openai", "model": "m-1"},
            "turns": [
                {"user": "a"},
                {
                    "user": "b",
                    "expect": [
                        {"equals": "re: b"},
                        {"regex": "^re: [a-z]$"},
                        {"json_path": {"path": "$[0].id", "equals": "chunk"}},
                    ],
                },
            ],
        },
        source="t.yaml",
    )
    result = run_scenario(spec, target_url=s.url)
    assert result.verdict == PASS, result.reasons
    assert s.requests[1][2]["messages"][1] == {"role": "assistant", "content": "re: a"}
    assert result.output == ["re: a", "re: b"]


def test_latency_is_the_whole_turns_to_the_streams_end(
    raw_service: Callable[[Handle], RawService],
) -> None:
    def slow(h: _RawHandler, body: Any) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()  # no length, no chunks: the stream ends when the connection closes
        h.wfile.write(b"data: first\n\n")
        h.wfile.flush()
        time.sleep(0.3)
        h.wfile.write(b"data: last\n\n")
        h.close_connection = True

    s = raw_service(slow)
    result = run_scenario(
        custom([{"user": "a", "expect": [{"equals": "firstlast"}, {"latency_ms": 250}]}]),
        target_url=s.url,
    )
    assert result.verdict == FAIL
    (reason,) = result.reasons
    assert reason.startswith("turn 1: latency_ms 250: expected a reply within 250 ms; got ")
    assert int(reason.rsplit(" ", 2)[-2]) >= 300


def test_a_stream_of_text_events_joins_their_data(
    raw_service: Callable[[Handle], RawService],
) -> None:
    s = raw_service(lambda h, body: sse(h, ["data: It is\n\n", "data:  18°C\ndata: in Oslo\n\n"]))
    result = run_scenario(
        custom([{"user": "a", "expect": [{"equals": "It is 18°C\nin Oslo"}]}]), target_url=s.url
    )
    assert result.verdict == PASS, result.reasons


def redirect_to(url: str, status: int = 302) -> Handle:
    return lambda h, body: h.answer(status, {"moved": url}, {"Location": url})


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_errored_and_gets_no_credentials(
    raw_service: Callable[[Handle], RawService], monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    elsewhere = raw_service(lambda h, body: h.answer(200, {"reply": "judged elsewhere"}))
    home = raw_service(redirect_to(elsewhere.url + "/collect", status))
    monkeypatch.setenv("SECRET", "s3cret")
    turns = [{"user": "a", "expect": [{"contains": "judged"}]}]
    spec = scenario_from_data(
        {
            "name": "t",
            "env": ["SECRET"],
            "target": {"shape": "message", "headers": {"Authorization": "Bearer ${SECRET}"}},
            "turns": turns,
        },
        source="t.yaml",
    )
    result = run_scenario(spec, target_url=home.url)
    assert result.verdict == ERRORED
    assert (
        f"redirected (HTTP {status}) to another origin, {elsewhere.url}; not" in result.reasons[0]
    )
    assert "allow_redirects_to" in result.reasons[0]
    assert elsewhere.requests == []
    assert home.requests[0][3]["authorization"] == "Bearer s3cret"


def test_an_allowed_redirect_is_followed_without_the_scenarios_headers(
    raw_service: Callable[[Handle], RawService], monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = raw_service(lambda h, body: h.answer(200, {"reply": f"there: {body['message']}"}))

    def home_handle(h: _RawHandler, body: Any) -> None:
        if h.path == "/chat":  # same origin: followed with everything, the method kept
            h.answer(307, {}, {"Location": "/v2/chat"})
        else:
            h.answer(308, {}, {"Location": elsewhere.url + "/chat"})

    home = raw_service(home_handle)
    monkeypatch.setenv("SECRET", "s3cret")
    spec = scenario_from_data(
        {
            "name": "t",
            "env": ["SECRET"],
            "target": {
                "shape": "message",
                "headers": {"Authorization": "Bearer ${SECRET}", "X-Tenant": "t1"},
                "allow_redirects_to": [elsewhere.url],
            },
            "turns": [{"user": "a", "expect": [{"equals": "there: a"}]}],
        },
        source="t.yaml",
    )
    result = run_scenario(spec, target_url=home.url)
    assert result.verdict == PASS, result.reasons
    assert [(m, p, h.get("authorization")) for m, p, _, h in home.requests] == [
        ("POST", "/chat", "Bearer s3cret"),
        ("POST", "/v2/chat", "Bearer s3cret"),
    ]
    ((method, path, body, headers),) = elsewhere.requests
    assert (method, path, body["message"]) == ("POST", "/chat", "a")
    assert "authorization" not in headers and "x-tenant" not in headers
    assert headers["traceparent"] == home.requests[0][3]["traceparent"]


def nested(depth: int) -> bytes:
    return b'{"reply": "deep", "n": ' + b"[" * depth + b"]" * depth + b"}"


def test_a_reply_nested_too_deep_is_errored_not_a_crash(
    raw_service: Callable[[Handle], RawService],
) -> None:
    s = raw_service(lambda h, body: h.answer(200, nested(100_000)))
    result = run_scenario(custom([{"user": "a"}]), target_url=s.url)
    assert result.verdict == ERRORED
    assert result.reasons[0].endswith("sent JSON nested more than 64 levels deep")


def test_a_reply_too_deep_for_the_report_writers_is_errored_in_the_report(
    raw_service: Callable[[Handle], RawService],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    s = raw_service(lambda h, body: h.answer(200, b'{"reply": ' + nested(300)[23:-1] + b"}"))
    path = tmp_path / "deep.json"
    path.write_text(
        json.dumps({"name": "deep", "target": {"shape": "message"}, "turns": [{"user": "a"}]})
    )
    monkeypatch.delenv("TRACELY_STORE", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "report.json"
    status = main(
        ["--no-color", "scenarios", "run", str(path), "--target", s.url, "--json", str(report)]
    )
    assert status == 1, capsys.readouterr()
    (case,) = json.loads(report.read_text())["cases"]
    assert case["verdict"] == ERRORED
    assert case["reasons"] == [f"turn 1: {s.url}/chat sent JSON nested more than 64 levels deep"]


def test_a_proxy_the_environment_names_carries_the_turn(
    raw_service: Callable[[Handle], RawService], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As urllib did: an http target through the proxy, an https one tunnelled through it."""

    def proxy_handle(h: _RawHandler, body: Any) -> None:
        if h.command == "CONNECT":
            h.answer(403, {"error": "no tunnels here"})
        else:
            h.answer(200, {"reply": f"proxied {body['message']}"})

    proxy = raw_service(proxy_handle)
    port = proxy.server_address[1]
    for name in ("no_proxy", "NO_PROXY", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", f"http://u:p%40ss@127.0.0.1:{port}")
    monkeypatch.setenv("https_proxy", f"http://u:p%40ss@127.0.0.1:{port}")
    monkeypatch.setenv("SECRET", "s3cret")
    spec = scenario_from_data(
        {
            "name": "t",
            "env": ["SECRET"],
            "target": {"shape": "message", "headers": {"Authorization": "Bearer ${SECRET}"}},
            "turns": [{"user": "a", "expect": [{"equals": "proxied a"}]}],
        },
        source="t.yaml",
    )
    result = run_scenario(spec, target_url="http://service.invalid:8080")
    assert result.verdict == PASS, result.reasons
    tunnelled = run_scenario(spec, target_url="https://service.invalid")
    assert tunnelled.verdict == ERRORED and "403" in tunnelled.reasons[0]
    (method, path, _, headers), (connect, address, _, tunnel_headers) = proxy.requests
    assert (method, path) == ("POST", "http://service.invalid:8080/chat")
    assert headers["proxy-authorization"] == "Basic dTpwQHNz"  # u:p@ss
    assert (connect, address) == ("CONNECT", "service.invalid:443")
    assert tunnel_headers["proxy-authorization"] == "Basic dTpwQHNz"
    assert "authorization" not in tunnel_headers  # the service's credentials stay in the tunnel
