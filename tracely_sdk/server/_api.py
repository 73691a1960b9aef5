"""The API's operations: one row of :data:`ROUTES` each (method, path template, scope, handler,
what the OpenAPI document says of it, and the models its query and JSON body are validated as),
and their handlers. The ASGI application (:mod:`tracely_sdk.server._app`) routes to them; the
document (:mod:`tracely_sdk.server._openapi`) is assembled from the same rows.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Final

from tracely_otel import BundleFormatError, validate_bundle
from tracely_sdk.server import _models as m
from tracely_sdk.server._auth import INGEST, READ, WRITE
from tracely_sdk.server._http import HTTPError, json_response, response
from tracely_sdk.server._models import parse
from tracely_sdk.store._model import now_ns

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from tracely_sdk.server._app import App

__all__ = [
    "READ_ERRORS",
    "ROUTES",
    "WRITE_ERRORS",
    "Operation",
    "Route",
    "parse_query",
    "retry_after",
]

READ_ERRORS: Final = (400, 401, 403, 404, 429, 503)
WRITE_ERRORS: Final = (400, 401, 403, 404, 413, 415, 429, 503)


@dataclass(frozen=True)
class Operation:
    """What the document says of a route: ``answers`` maps a status to the model of its body
    (a tuple of models: one of them; ``dict``: any object; None: no body) and a description;
    ``errors`` are the statuses answered with the API's Error."""

    id: str
    summary: str
    answers: Mapping[int, tuple[Any, str]]
    errors: tuple[int, ...] = ()
    description: str | None = None


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


def parse_query(request: Request, model: type[m.Shape] | None) -> Any:
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


def retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


# --------------------------------------------------------------------------------------------
# handlers


def _healthz(app: App, params: dict[str, str], query: None, body: None) -> Response:
    """Liveness: serving, and not stuck on a store that refuses every write."""
    if app.draining:
        return json_response(503, {"status": "draining"}, retry_after(1))
    error = app.pipeline.store_error
    if error is not None:
        return json_response(
            503, {"status": "failing", "problems": [f"the store cannot be written: {error}"]}
        )
    return json_response(200, {"status": "ok"})


def _readyz(app: App, params: dict[str, str], query: None, body: None) -> Response:
    """Readiness: the store takes writes and the journal and memory have room for spans."""
    if app.draining:
        return json_response(503, {"status": "draining"}, retry_after(1))
    problems = app.pipeline.problems()
    if problems:
        return json_response(503, {"status": "unavailable", "problems": problems}, retry_after(5))
    return json_response(200, {"status": "ready"})


def _openapi(app: App, request: Request, params: dict[str, str]) -> Response:
    return response(200, app.openapi())


def _list_traces(app: App, params: dict[str, str], q: m.TraceQuery, body: None) -> Response:
    # The summaries alone: the stored recordings' calls are neither read nor decoded.
    summaries = app._call(
        lambda: app.store.recording_summaries(
            limit=q.limit, offset=q.offset, service=q.service, agent=q.agent, cut=False
        )
    )
    listed = [
        {f.name: getattr(s, f.name) for f in fields(s) if f.name != "ended_at"} for s in summaries
    ]
    return json_response(200, {"traces": listed})


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


def _promote(app: App, params: dict[str, str], query: None, body: m.PromoteRequest) -> Response:
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


def _promote_many(
    app: App, params: dict[str, str], query: None, body: m.PromotionsRequest
) -> Response:
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


def _recapture(app: App, params: dict[str, str], query: None, body: m.RecaptureRequest) -> Response:
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
    found = app.recapture_inputs(case_id, trace_id)
    return None if found is None else {"case_input": found[0], "trace_input": found[1]}


def _update_case(
    app: App, params: dict[str, str], query: None, body: m.UpdateCaseRequest
) -> Response:
    case = app._call(
        lambda: app.store.update_case(
            params["case_id"], name=body.name, tags=body.tags, entrypoint=body.entrypoint
        )
    )
    return json_response(200, case.to_dict())


def _put_case(app: App, params: dict[str, str], query: None, body: m.PutCaseRequest) -> Response:
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
        body=m.PromoteRequest,
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
        body=m.PromotionsRequest,
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
        body=m.UpdateCaseRequest,
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
        body=m.PutCaseRequest,
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
        body=m.RecaptureRequest,
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
