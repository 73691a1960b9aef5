"""A real ``tracely serve`` process for the tests, an HTTP client that checks every answer
against the OpenAPI document, and spans made by the real SDK."""

from __future__ import annotations

import http.client
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GRPCSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, set_span_in_context

from tracely_sdk.server._openapi import openapi_document

ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"^tracely server listening on (http://[^\s]+)$")
LISTENING_GRPC = re.compile(r"^tracely server listening for OTLP/gRPC on ([^\s]+)$")


def token(scope: str) -> str:
    return f"{scope}-{secrets.token_urlsafe(24)}"


@dataclass
class Tokens:
    ingest: str = field(default_factory=lambda: token("ingest"))
    read: str = field(default_factory=lambda: token("read"))
    write: str = field(default_factory=lambda: token("write"))

    @property
    def env(self) -> str:
        return f"ingest:{self.ingest},read:{self.read},write:{self.write}"

    def all(self) -> list[str]:
        return [self.ingest, self.read, self.write]


# --------------------------------------------------------------------------------------------
# responses checked against the OpenAPI document


def _pointer(segment: str) -> str:
    """One JSON Pointer segment (RFC 6901)."""
    return segment.replace("~", "~0").replace("/", "~1")


class Contract:
    """Validates answers against the schemas of the OpenAPI document, and remembers which
    operations and statuses the tests exercised."""

    def __init__(self) -> None:
        from jsonschema import Draft202012Validator
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT202012

        self.doc = openapi_document()
        resource = Resource.from_contents(self.doc, default_specification=DRAFT202012)
        self._registry = Registry().with_resource("urn:tracely-openapi", resource)
        self._validator_class = Draft202012Validator
        self._validators: dict[str, Any] = {}
        self.seen: set[tuple[str, str, int]] = set()
        self._lock = threading.Lock()
        self._routes: list[tuple[str, re.Pattern[str]]] = [
            (str(template), re.compile("^" + re.sub(r"\{[^/]+\}", "[^/]+", template) + "$"))
            for template in self.doc["paths"]
        ]

    def template(self, path: str) -> str | None:
        path = path.split("?", 1)[0]
        for template, pattern in self._routes:
            if pattern.match(path):
                return template
        return None

    def _validator(self, pointer: str) -> Any:
        validator = self._validators.get(pointer)
        if validator is None:
            validator = self._validator_class(
                {"$ref": f"urn:tracely-openapi#{pointer}"}, registry=self._registry
            )
            self._validators[pointer] = validator
        return validator

    def check(self, method: str, path: str, status: int, content_type: str, body: bytes) -> None:
        template = self.template(path)
        if template is None:
            assert status == 404, f"{method} {path} answered {status} but is not in the document"
            return
        item = self.doc["paths"][template]
        op = item.get(method.lower())
        if op is None:
            assert status == 405, f"{method} {template} answered {status}, not in the document"
            return
        with self._lock:
            self.seen.add((method, template, status))
        spec = op["responses"].get(str(status))
        assert spec is not None, f"{method} {template}: status {status} is not documented"
        if "$ref" in spec:
            spec = self.doc["components"]["responses"][spec["$ref"].rsplit("/", 1)[1]]
        content = spec.get("content")
        if not content:
            assert not body, f"{method} {template} {status}: documented without a body"
            return
        media = content_type.split(";", 1)[0].strip()
        assert media in content, f"{method} {template} {status}: {media} is not documented"
        schema = content[media]["schema"]
        if media != "application/json":
            return
        value = orjson.loads(body)
        if "$ref" in schema:
            validator = self._validator(schema["$ref"].split("#", 1)[1])
        else:
            # By its place in the document, so that the references inside it (a oneOf of
            # $refs, say) resolve against the document too.
            where = ("paths", template, method.lower(), "responses", str(status), "content", media)
            validator = self._validator("".join(f"/{_pointer(p)}" for p in where) + "/schema")
        errors = sorted(validator.iter_errors(value), key=str)
        assert not errors, f"{method} {template} {status}: {errors[0].message} in {body[:300]!r}"


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def error(self) -> dict[str, Any]:
        doc = self.json()
        assert set(doc) == {"error"}, doc
        return doc["error"]  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# the server process


class ServerProcess:
    """``python -m tracely_sdk.server`` on 127.0.0.1, port 0, with its own store and logs."""

    def __init__(
        self,
        directory: Path,
        *,
        tokens: Tokens | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        contract: Contract | None = None,
        store: str | None = None,
    ) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.tokens = tokens or Tokens()
        self.store_url = store or f"sqlite:///{directory / 'tracely.db'}"
        self.args = list(args)
        self.extra_env = dict(env or {})
        self.contract = contract
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.grpc_target = ""  # host:port of OTLP/gRPC, when --grpc-port is among the args
        self.starts = 0

    @property
    def stderr_path(self) -> Path:
        return self.directory / f"stderr-{self.starts}.log"

    def logs(self) -> str:
        return "".join(
            (self.directory / f"stderr-{n}.log").read_text(errors="replace")
            for n in range(1, self.starts + 1)
            if (self.directory / f"stderr-{n}.log").exists()
        )

    def start(self, timeout: float = 20.0) -> ServerProcess:
        self.starts += 1
        stdout_path = self.directory / f"stdout-{self.starts}.log"
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TRACELY_SERVER_TOKENS": self.tokens.env,
            "PYTHONUNBUFFERED": "1",
            **self.extra_env,
        }
        env.pop("TRACELY_STORE", None)
        with stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tracely_sdk.server",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--store",
                    self.store_url,
                    *self.args,
                ],
                stdout=out,
                stderr=err,
                env=env,
                cwd=self.directory,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = stdout_path.read_text().split("\n")[:-1]
            match = LISTENING.match(lines[0].strip()) if lines else None
            if match and "--grpc-port" not in self.args:
                self.url = match.group(1)
                return self
            grpc = LISTENING_GRPC.match(lines[1].strip()) if len(lines) > 1 else None
            if match and grpc:
                self.url, self.grpc_target = match.group(1), grpc.group(1)
                return self
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the server exited with {self.process.returncode}: {self.logs()}"
                )
            time.sleep(0.02)
        self.kill()
        raise AssertionError(f"the server did not start: {self.logs()}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait for the exit status."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"the server did not stop within {timeout}s: {self.logs()}"
            ) from None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # requests -------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: bytes | Any = None,
        *,
        token: str | None = "write",
        headers: Mapping[str, str] | None = None,
        content_type: str | None = None,
        timeout: float = 30.0,
    ) -> Answer:
        """One request on a fresh connection; ``token`` is a scope name, a literal token, or None."""
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        sent_headers: dict[str, str] = {}
        if token is not None:
            literal = (
                getattr(self.tokens, token, None) if token in ("ingest", "read", "write") else token
            )
            sent_headers["Authorization"] = f"Bearer {literal}"
        if body is not None and not isinstance(body, (bytes, bytearray)):
            body = orjson.dumps(body)
            content_type = content_type or "application/json"
        if content_type:
            sent_headers["Content-Type"] = content_type
        sent_headers.update(headers or {})
        try:
            conn.request(method, path, body=body, headers=sent_headers)
            response = conn.getresponse()
            data = response.read()
            answer = Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
        finally:
            conn.close()
        if self.contract is not None:
            self.contract.check(
                method, path, answer.status, answer.headers.get("content-type", ""), answer.body
            )
        return answer

    def get(self, path: str, **kwargs: Any) -> Answer:
        return self.request("GET", path, **kwargs)

    def healthy(self) -> bool:
        return self.get("/healthz", token=None).status == 200

    def recording(self, trace_id: str) -> dict[str, Any] | None:
        answer = self.get(f"/api/traces/{trace_id}", token="read")
        if answer.status == 404:
            return None
        assert answer.status == 200, answer
        return answer.json()  # type: ignore[no-any-return]

    def trace_ids(self) -> set[str]:
        ids: set[str] = set()
        offset = 0
        while True:
            answer = self.get(f"/api/traces?limit=1000&offset={offset}", token="read")
            assert answer.status == 200, answer
            page = answer.json()["traces"]
            ids.update(t["trace_id"] for t in page)
            if len(page) < 1000:
                return ids
            offset += 1000


def case_document(case_id: str, **change: Any) -> dict[str, Any]:
    """A case as the API writes it (PUT /api/cases/{id}), every field present, with ``change``."""
    return {
        "id": case_id,
        "name": "n",
        "entrypoint": None,
        "input": {"args": [], "kwargs": {}},
        "expected_output": None,
        "bundle": {},
        "source_trace_id": None,
        "version": 1,
        "tags": [],
        "created_at": 1,
        "updated_at": 1,
        **change,
    }


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "it") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


# --------------------------------------------------------------------------------------------
# spans from the real SDK


def exporter(server: ServerProcess, *, token: str | None = None, **kwargs: Any) -> OTLPSpanExporter:
    return OTLPSpanExporter(
        endpoint=f"{server.url}/v1/traces",
        headers={"Authorization": f"Bearer {token or server.tokens.ingest}"},
        **kwargs,
    )


@dataclass
class SpanShape:
    """One span of a recorded trace: enough to make it again in another trace."""

    name: str
    parent: int | None
    attributes: dict[str, Any]
    kind: SpanKind


def shape_of(spans: Sequence[ReadableSpan]) -> list[SpanShape]:
    """The spans of one trace, parents first, as shapes (attributes kept as they are)."""
    ordered = sorted(spans, key=lambda s: s.start_time or 0)
    index = {s.context.span_id: n for n, s in enumerate(ordered)}
    return [
        SpanShape(
            s.name,
            index[s.parent.span_id] if s.parent is not None else None,
            dict(s.attributes or {}),
            s.kind,
        )
        for s in ordered
    ]


def emit(tracer: Any, shape: Sequence[SpanShape]) -> str:
    """Make one trace of ``shape`` with ``tracer``; returns its trace id."""
    made: list[Any] = []
    for span in shape:
        context = set_span_in_context(made[span.parent]) if span.parent is not None else None
        made.append(
            tracer.start_span(
                span.name, context=context, attributes=span.attributes, kind=span.kind
            )
        )
    for span in reversed(made):  # children end before their parents, as in a real run
        span.end()
    return format(made[0].get_span_context().trace_id, "032x")


class AckingExporter(OTLPSpanExporter):
    """The real exporter, remembering which spans the server acknowledged and every status."""

    def __init__(self, ledger: Ledger, **kwargs: Any) -> None:
        session = requests.Session()
        session.hooks["response"].append(ledger.saw)
        super().__init__(session=session, **kwargs)
        self.ledger = ledger

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        self.ledger.exported(spans, result is SpanExportResult.SUCCESS)
        return result


class AckingGRPCExporter(GRPCSpanExporter):
    """The real OTLP/gRPC exporter, remembering which spans the server acknowledged."""

    def __init__(self, ledger: Ledger, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ledger = ledger

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        self.ledger.exported(spans, result is SpanExportResult.SUCCESS)
        return result


def grpc_exporter(
    server: ServerProcess, *, token: str | None = None, **kwargs: Any
) -> GRPCSpanExporter:
    """The real OTLP/gRPC exporter, sending to ``server``'s gRPC port."""
    return GRPCSpanExporter(
        endpoint=server.grpc_target,
        insecure=True,
        headers={"authorization": f"Bearer {token or server.tokens.ingest}"},
        **kwargs,
    )


class Ledger:
    """What a load of exporters sent and what the server acknowledged."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked_traces: set[str] = set()
        self.acked_spans = 0
        self.failed_spans = 0
        self.statuses: dict[int, int] = {}
        self.first_ack = 0.0
        self.last_ack = 0.0

    def saw(self, response: Any, *args: Any, **kwargs: Any) -> None:
        with self.lock:
            self.statuses[response.status_code] = self.statuses.get(response.status_code, 0) + 1

    def exported(self, spans: Sequence[ReadableSpan], ok: bool) -> None:
        now = time.monotonic()
        with self.lock:
            if ok:
                self.acked_spans += len(spans)
                self.acked_traces.update(format(s.context.trace_id, "032x") for s in spans)
                self.first_ack = self.first_ack or now
                self.last_ack = now
            else:
                self.failed_spans += len(spans)


@contextmanager
def exporter_pipeline(
    server: ServerProcess,
    ledger: Ledger,
    *,
    timeout: float = 10.0,
    batch: int = 512,
    protocol: str = "http",
) -> Iterator[Any]:
    """A fresh TracerProvider whose BatchSpanProcessor sends to ``server`` through an
    :class:`AckingExporter` (or, with ``protocol="grpc"``, an :class:`AckingGRPCExporter`);
    yields a tracer, flushes and shuts down on exit."""
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent"}))
    acking: SpanExporter
    if protocol == "grpc":
        acking = AckingGRPCExporter(
            ledger,
            endpoint=server.grpc_target,
            insecure=True,
            headers={"authorization": f"Bearer {server.tokens.ingest}"},
            timeout=timeout,
        )
    else:
        acking = AckingExporter(
            ledger,
            endpoint=f"{server.url}/v1/traces",
            headers={"Authorization": f"Bearer {server.tokens.ingest}"},
            timeout=timeout,
        )
    processor = BatchSpanProcessor(
        acking,
        max_queue_size=100_000,
        max_export_batch_size=batch,
        schedule_delay_millis=50,
    )
    provider.add_span_processor(processor)
    try:
        yield provider.get_tracer("load")
    finally:
        provider.shutdown()


def recorded_trace_ids(server: ServerProcess) -> set[str]:
    """The trace ids in the server's SQLite store, read directly (cheap enough to poll)."""
    import sqlite3

    path = server.store_url.removeprefix("sqlite:///")
    conn = sqlite3.connect(f"file:/{path.lstrip('/')}?mode=ro", uri=True, timeout=5)
    try:
        return {row[0] for row in conn.execute("SELECT trace_id FROM recordings")}
    except sqlite3.OperationalError:
        return set()
    finally:
        conn.close()
