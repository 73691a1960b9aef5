"""The tracely server: the OTLP receiver, the recordings and cases API, and their wiring.

Every route is one row of :data:`ROUTES` (method, path template, scope, handler); the OpenAPI
document in :mod:`tracely_sdk.server._openapi` describes exactly these, and a test holds the
two together. The rows become a Starlette ``Router``: one ``Route`` per path, whose endpoint
checks the method and the token before the body is read, reads it, and runs the handler in a
worker thread (the store is blocking) within the server's request slots. Input is validated at the edge — ids, sizes, JSON depth and shape, unknown
fields — and every failure is a 4xx with a message saying what to change.

``/v1/traces`` answers as OTLP/HTTP specifies: 200 with an ``ExportTraceServiceResponse`` (a
``partial_success`` when some spans were refused), errors as a ``google.rpc.Status`` in the
request's encoding (protobuf or JSON), 429/503 with ``Retry-After`` for back-pressure.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson

from tracely_otel import BundleFormatError, validate_bundle
from tracely_otel.otlp import (
    OTLPDecodeError,
    PayloadTooLarge,
    decode_export_request,
    gunzip_bounded,
    rejected_message,
)
from tracely_sdk.errors import ConfigError, Conflict, NotFound, StoreError
from tracely_sdk.server._auth import (
    INGEST,
    READ,
    WRITE,
    RateLimiter,
    SignInThrottle,
    TokenSet,
    load_tokens,
)
from tracely_sdk.server._config import ServerConfig
from tracely_sdk.server._http import (
    PROBES,
    HTTPError,
    HTTPServer,
    Limits,
    body_of,
    client_of,
    error_body,
    has_body,
    header,
    json_response,
    media_type,
    raw_path,
    read_body,
    response,
)
from tracely_sdk.server._ingest import (
    KIND_JSON,
    KIND_JSON_GZIP,
    KIND_PROTO,
    KIND_PROTO_GZIP,
    Backpressure,
    IngestPipeline,
    Journal,
    JournalError,
    Unavailable,
)
from tracely_sdk.server._ui import UI_ROUTES, is_local_host, is_same_origin
from tracely_sdk.store import (
    Case,
    CaseVersion,
    InvalidCase,
    Recording,
    Run,
    Store,
    check_case_result,
    open_store,
    redact_url,
    validate_case_id,
)
from tracely_sdk.store._base import Promotion, StatedRun
from tracely_sdk.store._model import RUN_FIELDS, RUN_ID_PATTERN, normalise_tags, now_ns

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from tracely_sdk.server._grpc import GRPCReceiver

__all__ = ["ROUTES", "App", "Route", "TracelyServer", "create_server"]

logger = logging.getLogger("tracely.server")

TRACE_ID_RE: Final = re.compile(r"^[0-9a-fA-F]{32}$")
RUN_ID_RE: Final = re.compile(RUN_ID_PATTERN)
MAX_JSON_DEPTH: Final = 128
MAX_PAGE: Final = 1000
# How long a request whose body has arrived may wait for a slot before it is answered 503.
_SLOT_WAIT: Final = 5.0
_PROTOBUF_TYPES: Final = frozenset({"application/x-protobuf", "application/protobuf"})
_RPC_CODES: Final = {400: 3, 401: 16, 403: 7, 404: 5, 413: 3, 415: 3, 429: 8, 500: 13, 503: 14}
_BAD_REQUEST_TYPE: Final = "type.googleapis.com/google.rpc.BadRequest"

_RECORDING_FIELDS: Final = frozenset(
    {
        "trace_id",
        "service",
        "agent_name",
        "started_at",
        "status",
        "input",
        "output",
        "bundle",
        "replay_mode",
        "received_at",
    }
)
_CASE_FIELDS: Final = frozenset(
    {
        "id",
        "name",
        "entrypoint",
        "input",
        "expected_output",
        "bundle",
        "source_trace_id",
        "version",
        "tags",
        "created_at",
        "updated_at",
    }
)
_VERSION_FIELDS: Final = frozenset(
    {"version", "input", "expected_output", "bundle", "source_trace_id", "created_at", "note"}
)


# --------------------------------------------------------------------------------------------
# routes


Handler = Callable[["App", "Request", dict[str, str]], "Response"]


@dataclass(frozen=True)
class Route:
    """One operation: ``template`` segments in braces are parameters (``{case_id}``)."""

    method: str
    template: str
    scope: str | None  # None: no token needed
    handler: Handler
    otlp: bool = False


# --------------------------------------------------------------------------------------------
# validation at the edge


def _check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise HTTPError(400, f"the JSON body nests deeper than {limit} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))


def _fields(
    obj: Any, what: str, allowed: frozenset[str], required: frozenset[str] = frozenset()
) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise HTTPError(400, f"{what} must be a JSON object")
    unknown = set(obj) - allowed
    if unknown:
        raise HTTPError(
            400,
            f"{what}: unknown field(s) {', '.join(sorted(map(repr, unknown)))}; "
            f"accepted: {', '.join(sorted(allowed))}",
            code="invalid",
            detail={"unknown_fields": sorted(unknown)},
        )
    missing = required - set(obj)
    if missing:
        raise HTTPError(
            400,
            f"{what}: missing required field(s) {', '.join(sorted(missing))}",
            code="invalid",
            detail={"missing_fields": sorted(missing)},
        )
    return obj


def _string(obj: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise HTTPError(400, f"{key} must be a string", code="invalid")
    return value


_INT64_MAX: Final = 2**63 - 1


def _types(
    obj: Mapping[str, Any],
    what: str,
    *,
    integers: Sequence[str] = (),
    strings: Sequence[str] = (),
    optional: frozenset[str] = frozenset(),
) -> None:
    """Integers that fit the store's 64-bit columns and strings where strings go, checked at
    the edge: anything else is the client's mistake (400 naming the field), not the store's."""
    for key in integers:
        value = obj.get(key)
        if value is None and key in optional:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _INT64_MAX:
            raise HTTPError(
                400,
                f"{what}: {key} must be a whole number from 0 to {_INT64_MAX}",
                code="invalid",
                detail={"field": key},
            )
    for key in strings:
        value = obj.get(key)
        if value is None and key in optional:
            continue
        if not isinstance(value, str):
            raise HTTPError(
                400, f"{what}: {key} must be a string", code="invalid", detail={"field": key}
            )


def _trace_id(value: Any, what: str = "trace id") -> str:
    if not isinstance(value, str) or not TRACE_ID_RE.fullmatch(value) or not value.strip("0"):
        shown = value if isinstance(value, str) and len(value) <= 40 else "the value given"
        raise HTTPError(
            400,
            f"invalid {what} {shown!r}: expected 32 hexadecimal characters, not all zeros",
            code="invalid",
        )
    return value.lower()


def _case_id(value: str) -> str:
    try:
        return validate_case_id(value)
    except InvalidCase as exc:
        raise HTTPError(400, str(exc), code="invalid") from None


def _tags(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise HTTPError(400, "tags must be a list of strings", code="invalid")
    try:
        return list(normalise_tags(value))
    except InvalidCase as exc:
        raise HTTPError(400, str(exc), code="invalid") from None


def _query(
    request: Request, allowed: frozenset[str], *, keys: Sequence[str] = ()
) -> dict[str, str]:
    query = request.query_params
    unknown = set(query) - allowed
    if unknown:
        raise HTTPError(
            400,
            f"unknown query parameter(s) {', '.join(sorted(map(repr, unknown)))}; accepted: "
            f"{', '.join(sorted(allowed)) or 'none'}",
            detail={"unknown_fields": sorted(unknown)},
        )
    out: dict[str, str] = {}
    for key in query:
        values = query.getlist(key)
        if len(values) != 1:
            raise HTTPError(400, f"query parameter {key!r} is given {len(values)} times")
        out[key] = values[0]
    return out


def _int_param(params: Mapping[str, str], key: str, default: int, low: int, high: int) -> int:
    raw = params.get(key)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12:
        raise HTTPError(400, f"{key} must be a whole number from {low} to {high}")
    value = int(raw)
    if not low <= value <= high:
        raise HTTPError(400, f"{key} must be a whole number from {low} to {high}, got {value}")
    return value


def _retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


# --------------------------------------------------------------------------------------------
# OTLP


def _otlp_encoding(request: Request) -> str | None:
    media = media_type(request)
    if media in _PROTOBUF_TYPES:
        return "proto"
    if media == "application/json":
        return "json"
    return None


def _status_response(error: HTTPError, encoding: str | None) -> Response:
    """A failed export, as OTLP/HTTP specifies: a ``google.rpc.Status`` in the request's encoding."""
    code = _RPC_CODES.get(error.status, 2)
    if encoding == "proto":
        from google.protobuf.any_pb2 import Any as AnyMessage
        from google.rpc.error_details_pb2 import BadRequest
        from google.rpc.status_pb2 import Status

        status = Status(code=code, message=error.message)
        if error.status == 400:
            detail = AnyMessage()
            detail.Pack(
                BadRequest(
                    field_violations=[
                        BadRequest.FieldViolation(
                            field=error.field or "body", description=error.message
                        )
                    ]
                )
            )
            status.details.append(detail)
        body = status.SerializeToString()
        content_type = "application/x-protobuf"
    else:
        doc: dict[str, Any] = {"code": code, "message": error.message}
        if error.status == 400:
            doc["details"] = [
                {
                    "@type": _BAD_REQUEST_TYPE,
                    "fieldViolations": [
                        {"field": error.field or "body", "description": error.message}
                    ],
                }
            ]
        body = orjson.dumps(doc)
        content_type = "application/json"
    return response(error.status, body, content_type, error.headers)


def _export_response(encoding: str, rejected: int, message: str) -> Response:
    if encoding == "proto":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTracePartialSuccess,
            ExportTraceServiceResponse,
        )

        answer = ExportTraceServiceResponse()
        if rejected or message:
            answer.partial_success.CopyFrom(
                ExportTracePartialSuccess(rejected_spans=rejected, error_message=message)
            )
        return response(200, answer.SerializeToString(), "application/x-protobuf")
    doc: dict[str, Any] = {}
    if rejected or message:
        # int64 fields are decimal strings in the JSON mapping
        doc["partialSuccess"] = {"rejectedSpans": str(rejected), "errorMessage": message}
    return response(200, orjson.dumps(doc), "application/json")


# --------------------------------------------------------------------------------------------
# the application


class App:
    """The ASGI application: the checks every route shares, the router, authentication, errors."""

    def __init__(
        self,
        config: ServerConfig,
        store: Store,
        pipeline: IngestPipeline,
        tokens: TokenSet,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.pipeline = pipeline
        self.tokens = tokens
        self.limiter = limiter or RateLimiter(config.rate_limit, config.rate_burst)
        self.sign_ins = SignInThrottle(config.sign_in_failures)
        self.draining = False
        self._openapi: bytes | None = None
        self._slots: asyncio.Semaphore | None = None
        self._router = self._build_router()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The ASGI application: the checks every route shares, then the router."""
        from starlette.requests import Request

        # Routed on the path as sent, each parameter decoded once matched (``_params``): an
        # encoded slash stays inside its parameter, where the validators refuse it by name.
        raw = scope.get("raw_path")
        if raw:
            scope = {**scope, "path": raw.decode("latin-1")}
        try:
            self._guard(Request(scope))
        except HTTPError as exc:
            await self.error_response(Request(scope), exc)(scope, receive, send)
            return
        await self._router(scope, receive, send)

    def _guard(self, request: Request) -> None:
        path = request.scope["path"]
        if not self.config.local_ui or path == "/ui" or path.startswith("/ui/"):
            return  # the pages check these themselves, and say so as a page
        if not is_local_host(header(request, "Host")):
            # No token guards `tracely ui`: a page elsewhere must not reach it by DNS rebinding.
            raise HTTPError(400, "this server answers for 127.0.0.1 only")
        if request.method not in ("GET", "HEAD", "OPTIONS") and not is_same_origin(request):
            # No token guards `tracely ui` either against a page of another site that posts
            # to 127.0.0.1 (a form or a fetch needs no DNS trick for that).
            raise HTTPError(403, "a request from another site was refused")

    def _build_router(self) -> Any:
        from starlette.routing import Mount, Router
        from starlette.routing import Route as StarletteRoute

        by_path: dict[str, dict[str, Route]] = {}
        for route in ROUTES + PAGES:
            by_path.setdefault(route.template, {})[route.method] = route
        top: list[Any] = []
        pages: list[Any] = []
        for template, methods in by_path.items():
            endpoint = _Endpoint(self, template, methods)
            if template.startswith("/ui/"):
                pages.append(StarletteRoute(template.removeprefix("/ui"), endpoint))
            else:
                top.append(StarletteRoute(template, endpoint))
        # Trailing slashes are dropped before routing (the same resource), so none redirects.
        under_ui = Router(pages, redirect_slashes=False, default=self._not_found)
        return Router(
            [*top, Mount("/ui", app=under_ui)], redirect_slashes=False, default=self._not_found
        )

    async def _not_found(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.requests import Request

        request = Request(scope)
        error = HTTPError(404, f"no such resource: {raw_path(request)[:200]}")
        await self.error_response(request, error)(scope, receive, send)

    async def _endpoint(
        self, template: str, methods: Mapping[str, Route], request: Request
    ) -> Response:
        """One path: the method, shutdown and the token are checked before the body is read
        (in the event loop: nothing here blocks), then the handler runs in a worker thread."""
        route = methods.get(request.method)
        try:
            if route is None:
                allowed = ", ".join(methods)
                raise HTTPError(
                    405,
                    f"{request.method} is not allowed on {raw_path(request)}; use {allowed}",
                    code="method_not_allowed",
                    headers={"Allow": allowed},
                )
            if route.otlp:
                # OTLP answers in its own terms (a google.rpc.Status), errors included.
                refusal = self.admit_export(request)
                if refusal is not None:
                    return refusal
            else:
                if self.draining and template not in PROBES:
                    raise HTTPError(
                        503, "the server is shutting down", headers=_retry_after(1), close=True
                    )
                if route.scope is not None:
                    self._authorize(request, route.scope)
            if has_body(request.scope):
                await read_body(request)
            if template in PROBES:
                # The probes answer from memory: no request slot, so that busy handlers never
                # make a healthy server look dead.
                return await self._run(route, request)
            slots = self._request_slots()
            try:
                await asyncio.wait_for(slots.acquire(), _SLOT_WAIT)
            except asyncio.TimeoutError:
                raise HTTPError(
                    503,
                    "the server is handling as many requests as it may; retry later",
                    headers={"Retry-After": "1"},
                ) from None
            try:
                return await self._run(route, request)
            finally:
                slots.release()
        except HTTPError as exc:
            return self.error_response(request, exc)

    def _request_slots(self) -> asyncio.Semaphore:
        if self._slots is None:
            import anyio.to_thread

            self._slots = asyncio.Semaphore(self.config.max_concurrent_requests)
            threads = anyio.to_thread.current_default_thread_limiter()
            wanted = self.config.max_concurrent_requests + len(PROBES)
            threads.total_tokens = max(threads.total_tokens, wanted)
        return self._slots

    async def _run(self, route: Route, request: Request) -> Response:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self._handle, route, request)

    def _handle(self, route: Route, request: Request) -> Response:
        try:
            return route.handler(self, request, _params(request))
        except HTTPError as exc:
            return self.error_response(request, exc)
        except Exception:  # the last line of defence: answer, log, keep serving
            logger.exception("unhandled error answering %s %s", request.method, route.template)
            internal = HTTPError(500, "internal server error", close=True)
            return response(500, error_body(500, internal.message), headers=internal.headers)

    def error_response(self, request: Request, error: HTTPError) -> Response:
        """An error as the route answers errors: OTLP's Status on /v1/traces, else JSON."""
        if request.scope["path"] == "/v1/traces" and request.method == "POST":
            return _status_response(error, _otlp_encoding(request))
        return response(
            error.status,
            error_body(error.status, error.message, error.code, error.detail),
            headers=error.headers,
        )

    def _authorize(self, request: Request, scope: str) -> None:
        client = client_of(request)
        principal = self.tokens.authenticate(header(request, "Authorization"), client)
        if principal is None:
            # Failed attempts are rate-limited per client, so tokens cannot be guessed quickly.
            wait = self.limiter.acquire(f"client:{client}")
            if wait:
                raise HTTPError(429, "too many requests", headers=_retry_after(wait))
            has_header = bool(header(request, "Authorization"))
            raise HTTPError(
                401,
                "the bearer token is not valid"
                if has_header
                else "a bearer token is required (Authorization: Bearer <token>)",
                headers={"WWW-Authenticate": 'Bearer realm="tracely"'},
            )
        wait = self.limiter.acquire(principal.key)
        if wait:
            raise HTTPError(
                429,
                f"too many requests for this token (the limit is {self.config.rate_limit:g} a second)",
                headers=_retry_after(wait),
            )
        if not principal.may(scope):
            needs = {INGEST: "ingest", READ: "read (or write)", WRITE: "write"}[scope]
            raise HTTPError(403, f"this token may not do that: it needs the {needs} scope")

    # store errors -----------------------------------------------------------------------

    def _clean(self, message: str) -> str:
        """A store message without the store's URL (a file path or a database address)."""
        for url in {self.store.url, redact_url(self.store.url)}:
            if url:
                message = message.replace(f" in {url}", "").replace(url, "the store")
        return message

    def _call(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except NotFound as exc:
            raise HTTPError(404, self._clean(str(exc)), code="not_found") from None
        except Conflict as exc:
            raise HTTPError(409, self._clean(str(exc)), code="conflict") from None
        except InvalidCase as exc:
            raise HTTPError(400, self._clean(str(exc)), code="invalid") from None
        except StoreError as exc:
            logger.warning("store error: %s", exc)
            raise HTTPError(
                503, "the store is unavailable; try again", headers=_retry_after(1)
            ) from None
        except (ValueError, TypeError) as exc:
            raise HTTPError(400, self._clean(str(exc)), code="invalid") from None

    # bodies -----------------------------------------------------------------------------

    def _body(self, request: Request) -> tuple[bytes, bytes]:
        """The body as received and decompressed (413 past the limit, either way)."""
        limit = self.config.max_body_bytes
        encoding = header(request, "Content-Encoding").lower()
        if encoding not in ("", "identity", "gzip"):
            raise HTTPError(
                415,
                f"Content-Encoding {encoding[:40]!r} is not supported; send gzip or no encoding",
            )
        body = body_of(request)
        if encoding != "gzip":
            return body, body
        try:
            return body, gunzip_bounded(body, limit)
        except PayloadTooLarge:
            raise HTTPError(
                413,
                f"the body decompresses to more than {limit} bytes",
                detail={"limit": limit},
            ) from None
        except OTLPDecodeError as exc:
            raise HTTPError(400, exc.problem, field="body") from None

    def json_body(self, request: Request) -> Any:
        media = media_type(request)
        if media != "application/json":
            raise HTTPError(
                415,
                f"the body must be application/json, not {media or 'untyped'}",
                code="unsupported_media_type",
            )
        _, data = self._body(request)
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise HTTPError(400, f"the body is not valid JSON: {exc}") from None
        _check_depth(value)
        return value

    # OTLP ---------------------------------------------------------------------------------

    def admit_export(self, request: Request) -> Response | None:
        """``POST /v1/traces`` before its body is read: a refusal, or None to go on."""
        encoding = _otlp_encoding(request)
        try:
            if self.draining or self.pipeline.closing:
                raise HTTPError(
                    503, "the server is shutting down", headers=_retry_after(1), close=True
                )
            self._authorize(request, INGEST)
            if encoding is None:
                raise HTTPError(
                    415,
                    f"OTLP/HTTP bodies are application/x-protobuf or application/json, not "
                    f"{media_type(request) or 'untyped'}",
                )
        except HTTPError as exc:
            return _status_response(exc, encoding)
        return None

    def export(self, request: Request) -> Response:
        """``POST /v1/traces``: an OTLP/HTTP export request, admitted and with its body."""
        encoding = _otlp_encoding(request) or "json"
        try:
            return self._ingest(request, encoding)
        except HTTPError as exc:
            return _status_response(exc, encoding)

    def _ingest(self, request: Request, encoding: str) -> Response:
        raw, data = self._body(request)
        compressed = header(request, "Content-Encoding").lower() == "gzip"
        try:
            records, rejected, errors = decode_export_request(data, encoding)
        except OTLPDecodeError as exc:
            raise HTTPError(400, str(exc), field=exc.path or "body") from None
        if rejected and not records:
            raise HTTPError(400, rejected_message(errors, rejected), field="resourceSpans")
        if encoding == "proto":
            kind = KIND_PROTO_GZIP if compressed else KIND_PROTO
        else:
            kind = KIND_JSON_GZIP if compressed else KIND_JSON
        try:
            receipt = self.pipeline.submit(
                records,
                body=None if rejected else (raw if compressed else data),
                kind=kind,
                size=len(data),
            )
        except Backpressure as exc:
            raise HTTPError(
                429, f"{exc.reason}; retry later", headers=_retry_after(exc.retry_after)
            ) from None
        except Unavailable as exc:
            raise HTTPError(
                503, f"{exc.reason}; retry later", headers=_retry_after(exc.retry_after)
            ) from None
        if receipt.rejected:
            errors.append(receipt.message)
        total = rejected + receipt.rejected
        return _export_response(encoding, total, rejected_message(errors, total) if total else "")

    # plain routes -------------------------------------------------------------------------

    def openapi(self) -> bytes:
        if self._openapi is None:
            from tracely_sdk.server._openapi import openapi_document

            self._openapi = orjson.dumps(openapi_document())
        return self._openapi


# --------------------------------------------------------------------------------------------
# handlers


def _healthz(app: App, request: Request, params: dict[str, str]) -> Response:
    """Liveness: serving, and not stuck on a store that refuses every write."""
    _query(request, frozenset())
    if app.draining:
        return json_response(503, {"status": "draining"}, _retry_after(1))
    error = app.pipeline.store_error
    if error is not None:
        return json_response(
            503, {"status": "failing", "problems": [f"the store cannot be written: {error}"]}
        )
    return json_response(200, {"status": "ok"})


def _readyz(app: App, request: Request, params: dict[str, str]) -> Response:
    """Readiness: the store takes writes and the journal and memory have room for spans."""
    _query(request, frozenset())
    if app.draining:
        return json_response(503, {"status": "draining"}, _retry_after(1))
    problems = app.pipeline.problems()
    if problems:
        return json_response(503, {"status": "unavailable", "problems": problems}, _retry_after(5))
    return json_response(200, {"status": "ready"})


def _openapi(app: App, request: Request, params: dict[str, str]) -> Response:
    return response(200, app.openapi())


def _summary(recording: Recording) -> dict[str, Any]:
    data = recording.to_dict()
    del data["bundle"]
    return data


def _list_traces(app: App, request: Request, params: dict[str, str]) -> Response:
    q = _query(request, frozenset({"limit", "offset", "service", "agent"}))
    limit = _int_param(q, "limit", 50, 1, MAX_PAGE)
    offset = _int_param(q, "offset", 0, 0, 10**9)
    service = q.get("service") or None
    agent = q.get("agent") or None
    recordings = app._call(
        lambda: app.store.list_recordings(limit=limit, offset=offset, service=service, agent=agent)
    )
    return json_response(200, {"traces": [_summary(r) for r in recordings]})


def _get_trace(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    trace_id = _trace_id(params["trace_id"])
    recording = app._call(lambda: app.store.get_recording(trace_id))
    return json_response(200, recording.to_dict())


def _put_recording(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    body = _fields(
        app.json_body(request),
        "the recording",
        _RECORDING_FIELDS,
        frozenset({"trace_id", "service", "started_at", "status", "bundle"}),
    )
    body["trace_id"] = _trace_id(body["trace_id"])
    _types(
        body,
        "the recording",
        integers=("started_at", "received_at"),
        strings=("service", "status", "agent_name", "replay_mode"),
        optional=frozenset({"received_at", "agent_name", "replay_mode"}),
    )
    try:
        validate_bundle(body["bundle"])
    except BundleFormatError as exc:
        raise HTTPError(400, f"the recording's bundle: {exc}", code="invalid") from None
    if body.get("received_at") is None:
        body["received_at"] = now_ns()
    recording = app._call(lambda: Recording.from_dict(body))
    stored = app._call(lambda: app.store.put_recording(recording))
    return json_response(201, {"stored": bool(stored)})


def _promote(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    body = _fields(
        app.json_body(request),
        "the promotion",
        frozenset({"trace_id", "name", "id", "entrypoint", "tags"}),
        frozenset({"trace_id", "name"}),
    )
    trace_id = _trace_id(body["trace_id"])
    name = _string(body, "name")
    case_id = _string(body, "id", optional=True)
    if case_id is not None:
        _case_id(case_id)
    entrypoint = _string(body, "entrypoint", optional=True)
    tags = _tags(body["tags"]) if body.get("tags") is not None else []
    case = app._call(
        lambda: app.store.promote(
            trace_id, case_id=case_id, name=name or "", entrypoint=entrypoint, tags=tags
        )
    )
    return json_response(201, case.to_dict(), {"Location": f"/api/cases/{case.id}"})


_PROMOTION_FIELDS = frozenset({"trace_id", "name", "id", "entrypoint", "tags", "stated"})


def _promote_many(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    body = _fields(
        app.json_body(request),
        "the promotions",
        frozenset({"promotions"}),
        frozenset({"promotions"}),
    )
    if not isinstance(body["promotions"], list) or not body["promotions"]:
        raise HTTPError(
            400, "promotions must be a non-empty list of promotions", field="promotions"
        )
    promotions = []
    for i, item in enumerate(body["promotions"]):
        what = f"promotions[{i}]"
        item = _fields(item, what, _PROMOTION_FIELDS, frozenset({"trace_id", "name"}))
        case_id = _string(item, "id", optional=True)
        if case_id is not None:
            _case_id(case_id)
        stated = None
        if item.get("stated") is not None:
            given = _fields(
                item["stated"],
                f"{what}.stated",
                frozenset({"input", "expected_output"}),
                frozenset({"input", "expected_output"}),
            )
            stated = StatedRun(given["input"], given["expected_output"])
        promotions.append(
            Promotion(
                trace_id=_trace_id(item["trace_id"]),
                name=_string(item, "name") or "",
                case_id=case_id,
                entrypoint=_string(item, "entrypoint", optional=True),
                tags=tuple(_tags(item["tags"]) if item.get("tags") is not None else ()),
                stated=stated,
            )
        )
    cases = app._call(lambda: app.store.promote_many(promotions))
    return json_response(201, {"cases": [c.to_dict() for c in cases]})


def _list_cases(app: App, request: Request, params: dict[str, str]) -> Response:
    q = _query(request, frozenset({"tag"}))
    tag = q.get("tag") or None
    if tag is not None:
        _tags([tag])
    cases = app._call(lambda: app.store.list_cases(tag=tag))
    return json_response(200, {"cases": [c.to_dict() for c in cases]})


def _get_case(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    case_id = _case_id(params["case_id"])
    return json_response(200, app._call(lambda: app.store.get_case(case_id)).to_dict())


def _versions(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    case_id = _case_id(params["case_id"])
    history = app._call(lambda: app.store.case_history(case_id))
    return json_response(200, {"versions": [v.to_dict() for v in history]})


def _recapture(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    case_id = _case_id(params["case_id"])
    body = _fields(
        app.json_body(request),
        "the recapture",
        frozenset({"trace_id", "note"}),
        frozenset({"trace_id"}),
    )
    trace_id = _trace_id(body["trace_id"])
    note = _string(body, "note", optional=True)
    try:
        case = app._call(lambda: app.store.recapture(case_id, trace_id, note=note))
    except HTTPError as exc:
        if exc.status == 409:
            exc.detail = _input_difference(app, case_id, trace_id)
        raise
    return json_response(200, case.to_dict())


def _input_difference(app: App, case_id: str, trace_id: str) -> dict[str, Any] | None:
    """Both inputs, when a recapture was refused because they differ."""
    try:
        case = app.store.get_case(case_id)
        recording = app.store.get_recording(trace_id)
    except StoreError:
        return None
    from tracely_sdk._canonical import canonical_equal

    if recording.input is None or canonical_equal(case.input, recording.input):
        return None
    return {"case_input": case.input, "trace_input": recording.input}


def _update_case(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    case_id = _case_id(params["case_id"])
    body = _fields(app.json_body(request), "the update", frozenset({"name", "tags", "entrypoint"}))
    name = _string(body, "name", optional=True)
    entrypoint = _string(body, "entrypoint", optional=True)
    tags = _tags(body["tags"]) if body.get("tags") is not None else None
    case = app._call(
        lambda: app.store.update_case(case_id, name=name, tags=tags, entrypoint=entrypoint)
    )
    return json_response(200, case.to_dict())


def _put_case(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    case_id = _case_id(params["case_id"])
    body = _fields(
        app.json_body(request),
        "the case import",
        frozenset({"case", "history"}),
        frozenset({"case", "history"}),
    )
    fields = _fields(body["case"], "case", _CASE_FIELDS, _CASE_FIELDS - {"entrypoint"})
    _types(
        fields,
        "case",
        integers=("version", "created_at", "updated_at"),
        strings=("id", "name", "entrypoint", "source_trace_id"),
        optional=frozenset({"entrypoint", "source_trace_id"}),
    )
    if fields["id"] != case_id:
        raise HTTPError(
            400,
            f"the case's id {fields['id']!r} is not the id in the path ({case_id!r})",
            code="invalid",
        )
    if not isinstance(body["history"], list) or not body["history"]:
        raise HTTPError(400, "history must be a non-empty list of versions", code="invalid")
    case = app._call(lambda: Case(**{**fields, "tags": tuple(_tags(fields["tags"]))}))
    history: list[CaseVersion] = []
    for i, version in enumerate(body["history"]):
        checked = _fields(
            version,
            f"history[{i}]",
            _VERSION_FIELDS,
            _VERSION_FIELDS - {"note", "expected_output", "source_trace_id"},
        )
        _types(
            checked,
            f"history[{i}]",
            integers=("version", "created_at"),
            strings=("note", "source_trace_id"),
            optional=frozenset({"note", "source_trace_id"}),
        )
        history.append(app._call(functools.partial(CaseVersion, case_id=case_id, **checked)))
    stored = app._call(lambda: app.store.put_case(case, history))
    return json_response(200, stored.to_dict())


def _delete_case(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    case_id = _case_id(params["case_id"])
    app._call(lambda: app.store.delete_case(case_id))
    return response(204, b"", None)


def _run_id(value: str) -> str:
    if not RUN_ID_RE.fullmatch(value):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise HTTPError(
            400, f"invalid run id {shown!r}: expected 16 hexadecimal characters", code="invalid"
        )
    return value


_SUMMARY_COUNTS = ("total", "passed", "failed", "incomplete", "errored", "lenient", "not_run")


def _check_run_fields(body: dict[str, Any]) -> None:
    """ValueError naming the field of a posted run whose type the run's readers cannot use:
    a run is kept as sent, and its pages and ``tracely runs show`` read these fields."""
    summary = body.get("summary")
    if isinstance(summary, dict):
        for key in _SUMMARY_COUNTS:
            value = summary.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"summary.{key} must be an integer, got {value!r:.40}")
    cases = body.get("cases")
    if cases is not None and not isinstance(cases, list):
        raise ValueError("cases must be a list of objects, each with a case_id")
    for n, case in enumerate(cases or ()):
        check_case_result(case, f"cases[{n}]")


def _save_run(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    body = app.json_body(request)
    _fields(body, "the run", RUN_FIELDS, RUN_FIELDS - {"source", "otlp_endpoint", "cases"})
    _run_id(body["id"] if isinstance(body["id"], str) else "")
    try:
        _check_run_fields(body)
        run = Run.from_dict(body)
    except (ValueError, TypeError) as exc:
        raise HTTPError(400, f"the run: {exc}", code="invalid") from None
    app._call(lambda: app.store.save_run(run))
    return json_response(201, {"id": run.id}, {"Location": f"/api/runs/{run.id}"})


def _list_runs(app: App, request: Request, params: dict[str, str]) -> Response:
    q = _query(request, frozenset({"limit", "offset", "trace_id"}))
    limit = _int_param(q, "limit", 20, 1, MAX_PAGE)
    offset = _int_param(q, "offset", 0, 0, 10**9)
    trace_id = _trace_id(q["trace_id"]) if q.get("trace_id") else None
    runs = app._call(lambda: app.store.list_runs(limit=limit, offset=offset, trace_id=trace_id))
    return json_response(200, {"runs": [r.summary_dict() for r in runs]})


def _get_run(app: App, request: Request, params: dict[str, str]) -> Response:
    _query(request, frozenset())
    run_id = _run_id(params["run_id"])
    return json_response(200, app._call(lambda: app.store.get_run(run_id)).to_dict())


def _export(app: App, request: Request, params: dict[str, str]) -> Response:
    return app.export(request)


ROUTES: Final[tuple[Route, ...]] = (
    Route("GET", "/healthz", None, _healthz),
    Route("GET", "/readyz", None, _readyz),
    Route("GET", "/openapi.json", None, _openapi),
    Route("POST", "/v1/traces", INGEST, _export, otlp=True),
    Route("GET", "/api/traces", READ, _list_traces),
    Route("GET", "/api/traces/{trace_id}", READ, _get_trace),
    Route("POST", "/api/recordings", WRITE, _put_recording),
    Route("GET", "/api/cases", READ, _list_cases),
    Route("POST", "/api/cases", WRITE, _promote),
    Route("POST", "/api/promotions", WRITE, _promote_many),
    Route("GET", "/api/cases/{case_id}", READ, _get_case),
    Route("PATCH", "/api/cases/{case_id}", WRITE, _update_case),
    Route("PUT", "/api/cases/{case_id}", WRITE, _put_case),
    Route("DELETE", "/api/cases/{case_id}", WRITE, _delete_case),
    Route("GET", "/api/cases/{case_id}/versions", READ, _versions),
    Route("POST", "/api/cases/{case_id}/recapture", WRITE, _recapture),
    Route("GET", "/api/runs", READ, _list_runs),
    Route("POST", "/api/runs", WRITE, _save_run),
    Route("GET", "/api/runs/{run_id}", READ, _get_run),
)

# The pages under /ui: each signs its visitor in itself (a cookie, not a bearer token).
PAGES: Final[tuple[Route, ...]] = tuple(Route(m, t, None, h) for m, t, h in UI_ROUTES)


# --------------------------------------------------------------------------------------------
# the server


class TracelyServer:
    """A running tracely server: ``start()`` serves in the background, ``serve_forever()`` in
    the calling thread, ``shutdown()`` drains (idempotent). Use :func:`create_server`."""

    def __init__(
        self,
        config: ServerConfig,
        store: Store,
        pipeline: IngestPipeline,
        app: App,
        httpd: HTTPServer,
        *,
        owns_store: bool,
        grpc: GRPCReceiver | None = None,
    ) -> None:
        self.config = config
        self.grpc = grpc
        self.store = store
        self.pipeline = pipeline
        self.app = app
        self._httpd = httpd
        self._owns_store = owns_store
        self._thread: threading.Thread | None = None
        self._serving = threading.Event()
        self._lock = threading.Lock()
        self._shut = False
        host, port = httpd.server_address[:2]
        self.host = str(host)
        self.port = int(port)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def serve_forever(self) -> None:
        self._serving.set()
        self._httpd.serve_forever()

    def start(self) -> TracelyServer:
        """Serve in a background thread; returns self."""
        self._thread = threading.Thread(target=self.serve_forever, name="tracely-http", daemon=True)
        self._thread.start()
        self._httpd.wait_started(10)
        if self.grpc is not None:
            self.grpc.start()
        return self

    def shutdown(self) -> None:
        """Stop accepting, finish in-flight requests, assemble and write what is held, close."""
        with self._lock:
            if self._shut:
                return
            self._shut = True
        timeout = self.config.shutdown_timeout
        self.app.draining = True
        if self._serving.is_set() and not self._httpd.shutdown(timeout):
            logger.warning("requests still running after %.0fs; shutting down anyway", timeout)
        self._httpd.server_close()
        if self.grpc is not None:
            self.grpc.stop(timeout)
        self.pipeline.shutdown(timeout)
        if self._owns_store:
            try:
                self.store.close()
            except StoreError as exc:
                logger.warning("closing the store: %s", exc)
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> TracelyServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class _Endpoint:
    """The ASGI endpoint of one path (every method reaches it: a wrong one is answered 405 in
    the API's terms, with every method the path allows)."""

    def __init__(self, app: App, template: str, methods: Mapping[str, Route]) -> None:
        self.app = app
        self.template = template
        self.methods = methods

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.requests import Request

        request = Request(scope, receive)
        answer = await self.app._endpoint(self.template, self.methods, request)
        await answer(scope, receive, send)


def _params(request: Request) -> dict[str, str]:
    """The path's parameters, percent-decoded (the path was routed as sent)."""
    import urllib.parse

    return {
        name: urllib.parse.unquote(str(value), errors="strict")
        for name, value in request.path_params.items()
    }


def _grpc_receiver(
    config: ServerConfig, pipeline: IngestPipeline, tokens: TokenSet, limiter: RateLimiter
) -> GRPCReceiver | None:
    """The OTLP/gRPC receiver, bound, when a port is configured (the HTTP side's limits and
    its rate-limit buckets: one budget per token and client, whichever port it uses)."""
    if config.grpc_port is None:
        return None
    from tracely_sdk.server._grpc import GRPCReceiver

    return GRPCReceiver(
        pipeline,
        tokens,
        limiter,
        host=config.host,
        port=config.grpc_port,
        max_message_bytes=config.max_body_bytes,
        max_workers=config.max_concurrent_requests,
        rate_limit=config.rate_limit,
        message_timeout=config.body_timeout,
        max_connections=config.grpc_max_connections,
        idle_timeout=config.grpc_idle_timeout,
        max_streams=config.grpc_max_streams,
        handshake_timeout=config.header_timeout,
    )


def create_server(
    config: ServerConfig | None = None, *, store: Store | None = None
) -> TracelyServer:
    """Build a server from ``config`` (default: :meth:`ServerConfig.load` from the environment):
    check the tokens, open the store, bind the port, recover the ingest journal.

    Raises :class:`~tracely_sdk.errors.ConfigError` with one line a person can act on when a
    setting is unusable, the store cannot be opened or the address cannot be bound.
    """
    config = config or ServerConfig.load()
    tokens = load_tokens(
        config.tokens,
        config.tokens_file,
        insecure=config.insecure_no_auth,
        warn=not config.local_ui,
    )
    owns_store = store is None
    if store is None:
        from tracely_sdk._config import resolve

        try:
            store = open_store(config.store or resolve("store", None))
        except StoreError as exc:
            raise ConfigError(f"cannot open the store: {exc}") from exc
    if str(getattr(store, "url", "")).lower().startswith(("http://", "https://")):
        if owns_store:
            store.close()
        raise ConfigError(
            f"the store {redact_url(store.url)} is a tracely server: the server keeps its data "
            "in SQLite or PostgreSQL, not in another tracely server; pass --store or set "
            "TRACELY_SERVER_STORE"
        )
    httpd: HTTPServer | None = None
    grpc: GRPCReceiver | None = None
    try:
        try:
            httpd = HTTPServer(
                (config.host, config.port),
                None,  # the application, once built: the port is bound first, its errors first
                Limits(
                    max_body_bytes=config.max_body_bytes,
                    max_connections=config.max_connections,
                    head_timeout=config.header_timeout,
                    body_timeout=config.body_timeout,
                    keep_alive_timeout=config.keep_alive_timeout,
                ),
                trusted_proxies=config.trusted_proxies,
            )
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ConfigError(f"cannot listen on {config.host}:{config.port}: {reason}") from exc
        journal_dir = config.journal_path(store)
        if journal_dir is None:
            logger.warning(
                "the store is in memory: spans are not journaled, and a restart loses everything"
            )
        journal = Journal(journal_dir) if journal_dir is not None else None
        pipeline = IngestPipeline(
            store,
            journal=journal,
            quiet_seconds=config.quiet_seconds,
            orphan_seconds=config.orphan_seconds,
            retain_seconds=config.retain_seconds,
            max_spans=config.max_spans,
            max_traces=config.max_traces,
            max_spans_per_trace=config.max_spans_per_trace,
            max_held_bytes=config.max_held_bytes,
            max_journal_bytes=config.max_journal_bytes,
            write_queue_size=config.write_queue_size,
            write_batch_size=config.write_batch_size,
        )
        limiter = RateLimiter(config.rate_limit, config.rate_burst)
        grpc = _grpc_receiver(config, pipeline, tokens, limiter)
        try:
            pipeline.start()
        except JournalError as exc:
            raise ConfigError(f"the ingest journal cannot be used: {exc}") from exc
        app = App(config, store, pipeline, tokens, limiter)
        httpd.app = app
        return TracelyServer(config, store, pipeline, app, httpd, owns_store=owns_store, grpc=grpc)
    except BaseException:
        if grpc is not None:
            grpc.stop(0)
        if httpd is not None:
            httpd.server_close()
        if owns_store:
            store.close()
        raise
