"""How fast a running ``tracely serve`` turns OTLP into recordings, against the cost of decoding.

1. The floors, one thread each:
   - parse: decoding the same OTLP/protobuf payloads with ``opentelemetry-proto`` alone
     (``ExportTraceServiceRequest.ParseFromString``, C code). Nothing that reads OTLP can be
     faster than this; the issue's target is stated against it.
   - to Python: the parse, plus reading every span's ids, times and name and each attribute's
     key and value into Python objects once (a dict per span). Any consumer written in Python
     does at least this much, so it is the floor of a Python server.
2. Ingest: a ``python -m tracely_sdk.server`` process on 127.0.0.1, fed pre-encoded payloads
   (512 spans each, as the SDK's BatchSpanProcessor sends them) over keep-alive connections
   from several threads, with a SQLite store and, when a server is at hand, a PostgreSQL one.
   Measured from the first request until every trace is a recording in the store (counted in
   the store itself), and until the last request was acknowledged.
   Over OTLP/HTTP and OTLP/gRPC in turn, to the same server.
3. Memory: the server's peak RSS (``VmHWM`` in ``/proc/PID/status``) under sustained load,
   read after a short and after a three times longer run. Bounded memory means the second
   figure is not three times the first.

4. Instances: with PostgreSQL, one server and then two on one store, each trace's spans cut
   in two requests sent round-robin (with two servers, every trace reaches both), counted
   until every trace is a complete recording. The target: two record at least as fast as one
   (1.0x) on a 2-core machine, where both servers and PostgreSQL share the two cores
   (``bench/scale_out.py`` measures the same with the model of N servers on N cores).

The spans are the reference agent's (``examples/weather_agent.run``) made by the real SDK and
encoded by the real OTLP exporter's encoder; every payload sent carries fresh trace ids, so the
server sees new traces all along. The figure is ingest / parse floor (the target: at least
30%); ingest / to-Python floor is printed beside it. The floors are measured before and after
the servers run, and the ratios use the faster measurement of each, so that other work on the
machine slowing the floors does not flatter them.

With ``--instructions`` it instead counts, under valgrind's callgrind, the instructions per span
of the server's own stages (decode, extract, SQLite write, in one thread, no HTTP) and of the
to-Python floor on the same payloads, and prints the floor's share of the stages beside the goal
(at least 30%): a count the machine's load does not change, where the rates above, on a shared
machine, move with it.

    python bench/ingest.py [--spans N] [--threads T] [--short S] [--stores sqlite,postgresql]
                           [--transports http,grpc] [--instances-spans N] [--instructions]

PostgreSQL is used when ``TRACELY_TEST_POSTGRES_URL`` names a server, or when
``.ci/install-postgres.sh`` can start one (without installing anything).
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _callgrind import instructions

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from tracely_otel._otlp import records_from_otlp_proto  # noqa: E402

SPANS_PER_PAYLOAD = 512
TARGET = 0.30
TO_PYTHON_GOAL = 0.30  # recorded on SQLite, as a share of the to-Python floor
CITIES = ("Paris", "Lisbon", "Oslo", "Tokyo")
LISTENING = re.compile(r"^tracely server listening on (http://\S+)$")
LISTENING_GRPC = re.compile(r"^tracely server listening for OTLP/gRPC on (\S+)$")
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


# --------------------------------------------------------------------------------------------
# payloads


@dataclass
class Template:
    """One encoded payload, cut at its trace ids so that each send can carry fresh ones."""

    payload: bytes
    spans: int
    traces: int
    literals: list[bytes]
    slots: list[int]  # for each gap between literals, which trace id goes there

    def fresh(self, ids: Sequence[bytes] | None = None) -> bytes:
        ids = ids or [random.randbytes(16) for _ in range(self.traces)]
        parts: list[bytes] = [b""] * (len(self.literals) + len(self.slots))
        parts[0::2] = self.literals
        parts[1::2] = [ids[i] for i in self.slots]
        return b"".join(parts)


_EXPORTER = InMemorySpanExporter()


def agent_traces(count: int) -> list[list[ReadableSpan]]:
    """``count`` runs of the reference agent, each trace's finished spans."""
    from examples import weather_agent

    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent"}))
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    exporter = _EXPORTER
    exporter.clear()
    for n in range(count):
        weather_agent.run(CITIES[n % len(CITIES)])
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        by_trace.setdefault(span.context.trace_id, []).append(span)
    return list(by_trace.values())


def _template(group: list[list[ReadableSpan]], spans: list[ReadableSpan]) -> Template:
    payload = encode_spans(spans).SerializeToString()
    ids = [t[0].context.trace_id.to_bytes(16, "big") for t in group]
    index = {tid: n for n, tid in enumerate(ids)}
    pattern = re.compile(b"(" + b"|".join(re.escape(t) for t in ids) + b")")
    pieces = pattern.split(payload)
    template = Template(
        payload=payload,
        spans=len(spans),
        traces=len(group),
        literals=pieces[0::2],
        slots=[index[p] for p in pieces[1::2]],
    )
    assert template.fresh() != payload and len(template.fresh()) == len(payload)
    return template


def _groups(count: int) -> list[list[list[ReadableSpan]]]:
    sample = agent_traces(4)
    per_trace = len(sample[0])
    traces_per_payload = max(1, SPANS_PER_PAYLOAD // per_trace)
    runs = agent_traces(count * traces_per_payload)
    return [runs[i * traces_per_payload : (i + 1) * traces_per_payload] for i in range(count)]


def templates(count: int) -> list[Template]:
    """``count`` payloads of whole traces, about SPANS_PER_PAYLOAD spans each."""
    return [_template(group, [s for t in group for s in t]) for group in _groups(count)]


@dataclass
class SplitTemplate:
    """The traces of one payload cut in two: the first half of each trace's spans, and the
    second; :meth:`fresh` gives both with the same fresh trace ids."""

    halves: tuple[Template, Template]

    @property
    def spans(self) -> int:
        return self.halves[0].spans + self.halves[1].spans

    @property
    def traces(self) -> int:
        return self.halves[0].traces

    def fresh(self) -> tuple[bytes, bytes]:
        ids = [random.randbytes(16) for _ in range(self.traces)]
        return self.halves[0].fresh(ids), self.halves[1].fresh(ids)


def split_templates(count: int) -> list[SplitTemplate]:
    """``count`` payloads of traces split in two, each half in its own request."""
    out = []
    for group in _groups(count):
        first = [s for t in group for s in t[: len(t) // 2]]
        second = [s for t in group for s in t[len(t) // 2 :]]
        out.append(SplitTemplate((_template(group, first), _template(group, second))))
    return out


# --------------------------------------------------------------------------------------------
# the floor


def to_python(payload: bytes) -> list[tuple[Any, ...]]:
    """The least a Python consumer of OTLP does: parse, then read each span's ids, times, name
    and attributes (key and value, a dict per span) into Python objects once. No validation,
    no hex ids, no records; an attribute that is not a scalar is kept as its message."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(payload)
    out = []
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                attributes = {}
                for kv in span.attributes:
                    value = kv.value
                    # a non-empty string is the oneof's value; otherwise ask which field is set
                    attributes[kv.key] = value.string_value or getattr(
                        value, value.WhichOneof("value") or "string_value"
                    )
                out.append(
                    (
                        span.trace_id,
                        span.span_id,
                        span.parent_span_id,
                        span.name,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        attributes,
                    )
                )
    return out


@dataclass
class Floors:
    """spans/s, one thread: ParseFromString alone, the to-Python floor, tracely's decoder."""

    parse: float
    to_python: float
    tracely: float


def decode_floor(items: Sequence[Template], seconds: float = 3.0) -> Floors:
    """The decode rates, each measured on the same payloads for ``seconds``."""

    def rate(fn: Callable[[bytes], Any]) -> float:
        spans = 0
        started = time.perf_counter()
        while True:
            for t in items:
                fn(t.payload)
                spans += t.spans
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                return spans / elapsed

    def parse(payload: bytes) -> None:
        ExportTraceServiceRequest().ParseFromString(payload)

    # the same attribute values either way, or the floor would not be a floor of this work
    sample = items[0].payload
    assert len(to_python(sample)) == len(records_from_otlp_proto(sample))
    return Floors(rate(parse), rate(to_python), rate(records_from_otlp_proto))


def print_floors(floors: Floors) -> None:
    parse = floors.parse
    print(f"decode only, ExportTraceServiceRequest.ParseFromString: {parse:12,.0f} spans/s (floor)")
    print(
        f"decode to Python (ids, times, name, attributes):         {floors.to_python:12,.0f} "
        f"spans/s ({floors.to_python / parse:.1%} of the parse floor)"
    )
    print(
        f"tracely's decoder (protobuf to SpanRecords):            {floors.tracely:12,.0f} spans/s "
        f"({floors.tracely / parse:.1%})"
    )


def stages(items: Sequence[Template]) -> dict[str, float]:
    """spans/s of each stage the server runs a payload through, alone, in one thread."""
    from tracely_otel import bundle_from_spans
    from tracely_sdk.store import Recording, SQLiteStore

    spans = sum(t.spans for t in items)
    started = time.perf_counter()
    decoded = [records_from_otlp_proto(t.payload) for t in items]
    decode = spans / (time.perf_counter() - started)
    started = time.perf_counter()
    bundles: list[dict[str, Any] | None] = []
    for records in decoded:
        by_trace: dict[str, list[Any]] = {}
        for record in records:
            by_trace.setdefault(record.trace_id, []).append(record)
        bundles.extend(bundle_from_spans(group) for group in by_trace.values())
    extract = spans / (time.perf_counter() - started)
    recordings = [Recording.from_bundle(b) for b in bundles if b is not None]
    with tempfile.TemporaryDirectory(prefix="tracely-bench-") as tmp:
        store = SQLiteStore(Path(tmp) / "stage.db")
        started = time.perf_counter()
        for n in range(0, len(recordings), 256):
            store.put_recordings(recordings[n : n + 256])
        write = spans / (time.perf_counter() - started)
        store.close()
    return {"decode": decode, "extract": extract, "write": write}


def _stage_child(stage: str, directory: str, count: int) -> None:
    """Run under callgrind: ``stage`` over the first ``count`` payloads saved in ``directory``,
    either the to-Python floor or the server's own stages (decode, extract, SQLite write)."""
    payloads = [Path(directory, f"{i}.bin").read_bytes() for i in range(count)]
    if stage == "to-python":
        for payload in payloads:
            to_python(payload)
        return
    from tracely_otel import bundle_from_spans
    from tracely_sdk.store import Recording, SQLiteStore

    store = SQLiteStore(Path(directory) / f"stages-{count}.db")
    for payload in payloads:
        by_trace: dict[str, list[Any]] = {}
        for record in records_from_otlp_proto(payload):
            by_trace.setdefault(record.trace_id, []).append(record)
        bundles = [bundle_from_spans(group) for group in by_trace.values()]
        store.put_recordings([Recording.from_bundle(b) for b in bundles if b is not None])
    store.close()


def _instructions(stage: str, directory: str, count: int) -> int:
    child = [sys.executable, __file__, "--stage-child", stage, directory, str(count)]
    return instructions(child, stage)[0]


def by_instructions(payloads: int) -> None:
    """Instructions per span of the server's stages and of the to-Python floor, on the same
    payloads: the difference between 2 payloads and ``payloads`` of them, so that starting the
    interpreter and the store is not counted. User space only (not the kernel's side of a
    write), and no HTTP: what the stages cost, which the machine's load does not change."""
    items = templates(payloads)
    spans = sum(t.spans for t in items[2:])
    per_span: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tracely-bench-") as tmp:
        for i, item in enumerate(items):
            Path(tmp, f"{i}.bin").write_bytes(item.payload)
        for stage in ("to-python", "server"):
            few, many = (_instructions(stage, tmp, n) for n in (2, payloads))
            per_span[stage] = (many - few) / spans
    ratio = per_span["to-python"] / per_span["server"]
    print(f"instructions per span (callgrind, {spans} spans)")
    print(f"  decode to Python (the floor):               {per_span['to-python'] / 1e3:9.1f} K")
    print(f"  the server's stages (decode, extract, write): {per_span['server'] / 1e3:7.1f} K")
    met = "met" if ratio >= TO_PYTHON_GOAL else "NOT met"
    print(f"to-Python floor / server stages = {ratio:.1%} (goal >= {TO_PYTHON_GOAL:.0%}: {met})")


# --------------------------------------------------------------------------------------------
# the server


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    token: str
    count: Callable[[], int]
    log: Path
    grpc_target: str = ""

    @property
    def pid(self) -> int:
        return self.process.pid

    def memory(self) -> dict[str, int]:
        """VmHWM and VmRSS in KiB."""
        values: dict[str, int] = {}
        with open(f"/proc/{self.pid}/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    values[key] = int(rest.split()[0])
        return values


def _sqlite_counter(path: Path) -> Callable[[], int]:
    def count() -> int:
        if not path.exists():
            return 0
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM recordings").fetchone()[0])
        except sqlite3.OperationalError:
            return 0
        finally:
            conn.close()

    return count


@contextmanager
def postgres_schema(
    base: str, span_count: int | None = None
) -> Iterator[tuple[str, Callable[[], int]]]:
    """A fresh schema's URL, and a count of its recordings (of ``span_count`` only, if given:
    the complete ones)."""
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:12]}"
    admin = psycopg.connect(base, autocommit=True)
    admin.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in base else "?"
    url = f"{base}{sep}options={urllib.parse.quote(f'-csearch_path={name}')}"

    def count() -> int:
        try:
            where = "" if span_count is None else f" WHERE span_count = {int(span_count)}"
            row = admin.execute(f"SELECT COUNT(*) FROM {name}.recordings{where}").fetchone()
        except psycopg.errors.UndefinedTable:
            return 0
        return int(row[0]) if row else 0

    try:
        yield url, count
    finally:
        admin.execute(f"DROP SCHEMA {name} CASCADE")
        admin.close()


@contextmanager
def serve(store: str, count: Callable[[], int], workdir: Path, quiet: float) -> Iterator[Server]:
    token = "ingest-" + uuid.uuid4().hex
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TRACELY_SERVER_TOKENS": f"ingest:{token},read:read-{uuid.uuid4().hex}",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("TRACELY_STORE", None)
    workdir.mkdir(parents=True, exist_ok=True)
    out_path, log = workdir / "stdout.log", workdir / "stderr.log"
    with out_path.open("wb") as out, log.open("wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracely_sdk.server",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--store",
                store,
                "--journal-dir",
                str(workdir / "journal"),
                "--quiet-seconds",
                str(quiet),
                "--rate-limit",
                "0",
                "--grpc-port",
                "0",
            ],
            stdout=out,
            stderr=err,
            env=env,
            cwd=workdir,
        )
    try:
        deadline = time.monotonic() + 30
        url = target = ""
        while not target:
            lines = out_path.read_text().split("\n")[:-1]
            match = LISTENING.match(lines[0].strip()) if lines else None
            grpc_match = LISTENING_GRPC.match(lines[1].strip()) if len(lines) > 1 else None
            if match and grpc_match:
                url, target = match.group(1), grpc_match.group(1)
            elif proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start: {log.read_text()[-2000:]}")
            else:
                time.sleep(0.02)
        yield Server(proc, url, token, count, log, target)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --------------------------------------------------------------------------------------------
# load


@dataclass
class Load:
    spans: int = 0
    traces: int = 0
    requests: int = 0
    throttled: int = 0  # 429 answers (retried after Retry-After)
    failures: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Pace:
    """Lets the senders together send at most ``rate`` spans a second (None: as fast as they can)."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.started = time.monotonic()
        self.granted = 0
        self.lock = threading.Lock()

    def take(self, spans: int) -> None:
        if self.rate is None:
            return
        with self.lock:
            due = self.started + self.granted / self.rate
            self.granted += spans
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)


Post = Callable[[bytes], "tuple[int, float]"]


def _http_poster(server: Server) -> Post:
    """POST /v1/traces on one keep-alive connection: (status, seconds to wait before a retry)."""
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    state = {"conn": http.client.HTTPConnection(host, int(port), timeout=60)}
    headers = {
        "Content-Type": "application/x-protobuf",
        "Authorization": f"Bearer {server.token}",
    }

    def post(body: bytes) -> tuple[int, float]:
        try:
            state["conn"].request("POST", "/v1/traces", body=body, headers=headers)
            response = state["conn"].getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            state["conn"].close()
            state["conn"] = http.client.HTTPConnection(host, int(port), timeout=60)
            return 0, 0.05
        return response.status, float(response.getheader("Retry-After") or 1)

    return post


def _grpc_poster(server: Server) -> Post:
    """TraceService/Export on one channel: (200, or the HTTP status of the gRPC code; wait)."""
    import grpc
    from google.rpc.error_details_pb2 import RetryInfo

    channel = grpc.insecure_channel(server.grpc_target)
    export = channel.unary_unary(EXPORT)
    metadata = (("authorization", f"Bearer {server.token}"),)

    def post(body: bytes) -> tuple[int, float]:
        try:
            export(body, metadata=metadata, timeout=60)
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
            if code == grpc.StatusCode.UNAVAILABLE:
                return 0, 0.05
            if code != grpc.StatusCode.RESOURCE_EXHAUSTED:
                return 500, 0.0
            retry = dict(exc.trailing_metadata() or ()).get("google.rpc.retryinfo-bin")  # type: ignore[attr-defined]
            delay = RetryInfo.FromString(retry).retry_delay.seconds if retry else 1
            return 429, float(delay)
        return 200, 0.0

    return post


def _deliver(post: Post, body: bytes, load: Load) -> None:
    """Send until taken (retrying a refused connection and, after its delay, a 429)."""
    while True:
        status, wait = post(body)
        if status == 0:
            time.sleep(wait)
            continue
        if status == 429:
            with load.lock:
                load.throttled += 1
            time.sleep(wait)
            continue
        if status != 200:
            with load.lock:
                load.failures[status] = load.failures.get(status, 0) + 1
        return


def _sender(
    servers: Sequence[Server],
    items: Sequence[Template | SplitTemplate],
    load: Load,
    keep_going: Callable[[int], bool],
    offset: int,
    pace: Pace,
    transport: str,
) -> None:
    """Send payloads until ``keep_going`` says stop; with several servers, each request goes to
    the next (round-robin), so the two halves of a split trace reach different servers."""
    make = _grpc_poster if transport == "grpc" else _http_poster
    posts = [make(server) for server in servers]
    n = turn = offset
    sent = 0
    while keep_going(sent):
        template = items[n % len(items)]
        n += 1
        fresh = template.fresh()
        bodies = fresh if isinstance(fresh, tuple) else (fresh,)
        pace.take(template.spans)
        for body in bodies:
            _deliver(posts[turn % len(posts)], body, load)
            turn += 1
        sent += template.spans
        with load.lock:
            load.spans += template.spans
            load.traces += template.traces
            load.requests += len(bodies)


def send(
    server: Server | Sequence[Server],
    items: Sequence[Template | SplitTemplate],
    threads: int,
    keep_going: Callable[[int], bool],
    rate: float | None = None,
    transport: str = "http",
) -> Load:
    servers = [server] if isinstance(server, Server) else list(server)
    load = Load()
    pace = Pace(rate)
    workers = [
        threading.Thread(
            target=_sender,
            args=(servers, items, load, keep_going, i * 7, pace, transport),
            daemon=True,
        )
        for i in range(threads)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return load


def wait_recorded(server: Server, expected: int, timeout: float = 600) -> float:
    """Poll the store until it holds ``expected`` recordings; the time it happened."""
    deadline = time.monotonic() + timeout
    while True:
        if server.count() >= expected:
            return time.perf_counter()
        if time.monotonic() > deadline:
            raise SystemExit(
                f"only {server.count()} of {expected} recordings after {timeout}s; "
                f"server log: {server.log.read_text()[-2000:]}"
            )
        time.sleep(0.05)


@dataclass
class Result:
    store: str
    spans: int
    accepted_rate: float
    recorded_rate: float
    throttled: int
    failures: dict[int, int]
    memory: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    offered: float = 0.0
    sustained_rate: float = 0.0


def throughput(
    server: Server | Sequence[Server],
    items: Sequence[Template | SplitTemplate],
    spans: int,
    threads: int,
    transport: str = "http",
) -> Result:
    """Recorded spans/s; with several servers (one store, counted by the first's ``count``),
    requests go to each in turn."""
    first = server if isinstance(server, Server) else server[0]
    # Warm up: the first requests pay for imports, the store's first connections, the journal.
    before = first.count()
    warm = send(server, items, 2, lambda sent: sent < 4 * SPANS_PER_PAYLOAD, transport=transport)
    wait_recorded(first, before + warm.traces)
    before = first.count()
    per_thread = spans // threads
    started = time.perf_counter()
    load = send(server, items, threads, lambda sent: sent < per_thread, transport=transport)
    acked = time.perf_counter()
    done = wait_recorded(first, before + load.traces)
    return Result(
        store="",
        spans=load.spans,
        accepted_rate=load.spans / (acked - started),
        recorded_rate=load.spans / (done - started),
        throttled=load.throttled,
        failures=load.failures,
    )


def sustained(
    server: Server, items: Sequence[Template], threads: int, short: float, rate: float
) -> tuple[list[Any], float]:
    """Peak RSS after ``short`` seconds of load at ``rate`` spans/s and after ``3 * short``;
    and the rate at which the spans became recordings meanwhile."""
    before = server.count()
    started = time.monotonic()
    started_perf = time.perf_counter()
    readings: list[tuple[float, dict[str, int]]] = []
    marks = [short, 3 * short]
    stop = threading.Event()

    def watch() -> None:
        for mark in marks:
            while time.monotonic() - started < mark:
                time.sleep(0.05)
            readings.append((mark, server.memory()))
        stop.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    load = send(server, items, threads, lambda sent: not stop.is_set(), rate)
    watcher.join()
    done = wait_recorded(server, before + load.traces)
    return readings, load.spans / (done - started_perf)


# --------------------------------------------------------------------------------------------


def find_postgres() -> str | None:
    url = os.environ.get("TRACELY_TEST_POSTGRES_URL")
    if url:
        return url
    script = ROOT / ".ci" / "install-postgres.sh"
    try:
        done = subprocess.run(
            ["bash", str(script)],
            env={**os.environ, "TRACELY_PG_NO_INSTALL": "1"},
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"^export TRACELY_TEST_POSTGRES_URL=(\S+)$", done.stdout, re.M)
    return match.group(1) if match else None


def mib(kib: int) -> str:
    return f"{kib / 1024:7.1f} MiB"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--spans", type=int, default=200_000, help="spans per throughput run (default 200000)"
    )
    parser.add_argument("--threads", type=int, default=4, help="sending threads (default 4)")
    parser.add_argument(
        "--short",
        type=float,
        default=30.0,
        help="seconds of the short sustained run; the long one is 3x (default 30)",
    )
    parser.add_argument(
        "--quiet-seconds",
        type=float,
        default=0.5,
        help="the server's quiet period before a trace is assembled (default 0.5)",
    )
    parser.add_argument(
        "--stores", default="sqlite,postgresql", help="which stores (default sqlite,postgresql)"
    )
    parser.add_argument("--payloads", type=int, default=32, help="distinct payloads (default 32)")
    parser.add_argument(
        "--transports", default="http,grpc", help="OTLP/HTTP, OTLP/gRPC or both (default both)"
    )
    parser.add_argument(
        "--instances-spans",
        type=int,
        default=100_000,
        help="spans of the one-against-two PostgreSQL servers runs (default 100000; 0 skips)",
    )
    parser.add_argument(
        "--load",
        type=float,
        default=0.8,
        help="sustained load, as a fraction of the measured recorded rate (default 0.8)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count the server stages' and the to-Python floor's instructions under callgrind",
    )
    parser.add_argument("--stage-child", nargs=3, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.stage_child:
        stage, directory, count = opts.stage_child
        _stage_child(stage, directory, int(count))
        return 0
    if opts.instructions:
        if shutil.which("valgrind") is None:
            parser.error("--instructions needs valgrind (apt-get install valgrind)")
        by_instructions(max(opts.payloads // 2, 4))
        return 0

    load1, load5, _ = os.getloadavg()
    print(
        f"{os.cpu_count()} CPUs, load average {load1:.1f} (1 min) {load5:.1f} (5 min); "
        "other work on the machine lowers the figures below",
        flush=True,
    )
    print(f"making {opts.payloads} payloads from runs of the reference agent ...", flush=True)
    items = templates(opts.payloads)
    per_payload = items[0].spans
    per_trace = per_payload // items[0].traces
    print(
        f"payload: {per_payload} spans ({items[0].traces} traces of {per_trace} spans), "
        f"{len(items[0].payload) / 1024:.0f} KiB of OTLP/protobuf"
    )
    floors = decode_floor(items)
    print_floors(floors)
    stage = stages(items)
    alone = 1 / sum(1 / stage[k] for k in ("decode", "extract", "write"))
    print(
        "server stages alone, one thread: decode {decode:,.0f}, extract {extract:,.0f}, "
        "SQLite write {write:,.0f} spans/s".format(**stage)
        + f"; all three in turn {alone:,.0f} spans/s"
    )

    stores = [s.strip() for s in opts.stores.split(",") if s.strip()]
    transports = [t.strip() for t in opts.transports.split(",") if t.strip()]
    if not set(transports) <= {"http", "grpc"}:
        raise SystemExit(f"--transports {opts.transports!r}: expected http, grpc or both")
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="tracely-bench-") as tmp:
        for kind in stores:
            for phase in ("throughput", "memory"):
                workdir = Path(tmp) / f"{kind}-{phase}"
                if kind == "sqlite":
                    db = workdir / "tracely.db"
                    ctx: Any = _nullcontext((f"sqlite:///{db}", _sqlite_counter(db)))
                elif kind == "postgresql":
                    base = find_postgres()
                    if base is None:
                        print(
                            "postgresql: skipped (no TRACELY_TEST_POSTGRES_URL and "
                            ".ci/install-postgres.sh could not start a server)"
                        )
                        break
                    ctx = postgres_schema(base)
                else:
                    raise SystemExit(f"unknown store {kind!r}; expected sqlite or postgresql")
                with ctx as (url, count), serve(url, count, workdir, opts.quiet_seconds) as server:
                    if phase == "throughput":
                        for transport in transports:
                            print(
                                f"{kind}: {opts.spans} spans from {opts.threads} threads over "
                                f"{transport} ...",
                                flush=True,
                            )
                            result = throughput(server, items, opts.spans, opts.threads, transport)
                            result.store = f"{kind} {transport}"
                            results.append(result)
                    else:
                        print(
                            f"{kind}: sustained load at {opts.load:.0%} of that rate for "
                            f"{3 * opts.short:g}s ...",
                            flush=True,
                        )
                        last = next(r for r in reversed(results) if r.store.startswith(kind))
                        last = next((r for r in results if r.store == f"{kind} http"), last)
                        last.offered = opts.load * last.recorded_rate
                        last.memory, last.sustained_rate = sustained(
                            server, items, opts.threads, opts.short, last.offered
                        )

    # Other work on the machine slows the floors as much as the server; measured again now,
    # the faster of the two measurements of each floor is the one the ratios use.
    again = decode_floor(items)
    print("the floors again, after the servers ran:")
    print_floors(again)
    floors = Floors(
        max(floors.parse, again.parse),
        max(floors.to_python, again.to_python),
        max(floors.tracely, again.tracely),
    )
    floor = floors.parse

    print()
    print(
        f"{'store':11s} {'accepted':>14s} {'recorded':>14s} {'recorded/floor':>15s} "
        f"{'/to-Python':>11s}  429s  errors"
    )
    for r in results:
        ratio = r.recorded_rate / floor
        print(
            f"{r.store:11s} {r.accepted_rate:12,.0f}/s {r.recorded_rate:12,.0f}/s "
            f"{ratio:14.1%} {r.recorded_rate / floors.to_python:11.1%}  {r.throttled:4d}  "
            f"{sum(r.failures.values()) or '-'}"
        )
    print(
        f"(spans per second; floor {floor:,.0f}/s, to-Python floor {floors.to_python:,.0f}/s; "
        f"target: recorded >= {TARGET:.0%} of floor)"
    )
    for r in results:
        if len(r.memory) == 2:
            (t1, m1), (t2, m2) = r.memory
            growth = m2["VmHWM"] / m1["VmHWM"] - 1
            print(
                f"{r.store:11s} at {r.offered:,.0f} spans/s offered ({r.sustained_rate:,.0f}/s "
                f"recorded): peak RSS after {t1:g}s {mib(m1['VmHWM']).strip()}, after {t2:g}s "
                f"{mib(m2['VmHWM']).strip()} ({growth:+.0%}); RSS at the end "
                f"{mib(m2['VmRSS']).strip()}"
            )
    met = all(r.recorded_rate / floor >= TARGET for r in results)
    print(f"target {'met' if met else 'NOT met'}")
    on_sqlite = [
        r.recorded_rate / floors.to_python for r in results if r.store.startswith("sqlite")
    ]
    if on_sqlite:
        met = min(on_sqlite) >= TO_PYTHON_GOAL
        print(
            f"recorded on SQLite / to-Python floor = {min(on_sqlite):.1%} "
            f"(goal >= {TO_PYTHON_GOAL:.0%}: {'met' if met else 'NOT met'})"
        )
    if "postgresql" in stores and opts.instances_spans:
        base = find_postgres()
        if base is not None:
            instances(base, opts)
    return 0


def complete_weight(items: Sequence[SplitTemplate]) -> int:
    """The span_count of a complete recording of these (identically shaped) traces."""
    from tracely_otel import bundle_from_spans
    from tracely_sdk.store._model import bundle_weight

    records = [r for half in items[0].halves for r in records_from_otlp_proto(half.payload)]
    by_trace: dict[str, list[Any]] = {}
    for record in records:
        by_trace.setdefault(record.trace_id, []).append(record)
    weights = {bundle_weight(bundle_from_spans(spans) or {}) for spans in by_trace.values()}
    assert len(weights) == 1, weights
    return weights.pop()


def instances(base: str, opts: argparse.Namespace) -> None:
    """One server against two on one PostgreSQL store, every trace cut in two requests sent
    round-robin (so with two servers, each trace reaches both); counted are the complete
    recordings only, so a trace recorded in part never counts."""
    split = split_templates(max(4, opts.payloads // 4))
    weight = complete_weight(split)
    rates: dict[int, Result] = {}
    with tempfile.TemporaryDirectory(prefix="tracely-bench-") as tmp:
        for count in (1, 2):
            print(
                f"postgresql, {count} server(s), round-robin, traces split across requests: "
                f"{opts.instances_spans} spans from {opts.threads} threads ...",
                flush=True,
            )
            with postgres_schema(base, span_count=weight) as (url, complete), ExitStack() as stack:
                servers = [
                    stack.enter_context(
                        serve(url, complete, Path(tmp) / f"rr{count}-{n}", opts.quiet_seconds)
                    )
                    for n in range(count)
                ]
                rates[count] = throughput(servers, split, opts.instances_spans, opts.threads)
    one, two = rates[1], rates[2]
    print()
    print(f"{'servers':11s} {'accepted':>14s} {'recorded':>14s}  429s  errors (PostgreSQL)")
    for count, r in rates.items():
        print(
            f"{count:<11d} {r.accepted_rate:12,.0f}/s {r.recorded_rate:12,.0f}/s  "
            f"{r.throttled:4d}  {sum(r.failures.values()) or '-'}"
        )
    ratio = two.recorded_rate / one.recorded_rate
    print(
        f"two servers / one: {ratio:.2f}x recorded (target >= 1.0x); every trace complete "
        f"(each recording counted only at the span_count of a whole trace, {weight})"
    )


@contextmanager
def _nullcontext(value: Any) -> Iterator[Any]:
    yield value


if __name__ == "__main__":
    raise SystemExit(main())
