"""The OpenAPI 3.1 document of the server, served at ``/openapi.json``.

It is the contract: a test checks that every route the server answers is here and the other
way round, and validates the server's answers against these schemas.
"""

from __future__ import annotations

from typing import Any

from tracely_sdk._version import __version__
from tracely_sdk.store._model import CASE_ID_PATTERN, RUN_ID_PATTERN

__all__ = ["ERROR_CODES", "openapi_document"]

ERROR_CODES = (
    "bad_request",
    "invalid",
    "unauthorized",
    "forbidden",
    "not_found",
    "method_not_allowed",
    "conflict",
    "too_large",
    "unsupported_media_type",
    "rate_limited",
    "internal",
    "not_implemented",
    "unavailable",
)

_TRACE_ID = {"type": "string", "pattern": "^[0-9a-fA-F]{32}$"}
_NS = {"type": "integer", "minimum": 0, "description": "Unix time in nanoseconds"}
_ANY: dict[str, Any] = {"description": "any JSON value"}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    names = {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        409: "Conflict",
        413: "TooLarge",
        415: "UnsupportedMediaType",
        429: "RateLimited",
        503: "Unavailable",
    }
    return {str(s): {"$ref": f"#/components/responses/{names[s]}"} for s in statuses}


_READ_ERRORS = (400, 401, 403, 404, 429, 503)
_WRITE_ERRORS = (400, 401, 403, 404, 413, 415, 429, 503)


def _op(
    operation_id: str,
    summary: str,
    scope: str | None,
    responses: dict[str, Any],
    *,
    parameters: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": operation_id, "summary": summary}
    if description:
        op["description"] = description
    if parameters:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = body
    op["responses"] = responses
    op["security"] = [{"bearer": []}] if scope else []
    if scope:
        op["x-tracely-scope"] = scope
    return op


def _path_param(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": schema,
        "description": description,
    }


def _query_param(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def _json_body(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "required": True,
        "description": description,
        "content": {"application/json": {"schema": schema}},
    }


def _schemas() -> dict[str, Any]:
    recording_props: dict[str, Any] = {
        "trace_id": _TRACE_ID,
        "service": {"type": "string"},
        "agent_name": {"type": ["string", "null"]},
        "started_at": _NS,
        "status": {"enum": ["ok", "error"]},
        "input": {**_ANY, "description": "the agent root's recorded input, or null"},
        "output": {**_ANY, "description": "the agent root's recorded output, or null"},
        "bundle": _ref("Bundle"),
        "replay_mode": {"type": ["string", "null"]},
        "received_at": _NS,
    }
    summary_props = {k: v for k, v in recording_props.items() if k != "bundle"}
    case_props: dict[str, Any] = {
        "id": {"type": "string", "pattern": CASE_ID_PATTERN},
        "name": {"type": "string", "minLength": 1},
        "entrypoint": {"type": ["string", "null"], "description": "module:function"},
        "input": _ANY,
        "expected_output": _ANY,
        "bundle": _ref("Bundle"),
        "source_trace_id": {"type": ["string", "null"]},
        "version": {"type": "integer", "minimum": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
        "created_at": _NS,
        "updated_at": _NS,
    }
    version_props: dict[str, Any] = {
        "version": {"type": "integer", "minimum": 1},
        "input": _ANY,
        "expected_output": _ANY,
        "bundle": _ref("Bundle"),
        "source_trace_id": {"type": ["string", "null"]},
        "created_at": _NS,
        "note": {"type": ["string", "null"]},
    }
    difference = {
        "type": "object",
        "description": "Where a recorded value and the actual one differ; a side with nothing "
        "at the path is left out.",
        "required": ["path"],
        "properties": {"path": {"type": "string"}, "recorded": _ANY, "actual": _ANY},
    }
    run_case = {
        "type": "object",
        "description": "One case's result, as in the JSON report of tracely replay; values "
        "beyond a size are cut and end with a marker (… [truncated: N characters], … [N more "
        "items], … [collapsed: N bytes of JSON]).",
        "required": ["case_id", "verdict"],
        "properties": {
            "case_id": {"type": "string"},
            "version": {"type": ["integer", "null"]},
            "name": {"type": "string"},
            "entrypoint": {"type": ["string", "null"]},
            "verdict": {"enum": ["PASS", "FAIL", "INCOMPLETE", "ERRORED", "LENIENT"]},
            "reasons": {"type": "array", "items": {"type": "string"}},
            "diff": {"type": ["string", "null"]},
            "output_differences": {"type": "array", "items": difference},
            "divergences": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "label": {"type": "string"},
                        "entry": {"type": "string"},
                        "seq": {"type": "integer"},
                        "field": {"enum": ["input", "args"]},
                        "recorded": _ANY,
                        "actual": _ANY,
                        "differences": {"type": "array", "items": difference},
                        "omitted": {"type": "integer", "minimum": 0},
                    },
                },
            },
            "trace_id": {"type": ["string", "null"]},
            "duration_s": {"type": "number"},
            "agent_version": {"type": ["string", "null"]},
            "tracely_version": {"type": "string"},
        },
    }
    run_props: dict[str, Any] = {
        "id": {"type": "string", "pattern": RUN_ID_PATTERN},
        "started_at": _NS,
        "duration_s": {"type": "number", "minimum": 0},
        "mode": {"enum": ["recorded", "lenient", "scenarios"]},
        "ok": {"type": "boolean"},
        "summary": {"type": "object", "description": "counts by verdict, as in the JSON report"},
        "source": {"type": ["string", "null"], "description": "where the cases came from"},
        "otlp_endpoint": {
            "type": ["string", "null"],
            "description": "where the replay spans were exported (null: no OTLP endpoint)",
        },
        "tracely_version": {"type": "string"},
        "cases": {"type": "array", "items": run_case},
    }
    run_summary_props = {k: v for k, v in run_props.items() if k != "cases"}
    entry = {
        "type": "object",
        "properties": {
            "seq": {"type": "integer"},
            "args": _ANY,
            "input": _ANY,
            "output": _ANY,
            "error": {
                "type": "object",
                "required": ["type", "message"],
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            },
            "usage": _ANY,
            "output_type": {"type": "string"},
            "provider": {"type": "string"},
            "span_id": {"type": "string"},
            "started_at": _NS,
            "ended_at": _NS,
        },
        "additionalProperties": False,
    }
    return {
        "Error": {
            "type": "object",
            "required": ["error"],
            "additionalProperties": False,
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "additionalProperties": False,
                    "properties": {
                        "code": {"enum": list(ERROR_CODES)},
                        "message": {"type": "string"},
                        "detail": {"type": "object"},
                    },
                }
            },
        },
        "Bundle": {
            "type": "object",
            "description": "A fixture bundle (tracely.bundle/1): every tool and LLM call of a "
            "trace, with the agent root's input and output and a checksum.",
            "properties": {
                "format": {"type": "string"},
                "trace_id": {"type": "string"},
                "service": {"type": "string"},
                "started_at": {"type": "integer"},
                "agent": {"type": "object"},
                "tools": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": entry},
                },
                "llm": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": entry},
                },
                "incomplete": {"type": "array", "items": {"type": "object"}},
                "replay": {"type": "object"},
                "checksum": {"type": "string"},
            },
            "additionalProperties": False,
        },
        "Recording": {
            "type": "object",
            "required": list(recording_props),
            "additionalProperties": False,
            "properties": recording_props,
        },
        "RecordingSummary": {
            "type": "object",
            "description": "A recording without its bundle.",
            "required": list(summary_props),
            "additionalProperties": False,
            "properties": summary_props,
        },
        "RecordingInput": {
            "type": "object",
            "description": "A recording to store (received_at defaults to the time it arrives).",
            "required": ["trace_id", "service", "started_at", "status", "bundle"],
            "additionalProperties": False,
            "properties": {**recording_props, "received_at": {"type": ["integer", "null"]}},
        },
        "Stored": {
            "type": "object",
            "required": ["stored"],
            "additionalProperties": False,
            "properties": {
                "stored": {
                    "type": "boolean",
                    "description": "true when the recording was new or replaced a less "
                    "complete one of the same trace",
                }
            },
        },
        "TraceList": {
            "type": "object",
            "required": ["traces"],
            "additionalProperties": False,
            "properties": {"traces": {"type": "array", "items": _ref("RecordingSummary")}},
        },
        "Case": {
            "type": "object",
            "required": list(case_props),
            "additionalProperties": False,
            "properties": case_props,
        },
        "CaseList": {
            "type": "object",
            "required": ["cases"],
            "additionalProperties": False,
            "properties": {"cases": {"type": "array", "items": _ref("Case")}},
        },
        "CaseVersion": {
            "type": "object",
            "required": list(version_props),
            "additionalProperties": False,
            "properties": version_props,
        },
        "VersionList": {
            "type": "object",
            "required": ["versions"],
            "additionalProperties": False,
            "properties": {"versions": {"type": "array", "items": _ref("CaseVersion")}},
        },
        "PromoteRequest": {
            "type": "object",
            "required": ["trace_id", "name"],
            "additionalProperties": False,
            "properties": {
                "trace_id": _TRACE_ID,
                "name": {"type": "string", "minLength": 1},
                "id": {"type": ["string", "null"], "pattern": CASE_ID_PATTERN},
                "entrypoint": {"type": ["string", "null"]},
                "tags": {"type": ["array", "null"], "items": {"type": "string"}},
            },
        },
        "PromotionsRequest": {
            "type": "object",
            "required": ["promotions"],
            "additionalProperties": False,
            "properties": {
                "promotions": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["trace_id", "name"],
                        "additionalProperties": False,
                        "properties": {
                            "trace_id": _TRACE_ID,
                            "name": {"type": "string", "minLength": 1},
                            "id": {"type": ["string", "null"], "pattern": CASE_ID_PATTERN},
                            "entrypoint": {"type": ["string", "null"]},
                            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
                            "stated": {
                                "type": ["object", "null"],
                                "description": "for a trace recorded without an agent span: "
                                "the input to replay it with and the expected output",
                                "required": ["input", "expected_output"],
                                "additionalProperties": False,
                                "properties": {
                                    "input": {
                                        "type": "object",
                                        "required": ["args", "kwargs"],
                                        "additionalProperties": False,
                                        "properties": {
                                            "args": {"type": "array"},
                                            "kwargs": {"type": "object"},
                                        },
                                    },
                                    "expected_output": {},
                                },
                            },
                        },
                    },
                }
            },
        },
        "RecaptureRequest": {
            "type": "object",
            "required": ["trace_id"],
            "additionalProperties": False,
            "properties": {"trace_id": _TRACE_ID, "note": {"type": ["string", "null"]}},
        },
        "UpdateCaseRequest": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "name": {"type": ["string", "null"]},
                "tags": {"type": ["array", "null"], "items": {"type": "string"}},
                "entrypoint": {
                    "type": ["string", "null"],
                    "description": "module:function; an empty string clears it",
                },
            },
        },
        "PutCaseRequest": {
            "type": "object",
            "required": ["case", "history"],
            "additionalProperties": False,
            "properties": {
                "case": _ref("Case"),
                "history": {"type": "array", "minItems": 1, "items": _ref("CaseVersion")},
            },
        },
        "Run": {
            "type": "object",
            "description": "A tracely replay run and each case's result.",
            "required": list(run_props),
            "additionalProperties": False,
            "properties": run_props,
        },
        "RunInput": {
            "type": "object",
            "description": "A run to keep (what tracely replay sends).",
            "required": [k for k in run_props if k not in ("source", "otlp_endpoint", "cases")],
            "additionalProperties": False,
            "properties": run_props,
        },
        "RunSummary": {
            "type": "object",
            "description": "A run without its cases.",
            "required": list(run_summary_props),
            "additionalProperties": False,
            "properties": run_summary_props,
        },
        "RunList": {
            "type": "object",
            "required": ["runs"],
            "additionalProperties": False,
            "properties": {"runs": {"type": "array", "items": _ref("RunSummary")}},
        },
        "RunSaved": {
            "type": "object",
            "required": ["id"],
            "additionalProperties": False,
            "properties": {"id": {"type": "string", "pattern": RUN_ID_PATTERN}},
        },
        "Health": {
            "type": "object",
            "required": ["status"],
            "additionalProperties": False,
            "properties": {
                "status": {"enum": ["ok", "ready", "draining", "failing", "unavailable"]},
                "problems": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "What is wrong, each naming the store or journal concerned.",
                },
            },
        },
        "ExportTraceServiceRequest": {
            "type": "object",
            "description": "OTLP/JSON: hex trace and span ids, integer enums, 64-bit integers "
            "as decimal strings (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding).",
            "properties": {"resourceSpans": {"type": "array", "items": {"type": "object"}}},
        },
        "ExportTraceServiceResponse": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "partialSuccess": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "rejectedSpans": {"type": ["string", "integer"]},
                        "errorMessage": {"type": "string"},
                    },
                }
            },
        },
        "Status": {
            "type": "object",
            "description": "google.rpc.Status: how OTLP/HTTP reports a failed export.",
            "required": ["message"],
            "additionalProperties": False,
            "properties": {
                "code": {"type": "integer"},
                "message": {"type": "string"},
                "details": {"type": "array", "items": {"type": "object"}},
            },
        },
    }


def _responses() -> dict[str, Any]:
    def error(description: str, retry: bool = False) -> dict[str, Any]:
        response = _json(_ref("Error"), description)
        if retry:
            response["headers"] = {
                "Retry-After": {
                    "description": "seconds to wait before retrying",
                    "schema": {"type": "integer", "minimum": 1},
                }
            }
        return response

    return {
        "BadRequest": error("The request is malformed or invalid (the message says what to fix)."),
        "Unauthorized": error("No bearer token, or one that is not valid."),
        "Forbidden": error("The token lacks the scope the operation needs."),
        "NotFound": error("No such trace, case or resource."),
        "Conflict": error("The request contradicts what is stored; nothing was changed."),
        "TooLarge": error("The body, compressed or decompressed, is over the limit."),
        "UnsupportedMediaType": error("The body is not application/json."),
        "RateLimited": error("Too many requests for this token.", retry=True),
        "Unavailable": error(
            "The store is unavailable or the server is shutting down.", retry=True
        ),
    }


def _otlp_operation() -> dict[str, Any]:
    status = {
        "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
        "application/json": {"schema": _ref("Status")},
    }
    retry = {
        "Retry-After": {
            "description": "seconds to wait before retrying",
            "schema": {"type": "integer", "minimum": 1},
        }
    }

    def failure(description: str, retryable: bool = False) -> dict[str, Any]:
        response: dict[str, Any] = {"description": description, "content": status}
        if retryable:
            response["headers"] = retry
        return response

    return _op(
        "exportTraces",
        "OTLP/HTTP trace receiver",
        "ingest",
        {
            "200": {
                "description": "Accepted (all of it, or with partialSuccess saying how many "
                "spans were rejected and why). The spans are durable: a restart loses none.",
                "content": {
                    "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                    "application/json": {"schema": _ref("ExportTraceServiceResponse")},
                },
            },
            "400": failure("The payload cannot be decoded (the message names the field)."),
            "401": failure("No bearer token, or one that is not valid."),
            "403": failure("The token lacks the ingest scope."),
            "413": failure("The body, compressed or decompressed, is over the limit."),
            "415": failure(
                "Neither application/x-protobuf nor application/json, or an "
                "unsupported Content-Encoding."
            ),
            "429": failure(
                "The server is holding as much as it may, or the token's rate "
                "limit is reached; nothing was accepted.",
                True,
            ),
            "503": failure(
                "The server is shutting down or cannot write its journal; nothing was accepted.",
                True,
            ),
        },
        description="Spans of one trace may arrive in many requests, in any order and more "
        "than once. Once a trace's root span has arrived and no span came for the quiet "
        "period, its recording is extracted and stored; later spans update it. Bodies may be "
        "gzip-compressed (Content-Encoding: gzip). Errors are a google.rpc.Status in the "
        "request's encoding, as OTLP/HTTP specifies.",
        body={
            "required": True,
            "content": {
                "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                "application/json": {"schema": _ref("ExportTraceServiceRequest")},
            },
        },
    )


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document (a fresh dict each call)."""
    trace_id = _path_param("trace_id", _TRACE_ID, "a trace id: 32 hexadecimal characters")
    case_id = _path_param("case_id", {"type": "string", "pattern": CASE_ID_PATTERN}, "a case id")
    case_ok = _json(_ref("Case"), "The case.")
    paths: dict[str, Any] = {
        "/healthz": {
            "get": _op(
                "health",
                "Liveness",
                None,
                {
                    "200": _json(_ref("Health"), "Serving."),
                    "503": _json(
                        {"oneOf": [_ref("Health"), _ref("Error")]},
                        "Shutting down, or the store refuses every write (Health), or every "
                        "connection slot is taken (Error).",
                    ),
                },
            )
        },
        "/readyz": {
            "get": _op(
                "ready",
                "Readiness: the store takes writes and the journal has room",
                None,
                {
                    "200": _json(_ref("Health"), "Ready for spans."),
                    "503": _json(
                        {"oneOf": [_ref("Health"), _ref("Error")]},
                        "Not ready: the problems name the store or journal concerned.",
                    ),
                },
            )
        },
        "/openapi.json": {
            "get": _op(
                "openapi",
                "This document",
                None,
                {"200": _json({"type": "object"}, "The OpenAPI document.")},
            )
        },
        "/v1/traces": {"post": _otlp_operation()},
        "/api/traces": {
            "get": _op(
                "listTraces",
                "Recordings, newest first (without their bundles)",
                "read",
                {"200": _json(_ref("TraceList"), "Recordings."), **_errors(*_READ_ERRORS)},
                parameters=[
                    _query_param(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50},
                        "at most this many",
                    ),
                    _query_param(
                        "offset", {"type": "integer", "minimum": 0, "default": 0}, "skip this many"
                    ),
                    _query_param("service", {"type": "string"}, "only this service"),
                    _query_param("agent", {"type": "string"}, "only this agent"),
                ],
            )
        },
        "/api/traces/{trace_id}": {
            "parameters": [trace_id],
            "get": _op(
                "getTrace",
                "One recording, with its bundle",
                "read",
                {"200": _json(_ref("Recording"), "The recording."), **_errors(*_READ_ERRORS)},
            ),
        },
        "/api/recordings": {
            "post": _op(
                "putRecording",
                "Store a recording (what an SDK's store writer sends)",
                "write",
                {
                    "201": _json(_ref("Stored"), "Stored, or ignored when not more complete."),
                    **_errors(*_WRITE_ERRORS),
                },
                body=_json_body(_ref("RecordingInput"), "Recording.to_dict()"),
            )
        },
        "/api/cases": {
            "get": _op(
                "listCases",
                "Every case (with its bundle: CI replays from this)",
                "read",
                {"200": _json(_ref("CaseList"), "Cases, by id."), **_errors(*_READ_ERRORS)},
                parameters=[_query_param("tag", {"type": "string"}, "only cases with this tag")],
            ),
            "post": _op(
                "promote",
                "Promote a recorded trace to a regression case (version 1)",
                "write",
                {"201": _json(_ref("Case"), "The new case."), **_errors(*_WRITE_ERRORS, 409)},
                body=_json_body(_ref("PromoteRequest"), "which trace, and the case's name"),
            ),
        },
        "/api/promotions": {
            "post": _op(
                "promoteMany",
                "Promote several recorded traces to regression cases, in one transaction",
                "write",
                {
                    "201": _json(_ref("CaseList"), "The new cases, in the order asked."),
                    **_errors(*_WRITE_ERRORS, 409),
                },
                body=_json_body(_ref("PromotionsRequest"), "the promotions"),
                description="All of them or none: one refused (404 for a trace not recorded, "
                "409 for one that cannot be a case, 400 for an invalid field) leaves no case "
                "made, and the error names it. Ids made from a name are unique across the batch.",
            )
        },
        "/api/cases/{case_id}": {
            "parameters": [case_id],
            "get": _op(
                "getCase",
                "One case",
                "read",
                {"200": case_ok, **_errors(*_READ_ERRORS)},
            ),
            "patch": _op(
                "updateCase",
                "Change a case's name, tags or entrypoint",
                "write",
                {"200": case_ok, **_errors(*_WRITE_ERRORS)},
                body=_json_body(_ref("UpdateCaseRequest"), "the fields to change"),
            ),
            "put": _op(
                "putCase",
                "Store a case with exactly this history (import)",
                "write",
                {"200": case_ok, **_errors(*_WRITE_ERRORS)},
                body=_json_body(_ref("PutCaseRequest"), "the case and its history"),
            ),
            "delete": _op(
                "deleteCase",
                "Delete a case and its whole history",
                "write",
                {"204": {"description": "Deleted."}, **_errors(*_READ_ERRORS)},
            ),
        },
        "/api/cases/{case_id}/versions": {
            "parameters": [case_id],
            "get": _op(
                "caseVersions",
                "Every version of a case, oldest first",
                "read",
                {"200": _json(_ref("VersionList"), "The versions."), **_errors(*_READ_ERRORS)},
            ),
        },
        "/api/cases/{case_id}/recapture": {
            "parameters": [case_id],
            "post": _op(
                "recapture",
                "Re-record a case from a newer run with the same input",
                "write",
                {"200": case_ok, **_errors(*_WRITE_ERRORS, 409)},
                body=_json_body(_ref("RecaptureRequest"), "the run to re-record from"),
                description="The trace must have the case's input (compared canonically); "
                "409 otherwise, with both inputs in error.detail. The previous version is kept.",
            ),
        },
        "/api/runs": {
            "get": _op(
                "listRuns",
                "Replay runs, newest first (without their cases)",
                "read",
                {"200": _json(_ref("RunList"), "Runs."), **_errors(*_READ_ERRORS)},
                parameters=[
                    _query_param(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20},
                        "at most this many",
                    ),
                    _query_param(
                        "offset", {"type": "integer", "minimum": 0, "default": 0}, "skip this many"
                    ),
                    _query_param(
                        "trace_id", _TRACE_ID, "only runs one of whose cases made this trace"
                    ),
                ],
            ),
            "post": _op(
                "saveRun",
                "Keep the results of a replay run (what tracely replay sends)",
                "write",
                {
                    "201": _json(_ref("RunSaved"), "Kept (or already kept, unchanged)."),
                    **_errors(*_WRITE_ERRORS, 409),
                },
                body=_json_body(_ref("RunInput"), "Run.to_dict()"),
                description="Values beyond a size are cut with a marker before they are kept. "
                "Sending the same run again changes nothing; other results under a kept "
                "run's id are refused (409).",
            ),
        },
        "/api/runs/{run_id}": {
            "parameters": [
                _path_param(
                    "run_id",
                    {"type": "string", "pattern": RUN_ID_PATTERN},
                    "a run id: 16 hexadecimal characters",
                )
            ],
            "get": _op(
                "getRun",
                "One replay run, with each case's result",
                "read",
                {"200": _json(_ref("Run"), "The run."), **_errors(*_READ_ERRORS)},
            ),
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "tracely server",
            "version": __version__,
            "description": "OTLP in from any OpenTelemetry Collector or exporter; recordings "
            "and regression cases over HTTP. Errors outside /v1/traces are "
            '{"error": {"code", "message", "detail"?}}.',
        },
        "paths": paths,
        "components": {
            "schemas": _schemas(),
            "responses": _responses(),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token with the operation's scope (x-tracely-scope): "
                    "ingest, read or write (write implies read).",
                }
            },
        },
    }
