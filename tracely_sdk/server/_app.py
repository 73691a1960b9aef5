"""The tracely server: the OTLP receiver, the recordings and cases API, and their wiring.

Every route is one row of :data:`~tracely_sdk.server._api.ROUTES` (its handler, what the
OpenAPI document says of it, and the models its query and JSON body are validated as). The rows
become a Starlette ``Router``: one ``Route`` per path, whose endpoint checks the method and the
token before the body is read, reads it, checks the path's parameters, the query and the body,
and runs the handler in a worker thread (the store is blocking) within the server's request
slots. Every failure is a 4xx with a message saying what to change.

``/v1/traces`` answers as OTLP/HTTP specifies: 200 with an ``ExportTraceServiceResponse`` (a
``partial_success`` when some spans were refused), errors as a ``google.rpc.Status`` in the
request's encoding (protobuf or JSON), 429/503 with ``Retry-After`` for back-pressure.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import orjson

from tracely_otel.otlp import (
    OTLPDecodeError,
    PayloadTooLarge,
    decode_export_request,
    gunzip_bounded,
    rejected_message,
)
from tracely_sdk.errors import ConfigError, Conflict, NotFound, StoreError
from tracely_sdk.server._api import ROUTES, Route, parse_query, retry_after
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
from tracely_sdk.server._ui import UI_ROUTES, is_local_host, is_same_origin
from tracely_sdk.store import InvalidCase, Store, open_store, redact_url

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
                        503, "the server is shutting down", headers=retry_after(1), close=True
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
            query = parse_query(request, route.query)
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
                raise HTTPError(429, "too many requests", headers=retry_after(wait))
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
                headers=retry_after(wait),
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
                503, "the store is unavailable; try again", headers=retry_after(1)
            ) from None
        except (ValueError, TypeError) as exc:
            raise HTTPError(400, self._clean(str(exc)), code="invalid") from None

    def recapture_inputs(self, case_id: str, trace_id: str) -> tuple[Any, Any] | None:
        """The case's input and the trace's, when a recapture was refused because they differ
        (None when they do not, or either cannot be read)."""
        from tracely_sdk._canonical import canonical_equal

        try:
            case = self.store.get_case(case_id)
            recording = self.store.get_recording(trace_id)
        except StoreError:
            return None
        if recording.input is None or canonical_equal(case.input, recording.input):
            return None
        return case.input, recording.input

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
                    503, "the server is shutting down", headers=retry_after(1), close=True
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
                429, f"{exc.reason}; retry later", headers=retry_after(exc.retry_after)
            ) from None
        except Unavailable as exc:
            raise HTTPError(
                503, f"{exc.reason}; retry later", headers=retry_after(exc.retry_after)
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
