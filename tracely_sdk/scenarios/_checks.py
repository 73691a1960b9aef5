"""Evaluating a turn's checks: on the reply, and on the trace the service exported.

Each check returns ``None`` when it holds, else a :class:`Failure` saying which check, what was
expected and what came back. Trace checks read the turn's recording (the bundle the one
extractor made from the service's spans), so they hold for any service whose spans follow
tracely's attributes or the GenAI conventions the extractor reads, whatever its language.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracely_sdk._canonical import canonical_equal
from tracely_sdk.errors import MissingDependency
from tracely_sdk.scenarios._jsonpath import MISSING, JSONPath
from tracely_sdk.scenarios._patterns import LOOP, schema_validator, search
from tracely_sdk.scenarios._spec import Check, shown

__all__ = ["Failure", "TraceCalls", "check_reply", "check_trace"]

_SHOWN = 300


@dataclass(frozen=True)
class Failure:
    """A check that did not hold."""

    check: str
    expected: str
    got: str

    def __str__(self) -> str:
        return f"{self.check}: expected {self.expected}; got {self.got}"

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "expected": self.expected, "got": self.got}


def _show(value: Any) -> str:
    return "nothing there" if value is MISSING else shown(value, _SHOWN)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _as_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return MISSING
    return value


def _schema_error(schema: Mapping[str, Any], instance: Any) -> str | None:
    try:
        import jsonschema
    except ImportError as exc:
        raise MissingDependency("jsonschema (for json_schema checks)", "scenarios") from exc
    import referencing.exceptions

    try:
        error = jsonschema.exceptions.best_match(schema_validator(schema).iter_errors(instance))
    except referencing.exceptions.Unresolvable as exc:
        # A file's schema was checked when it was read; one built in code may still point out.
        return f"the schema refers to {exc.ref!r}, which is not in it; nothing is fetched"
    except RecursionError:
        return LOOP
    if error is None:
        return None
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"{error.message} (at ${where})"


def check_reply(check: Check, reply: Any, response: Any, latency_ms: float) -> Failure | None:
    """Evaluate one reply check against the reply, the whole parsed response and the latency."""
    kind, value = check.kind, check.value
    what = check.describe()
    if kind in {"contains", "not_contains"}:
        text = _as_text(reply)
        fold = bool(check.options.get("ignore_case"))
        haystack = text.casefold() if fold else text
        for needle in value:
            found = (needle.casefold() if fold else needle) in haystack
            if found != (kind == "contains"):
                verb = "to contain" if kind == "contains" else "not to contain"
                return Failure(what, f"the reply {verb} {needle!r}", _show(reply))
        return None
    if kind == "regex":
        if not search(value, _as_text(reply)):
            return Failure(what, f"the reply to match /{value}/", _show(reply))
        return None
    if kind == "equals":
        if not canonical_equal(reply, value):
            return Failure(what, f"the reply to equal {_show(value)}", _show(reply))
        return None
    if kind == "json_schema":
        instance = _as_json(reply)
        if instance is MISSING:
            return Failure(what, "the reply to be JSON matching the schema", _show(reply))
        problem = _schema_error(value, instance)
        return None if problem is None else Failure(what, "the reply to match the schema", problem)
    if kind == "json_path":
        path, (test, expected) = value
        assert isinstance(path, JSONPath)
        found = path.get(response)
        if test == "exists":
            if (found is not MISSING) != expected:
                return Failure(what, f"{path} {'present' if expected else 'absent'}", _show(found))
            return None
        if found is MISSING:
            return Failure(what, f"a value at {path}", "nothing there")
        ok = (
            canonical_equal(found, expected)
            if test == "equals"
            else (str(expected) in _as_text(found))
            if test == "contains"
            else search(str(expected), _as_text(found))
        )
        return None if ok else Failure(what, f"{path} {test} {_show(expected)}", _show(found))
    if kind == "latency_ms":
        if latency_ms > value:
            return Failure(what, f"a reply within {value} ms", f"{latency_ms:.0f} ms")
        return None
    raise ValueError(f"{kind} is not a reply check")


# -- the trace -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceCalls:
    """What a turn's recording says the service did, flattened for the checks."""

    tools: Sequence[tuple[str, Any, bool]]  # (name, args or None, errored)
    llm: Sequence[tuple[str, bool]]  # (model, errored)
    errored: bool  # the trace's root (the service's handling of the turn) failed

    @classmethod
    def of(cls, bundle: Mapping[str, Any], status: str = "ok") -> TraceCalls:
        tools: list[tuple[str, Any, bool]] = []
        llm: list[tuple[str, bool]] = []
        for name, entries in (bundle.get("tools") or {}).items():
            for entry in entries:
                tools.append((name, entry.get("args"), "error" in entry))
        for model, entries in (bundle.get("llm") or {}).items():
            for entry in entries:
                llm.append((model, "error" in entry))
        # A call seen but not replayable (no content captured, cut short, failed) still happened.
        for item in bundle.get("incomplete") or ():
            kind, _, name = str(item.get("label", "")).partition(":")
            reason = str(item.get("reason", ""))
            failed = "error" in reason or "failed" in reason
            if kind == "tools":
                tools.append((name, None, failed))
            elif kind == "llm":
                llm.append((name, failed))
        return cls(tools, llm, status == "error")

    def to_dict(self) -> dict[str, Any]:
        return {
            "tools": [{"name": n, "args": a, "error": e} for n, a, e in self.tools],
            "llm": [{"model": m, "error": e} for m, e in self.llm],
            "errored": self.errored,
        }


def _args_match(expected: Mapping[str, Any], actual: Any) -> bool:
    if isinstance(actual, str):
        actual = _as_json(actual)
    if not isinstance(actual, Mapping):
        return False
    return all(k in actual and canonical_equal(actual[k], v) for k, v in expected.items())


def check_trace(check: Check, calls: TraceCalls) -> Failure | None:
    """Evaluate one trace check against what the turn's trace recorded."""
    kind, value = check.kind, check.value
    what = check.describe()
    names = [n for n, _, _ in calls.tools]
    if kind == "called":
        same = [a for n, a, _ in calls.tools if n == value]
        want = check.options.get("args")
        if not same:
            return Failure(what, f"a call of tool {value}", f"tools called: {_names(names)}")
        if want and not any(_args_match(want, a) for a in same):
            return Failure(what, f"{value} called with {_show(want)}", f"args {_show(same)}")
        return None
    if kind == "not_called":
        if value in names:
            return Failure(what, f"no call of tool {value}", f"{names.count(value)} call(s)")
        return None
    if kind == "max_llm_calls":
        if len(calls.llm) > value:
            models = _names([m for m, _ in calls.llm])
            return Failure(what, f"at most {value} LLM call(s)", f"{len(calls.llm)}: {models}")
        return None
    if kind == "max_tool_calls":
        if len(calls.tools) > value:
            return Failure(what, f"at most {value} tool call(s)", f"{len(names)}: {_names(names)}")
        return None
    if kind == "no_errors":
        failed = [f"tools:{n}" for n, _, e in calls.tools if e] + [
            f"llm:{m}" for m, e in calls.llm if e
        ]
        if calls.errored:
            failed.append("the turn's root span")
        if failed:
            return Failure(what, "no call errored", f"errored: {', '.join(failed)}")
        return None
    if kind == "model":
        used = [m for m, _ in calls.llm]
        if value not in used:
            return Failure(what, f"an LLM call to {value}", f"models used: {_names(used)}")
        return None
    raise ValueError(f"{kind} is not a trace check")


def _names(items: Sequence[str]) -> str:
    return ", ".join(items) if items else "none"
