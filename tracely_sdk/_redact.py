"""The configured redactor: the rules of :mod:`tracely_otel._redact`, then the user's hook.

Every value tracely records goes through :func:`redact` (its JSON text) or :func:`redact_text`
(an exception's message or stack trace, a span status description) before it becomes an
attribute, an event or a status, so a secret never reaches an exporter, the fixture processor,
a store or a case file. What the rules catch, and what they cannot, is written in
:mod:`tracely_otel._redact`. A user hook, ``init(redact=fn)``, then sees the JSON-compatible
value (an exception's text as a string) and returns what to record.

Effect on replay: live arguments are redacted the same way before they are matched, so a
recorded ``{"api_key": "[REDACTED]"}`` matches any key the replayed code passes, and an output
that contained a secret is served redacted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from tracely_otel import REDACTED, is_secret_key, redact_json, redact_str

__all__ = [
    "REDACTED",
    "RedactHook",
    "Redactor",
    "configure",
    "is_secret_key",
    "redact",
    "redact_text",
]

RedactHook = Callable[[Any], Any]


class Redactor:
    """Applies the default rules, then an optional user hook, to a value's JSON text."""

    __slots__ = ("hook",)

    def __init__(self, hook: RedactHook | None = None) -> None:
        self.hook = hook

    def __call__(self, text: str) -> str:
        text = redact_json(text)
        if self.hook is not None:
            text = orjson.dumps(
                self.hook(orjson.loads(text)), option=orjson.OPT_NON_STR_KEYS
            ).decode()
        return text

    def text(self, text: str) -> str:
        """Applies the rules to plain text (an exception message, a stack trace)."""
        text = redact_str(text)
        if self.hook is not None:
            hooked = self.hook(text)
            text = hooked if isinstance(hooked, str) else str(hooked)
        return text


_active = Redactor()


def redact(text: str) -> str:
    """Redact a value's JSON text with the configured rules."""
    return _active(text)


def redact_text(text: str) -> str:
    """Redact plain text (an exception message, a stack trace, a status description)."""
    return _active.text(text)


def configure(hook: RedactHook | None) -> None:
    """Set the user hook run after the default rules (None: defaults only)."""
    _active.hook = hook
