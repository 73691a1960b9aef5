"""Store URLs as messages show them: no password, wherever the URL carries it."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracely_sdk.store import CaseVersion, InvalidCase, redact_url
from tracely_sdk.store._model import MAX_STORED_INT, dumps_json_bytes, json_bytes

from ._helpers import make_bundle, make_recording, trace_id


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:s3cret@db:5432/t", "postgresql://u:***@db:5432/t"),
        ("postgresql://u@db/t?password=s3cret", "postgresql://u@db/t?password=***"),
        (
            "postgresql://db/t?sslmode=require&PassWord=s3cret&pool_size=4",
            "postgresql://db/t?sslmode=require&PassWord=***&pool_size=4",
        ),
        ("postgresql://db/t?pass%77ord=s3cret", "postgresql://db/t?pass%77ord=***"),
        (
            "postgresql://u:a@b@db/t?password=x&password=y",
            "postgresql://u:***@db/t?password=***&password=***",
        ),
        (
            "postgresql://u:s3cret@db?application_name=a@b",
            "postgresql://u:***@db?application_name=a@b",
        ),
        ("sqlite:///tmp/tracely.db", "sqlite:///tmp/tracely.db"),
        (
            "https://tracely.example.com/?passwords=kept",
            "https://tracely.example.com/?passwords=kept",
        ),
    ],
)
def test_passwords_are_hidden(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "s3cret" not in redact_url(url)


def test_integers_past_64_bits_are_refused_by_the_model_not_by_the_database() -> None:
    rec = make_recording(1)
    with pytest.raises(ValueError, match="started_at must be an integer"):
        dataclasses.replace(rec, started_at=MAX_STORED_INT + 1)
    with pytest.raises(ValueError, match="received_at must be an integer"):
        dataclasses.replace(rec, received_at=2**64)
    # A bundle's start time (OTLP's is unsigned) is clamped, so the trace is still recorded.
    far = make_recording(2, started_at=2**64 - 1)
    assert far.started_at == MAX_STORED_INT and far.bundle["started_at"] == 2**64 - 1

    with pytest.raises(InvalidCase, match="version must be an integer from 1 to"):
        CaseVersion(
            case_id="c",
            version=2**63,
            input={"args": [], "kwargs": {}},
            expected_output=None,
            bundle=make_bundle(trace_id(3)),
            source_trace_id=None,
            created_at=0,
        )


_KEYS = st.one_of(st.text(max_size=6), st.integers(-5, 5), st.booleans(), st.none())
_JSONISH = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
        st.dictionaries(_KEYS, inner, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_JSONISH)
def test_stored_json_is_the_text_non_string_keys_would_give(value: object) -> None:
    """The store writes keys that are not strings as strings; it tries without that option
    first (faster), and the text is the same either way, as are the values it refuses."""
    for option, ours in ((orjson.OPT_SORT_KEYS, dumps_json_bytes), (0, json_bytes)):
        try:
            expected = orjson.dumps(value, option=option | orjson.OPT_NON_STR_KEYS)
        except TypeError:
            with pytest.raises(ValueError, match="cannot be stored as JSON"):
                ours(value)
            continue
        assert ours(value) == expected
