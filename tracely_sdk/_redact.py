"""Redaction of secrets before a value becomes a span attribute.

Redaction runs on the JSON text of every recorded value (args, input, output, error), before
the attribute is set, so a secret never reaches an exporter, the fixture processor or a store.
The default rules replace API keys and bearer tokens wherever they appear and the values of
keys named like credentials (``api_key``, ``authorization``, ``password``, ``secret``,
``token``, ...). A user hook, ``init(redact=fn)``, then sees the JSON-compatible value and
returns what to record.

Effect on replay: live arguments are redacted the same way before they are matched, so a
recorded ``{"api_key": "[REDACTED]"}`` matches any key the replayed code passes, and an output
that contained a secret is served redacted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

REDACTED = "[REDACTED]"

_SECRET_KEYS = (
    r"api[_-]?key|x-api-key|authorization|proxy-authorization|password|passwd|secret"
    r"|client[_-]?secret|access[_-]?token|refresh[_-]?token|id[_-]?token|auth[_-]?token"
    r"|session[_-]?token|token|private[_-]?key|cookie|set-cookie"
)
_KEY_VALUE = re.compile(rf'"(?P<key>(?i:{_SECRET_KEYS}))"(?P<sep>\s*:\s*)"(?:[^"\\]|\\.)*"')
_TOKENS = re.compile(
    r"(?:sk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_\-]{16,}"  # OpenAI / Anthropic keys
    r"|(?i:bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*"  # bearer tokens
    r"|AKIA[0-9A-Z]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{36,}"  # GitHub tokens
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|AIza[0-9A-Za-z\-_]{35})"  # Google API keys
)
# Substrings every match contains (in lowercase); checking them first keeps clean values cheap.
# Credential-like keys all end in one of these words followed by the key's closing quote, so
# "prompt_tokens" or "keyword" do not send every value through both substitutions.
_HINTS = re.compile(
    r'sk-|bearer|akia|gh[pousr]_|xox|aiza|key"|token"|authorization"|passw|secret"|cookie"'
)

RedactHook = Callable[[Any], Any]


class Redactor:
    """Applies the default rules, then an optional user hook, to a value's JSON text."""

    __slots__ = ("hook",)

    def __init__(self, hook: RedactHook | None = None) -> None:
        self.hook = hook

    def __call__(self, text: str) -> str:
        if _HINTS.search(text.lower()) is not None:
            text = _KEY_VALUE.sub(lambda m: f'"{m["key"]}"{m["sep"]}"{REDACTED}"', text)
            text = _TOKENS.sub(REDACTED, text)
        if self.hook is not None:
            text = orjson.dumps(
                self.hook(orjson.loads(text)), option=orjson.OPT_NON_STR_KEYS
            ).decode()
        return text


_active = Redactor()


def redact(text: str) -> str:
    """Redact a value's JSON text with the configured rules."""
    return _active(text)


def configure(hook: RedactHook | None) -> None:
    """Set the user hook run after the default rules (None: defaults only)."""
    _active.hook = hook
