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
# Substrings every match contains, checked first so that clean values stay cheap. Each check
# is one fast substring search, several times quicker per character than one regular
# expression with alternatives, which matters for prompts of many kilobytes. The token
# patterns are case-sensitive, so they are looked for in the text as it is; bearer tokens and
# the credential keys are case-insensitive, so they are looked for in its lowercase form.
# Credential-like keys all end in one of these words followed by the key's closing quote, so
# "prompt_tokens" or "keyword" do not send every value through both substitutions.
_GITHUB = re.compile(r"gh[pousr]_")
# The only characters beyond ASCII that a case-insensitive pattern matches to an ASCII letter
# and that lower() does not turn into it: long s (U+017F) matches "s", and dotted capital I
# (U+0130) lowers to two characters.
_FOLDS = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))


def _may_hold_secret(text: str) -> bool:
    """False only when neither pattern can match ``text`` (a property test pins this)."""
    if "sk-" in text or "AKIA" in text or "xox" in text or "AIza" in text:
        return True
    if _GITHUB.search(text) is not None:
        return True
    if not text.isascii():
        for char, letter in _FOLDS:
            if char in text:
                text = text.replace(char, letter)
    low = text.lower()
    return (
        'key"' in low
        or 'token"' in low
        or "bearer" in low
        or "passw" in low
        or 'secret"' in low
        or 'cookie"' in low
        or 'authorization"' in low
    )


RedactHook = Callable[[Any], Any]


class Redactor:
    """Applies the default rules, then an optional user hook, to a value's JSON text."""

    __slots__ = ("hook",)

    def __init__(self, hook: RedactHook | None = None) -> None:
        self.hook = hook

    def __call__(self, text: str) -> str:
        if _may_hold_secret(text):
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
