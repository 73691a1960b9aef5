"""What the store holds: recordings of production traces, the regression cases made from them,
and the results of replay runs.

Every timestamp is an integer of Unix nanoseconds. Every value that came from a run (inputs,
outputs, bundles) is plain JSON.

Case ids become file names when cases are exported, so they are validated strictly by
:func:`validate_case_id`; a bad id (or name, entrypoint, tag) raises :class:`InvalidCase`, which is
both a :class:`~tracely_sdk.errors.StoreError` and a :class:`ValueError`.
"""

from __future__ import annotations

import re
import secrets
import time
import unicodedata
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, cast

import orjson

from tracely_otel import Bundle
from tracely_sdk.errors import StoreError

__all__ = [
    "Case",
    "CaseVersion",
    "InvalidCase",
    "Recording",
    "Run",
    "bound_json",
    "bundle_weight",
    "check_case",
    "readable_case_result",
    "new_run_id",
    "dumps_json",
    "dumps_json_bytes",
    "json_bytes",
    "normalise_tags",
    "now_ns",
    "redact_url",
    "slugify",
    "validate_case_id",
    "validate_entrypoint",
]

CASE_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,127}$"
_CASE_ID_RE = re.compile(CASE_ID_PATTERN)
_TRACE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_ENTRYPOINT_RE = re.compile(rf"^{_IDENT}(\.{_IDENT})*:{_IDENT}(\.{_IDENT})*$")
_TAG_RE = re.compile(r"^[^\s,]{1,64}$")
# Names a file cannot have on Windows whatever its extension: an exported case must open anywhere.
_RESERVED_STEMS = frozenset(
    {"con", "prn", "aux", "nul"}
    | {f"com{i}" for i in range(1, 10)}
    | {f"lpt{i}" for i in range(1, 10)}
)
_STATUSES = ("ok", "error")
RUN_ID_PATTERN = r"^[0-9a-f]{16}$"
_RUN_ID_RE = re.compile(RUN_ID_PATTERN)
# What a stored run keeps of each value: a run's diffs can be as large as the inputs they
# compare, so beyond these a value is cut, with a marker saying how much was left out.
MAX_RUN_STRING = 2000
MAX_RUN_ITEMS = 50
MAX_RUN_DEPTH = 12
MAX_RUN_CASE_BYTES = 64 * 1024
UNKNOWN_SERVICE = "unknown_service"
MAX_STORED_INT = 2**63 - 1
"""The largest integer a store column holds (SQLite and PostgreSQL both use signed 64 bits)."""


class InvalidCase(StoreError, ValueError):
    """A case id, name, entrypoint or tag is not acceptable; the message says what is allowed."""


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, whether in the authority or as a
    ``password=`` query option (as libpq takes it); safe to show in a message or log."""
    # The password runs to the authority's last "@", as URL parsers read it.
    shown = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*):[^/?#]*@", r"\1:***@", url)
    base, sep, query = shown.partition("?")
    if not sep:
        return shown
    parts = []
    for item in query.split("&"):
        key = item.split("=", 1)[0]
        parts.append(f"{key}=***" if urllib.parse.unquote(key).lower() == "password" else item)
    return base + "?" + "&".join(parts)


def now_ns() -> int:
    """The current time in Unix nanoseconds."""
    return time.time_ns()


def dumps_json(value: Any) -> str:
    """``value`` as compact JSON text with sorted keys (equal values give equal text)."""
    return dumps_json_bytes(value).decode()


def dumps_json_bytes(value: Any) -> bytes:
    """:func:`dumps_json` as UTF-8 bytes (what a checksum is taken over)."""
    return json_bytes(value, orjson.OPT_SORT_KEYS)


def json_bytes(value: Any, option: int = 0) -> bytes:
    """``value`` as orjson writes it with ``option`` and ``OPT_NON_STR_KEYS`` (a key that is
    not a string written as one); ValueError for a value JSON cannot hold.

    Keys are nearly always strings, and orjson writes them up to twice as fast without
    ``OPT_NON_STR_KEYS`` (the same text): that is tried first, the option only when it fails.
    """
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        pass
    try:
        return orjson.dumps(value, option=option | orjson.OPT_NON_STR_KEYS)
    except TypeError as exc:
        raise ValueError(f"value cannot be stored as JSON: {exc}") from exc


def validate_case_id(case_id: object) -> str:
    """Return ``case_id`` if it is a valid case id, else raise :class:`InvalidCase`.

    A case id is 1-128 characters of lowercase letters, digits, ``.``, ``_`` and ``-``, starting
    with a letter or digit, never containing ``..`` and never a reserved device name (``con``,
    ``nul``, ``com1``, ...). Such an id is always a plain file name, never a path.
    """
    if not isinstance(case_id, str):
        raise InvalidCase(f"case id must be a string, not {type(case_id).__name__}")
    if not _CASE_ID_RE.fullmatch(case_id) or ".." in case_id:
        shown = case_id if len(case_id) <= 40 else case_id[:40] + "..."
        raise InvalidCase(
            f"invalid case id {shown!r}: use 1-128 characters of a-z, 0-9, '.', '_' and '-', "
            "starting with a letter or digit, without '..'"
        )
    if case_id.split(".", 1)[0] in _RESERVED_STEMS:
        raise InvalidCase(
            f"invalid case id {case_id!r}: {case_id.split('.', 1)[0]!r} is a reserved file name"
        )
    return case_id


def slugify(name: str, *, max_length: int = 120) -> str:
    """A valid case id made from a human name (``"Paris weather"`` -> ``"paris-weather"``)."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    text = re.sub(r"[^a-z0-9._]+", "-", text)
    text = re.sub(r"\.{2,}", ".", text)
    text = re.sub(r"-{2,}", "-", text)
    text = re.sub(r"^[^a-z0-9]+", "", text)[:max_length]
    text = re.sub(r"[^a-z0-9]+$", "", text)
    if not text:
        text = "case"
    if text.split(".", 1)[0] in _RESERVED_STEMS:
        text = f"{text}-case"
    return validate_case_id(text)


def validate_entrypoint(entrypoint: object) -> str | None:
    """``None``, or a ``module.path:function`` string; anything else raises :class:`InvalidCase`."""
    if entrypoint is None:
        return None
    if not isinstance(entrypoint, str) or not _ENTRYPOINT_RE.fullmatch(entrypoint):
        raise InvalidCase(
            f"invalid entrypoint {entrypoint!r}: expected 'module:function' (e.g. 'weather_agent:run')"
        )
    return entrypoint


def normalise_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """Tags as a sorted tuple without duplicates; each is 1-64 characters, no spaces or commas."""
    if isinstance(tags, (str, bytes)):
        raise InvalidCase(f"tags must be a list of strings, not a single string ({tags!r})")
    result = set()
    for tag in tags:
        if not isinstance(tag, str) or not _TAG_RE.fullmatch(tag):
            raise InvalidCase(f"invalid tag {tag!r}: 1-64 characters without spaces or commas")
        result.add(tag)
    return tuple(sorted(result))


def _values(obj: Any, *leave_out: str) -> dict[str, Any]:
    """A dataclass's fields by name, in their order (values not copied)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if f.name not in leave_out}


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidCase(f"a case needs a non-empty name, got {name!r}")
    return name


def _check_ns(what: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_STORED_INT:
        raise ValueError(
            f"{what} must be an integer of Unix nanoseconds from 0 to {MAX_STORED_INT}, "
            f"got {value!r}"
        )
    return value


def _check_version(case_id: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_STORED_INT:
        raise InvalidCase(
            f"case {case_id}: version must be an integer from 1 to {MAX_STORED_INT}, got {value!r}"
        )


def _started_at(value: Any) -> int:
    """A bundle's start time as a recording keeps it: a time the store cannot hold (OTLP
    allows up to 2**64 - 1 ns) is clamped into range, so the trace is still recorded."""
    if not isinstance(value, int) or isinstance(value, bool):
        return 0
    return min(max(value, 0), MAX_STORED_INT)


def bundle_weight(bundle: Mapping[str, Any]) -> int:
    """How complete a bundle is as a recording of its trace: more is more complete.

    A trace's spans can arrive in several batches, and a late span can also turn a call that
    was incomplete into a complete one; the bundle with the larger weight is kept. Each span
    seen counts one (agent root, recorded calls, incomplete calls) and each call that can be
    served counts one more, so a more complete recording of the same spans outweighs it too.
    """
    weight = 2 if isinstance(bundle.get("agent"), Mapping) else 0
    for kind in ("tools", "llm"):
        section = bundle.get(kind)
        if isinstance(section, Mapping):
            weight += 2 * sum(len(v) for v in section.values() if isinstance(v, (list, tuple)))
    incomplete = bundle.get("incomplete")
    if isinstance(incomplete, (list, tuple)):
        weight += len(incomplete)
    summary = bundle.get("trace")
    if isinstance(summary, Mapping) and isinstance(summary.get("spans"), int):
        weight += summary["spans"]  # a late span that is no call still completes the trace
    return weight


@dataclass(frozen=True)
class Recording:
    """One production (or replayed) trace as the store keeps it.

    ``input`` is the agent root's recorded input (``{"args": [...], "kwargs": {...}}``) or
    ``None`` when the trace has none; ``replay_mode`` is set (``"recorded"``/``"lenient"``) when
    the trace was made by a replay run.
    """

    trace_id: str
    service: str
    agent_name: str | None
    started_at: int
    status: str
    input: Any
    output: Any
    bundle: Bundle
    replay_mode: str | None = None
    received_at: int = field(default_factory=now_ns)

    def __post_init__(self) -> None:
        if not isinstance(self.trace_id, str) or not _TRACE_ID_RE.fullmatch(self.trace_id):
            raise ValueError(f"invalid trace id {self.trace_id!r}")
        if self.status not in _STATUSES:
            raise ValueError(f"status must be 'ok' or 'error', got {self.status!r}")
        if not isinstance(self.bundle, Mapping):
            raise ValueError("a recording's bundle must be a JSON object")
        if not isinstance(self.bundle, dict):
            object.__setattr__(self, "bundle", dict(self.bundle))
        bundle_trace = self.bundle.get("trace_id")
        if bundle_trace is not None and bundle_trace != self.trace_id:
            raise ValueError(
                f"recording {self.trace_id} carries the bundle of trace {bundle_trace}"
            )
        _check_ns("started_at", self.started_at)
        _check_ns("received_at", self.received_at)

    @classmethod
    def from_bundle(cls, bundle: Mapping[str, Any], *, received_at: int | None = None) -> Recording:
        """The recording of an extracted bundle (one with a ``trace_id``)."""
        trace_id = bundle.get("trace_id")
        if not isinstance(trace_id, str):
            raise ValueError("only an extracted bundle (one with a 'trace_id') is a recording")
        agent = bundle.get("agent")
        agent = agent if isinstance(agent, Mapping) else {}
        replay = bundle.get("replay")
        mode = replay.get("mode") if isinstance(replay, Mapping) else None
        started = bundle.get("started_at")
        return cls(
            trace_id=trace_id,
            service=str(bundle.get("service") or UNKNOWN_SERVICE),
            agent_name=agent.get("name") if isinstance(agent.get("name"), str) else None,
            started_at=_started_at(started),
            status="error" if "error" in agent else "ok",
            input=agent.get("input"),
            output=agent.get("output"),
            bundle=cast(Bundle, dict(bundle)),
            replay_mode=str(mode) if mode is not None else None,
            received_at=now_ns() if received_at is None else received_at,
        )

    @property
    def weight(self) -> int:
        """See :func:`bundle_weight`."""
        return bundle_weight(self.bundle)

    def to_dict(self) -> dict[str, Any]:
        # By hand, in the fields' order: the store writer makes one for every recording it takes.
        return {
            "trace_id": self.trace_id,
            "service": self.service,
            "agent_name": self.agent_name,
            "started_at": self.started_at,
            "status": self.status,
            "input": self.input,
            "output": self.output,
            "bundle": self.bundle,
            "replay_mode": self.replay_mode,
            "received_at": self.received_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Recording:
        try:
            return cls(
                trace_id=data["trace_id"],
                service=data["service"],
                agent_name=data.get("agent_name"),
                started_at=data["started_at"],
                status=data["status"],
                input=data.get("input"),
                output=data.get("output"),
                bundle=data["bundle"],
                replay_mode=data.get("replay_mode"),
                received_at=data.get("received_at", 0),
            )
        except KeyError as exc:
            raise ValueError(f"a recording needs {exc.args[0]!r}") from None


@dataclass(frozen=True)
class CaseVersion:
    """One recorded version of a case: version 1 is the promotion, each recapture adds one."""

    case_id: str
    version: int
    input: Any
    expected_output: Any
    bundle: Bundle
    source_trace_id: str | None
    created_at: int
    note: str | None = None

    def __post_init__(self) -> None:
        validate_case_id(self.case_id)
        _check_version(self.case_id, self.version)
        if not isinstance(self.bundle, dict):
            raise InvalidCase(
                f"case {self.case_id} v{self.version}: the bundle must be a JSON object"
            )
        if self.note is not None and not isinstance(self.note, str):
            raise InvalidCase(f"case {self.case_id} v{self.version}: note must be a string")
        _check_ns("created_at", self.created_at)

    def to_dict(self) -> dict[str, Any]:
        """The version without its ``case_id`` (the way a case file lists its history)."""
        return _values(self, "case_id")


@dataclass(frozen=True)
class Case:
    """A regression case: a recorded run promoted to a test, replayed hermetically in CI.

    ``input``, ``expected_output``, ``bundle`` and ``source_trace_id`` are those of the current
    ``version``; :meth:`~tracely_sdk.store.Store.case_history` has every version. ``problem``
    says why a stored case cannot be trusted (its row does not match the checksum it was
    written with): replay reports such a case ERRORED without running it, export refuses it.
    """

    id: str
    name: str
    entrypoint: str | None
    input: Any
    expected_output: Any
    bundle: Bundle
    source_trace_id: str | None
    version: int
    tags: tuple[str, ...]
    created_at: int
    updated_at: int
    problem: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        tags = check_case(
            self.id,
            self.name,
            self.entrypoint,
            self.input,
            self.bundle,
            self.version,
            self.tags,
            self.created_at,
            self.updated_at,
        )
        object.__setattr__(self, "tags", tags)

    def to_dict(self) -> dict[str, Any]:
        data = _values(self, "problem")
        data["tags"] = list(self.tags)
        return data | ({"problem": self.problem} if self.problem is not None else {})


def check_case(
    case_id: Any,
    name: Any,
    entrypoint: Any,
    input: Any,
    bundle: Any,
    version: Any,
    tags: Iterable[str],
    created_at: Any,
    updated_at: Any,
) -> tuple[str, ...]:
    """What :class:`Case` requires of its fields, and its tags normalised: InvalidCase (or
    ValueError, for a time) naming the first field that is wrong. A reader that builds a case
    of its own from a stored row checks it here, so it accepts what a Case accepts."""
    validate_case_id(case_id)
    _check_name(name)
    validate_entrypoint(entrypoint)
    normalised = normalise_tags(tags)
    if input is None:
        raise InvalidCase(f"case {case_id} has no input: a case replays a recorded agent input")
    if not isinstance(bundle, dict):
        raise InvalidCase(f"case {case_id}: the bundle must be a JSON object")
    _check_version(case_id, version)
    _check_ns("created_at", created_at)
    _check_ns("updated_at", updated_at)
    return normalised


def new_run_id() -> str:
    """A fresh run id: 16 hexadecimal characters (a trace id has 32, so the two never mix)."""
    return secrets.token_hex(8)


def bound_json(value: Any, *, depth: int = 0) -> Any:
    """``value`` with every string, list and object cut to the limits a stored run keeps.

    A string longer than :data:`MAX_RUN_STRING` keeps its start and ends with
    ``… [truncated: N characters]``; a list past :data:`MAX_RUN_ITEMS` ends with the item
    ``… [N more items]``; an object past that many keys gets the key ``…`` with
    ``[N more keys]``; anything nested deeper than :data:`MAX_RUN_DEPTH` becomes
    ``… [collapsed: N bytes of JSON]``. Each result is within the limits, so bounding a
    bounded value changes nothing.
    """
    if isinstance(value, str):
        if len(value) <= MAX_RUN_STRING:
            return value
        # The marker fits in the limit, so a bounded value is bounded again unchanged.
        return value[: MAX_RUN_STRING - 40] + f"… [truncated: {len(value)} characters]"
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_RUN_DEPTH:
        return _collapsed(value)
    if isinstance(value, Mapping):
        keys = list(value)
        if len(keys) <= MAX_RUN_ITEMS:
            return {str(k): bound_json(value[k], depth=depth + 1) for k in keys}
        kept = keys[: MAX_RUN_ITEMS - 1]
        out = {str(k): bound_json(value[k], depth=depth + 1) for k in kept}
        out["…"] = f"[{len(keys) - len(kept)} more keys]"
        return out
    if isinstance(value, (list, tuple)):
        if len(value) <= MAX_RUN_ITEMS:
            return [bound_json(v, depth=depth + 1) for v in value]
        items = [bound_json(v, depth=depth + 1) for v in value[: MAX_RUN_ITEMS - 1]]
        items.append(f"… [{len(value) - len(items)} more items]")
        return items
    return value


def _collapsed(value: Any) -> str:
    size = len(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str))
    return f"… [collapsed: {size} bytes of JSON]"


# The fields of a stored case result that can be large, collapsed first when a case is still
# over MAX_RUN_CASE_BYTES after bound_json.
_HEAVY_CASE_FIELDS = ("output", "expected_output", "traceback", "diff")


def bound_case_result(case: Mapping[str, Any]) -> dict[str, Any]:
    """One case of a run, bounded (see :func:`bound_json`) to :data:`MAX_RUN_CASE_BYTES`."""
    bounded: dict[str, Any] = bound_json(dict(case))
    if len(orjson.dumps(bounded, default=str)) <= MAX_RUN_CASE_BYTES:
        return bounded
    for key, sides in (
        ("divergences", ("recorded", "actual")),
        ("timeline", ("recorded", "actual", "output", "error")),
    ):
        for d in bounded.get(key) or ():
            if isinstance(d, dict):
                for side in sides:
                    if side in d:
                        d[side] = _collapsed(d[side])
    for key in _HEAVY_CASE_FIELDS:
        if len(orjson.dumps(bounded, default=str)) <= MAX_RUN_CASE_BYTES:
            break
        if bounded.get(key) is not None:
            bounded[key] = _collapsed(bounded[key])
    if len(orjson.dumps(bounded, default=str)) > MAX_RUN_CASE_BYTES:
        for key in ("timeline", "output_differences", "divergences", "reasons"):
            if bounded.get(key):
                bounded[key] = [_collapsed(bounded[key])]
    return bounded


RUN_MODES: Final = ("recorded", "lenient", "scenarios")

# The type of each known field of a run's case (see Run): what its readers (the pages,
# ``tracely runs show``, the reports) rely on. Unknown fields are kept as they came.
_STR, _INT, _NUMBER, _BOOL, _OBJECT, _LIST, _STR_LIST, _ENTRIES = (
    "a string",
    "an integer",
    "a number",
    "true or false",
    "an object",
    "a list",
    "a list of strings",
    "a list of objects",
)
CASE_RESULT_TYPES: Final[Mapping[str, str]] = {
    "case_id": _STR,
    "version": _INT,
    "name": _STR,
    "tags": _STR_LIST,
    "entrypoint": _STR,
    "verdict": _STR,
    "ok": _BOOL,
    "reasons": _STR_LIST,
    "diff": _STR,
    "output_differences": _ENTRIES,
    "mode": _STR,
    "served": _LIST,
    "unused": _LIST,
    "diverged": _LIST,
    "divergences": _ENTRIES,
    "live": _LIST,
    "live_patterns": _LIST,
    "live_checks": _LIST,
    "misses": _LIST,
    "masked": _OBJECT,
    "timeline": _ENTRIES,
    "duration_s": _NUMBER,
    "trace_id": _STR,
    "agent_version": _STR,
    "tracely_version": _STR,
    "error": _OBJECT,
    "traceback": _STR,
    "scenario": _OBJECT,
}


def _has_type(value: Any, kind: str) -> bool:
    if value is None:
        return True  # every field but case_id may be null (checked by Run)
    if kind == _STR:
        return isinstance(value, str)
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _OBJECT:
        return isinstance(value, Mapping)
    if not isinstance(value, (list, tuple)):
        return False
    if kind == _STR_LIST:
        return all(isinstance(v, str) for v in value)
    if kind == _ENTRIES:
        # a string stands for an entry bound_case_result collapsed
        return all(isinstance(v, (Mapping, str)) for v in value)
    return True


def readable_case_result(case: Mapping[str, Any]) -> dict[str, Any]:
    """A stored case of a run as its readers can show it, even one kept by an older server that
    took any type: each field of the wrong type is shown as its JSON text, in the place of a
    value of the right type (the stored run itself is left as it is)."""
    shown = dict(case)
    for name, kind in CASE_RESULT_TYPES.items():
        value = case.get(name)
        if _has_type(value, kind):
            continue
        text = orjson.dumps(value, default=str).decode()
        if kind == _STR:
            shown[name] = text
        elif kind in (_STR_LIST, _ENTRIES, _LIST):
            items = value if isinstance(value, (list, tuple)) else [value]
            ok = str if kind == _STR_LIST else (Mapping, str)
            shown[name] = [
                v if isinstance(v, ok) else orjson.dumps(v, default=str).decode() for v in items
            ]
        else:
            shown[name] = None
    return shown


@dataclass(frozen=True)
class Run:
    """One ``tracely replay`` (or ``tracely scenarios run``) run: when, how, and each case's
    result, bounded in size. ``mode`` is ``recorded``/``lenient`` for replay, ``scenarios`` for
    scenarios against a live service.

    ``summary`` holds the counts by verdict (``total``, ``passed``, ``failed``, ``incomplete``,
    ``errored``, ``lenient``, ``ok``, ``mode``, ``duration_s``); ``cases`` one entry per case,
    as in the JSON report (``case_id``, ``version``, ``verdict``, ``reasons``, ``diff``,
    ``output_differences``, ``divergences``, ``trace_id``, ``duration_s``, ``agent_version``,
    ``tracely_version``, ...), each cut by :func:`bound_case_result`. ``source`` is where the
    cases came from; ``otlp_endpoint`` where the replay spans were exported (None: nowhere).
    A run listed by :meth:`~tracely_sdk.store.Store.list_runs` has no ``cases``.
    """

    id: str
    started_at: int
    duration_s: float
    mode: str
    ok: bool
    summary: dict[str, Any]
    source: str | None
    otlp_endpoint: str | None
    tracely_version: str
    cases: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _RUN_ID_RE.fullmatch(self.id):
            raise ValueError(f"invalid run id {self.id!r}: expected 16 hexadecimal characters")
        _check_ns("started_at", self.started_at)
        if not isinstance(self.duration_s, (int, float)) or isinstance(self.duration_s, bool):
            raise ValueError(f"duration_s must be a number of seconds, got {self.duration_s!r}")
        if self.mode not in RUN_MODES:
            raise ValueError(f"mode must be one of {', '.join(RUN_MODES)}, got {self.mode!r}")
        if not isinstance(self.ok, bool):
            raise ValueError(f"ok must be true or false, got {self.ok!r}")
        if not isinstance(self.summary, Mapping):
            raise ValueError("a run's summary must be a JSON object")
        for name in ("source", "otlp_endpoint"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a string or null")
        if not isinstance(self.tracely_version, str):
            raise ValueError("tracely_version must be a string")
        if isinstance(self.cases, (str, bytes)) or not all(
            isinstance(c, Mapping) and isinstance(c.get("case_id"), str) for c in self.cases
        ):
            raise ValueError("a run's cases must be objects, each with a case_id")
        object.__setattr__(self, "summary", bound_json(dict(self.summary)))
        object.__setattr__(self, "cases", tuple(bound_case_result(c) for c in self.cases))
        for name in ("source", "otlp_endpoint"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, bound_json(value))

    def trace_ids(self) -> dict[str, str]:
        """Each case's replay trace id -> its case id."""
        return {
            c["trace_id"]: c["case_id"] for c in self.cases if isinstance(c.get("trace_id"), str)
        }

    def summary_dict(self) -> dict[str, Any]:
        """The run without its cases."""
        data = self.to_dict()
        del data["cases"]
        return data

    def to_dict(self) -> dict[str, Any]:
        data = _values(self)
        data["cases"] = list(self.cases)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Run:
        """A run from :meth:`to_dict`'s shape (``cases`` may be left out); ValueError if not."""
        if not isinstance(data, Mapping):
            raise ValueError("a run must be a JSON object")
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"a run has no field(s) {', '.join(sorted(map(repr, unknown)))}")
        try:
            return cls(
                id=data["id"],
                started_at=data["started_at"],
                duration_s=data["duration_s"],
                mode=data["mode"],
                ok=data["ok"],
                summary=data["summary"],
                source=data.get("source"),
                otlp_endpoint=data.get("otlp_endpoint"),
                tracely_version=data["tracely_version"],
                cases=tuple(data.get("cases") or ()),
            )
        except KeyError as exc:
            raise ValueError(f"a run needs {exc.args[0]!r}") from None
