"""Every tracely setting, once: its environment variables, default and meaning.

Precedence: an explicit argument, then the environment (``TRACELY_*`` first, then the standard
``OTEL_*`` name where one exists), then ``[tool.tracely]`` in the nearest ``pyproject.toml``,
then the default. An empty string counts as unset. A value that cannot be used raises
:class:`~tracely_sdk.ConfigError` naming the variable it came from.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import Any

from tracely_sdk._faults import FaultConfig, fault_config
from tracely_sdk._masks import NO_MASKS, Masks, masks_from
from tracely_sdk._network_guard import ENV_VAR as ALLOW_NETWORK_VAR
from tracely_sdk._network_guard import Endpoint, endpoints_from
from tracely_sdk.errors import ConfigError

_UNSET: Any = object()


# One parser per type of value, each ``(source, value) -> parsed``: ``source`` names the
# argument, option, variable or pyproject key the value came from, for the error.


def _text(source: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{source}={value!r} must be a string")
    return value.strip()


def _port(source: str, value: Any) -> int:
    number = _integer(source, value)
    if not 0 <= number <= 65535:
        raise ConfigError(f"{source}={value!r} is not a TCP port (0-65535; 0 picks a free one)")
    return number


def _integer(source: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{source}={value!r} is not a whole number")
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip().replace("_", ""))
    except ValueError:
        raise ConfigError(f"{source}={value!r} is not a whole number") from None


def _positive(source: str, value: Any) -> int:
    number = _integer(source, value)
    if number < 1:
        raise ConfigError(f"{source}={value!r} must be at least 1")
    return number


def _seconds(source: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}={value!r} is not a number of seconds") from None
    if not math.isfinite(number) or number < 0:
        raise ConfigError(f"{source}={value!r} must be a non-negative number of seconds")
    return number


def _timeout(source: str, value: Any) -> float:
    number = _seconds(source, value)
    if number <= 0:
        raise ConfigError(f"{source}={value!r} must be more than 0 seconds")
    return number


def _networks(source: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (tuple, list)):
        items = [str(v).strip() for v in value]
    else:
        items = [v.strip() for v in _text(source, value).split(",")]
    networks = []
    for item in filter(None, items):
        try:
            networks.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            shown = item if len(item) <= 60 else item[:60] + "..."
            raise ConfigError(
                f"{source}: {shown!r} is not an IP address or network (e.g. 10.0.0.5, "
                "10.0.0.0/8, ::1); list the proxies in front of the server, comma-separated"
            ) from None
    return tuple(networks)


def _rate(source: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}={value!r} is not a number of requests per second") from None
    if not math.isfinite(number) or number < 0:
        raise ConfigError(f"{source}={value!r} must be a non-negative number of requests a second")
    return number


def _secret(source: str, value: Any) -> str:
    # The value is never shown: it is a credential.
    if not isinstance(value, str):
        raise ConfigError(f"{source} must be a string")
    return value.strip()


def _bool(source: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{source}={value!r} is not a boolean; use true or false")


# The GenAI instrumentations' newer values of the content-capture variable, besides booleans.
_CAPTURE_MODES = {
    "span_only": True,
    "span_and_event": True,
    "event_only": False,
    "no_content": False,
}


def _capture(source: str, value: Any) -> bool:
    mode = _CAPTURE_MODES.get(str(value).strip().lower())
    if mode is not None:
        return mode
    try:
        return _bool(source, value)
    except ConfigError:
        raise ConfigError(
            f"{source}={value!r} is not a boolean or a capture mode; use true, false, "
            f"{', '.join(_CAPTURE_MODES)}"
        ) from None


# The providers live here, beside the setting that names them, so that the settings table
# imports nothing above it (tracely_sdk.providers re-exports the table).
PROVIDERS: dict[str, tuple[str, str]] = {
    # name: (the SDK's top-level module, tracely's patch module)
    "openai": ("openai", "tracely_sdk.providers.openai"),
    "anthropic": ("anthropic", "tracely_sdk.providers.anthropic"),
    "google": ("google.genai", "tracely_sdk.providers.google_genai"),  # the google-genai SDK
    "mcp": ("mcp", "tracely_sdk.providers.mcp"),  # ClientSession tool calls (providers/mcp.py)
    # model calls sent by any library through these HTTP clients (providers/http/)
    "httpx": ("httpx", "tracely_sdk.providers.http.httpx"),
    "httpx2": ("httpx2", "tracely_sdk.providers.http.httpx2"),
    "urllib3": ("urllib3", "tracely_sdk.providers.http.urllib3"),  # requests, botocore (boto3)
    "aiohttp": ("aiohttp", "tracely_sdk.providers.http.aiohttp"),
}
"""The providers tracely patches; each name is also its extra: ``pip install 'tracely-replay[openai]'``."""


def instrument_values() -> tuple[str, ...]:
    """What ``TRACELY_INSTRUMENT`` accepts: auto, off, and each provider tracely patches."""
    return ("auto", "off", *PROVIDERS)


def _instrument(source: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        names = tuple(str(v).strip().lower() for v in value)
    else:
        names = tuple(n.strip().lower() for n in str(value).split(",") if n.strip())
    allowed = instrument_values()
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


def _ignore(source: str, value: Any) -> Masks:
    # A list in pyproject.toml; in the environment a JSON array of masks or a single mask.
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except ValueError:
            pass  # a single path that starts with an index: [0].content
    return masks_from(value, source)


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


def _hosts(source: str, value: Any) -> tuple[Endpoint, ...]:
    return endpoints_from(value, source)


@dataclass(frozen=True)
class Setting:
    """One setting: where it is read from, its default and what it means.

    ``project``: whether ``[tool.tracely]`` in pyproject.toml may set it (not for the server's
    settings: a server is not one project's).
    """

    name: str
    env: tuple[str, ...]
    default: Any
    parse: Callable[[str, Any], Any]
    doc: str
    project: bool = True


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting(
            "service_name",
            ("OTEL_SERVICE_NAME",),
            None,
            _text,
            "service.name of the spans (also from OTEL_RESOURCE_ATTRIBUTES).",
        ),
        Setting(
            "store",
            ("TRACELY_STORE",),
            None,
            _text,
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
            "Provider SDKs to instrument: auto (every installed one), off, or provider names "
            "(those of tracely_sdk.providers.PROVIDERS).",
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
            "token",
            ("TRACELY_TOKEN",),
            None,
            _secret,
            "Bearer token sent to a tracely server store.",
        ),
        Setting(
            "ignore",
            ("TRACELY_IGNORE",),
            NO_MASKS,
            _ignore,
            "What replay leaves out when it compares a call with its recording: JSON paths "
            "('$..request_id', 'messages[0].content'), 're:PATTERN' regular expressions and the "
            "built-ins '@iso-timestamp' and '@uuid' (see tracely_sdk._masks).",
        ),
        Setting(
            "allow_network",
            (ALLOW_NETWORK_VAR,),
            (),
            _hosts,
            "Hosts strict replay may connect to besides tracely's own endpoints: HOST or "
            "HOST:PORT (comma-separated in the environment, a list in [tool.tracely]), e.g. a "
            "database the tests start. Loopback is not allowed unless listed.",
        ),
        Setting(
            "faults",
            ("TRACELY_FAULTS",),
            FaultConfig(),
            fault_config,
            "What `tracely replay --faults` derives and gates on: a table with kinds "
            '(tools: "error", "timeout", "empty"; model calls: "rate_limit", "server_error", '
            '"timeout", "stream_cut", "refusal"; default all), max_calls ("2x": twice the '
            "recorded calls, or a "
            'number), retry ("incomplete", "serve-recorded", "serve-fault"), error_type (for '
            'tools never recorded failing; default "ToolError") and fail_on (derived verdicts '
            'that fail the job, e.g. ["error:CRASHED"]; default none). A JSON object in the '
            "environment.",
        ),
        Setting(
            "capture_content",
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",),
            False,
            _capture,
            "Also write messages to the plain gen_ai.input/output.messages attributes.",
        ),
    )
}


def _pyproject(start: Path | None = None) -> Mapping[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pyproject settings need 3.11's tomllib
        return {}
    found = _nearest_pyproject(
        os.path.realpath(start) if start is not None else _real_directory(os.getcwd())
    )
    if found is None:
        return {}
    candidate, stamp = found
    cached = _sections.get(candidate)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        with open(candidate, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{candidate}: cannot read [tool.tracely]: {exc}") from exc
    section = data.get("tool", {}).get("tracely", {})
    section = section if isinstance(section, Mapping) else {}
    _sections[candidate] = (stamp, section)
    return section


def _real_directory(cwd: str) -> str:
    """``realpath(cwd)``, resolved once per working directory: every fixtures() block reads
    the settings, and resolving a path walks each of its parts."""
    real = _real_cwd.get(cwd)
    if real is None:
        real = os.path.realpath(cwd)
        _real_cwd.clear()  # one directory kept: the process's working directory
        _real_cwd[cwd] = real
    return real


_real_cwd: dict[str, str] = {}


def _nearest_pyproject(directory: str) -> tuple[str, tuple[int, int]] | None:
    """The pyproject.toml nearest ``directory`` (upwards) and its version stamp.

    Every fixtures() block reads the project's masks, so the walk uses os.path (a tenth of
    pathlib's cost) and :func:`_pyproject` parses each version of the file once.
    """
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        try:
            stat = os.stat(candidate)
        except OSError:
            stat = None
        if stat is not None and S_ISREG(stat.st_mode):
            return candidate, (stat.st_mtime_ns, stat.st_size)
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


_sections: dict[str, tuple[tuple[int, int], Mapping[str, Any]]] = {}


def resolve(
    name: str,
    argument: Any = _UNSET,
    *,
    environ: Mapping[str, str] | None = None,
    pyproject: Mapping[str, Any] | None = None,
) -> Any:
    """The value of setting ``name`` by the precedence rules above."""
    return resolve_setting(
        SETTINGS[name],
        None if argument is _UNSET else argument,
        os.environ if environ is None else environ,
        pyproject=pyproject,
        argument=f"{name} argument",
    )


def resolve_setting(
    setting: Setting,
    value: Any,
    environ: Mapping[str, str],
    *,
    pyproject: Mapping[str, Any] | None = None,
    argument: str,
) -> Any:
    """The value of ``setting``: ``value`` (given as ``argument``: None or "" is not given),
    then ``environ``, then ``[tool.tracely]`` (``pyproject``, default the nearest
    pyproject.toml's) where the setting may come from there, then its default."""
    if value is not None and value != "":
        return setting.parse(argument, value)
    for var in setting.env:
        raw = environ.get(var, "").strip()
        if raw:
            return setting.parse(var, raw)
    if setting.project:
        table = _pyproject() if pyproject is None else pyproject
        key = setting.name.replace("_", "-")
        for candidate in (setting.name, key):
            if candidate in table and table[candidate] != "":
                return setting.parse(f"[tool.tracely] {candidate}", table[candidate])
    return setting.default
