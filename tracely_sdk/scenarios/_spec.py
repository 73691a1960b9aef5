"""Scenario files: what a multi-turn check of a live agent service says, read and validated.

A scenario is a small YAML (or JSON) file::

    name: Paris, then Oslo
    tags: [smoke]
    target:
      shape: message              # or "openai", or a request of your own (below)
    turns:
      - user: What's the weather in Paris?
        expect:
          - contains: Paris
          - regex: '\\d+°C'
          - latency_ms: 5000
        trace:
          - called: get_weather
            args: {city: Paris}
          - max_llm_calls: 2
          - no_errors: true

A file is untrusted input: it is parsed with a safe loader, every field is checked here, and
nothing in it can name code to run. Templates substitute the turn's values into strings and
``${NAME}`` environment variables into header values, nothing else.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tracely_otel import CALL_SOURCES
from tracely_sdk.errors import ConfigError, MissingDependency
from tracely_sdk.scenarios._jsonpath import JSONPath, PathError

__all__ = [
    "REPLY_CHECKS",
    "SHAPES",
    "SPAN_FORMATS",
    "TRACE_CHECKS",
    "Check",
    "Scenario",
    "ScenarioError",
    "Target",
    "Turn",
    "load_scenario",
    "load_scenarios",
    "scenario_from_data",
    "slug",
    "yaml_module",
]

SUFFIXES: Final = (".yaml", ".yml", ".json")
PLACEHOLDERS: Final = frozenset({"message", "conversation_id", "messages", "model", "turn"})
_PLACEHOLDER: Final = re.compile(r"\{\{\s*([A-Za-z_]+)\s*\}\}")
_ENV: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ID: Final = re.compile(r"[^a-z0-9]+")
_MAX_FILE_BYTES: Final = 1 << 20

SHAPES: Final[Mapping[str, Mapping[str, Any]]] = {
    # A plain JSON endpoint that keeps the conversation itself, by id.
    "message": {
        "method": "POST",
        "path": "/chat",
        "body": {"message": "{{message}}", "conversation_id": "{{conversation_id}}"},
        "reply": "$.reply",
    },
    # An OpenAI-compatible chat endpoint: stateless, so every turn sends the whole conversation.
    "openai": {
        "method": "POST",
        "path": "/v1/chat/completions",
        "body": {"model": "{{model}}", "messages": "{{messages}}"},
        "reply": "$.choices[0].message.content",
    },
}

REPLY_CHECKS: Final = frozenset(
    {"contains", "not_contains", "regex", "equals", "json_schema", "json_path", "latency_ms"}
)
TRACE_CHECKS: Final = frozenset(
    {
        "called",
        "not_called",
        "max_llm_calls",
        "max_tool_calls",
        "no_errors",
        "model",
        "trajectory",
        "llm_input",
        "max_tokens",
    }
)
SPAN_FORMATS: Final = CALL_SOURCES
"""What ``span_format:`` may declare: the forms of spans trace checks read."""
_MODIFIERS: Final[Mapping[str, frozenset[str]]] = {
    "contains": frozenset({"ignore_case"}),
    "not_contains": frozenset({"ignore_case"}),
    "called": frozenset({"args", "result", "times"}),
    "trajectory": frozenset({"exact"}),
    "llm_input": frozenset({"ignore_case"}),
    "json_path": frozenset(),
}


class ScenarioError(ConfigError):
    """A scenario file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Check:
    """One check of a turn: ``kind`` is a key of :data:`REPLY_CHECKS` or :data:`TRACE_CHECKS`."""

    kind: str
    value: Any
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def on_trace(self) -> bool:
        return self.kind in TRACE_CHECKS

    def describe(self) -> str:
        """The check as a person reads it, for reports."""
        value = self.value
        if self.kind == "called":
            args = self.options.get("args")
            text = f"called {value}" + (f" with {shown(args)}" if args else "")
            if "result" in self.options:
                text += f" returning {shown(self.options['result'])}"
            if "times" in self.options:
                text += f" {self.options['times']} time(s)"
            return text
        if self.kind == "json_path":
            path, test = value
            return f"json_path {path} {test[0]} {shown(test[1])}"
        if self.kind == "no_errors":
            return "no call errored"
        if self.kind == "trajectory":
            how = "exactly " if self.options.get("exact") else ""
            return f"trajectory {how}{' → '.join(value)}"
        if self.kind == "llm_input":
            return "llm_input " + ", ".join(repr(v) for v in value)
        if self.kind in {"contains", "not_contains"}:
            return f"{self.kind} " + ", ".join(repr(v) for v in value)
        return f"{self.kind} {shown(value)}"


@dataclass(frozen=True)
class Turn:
    user: str
    checks: tuple[Check, ...] = ()

    @property
    def reply_checks(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.on_trace)

    @property
    def trace_checks(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.on_trace)


@dataclass(frozen=True)
class Target:
    """Where turns go and where the reply is: a base URL and a request template."""

    url: str | None
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    reply: JSONPath
    model: str | None = None
    timeout: float = 60.0

    def with_url(self, url: str | None) -> Target:
        if url is None:
            return self
        return Target(
            url,
            self.method,
            self.path,
            self.headers,
            self.body,
            self.reply,
            self.model,
            self.timeout,
        )


@dataclass(frozen=True)
class Scenario:
    id: str
    name: str
    tags: tuple[str, ...]
    target: Target
    turns: tuple[Turn, ...]
    repeat: int = 1
    pass_threshold: float = 1.0
    source: str | None = None
    # Trace evidence: every tool and LLM call is traced in a form read here, so none seen is
    # none made (assume_complete, or the span formats the service declares it exports).
    assume_complete: bool = False
    span_format: tuple[str, ...] = ()
    max_tokens: int | None = None  # the token budget of the whole conversation


def shown(value: Any, limit: int = 80) -> str:
    """``value`` as a report shows it: a string quoted, anything else as JSON, cut at ``limit``."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = repr(text) if isinstance(value, str) else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slug(text: str) -> str:
    """A case-style id from a name or file stem: ``Paris, then Oslo`` → ``paris-then-oslo``."""
    return _ID.sub("-", text.lower()).strip("-") or "scenario"


# -- reading -----------------------------------------------------------------------------


def yaml_module() -> Any:
    """PyYAML, or :class:`MissingDependency` naming the extra that installs it."""
    try:
        import yaml
    except ImportError as exc:
        raise MissingDependency(
            "PyYAML (for YAML scenario files; JSON needs nothing)", "scenarios"
        ) from exc
    return yaml


def _parse(path: Path) -> Any:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the scenario file: {exc.strerror}") from exc
    if size > _MAX_FILE_BYTES:
        raise ScenarioError(f"{path}: a scenario file is at most 1 MiB, this one is {size} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read the scenario file as UTF-8: {exc}") from exc
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ScenarioError(f"{path}: not valid JSON: {exc}") from exc
    yaml = yaml_module()
    try:
        # safe_load builds plain data only: a YAML tag can never construct an object.
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from exc


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read and validate one scenario file."""
    p = Path(path)
    return scenario_from_data(_parse(p), source=str(p), default_id=slug(p.stem))


def load_scenarios(paths: Sequence[str | os.PathLike[str]]) -> list[Scenario]:
    """Every scenario in ``paths`` (files, or directories searched recursively), sorted by id.

    Raises :class:`ScenarioError` for a path that does not exist, a malformed file, or two
    scenarios with the same id, so a typo never silently selects nothing.
    """
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files.extend(sorted(f for f in p.rglob("*") if f.suffix in SUFFIXES and f.is_file()))
        elif p.is_file():
            files.append(p)
        else:
            raise ScenarioError(f"{p}: no such scenario file or directory")
    scenarios = [load_scenario(f) for f in files]
    seen: dict[str, str | None] = {}
    for s in scenarios:
        if s.id in seen:
            raise ScenarioError(
                f"{s.source}: scenario id {s.id!r} is also used by {seen[s.id]}; "
                "give one of them an `id:` of its own"
            )
        seen[s.id] = s.source
    return sorted(scenarios, key=lambda s: s.id)


# -- validating --------------------------------------------------------------------------


class _Where:
    """The file and field a value came from, for error messages."""

    def __init__(self, source: str | None, field: str = "") -> None:
        self.source = source or "<scenario>"
        self.field = field

    def at(self, key: str | int) -> _Where:
        name = f"[{key}]" if isinstance(key, int) else (f".{key}" if self.field else key)
        return _Where(self.source, self.field + name)

    def fail(self, problem: str) -> ScenarioError:
        where = f" {self.field}" if self.field else ""
        return ScenarioError(f"{self.source}:{where}: {problem}")


def _mapping(value: Any, where: _Where, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise where.fail(f"must be a mapping, got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise where.fail(
            f"unknown field(s) {', '.join(unknown)}; expected some of {', '.join(sorted(allowed))}"
        )
    return value


def _text(value: Any, where: _Where, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise where.fail("must be a non-empty string")
    return value


def _count(value: Any, where: _Where, *, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise where.fail(f"must be a whole number ≥ {low}, got {value!r}")
    return value


def _template(value: Any, where: _Where, depth: int = 0) -> Any:
    """Check a request body template: JSON data whose strings may hold ``{{placeholders}}``."""
    if depth > 32:
        raise where.fail("the request body template is nested too deeply")
    if isinstance(value, str):
        for name in _PLACEHOLDER.findall(value):
            if name not in PLACEHOLDERS:
                raise where.fail(
                    f"unknown placeholder {{{{{name}}}}}; use {', '.join(sorted(PLACEHOLDERS))}"
                )
        return value
    if isinstance(value, Mapping):
        return {str(k): _template(v, where.at(str(k)), depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_template(v, where.at(i), depth + 1) for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise where.fail(f"a request body holds JSON values, not {type(value).__name__}")


def _target(value: Any, where: _Where) -> Target:
    t = _mapping(
        value if value is not None else {},
        where,
        frozenset(
            {"url", "shape", "method", "path", "headers", "body", "reply", "model", "timeout_s"}
        ),
    )
    shape_name = t.get("shape", "message" if "body" not in t else None)
    if shape_name is not None and shape_name not in SHAPES:
        raise where.at("shape").fail(
            f"unknown shape {shape_name!r}; use {', '.join(sorted(SHAPES))} or give `body` and `reply`"
        )
    shape: Mapping[str, Any] = SHAPES[shape_name] if shape_name else {}
    url = t.get("url")
    if url is not None:
        url = _url(url, where.at("url"))
    method = _text(t.get("method", shape.get("method", "POST")), where.at("method")).upper()
    if method not in {"POST", "PUT", "GET"}:
        raise where.at("method").fail(f"must be POST, PUT or GET, got {method!r}")
    path = _text(t.get("path", shape.get("path", "/")), where.at("path"))
    if not path.startswith("/"):
        raise where.at("path").fail(f"must start with '/', got {path!r}")
    if "body" not in t and not shape:
        raise where.fail("give a `shape` or a request `body` template")
    body = _template(t.get("body", shape.get("body")), where.at("body"))
    reply_text = t.get("reply", shape.get("reply"))
    if reply_text is None:
        raise where.at("reply").fail("say where the reply is in the response, as a JSON path")
    try:
        reply = JSONPath(_text(reply_text, where.at("reply")))
    except PathError as exc:
        raise where.at("reply").fail(str(exc)) from exc
    headers_raw = _mapping(
        t.get("headers", {}), where.at("headers"), frozenset(t.get("headers", {}) or {})
    )
    headers = {
        str(k): _text(v, where.at("headers").at(str(k)), empty=True) for k, v in headers_raw.items()
    }
    model = t.get("model")
    if model is not None:
        model = _text(model, where.at("model"))
    if shape_name == "openai" and model is None:
        raise where.at("model").fail("the openai shape needs the model to ask for")
    timeout = t.get("timeout_s", 60)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout <= 3600
    ):
        raise where.at("timeout_s").fail(f"must be seconds between 0 and 3600, got {timeout!r}")
    return Target(url, method, path, headers, body, reply, model, float(timeout))


def _url(value: Any, where: _Where) -> str:
    text = _text(value, where)
    if not re.match(r"https?://[^/\s]+", text):
        raise where.fail(f"must be an http(s) URL, got {text!r}")
    return text.rstrip("/")


def _strings(value: Any, where: _Where) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    return tuple(_text(v, where) for v in items)


def _check(value: Any, where: _Where) -> Check:
    if not isinstance(value, Mapping) or not value:
        raise where.fail('a check is a mapping such as {contains: "Paris"}')
    kinds = [k for k in value if k in REPLY_CHECKS or k in TRACE_CHECKS]
    if len(kinds) != 1:
        known = ", ".join(sorted(REPLY_CHECKS | TRACE_CHECKS))
        raise where.fail(f"a check names exactly one of {known}; got {', '.join(map(str, value))}")
    kind = kinds[0]
    options = {k: v for k, v in value.items() if k != kind}
    unknown = sorted(set(options) - _MODIFIERS.get(kind, frozenset()))
    if unknown:
        raise where.fail(f"{kind} takes no option {', '.join(unknown)}")
    raw = value[kind]
    w = where.at(kind)
    if kind in {"contains", "not_contains"}:
        if not isinstance(options.get("ignore_case", False), bool):
            raise where.at("ignore_case").fail("must be true or false")
        return Check(kind, _strings(raw, w), options)
    if kind == "regex":
        pattern = _text(raw, w)
        try:
            re.compile(pattern)
        except re.error as exc:
            raise w.fail(f"not a valid regular expression: {exc}") from exc
        return Check(kind, pattern)
    if kind == "equals":
        return Check(kind, raw)
    if kind == "json_schema":
        if not isinstance(raw, Mapping):
            raise w.fail("must be a JSON Schema object")
        return Check(kind, dict(raw))
    if kind == "json_path":
        spec = _mapping(raw, w, frozenset({"path", "equals", "contains", "regex", "exists"}))
        tests = [k for k in spec if k != "path"]
        if "path" not in spec or len(tests) != 1:
            raise w.fail("give `path` and one of equals, contains, regex, exists")
        try:
            path = JSONPath(_text(spec["path"], w.at("path")))
        except PathError as exc:
            raise w.at("path").fail(str(exc)) from exc
        test = tests[0]
        if test == "regex":
            try:
                re.compile(_text(spec[test], w.at(test)))
            except re.error as exc:
                raise w.at(test).fail(f"not a valid regular expression: {exc}") from exc
        if test == "exists" and not isinstance(spec[test], bool):
            raise w.at(test).fail("must be true or false")
        return Check(kind, (path, (test, spec[test])))
    if kind == "latency_ms":
        return Check(kind, _count(raw, w, low=1))
    if kind in {"called", "not_called"}:
        args = options.get("args")
        if args is not None and not isinstance(args, Mapping):
            raise where.at("args").fail("must be a mapping of the arguments to match")
        called: dict[str, Any] = {"args": dict(args)} if args else {}
        if "result" in options:
            called["result"] = options["result"]
        if "times" in options:
            called["times"] = _count(options["times"], where.at("times"), low=1)
        return Check(kind, _text(raw, w), called)
    if kind in {"max_llm_calls", "max_tool_calls", "max_tokens"}:
        return Check(kind, _count(raw, w))
    if kind == "trajectory":
        if not isinstance(raw, list) or not raw:
            raise w.fail("must be a list of tool names, in the order they are called")
        if not isinstance(options.get("exact", False), bool):
            raise where.at("exact").fail("must be true or false")
        names = tuple(_text(v, w.at(i)) for i, v in enumerate(raw))
        return Check(kind, names, {"exact": True} if options.get("exact") else {})
    if kind == "llm_input":
        if not isinstance(options.get("ignore_case", False), bool):
            raise where.at("ignore_case").fail("must be true or false")
        return Check(kind, _strings(raw, w), options)
    if kind == "no_errors":
        if raw is not True:
            raise w.fail("write `no_errors: true` (leave the check out otherwise)")
        return Check(kind, True)
    return Check(kind, _text(raw, w))  # model


def _turn(value: Any, where: _Where) -> Turn:
    t = _mapping(value, where, frozenset({"user", "expect", "trace"}))
    if "user" not in t:
        raise where.at("user").fail("every turn has the user's message")
    user = _text(t["user"], where.at("user"))
    checks: list[Check] = []
    for key, on_trace in (("expect", False), ("trace", True)):
        items = t.get(key) or []
        if not isinstance(items, list):
            raise where.at(key).fail("must be a list of checks")
        for i, item in enumerate(items):
            check = _check(item, where.at(key).at(i))
            if check.on_trace != on_trace:
                right = "trace" if check.on_trace else "expect"
                raise (
                    where.at(key)
                    .at(i)
                    .fail(f"{check.kind} is a check on the {right}, move it there")
                )
            checks.append(check)
    return Turn(user, tuple(checks))


def scenario_from_data(
    data: Any, *, source: str | None = None, default_id: str | None = None
) -> Scenario:
    """Validate parsed scenario data; raises :class:`ScenarioError` naming the field."""
    where = _Where(source)
    s = _mapping(
        data,
        where,
        frozenset(
            {
                "id",
                "name",
                "tags",
                "target",
                "turns",
                "repeat",
                "pass_threshold",
                "assume_complete",
                "span_format",
                "max_tokens",
            }
        ),
    )
    name = _text(s.get("name", default_id or ""), where.at("name"))
    scenario_id = s.get("id", default_id or slug(name))
    scenario_id = _text(scenario_id, where.at("id"))
    if slug(scenario_id) != scenario_id:
        raise where.at("id").fail(
            f"use lowercase letters, digits and dashes: {slug(scenario_id)!r}"
        )
    tags = s.get("tags", [])
    if not isinstance(tags, list):
        raise where.at("tags").fail("must be a list of strings")
    tag_list = tuple(_text(t, where.at("tags").at(i)) for i, t in enumerate(tags))
    turns = s.get("turns")
    if not isinstance(turns, list) or not turns:
        raise where.at("turns").fail("a scenario has at least one turn")
    repeat = _count(s.get("repeat", 1), where.at("repeat"), low=1)
    threshold = s.get("pass_threshold", 1.0)
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or not 0 < threshold <= 1
    ):
        raise where.at("pass_threshold").fail(f"must be a fraction in (0, 1], got {threshold!r}")
    assume_complete = s.get("assume_complete", False)
    if not isinstance(assume_complete, bool):
        raise where.at("assume_complete").fail("must be true or false")
    formats = (
        _strings(s.get("span_format", []), where.at("span_format")) if s.get("span_format") else ()
    )
    unknown = [f for f in formats if f not in SPAN_FORMATS]
    if unknown:
        raise where.at("span_format").fail(
            f"unknown span format(s) {', '.join(unknown)}; use {', '.join(SPAN_FORMATS)}"
        )
    budget = s.get("max_tokens")
    return Scenario(
        id=scenario_id,
        name=name,
        tags=tag_list,
        target=_target(s.get("target"), where.at("target")),
        turns=tuple(_turn(t, where.at("turns").at(i)) for i, t in enumerate(turns)),
        repeat=repeat,
        pass_threshold=float(threshold),
        source=source,
        assume_complete=assume_complete,
        span_format=formats,
        max_tokens=None if budget is None else _count(budget, where.at("max_tokens")),
    )


# -- filling a template ------------------------------------------------------------------


def fill(template: Any, values: Mapping[str, Any]) -> Any:
    """``template`` with placeholders replaced: a string that is one placeholder becomes the
    value itself (a list of messages stays a list); placeholders inside text become text."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template.strip())
        if whole is not None:
            return values[whole[1]]
        return _PLACEHOLDER.sub(lambda m: str(values[m[1]]), template)
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    return template


def expand_env(value: str, where: str) -> str:
    """``${NAME}`` in a header value, from the environment; a missing variable is an error."""

    def one(m: re.Match[str]) -> str:
        if m[1] not in os.environ:
            raise ScenarioError(f"{where}: environment variable {m[1]} is not set")
        return os.environ[m[1]]

    return _ENV.sub(one, value)
