"""The rules that redact secrets: one redactor for every value that leaves a process.

``tracely_sdk`` applies them (with the user's hook, ``init(redact=fn)``) to the JSON text of
every recorded value and to the plain text of exception messages, stack traces and span status
descriptions, before the attribute, event or status is set; the extractor applies them to the
calls it reads from other instrumentors' spans, in process and in the server. So a secret never
reaches an exporter, the fixture processor, a store or a case file.

What is replaced by ``[REDACTED]``:

- the value, of any type, under a key named like a credential, wherever the key is: a JSON
  object, JSON inside a string (OpenAI tool-call ``arguments``), ``NAME=value`` and
  ``NAME: value`` in text (``export FOO_TOKEN=...``, a ``.env`` line, a header line, a Python
  repr or keyword argument in a traceback) and URL query parameters. A key is named like a
  credential when it contains ``password``/``passwd``/``secret``/
  ``credential``/``authorization``/``cookie``, has the word ``pwd``, ends in ``auth`` or
  ``token`` (``echo_token``, ``X-Auth-Token``; not ``max_tokens``, ``input_tokens`` or
  ``token_count``, which are usage numbers) or ends in ``key`` after ``api``, ``private``,
  ``secret``, ``access``, ``signing``, ... (``OPENAI_API_KEY``, ``X-Goog-Api-Key``). In a URL
  query ``key``, ``sig``, ``signature`` and ``auth`` count too;
- secrets of a known shape anywhere in text: OpenAI/Anthropic keys (``sk-...``), bearer tokens,
  ``Basic`` credentials, JWTs, PEM private-key blocks, AWS access key ids, GitHub, Slack and
  Google API keys.

Out of reach, by design: a secret in prose (``my password is hunter2``), a value after a
credential key that holds spaces and no quotes (only its first word is replaced), base64 or hex
blobs of no known shape, and secrets split across several values.

Effect on replay: live arguments are redacted the same way before they are matched, so a
recorded ``{"api_key": "[REDACTED]"}`` matches any key the replayed code passes, and an output
that contained a secret is served redacted.

Cost: a value that cannot hold a secret (no credential-like key and none of the shapes' fixed
parts) is returned after a few substring searches; only the others are parsed and walked.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import orjson

REDACTED = "[REDACTED]"

_TOKENS = re.compile(
    r"sk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_\-]{16,}"  # OpenAI / Anthropic keys
    r"|(?i:bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*"  # bearer tokens
    # Basic credentials: base64 with a digit, + or /, or a capital inside ("Basic Auth" is not)
    r"|(?i:basic)[ \t]+(?=[A-Za-z0-9+/]*(?:[0-9+/]|[a-z][A-Z]))[A-Za-z0-9+/]{8,}={0,2}"
    r"|eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"  # JWTs
    r"|AKIA[0-9A-Z]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{36,}"  # GitHub tokens
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|AIza[0-9A-Za-z\-_]{35}",  # Google API keys
    re.ASCII,
)
_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)",
    re.ASCII | re.DOTALL,
)
# A name followed by = or : (an assignment, a header, a YAML or repr key, a query parameter);
# the name decides whether the value after it is replaced.
_SEPARATOR = re.compile(r"[=:]")
_VALUE = re.compile(
    r"(?:(?i:basic|bearer|token|digest)[ \t]+)?"
    r"(?:\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|[^\s\"'&,;)}\]<>]+)",
    re.ASCII,
)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", re.ASCII)
_SECRET_PARTS = (
    "passw",
    "secret",
    "credential",
    "authorization",
    "cookie",
)
_KEY_QUALIFIERS = frozenset(
    {
        "api",
        "private",
        "secret",
        "access",
        "signing",
        "encryption",
        "client",
        "master",
        "session",
        "account",
        "service",
        "auth",
        "license",
        "ssh",
        "app",
        "subscription",
    }
)
_QUERY_NAMES = frozenset({"key", "sig", "signature", "auth", "token"})

# What every rule's match contains, looked for first so that clean values stay cheap: one
# substring search is several times quicker per character than a regular expression with
# alternatives, which matters for prompts of many kilobytes. The shapes are case-sensitive;
# key names, bearer and Basic are looked for in the lowercase text.
_GITHUB = re.compile(r"gh[pousr]_")
_NAMED_ENDS = ("token", "key", "sig")


def _named(low: str) -> bool:
    """Whether a name ending in one of :data:`_NAMED_ENDS` is followed by ``=`` or ``:``
    (after an optional, possibly escaped, quote and white space). Those names are common in
    clean text ("tokens", "keyboard"); only one used as a key can be a credential's."""
    end = len(low)
    for word in _NAMED_ENDS:
        count = low.count(word)
        if count == 0 or count == low.count(word + "s"):
            # Each one is followed by "s" ("tokens", "keys": usage counts, prose), so none
            # can be followed by a quote, a space or a separator: two scans in C instead of a
            # step in Python for each of the many "tokens" of a response's usage.
            continue
        i = low.find(word)
        while i != -1:
            j = i + len(word)
            if word == "sig" and low.startswith("nature", j):
                j += 6
            if j < end and low[j] == "\\":
                j += 1
            if j < end and low[j] in "\"'":
                j += 1
            while j < end and low[j].isspace():
                j += 1
            if j < end and low[j] in "=:":
                return True
            i = low.find(word, i + 1)
    return False


def _has_shape(text: str) -> bool:
    """Whether ``text`` holds the fixed part of a token shape (bearer and Basic aside)."""
    return (
        "sk-" in text
        or "eyJ" in text
        or "AKIA" in text
        or "xox" in text
        or "AIza" in text
        or "-----BEGIN" in text
        or _GITHUB.search(text) is not None
    )


def _has_name(low: str) -> bool:
    """Whether the lowercase text holds a credential-like name that a value may follow."""
    return (
        "passw" in low
        or "secret" in low
        or "auth" in low  # authorization, and names ending in auth
        or "cookie" in low
        or "credential" in low
        or "pwd" in low
        or _named(low)
    )


def _may_hold_secret(text: str) -> bool:
    """False only when no rule can change ``text`` (a property test pins this)."""
    if _has_shape(text):
        return True
    low = text.lower()
    return "bearer" in low or "basic" in low or _has_name(low)


@functools.lru_cache(maxsize=4096)
def is_secret_key(name: str) -> bool:
    """Whether a value under the key ``name`` is a credential (see the module docstring)."""
    low = name.lower()
    for part in _SECRET_PARTS:
        if part in low:
            return True
    if low.endswith(("token", "auth", "apikey", "privatekey", "secretkey", "accesskey")):
        return True
    words = [w.lower() for w in _WORDS.findall(name)]
    if "pwd" in words:
        return True
    return (
        low.endswith("key")
        and len(words) > 1
        and words[-1] == "key"
        and words[-2] in _KEY_QUALIFIERS
    )


def _name_before(text: str, sep: int) -> tuple[str, str]:
    """The name that ends before the separator at ``sep`` (and the quote after it, if any)."""
    j = sep - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    quote = ""
    if j >= 0 and text[j] in "\"'":
        quote = text[j]
        j -= 1
        if j >= 0 and text[j] == "\\":  # JSON written inside a string: \"name\": \"value\"
            j -= 1
    end = j + 1
    while j >= 0 and (text[j].isascii() and (text[j].isalnum() or text[j] in "_.-")):
        j -= 1
    start = j + 1
    while start < end and not (text[start].isalpha() or text[start] == "_"):
        start += 1  # a name starts with a letter or an underscore
    return text[start:end], quote


def _escaped_string_end(text: str, pos: int) -> int | None:
    """The end of the string escaped inside a string that opens with ``\\"`` at ``pos``: the
    next quote after a run of backslashes one longer than a multiple of four (three, or seven,
    make a quote inside it). None when the line ends first."""
    i = pos + 2
    while i < len(text) and text[i] != "\n":
        if text[i] == '"':
            run = 0
            while text[i - 1 - run] == "\\":
                run += 1
            if run % 4 == 1:
                return i + 1
        i += 1
    return None


def _assignments(text: str) -> str:
    """``text`` with the value after each credential-like name replaced."""
    out: list[str] = []
    last = 0
    for sep in _SEPARATOR.finditer(text):
        k = sep.start()
        if k < last:
            continue  # inside a value already replaced
        name, quote = _name_before(text, k)
        if not name:
            continue
        if not is_secret_key(name) and not (
            name.lower() in _QUERY_NAMES
            and k - len(name) - len(quote) > 0
            and text[k - len(name) - len(quote) - 1] in "?&;"
        ):
            continue
        pos = k + 1
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if text.startswith(REDACTED, pos) or text.startswith(f'"{REDACTED}"', pos):
            continue
        if text.startswith('\\"', pos):  # JSON written inside a string: \"name\": \"value\"
            end = _escaped_string_end(text, pos)
            out.append(text[last:pos])
            if end is None:  # cut short: the rest of the word is the value
                end = pos + 2
                while end < len(text) and not text[end].isspace():
                    end += 1
                out.append(f'\\"{REDACTED}')
            else:
                out.append(f'\\"{REDACTED}\\"')
            last = end
            continue
        value = _VALUE.match(text, pos)
        if value is None:
            continue
        found = value.group()
        if found[0] in "\"'" and found[-1] == found[0] and len(found) > 1:
            replacement = f"{found[0]}{REDACTED}{found[0]}"
        elif quote == '"':  # a JSON-like key: keep the text JSON
            replacement = f'"{REDACTED}"'
        else:
            replacement = REDACTED
        out.append(text[last:pos])
        out.append(replacement)
        last = value.end()
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _text_rules(text: str) -> str:
    if "-----BEGIN" in text:
        text = _PEM.sub(REDACTED, text)
    low = text.lower()
    if _has_name(low):
        text = _assignments(text)
    if _has_shape(text) or "bearer" in low or "basic" in low:
        text = _TOKENS.sub(REDACTED, text)
    return text


def redact_str(text: str) -> str:
    """Plain text (or JSON held in a string) with the rules applied."""
    if not _may_hold_secret(text):
        return text
    if text.lstrip()[:1] in ("{", "["):
        # JSON inside a string (a tool call's arguments): redacted as the value it holds.
        try:
            inner = orjson.loads(text)
        except orjson.JSONDecodeError:
            inner = None
        if isinstance(inner, (dict, list)):
            try:
                value, changed = redact_value(inner)
            except RecursionError:
                return _text_rules(text)
            return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode() if changed else text
    return _text_rules(text)


def redact_value(value: Any) -> tuple[Any, bool]:
    """``value`` with every secret replaced, and whether anything was."""
    if isinstance(value, str):
        redacted = redact_str(value)
        return redacted, redacted != value
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        changed = False
        for key, item in value.items():
            if isinstance(key, str):
                if item is not None and is_secret_key(key):
                    out[key] = REDACTED
                    changed = changed or item != REDACTED
                    continue
                new_key = redact_str(key)
                if new_key != key:
                    changed = True
                    key = new_key
            item, item_changed = redact_value(item)
            out[key] = item
            changed = changed or item_changed
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        items: list[Any] = []
        changed = False
        for item in value:
            item, item_changed = redact_value(item)
            items.append(item)
            changed = changed or item_changed
        return (items, True) if changed else (value, False)
    return value, False


def redact_json(text: str) -> str:
    """The default rules on a value's JSON text."""
    if not _may_hold_secret(text):
        return text
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _text_rules(text)  # not JSON after all: its text is what gets recorded
    try:
        value, changed = redact_value(value)
    except RecursionError:
        return _text_rules(text)
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode() if changed else text
