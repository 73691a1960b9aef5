"""What a span reader answers: a call a bundle can serve, or why the span's call cannot be.

Tracely's own reader (``_extract``) and the readers of other instrumentors' spans
(``_foreign``) answer alike; the extractor only collects the answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracely_otel._spans import SpanRecord


@dataclass(slots=True)
class ExtractedCall:
    """A replayable call read from a span: ``entry`` is a bundle entry without ``seq``."""

    kind: str  # "tools" | "llm"
    name: str
    entry: dict[str, Any]
    foreign: bool = False  # read from another instrumentor's span
    # The entry's values are known to be within a recorded value's limits (the reader decided
    # it from the JSON text it parsed them from): the extractor checks only the entry's shape.
    values_checked: bool = False


@dataclass(slots=True)
class NotReplayable:
    """A span that is a call but cannot be served, with the reason a user can act on."""

    kind: str
    name: str
    reason: str
    foreign: bool = False


SpanReader = Callable[[SpanRecord], "ExtractedCall | NotReplayable | None"]
"""Reads one span: its call, why it cannot be served, or None for a span that is no call."""
