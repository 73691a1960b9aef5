"""``tracely traces import FILE|URL``: recordings from traces that were exported elsewhere.

A source is a file (OTLP protobuf, OTLP JSON, or the JSON Lines a collector's file exporter
writes; gzip-compressed or not; ``-`` for standard input) or an ``http(s)`` URL of a trace in
Jaeger (``/api/v3/traces/{id}``) or Tempo (``/api/traces/{id}``). It is decoded by the same
decoders as the server's OTLP receiver, grouped by trace, and each trace goes through the one
extractor (:func:`tracely_otel.bundle_from_spans`) before it is written to the store, so an
imported trace is the same recording the server or the in-process recorder would have made.
Importing again is harmless: a recording already stored is left as it is, a more complete one
replaces it.
"""

from __future__ import annotations

import argparse
import base64
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tracely_otel import SpanRecord, bundle_from_spans
from tracely_otel.otlp import (
    OTLPDecodeError,
    decode_any,
    gunzip_bounded,
    records_from_jaeger,
    records_from_jsonl,
    records_from_otlp_json,
    records_from_otlp_proto,
    records_from_tempo,
)
from tracely_sdk.errors import TracelyError
from tracely_sdk.store import Recording, Store, redact_url

if TYPE_CHECKING:
    from tracely_sdk.cli import Context

__all__ = [
    "FORMATS",
    "ImportResult",
    "ImportSourceError",
    "ImportedTrace",
    "add_import_command",
    "import_traces",
    "read_source",
]

DEFAULT_TIMEOUT = 30.0
MAX_SOURCE_BYTES = 1 << 30  # what one source may hold, compressed or not
_GZIP_MAGIC = b"\x1f\x8b"

_DECODERS: dict[str, Callable[[bytes], list[SpanRecord]]] = {
    "otlp-proto": records_from_otlp_proto,
    "otlp-json": records_from_otlp_json,
    "jsonl": records_from_jsonl,
    "jaeger": records_from_jaeger,
    "tempo": records_from_tempo,
}
FORMATS = ("auto", *_DECODERS)

_SUFFIX_TYPES = {
    ".pb": "application/x-protobuf",
    ".bin": "application/x-protobuf",
    ".proto": "application/x-protobuf",
    ".protobuf": "application/x-protobuf",
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
}


class ImportSourceError(TracelyError):
    """The source cannot be read or is not trace data; the message says which and why."""


@dataclass(frozen=True)
class ImportedTrace:
    """What became of one trace of the source."""

    trace_id: str
    spans: int
    outcome: str  # "stored" (new or more complete) | "unchanged" | "skipped"
    reason: str | None = None  # why it was skipped
    notes: tuple[str, ...] = ()  # what limits the recording (no agent input, incomplete calls)


@dataclass
class ImportResult:
    """How an import went: counts, and what happened to every trace."""

    source: str
    spans: int = 0
    traces: list[ImportedTrace] = field(default_factory=list)

    @property
    def recordings(self) -> int:
        """Traces that became recordings (stored now, or already stored before)."""
        return sum(t.outcome != "skipped" for t in self.traces)

    @property
    def stored(self) -> int:
        return sum(t.outcome == "stored" for t in self.traces)

    @property
    def unchanged(self) -> int:
        return sum(t.outcome == "unchanged" for t in self.traces)

    @property
    def skipped(self) -> list[ImportedTrace]:
        return [t for t in self.traces if t.outcome == "skipped"]

    def summary(self) -> str:
        parts = [f"{self.stored} new or updated"]
        if self.unchanged:
            parts.append(f"{self.unchanged} already stored")
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        return (
            f"imported {self.source}: {self.spans} span(s) in {len(self.traces)} trace(s), "
            f"{self.recordings} recording(s) ({', '.join(parts)})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "spans": self.spans,
            "traces": len(self.traces),
            "recordings": self.recordings,
            "stored": self.stored,
            "unchanged": self.unchanged,
            "skipped": len(self.skipped),
            "details": [
                {
                    "trace_id": t.trace_id,
                    "spans": t.spans,
                    "outcome": t.outcome,
                    "reason": t.reason,
                    "notes": list(t.notes),
                }
                for t in self.traces
            ],
        }


# --------------------------------------------------------------------------------------------
# reading a source


def _is_url(source: str) -> bool:
    return source.lower().startswith(("http://", "https://"))


def _shown(source: str) -> str:
    return redact_url(source) if _is_url(source) else source


def _file_type(path: str) -> str | None:
    name = path.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    for suffix, media in _SUFFIX_TYPES.items():
        if name.endswith(suffix):
            return media
    return None


def _read_file(source: str) -> tuple[bytes, str | None]:
    if source == "-":
        data = sys.stdin.buffer.read(MAX_SOURCE_BYTES + 1)
        media = None
    else:
        path = Path(source).expanduser()
        try:
            with path.open("rb") as fh:
                data = fh.read(MAX_SOURCE_BYTES + 1)
        except IsADirectoryError:
            raise ImportSourceError(f"cannot read {source}: it is a directory") from None
        except OSError as exc:
            raise ImportSourceError(f"cannot read {source}: {exc.strerror or exc}") from None
        media = _file_type(source)
    if len(data) > MAX_SOURCE_BYTES:
        raise ImportSourceError(f"{source} is larger than {MAX_SOURCE_BYTES} bytes")
    return data, media


class _NoRedirectWithCredentials(urllib.request.HTTPRedirectHandler):
    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Any:
        if req.has_header("Authorization"):
            return None  # the credentials would travel to wherever the redirect points
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _fetch(url: str, timeout: float) -> tuple[bytes, str | None]:
    shown = redact_url(url)
    split = urllib.parse.urlsplit(url)
    headers = {"Accept": "application/json", "User-Agent": "tracely-import"}
    netloc = split.netloc
    if split.username is not None or split.password is not None:
        user = urllib.parse.unquote(split.username or "")
        password = urllib.parse.unquote(split.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
        netloc = netloc.rsplit("@", 1)[1]
    target = urllib.parse.urlunsplit((split.scheme, netloc, split.path, split.query, ""))
    opener = urllib.request.build_opener(_NoRedirectWithCredentials())
    request = urllib.request.Request(target, headers=headers)
    try:
        with opener.open(request, timeout=timeout) as response:
            data = response.read(MAX_SOURCE_BYTES + 1)
            media = response.headers.get("Content-Type")
            encoding = (response.headers.get("Content-Encoding") or "").lower()
    except urllib.error.HTTPError as error:
        try:
            body = error.read(4096)
        except OSError:
            body = b""
        finally:
            error.close()
        raise ImportSourceError(
            f"cannot fetch {shown}: it answered HTTP {error.code} {error.reason}"
            f"{_remote_message(body)}"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ImportSourceError(
            f"cannot fetch {shown}: {reason} (check the URL, and that the trace backend is "
            "reachable from here)"
        ) from None
    if len(data) > MAX_SOURCE_BYTES:
        raise ImportSourceError(f"{shown} answered with more than {MAX_SOURCE_BYTES} bytes")
    if encoding == "gzip" and not data.startswith(_GZIP_MAGIC):
        raise ImportSourceError(f"{shown} declared a gzip body that is not gzip")
    return data, media


def _remote_message(body: bytes) -> str:
    """What a Jaeger or Tempo error body says, briefly."""
    text = ""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body.decode("utf-8", "replace")
    else:
        error = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(error, dict):
            text = str(error.get("message") or "")
        elif isinstance(error, str):
            text = error
        elif isinstance(doc, dict) and isinstance(doc.get("message"), str):
            text = doc["message"]
    text = " ".join(text.split())[:200]
    return f" ({text})" if text else ""


def read_source(
    source: str, *, format: str = "auto", timeout: float = DEFAULT_TIMEOUT
) -> list[SpanRecord]:
    """Every span the source holds, decoded; :class:`ImportSourceError` when it cannot be."""
    if format not in FORMATS:
        raise ImportSourceError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    data, media = _fetch(source, timeout) if _is_url(source) else _read_file(source)
    shown = _shown(source)
    try:
        if format == "auto":
            return decode_any(data, media, max_decompressed_bytes=MAX_SOURCE_BYTES)
        if data.startswith(_GZIP_MAGIC):
            data = gunzip_bounded(data, MAX_SOURCE_BYTES)
        return _DECODERS[format](data)
    except OTLPDecodeError as exc:
        raise ImportSourceError(f"{shown} is not trace data that tracely reads: {exc}") from None


# --------------------------------------------------------------------------------------------
# importing


def _notes(bundle: Mapping[str, Any]) -> tuple[str, ...]:
    notes: list[str] = []
    agent = bundle.get("agent")
    if not isinstance(agent, Mapping):
        notes.append(
            "no agent span (the root of the run is not in the source): it cannot be promoted"
        )
    elif "input" not in agent:
        notes.append("the agent span has no recorded input: it cannot be promoted")
    incomplete = bundle.get("incomplete") or []
    if isinstance(incomplete, list) and incomplete:
        first = incomplete[0] if isinstance(incomplete[0], Mapping) else {}
        notes.append(
            f"{len(incomplete)} call(s) cannot be replayed, e.g. {first.get('label')}: "
            f"{first.get('reason')}"
        )
    return tuple(notes)


def import_traces(
    source: str,
    store: Store,
    *,
    format: str = "auto",
    timeout: float = DEFAULT_TIMEOUT,
) -> ImportResult:
    """Import every trace of ``source`` (a file, ``-``, or a Jaeger/Tempo URL) into ``store``.

    Raises :class:`ImportSourceError` when the source cannot be read or decoded, and the
    store's errors when it cannot write. A trace without tracely spans (no agent run and no
    tool or LLM call) is skipped, with the reason in the result.
    """
    records = read_source(source, format=format, timeout=timeout)
    result = ImportResult(source=_shown(source), spans=len(records))
    by_trace: dict[str, list[SpanRecord]] = {}
    for record in records:
        by_trace.setdefault(record.trace_id, []).append(record)
    pending: list[tuple[str, int, Recording, tuple[str, ...]]] = []
    for trace_id, spans in by_trace.items():
        count = len({s.span_id for s in spans})
        bundle = bundle_from_spans(spans)
        if bundle is None:
            result.traces.append(
                ImportedTrace(
                    trace_id,
                    count,
                    "skipped",
                    f"no tracely spans: none of its {count} span(s) is an agent run or a tool "
                    "or LLM call recorded by tracely or a known instrumentor",
                )
            )
            continue
        try:
            recording = Recording.from_bundle(bundle)
        except ValueError as exc:
            result.traces.append(ImportedTrace(trace_id, count, "skipped", str(exc)))
            continue
        pending.append((trace_id, count, recording, _notes(bundle)))
    stored = store.put_recordings([p[2] for p in pending]) if pending else []
    outcomes = {
        trace_id: ImportedTrace(trace_id, count, "stored" if new else "unchanged", None, notes)
        for (trace_id, count, _, notes), new in zip(pending, stored, strict=True)
    }
    skipped = {t.trace_id: t for t in result.traces}
    result.traces = [outcomes.get(t) or skipped[t] for t in by_trace]
    return result


# --------------------------------------------------------------------------------------------
# the command


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def add_import_command(
    traces_subparsers: Any, common: argparse.ArgumentParser | None = None
) -> Any:
    """Define ``tracely traces import`` on the ``traces`` command's subparsers."""
    p = traces_subparsers.add_parser(
        "import",
        parents=[common] if common is not None else [],
        help="record traces exported elsewhere (OTLP files, Jaeger, Tempo)",
        description="Turn traces exported elsewhere into recordings: an OTLP protobuf or JSON "
        "file, a collector file exporter's JSON Lines (gzip or not; - reads standard input), "
        "or the URL of a trace in Jaeger (/api/v3/traces/ID) or Tempo (/api/traces/ID). "
        "Importing again is harmless.",
        epilog="Exit status: 0 when the traces became recordings, 1 when none of them holds "
        "tracely spans, 2 when the source cannot be read.",
    )
    p.add_argument("source", metavar="FILE|URL")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="how the source is encoded (default: told by its content type, name or content)",
    )
    p.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"how long to wait for a URL's answer (default {DEFAULT_TIMEOUT:g}s)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=cmd_import)
    return p


def cmd_import(args: argparse.Namespace, ctx: Context) -> int:
    try:
        result = import_traces(args.source, ctx.store(), format=args.format, timeout=args.timeout)
    except ImportSourceError as exc:
        ctx.out.error(" ".join(str(exc).split()))
        return 2
    if args.json:
        data = result.to_dict()
        ctx.out.document(
            "tracely.traces.import/1",
            {
                "source": data["source"],
                "span_count": data["spans"],
                "trace_count": data["traces"],
                "recording_count": data["recordings"],
                "stored": data["stored"],
                "unchanged": data["unchanged"],
                "skipped": data["skipped"],
                "traces": [{"span_count": t.pop("spans"), **t} for t in data["details"]],
            },
        )
    else:
        ctx.out.line(result.summary())
        for trace in result.traces:
            if trace.outcome == "skipped":
                ctx.out.line(f"skipped {trace.trace_id}: {trace.reason}")
            for note in trace.notes:
                ctx.out.line(f"note {trace.trace_id}: {note}")
    if result.traces and not result.recordings:
        return 1
    return 0
