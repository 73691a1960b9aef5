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
import threading
from collections.abc import Callable, Mapping
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
from tracely_sdk.server import _models as m
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
from tracely_sdk.server._models import parse, path_parameter
from tracely_sdk.server._openapi import READ_ERRORS, WRITE_ERRORS, Operation
from tracely_sdk.server._ui import UI_ROUTES, is_local_host, is_same_origin
from tracely_sdk.store import InvalidCase, Recording, Store, open_store, redact_url
from tracely_sdk.store._model import now_ns

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from tracely_sdk.server._grpc import GRPCReceiver

__all__ = ["ROUTES", "App", "Route", "TracelyServer", "create_server"]

logger = logging.getLogger("tracely.server")

MAX_JSON_DEPTH: Final = 128
# How long a request whose body has arrived may wait for a slot before it is answered 503.
_SLOT_WAIT: Final = 5.0
_PROTOBUF_TYPES: Final = frozenset({"application/x-protobuf", "application/protobuf"})
_RPC_CODES: Final = {400: 3, 401: 16, 403: 7, 404: 5, 413: 3, 415: 3, 429: 8, 500: 13, 503: 14}
_BAD_REQUEST_TYPE: Final = "type.googleapis.com/google.rpc.BadRequest"


# --------------------------------------------------------------------------------------------
# routes


@dataclass(frozen=True)
class Route:
    """One operation: ``template`` segments in braces are parameters (``{case_id}``), each
    checked by its rule (:data:`~tracely_sdk.server._models.PATH_PARAMETERS`); the query and
    the JSON body are validated as the ``query`` and ``body`` models (without a query model no
    parameter is accepted). The handler gets them checked, ``handler(app, params, query,
    body)``; a ``raw`` one reads the request itself, ``handler(app, request, params)``."""

    method: str
    template: str
    scope: str | None  # None: no token needed
    handler: Callable[..., Response]
    doc: Operation | None = None
    query: type[m.Shape] | None = None
    body: type[m.Shape] | None = None
    raw: bool = False
    otlp: bool = False


# --------------------------------------------------------------------------------------------
# validation at the edge (the shapes are the models')


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


def _query(request: Request, model: type[m.Shape] | None) -> Any:
    """The query as ``model`` (an empty value is no value); with no model, none is accepted."""
    query = request.query_params
    if model is None and query:
        unknown = sorted(set(query))
        raise HTTPError(
            400,
            f"unknown query parameter(s) {', '.join(map(repr, unknown))}; accepted: none",
            detail={"unknown_fields": unknown},
        )
    given: dict[str, str] = {}
    for key in query:
        values = query.getlist(key)
        if len(values) != 1:
            raise HTTPError(400, f"query parameter {key!r} is given {len(values)} times")
        if values[0]:
            given[key] = values[0]
    return parse(model, given) if model is not None else None


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
            if route.raw:
                return route.handler(self, request, _params(request))
            query = _query(request, route.query)
            params = {k: path_parameter(k, v) for k, v in _params(request).items()}
            body = parse(route.body, self.json_body(request)) if route.body else None
            return route.handler(self, params, query, body)
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


def _healthz(app: App, params: dict[str, str], query: None, body: None) -> Response:
    """Liveness: serving, and not stuck on a store that refuses every write."""
    if app.draining:
        return json_response(503, {"status": "draining"}, _retry_after(1))
    error = app.pipeline.store_error
    if error is not None:
        return json_response(
            503, {"status": "failing", "problems": [f"the store cannot be written: {error}"]}
        )
    return json_response(200, {"status": "ok"})


def _readyz(app: App, params: dict[str, str], query: None, body: None) -> Response:
    """Readiness: the store takes writes and the journal and memory have room for spans."""
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


def _list_traces(app: App, params: dict[str, str], q: m.TraceQuery, body: None) -> Response:
    recordings = app._call(
        lambda: app.store.list_recordings(
            limit=q.limit, offset=q.offset, service=q.service, agent=q.agent
        )
    )
    return json_response(200, {"traces": [_summary(r) for r in recordings]})


def _get_trace(app: App, params: dict[str, str], query: None, body: None) -> Response:
    recording = app._call(lambda: app.store.get_recording(params["trace_id"]))
    return json_response(200, recording.to_dict())


def _put_recording(app: App, params: dict[str, str], query: None, body: m.Recording) -> Response:
    try:
        validate_bundle(body.bundle)
    except BundleFormatError as exc:
        raise HTTPError(400, f"the recording's bundle: {exc}", code="invalid") from None
    recording = app._call(lambda: body.to_store(received_at=now_ns()))
    stored = app._call(lambda: app.store.put_recording(recording))
    return json_response(201, {"stored": bool(stored)})


def _promote(app: App, params: dict[str, str], query: None, body: m.Promote) -> Response:
    case = app._call(
        lambda: app.store.promote(
            body.trace_id,
            case_id=body.id,
            name=body.name,
            entrypoint=body.entrypoint,
            tags=body.tags or [],
        )
    )
    return json_response(201, case.to_dict(), {"Location": f"/api/cases/{case.id}"})


def _promote_many(app: App, params: dict[str, str], query: None, body: m.Promotions) -> Response:
    promotions = [p.to_store() for p in body.promotions]
    cases = app._call(lambda: app.store.promote_many(promotions))
    return json_response(201, {"cases": [c.to_dict() for c in cases]})


def _list_cases(app: App, params: dict[str, str], q: m.CaseQuery, body: None) -> Response:
    cases = app._call(lambda: app.store.list_cases(tag=q.tag))
    return json_response(200, {"cases": [c.to_dict() for c in cases]})


def _get_case(app: App, params: dict[str, str], query: None, body: None) -> Response:
    return json_response(200, app._call(lambda: app.store.get_case(params["case_id"])).to_dict())


def _versions(app: App, params: dict[str, str], query: None, body: None) -> Response:
    history = app._call(lambda: app.store.case_history(params["case_id"]))
    return json_response(200, {"versions": [v.to_dict() for v in history]})


def _recapture(app: App, params: dict[str, str], query: None, body: m.Recapture) -> Response:
    case_id = params["case_id"]
    try:
        case = app._call(lambda: app.store.recapture(case_id, body.trace_id, note=body.note))
    except HTTPError as exc:
        if exc.status == 409:
            exc.detail = _input_difference(app, case_id, body.trace_id)
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


def _update_case(app: App, params: dict[str, str], query: None, body: m.UpdateCase) -> Response:
    case = app._call(
        lambda: app.store.update_case(
            params["case_id"], name=body.name, tags=body.tags, entrypoint=body.entrypoint
        )
    )
    return json_response(200, case.to_dict())


def _put_case(app: App, params: dict[str, str], query: None, body: m.PutCase) -> Response:
    case_id = params["case_id"]
    if body.case.id != case_id:
        raise HTTPError(
            400,
            f"the case's id {body.case.id!r} is not the id in the path ({case_id!r})",
            code="invalid",
        )
    case = app._call(body.case.to_store)
    history = [app._call(functools.partial(v.to_store, case_id)) for v in body.history]
    stored = app._call(lambda: app.store.put_case(case, history))
    return json_response(200, stored.to_dict())


def _delete_case(app: App, params: dict[str, str], query: None, body: None) -> Response:
    app._call(lambda: app.store.delete_case(params["case_id"]))
    return response(204, b"", None)


def _save_run(app: App, params: dict[str, str], query: None, body: m.Run) -> Response:
    run = app._call(body.to_store)
    app._call(lambda: app.store.save_run(run))
    return json_response(201, {"id": run.id}, {"Location": f"/api/runs/{run.id}"})


def _list_runs(app: App, params: dict[str, str], q: m.RunQuery, body: None) -> Response:
    runs = app._call(
        lambda: app.store.list_runs(limit=q.limit, offset=q.offset, trace_id=q.trace_id)
    )
    return json_response(200, {"runs": [r.summary_dict() for r in runs]})


def _get_run(app: App, params: dict[str, str], query: None, body: None) -> Response:
    return json_response(200, app._call(lambda: app.store.get_run(params["run_id"])).to_dict())


def _export(app: App, request: Request, params: dict[str, str]) -> Response:
    return app.export(request)


_CASE_OK = (m.Case, "The case.")
_WRITE_CONFLICT = (*WRITE_ERRORS, 409)

ROUTES: Final[tuple[Route, ...]] = (
    Route(
        "GET",
        "/healthz",
        None,
        _healthz,
        Operation(
            "health",
            "Liveness",
            {
                200: (m.Health, "Serving."),
                503: (
                    (m.Health, m.Error),
                    "Shutting down, or the store refuses every write (Health), or every "
                    "connection slot is taken (Error).",
                ),
            },
        ),
    ),
    Route(
        "GET",
        "/readyz",
        None,
        _readyz,
        Operation(
            "ready",
            "Readiness: the store takes writes and the journal has room",
            {
                200: (m.Health, "Ready for spans."),
                503: (
                    (m.Health, m.Error),
                    "Not ready: the problems name the store or journal concerned.",
                ),
            },
        ),
    ),
    Route(
        "GET",
        "/openapi.json",
        None,
        _openapi,
        Operation("openapi", "This document", {200: (dict, "The OpenAPI document.")}),
        raw=True,
    ),
    Route("POST", "/v1/traces", INGEST, _export, raw=True, otlp=True),
    Route(
        "GET",
        "/api/traces",
        READ,
        _list_traces,
        Operation(
            "listTraces",
            "Recordings, newest first (without their bundles)",
            {200: (m.TraceList, "Recordings.")},
            READ_ERRORS,
        ),
        query=m.TraceQuery,
    ),
    Route(
        "GET",
        "/api/traces/{trace_id}",
        READ,
        _get_trace,
        Operation(
            "getTrace",
            "One recording, with its bundle",
            {200: (m.Recording, "The recording.")},
            READ_ERRORS,
        ),
    ),
    Route(
        "POST",
        "/api/recordings",
        WRITE,
        _put_recording,
        Operation(
            "putRecording",
            "Store a recording (what an SDK's store writer sends)",
            {201: (m.Stored, "Stored, or ignored when not more complete.")},
            WRITE_ERRORS,
        ),
        body=m.Recording,
    ),
    Route(
        "GET",
        "/api/cases",
        READ,
        _list_cases,
        Operation(
            "listCases",
            "Every case (with its bundle: CI replays from this)",
            {200: (m.CaseList, "Cases, by id.")},
            READ_ERRORS,
        ),
        query=m.CaseQuery,
    ),
    Route(
        "POST",
        "/api/cases",
        WRITE,
        _promote,
        Operation(
            "promote",
            "Promote a recorded trace to a regression case (version 1)",
            {201: (m.Case, "The new case.")},
            _WRITE_CONFLICT,
        ),
        body=m.Promote,
    ),
    Route(
        "POST",
        "/api/promotions",
        WRITE,
        _promote_many,
        Operation(
            "promoteMany",
            "Promote several recorded traces to regression cases, in one transaction",
            {201: (m.CaseList, "The new cases, in the order asked.")},
            _WRITE_CONFLICT,
            "All of them or none: one refused (404 for a trace not recorded, 409 for one "
            "that cannot be a case, 400 for an invalid field) leaves no case made, and the "
            "error names it. Ids made from a name are unique across the batch.",
        ),
        body=m.Promotions,
    ),
    Route(
        "GET",
        "/api/cases/{case_id}",
        READ,
        _get_case,
        Operation("getCase", "One case", {200: _CASE_OK}, READ_ERRORS),
    ),
    Route(
        "PATCH",
        "/api/cases/{case_id}",
        WRITE,
        _update_case,
        Operation(
            "updateCase", "Change a case's name, tags or entrypoint", {200: _CASE_OK}, WRITE_ERRORS
        ),
        body=m.UpdateCase,
    ),
    Route(
        "PUT",
        "/api/cases/{case_id}",
        WRITE,
        _put_case,
        Operation(
            "putCase",
            "Store a case with exactly this history (import)",
            {200: _CASE_OK},
            WRITE_ERRORS,
        ),
        body=m.PutCase,
    ),
    Route(
        "DELETE",
        "/api/cases/{case_id}",
        WRITE,
        _delete_case,
        Operation(
            "deleteCase",
            "Delete a case and its whole history",
            {204: (None, "Deleted.")},
            READ_ERRORS,
        ),
    ),
    Route(
        "GET",
        "/api/cases/{case_id}/versions",
        READ,
        _versions,
        Operation(
            "caseVersions",
            "Every version of a case, oldest first",
            {200: (m.VersionList, "The versions.")},
            READ_ERRORS,
        ),
    ),
    Route(
        "POST",
        "/api/cases/{case_id}/recapture",
        WRITE,
        _recapture,
        Operation(
            "recapture",
            "Re-record a case from a newer run with the same input",
            {200: _CASE_OK},
            _WRITE_CONFLICT,
            "The trace must have the case's input (compared canonically); 409 otherwise, "
            "with both inputs in error.detail. The previous version is kept.",
        ),
        body=m.Recapture,
    ),
    Route(
        "GET",
        "/api/runs",
        READ,
        _list_runs,
        Operation(
            "listRuns",
            "Replay runs, newest first (without their cases)",
            {200: (m.RunList, "Runs.")},
            READ_ERRORS,
        ),
        query=m.RunQuery,
    ),
    Route(
        "POST",
        "/api/runs",
        WRITE,
        _save_run,
        Operation(
            "saveRun",
            "Keep the results of a replay run (what tracely replay sends)",
            {201: (m.RunSaved, "Kept (or already kept, unchanged).")},
            _WRITE_CONFLICT,
            "Values beyond a size are cut with a marker before they are kept. Sending the "
            "same run again changes nothing; other results under a kept run's id are "
            "refused (409).",
        ),
        body=m.Run,
    ),
    Route(
        "GET",
        "/api/runs/{run_id}",
        READ,
        _get_run,
        Operation(
            "getRun",
            "One replay run, with each case's result",
            {200: (m.Run, "The run.")},
            READ_ERRORS,
        ),
    ),
)

# The pages under /ui: each signs its visitor in itself (a cookie, not a bearer token).
PAGES: Final[tuple[Route, ...]] = tuple(
    Route(method, template, None, handler, raw=True) for method, template, handler in UI_ROUTES
)


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
