"""The network guard: under strict replay no connection leaves the process except tracely's own
and the hosts the project allows, whatever client the agent uses; every server here runs on
127.0.0.1, which the guard refuses by default.

The service the clients call here is not a model API: a model call through httpx is answered
from the recording at the HTTP client before any socket (tests/sdk/providers/test_wire_*.py),
so the guard is what stops a call to any other service."""

from __future__ import annotations

import _socket
import asyncio
import importlib
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests

import tracely_sdk as tracely
from tracely_sdk import _network_guard
from tracely_sdk._network_guard import Endpoint, parse_endpoint
from tracely_sdk._runner import INCOMPLETE, PASS, ReplayCase, run_case
from tracely_sdk.cli import main
from tracely_sdk.errors import ConfigError
from tracely_sdk.store import Recording, SQLiteStore, open_store

ROOT = Path(__file__).resolve().parents[2]
pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _no_allowance_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    # Stores other tests of this process opened are tracely's own endpoints for the rest of it
    # (by design); each test here starts from a process that opened none.
    monkeypatch.setattr(_network_guard, "_own", ())
    for var in ("TRACELY_ALLOW_NETWORK", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(var, raising=False)
    for signal in ("", "TRACES_", "METRICS_", "LOGS_"):
        monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{signal}ENDPOINT", raising=False)


class _Service(BaseHTTPRequestHandler):
    """A service an agent calls outside tracely's seams (an order API, a search index)."""

    disable_nagle_algorithm = True

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.server.requests.append(self.path)  # type: ignore[attr-defined]
        body = b'{"ok": true}' if self.path == LOOKUP else b'{"error": "no such path"}'
        self.send_response(200 if self.path == LOOKUP else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        return None


class Service(ThreadingHTTPServer):
    requests: list[str]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


LOOKUP = "/lookup"


@pytest.fixture
def server() -> Iterator[Service]:
    running = Service(("127.0.0.1", 0), _Service)
    running.requests = []
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.shutdown()
        running.server_close()
        thread.join()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP port on 127.0.0.1 that is listening; ``untouched`` tells whether anyone connected."""
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def port_of(sock: socket.socket | Service) -> int:
    address = sock.getsockname() if isinstance(sock, socket.socket) else sock.server_address
    return int(address[1])


def untouched(sock: socket.socket) -> bool:
    try:
        sock.accept()[0].close()
    except BlockingIOError:
        return True
    return False


def refused(fn: Callable[[], Any]) -> tracely.ReplayError:
    """The ReplayError ``fn`` raised (anyio raises it inside an ExceptionGroup)."""
    try:
        fn()
    except Exception as exc:
        leaves = _leaves(exc)
        assert all(isinstance(e, tracely.ReplayError) for e in leaves), repr(exc)
        error = leaves[0]
        assert isinstance(error, tracely.ReplayError)
        return error
    raise AssertionError("the operation was not refused")


def _leaves(exc: BaseException) -> list[BaseException]:
    inner = getattr(exc, "exceptions", None)
    if not isinstance(inner, tuple):
        return [exc]
    return [leaf for e in inner for leaf in _leaves(e)]


# -- what is refused --------------------------------------------------------------------------


def test_a_raw_socket_connection_is_refused_at_the_call_site_and_reported(
    listener: socket.socket,
) -> None:
    port = port_of(listener)
    with tracely.fixtures({}) as rep:
        error = refused(lambda: socket.socket().connect(("127.0.0.1", port)))
        with socket.socket() as sock:
            again = refused(lambda: sock.connect_ex(("127.0.0.1", port)))
    message = str(error)
    assert message.startswith(f"strict replay refused a connection to 127.0.0.1:{port} ")
    assert "socket.connect from socket, at test_network_guard.py:" in message
    assert "tracely.call_tool" in message and f"--allow-network 127.0.0.1:{port}" in message
    assert error.label == f"network:127.0.0.1:{port}"
    assert rep.errors == [error, again]
    assert [(r["event"], r["host"], r["port"], r["thread"]) for r in rep.refused] == [
        ("socket.connect", "127.0.0.1", port, "MainThread")
    ] * 2
    assert not rep.clean
    assert rep.to_dict()["refused"] == [dict(r) for r in rep.refused]
    assert untouched(listener)


def test_create_connection_and_the_c_socket_module_are_refused(listener: socket.socket) -> None:
    port = port_of(listener)
    with tracely.fixtures({}) as rep:
        refused(lambda: socket.create_connection(("127.0.0.1", port), timeout=2))
        refused(lambda: _socket.socket().connect(("127.0.0.1", port)))
        refused(lambda: socket.socket(socket.AF_INET6).connect_ex(("::ffff:127.0.0.1", port)))
    assert [r["host"] for r in rep.refused] == ["127.0.0.1"] * 3
    assert untouched(listener)


def test_name_lookups_are_refused_and_an_address_literal_is_no_lookup() -> None:
    with tracely.fixtures({}) as rep:
        refused(lambda: socket.getaddrinfo("localhost", 80))
        refused(lambda: socket.getaddrinfo("example.com", "https"))
        refused(lambda: socket.gethostbyname("localhost"))
        refused(lambda: socket.gethostbyname_ex("localhost"))
        refused(lambda: socket.gethostbyaddr("127.0.0.1"))
        refused(lambda: socket.getnameinfo(("127.0.0.1", 80), 0))
        assert socket.getaddrinfo("127.0.0.1", 80)[0][4] == ("127.0.0.1", 80)
    assert [(r["event"], r["host"], r["port"]) for r in rep.refused] == [
        ("socket.getaddrinfo", "localhost", 80),
        ("socket.getaddrinfo", "example.com", 443),
        ("socket.gethostbyname", "localhost", None),
        ("socket.gethostbyname", "localhost", None),  # gethostbyname_ex's event too
        ("socket.gethostbyaddr", "127.0.0.1", None),
        ("socket.getnameinfo", "127.0.0.1", None),
    ]
    assert str(rep.errors[0]).startswith("strict replay refused a name lookup of localhost:80 ")


def test_a_datagram_is_refused_before_it_is_sent() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        receiver.setblocking(False)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            with tracely.fixtures({}) as rep:
                error = refused(lambda: sender.sendto(b"ping", receiver.getsockname()))
            with pytest.raises(BlockingIOError):
                receiver.recv(16)
    assert "refused a datagram to 127.0.0.1:" in str(error)
    assert rep.refused[0]["event"] == "socket.sendto"


def test_asyncio_connections_and_lookups_are_refused(listener: socket.socket) -> None:
    port = port_of(listener)

    async def connect(host: str) -> Any:
        return await asyncio.open_connection(host, port)

    with tracely.fixtures({}):
        by_address = refused(lambda: asyncio.run(connect("127.0.0.1")))
        by_name = refused(lambda: asyncio.run(connect("localhost")))
    assert "(socket.connect from asyncio, at test_network_guard.py:" in str(by_address)
    # asyncio looks names up in its executor's thread, which has no replay context of its own
    assert "name lookup of localhost:" in str(by_name) and "in thread 'asyncio_" in str(by_name)
    assert untouched(listener)


def _httpx(url: str) -> Any:
    return httpx.post(url + LOOKUP, json={"q": "order 7"})


def _httpx_async(url: str) -> Any:
    async def post() -> Any:
        async with httpx.AsyncClient() as client:
            return await client.post(url + LOOKUP, json={"q": "order 7"})

    return asyncio.run(post())


def _requests(url: str) -> Any:
    return requests.post(url + LOOKUP, json={"q": "order 7"}, timeout=5)


def _urllib(url: str) -> Any:
    request = urllib.request.Request(url + LOOKUP, data=b"{}", method="POST")
    return urllib.request.urlopen(request, timeout=5)


def _aiohttp(url: str) -> Any:
    aiohttp = pytest.importorskip("aiohttp")

    async def post() -> Any:
        async with (
            aiohttp.ClientSession() as session,
            session.post(url + LOOKUP, json={}) as response,
        ):
            return await response.text()

    return asyncio.run(post())


@pytest.mark.parametrize(
    ("client", "library"),
    [
        (_httpx, "httpx (via httpcore)"),
        (_httpx_async, "anyio"),  # httpx's async connection runs in a task of anyio's
        (_requests, "requests (via "),
        (_urllib, "urllib (via http)"),
        (_aiohttp, "aiohttp"),
    ],
)
def test_http_clients_are_refused_before_a_request_leaves(
    server: Service, client: Callable[[str], Any], library: str
) -> None:
    with tracely.fixtures({}) as rep:
        error = refused(lambda: client(server.base_url))
    assert server.requests == []
    assert f"127.0.0.1:{port_of(server)}" in str(error)
    assert rep.refused[0]["library"].startswith(library)
    assert rep.refused[0]["event"] == "socket.connect"


def test_a_boto3_client_is_refused_and_the_report_holds_what_botocore_wrapped(
    server: Service,
) -> None:
    boto3 = pytest.importorskip("boto3")
    from botocore.exceptions import HTTPClientError

    bedrock = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="test-key",
        aws_secret_access_key="test-secret",
        endpoint_url=server.base_url,
    )
    # Converse is a model call, served or missed at urllib3 (test_wire_urllib3); a guardrail
    # check is no model call: only the guard stands between it and the network.
    with tracely.fixtures({}) as rep, pytest.raises(HTTPClientError, match="strict replay refused"):
        bedrock.apply_guardrail(
            guardrailIdentifier="g1",
            guardrailVersion="1",
            source="INPUT",
            content=[{"text": {"text": "hi"}}],
        )
    assert server.requests == []
    assert rep.refused and rep.refused[0]["library"].startswith("botocore (via ")


def test_a_thread_pool_worker_cannot_go_live(server: Service) -> None:
    def swallowed() -> str:
        try:
            _httpx(server.base_url)
        except Exception as exc:
            return type(exc).__name__
        return "went live"

    with (
        tracely.fixtures({}) as rep,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-pool") as pool,
    ):
        outcome = pool.submit(swallowed).result()
    assert outcome == "ReplayError"
    assert server.requests == []
    assert rep.refused[0]["thread"].startswith("agent-pool")
    assert "in thread 'agent-pool" in str(rep.errors[0])


def test_code_with_no_block_of_its_own_is_guarded_by_a_strict_block_elsewhere(
    server: Service,
) -> None:
    entered, done = threading.Event(), threading.Event()
    reports: list[Any] = []

    def replaying() -> None:
        with tracely.fixtures({}) as rep:
            reports.append(rep)
            entered.set()
            done.wait(30)

    thread = threading.Thread(target=replaying)
    thread.start()
    try:
        assert entered.wait(30)
        error = refused(lambda: _httpx(server.base_url))  # this thread has no block
        with tracely.fixtures({}, strict=False):
            assert _httpx(server.base_url).status_code == 200  # a lenient block goes live
    finally:
        done.set()
        thread.join(30)
    (rep,) = reports
    assert rep.errors == [error]
    assert len(server.requests) == 1


def test_lenient_and_live_blocks_and_code_outside_replay_are_not_guarded(
    server: Service,
) -> None:
    with tracely.fixtures({}):
        pass  # the guard is installed from here on, for the process
    assert _httpx(server.base_url).status_code == 200
    with tracely.fixtures({}, strict=False) as lenient:
        assert _httpx(server.base_url).status_code == 200
    with tracely.fixtures(None):
        assert _httpx(server.base_url).status_code == 200
    assert len(server.requests) == 3
    assert lenient.refused == [] and lenient.errors == []


# -- what is allowed --------------------------------------------------------------------------


def test_allow_network_lets_exactly_that_host_and_port_through(
    server: Service, listener: socket.socket
) -> None:
    with tracely.fixtures({}, allow_network=[f"127.0.0.1:{port_of(server)}"]) as rep:
        assert _httpx(server.base_url).status_code == 200
        refused(lambda: socket.create_connection(("127.0.0.1", port_of(listener))))
    assert len(server.requests) == 1
    assert [r["port"] for r in rep.refused] == [port_of(listener)]
    assert untouched(listener)


def test_a_name_allowed_also_allows_the_addresses_it_resolves_to(server: Service) -> None:
    with tracely.fixtures({}, allow_network=[f"localhost:{port_of(server)}"]) as rep:
        assert _httpx(f"http://localhost:{port_of(server)}").status_code == 200
        assert _httpx(server.base_url).status_code == 200  # 127.0.0.1, which localhost is
        refused(lambda: socket.getaddrinfo("localhost", port_of(server) + 1))
    assert len(server.requests) == 2
    assert len(rep.refused) == 1


def test_allow_network_from_the_environment_and_pyproject(
    server: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed = f"127.0.0.1:{port_of(server)}"
    (tmp_path / "pyproject.toml").write_text(f'[tool.tracely]\nallow_network = ["{allowed}"]\n')
    monkeypatch.chdir(tmp_path)
    with tracely.fixtures({}) as from_pyproject:
        assert _httpx(server.base_url).status_code == 200
    monkeypatch.setenv("TRACELY_ALLOW_NETWORK", "db.internal:5432")  # the environment wins
    with tracely.fixtures({}) as from_env:
        refused(lambda: _httpx(server.base_url))
    with tracely.fixtures({}, allow_network=[allowed]) as from_argument:  # the argument wins
        assert _httpx(server.base_url).status_code == 200
    monkeypatch.setenv("TRACELY_ALLOW_NETWORK", f"db.internal:5432, {allowed}")
    with tracely.fixtures({}) as from_list:
        assert _httpx(server.base_url).status_code == 200
    assert len(server.requests) == 3
    assert from_pyproject.clean and from_argument.clean and from_list.clean
    assert len(from_env.refused) == 1


@pytest.mark.parametrize(
    ("text", "endpoint"),
    [
        ("db.internal:5432", Endpoint("db.internal", 5432)),
        ("DB.Internal.", Endpoint("db.internal", None)),
        ("127.0.0.1:8000", Endpoint("127.0.0.1", 8000)),
        ("[::1]:8000", Endpoint("::1", 8000)),
        ("::1", Endpoint("::1", None)),
        ("[::ffff:10.0.0.1]", Endpoint("10.0.0.1", None)),
    ],
)
def test_hosts_to_allow_are_read_in_one_form(text: str, endpoint: Endpoint) -> None:
    assert parse_endpoint(text, "test") == endpoint


@pytest.mark.parametrize(
    "value", ["db:99999", "db:", "http://db:5432", "db:port", "[::1", "bad host", "*"]
)
def test_a_bad_host_to_allow_names_the_variable_it_came_from(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACELY_ALLOW_NETWORK", value)
    with (
        pytest.raises(ConfigError, match=r"^TRACELY_ALLOW_NETWORK: .* use HOST or HOST:PORT"),
        tracely.fixtures({}),
    ):
        pass


# -- tracely's own endpoints ------------------------------------------------------------------


def _export_one_span(endpoint: str | None = None) -> None:
    """Export a span through the OTLP/HTTP exporter from its own thread, as an app does."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    try:
        with provider.get_tracer("test").start_as_current_span("during replay"):
            pass
        provider.force_flush()
    finally:
        provider.shutdown()


def test_tracelys_own_otlp_exporter_still_exports_during_strict_replay(
    otlp_collector: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = otlp_collector.endpoint
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url + "/v1/traces")
    with tracely.fixtures({}) as rep:
        _export_one_span()
    assert [path for path, _ in otlp_collector.received] == ["/v1/traces"]
    assert [span.name for span in otlp_collector.spans] == ["during replay"]
    assert rep.refused == [] and rep.clean


def test_an_exporter_tracely_was_not_told_about_is_refused(
    otlp_collector: Any,
) -> None:
    url = otlp_collector.endpoint
    with tracely.fixtures({}) as rep:
        _export_one_span(url + "/v1/traces")  # set up by hand, not by the OTEL_* variables
    assert otlp_collector.received == []
    assert rep.refused[0]["port"] == otlp_collector.server_address[1]


def test_a_store_tracely_opened_is_reachable(listener: socket.socket) -> None:
    port = port_of(listener)
    store = open_store(f"http://127.0.0.1:{port}")
    try:
        with tracely.fixtures({}) as rep:
            socket.create_connection(("127.0.0.1", port)).close()
    finally:
        store.close()
    assert rep.refused == []
    assert not untouched(listener)


# -- verdicts ---------------------------------------------------------------------------------

AGENT = """\
import os

import httpx

import tracely_sdk as tracely


def run(question):
    with tracely.agent("net-agent", input=question) as agent_run:
        facts = tracely.call_tool("lookup", lambda: {"answer": 42}, args={"q": question})
        try:  # a call to a service outside tracely's seams, which nothing records
            httpx.post(os.environ["NET_AGENT_LLM"] + "/lookup", json={"q": question}, timeout=5)
        except Exception:
            pass  # an agent that shrugs off a failed call
        agent_run.output = f"{question}: {facts['answer']}"
        return agent_run.output
"""


@pytest.fixture
def net_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: Service, capture: Any
) -> tuple[Any, dict[str, Any]]:
    """The agent above (a module in ``tmp_path``) and the recording of one live run of it."""
    (tmp_path / "net_agent.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("NET_AGENT_LLM", server.base_url)
    monkeypatch.delitem(sys.modules, "net_agent", raising=False)
    net_agent = importlib.import_module("net_agent")
    monkeypatch.delitem(sys.modules, "net_agent")

    assert net_agent.run("meaning") == "meaning: 42"
    assert len(server.requests) == 1  # live, the unrecorded call reached the service
    server.requests.clear()
    return net_agent, capture.last_bundle


def test_a_case_whose_agent_swallows_the_refusal_is_incomplete_naming_it(
    server: Service, net_agent: tuple[Any, dict[str, Any]]
) -> None:
    module, bundle = net_agent
    case = ReplayCase(
        id="meaning",
        name="meaning",
        version=1,
        entrypoint=None,
        input={"args": ["meaning"], "kwargs": {}},
        expected_output="meaning: 42",
        bundle=bundle,
    )
    result = run_case(case, module.run)
    assert result.verdict == INCOMPLETE
    assert result.output == "meaning: 42"  # the agent carried on as if nothing happened
    (reason,) = result.reasons
    assert reason.startswith(f"strict replay refused a connection to 127.0.0.1:{port_of(server)}")
    assert "from httpx (via httpcore), at net_agent.py:" in reason
    assert server.requests == []


def _replay_cli(
    tmp_path: Path, bundle: dict[str, Any], llm_url: str, *options: str, cases: int = 1
) -> dict[str, Any]:
    """``tracely replay`` of ``cases`` cases of the recording, in a process of its own; the
    first case's JSON report entry, after checking every case has the same verdict."""
    store_path = tmp_path / "store.db"
    store = SQLiteStore(store_path)
    try:
        if not store.list_cases():
            store.put_recording(Recording.from_bundle(bundle))
            for i in range(cases):
                store.promote(str(bundle["trace_id"]), case_id=f"meaning-{i}", name="meaning")
    finally:
        store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    env.update(PYTHONPATH=str(ROOT), NET_AGENT_LLM=llm_url)
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "tracely_sdk.cli", "replay", "--entrypoint", "net_agent:run"),
            *("--store", f"sqlite:///{store_path.as_posix().lstrip('/')}", "--json", str(report)),
            *options,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr
    first, *others = json.loads(report.read_text())["cases"]
    assert [c["verdict"] for c in others] == [first["verdict"]] * (cases - 1)
    return dict(first)


def test_tracely_replay_never_passes_a_case_whose_agent_reached_for_the_network(
    tmp_path: Path, server: Service, net_agent: tuple[Any, dict[str, Any]]
) -> None:
    _, bundle = net_agent
    port = port_of(server)
    up = _replay_cli(tmp_path, bundle, server.base_url)
    assert up["verdict"] == INCOMPLETE
    assert up["reasons"][0].startswith(f"strict replay refused a connection to 127.0.0.1:{port}")
    assert server.requests == []  # with the model server up, nothing reached it
    with socket.socket() as closed:  # bound, not listening: nothing would answer
        closed.bind(("127.0.0.1", 0))
        nothing = port_of(closed)
        down = _replay_cli(tmp_path, bundle, f"http://127.0.0.1:{nothing}")
    assert down["verdict"] == INCOMPLETE
    assert f"127.0.0.1:{nothing}" in down["reasons"][0]


def test_tracely_replay_allow_network_lets_the_named_host_through(
    tmp_path: Path, server: Service, net_agent: tuple[Any, dict[str, Any]]
) -> None:
    _, bundle = net_agent
    allowed = f"127.0.0.1:{port_of(server)}"
    # in two worker processes, which the allowance reaches too
    passed = _replay_cli(
        tmp_path, bundle, server.base_url, "--allow-network", allowed, "-j", "2", cases=2
    )
    assert passed["verdict"] == PASS, passed
    assert len(server.requests) == 2


def test_a_bad_allow_network_option_is_a_usage_error_before_anything_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status = main(["replay", "--allow-network", "db:99999", "--cases", str(tmp_path / "none")])
    assert status == 2
    assert capsys.readouterr().err == (
        "tracely: error: --allow-network: 'db:99999' is not a host to allow; use HOST or "
        "HOST:PORT, e.g. db.internal:5432, 127.0.0.1:8000 or [::1]:8000\n"
    )
    assert "TRACELY_ALLOW_NETWORK" not in os.environ


def test_the_pytest_plugin_allows_a_host_for_the_run_only(
    pytester: pytest.Pytester, server: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(
        f"""
        import httpx
        import tracely_sdk as tracely

        def test_reaches_the_service():
            with tracely.fixtures({{}}) as rep:
                assert httpx.get("{server.base_url}/v1/models").status_code == 404
            assert rep.clean
        """
    )
    plugin = ("-p", "tracely_sdk.pytest_plugin")
    pytester.runpytest(*plugin).assert_outcomes(failed=1)
    allowed = f"127.0.0.1:{port_of(server)}"
    pytester.runpytest(*plugin, "--tracely-allow-network", allowed).assert_outcomes(passed=1)
    assert "TRACELY_ALLOW_NETWORK" not in os.environ
    result = pytester.runpytest(*plugin, "--tracely-allow-network", "bad host")
    assert "tracely: --tracely-allow-network: 'bad host' is not a host" in result.stderr.str()


# -- beyond the socket module ------------------------------------------------------------------


def test_libpq_looks_names_up_through_python_so_that_lookup_is_refused() -> None:
    psycopg = pytest.importorskip("psycopg")
    with tracely.fixtures({}) as rep:
        refused(lambda: psycopg.connect("host=localhost port=5999 dbname=x connect_timeout=2"))
    assert rep.refused[0]["event"] == "socket.getaddrinfo"
    assert rep.refused[0]["library"].startswith("psycopg")


def test_the_audit_hook_is_installed_by_the_first_strict_block_only() -> None:
    code = (
        "import sys, tracely_sdk as tracely\n"
        "from tracely_sdk import _network_guard as g\n"
        "tracely.call_tool('t', lambda: 1)\n"
        "with tracely.fixtures({}, strict=False):\n"
        "    pass\n"
        "print(g._installed)\n"
        "with tracely.fixtures({}):\n"
        "    pass\n"
        "print(g._installed)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.split() == ["False", "True"], proc.stderr


def test_a_store_url_tracely_refuses_allows_nothing(listener: socket.socket) -> None:
    # A URL of a backend tracely does not have, and without a port: allowing its host on every
    # port would have let every loopback connection through for the rest of the process.
    with pytest.raises(ConfigError, match="unknown scheme 'redis'"):
        open_store("redis://localhost/0")
    port = port_of(listener)
    with tracely.fixtures({}) as rep:
        refused(lambda: socket.create_connection(("127.0.0.1", port), timeout=2))
        refused(lambda: socket.create_connection(("localhost", port), timeout=2))
    assert len(rep.refused) == 2
    assert untouched(listener)
