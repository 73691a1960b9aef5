"""Redaction: no secret of a known shape survives any path out of the process, usage numbers
are kept, and the cheap pre-check never lets through what the rules would replace."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracely_sdk as tracely
from tracely_otel import _redact as rules
from tracely_sdk._redact import REDACTED, Redactor, redact, redact_text
from tracely_sdk.store import Recording, open_store

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_B64URL = _ALNUM + "-_"
_SECRET = st.text(_ALNUM, min_size=16, max_size=32)
_CREDENTIAL_KEYS = [
    "password",
    "db_password",
    "OPENAI_API_KEY",
    "X-Goog-Api-Key",
    "x-api-key",
    "echo_token",
    "client_secret",
    "private_key",
    "apiKey",
    "Authorization",
    "refreshToken",
    "passwd",
]


@st.composite
def secrets(draw: st.DrawFn) -> tuple[str, str]:
    """A secret of one of the shapes redaction promises to catch: (text holding it, the part
    that must not survive)."""
    s = draw(_SECRET)
    key = draw(st.sampled_from(_CREDENTIAL_KEYS))
    shape = draw(st.integers(0, 11))
    if shape == 0:
        prefix = draw(st.sampled_from(["sk-", "sk-ant-", "sk-proj-"]))
        return f"{prefix}{s}", s
    if shape == 1:
        header = draw(st.text(_B64URL, min_size=10, max_size=20))
        sig = draw(st.text(_B64URL, min_size=10, max_size=40))
        return f"eyJ{header}.eyJ{s}.{sig}", s
    if shape == 2:
        kind = draw(st.sampled_from(["", "RSA ", "EC ", "OPENSSH "]))
        return (
            f"-----BEGIN {kind}PRIVATE KEY-----\nMII{s}\n{s[::-1]}\n-----END {kind}PRIVATE KEY-----",
            s,
        )
    if shape == 3:
        user = draw(st.text(_ALNUM, min_size=1, max_size=10))
        encoded = base64.b64encode(f"{user}:{s}".encode()).decode()
        return f"Authorization: Basic {encoded}", encoded
    if shape == 4:
        param = draw(st.sampled_from(["api_key", "key", "token", "access_token", "apiKey"]))
        return f"https://api.example.com/v1/items?q=1&{param}={s}&page=2", s
    if shape == 5:
        name = draw(st.sampled_from(["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN"]))
        export = draw(st.sampled_from(["", "export "]))
        return f"set up:\n{export}{name}={s}\nPATH=/usr/bin\n", s
    if shape == 6:
        return f"Bearer {s}", s
    if shape == 7:
        return f"{key}: {s}", s
    if shape == 8:
        return f"connect(host='db', {key}='{s}')", s
    if shape == 9:
        return f"export FOO_TOKEN={s}", s
    if shape == 10:
        return "AKIA" + "".join(c for c in s.upper() if c.isalnum())[:16].ljust(16, "Q"), s.upper()
    return f"{{'{key}': '{s}'}}", s


def _values(text: str, s: str, key: str) -> list[Any]:
    """Places a secret is found in: a value, a nested value, JSON inside a string (tool-call
    arguments), a key named like a credential (any value type)."""
    return [
        text,
        {"query": text},
        [{"messages": [{"role": "user", "content": f"here it is: {text} thanks"}]}],
        {"config": orjson.dumps({"db": {"nested": text}}).decode()},
        {"config": orjson.dumps({key: s}).decode()},
        {key: s},
        {"headers": {key: {"value": s}}},
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secrets(), st.sampled_from(_CREDENTIAL_KEYS))
def test_no_secret_of_a_known_shape_survives_a_recorded_value(
    secret: tuple[str, str], key: str
) -> None:
    text, part = secret
    for value in _values(text, part, key):
        assert part not in redact(orjson.dumps(value).decode()), value


@settings(max_examples=300, deadline=None)
@given(secrets())
def test_no_secret_of_a_known_shape_survives_an_exception_message(
    secret: tuple[str, str],
) -> None:
    text, part = secret
    message = f"request failed ({text}) after 3 tries"
    assert part not in redact_text(message)
    assert part not in redact_text(repr(ValueError(message)))


@given(st.integers(10**9, 10**15), st.sampled_from(_CREDENTIAL_KEYS))
def test_values_of_any_type_under_a_credential_key_are_redacted(number: int, key: str) -> None:
    for value in (number, [number], {"n": number}, True):
        assert redact(orjson.dumps({key: value}).decode()) == f'{{"{key}":"{REDACTED}"}}'


@pytest.mark.parametrize(
    "usage",
    [
        {"max_tokens": 256, "input_tokens": 3, "output_tokens": 9, "tokens": 12},
        {"token_count": 4, "prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11},
        {"usage": {"cache_read_input_tokens": 1}, "keyword": "k", "key": "cache-key"},
    ],
)
def test_usage_numbers_and_plain_keys_are_kept(usage: dict[str, Any]) -> None:
    text = orjson.dumps(usage).decode()
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"api_key":"sk-live"}', '{"api_key":"[REDACTED]"}'),
        ('{"password":123456789012}', '{"password":"[REDACTED]"}'),
        ('{"args":"{\\"password\\": \\"pw\\"}"}', '{"args":"{\\"password\\":\\"[REDACTED]\\"}"}'),
        ("Bearer abcdefgh1234", REDACTED),
        ('"basic Authentication is not a credential"', None),
        ('{"prompt_tokens":3}', '{"prompt_tokens":3}'),
        ('"my password is hunter2"', None),  # prose is out of reach (documented)
    ],
)
def test_known_values(text: str, expected: str | None) -> None:
    assert Redactor()(text) == (text if expected is None else expected)


@pytest.mark.parametrize(
    "secret",
    [
        '"echo_token":"tok-1234"',
        "ECHO_TOKEN=tok-1234",
        '"x-goog-api-key": "tok-1234"',
        "?sig=tok-1234",
        "session_key: tok-1234",
    ],
)
def test_a_credential_name_among_many_plural_ones_is_still_caught(secret: str) -> None:
    # Usage counts and prose are full of "tokens" and "keys", which the pre-check passes over
    # in bulk; one name used as a key among them is still found.
    usage = '"prompt_tokens":14,"completion_tokens":11,"total_tokens":25,"keys":["a"],'
    text = f"{usage * 3}{secret},{usage}"
    assert "tok-1234" not in redact_text(text)
    assert "tok-1234" not in redact(orjson.dumps({"v": text}).decode())


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # JSON escaped inside plain text (a log line quoting a request body)
        ('sent {\\"session_key\\": \\"tok-1234\\", \\"n\\": 1}', 'sent {\\"session_key\\": \\"'),
        ('password=\\"tok-1234\\" then', " then"),
        # a quote inside the escaped value does not end it early
        ('\\"api_key\\": \\"tok\\\\\\"-1234\\"', '\\"api_key\\": '),
        # cut short before its closing quote: the rest of the word is the value
        ('\\"password\\": \\"tok-1234', '\\"password\\": '),
    ],
)
def test_json_escaped_inside_plain_text_is_redacted(text: str, kept: str) -> None:
    out = redact_text(text)
    assert "tok" not in out and "1234" not in out
    assert kept in out and REDACTED in out


@settings(max_examples=200, deadline=None)
@given(secrets())
def test_redaction_is_idempotent(secret: tuple[str, str]) -> None:
    once = redact_text(secret[0])
    assert redact_text(once) == once
    value = orjson.dumps({"a": secret[0]}).decode()
    assert redact(redact(value)) == redact(value)


# Pieces that put the pre-check's edges in play: real-looking secrets, near misses, key names
# in odd cases, quotes, separators and escapes.
_PIECES = st.sampled_from(
    [
        "sk-" + "a" * 20,
        "Bearer abcdefgh1234",
        "BASIC dXNlcjpwYXNz",
        "AKIA" + "ABCDEFGHIJ123456",
        "ghp_" + "x" * 36,
        "xoxb-1234567890",
        "AIza" + "y" * 35,
        "eyJhbGciOi.eyJzdWIiOi.sig",
        "-----BEGIN PRIVATE KEY-----",
        "api_key",
        "API-KEY",
        "x-api-key",
        "Token",
        "echo_token",
        "max_tokens",
        "tokens",
        "Keys",
        "signatures",
        "auth",
        "sig",
        "pwd",
        "secret",
        "Passw",
        "cookie",
        "key",
        '"',
        "'",
        "\\",
        ":",
        "=",
        "?",
        "&",
        " ",
        "\n",
        "{",
        "}",
        "v1",
        "é",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=6)), max_size=14))
def test_the_pre_check_never_skips_what_the_rules_would_change(
    parts: list[str],
) -> None:
    text = "".join(parts)
    as_json = orjson.dumps({"v": text, text: 1}).decode()
    with_check = (redact_text(text), redact(as_json))
    original = rules._may_hold_secret
    rules._may_hold_secret = lambda _text: True
    try:
        without = (redact_text(text), redact(as_json))
    finally:
        rules._may_hold_secret = original
    assert with_check == without


# -- every path out of the process -----------------------------------------------------------


def _span_text(spans: list[Any]) -> str:
    """Everything a span exporter would send of ``spans``: attributes, events, statuses."""
    out: list[str] = []
    for span in spans:
        out.append(json.dumps(dict(span.attributes), default=str))
        out.append(str(span.status.description))
        for event in span.events:
            out.append(json.dumps(dict(event.attributes), default=str))
    return "\n".join(out)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(secrets(), st.sampled_from(_CREDENTIAL_KEYS))
def test_no_generated_secret_reaches_a_span(
    capture: Any, secret: tuple[str, str], key: str
) -> None:
    text, part = secret

    def fail() -> None:
        raise ValueError(f"rejected: {text}")

    before = len(capture.spans)
    with pytest.raises(ValueError), tracely.agent("a", input={key: part, "q": text}):
        tracely.call_tool(
            "lookup", lambda: {"echo": text}, args={"arguments": json.dumps({key: part})}
        )
        tracely.call_llm("m", lambda: text, input=[{"role": "user", "content": text}])
        tracely.call_tool("boom", fail, args={})
    assert part not in _span_text(capture.spans[before:])


_LEAKS = {
    "message": "sk-proj-" + "M" * 24,
    "pattern": "hunter2-" + "P" * 12,
    "number": 987654321098,
    "nested": "nested-" + "N" * 14,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJKSldUU0VDUkVUIn0.c2lnbmF0dXJlU0lH",
    "url": "URLSECRET" + "U" * 8,
    "env": "ENVSECRET" + "E" * 8,
}


def _leaky_run() -> None:
    with tracely.agent("leaky", input={"db_password": _LEAKS["pattern"]}):
        tracely.call_tool(
            "lookup",
            lambda: {"private_key": _LEAKS["number"], "link": f"https://x.io/?key={_LEAKS['url']}"},
            args={
                "arguments": json.dumps({"config": json.dumps({"password": _LEAKS["nested"]})}),
                "X-Goog-Api-Key": "AIza" + "G" * 35,
            },
        )
        tracely.call_llm("m", lambda: f"token is {_LEAKS['jwt']}", input=[{"role": "user"}])

        def fail() -> None:
            raise ValueError(f"key {_LEAKS['message']} rejected; ANTHROPIC_API_KEY={_LEAKS['env']}")

        tracely.call_tool("boom", fail, args={})


def test_no_secret_reaches_a_span_the_store_or_an_exported_case(
    capture: Any, tmp_path: Path
) -> None:
    from tracely_sdk.cli import main

    with pytest.raises(ValueError):
        _leaky_run()
    bundle = capture.last_bundle
    spans = capture.spans[-4:]
    outputs: list[str] = []
    for span in spans:
        outputs.append(json.dumps(dict(span.attributes), default=str))
        outputs.append(str(span.status.description))
        for event in span.events:
            outputs.append(json.dumps(dict(event.attributes), default=str))
    assert any(e.name == "exception" for s in spans for e in s.events)
    url = f"sqlite:///{(tmp_path / 'tracely.db').as_posix().lstrip('/')}"
    store = open_store(url)
    try:
        store.put_recording(Recording.from_bundle(bundle))
    finally:
        store.close()
    assert main(["cases", "promote", bundle["trace_id"], "--name", "leaky", "--store", url]) == 0
    assert main(["cases", "export", str(tmp_path / "cases"), "--store", url]) == 0
    outputs.append((tmp_path / "cases" / "leaky.json").read_text())
    for db in tmp_path.glob("tracely.db*"):
        outputs.append(db.read_bytes().decode("utf-8", "replace"))
    everything = "\n".join(outputs)
    for what, secret in _LEAKS.items():
        assert str(secret) not in everything, what
    assert "G" * 35 not in everything
    assert REDACTED in everything
