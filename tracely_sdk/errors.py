"""Tracely's exceptions.

TracelyError
 ├── ConfigError          a setting has a value tracely cannot use
 ├── MissingDependency    an optional SDK or extra is not installed
 ├── ReplayError          a recorded run cannot answer a call (raised on purpose, never masked)
 │    └── BundleError     the bundle is not a loadable recording
 ├── RecordedError        a failure that was recorded live, re-raised on replay
 │    ├── ToolError       ... by a tool
 │    └── LLMError        ... by an LLM call
 └── StoreError           the case store cannot do what was asked
      ├── NotFound        no such trace or case
      └── Conflict        the request contradicts what is stored (e.g. recapture input differs)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

__all__ = [
    "BundleError",
    "ConfigError",
    "Conflict",
    "LLMError",
    "MissingDependency",
    "NotFound",
    "RecordedError",
    "ReplayError",
    "StoreError",
    "ToolError",
    "TracelyError",
]


class TracelyError(Exception):
    """Base class of every error tracely raises on purpose."""


class ConfigError(TracelyError, ValueError):
    """A setting (argument, environment variable or pyproject entry) has an unusable value."""


def install_hint(extra: str) -> str:
    """How to install the ``extra``, from a checkout of tracely as from a package index."""
    return f"pip install '.[{extra}]' in a tracely checkout (or 'tracely-replay[{extra}]' from an index)"


class MissingDependency(TracelyError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(f"{package} is not installed; install it with: {install_hint(extra)}")
        self.package = package
        self.extra = extra


class ReplayError(TracelyError):
    """A call under recorded replay that the recording cannot answer.

    ``label`` is the call (``tools:get_weather``); ``closest`` the recorded entries nearest to
    it, each ``{"entry": ..., "used": ..., "differences": [{"path", "recorded", "actual"}]}``.
    """

    def __init__(
        self,
        message: str,
        *,
        label: str | None = None,
        closest: Sequence[dict[str, Any]] = (),
    ) -> None:
        super().__init__(message)
        self.label = label
        self.closest = list(closest)


class BundleError(ReplayError):
    """The bundle given to ``fixtures()`` is not a recording (bad shape or failed integrity)."""


class RecordedError(TracelyError):
    """A failure recorded in the live run, raised again on replay.

    ``type`` is the recorded exception's type name and ``message`` its message; the original
    class is never imported or constructed from the recording. ``str(error)`` is the recorded
    message and ``repr(error)`` the recorded ``repr()`` of the live exception
    (``ValueError('no data')``), so code that reads either (a framework that turns a tool's
    failure into the next prompt) sees on replay exactly what it saw live.
    """

    def __init__(
        self, label: str, type: str, message: str, *, live_repr: str | None = None
    ) -> None:
        super().__init__(message)
        self.label = label
        self.type = type
        self.message = message
        self.live_repr = live_repr if live_repr is not None else _default_repr(type, message)

    @classmethod
    def from_record(cls: type[_E], label: str, error: Mapping[str, Any]) -> _E:
        """The error for a recorded ``{"type", "message", "repr"}`` entry (``repr`` optional)."""
        live_repr = error.get("repr")
        return cls(
            label,
            str(error.get("type")),
            str(error.get("message")),
            live_repr=live_repr if isinstance(live_repr, str) else None,
        )

    def __repr__(self) -> str:
        return self.live_repr


def _default_repr(type_name: str, message: str) -> str:
    """What ``repr()`` of the live exception most likely was, for entries recorded without it.

    Python's own exceptions show their class's ``__name__`` (the recorded type is its qualified
    name) and their one argument; one raised without arguments has an empty message.
    """
    name = type_name.rpartition(".")[2]
    return f"{name}({message!r})" if message else f"{name}()"


_E = TypeVar("_E", bound=RecordedError)


class ToolError(RecordedError):
    """A tool failure replayed from the recording."""


class LLMError(RecordedError):
    """An LLM call failure replayed from the recording."""


class StoreError(TracelyError):
    """The case store could not do what was asked."""


class NotFound(StoreError, LookupError):
    """No trace or case has that id."""


class Conflict(StoreError):
    """The request contradicts what is stored; nothing was changed."""
