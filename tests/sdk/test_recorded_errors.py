"""A recorded failure replays as the live one read: its str(), its repr(), and, when the code
names the classes it expects back (``errors=``), its class."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import tracely_sdk as tracely
from tracely_otel import attributes as A


class WeatherServiceError(Exception):
    """A tool failure whose constructor takes the message, like most."""


class NeedsTwoArgs(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)


class Oddly(Exception):
    def __repr__(self) -> str:
        return "<odd>"


def _boom() -> Any:
    raise AssertionError("fn must not be called under recorded replay")


def _raise(exc: BaseException) -> Any:
    raise exc


def _record_failure(capture: Any, exc: BaseException) -> dict[str, Any]:
    """Run a tool live that raises ``exc``; the bundle of that run."""
    with tracely.agent("a"), pytest.raises(type(exc)):
        tracely.call_tool("get_weather", lambda: _raise(exc), args={"city": "Atlantis"})
    return capture.last_bundle


def _replayed(bundle: dict[str, Any], **kwargs: Any) -> BaseException:
    with tracely.fixtures(bundle), pytest.raises(BaseException) as info:
        tracely.call_tool("get_weather", _boom, args={"city": "Atlantis"}, **kwargs)
    return info.value


def _tool_error_entry(error: dict[str, Any]) -> dict[str, Any]:
    return {"tools": {"get_weather": [{"args": {"city": "Atlantis"}, "error": error}]}}


# -- recording --------------------------------------------------------------------------------


def test_a_live_failure_records_its_repr_beside_type_and_message(capture: Any) -> None:
    bundle = _record_failure(capture, ValueError("no weather data for Atlantis"))
    assert bundle["tools"]["get_weather"][0]["error"] == {
        "type": "ValueError",
        "message": "no weather data for Atlantis",
        "repr": "ValueError('no weather data for Atlantis')",
    }


def test_the_recorded_repr_is_redacted_like_the_message(capture: Any) -> None:
    key = "sk-" + "a" * 32
    bundle = _record_failure(capture, ValueError(f"bad key {key}"))
    error = bundle["tools"]["get_weather"][0]["error"]
    assert key not in error["repr"] and key not in error["message"]
    assert error["repr"] == "ValueError('bad key [REDACTED]')"


def test_a_failure_whose_repr_raises_is_still_recorded(capture: Any) -> None:
    class BrokenRepr(Exception):
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    bundle = _record_failure(capture, BrokenRepr("still here"))
    error = bundle["tools"]["get_weather"][0]["error"]
    assert error["message"] == "still here" and "repr" not in error


# -- replaying as ToolError / LLMError ---------------------------------------------------------


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("no weather data for Atlantis"),
        KeyError("city"),
        WeatherServiceError(),
        NeedsTwoArgs(503, "down"),
        Oddly("x"),
    ],
    ids=["value-error", "key-error", "no-args", "two-args", "own-repr"],
)
def test_a_replayed_failure_reads_as_the_live_one(capture: Any, exc: BaseException) -> None:
    bundle = _record_failure(capture, exc)
    replayed = _replayed(bundle)
    assert isinstance(replayed, tracely.ToolError)
    assert (str(replayed), repr(replayed)) == (str(exc), repr(exc))
    assert replayed.type == type(exc).__qualname__


def test_an_entry_recorded_without_repr_reads_as_type_and_message() -> None:
    replayed = _replayed(_tool_error_entry({"type": "ValueError", "message": "it's gone"}))
    assert repr(replayed) == 'ValueError("it\'s gone")' and str(replayed) == "it's gone"
    nested = _replayed(_tool_error_entry({"type": "Service.Unavailable", "message": ""}))
    assert repr(nested) == "Unavailable()"


def test_a_replayed_llm_failure_reads_as_the_live_one(capture: Any) -> None:
    with tracely.agent("a"), pytest.raises(TimeoutError):
        tracely.call_llm("m", lambda: _raise(TimeoutError("model timed out")), input="hi")
    with tracely.fixtures(capture.last_bundle), pytest.raises(tracely.LLMError) as info:
        tracely.call_llm("m", _boom, input="hi")
    assert repr(info.value) == "TimeoutError('model timed out')"


# -- errors=: the classes the code expects back ------------------------------------------------


def test_a_named_class_is_raised_as_itself_with_the_live_text(capture: Any) -> None:
    live = WeatherServiceError("no weather data for Atlantis")
    replayed = _replayed(_record_failure(capture, live), errors=(WeatherServiceError,))
    assert type(replayed) is WeatherServiceError
    assert (str(replayed), repr(replayed)) == (str(live), repr(live))


def test_errors_takes_one_class_or_several(capture: Any) -> None:
    bundle = _record_failure(capture, WeatherServiceError("down"))
    assert type(_replayed(bundle, errors=WeatherServiceError)) is WeatherServiceError
    assert type(_replayed(bundle, errors=[KeyError, WeatherServiceError])) is WeatherServiceError


def test_a_recorded_type_not_named_by_the_code_stays_a_tool_error(capture: Any) -> None:
    bundle = _record_failure(capture, ValueError("no weather data"))
    replayed = _replayed(bundle, errors=(WeatherServiceError,))
    assert type(replayed) is tracely.ToolError
    assert repr(replayed) == "ValueError('no weather data')"


def test_the_recording_never_chooses_a_class_the_code_did_not_name() -> None:
    # A recorded type naming a real class (or a dotted path to one) is only a name to compare.
    for type_name in ("SystemExit", "builtins.ValueError", "os.system"):
        entry = _tool_error_entry({"type": type_name, "message": "0"})
        replayed = _replayed(entry, errors=(ValueError,))
        assert type(replayed) is tracely.ToolError, type_name


def test_a_named_class_that_cannot_be_made_from_the_message_falls_back_and_says_so(
    capture: Any, caplog: pytest.LogCaptureFixture
) -> None:
    bundle = _record_failure(capture, NeedsTwoArgs(503, "down"))
    with caplog.at_level(logging.WARNING, logger="tracely"):
        replayed = _replayed(bundle, errors=(NeedsTwoArgs,))
    assert type(replayed) is tracely.ToolError
    assert repr(replayed) == "NeedsTwoArgs(503, 'down')"
    assert "cannot make NeedsTwoArgs(message)" in caplog.text


def test_a_named_class_whose_text_differs_from_the_live_one_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    entry = _tool_error_entry({"type": "Oddly", "message": "x", "repr": "Oddly('x')"})
    with caplog.at_level(logging.WARNING, logger="tracely"):
        replayed = _replayed(entry, errors=(Oddly,))
    assert type(replayed) is Oddly
    assert "the replayed Oddly reads '<odd>' where the live one read \"Oddly('x')\"" in caplog.text


def test_errors_must_name_exception_classes() -> None:
    for errors in (("ValueError",), "ValueError", 3):
        with pytest.raises(
            tracely.ConfigError, match=r"errors= takes the exception classes"
        ) as info:
            tracely.call_tool("t", lambda: 1, errors=errors)
        assert "'ValueError' is not one" in str(info.value) or "3 is not one" in str(info.value)
    with pytest.raises(tracely.ConfigError, match="errors= applies to tool and llm"):
        tracely.observe(as_type="agent", errors=(ValueError,))


def test_errors_on_every_call_form(capture: Any) -> None:
    @tracely.observe(as_type="tool", name="get_weather", errors=(WeatherServiceError,))
    def get_weather(city: str) -> str:
        raise AssertionError("not under fixtures")

    @tracely.observe(as_type="llm", name="m", errors=(WeatherServiceError,))
    async def chat(prompt: str) -> str:
        raise AssertionError("not under fixtures")

    error = {"type": "WeatherServiceError", "message": "down"}
    bundle = {
        "tools": {"get_weather": [{"args": {"city": "Oslo"}, "error": error}] * 2},
        "llm": {"m": [{"input": {"prompt": "hi"}, "error": error}] * 3},
    }

    async def main() -> list[type[BaseException]]:
        raised: list[type[BaseException]] = []
        calls = [
            lambda: get_weather("Oslo"),
            lambda: tracely.acall_tool(
                "get_weather", _boom, args={"city": "Oslo"}, errors=WeatherServiceError
            ),
            lambda: chat("hi"),
            lambda: tracely.call_llm(
                "m", _boom, input={"prompt": "hi"}, errors=WeatherServiceError
            ),
            lambda: tracely.acall_llm(
                "m", _boom, input={"prompt": "hi"}, errors=WeatherServiceError
            ),
        ]
        for call in calls:
            try:
                result = call()
                if asyncio.iscoroutine(result):
                    await result
            except Exception as exc:
                raised.append(type(exc))
        return raised

    with tracely.fixtures(bundle) as rep:
        raised = asyncio.run(main())
    assert raised == [WeatherServiceError] * 5
    assert rep.clean


def test_a_served_failure_span_carries_the_recorded_error(capture: Any) -> None:
    error = {"type": "ValueError", "message": "no", "repr": "ValueError('no')"}
    _replayed(_tool_error_entry(error), errors=(ValueError,))
    span = next(s for s in capture.spans if s.attributes.get(A.KIND) == A.KIND_TOOL)
    assert span.attributes[A.ERROR_TYPE] == "ValueError"
    assert '"repr":"ValueError(\'no\')"' in str(span.attributes[A.ERROR])
