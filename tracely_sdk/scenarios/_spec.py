"""Scenario files: what a multi-turn check of a live agent service says, read and validated.

A scenario is a small YAML (or JSON) file::

    name: Paris, then Oslo
    tags: [smoke]
    env: [CHAT_TOKEN]             # the only variables ${NAME} may send
    target:
      shape: message              # or "openai", or a request of your own (below)
      headers: {Authorization: "Bearer ${CHAT_TOKEN}"}
    turns:
      - user: What's the weather in Paris?
        save: {conversation_id: $.conversation_id}   # a value of the reply, for later turns
        expect:
          - contains: Paris
          - regex: '\\d+°C'
          - latency_ms: 5000
        trace:
          - called: get_weather
            args: {city: Paris}
          - max_llm_calls: 2
          - no_errors: true

A file is untrusted input: it is parsed with a safe loader whose aliases may not expand it
past a bound, every field is checked here, and nothing in it can name code to run, a URL to
fetch or a file to read. Templates substitute the turn's values (and values earlier turns
saved) into the path, headers and body, and ``${NAME}`` environment variables the file's
``env:`` list names into header values, nothing else; a name nothing defines is an error here.
Patterns and schemas are checked here too (see :mod:`._patterns`).
"""

from __future__ import annotations

import functools
import json
import os
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from tracely_otel import CALL_SOURCES
from tracely_sdk.errors import ConfigError, MissingDependency
from tracely_sdk.scenarios._jsonpath import MISSING, JSONPath, PathError
from tracely_sdk.scenarios._patterns import PatternError, compile_pattern, schema_problem

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
# The runner's values a saved one may replace: a service that issues its own conversation id.
_SAVABLE_BUILTINS: Final = frozenset({"conversation_id"})
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLACEHOLDER: Final = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_BRACES: Final = re.compile(r"\{\{(.*?)\}\}")
_ENV: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ID: Final = re.compile(r"[^a-z0-9]+")
_ORIGIN: Final = re.compile(r"(https?)://([^/\s?#@]+)")
_MAX_FILE_BYTES: Final = 1 << 20
# A file's data, as loaded: YAML aliases share nodes, so a 600-byte file can stand for a
# billion values; every walk of it (validation, reports) would pay for each.
_MAX_VALUES: Final = 100_000
_MAX_DEPTH: Final = 64

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
        "stream_reply": "$.choices[0].delta.content",
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
    """One message of the conversation, its checks, and what it changes of the request.

    ``path`` and ``body`` (when not :data:`MISSING`) replace the target's for this turn,
    ``headers`` are added to the target's, and ``save`` names values of the response that
    later turns use as ``{{name}}``."""

    user: str
    checks: tuple[Check, ...] = ()
    save: Mapping[str, JSONPath] = field(default_factory=dict)
    path: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = MISSING

    @property
    def reply_checks(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.on_trace)

    @property
    def trace_checks(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.on_trace)


@dataclass(frozen=True)
class Target:
    """Where turns go and where the reply is: a base URL and a request template.

    ``timeout`` bounds a whole turn (redirects, and a reply streamed to its end).
    ``stream_reply`` is where, in each server-sent event's JSON data, the piece of the reply is
    (``None``: the event's data itself). ``redirect_origins`` are the other origins a redirect
    may lead to; the scenario's headers are never sent there."""

    url: str | None
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    reply: JSONPath
    model: str | None = None
    timeout: float = 60.0
    stream_reply: JSONPath | None = None
    redirect_origins: tuple[str, ...] = ()

    def with_url(self, url: str | None) -> Target:
        return self if url is None else replace(self, url=url)


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
    env: tuple[str, ...] = ()
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


class _TooMany(Exception):
    """The aliases of a YAML file expand past :data:`_MAX_VALUES`."""


@functools.lru_cache(maxsize=1)
def _bounded_loader() -> Any:
    """PyYAML's safe loader, counting what each alias stands for as it is read.

    Checking the loaded data is too late: merge keys (``<<: [*a, *a]``) are expanded by the
    loader itself, so nine lines of them keep ``safe_load`` busy for minutes. Here every alias
    adds the size of the node it names, and reading stops once the file stands for more than
    :data:`_MAX_VALUES` values."""
    yaml = yaml_module()

    class Loader(yaml.SafeLoader):  # type: ignore[misc, name-defined]
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.expanded = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                named = self.anchors.get(self.peek_event().anchor)
                if named is not None:
                    self._count(named)
            return super().compose_node(parent, index)

        def _count(self, node: Any) -> None:
            stack = [node]
            while stack:
                self.expanded += 1
                if self.expanded > _MAX_VALUES:
                    raise _TooMany
                value = stack.pop().value
                if isinstance(value, list):  # a sequence's nodes, or a mapping's pairs
                    for item in value:
                        stack.extend(item if isinstance(item, tuple) else (item,))

    return Loader


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
    deep = f"{path}: nested more than {_MAX_DEPTH} levels deep"
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except RecursionError:
            raise ScenarioError(deep) from None
        except ValueError as exc:
            raise ScenarioError(f"{path}: not valid JSON: {exc}") from exc
    else:
        yaml = yaml_module()
        try:
            # The safe loader builds plain data only: a YAML tag can never construct an object.
            data = yaml.load(text, Loader=_bounded_loader())
        except RecursionError:
            raise ScenarioError(deep) from None
        except _TooMany:
            raise ScenarioError(_too_many(str(path))) from None
        except yaml.YAMLError as exc:
            raise ScenarioError(f"{path}: not valid YAML: {exc}") from exc
    return data


def _too_many(source: str) -> str:
    return (
        f"{source}: the file stands for more than {_MAX_VALUES} values once its YAML aliases "
        "(*name, <<: *name) are expanded; write the values out, or use fewer aliases"
    )


def _check_size(data: Any, source: str) -> None:
    """Refuse data that stands for more than :data:`_MAX_VALUES` values once its YAML aliases
    are expanded, nests deeper than :data:`_MAX_DEPTH`, or contains itself (``&a [*a]``).

    Each shared node is measured once, so the cost is that of the file, not of its expansion.
    """
    measured: dict[int, tuple[int, int]] = {}  # id -> (values, height)
    too_deep = ScenarioError(
        f"{source}: nested more than {_MAX_DEPTH} levels deep (or an alias refers to the node "
        "that holds it)"
    )

    def measure(node: Any, depth: int) -> tuple[int, int]:
        if depth > _MAX_DEPTH:
            raise too_deep
        if not isinstance(node, (dict, list)):
            return 1, 0
        known = measured.get(id(node))
        if known is None:
            children = node.values() if isinstance(node, dict) else node
            values, height = 1, 0
            for child in children:
                n, h = measure(child, depth + 1)
                values, height = values + n, max(height, h + 1)
                if values > _MAX_VALUES:
                    break
            known = measured[id(node)] = (values, height)
        if depth + known[1] > _MAX_DEPTH:
            raise too_deep
        if known[0] > _MAX_VALUES:
            raise ScenarioError(_too_many(source))
        return known

    measure(data, 0)


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


def _mapping(value: Any, where: _Where, allowed: frozenset[str] | None = None) -> Mapping[str, Any]:
    """``value`` as a mapping whose keys are all ``allowed`` (any key when ``None``)."""
    if not isinstance(value, Mapping):
        raise where.fail(f"must be a mapping, got {type(value).__name__}")
    if allowed is None:
        return value
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
    """Check a request body template: JSON data whose strings may hold ``{{placeholders}}``
    (which names are defined is checked per turn, by :func:`_check_names`)."""
    if depth > 32:
        raise where.fail("the request body template is nested too deeply")
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _template(v, where.at(str(k)), depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_template(v, where.at(i), depth + 1) for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise where.fail(f"a request body holds JSON values, not {type(value).__name__}")


def _check_names(template: Any, where: _Where, known: frozenset[str], turn: int) -> None:
    """Every ``{{name}}`` in ``template`` is one of ``known``, the names defined at ``turn``."""
    if isinstance(template, Mapping):
        for k, v in template.items():
            _check_names(v, where.at(str(k)), known, turn)
    elif isinstance(template, list):
        for i, v in enumerate(template):
            _check_names(v, where.at(i), known, turn)
    elif isinstance(template, str):
        for inside in _BRACES.findall(template):
            name = inside.strip()
            if name in known:
                continue
            if not _NAME.fullmatch(name):
                raise where.fail(
                    f"{{{{{inside}}}}} is not a placeholder: a name is letters, digits and _"
                )
            saved = sorted(known - PLACEHOLDERS)
            offer = sorted(PLACEHOLDERS) + ([f"saved {', '.join(saved)}"] if saved else [])
            raise where.fail(
                f"unknown placeholder {{{{{name}}}}} at turn {turn}: use {', '.join(offer)}, "
                f"or a value an earlier turn saves (save: {{{name}: $.path.in.its.response}})"
            )


def _path(value: Any, where: _Where) -> str:
    path = _text(value, where)
    if not path.startswith("/"):
        raise where.fail(f"must start with '/', got {path!r}")
    return path


def _headers(value: Any, where: _Where, env: frozenset[str]) -> dict[str, str]:
    raw = _mapping(value if value is not None else {}, where)
    headers: dict[str, str] = {}
    for k, v in raw.items():
        w = where.at(str(k))
        text = _text(v, w, empty=True)
        for name in _ENV.findall(text):
            if name not in env:
                raise w.fail(
                    f"${{{name}}} is not in the file's `env:` list; a scenario sends only the "
                    f"environment variables it names (env: [{name}])"
                )
        headers[str(k)] = text
    return headers


def _origin(value: Any, where: _Where) -> str:
    text = _text(value, where)
    match = _ORIGIN.fullmatch(text.rstrip("/"))
    if match is None or not _port_ok(text):
        raise where.fail(f"must be an origin such as https://login.example.com, got {text!r}")
    return f"{match[1]}://{match[2]}".lower()


def _port_ok(url: str) -> bool:
    try:
        urllib.parse.urlsplit(url).port  # noqa: B018 (a port that is no number raises)
    except ValueError:
        return False
    return True


def _json_path(value: Any, where: _Where) -> JSONPath:
    try:
        return JSONPath(_text(value, where))
    except PathError as exc:
        raise where.fail(str(exc)) from exc


def _target(value: Any, where: _Where, env: frozenset[str] = frozenset()) -> Target:
    t = _mapping(
        value if value is not None else {},
        where,
        frozenset(
            {
                "url",
                "shape",
                "method",
                "path",
                "headers",
                "body",
                "reply",
                "stream_reply",
                "model",
                "timeout_s",
                "allow_redirects_to",
            }
        ),
    )
    shape_name = t.get("shape", "message" if "body" not in t else None)
    if shape_name is not None and (not isinstance(shape_name, str) or shape_name not in SHAPES):
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
    path = _path(t.get("path", shape.get("path", "/")), where.at("path"))
    if "body" not in t and not shape:
        raise where.fail("give a `shape` or a request `body` template")
    body = _template(t.get("body", shape.get("body")), where.at("body"))
    reply_text = t.get("reply", shape.get("reply"))
    if reply_text is None:
        raise where.at("reply").fail("say where the reply is in the response, as a JSON path")
    reply = _json_path(reply_text, where.at("reply"))
    stream_text = t.get("stream_reply", shape.get("stream_reply"))
    stream_reply = (
        None if stream_text is None else _json_path(stream_text, where.at("stream_reply"))
    )
    headers = _headers(t.get("headers"), where.at("headers"), env)
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
    allowed = t.get("allow_redirects_to", [])
    if not isinstance(allowed, list):
        raise where.at("allow_redirects_to").fail("must be a list of origins")
    origins = tuple(_origin(o, where.at("allow_redirects_to").at(i)) for i, o in enumerate(allowed))
    return Target(
        url,
        method,
        path,
        headers,
        body,
        reply,
        model,
        float(timeout),
        stream_reply,
        origins,
    )


def _url(value: Any, where: _Where) -> str:
    text = _text(value, where)
    if not re.match(r"https?://[^/\s]+", text) or not _port_ok(text):
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
        return Check(kind, _pattern(raw, w))
    if kind == "equals":
        return Check(kind, raw)
    if kind == "json_schema":
        if not isinstance(raw, Mapping):
            raise w.fail("must be a JSON Schema object")
        problem = schema_problem(raw)
        if problem is not None:
            raise w.fail(problem)
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
            _pattern(spec[test], w.at(test))
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


def _pattern(value: Any, where: _Where) -> str:
    pattern = _text(value, where)
    try:
        compile_pattern(pattern)
    except PatternError as exc:
        raise where.fail(f"not a regular expression tracely can run: {exc}") from None
    return pattern


def _save(value: Any, where: _Where) -> dict[str, JSONPath]:
    items = _mapping(value, where) if value is not None else {}
    saved: dict[str, JSONPath] = {}
    for name, path in items.items():
        w = where.at(str(name))
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise w.fail("a saved value's name is letters, digits and _ (used as {{name}})")
        if name in PLACEHOLDERS - _SAVABLE_BUILTINS:
            raise w.fail(f"{name} is the runner's own value; save under another name")
        saved[name] = _json_path(path, w)
    return saved


def _turn(value: Any, where: _Where, env: frozenset[str] = frozenset()) -> Turn:
    t = _mapping(
        value, where, frozenset({"user", "expect", "trace", "save", "path", "headers", "body"})
    )
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
    return Turn(
        user,
        tuple(checks),
        save=_save(t.get("save"), where.at("save")),
        path=_path(t["path"], where.at("path")) if "path" in t else None,
        headers=_headers(t.get("headers"), where.at("headers"), env),
        body=_template(t["body"], where.at("body")) if "body" in t else MISSING,
    )


def _env(value: Any, where: _Where) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise where.fail("must be a list of environment variable names")
    names = tuple(_text(v, where.at(i)) for i, v in enumerate(value))
    for i, name in enumerate(names):
        if not _NAME.fullmatch(name):
            raise where.at(i).fail(f"not an environment variable name: {name!r}")
    return names


def _defined(target: Target, turns: Sequence[Turn], where: _Where) -> None:
    """Every ``{{name}}`` a turn's request uses is the runner's or saved by an earlier turn."""
    known = PLACEHOLDERS
    for index, turn in enumerate(turns):
        w = where.at("turns").at(index)
        number = index + 1
        if turn.path is None:
            _check_names(target.path, where.at("target").at("path"), known, number)
        _check_names(turn.path, w.at("path"), known, number)
        body_where = w.at("body") if turn.body is not MISSING else where.at("target").at("body")
        body = turn.body if turn.body is not MISSING else target.body
        _check_names(body, body_where, known, number)
        for name, value in target.headers.items():
            if name not in turn.headers:
                _check_names(value, where.at("target").at("headers").at(name), known, number)
        for name, value in turn.headers.items():
            _check_names(value, w.at("headers").at(name), known, number)
        known = known | frozenset(turn.save)


def scenario_from_data(
    data: Any, *, source: str | None = None, default_id: str | None = None
) -> Scenario:
    """Validate parsed scenario data; raises :class:`ScenarioError` naming the field."""
    where = _Where(source)
    _check_size(data, where.source)
    s = _mapping(
        data,
        where,
        frozenset(
            {
                "id",
                "name",
                "tags",
                "env",
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
    env = _env(s.get("env", []), where.at("env"))
    target = _target(s.get("target"), where.at("target"), frozenset(env))
    turn_list = tuple(
        _turn(t, where.at("turns").at(i), frozenset(env)) for i, t in enumerate(turns)
    )
    _defined(target, turn_list, where)
    return Scenario(
        id=scenario_id,
        name=name,
        tags=tag_list,
        target=target,
        turns=turn_list,
        repeat=repeat,
        pass_threshold=float(threshold),
        source=source,
        env=env,
        assume_complete=assume_complete,
        span_format=formats,
        max_tokens=None if budget is None else _count(budget, where.at("max_tokens")),
    )


# -- filling a template ------------------------------------------------------------------


class TemplateError(ValueError):
    """A value the conversation produced cannot go where the template puts it."""


def _inline(value: Any, name: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise TemplateError(
        f"{{{{{name}}}}} is {shown(value, 60)}; only a string or a number goes inside text"
    )


def fill(template: Any, values: Mapping[str, Any]) -> Any:
    """``template`` with placeholders replaced: a string that is one placeholder becomes the
    value itself (a list of messages stays a list); placeholders inside text become text."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template.strip())
        if whole is not None:
            return values[whole[1]]
        return _PLACEHOLDER.sub(
            lambda m: (
                json.dumps(values[m[1]])
                if isinstance(values[m[1]], (dict, list))
                else str(values[m[1]])
            ),
            template,
        )
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    return template


def fill_path(template: str, values: Mapping[str, Any]) -> str:
    """A request path with each ``{{name}}`` replaced by its value, percent-encoded: a value
    from a reply stays one path segment (``../admin`` cannot climb, ``?x`` cannot add a query)."""
    return _PLACEHOLDER.sub(
        lambda m: urllib.parse.quote(_inline(values[m[1]], m[1]), safe=""), template
    )


_HEADER_PART: Final = re.compile(f"{_PLACEHOLDER.pattern}|{_ENV.pattern}")


def fill_header(template: str, values: Mapping[str, Any], where: str) -> str:
    """A header value with ``{{name}}`` and ``${NAME}`` replaced in one pass, so a value from
    a reply can never name an environment variable; a missing variable is an error."""

    def one(m: re.Match[str]) -> str:
        if m[1] is not None:
            text = _inline(values[m[1]], m[1])
            if any(c in text for c in "\r\n\0"):
                raise TemplateError(f"{{{{{m[1]}}}}} holds a line break, not valid in a header")
            return text
        if m[2] not in os.environ:
            raise ScenarioError(f"{where}: environment variable {m[2]} is not set")
        return os.environ[m[2]]

    return _HEADER_PART.sub(one, template)
