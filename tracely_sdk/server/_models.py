"""Every shape the server's API reads or writes, described once as a pydantic model.

Requests are validated with these models (:func:`parse`), the OpenAPI document's schemas are
generated from them (:mod:`tracely_sdk.server._openapi`), and the models that carry a stored
object build the store's own (:class:`~tracely_sdk.store.Recording`, ``Case``, ``CaseVersion``,
``Run``) in one method each, whose checks then apply as well. Answers are the store objects'
``to_dict()``; a test validates every answer against the document.

Validation is strict (``"5"`` is not a number, ``true`` is not one either) and refuses unknown
fields. A refusal names the field and says what it must be: :func:`parse` turns pydantic's
errors into the API's 400 (``unknown field(s)``, ``missing required field(s)``, ``cases[0]:
tags must be a list of strings or null, got 5``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Final, Literal, TypeVar, cast, get_args

import orjson
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    WrapValidator,
    create_model,
)
from pydantic_core import PydanticCustomError

from tracely_sdk.server._http import _STATUS_CODES, HTTPError
from tracely_sdk.store import Case as StoredCase
from tracely_sdk.store import CaseVersion as StoredVersion
from tracely_sdk.store import Recording as StoredRecording
from tracely_sdk.store import Run as StoredRun
from tracely_sdk.store import validate_case_id
from tracely_sdk.store._base import Promotion, StatedRun
from tracely_sdk.store._model import (
    CASE_ID_PATTERN,
    CASE_RESULT_TYPES,
    MAX_STORED_INT,
    RUN_ID_PATTERN,
    RUN_MODES,
    normalise_tags,
)

__all__ = [
    "ERROR_CODES",
    "PATH_PARAMETERS",
    "SCHEMAS",
    "Shape",
    "check_run_id",
    "check_trace_id",
    "parse",
    "path_parameter",
]

TRACE_ID_PATTERN: Final = "^[0-9a-fA-F]{32}$"
_TRACE_ID_RE: Final = re.compile(TRACE_ID_PATTERN)
_RUN_ID_RE: Final = re.compile(RUN_ID_PATTERN)
MAX_PAGE: Final = 1000
_MAX_OFFSET: Final = 10**9
_NS_DESCRIPTION: Final = "Unix time in nanoseconds"
# Every error code an answer carries: "invalid" (a request the models refuse) and the codes of
# the statuses the server answers.
ERROR_CODES: Final = ("invalid", *dict.fromkeys(_STATUS_CODES.values()))


# --------------------------------------------------------------------------------------------
# the rules of single values, each with the words a refusal uses


def check_trace_id(value: object) -> str:
    """A trace id (32 hexadecimal characters, not all zeros), lowercased; ValueError if not."""
    if not isinstance(value, str) or not _TRACE_ID_RE.fullmatch(value) or not value.strip("0"):
        shown = value if isinstance(value, str) and len(value) <= 40 else "the value given"
        raise ValueError(
            f"invalid trace id {shown!r}: expected 32 hexadecimal characters, not all zeros"
        )
    return value.lower()


def check_run_id(value: object) -> str:
    """A run id (16 hexadecimal characters); ValueError if not."""
    if not isinstance(value, str) or not _RUN_ID_RE.fullmatch(value):
        shown = value if isinstance(value, str) and len(value) <= 40 else "the value given"
        raise ValueError(f"invalid run id {shown!r}: expected 16 hexadecimal characters")
    return value


def _says(expected: str) -> WrapValidator:
    """A value's refusal in the API's words: ``must be <expected>``. A problem already worded
    (a field of an object in a list, say) keeps its place and words, and a rule's ValueError
    (an invalid tag) its message."""

    def check(value: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            errors = exc.errors()
            if any(e["type"] in _WORDED for e in errors):
                if errors[0]["type"] == "value_error" and not errors[0]["loc"]:
                    raise _refused(str(errors[0]["ctx"]["error"])) from None
                raise
            raise PydanticCustomError(
                "expected", "must be {expected}", {"expected": expected}
            ) from None

    return WrapValidator(check)


_WORDED: Final = frozenset({"expected", "refused", "value_error", "missing", "extra_forbidden"})


def _refused(reason: str) -> PydanticCustomError:
    return PydanticCustomError("refused", "{reason}", {"reason": reason})


def _rule(check: Callable[[Any], Any]) -> PlainValidator:
    """A value checked by ``check``, whose ValueError says what is wrong."""

    def run(value: Any) -> Any:
        try:
            return check(value)
        except ValueError as exc:
            raise _refused(str(exc)) from None

    return PlainValidator(run)


def _decimal(value: Any) -> Any:
    """A query parameter's ASCII digits as an integer (a superscript two is no number)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12:
        return int(value)
    return value


def _tags(value: Any) -> Any:
    return list(normalise_tags(value)) if isinstance(value, list) else value


def _tag(value: Any) -> Any:
    return normalise_tags([value])[0] if isinstance(value, str) else value


_WHOLE_NS: Final = f"a whole number from 0 to {MAX_STORED_INT}"
_WHOLE_VERSION: Final = f"a whole number from 1 to {MAX_STORED_INT}"

TraceId = Annotated[
    str, _rule(check_trace_id), WithJsonSchema({"type": "string", "pattern": TRACE_ID_PATTERN})
]
CaseId = Annotated[
    str, _rule(validate_case_id), WithJsonSchema({"type": "string", "pattern": CASE_ID_PATTERN})
]
RunId = Annotated[
    str, _rule(check_run_id), WithJsonSchema({"type": "string", "pattern": RUN_ID_PATTERN})
]
Nanoseconds = Annotated[
    int, Field(ge=0, le=MAX_STORED_INT, description=_NS_DESCRIPTION), _says(_WHOLE_NS)
]
Version = Annotated[int, Field(ge=1, le=MAX_STORED_INT), _says(_WHOLE_VERSION)]
Tags = Annotated[list[str], BeforeValidator(_tags), _says("a list of strings")]
Tag = Annotated[str, BeforeValidator(_tag), _says("a string")]
Text = Annotated[str, _says("a string")]
# The store refuses a blank name with its own message; documented here.
Name = Annotated[str, _says("a string"), Field(json_schema_extra={"minLength": 1})]
JSON = Annotated[Any, Field(description="any JSON value")]


def _number(minimum: float | None = None) -> PlainValidator:
    """A JSON number, kept as it came (an integer stays one: a run is kept as it was sent)."""

    def check(value: Any) -> Any:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise PydanticCustomError("number_type", "must be a number")
        if minimum is not None and value < minimum:
            raise PydanticCustomError(
                "number_type", "must be at least {minimum}", {"minimum": minimum}
            )
        return value

    return PlainValidator(check)


Number = Annotated[float, _number(), WithJsonSchema({"type": "number"})]
Seconds = Annotated[float, _number(0), WithJsonSchema({"type": "number", "minimum": 0})]
PageSize = Annotated[
    int,
    Field(ge=1, le=MAX_PAGE),
    BeforeValidator(_decimal),
    _says(f"a whole number from 1 to {MAX_PAGE}"),
]
Offset = Annotated[
    int,
    Field(ge=0, le=_MAX_OFFSET),
    BeforeValidator(_decimal),
    _says(f"a whole number from 0 to {_MAX_OFFSET}"),
]


class _DocumentedAs:
    """Annotated metadata: the value is documented as ``model``'s schema, and checked as
    its own type says."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        return handler(self.model.__pydantic_core_schema__)


# The parameters of the paths, by name: their rule and what the document says of them.
PATH_PARAMETERS: Final[Mapping[str, tuple[Any, str]]] = {
    "trace_id": (TraceId, "a trace id: 32 hexadecimal characters"),
    "case_id": (CaseId, "a case id"),
    "run_id": (RunId, "a run id: 16 hexadecimal characters"),
}
_PATH_ADAPTERS: Final = {name: TypeAdapter(kind) for name, (kind, _) in PATH_PARAMETERS.items()}


def _values(model: BaseModel) -> dict[str, Any]:
    """A model's fields as they were validated (JSON values are not copied again)."""
    return {name: getattr(model, name) for name in type(model).model_fields}


class Shape(BaseModel):
    """A JSON object of the API: strict types (``"5"`` is no number), no unknown fields."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    noun: ClassVar[str] = "the body"  # how a refusal names the whole
    member: ClassVar[str] = "field"  # and each part
    refused_as: ClassVar[str] = "invalid"  # the error code of a refusal (a rule's: "invalid")


class Whole(Shape):
    """A stored object: in an answer, every field is present (``null`` where unset)."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)


class Query(Shape):
    """A request's query parameters; a refusal of them is a bad request, not invalid data."""

    noun: ClassVar[str] = "the query"
    member: ClassVar[str] = "query parameter"
    refused_as: ClassVar[str] = "bad_request"


# --------------------------------------------------------------------------------------------
# bundles (documented here; tracely_otel.validate_bundle checks them)


class _Open(Shape):
    """An object that keeps the fields it does not describe, as they came."""

    model_config = ConfigDict(extra="allow")


class CallError(_Open):
    type: str
    message: str


class Entry(Shape):
    """One recorded call."""

    seq: int | None = None
    args: JSON = None
    input: JSON = None
    output: JSON = None
    error: CallError | None = None
    usage: JSON = None
    output_type: str | None = None
    provider: str | None = None
    span_id: str | None = None
    started_at: int | None = Field(None, description=_NS_DESCRIPTION)
    ended_at: int | None = Field(None, description=_NS_DESCRIPTION)


class Bundle(Shape):
    """A fixture bundle (tracely.bundle/1): every tool and LLM call of a trace, with the agent
    root's input and output and a checksum."""

    format: str | None = None
    trace_id: str | None = None
    service: str | None = None
    started_at: int | None = None
    agent: dict[str, Any] | None = None
    tools: dict[str, list[Entry]] | None = None
    llm: dict[str, list[Entry]] | None = None
    incomplete: list[dict[str, Any]] | None = None
    replay: dict[str, Any] | None = None
    trace: dict[str, Any] | None = Field(
        None,
        description="Every call of the trace, whoever recorded it: what scenario trace "
        "checks read.",
    )
    checksum: str | None = None


# A bundle is an object here; its shape and checksum are tracely_otel's to check (recordings)
# or the store's (cases), with the messages those give.
BundleObject = Annotated[dict[str, Any], _says("a JSON object"), _DocumentedAs(Bundle)]


# --------------------------------------------------------------------------------------------
# recordings


class RecordingSummary(Whole):
    """A recording without its bundle."""

    trace_id: TraceId
    service: Text
    agent_name: Text | None = None
    started_at: Nanoseconds
    status: Literal["ok", "error"]
    input: JSON = Field(None, description="the agent root's recorded input, or null")
    output: JSON = Field(None, description="the agent root's recorded output, or null")
    replay_mode: Text | None = None
    received_at: Nanoseconds | None = Field(
        None, description="Unix time in nanoseconds (on a new recording: when it arrives)"
    )


class Recording(RecordingSummary):
    """One recorded trace with its bundle (what an SDK's store writer sends)."""

    noun: ClassVar[str] = "the recording"

    bundle: BundleObject

    def to_store(self, received_at: int) -> StoredRecording:
        data = _values(self)
        if data["received_at"] is None:
            data["received_at"] = received_at
        return StoredRecording.from_dict(data)


class Stored(Shape):
    stored: bool = Field(
        description="true when the recording was new or replaced a less complete one of the "
        "same trace"
    )


class TraceList(Shape):
    traces: list[RecordingSummary]


class TraceQuery(Query):
    limit: PageSize = Field(50, description="at most this many")
    offset: Offset = Field(0, description="skip this many")
    service: str | None = Field(None, description="only this service")
    agent: str | None = Field(None, description="only this agent")


# --------------------------------------------------------------------------------------------
# cases


class CaseVersion(Whole):
    """One recorded version of a case."""

    version: Version
    input: JSON
    expected_output: JSON = None
    bundle: BundleObject
    source_trace_id: Text | None = None
    created_at: Nanoseconds
    note: Text | None = None

    def to_store(self, case_id: str) -> StoredVersion:
        return StoredVersion(case_id=case_id, **_values(self))


class Case(Whole):
    """A regression case: its current version's recording, and how to replay it."""

    id: CaseId
    name: Name
    entrypoint: Text | None = Field(None, description="module:function")
    input: JSON
    expected_output: JSON
    bundle: BundleObject
    source_trace_id: Text | None
    version: Version
    tags: Tags
    created_at: Nanoseconds
    updated_at: Nanoseconds

    def to_store(self) -> StoredCase:
        return StoredCase(**{**_values(self), "tags": tuple(self.tags)})


class CaseList(Shape):
    cases: list[Case]


class VersionList(Shape):
    versions: list[CaseVersion]


class CaseQuery(Query):
    tag: Tag | None = Field(None, description="only cases with this tag")


class PromoteRequest(Shape):
    """Which trace to promote, and the case's name."""

    noun: ClassVar[str] = "the promotion"

    trace_id: TraceId
    name: Name
    id: CaseId | None = None
    entrypoint: Text | None = None
    tags: Tags | None = None


class Stated(Shape):
    """For a trace recorded without an agent span: the input to replay it with and the
    expected output."""

    input: JSON = Field(description='the agent\'s input: {"args": [...], "kwargs": {...}}')
    expected_output: JSON


class PromotionItem(PromoteRequest):
    """One promotion of a batch."""

    stated: Stated | None = None

    def to_store(self) -> Promotion:
        stated = self.stated
        return Promotion(
            trace_id=self.trace_id,
            name=self.name,
            case_id=self.id,
            entrypoint=self.entrypoint,
            tags=tuple(self.tags or ()),
            stated=StatedRun(stated.input, stated.expected_output) if stated else None,
        )


class PromotionsRequest(Shape):
    """Several promotions, made in one transaction: all of them or none."""

    noun: ClassVar[str] = "the promotions"

    promotions: Annotated[
        list[PromotionItem], Field(min_length=1), _says("a non-empty list of promotions")
    ]


class UpdateCaseRequest(Shape):
    """The fields to change."""

    noun: ClassVar[str] = "the update"

    name: Text | None = None
    tags: Tags | None = None
    entrypoint: Text | None = Field(None, description="module:function; an empty string clears it")


class PutCaseRequest(Shape):
    """A case with exactly this history (an import)."""

    noun: ClassVar[str] = "the case import"

    case: Case
    history: Annotated[
        list[CaseVersion], Field(min_length=1), _says("a non-empty list of versions")
    ]


class RecaptureRequest(Shape):
    """The run to re-record a case from."""

    noun: ClassVar[str] = "the recapture"

    trace_id: TraceId
    note: Text | None = None


# --------------------------------------------------------------------------------------------
# runs

# The Python type of each kind of a run case's field (CASE_RESULT_TYPES in the store says
# which field is which kind: the pages and `tracely runs show` read stored runs by it).
_KIND_TYPES: Final[Mapping[str, Any]] = {
    "a string": str,
    "an integer": int,
    "a number": Number,
    "true or false": bool,
    "an object": dict[str, Any],
    "a list": list[Any],
    "a list of strings": list[str],
    "a list of objects": list[dict[str, Any] | str],
}


def _run_case_field(kind: str) -> Any:
    return (Annotated[_KIND_TYPES[kind] | None, _says(f"{kind} or null")], None)


RunCase: type[_Open] = cast(Any, create_model)(
    "RunCase",
    __base__=_Open,
    __doc__="One case's result, as in the JSON report of tracely replay; values beyond a "
    "size are cut and end with a marker (… [truncated: N characters], … [N more items], "
    "… [collapsed: N bytes of JSON]). Fields not listed are kept as they came.",
    **{
        name: ((Text, ...) if name == "case_id" else _run_case_field(kind))
        for name, kind in CASE_RESULT_TYPES.items()
    },
)

_COUNT = Annotated[int | None, _says("an integer")]


class RunCounts(_Open):
    """Counts by verdict, as in the JSON report."""

    total: _COUNT = None
    passed: _COUNT = None
    failed: _COUNT = None
    incomplete: _COUNT = None
    errored: _COUNT = None
    lenient: _COUNT = None
    not_run: _COUNT = None


class RunSummary(Whole):
    """A replay (or scenarios) run without its cases."""

    id: RunId
    started_at: Nanoseconds
    duration_s: Annotated[Seconds, _says("a number of seconds from 0")]
    mode: Literal[RUN_MODES]  # type: ignore[valid-type]
    ok: Annotated[bool, _says("true or false")]
    summary: RunCounts
    source: Text | None = Field(None, description="where the cases came from")
    otlp_endpoint: Text | None = Field(
        None, description="where the replay spans were exported (null: no OTLP endpoint)"
    )
    tracely_version: Text


class Run(RunSummary):
    """A run and each case's result (what tracely replay sends)."""

    noun: ClassVar[str] = "the run"

    cases: Annotated[list[RunCase], _says("a list of objects, each with a case_id")] = []  # type: ignore[valid-type]

    def to_store(self) -> StoredRun:
        """The run as it was sent (fields not given stay so; the store bounds its values)."""
        return StoredRun.from_dict(self.model_dump(exclude_unset=True))


class RunList(Shape):
    runs: list[RunSummary]


class RunSaved(Shape):
    id: RunId


class RunQuery(Query):
    limit: PageSize = Field(20, description="at most this many")
    offset: Offset = Field(0, description="skip this many")
    trace_id: TraceId | None = Field(
        None, description="only runs one of whose cases made this trace"
    )


# --------------------------------------------------------------------------------------------
# health, errors, OTLP


class Health(Shape):
    status: Literal["ok", "ready", "draining", "failing", "unavailable"]
    problems: list[str] | None = Field(
        None, description="What is wrong, each naming the store or journal concerned."
    )


class ErrorDetail(Shape):
    code: Literal[ERROR_CODES]  # type: ignore[valid-type]
    message: str
    detail: dict[str, Any] | None = None


class Error(Shape):
    """The API's error: ``{"error": {"code", "message", "detail"?}}``."""

    error: ErrorDetail


class ExportTraceServiceRequest(BaseModel):
    """OTLP/JSON: hex trace and span ids, integer enums, 64-bit integers as decimal strings
    (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding)."""

    resourceSpans: list[dict[str, Any]] | None = None


class PartialSuccess(Shape):
    rejectedSpans: str | int | None = None
    errorMessage: str | None = None


class ExportTraceServiceResponse(Shape):
    partialSuccess: PartialSuccess | None = None


class Status(Shape):
    """google.rpc.Status: how OTLP/HTTP reports a failed export."""

    code: int | None = None
    message: str
    details: list[dict[str, Any]] | None = None


# The schemas of the document's answers (and of what OTLP/HTTP takes), by name; the request
# bodies' schemas come from the routes.
SCHEMAS: Final[Mapping[str, type[BaseModel]]] = {
    model.__name__: model
    for model in (
        Error,
        Bundle,
        Recording,
        RecordingSummary,
        Stored,
        TraceList,
        Case,
        CaseList,
        CaseVersion,
        VersionList,
        Run,
        RunSummary,
        RunList,
        RunSaved,
        Health,
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
        Status,
    )
}


# --------------------------------------------------------------------------------------------
# refusals

M = TypeVar("M", bound="Shape")


def parse(model: type[M], value: Any) -> M:
    """``value`` as ``model``, or the API's 400 naming the first problem; unknown fields, and
    missing ones, are named all at once."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise _refusal(model, exc.errors(include_url=False), model.noun) from None


def path_parameter(name: str, value: str) -> str:
    """A path's parameter checked by its rule, or the API's 400 saying what is wrong."""
    try:
        return cast(str, _PATH_ADAPTERS[name].validate_python(value))
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        reason = error["ctx"]["reason"] if error["type"] == "refused" else error["msg"]
        raise HTTPError(400, reason, code="invalid") from None


def _refusal(model: type[Shape], errors: list[Any], what: str) -> HTTPError:
    code = model.refused_as
    detail: dict[str, Any] | None
    for kind in ("extra_forbidden", "missing"):
        found = [e for e in errors if e["type"] == kind]
        if not found:
            continue
        where = tuple(found[0]["loc"][:-1])
        names = sorted(str(e["loc"][-1]) for e in found if tuple(e["loc"][:-1]) == where)
        inner = _model_at(model, where)
        if kind == "missing":
            message = f"missing required {inner.member}(s) {', '.join(names)}"
            detail = {"missing_fields": names}
        else:
            shown = ", ".join(map(repr, names))
            accepted = ", ".join(sorted(inner.model_fields))
            message = f"unknown {inner.member}(s) {shown}; accepted: {accepted}"
            detail = {"unknown_fields": names}
        at = f"{what}: {_path(where)}" if where else what
        return HTTPError(400, f"{at}: {message}", code=code, detail=detail)
    error = errors[0]
    loc, kind = tuple(error["loc"]), error["type"]
    if not loc and kind in ("model_type", "dict_type"):
        return HTTPError(400, f"{what} must be a JSON object")
    field = _path(loc)
    prefix = f"{what}: {field}" if field else what
    detail = {"field": field} if field else None
    if kind in ("refused", "value_error"):
        reason = error["ctx"]["reason"] if kind == "refused" else str(error["ctx"]["error"])
        return HTTPError(400, f"{prefix}: {reason}", code="invalid", detail=detail)
    if kind == "expected":
        expected = error["ctx"]["expected"]
    elif kind == "literal_error":
        expected = f"one of {error['ctx']['expected']}"
    else:
        expected = _EXPECTED.get(kind, "")
    if not expected:  # a rule pydantic words well enough ("should have at least 1 item")
        return HTTPError(400, f"{prefix}: {error['msg']}", code=code, detail=detail)
    shown = _shown(error.get("input"))
    return HTTPError(400, f"{prefix} must be {expected}, got {shown}", code=code, detail=detail)


_EXPECTED: Final = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "a list",
    "number_type": "a number",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
}


def _model_at(model: type[Shape], loc: tuple[Any, ...]) -> type[Shape]:
    """The model of the object at ``loc`` inside ``model`` (list indexes pass through)."""
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is not None:
            model = _model_in(field.annotation) or model
    return model


def _model_in(annotation: Any) -> type[Shape] | None:
    """The model an annotation holds, through lists, unions and Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, Shape):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _path(loc: tuple[Any, ...]) -> str:
    """``('cases', 0, 'tags')`` as ``cases[0]: tags``, ``('summary', 'failed')`` as
    ``summary.failed``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out.endswith("]"):
            out += f": {part}"
        else:
            out += f".{part}" if out else str(part)
    return out


def _shown(value: Any) -> str:
    try:
        text = orjson.dumps(value, default=str).decode()
    except orjson.JSONEncodeError:
        text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
