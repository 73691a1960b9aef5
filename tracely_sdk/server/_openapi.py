"""The OpenAPI 3.1 document of the server, served at ``/openapi.json``, assembled from the
route table (:data:`tracely_sdk.server._api.ROUTES`: each row's ``Operation``, query and
body models) and the models' JSON schemas (:mod:`tracely_sdk.server._models`).

It is the contract: a test checks that every route the server answers is here and the other
way round, and validates the server's answers against these schemas.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, cast

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema

from tracely_sdk._version import __version__
from tracely_sdk.server._api import ROUTES, Route
from tracely_sdk.server._models import ERROR_CODES, PATH_PARAMETERS, SCHEMAS

__all__ = ["ERROR_CODES", "openapi_document"]

_REF = "#/components/schemas/{model}"
_ERRORS = {
    400: ("BadRequest", "The request is malformed or invalid (the message says what to fix)."),
    401: ("Unauthorized", "No bearer token, or one that is not valid."),
    403: ("Forbidden", "The token lacks the scope the operation needs."),
    404: ("NotFound", "No such trace, case or resource."),
    409: ("Conflict", "The request contradicts what is stored; nothing was changed."),
    413: ("TooLarge", "The body, compressed or decompressed, is over the limit."),
    415: ("UnsupportedMediaType", "The body is not application/json."),
    429: ("RateLimited", "Too many requests for this token."),
    503: ("Unavailable", "The store is unavailable or the server is shutting down."),
}
_RETRY = {
    "Retry-After": {
        "description": "seconds to wait before retrying",
        "schema": {"type": "integer", "minimum": 1},
    }
}


class _Schemas(GenerateJsonSchema):
    """JSON schemas without the titles pydantic gives each field (the name says it)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _answer(model: Any, description: str) -> dict[str, Any]:
    if model is None:
        return {"description": description}
    if model is dict:
        return _json({"type": "object"}, description)
    if isinstance(model, tuple):
        return _json({"oneOf": [_ref_named(m.__name__) for m in model]}, description)
    return _json(_ref_named(model.__name__), description)


def _parameters(model: type[BaseModel] | None) -> list[dict[str, Any]]:
    if model is None:
        return []
    properties = model.model_json_schema(schema_generator=_Schemas)["properties"]
    params = []
    for name, schema in properties.items():
        description = schema.pop("description", name)
        if {"type": "null"} in schema.get("anyOf", ()):
            # A query parameter is there or not, never null.
            schema = next(s for s in schema["anyOf"] if s != {"type": "null"})
        params.append(
            {
                "name": name,
                "in": "query",
                "required": False,
                "schema": schema,
                "description": description,
            }
        )
    return params


def _operation(route: Route, bodies: Mapping[type[BaseModel], str]) -> dict[str, Any]:
    doc = route.doc
    assert doc is not None, route.template
    op: dict[str, Any] = {"operationId": doc.id, "summary": doc.summary}
    if doc.description:
        op["description"] = doc.description
    if route.query is not None:
        op["parameters"] = _parameters(route.query)
    if route.body is not None:
        op["requestBody"] = {
            "required": True,
            "description": " ".join((route.body.__doc__ or route.body.__name__).split()),
            "content": {"application/json": {"schema": _ref_named(bodies[route.body])}},
        }
    op["responses"] = {
        **{str(status): _answer(*answer) for status, answer in doc.answers.items()},
        **{str(s): {"$ref": f"#/components/responses/{_ERRORS[s][0]}"} for s in doc.errors},
    }
    op["security"] = [{"bearer": []}] if route.scope else []
    if route.scope:
        op["x-tracely-scope"] = route.scope
    return op


def _otlp_operation(route: Route) -> dict[str, Any]:
    binary = {"schema": {"type": "string", "format": "binary"}}
    status = {
        "application/x-protobuf": binary,
        "application/json": {"schema": _ref_named("Status")},
    }

    def failure(description: str, retry: bool = False) -> dict[str, Any]:
        answer: dict[str, Any] = {"description": description, "content": status}
        if retry:
            answer["headers"] = _RETRY
        return answer

    return {
        "operationId": "exportTraces",
        "summary": "OTLP/HTTP trace receiver",
        "description": "Spans of one trace may arrive in many requests, in any order and more "
        "than once. Once a trace's root span has arrived and no span came for the quiet "
        "period, its recording is extracted and stored; later spans update it. Bodies may be "
        "gzip-compressed (Content-Encoding: gzip). Errors are a google.rpc.Status in the "
        "request's encoding, as OTLP/HTTP specifies.",
        "requestBody": {
            "required": True,
            "content": {
                "application/x-protobuf": binary,
                "application/json": {"schema": _ref_named("ExportTraceServiceRequest")},
            },
        },
        "responses": {
            "200": {
                "description": "Accepted (all of it, or with partialSuccess saying how many "
                "spans were rejected and why). The spans are durable: a restart loses none.",
                "content": {
                    "application/x-protobuf": binary,
                    "application/json": {"schema": _ref_named("ExportTraceServiceResponse")},
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
                "The server is holding as much as it may, or the token's rate limit is "
                "reached; nothing was accepted.",
                True,
            ),
            "503": failure(
                "The server is shutting down or cannot write its journal; nothing was accepted.",
                True,
            ),
        },
        "security": [{"bearer": []}],
        "x-tracely-scope": route.scope,
    }


def _ref_named(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def _components(
    routes: Iterable[Route],
) -> tuple[dict[str, Any], dict[type[BaseModel], str]]:
    """Every model's schema, by its name, and the name of each request body's schema: where
    a request's differs from the answer's (fields an answer always has) it is ``<Name>Input``."""
    bodies = {r.body for r in routes if r.body is not None}
    wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (m, "serialization") for m in SCHEMAS.values()
    ]
    wanted += [(m, "validation") for m in bodies]
    keys, top = models_json_schema(wanted, ref_template=_REF, schema_generator=_Schemas)
    schemas = {_rename(name): schema for name, schema in top.get("$defs", {}).items()}
    _rename_refs(schemas)
    names: dict[type[BaseModel], str] = {}
    for (model, mode), ref in keys.items():
        if mode == "validation":
            names[cast(type[BaseModel], model)] = _rename(ref["$ref"]).rsplit("/", 1)[1]
    return schemas, names


def _rename(ref: str) -> str:
    """``<Name>-Output`` (pydantic's name where the two differ) as ``<Name>``, ``<Name>-Input``
    as ``<Name>Input``."""
    return re.sub(r"-(Input|Output)$", lambda m: "Input" if m.group(1) == "Input" else "", ref)


def _rename_refs(schemas: dict[str, Any]) -> None:
    def fix(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                node["$ref"] = _rename(node["$ref"])
            for value in node.values():
                fix(value)
        elif isinstance(node, list):
            for value in node:
                fix(value)

    fix(schemas)


def _responses() -> dict[str, Any]:
    responses = {}
    for status, (name, description) in _ERRORS.items():
        responses[name] = _json(_ref_named("Error"), description)
        if status in (429, 503):
            responses[name]["headers"] = _RETRY
    return responses


def openapi_document(routes: Iterable[Route] | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``routes`` (default: the server's; a fresh dict each call)."""
    routes = ROUTES if routes is None else tuple(routes)
    components, bodies = _components(routes)
    paths: dict[str, Any] = {}
    for route in routes:
        item = paths.setdefault(route.template, {})
        names = re.findall(r"\{(\w+)\}", route.template)
        if names:
            item["parameters"] = [_path_parameter(name) for name in names]
        item[route.method.lower()] = (
            _otlp_operation(route) if route.otlp else _operation(route, bodies)
        )
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
            "schemas": components,
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


def _path_parameter(name: str) -> dict[str, Any]:
    kind, description = PATH_PARAMETERS[name]
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": TypeAdapter(kind).json_schema(),
        "description": description,
    }
