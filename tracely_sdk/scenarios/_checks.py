"""Evaluating a turn's checks: on the reply, and on the trace the service exported.

Each check returns ``None`` when it holds, else a :class:`Failure` saying which check, what was
expected and what came back. Trace checks read the turn's recording: the trace summary the one
extractor made from every span of the trace, whoever made it (tracely, the GenAI conventions,
OpenInference, OpenLLMetry; any language). A trace check passes only on evidence: one that the
spans that arrived cannot decide is :class:`NotEvaluated`, never a pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tracely_sdk._canonical import canonical_equal
from tracely_sdk.errors import MissingDependency
from tracely_sdk.scenarios._jsonpath import MISSING, JSONPath
from tracely_sdk.scenarios._patterns import LOOP, schema_validator, search
from tracely_sdk.scenarios._spec import Check, shown

__all__ = [
    "Call",
    "Failure",
    "NotEvaluated",
    "TraceCalls",
    "check_budget",
    "check_reply",
    "check_trace",
]

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
class NotEvaluated:
    """A check the trace that arrived cannot decide: never a pass; ``why`` says what to do."""

    check: str
    why: str

    def __str__(self) -> str:
        return f"{self.check}: not evaluated: {self.why}"

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "not_evaluated": self.why}


@dataclass(frozen=True)
class Call:
    """One agent run, tool call or LLM call of a turn's trace, whoever recorded it."""

    kind: str  # agent | tool | llm
    name: str  # the tool, the model, the agent
    by: str  # who made the span: tracely, otel-genai, openinference, openllmetry, ...
    args: Any = MISSING
    result: Any = MISSING
    input: Any = MISSING
    usage: tuple[int, int] | None = None
    error: str | None = None


_KINDS: Final = ("agent", "tool", "llm")


@dataclass(frozen=True)
class TraceCalls:
    """What a turn's trace says the service did, read from its recording's trace summary.

    ``spans`` is how many spans of the trace arrived (0 for a bundle without a summary: a
    hand-written one, or one an older version extracted); ``counted`` is what tracely's own
    agent span says its run called (``{"tools": n, "llm": m}``), evidence of calls that
    never happened.
    """

    calls: tuple[Call, ...]
    spans: int = 0
    errored: tuple[str, ...] = ()  # what failed at the top of the trace, as a report says it
    counted: Mapping[str, int] = field(default_factory=dict)

    @property
    def tools(self) -> list[Call]:
        return [c for c in self.calls if c.kind == "tool"]

    @property
    def llm(self) -> list[Call]:
        return [c for c in self.calls if c.kind == "llm"]

    def readable(self, kind: str) -> bool:
        """Whether the trace shows that the service's calls of ``kind`` are traced in a form
        read here: one such call was seen, or tracely's agent counted them."""
        return any(c.kind == kind for c in self.calls) or (
            ("tools" if kind == "tool" else kind) in self.counted
        )

    @classmethod
    def of(cls, bundle: Mapping[str, Any], status: str = "ok") -> TraceCalls:
        summary = bundle.get("trace")
        if isinstance(summary, Mapping):
            return cls._of_summary(bundle, summary, status)
        return cls._of_entries(bundle, status)

    @classmethod
    def _of_summary(
        cls, bundle: Mapping[str, Any], summary: Mapping[str, Any], status: str
    ) -> TraceCalls:
        entries: dict[int, Mapping[str, Any]] = {}
        for kind in ("tools", "llm"):
            for items in (bundle.get(kind) or {}).values():
                for entry in items:
                    if isinstance(entry.get("seq"), int):
                        entries[entry["seq"]] = entry
        calls: list[Call] = []
        counted: dict[str, int] = {}
        for item in summary.get("calls") or ():
            if item.get("kind") not in _KINDS:
                continue
            entry = entries.get(item["seq"], {}) if isinstance(item.get("seq"), int) else {}
            usage = item.get("usage", entry.get("usage"))
            calls.append(
                Call(
                    kind=item["kind"],
                    name=str(item.get("name")),
                    by=str(item.get("by", "tracely")),
                    args=item.get("args", entry.get("args", MISSING)),
                    result=item.get("result", entry.get("output", MISSING)),
                    input=item.get("input", entry.get("input", MISSING)),
                    usage=tuple(usage) if isinstance(usage, list) and len(usage) == 2 else None,
                    error=item.get("error")
                    or (_error_type(entry["error"]) if "error" in entry else None),
                )
            )
            if item.get("by") == "tracely" and isinstance(item.get("counted"), Mapping):
                counted.update(item["counted"])
        errored = tuple(f"the turn's root span {e}" for e in summary.get("errored") or ())
        if status == "error" and not errored and not any(c.error for c in calls):
            errored = ("the turn's agent run",)
        spans = summary.get("spans")
        return cls(tuple(calls), spans if isinstance(spans, int) else 0, errored, counted)

    @classmethod
    def _of_entries(cls, bundle: Mapping[str, Any], status: str) -> TraceCalls:
        """A bundle without a trace summary: only its entries, and what tracely counted."""
        calls: list[tuple[int, Call]] = []
        for kind, section in (("tool", "tools"), ("llm", "llm")):
            for name, entries in (bundle.get(section) or {}).items():
                for entry in entries:
                    error = entry.get("error")
                    calls.append(
                        (
                            entry.get("seq", 1 << 62),
                            Call(
                                kind,
                                name,
                                "tracely",
                                args=entry.get("args", MISSING),
                                result=entry.get("output", MISSING) if kind == "tool" else MISSING,
                                input=entry.get("input", MISSING),
                                usage=tuple(entry["usage"]) if "usage" in entry else None,
                                error=None if error is None else _error_type(error),
                            ),
                        )
                    )
        # A call seen but not replayable (no content captured, cut short, failed) still happened.
        for item in bundle.get("incomplete") or ():
            section, _, name = str(item.get("label", "")).partition(":")
            reason = str(item.get("reason", ""))
            failed = "error" in reason or "failed" in reason
            if section in ("tools", "llm") and name:
                kind = "tool" if section == "tools" else "llm"
                call = Call(kind, name, "tracely", error="error" if failed else None)
                calls.append((item.get("seq", 1 << 62), call))
        calls.sort(key=lambda c: c[0])
        # tracely's own agent run records its calls: no entry of a kind is evidence of none.
        counted = {"tools": 0, "llm": 0} if isinstance(bundle.get("agent"), Mapping) else {}
        errored = ("the turn's root span",) if status == "error" else ()
        return cls(tuple(c for _, c in calls), 0, errored, counted)

    def held(self) -> dict[str, Any]:
        """What the trace held, for the report: spans, and calls by kind and by who made them."""
        held: dict[str, Any] = {"spans": self.spans}
        for call in self.calls:
            by_source = held.setdefault(call.kind, {})
            by_source[call.by] = by_source.get(call.by, 0) + 1
        return held

    def to_dict(self) -> dict[str, Any]:
        return {
            "held": self.held(),
            "tools": [
                {
                    "name": c.name,
                    "args": None if c.args is MISSING else c.args,
                    "error": c.error is not None,
                    "by": c.by,
                }
                for c in self.tools
            ],
            "llm": [
                {
                    "model": c.name,
                    "error": c.error is not None,
                    "by": c.by,
                    "usage": list(c.usage) if c.usage else None,
                }
                for c in self.llm
            ],
            "errored": list(self.errored),
        }


def _error_type(error: Any) -> str:
    return str(error.get("type") or "error") if isinstance(error, Mapping) else "error"


def _matches(expected: Any, actual: Any) -> bool:
    """A recorded value holds what a check expects: every key given (a mapping), or equal."""
    if isinstance(actual, str) and not isinstance(expected, str):
        actual = _as_json(actual)
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return False
        return all(k in actual and canonical_equal(actual[k], v) for k, v in expected.items())
    return canonical_equal(actual, expected)


def _held(calls: TraceCalls) -> str:
    """What arrived, for a message about what could not be read from it."""
    if not calls.spans:
        return "the trace's recorded calls"
    made = ", ".join(
        f"{n} {kind}" for kind in _KINDS if (n := len([c for c in calls.calls if c.kind == kind]))
    )
    return f"the trace's {calls.spans} span(s)" + (f" ({made} call(s))" if made else "")


def _unread(check: str, calls: TraceCalls, kind: str) -> NotEvaluated:
    what = "a tool call" if kind == "tool" else "an LLM call"
    example = "execute_tool NAME" if kind == "tool" else "chat MODEL"
    return NotEvaluated(
        check,
        f"{_held(calls)} hold no span read as {what}, so a turn that made none cannot be told "
        f"from a service that does not trace them; export them as spans tracely reads "
        f"(tracely's, the GenAI conventions' `{example}`, OpenInference's, OpenLLMetry's), or "
        "declare that they are (`span_format:` or `assume_complete: true` in the scenario)",
    )


def check_trace(
    check: Check, calls: TraceCalls, *, assume_complete: bool = False
) -> Failure | NotEvaluated | None:
    """Evaluate one trace check against what the turn's trace recorded.

    A check that holds only if something did *not* happen (``not_called``, ``max_*``) needs
    evidence that such calls are traced at all; without it the answer is
    :class:`NotEvaluated`, unless ``assume_complete`` (the scenario says every call is
    traced in a form read here).
    """
    kind, value = check.kind, check.value
    what = check.describe()
    tools = calls.tools
    names = [c.name for c in tools]

    def unseen(kind: str) -> bool:
        return not assume_complete and not calls.readable(kind)

    if kind == "called":
        same = [c for c in tools if c.name == value]
        if not same:
            called = f"tools called: {_names(names)}"
            if not calls.readable("tool"):
                called += f" ({_held(calls)} hold no span read as a tool call)"
            return Failure(what, f"a call of tool {value}", called)
        want = check.options.get("args")
        if want:
            same = [c for c in same if c.args is not MISSING and _matches(want, c.args)]
            if not same:
                seen = [c.args for c in tools if c.name == value]
                return Failure(what, f"{value} called with {_show(want)}", f"args {_show(seen)}")
        if "result" in check.options:
            recorded = [c for c in same if c.result is not MISSING]
            if not recorded:
                return NotEvaluated(
                    what,
                    f"no call of {value} has its result recorded on its span (tracely.output, "
                    "gen_ai.tool.call.result, OpenInference's output.value, "
                    "traceloop.entity.output)",
                )
            want_result = check.options["result"]
            same = [c for c in recorded if _matches(want_result, c.result)]
            if not same:
                results = [c.result for c in recorded]
                return Failure(what, f"{value} returning {_show(want_result)}", _show(results))
        times = check.options.get("times")
        if times is not None and len(same) != times:
            return Failure(what, f"exactly {times} such call(s) of {value}", f"{len(same)}")
        return None
    if kind == "not_called":
        if value in names:
            return Failure(what, f"no call of tool {value}", f"{names.count(value)} call(s)")
        return _unread(what, calls, "tool") if unseen("tool") else None
    if kind == "max_llm_calls":
        if len(calls.llm) > value:
            models = _names([c.name for c in calls.llm])
            return Failure(what, f"at most {value} LLM call(s)", f"{len(calls.llm)}: {models}")
        return _unread(what, calls, "llm") if unseen("llm") else None
    if kind == "max_tool_calls":
        if len(tools) > value:
            return Failure(what, f"at most {value} tool call(s)", f"{len(names)}: {_names(names)}")
        return _unread(what, calls, "tool") if unseen("tool") else None
    if kind == "no_errors":
        failed = [
            f"{'tools' if c.kind == 'tool' else c.kind}:{c.name}" for c in calls.calls if c.error
        ]
        failed += calls.errored
        if failed:
            return Failure(what, "no call errored", f"errored: {', '.join(failed)}")
        return None
    if kind == "model":
        used = [c.name for c in calls.llm]
        if value not in used:
            return Failure(what, f"an LLM call to {value}", f"models used: {_names(used)}")
        return None
    if kind == "trajectory":
        order = list(value)
        exact = bool(check.options.get("exact"))
        held = names == order if exact else _in_order(order, names)
        if not held:
            how = "exactly" if exact else "in this order"
            return Failure(what, f"tools called {how}: {' → '.join(order)}", _names(names, " → "))
        return None
    if kind == "llm_input":
        llm = calls.llm
        if not llm:
            if unseen("llm"):
                return _unread(what, calls, "llm")
            return Failure(what, "an LLM call whose input holds the text", "no LLM call")
        inputs = [_as_text(c.input) for c in llm if c.input is not MISSING]
        if not inputs:
            return NotEvaluated(
                what, "no LLM call of the turn has its input recorded (enable content capture)"
            )
        fold = bool(check.options.get("ignore_case"))
        haystacks = [(t.casefold() if fold else t) for t in inputs]
        for needle in value:
            wanted = needle.casefold() if fold else needle
            if not any(wanted in h or json.dumps(wanted)[1:-1] in h for h in haystacks):
                return Failure(what, f"an LLM input holding {needle!r}", _show(inputs[-1]))
        return None
    if kind == "max_tokens":
        return _budget(what, value, [calls], assume_complete)
    raise ValueError(f"{kind} is not a trace check")


def _budget(
    what: str, limit: int, turns: Sequence[TraceCalls], assume_complete: bool
) -> Failure | NotEvaluated | None:
    """Tokens (input + output, ``gen_ai.usage.*``) of every LLM call of ``turns``."""
    llm = [c for t in turns for c in t.llm]
    if not llm and not assume_complete and not any(t.readable("llm") for t in turns):
        return _unread(what, turns[0], "llm")
    missing = [c.name for c in llm if c.usage is None]
    if missing:
        return NotEvaluated(
            what, f"no token usage recorded for LLM call(s) {_names(missing)} (gen_ai.usage.*)"
        )
    used = sum(c.usage[0] + c.usage[1] for c in llm if c.usage)
    if used > limit:
        return Failure(what, f"at most {limit} tokens", f"{used} over {len(llm)} LLM call(s)")
    return None


def check_budget(
    what: str, limit: int, turns: Sequence[TraceCalls], *, assume_complete: bool = False
) -> Failure | NotEvaluated | None:
    """A scenario's token budget over every turn's LLM calls."""
    return _budget(what, limit, turns, assume_complete)


def _in_order(wanted: Sequence[str], names: Sequence[str]) -> bool:
    rest = iter(names)
    return all(any(n == w for n in rest) for w in wanted)


def _names(items: Sequence[str], sep: str = ", ") -> str:
    return sep.join(items) if items else "none"
