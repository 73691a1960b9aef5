"""The case store: production recordings and the regression cases promoted from them.

One interface (:class:`Store`) behind a URL::

    store = open_store()                       # $TRACELY_STORE, else the project's SQLite file
    store = open_store("sqlite:///abs/tracely.db")
    store = open_store("sqlite:relative/tracely.db")
    store = open_store("ci.db")                # a bare path ending in .db
    store = open_store("http://tracely:8000")  # the tracely server (tracely-replay[server])
    store = open_store("postgresql://...")     # PostgreSQL (tracely-replay[postgres])

A ``sqlite:`` URL takes ``?timeout=SECONDS`` (how long a write waits for another process,
default 30) and ``?synchronous=normal|full`` (default ``full``: a committed recording survives a
power cut; ``normal`` is faster and survives an application crash only).

The default is ``sqlite:///<project>/.tracely/tracely.db``, where ``<project>`` is the nearest
ancestor of the working directory holding ``pyproject.toml`` or ``.git``.

Other backends plug in with :func:`register_backend`; the ``http``/``https`` and
``postgresql`` backends are provided by ``tracely_sdk.server``, which registers them when
imported (``open_store`` imports it on demand for those schemes).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracely_sdk.errors import ConfigError, MissingDependency, install_hint
from tracely_sdk.store._base import Promotion, StatedRun, Store
from tracely_sdk.store._files import (
    CaseFileError,
    edited_recordings,
    export_cases,
    import_cases,
    project_root,
    read_case_file,
    reseal_case_file,
    tracely_dir,
)
from tracely_sdk.store._migrations import NewerSchema
from tracely_sdk.store._model import (
    Case,
    CaseVersion,
    InvalidCase,
    Recording,
    Run,
    readable_case_result,
    redact_url,
    slugify,
    validate_case_id,
)
from tracely_sdk.store._outline import CallOutline, Cut, RecordedCalls, RecordingSummary
from tracely_sdk.store._sqlite import SQLiteStore, SQLStore
from tracely_sdk.store._writer import BackgroundWriter

__all__ = [
    "BackgroundWriter",
    "CallOutline",
    "Case",
    "CaseFileError",
    "CaseVersion",
    "Cut",
    "InvalidCase",
    "NewerSchema",
    "Promotion",
    "RecordedCalls",
    "Recording",
    "RecordingSummary",
    "Run",
    "SQLStore",
    "SQLiteStore",
    "StatedRun",
    "Store",
    "default_store_url",
    "edited_recordings",
    "spool_path_for",
    "export_cases",
    "import_cases",
    "open_store",
    "project_root",
    "read_case_file",
    "readable_case_result",
    "redact_url",
    "reseal_case_file",
    "register_backend",
    "slugify",
    "sqlite_url",
    "tracely_dir",
    "validate_case_id",
]

ENV_VAR = "TRACELY_STORE"
_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")

BackendFactory = Callable[[str], Store]

_backends: dict[str, BackendFactory] = {}
# Schemes whose backend lives in a module that registers it when imported, and the extra it needs.
_PROVIDED_BY = {
    "http": ("tracely_sdk.server", "server"),
    "https": ("tracely_sdk.server", "server"),
    "postgresql": ("tracely_sdk.server", "postgres"),
    "postgres": ("tracely_sdk.server", "postgres"),
}


def register_backend(scheme: str, factory: BackendFactory) -> None:
    """Serve ``scheme://...`` URLs with ``factory(url)`` (replaces an earlier registration)."""
    if not _SCHEME_RE.match(f"{scheme}://"):
        raise ValueError(f"not a URL scheme: {scheme!r}")
    _backends[scheme.lower()] = factory


def default_store_url(cwd: str | os.PathLike[str] | None = None) -> str:
    """``sqlite:///<project>/.tracely/tracely.db`` for the project around ``cwd``."""
    return sqlite_url(tracely_dir(cwd) / "tracely.db")


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """The ``sqlite:///`` URL of a file (made absolute)."""
    return "sqlite:///" + Path(path).absolute().as_posix().lstrip("/")


def _accepted() -> str:
    schemes = sorted({"sqlite", *_backends, *_PROVIDED_BY})
    return (
        "sqlite:///abs/path.db, sqlite:relative/path.db, a path ending in .db, or a URL with "
        f"one of the schemes {', '.join(schemes)}"
    )


def _sqlite_target(url: str) -> tuple[str, dict[str, Any]]:
    """The file of a ``sqlite:`` URL and the options in its query (``timeout``, ``synchronous``)."""
    rest, _, query = url[len("sqlite:") :].partition("?")
    options: dict[str, Any] = {}
    for key, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if key == "timeout":
            try:
                options["timeout"] = float(value)
            except ValueError:
                raise ConfigError(
                    f"store URL {url!r}: timeout must be seconds, got {value!r}"
                ) from None
        elif key == "synchronous":
            if value.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
                raise ConfigError(
                    f"store URL {url!r}: synchronous must be off, normal, full or extra, got {value!r}"
                )
            options["synchronous"] = value
        else:
            raise ConfigError(
                f"store URL {url!r}: unknown option {key!r} (accepted: timeout, synchronous)"
            )
    if rest == ":memory:":
        return rest, options
    if rest.startswith("//"):
        rest = rest[2:]
        if not rest.startswith("/"):
            raise ConfigError(
                f"store URL {url!r}: a sqlite URL has no host; use sqlite:///abs/path.db or "
                "sqlite:relative/path.db"
            )
        rest = "/" + rest.lstrip("/")
        if re.match(r"^/[A-Za-z]:[/\\]", rest):  # sqlite:///C:/path on Windows
            rest = rest[1:]
    if not rest or rest.endswith(("/", os.sep)):
        raise ConfigError(f"store URL {url!r} names no file; use e.g. sqlite:///abs/tracely.db")
    return os.path.expanduser(rest), options


def spool_path_for(url: str) -> Path:
    """Where a background writer spools recordings for store ``url``, one file per store.

    Beside the database for a SQLite file (so the spool travels with the store), else in the
    project's ``.tracely`` directory. Keying by store means a spooled recording always catches
    up into the store it was meant for.
    """
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    if url.lower().startswith("sqlite:"):
        path, _ = _sqlite_target(url)
        if path != ":memory:":
            return Path(path).absolute().parent / ".tracely-spool" / f"{key}.jsonl"
    elif url.lower().endswith(_SQLITE_SUFFIXES):
        return Path(url).absolute().parent / ".tracely-spool" / f"{key}.jsonl"
    return tracely_dir() / "spool" / f"{key}.jsonl"


def open_store(url: str | None = None, *, create: bool = True) -> Store:
    """Open the store at ``url``, else the ``store`` setting (``$TRACELY_STORE``, then
    ``[tool.tracely] store``), else :func:`default_store_url`.

    An empty string counts as unset. With ``create=False`` a SQLite file that does not exist
    raises :class:`~tracely_sdk.errors.StoreError` naming the path, and nothing is created.
    Raises :class:`~tracely_sdk.errors.ConfigError` for a URL
    no backend accepts (naming the URL and the accepted forms), and
    :class:`~tracely_sdk.errors.StoreError` when the store itself cannot be opened.
    """
    if not url:
        from tracely_sdk._config import resolve

        url = resolve("store") or default_store_url()
    url = url.strip()
    shown = redact_url(url)
    if url.lower().startswith("sqlite:"):
        path, options = _sqlite_target(url)
        return SQLiteStore(path, url=url if path != ":memory:" else None, create=create, **options)
    match = _SCHEME_RE.match(url)
    if match:
        scheme = match.group(1).lower()
        if scheme not in _backends and scheme in _PROVIDED_BY:
            module, _ = _PROVIDED_BY[scheme]
            try:
                importlib.import_module(module)
            except ImportError:
                pass
        factory = _backends.get(scheme)
        if factory is not None:
            from tracely_sdk._network_guard import allow_own

            # Strict replay lets tracely reach its own store: only a store of a backend tracely
            # has, so a URL it refuses allows nothing.
            allow_own(url)
            try:
                return factory(url)
            except MissingDependency as exc:
                raise ConfigError(f"store URL {shown!r}: {exc}") from None
        if scheme in _PROVIDED_BY:
            module, extra = _PROVIDED_BY[scheme]
            what = "the tracely server" if extra == "server" else "PostgreSQL"
            raise ConfigError(
                f"store URL {shown!r}: the {scheme} backend ({what}) needs "
                f"{install_hint(extra)}; it is provided by {module}, which has not "
                "registered it in this environment"
            )
        raise ConfigError(f"store URL {shown!r}: unknown scheme {scheme!r}; expected {_accepted()}")
    if url.lower().endswith(_SQLITE_SUFFIXES):
        return SQLiteStore(url, create=create)
    raise ConfigError(f"store URL {shown!r} is not one tracely can open; expected {_accepted()}")
