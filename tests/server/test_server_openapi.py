"""The OpenAPI document is the contract: valid, served, and exactly the routes the server has.

(Every answer the other tests get is validated against it by ``ServerProcess.request``.)
"""

from __future__ import annotations

import re

from openapi_spec_validator import validate

from server._support import Contract, ServerProcess
from tracely_sdk.server._app import ROUTES
from tracely_sdk.server._openapi import openapi_document

METHODS = {"get", "post", "put", "patch", "delete"}
SAMPLE = {"trace_id": "ab" * 16, "case_id": "no-such-case", "run_id": "0123456789abcdef"}


def documented() -> dict[tuple[str, str], dict]:  # type: ignore[type-arg]
    doc = openapi_document()
    return {
        (method.upper(), path): op
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in METHODS
    }


def test_the_document_is_valid_openapi_3_1() -> None:
    doc = openapi_document()
    validate(doc)
    assert doc["openapi"] == "3.1.0"
    assert {"Recording", "Case", "CaseVersion", "Error"} <= set(doc["components"]["schemas"])


def test_it_is_served(server: ServerProcess) -> None:
    answer = server.get("/openapi.json", token=None)
    assert answer.status == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json() == openapi_document()


def test_every_route_is_documented_and_every_documented_route_exists() -> None:
    routes = {(r.method, r.template): r for r in ROUTES}
    ops = documented()
    assert set(routes) == set(ops)
    for key, route in routes.items():
        assert ops[key].get("x-tracely-scope") == route.scope, key
        assert bool(ops[key]["security"]) == (route.scope is not None), key


def test_the_server_answers_every_documented_operation(server: ServerProcess) -> None:
    tokens = {"ingest": "ingest", "read": "read", "write": "write", None: None}
    for (method, template), op in documented().items():
        path = re.sub(r"\{(\w+)\}", lambda m: SAMPLE[m.group(1)], template)
        body = None if method in ("GET", "DELETE") else b"{}"
        answer = server.request(
            method,
            path,
            body,
            token=tokens[op.get("x-tracely-scope")],
            content_type="application/json" if body is not None else None,
        )
        assert answer.status != 405, (method, template)
        if answer.status == 404:
            assert not answer.error["message"].startswith("no such resource"), (method, template)


def test_an_undocumented_answer_fails_the_contract() -> None:
    contract = Contract()
    try:
        contract.check("GET", "/api/cases", 200, "application/json", b'{"cases": [{"id": 1}]}')
    except AssertionError as exc:
        assert "cases" in str(exc) or "id" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("an invalid answer passed the contract")
    try:
        contract.check("GET", "/api/cases", 418, "application/json", b"{}")
    except AssertionError as exc:
        assert "not documented" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("an undocumented status passed the contract")
