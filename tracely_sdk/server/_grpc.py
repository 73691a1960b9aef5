"""OTLP/gRPC: the trace service on a port of its own, feeding the same ingest pipeline.

:class:`GRPCReceiver` answers ``opentelemetry.proto.collector.trace.v1.TraceService/Export``
as the OTLP specification gives for gRPC, with the HTTP receiver's tokens, limits and
pipeline:

- the bearer token comes in the ``authorization`` metadata and is checked before the message
  is read, so a call without one costs no worker while its client dawdles: none, or one that
  is not valid, is ``UNAUTHENTICATED``; a token without the ingest scope is
  ``PERMISSION_DENIED``; a token (or, for failed attempts, a client) above its rate is
  ``RESOURCE_EXHAUSTED`` with a ``RetryInfo``. The rate is the HTTP receiver's own bucket: one
  budget per token and per client, whichever port it comes in on;
- an authorized call whose message has not arrived within ``message_timeout`` seconds is
  cancelled (the client sees ``CANCELLED``), so that it gives its worker back;
- connections are capped (``max_connections``; grpc closes further ones as they are
  accepted), one with no call for ``idle_timeout`` seconds is closed (after a ``GOAWAY``, so
  clients reconnect cleanly), and one connection carries at most ``max_streams`` calls at once;
- a message larger than the body limit, compressed or after gzip (which grpc negotiates and
  undoes), is refused by grpc with ``RESOURCE_EXHAUSTED``;
- a request that cannot be decoded is ``INVALID_ARGUMENT`` (with a ``BadRequest`` naming the
  field); spans refused alone within a good request are a partial success (``rejected_spans``
  and ``error_message``), as are spans past the per-trace cap;
- a server holding as much as it may is ``RESOURCE_EXHAUSTED`` with a ``RetryInfo`` (which makes
  it retryable), one shutting down or unable to journal ``UNAVAILABLE`` with a ``RetryInfo``.

The status details travel both as ``grpc-status-details-bin`` (a ``google.rpc.Status``, which
the Collector reads) and the ``RetryInfo`` alone as ``google.rpc.retryinfo-bin`` (which the
Python exporter reads). A request is acknowledged only once the pipeline has journaled it, as
over HTTP.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import BadRequest, RetryInfo
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceServicer

from tracely_otel.otlp import OTLPDecodeError, decode_export_request, rejected_message
from tracely_sdk.errors import ConfigError
from tracely_sdk.server._auth import INGEST, RateLimiter, TokenSet
from tracely_sdk.server._ingest import KIND_PROTO, Backpressure, IngestPipeline, Unavailable

__all__ = ["DEFAULT_GRPC_PORT", "GRPCReceiver"]

logger = logging.getLogger("tracely.server")

DEFAULT_GRPC_PORT = 4317
"""The port OTLP/gRPC listens on by convention (``--grpc`` without ``--grpc-port``)."""

_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name


class _Refused(Exception):
    """An export answered with a gRPC status instead of a response."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        retry_after: float | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.field = field

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        status = Status(code=self.code.value[0], message=self.message)
        metadata: list[tuple[str, bytes]] = []
        if self.retry_after is not None:
            seconds = max(1, math.ceil(self.retry_after))
            retry = RetryInfo(retry_delay=Duration(seconds=seconds))
            status.details.add().Pack(retry)
            metadata.append(("google.rpc.retryinfo-bin", retry.SerializeToString()))
        if self.field is not None:
            violation = BadRequest.FieldViolation(field=self.field, description=self.message)
            status.details.add().Pack(BadRequest(field_violations=[violation]))
        metadata.append(("grpc-status-details-bin", status.SerializeToString()))
        return tuple(metadata)


def _client(peer: str) -> str:
    """The client's address without its port (``ipv4:127.0.0.1:5000`` → ``127.0.0.1``)."""
    kind, _, address = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        address = address.rsplit(":", 1)[0]
        return address.strip("[]")
    return peer


class GRPCReceiver(TraceServiceServicer):
    """The OTLP/gRPC trace service on ``host:port`` (port 0 picks a free one, see :attr:`port`).

    ``start()`` serves from a bounded thread pool; ``stop()`` refuses new calls, lets the
    ones in flight finish for up to ``grace`` seconds, and returns (idempotent).
    """

    def __init__(
        self,
        pipeline: IngestPipeline,
        tokens: TokenSet,
        limiter: RateLimiter,
        *,
        host: str,
        port: int,
        max_message_bytes: int,
        max_workers: int = 32,
        rate_limit: float = 0.0,
        message_timeout: float = 60.0,
        max_connections: int = 256,
        idle_timeout: float = 300.0,
        max_streams: int = 16,
        handshake_timeout: float = 10.0,
    ) -> None:
        self.pipeline = pipeline
        self.tokens = tokens
        self.limiter = limiter
        self.rate_limit = rate_limit
        self.message_timeout = message_timeout
        self.host = host
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tracely-grpc")
        self._server = grpc.server(
            self._pool,
            # Calls past these wait for none of the workers: grpc refuses them at once.
            maximum_concurrent_rpcs=max_workers * 4,
            options=[
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_allowed_incoming_connections", max_connections),
                ("grpc.max_connection_idle_ms", max(1, round(idle_timeout * 1000))),
                ("grpc.max_concurrent_streams", max_streams),
                # A connection that never finishes its HTTP/2 preface is closed as an HTTP one
                # that never sends its head would be.
                ("grpc.server_handshake_timeout_ms", max(1, round(handshake_timeout * 1000))),
                # Without it a second server could bind the same port and share its calls.
                ("grpc.so_reuseport", 0),
            ],
        )
        # The generated servicer, registered as add_TraceServiceServicer_to_server does, but
        # taking the request's bytes: grpc answers a request its deserializer fails on with
        # INTERNAL, where OTLP wants INVALID_ARGUMENT; and the bytes are what is journaled.
        # Registered as a client stream (the same on the wire as a unary call), because grpc
        # reads a unary call's message before its handler runs: the handler checks the
        # metadata first and bounds the wait for the message.
        handler = grpc.stream_unary_rpc_method_handler(
            self._call, response_serializer=ExportTraceServiceResponse.SerializeToString
        )
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(_SERVICE, {"Export": handler}),)
        )
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            self.port = self._server.add_insecure_port(address)
        except RuntimeError as exc:
            self.port = 0
            reason = str(exc)
        else:
            reason = "the address is in use or not available"
        if not self.port:
            self._pool.shutdown(wait=False)
            raise ConfigError(f"cannot listen for OTLP/gRPC on {address}: {reason}")
        self._stopped = False

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def start(self) -> GRPCReceiver:
        self._server.start()
        return self

    def stop(self, grace: float) -> None:
        """Refuse new calls, wait up to ``grace`` seconds for those in flight, then end them."""
        if self._stopped:
            return
        self._stopped = True
        if not self._server.stop(grace).wait(grace + 5):
            logger.warning("OTLP/gRPC calls still running after %.0fs; stopping anyway", grace)
        self._pool.shutdown(wait=False)

    # the service ---------------------------------------------------------------------------

    def _call(self, messages: Iterator[bytes], context: Any) -> ExportTraceServiceResponse:
        """``TraceService/Export``: the request's spans into the pipeline, or a status."""
        try:
            if self.pipeline.closing:
                raise _Refused(
                    grpc.StatusCode.UNAVAILABLE, "the server is shutting down", retry_after=1
                )
            self._authorize(context)
            request = self._message(messages, context)
            return self._ingest(request)
        except _Refused as refused:
            context.set_trailing_metadata(refused.trailing_metadata())
            context.abort(refused.code, refused.message)
            raise AssertionError("unreachable") from None  # pragma: no cover - abort raises

    def _message(self, messages: Iterator[bytes], context: Any) -> bytes:
        """The call's one message, once it has arrived; cancels the call after the timeout."""

        def expire() -> None:
            # Logged before cancelling: once the client sees CANCELLED, the reason is on record.
            logger.info(
                "an OTLP/gRPC call from %s sent no message within %gs; cancelled it",
                _client(context.peer()),
                self.message_timeout,
            )
            context.cancel()

        # The wait cannot be given a timeout of its own: cancelling the call ends it.
        timer = threading.Timer(self.message_timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            return next(messages)
        except StopIteration:
            raise _Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                "the call ended without its ExportTraceServiceRequest",
                field="request",
            ) from None
        except grpc.RpcError:
            # Cancelled (by the client, by grpc for a message over the size limit, or by the
            # timer): the status is already sent, and this one goes nowhere.
            raise _Refused(grpc.StatusCode.CANCELLED, "the call was cancelled") from None
        finally:
            timer.cancel()

    def _authorize(self, context: Any) -> None:
        authorization = _metadata(context.invocation_metadata(), "authorization")
        client = _client(context.peer())
        principal = self.tokens.authenticate(authorization, client)
        if principal is None:
            # Failed attempts are rate-limited per client, so tokens cannot be guessed quickly.
            wait = self.limiter.acquire(f"client:{client}")
            if wait:
                raise _Refused(
                    grpc.StatusCode.RESOURCE_EXHAUSTED, "too many requests", retry_after=wait
                )
            raise _Refused(
                grpc.StatusCode.UNAUTHENTICATED,
                "the bearer token is not valid"
                if authorization
                else "a bearer token is required (metadata authorization: Bearer <token>)",
            )
        wait = self.limiter.acquire(principal.key)
        if wait:
            raise _Refused(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"too many requests for this token (the limit is {self.rate_limit:g} a second)",
                retry_after=wait,
            )
        if not principal.may(INGEST):
            raise _Refused(
                grpc.StatusCode.PERMISSION_DENIED,
                "this token may not do that: it needs the ingest scope",
            )

    def _ingest(self, data: bytes) -> ExportTraceServiceResponse:
        try:
            records, rejected, errors = decode_export_request(data, "proto")
        except OTLPDecodeError as exc:
            raise _Refused(
                grpc.StatusCode.INVALID_ARGUMENT, str(exc), field=exc.path or "request"
            ) from None
        if rejected and not records:
            raise _Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                rejected_message(errors, rejected),
                field="resource_spans",
            )
        try:
            receipt = self.pipeline.submit(
                records, body=None if rejected else data, kind=KIND_PROTO
            )
        except Backpressure as exc:
            raise _Refused(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{exc.reason}; retry later",
                retry_after=exc.retry_after,
            ) from None
        except Unavailable as exc:
            raise _Refused(
                grpc.StatusCode.UNAVAILABLE,
                f"{exc.reason}; retry later",
                retry_after=exc.retry_after,
            ) from None
        if receipt.rejected:
            errors.append(receipt.message)
        total = rejected + receipt.rejected
        response = ExportTraceServiceResponse()
        if total:
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(
                    rejected_spans=total, error_message=rejected_message(errors, total)
                )
            )
        return response


def _metadata(metadata: Sequence[Any] | None, key: str) -> str | None:
    for item in metadata or ():
        if item.key == key:
            value = item.value
            return value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return None
