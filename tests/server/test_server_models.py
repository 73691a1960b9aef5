"""Each API shape is described once: the document's request schemas refuse what the server
refuses, the models carry exactly the store objects' fields, and a refusal names the field,
what it must be, and what was sent."""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any

import pytest

from server._support import ServerProcess, case_document
from tests.sdk.store._helpers import make_run
from tracely_sdk.server import _models as m
from tracely_sdk.server._app import ROUTES
from tracely_sdk.server._http import HTTPError
from tracely_sdk.server._openapi import openapi_document
from tracely_sdk.store import Case, CaseVersion, Recording, Run
from tracely_sdk.store._model import CASE_RESULT_TYPES

TRACE = "ab" * 16


def _run(**change: Any) -> dict[str, Any]:
    doc: dict[str, Any] = make_run(1).to_dict()
    return {**doc, "id": secrets.token_hex(8), **change}


def _case(**change: Any) -> dict[str, Any]:
    return case_document("shape-case", **change)


_VERSION = {"version": 1, "input": {"args": [], "kwargs": {}}, "bundle": {}, "created_at": 1}

# (method, path, body) sent; whether the document's schema takes each body must be whether
# the server does (it may still refuse it for what is stored: 404, 409).
BODIES = [
    ("POST", "/api/cases", {"trace_id": TRACE, "name": "x"}),
    ("POST", "/api/cases", {"trace_id": TRACE, "name": "x", "tags": ["a", "b"]}),
    ("POST", "/api/cases", {"trace_id": TRACE, "name": 3}),
    ("POST", "/api/cases", {"trace_id": TRACE, "name": "x", "tags": "a"}),
    ("POST", "/api/cases", {"trace_id": TRACE[:-1], "name": "x"}),
    ("POST", "/api/cases", {"trace_id": TRACE, "name": "x", "id": "UPPER"}),
    ("POST", "/api/cases", {"trace_id": TRACE, "name": "x", "colour": "red"}),
    ("POST", "/api/promotions", {"promotions": []}),
    ("POST", "/api/promotions", {"promotions": [{"trace_id": TRACE, "name": "x"}]}),
    ("POST", "/api/promotions", {"promotions": [{"trace_id": TRACE, "name": "x", "stated": {}}]}),
    ("PATCH", "/api/cases/shape-case", {"name": "y"}),
    ("PATCH", "/api/cases/shape-case", {"tags": [1]}),
    ("POST", "/api/cases/shape-case/recapture", {"trace_id": TRACE, "note": 5}),
    ("PUT", "/api/cases/shape-case", {"case": _case(), "history": [_VERSION]}),
    ("PUT", "/api/cases/shape-case", {"case": _case(), "history": []}),
    ("PUT", "/api/cases/shape-case", {"case": _case(version=0), "history": [_VERSION]}),
    ("PUT", "/api/cases/shape-case", {"case": _case(created_at=-1), "history": [_VERSION]}),
    ("PUT", "/api/cases/shape-case", {"case": _case(), "history": [{**_VERSION, "x": 1}]}),
    ("POST", "/api/runs", _run()),
    ("POST", "/api/runs", _run(duration_s=-1)),
    ("POST", "/api/runs", _run(mode="fast")),
    ("POST", "/api/runs", _run(ok="yes")),
    ("POST", "/api/runs", _run(started_at=2**63)),
    ("POST", "/api/runs", _run(cases=[{"verdict": "PASS"}])),
]


@pytest.mark.parametrize(("method", "path", "body"), BODIES)
def test_the_document_refuses_exactly_what_the_server_refuses(
    server: ServerProcess, contract: Any, method: str, path: str, body: Any
) -> None:
    template = contract.template(path)
    op = contract.doc["paths"][template][method.lower()]
    pointer = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].split("#")[1]
    documented_ok = not list(contract._validator(pointer).iter_errors(body))
    answer = server.request(method, path, body)
    assert (answer.status != 400) == documented_ok, (documented_ok, answer)


@pytest.mark.parametrize(
    ("model", "stored", "left_out"),
    [
        (m.Recording, Recording, set()),
        (m.Case, Case, {"problem"}),
        (m.CaseVersion, CaseVersion, {"case_id"}),
        (m.Run, Run, set()),
    ],
)
def test_a_model_carries_exactly_its_store_objects_fields(
    model: type[m.Shape], stored: type, left_out: set[str]
) -> None:
    fields = {f.name for f in dataclasses.fields(stored)} - left_out
    assert set(model.model_fields) == fields


def test_a_run_cases_fields_are_the_ones_its_readers_rely_on() -> None:
    assert set(m.RunCase.model_fields) == set(CASE_RESULT_TYPES)
    case = m.parse(m.Run, _run(cases=[{"case_id": "c", "custom": {"kept": 1}}])).cases[0]
    assert case.model_extra == {"custom": {"kept": 1}}


def test_a_run_is_kept_as_it_was_sent() -> None:
    sent = _run(duration_s=3, summary={"total": 1}, cases=[{"case_id": "c", "duration_s": 2}])
    kept = m.parse(m.Run, sent).to_store().to_dict()
    assert kept == {**sent, "source": sent["source"]}
    assert type(kept["duration_s"]) is int and type(kept["cases"][0]["duration_s"]) is int


def _refusal(model: type[m.Shape], body: Any) -> HTTPError:
    with pytest.raises(HTTPError) as caught:
        m.parse(model, body)
    assert caught.value.status == 400
    return caught.value


@pytest.mark.parametrize(
    ("model", "body", "message", "detail"),
    [
        (
            m.PromoteRequest,
            {"trace_id": TRACE, "name": 3},
            "the promotion: name must be a string, got 3",
            {"field": "name"},
        ),
        (
            m.Recording,
            {"trace_id": TRACE, "service": "s", "started_at": 2**63, "status": "ok", "bundle": {}},
            f"the recording: started_at must be a whole number from 0 to {2**63 - 1}, got {2**63}",
            {"field": "started_at"},
        ),
        (
            m.PutCaseRequest,
            {"case": _case(), "history": [{**_VERSION, "created_at": "1"}]},
            f'the case import: history[0]: created_at must be a whole number from 0 to {2**63 - 1}, got "1"',
            {"field": "history[0]: created_at"},
        ),
        (
            m.PromotionsRequest,
            {"promotions": [{"trace_id": TRACE, "name": "x", "stated": {"input": {}}}]},
            "the promotions: promotions[0]: stated: missing required field(s) expected_output",
            {"missing_fields": ["expected_output"]},
        ),
        (
            m.PromoteRequest,
            {"name": "x", "bogus": 1},
            "the promotion: unknown field(s) 'bogus'; accepted: entrypoint, id, name, tags, "
            "trace_id",
            {"unknown_fields": ["bogus"]},
        ),
        (
            m.TraceQuery,
            {"limit": "0"},
            'the query: limit must be a whole number from 1 to 1000, got "0"',
            {"field": "limit"},
        ),
        (
            m.TraceQuery,
            {"colour": "red"},
            "the query: unknown query parameter(s) 'colour'; accepted: agent, limit, offset, "
            "service",
            {"unknown_fields": ["colour"]},
        ),
        (
            m.Run,
            _run(cases=[{"case_id": "c", "timeline": [5]}]),
            "the run: cases[0]: timeline must be a list of objects or null, got [5]",
            {"field": "cases[0]: timeline"},
        ),
        (
            m.PromoteRequest,
            {"trace_id": TRACE, "name": "x", "tags": ["a b"]},
            "the promotion: tags: invalid tag 'a b': 1-64 characters without spaces or commas",
            {"field": "tags"},
        ),
    ],
)
def test_a_refusal_says_where_what_and_what_was_sent(
    model: type[m.Shape], body: Any, message: str, detail: dict[str, Any]
) -> None:
    error = _refusal(model, body)
    code = "bad_request" if model is m.TraceQuery else "invalid"
    assert (error.message, error.code, error.detail) == (message, code, detail)


def test_a_value_shown_in_a_refusal_is_cut_short() -> None:
    error = _refusal(m.PromoteRequest, {"trace_id": TRACE, "name": ["x" * 1000]})
    assert len(error.message) < 120 and error.message.endswith("…")


def test_the_document_is_generated_from_the_models() -> None:
    doc = openapi_document()
    schemas = doc["components"]["schemas"]
    for model in (m.Recording, m.Case, m.CaseVersion, m.Run, m.PromoteRequest):
        assert set(schemas[model.__name__]["properties"]) == set(model.model_fields)
    # An answer has every field of a stored object; a request may leave the optional ones out.
    assert set(schemas["Case"]["required"]) == set(m.Case.model_fields)
    assert "entrypoint" not in schemas["CaseInput"]["required"]
    ops = {
        op["operationId"]: op
        for item in doc["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }
    assert [p["name"] for p in ops["listTraces"]["parameters"]] == list(m.TraceQuery.model_fields)
    assert len(ops) == len(ROUTES)
