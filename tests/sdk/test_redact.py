"""Redaction: the cheap pre-check never lets a secret through that the rules would replace."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracely_sdk import _redact
from tracely_sdk._redact import REDACTED, Redactor


def _by_the_rules(text: str) -> str:
    """What the default rules make of ``text`` with no pre-check at all."""
    text = _redact._KEY_VALUE.sub(lambda m: f'"{m["key"]}"{m["sep"]}"{REDACTED}"', text)
    return _redact._TOKENS.sub(REDACTED, text)


# Pieces that put the patterns' edges in play: real-looking secrets, near misses, key names in
# odd cases and with characters that match case-insensitively without lower() mapping them.
_PIECES = st.sampled_from(
    [
        "sk-" + "a" * 20,
        "sk-proj-" + "B1" * 10,
        "SK-" + "a" * 20,
        "Bearer abcdefgh1234",
        "BEARER\tzz.yy~xx+ww/vv==",
        "AKIA" + "ABCDEFGHIJ123456",
        "ghp_" + "x" * 36,
        "xoxb-1234567890",
        "AIza" + "y" * 35,
        '"api_key": "v"',
        '"API-KEY":"v"',
        '"x-api-key" : "v"',
        '"Authorization": "Basic dXNlcjpwdw=="',
        '"pa\u017fsword": "hunter2"',
        '"\u212aey": "v"',
        '"author\u0131zation": "v"',
        '"author\u0130zation": "v"',
        "é",
        '"prompt_tokens": 3',
        '"token": "t"',
        '"set-cookie": "c"',
        '"keyword": "k"',
        "gh",
        "xox",
        "key",
        '"',
        ":",
        " ",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=12))
def test_the_pre_check_never_skips_a_text_the_rules_would_change(parts: list[str]) -> None:
    text = "".join(parts)
    assert Redactor()(text) == _by_the_rules(text)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.text() | st.integers(-(2**53), 2**53),
        lambda c: st.dictionaries(st.text(), c) | st.lists(c),
        max_leaves=8,
    )
)
def test_clean_json_values_pass_unchanged(value: object) -> None:
    text = orjson.dumps(value).decode()
    if _by_the_rules(text) == text:
        assert Redactor()(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"api_key":"sk-live"}', '{"api_key":"[REDACTED]"}'),
        ('{"pa\u017fsword":"hunter2"}', '{"pa\u017fsword":"[REDACTED]"}'),
        ("Bearer abcdefgh1234", REDACTED),
        ('{"prompt_tokens":3}', '{"prompt_tokens":3}'),
    ],
)
def test_known_values(text: str, expected: str) -> None:
    assert Redactor()(text) == expected
