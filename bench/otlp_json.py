"""How fast OTLP/JSON decodes, against the decoder of another revision, in one run.

The payload is a realistic OTLP/JSON export: ``--spans`` spans (1,000 by default) in traces of
ten, each span carrying the GenAI attributes an instrumented LLM call has (model, system,
operation, token counts as 64-bit strings, temperature, finish reasons, input and output
messages as JSON text), written with hex ids, integer enums and decimal-string times as the
OTLP specification writes them. Both decoders read the same bytes and must give equal records.
They are timed in alternating rounds (so load that comes and goes on the machine hits both
alike) as the CPU time of the decoding thread; the best round of each is printed, and their
ratio (this tree / the other revision: above 1 means this tree is slower). Beside them, this
tree's protobuf decoder on the same spans as one ``ExportTraceServiceRequest``: what reading
the spans costs once they are protobuf messages.

``--instructions`` counts each decoder's instructions under valgrind's callgrind instead (a
child process decoding once, and ``1 + --decodes`` times; the difference is the decoding's),
which the load of a shared machine does not change.

The other revision's ``tracely_otel/_otlp.py`` is read with ``git show REV:...`` and loaded as
a module of its own beside this tree's.

    python bench/otlp_json.py [--spans N] [--rounds R] [--against REV] [--instructions]
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
from _callgrind import instructions

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracely_otel import _otlp  # noqa: E402
from tracely_otel._spans import SpanRecord  # noqa: E402


def _module_at(revision: str) -> ModuleType:
    source = subprocess.run(
        ["git", "show", f"{revision}:tracely_otel/_otlp.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    spec = importlib.util.spec_from_loader(f"_otlp_at_{revision}", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{revision}:tracely_otel/_otlp.py", "exec"), module.__dict__)
    return module


def _records(spans: int) -> list[SpanRecord]:
    messages = orjson.dumps(
        [
            {"role": "system", "content": "You are a weather assistant. Answer briefly."},
            {"role": "user", "content": "Will it rain in Oslo tomorrow afternoon?"},
        ]
    ).decode()
    return [
        SpanRecord(
            trace_id=format(n // 10 + 1, "032x"),
            span_id=format(n + 1, "016x"),
            parent_span_id=format(n - n % 10 + 1, "016x") if n % 10 else None,
            name=f"chat gpt-4o-mini {n}",
            start_time_unix_nano=1_717_000_000_000_000_000 + n * 1_000_000,
            end_time_unix_nano=1_717_000_000_400_000_000 + n * 1_000_000,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.request.temperature": 0.2,
                "gen_ai.usage.input_tokens": 812 + n,
                "gen_ai.usage.output_tokens": 96,
                "gen_ai.response.finish_reasons": ("stop",),
                "gen_ai.input.messages": messages,
                "gen_ai.output.messages": '[{"role":"assistant","content":"Light rain."}]',
                "tracely.kind": "llm",
            },
            status_code="ERROR" if n % 97 == 0 else "UNSET",
            resource={"service.name": "weather-agent", "telemetry.sdk.language": "python"},
            scope_name="tracely.providers.openai",
            kind="CLIENT",
        )
        for n in range(spans)
    ]


def _protobuf(doc: dict[str, Any]) -> bytes:
    """The same request as OTLP/protobuf (protobuf's JSON parser reads base64 ids)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    canonical = orjson.loads(orjson.dumps(doc))
    for rs in canonical["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for field in ("traceId", "spanId", "parentSpanId"):
                    if field in span:
                        span[field] = base64.b64encode(bytes.fromhex(span[field])).decode()
    message = json_format.ParseDict(canonical, ExportTraceServiceRequest())
    body: bytes = message.SerializeToString()
    return body


def _cpu(decode: Callable[[bytes], Any], body: bytes) -> float:
    start = time.thread_time()
    decode(body)
    return time.thread_time() - start


def _decoder(which: str, against: str) -> Callable[[bytes], Any]:
    module = _otlp if which == "this" else _module_at(against)
    decode: Callable[[bytes], Any] = module.records_from_otlp_json
    return decode


def _child(which: str, against: str, spans: int, decodes: int) -> None:
    decode = _decoder(which, against)
    body = orjson.dumps(_otlp.encode_records_otlp_json(_records(spans)))
    for _ in range(decodes):
        decode(body)


def _instructions(which: str, opts: argparse.Namespace, decodes: int) -> int:
    command = [
        sys.executable,
        __file__,
        *("--child", which, "--against", opts.against),
        *("--spans", str(opts.spans), "--decodes", str(decodes)),
    ]
    return instructions(command, which)[0]


def _by_instructions(opts: argparse.Namespace) -> None:
    per_decode: dict[str, float] = {}
    for which in ("this", "against"):
        once, more = (_instructions(which, opts, n) for n in (1, 1 + opts.decodes))
        per_decode[which] = (more - once) / opts.decodes
    new, old = per_decode["this"], per_decode["against"]
    print(f"instructions per decode of {opts.spans} spans of OTLP/JSON (callgrind)")
    print(f"{opts.against}: {old / 1e6:10.1f} M")
    print(f"this tree: {new / 1e6:10.1f} M")
    print(f"ratio this tree / {opts.against}: {new / old:.2f}x")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--spans", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--against", default="main", help="the revision to compare with")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under callgrind"
    )
    parser.add_argument("--decodes", type=int, default=3, help="decodes counted per child")
    parser.add_argument("--child", choices=["this", "against"], help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.child:
        _child(opts.child, opts.against, opts.spans, opts.decodes)
        return 0

    doc = _otlp.encode_records_otlp_json(_records(opts.spans))
    body = orjson.dumps(doc)
    this_tree, other = _decoder("this", opts.against), _decoder("against", opts.against)
    records = this_tree(body)
    if records != other(body):
        raise SystemExit("the two decoders give different records for the same payload")
    proto = _protobuf(doc)
    if _otlp.records_from_otlp_proto(proto) != records:
        raise SystemExit("the protobuf form of the payload decodes to different records")
    print(f"payload: {opts.spans} spans, {len(body)} bytes of OTLP/JSON, {len(proto)} of protobuf")
    if opts.instructions:
        _by_instructions(opts)
        return 0

    times: dict[str, list[float]] = {"this": [], "against": [], "proto": []}
    for _ in range(opts.rounds):
        times["this"].append(_cpu(this_tree, body))
        times["against"].append(_cpu(other, body))
        times["proto"].append(_cpu(_otlp.records_from_otlp_proto, proto))
    new, old, pb = (min(times[k]) for k in ("this", "against", "proto"))
    per_span = 1e6 / opts.spans
    print(f"best of {opts.rounds} alternating rounds, CPU time of the decoding thread")
    print(f"{opts.against}: {old * 1e3:8.1f} ms  ({old * per_span:.1f} us/span)")
    print(f"this tree: {new * 1e3:8.1f} ms  ({new * per_span:.1f} us/span)")
    print(f"this tree, the same spans as protobuf: {pb * 1e3:8.1f} ms")
    print(f"ratio this tree / {opts.against}: {new / old:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
