"""A recording replay cannot serve is refused when it is loaded, with our own error naming
where, never a foreign exception in the middle of a run."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

import tracely_sdk as tracely
from tracely_otel import BundleFormatError, validate_bundle
from tracely_sdk._types import RebuildError, rebuild


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("bundle", "where"),
    [
        ({"tools": {"t": [{"args": {"q": nested(70)}, "output": 1}]}}, "tools:t[0]: args"),
        # JSON text in a string is compared parsed, so it nests as deep as what it holds
        (
            {"tools": {"t": [{"args": {"q": orjson.dumps(nested(64)).decode()}, "output": 1}]}},
            "tools:t[0]: args",
        ),
        ({"llm": {"m": [{"input": nested(70), "output": "hi"}]}}, "llm:m[0]: input"),
        ({"tools": {"t": [{"output": nested(400)}]}}, "tools:t[0]: output"),
        ({"tools": {"t": [{"output": {"n": 2**70}}]}}, "tools:t[0]: output: holds the integer"),
        ({"tools": {"t": [{"output": 1, "seq": 2**70}]}}, "tools:t[0]: seq"),
        ({"agent": {"name": "a", "output": nested(400)}}, "agent: output"),
    ],
)
def test_values_past_the_limits_are_a_bundle_error_on_load(
    bundle: dict[str, Any], where: str
) -> None:
    expected = re.escape(f"invalid fixture bundle: {where}")
    with pytest.raises(tracely.BundleError, match=expected), tracely.fixtures(bundle):
        pytest.fail("a bundle that cannot be served was loaded")


def test_a_checksummed_bundle_that_is_not_json_data_is_a_format_error() -> None:
    bundle = {"tools": {"t": [{"output": 1}]}, "started_at": 2**70, "checksum": "sha256:00"}
    with pytest.raises(BundleFormatError, match="not JSON data"):
        validate_bundle(bundle)
    with pytest.raises(tracely.BundleError, match="not JSON data"), tracely.fixtures(bundle):
        pass


def test_an_output_that_is_not_json_data_is_a_bundle_error_naming_the_entry() -> None:
    bundle = {"tools": {"t": [{"output": 1}, {"output": {1, 2}}]}}
    with pytest.raises(tracely.BundleError, match=r"tools:t\[1\]: not JSON data"):
        tracely.fixtures(bundle).__enter__()


def test_deep_recorded_args_never_fail_mid_run() -> None:
    deep = nested(64)  # at the limit: loads, and the call is served
    bundle = {"tools": {"t": [{"args": {"q": deep}, "output": "ok"}]}}
    with tracely.fixtures(bundle) as rep:
        assert tracely.call_tool("t", lambda: "live", args={"q": deep}) == "ok"
    assert rep.clean


def test_peeking_and_calling_an_entry_that_cannot_be_rebuilt_raise_the_same_error() -> None:
    bundle = {"tools": {"t": [{"output": [{"a": 1}], "output_type": "set"}]}}
    with tracely.fixtures(bundle):
        with pytest.raises(tracely.ReplayError) as peeked:
            tracely.fixture("tools", "t")
        with pytest.raises(tracely.ReplayError) as called:
            tracely.call_tool("t", lambda: "live")
    assert type(peeked.value) is type(called.value)
    assert str(peeked.value) == str(called.value)
    assert "tools:t: the recorded output cannot be rebuilt" in str(peeked.value)


def test_rebuilding_a_deep_set_is_bounded() -> None:
    with pytest.raises(RebuildError, match="nests deeper than 64 levels"):
        rebuild([nested(5000)], type_tag="set")
    assert rebuild([nested(3)], type_tag="set") == {(((),),)}
