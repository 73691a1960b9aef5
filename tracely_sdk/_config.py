"""Every tracely setting, once: its environment variables, default and meaning.

Precedence: an explicit argument, then the environment (``TRACELY_*`` first, then the standard
``OTEL_*`` name where one exists), then ``[tool.tracely]`` in the nearest ``pyproject.toml``,
then the default. An empty string counts as unset. A value that cannot be used raises
:class:`~tracely_sdk.ConfigError` naming the variable it came from.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracely_sdk.errors import ConfigError

_UNSET: Any = object()


def _str(source: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{source}={value!r} must be a string")
    return value


def _bool(source: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{source}={value!r} is not a boolean; use true or false")


def _instrument(source: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        names = tuple(str(v).strip().lower() for v in value)
    else:
        names = tuple(n.strip().lower() for n in str(value).split(",") if n.strip())
    allowed = ("auto", "off", "openai", "anthropic")
    for name in names:
        if name not in allowed:
            raise ConfigError(
                f"{source}={value!r}: unknown value {name!r}; use {', '.join(allowed)}"
            )
    if "off" in names:
        return ()
    if "auto" in names:
        return ("auto",)  # every installed SDK; a missing one is skipped, not an error
    return names


def _patterns(source: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, str):
        items = value.split(",")
    else:
        items = [value]
    patterns = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(
                f"{source}={value!r}: {item!r} is not a string; use patterns like "
                "'examples.weather_agent:*'"
            )
        if item.strip():
            patterns.append(item.strip())
    return tuple(patterns)


def _capture(source: str, value: Any) -> bool:
    # The GenAI instrumentations' values as well as plain booleans.
    lowered = str(value).strip().lower()
    if lowered in ("span_only", "span_and_event"):
        return True
    if lowered in ("event_only", "no_content"):
        return False
    return _bool(source, value)


@dataclass(frozen=True)
class Setting:
    """One setting: where it is read from, its default and what it means."""

    name: str
    env: tuple[str, ...]
    default: Any
    parse: Callable[[str, Any], Any]
    doc: str


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting(
            "service_name",
            ("OTEL_SERVICE_NAME",),
            None,
            _str,
            "service.name of the spans (also from OTEL_RESOURCE_ATTRIBUTES).",
        ),
        Setting(
            "store",
            ("TRACELY_STORE",),
            None,
            _str,
            "Where recordings and cases are kept: sqlite:///path.db (default "
            ".tracely/tracely.db in the project), http(s)://server, postgresql://...",
        ),
        Setting(
            "record",
            ("TRACELY_RECORD",),
            True,
            _bool,
            "Store each finished live trace as a recording (init() only).",
        ),
        Setting(
            "instrument",
            ("TRACELY_INSTRUMENT",),
            (),
            _instrument,
            "Provider SDKs to instrument: auto (every installed one), openai, anthropic, off.",
        ),
        Setting(
            "entrypoints",
            ("TRACELY_ENTRYPOINTS",),
            (),
            _patterns,
            "Agent entrypoints replay may import for a case besides the project's own modules: "
            "globs on module:function, e.g. examples.weather_agent:* (comma-separated in the "
            "environment, a list in [tool.tracely]). A case naming anything else is ERRORED.",
        ),
        Setting(
            "token", ("TRACELY_TOKEN",), None, _str, "Bearer token sent to a tracely server store."
        ),
        Setting(
            "capture_content",
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",),
            False,
            _bool,
            "Also write messages to the plain gen_ai.input/output.messages attributes.",
        ),
    )
}


def _pyproject(start: Path | None = None) -> Mapping[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pyproject settings need 3.11's tomllib
        return {}
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                with candidate.open("rb") as fh:
                    data = tomllib.load(fh)
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"{candidate}: cannot read [tool.tracely]: {exc}") from exc
            section = data.get("tool", {}).get("tracely", {})
            return section if isinstance(section, Mapping) else {}
    return {}


def resolve(
    name: str,
    argument: Any = _UNSET,
    *,
    environ: Mapping[str, str] | None = None,
    pyproject: Mapping[str, Any] | None = None,
) -> Any:
    """The value of setting ``name`` by the precedence rules above."""
    setting = SETTINGS[name]
    if argument is not _UNSET and argument is not None:
        return setting.parse(f"{name} argument", argument)
    env = os.environ if environ is None else environ
    for var in setting.env:
        raw = env.get(var, "").strip()
        if raw:
            return setting.parse(var, raw)
    table = _pyproject() if pyproject is None else pyproject
    key = name.replace("_", "-")
    for candidate in (name, key):
        if candidate in table and table[candidate] != "":
            return setting.parse(f"[tool.tracely] {candidate}", table[candidate])
    return setting.default
