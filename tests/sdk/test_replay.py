"""The seed's replay rules, one test (at least) per rule."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

import tracely_sdk as tracely
from tracely_otel import attributes as A
from tracely_otel import seal


def _boom() -> Any:
    raise AssertionError("fn must not be called under recorded replay")


ORDER_BUNDLE = {
    "tools": {"get_order": [{"args": {"order_id": 7}, "output": {"status": "shipped"}}]},
    "llm": {
        "gpt-4o": [
            {"input": [{"role": "user", "content": "hi"}], "output": "Hello", "usage": [812, 96]}
        ]
    },
}


# -- recorded means recorded ------------------------------------------------------------------


def test_fixtures_none_is_live() -> None:
    calls = []
    with tracely.fixtures(None) as rep:
        out = tracely.call_tool(
            "get_order", lambda: calls.append(1) or {"live": True}, args={"order_id": 7}
        )
    assert out == {"live": True} and calls == [1]
    assert rep.mode == "live" and not rep.clean and rep.served == []


def test_empty_bundle_is_recorded_and_strict() -> None:
    with tracely.fixtures({}) as rep:
        assert rep.mode == "recorded"
        with pytest.raises(tracely.ReplayError, match="no recorded call for tools:get_order"):
            tracely.call_tool("get_order", _boom, args={"order_id": 7})
    assert len(rep.errors) == 1 and not rep.clean


def test_strict_miss_names_label_and_closest_differences() -> None:
    with tracely.fixtures(ORDER_BUNDLE), pytest.raises(tracely.ReplayError) as info:
        tracely.call_tool("get_order", _boom, args={"order_id": 8})
    err = info.value
    assert err.label == "tools:get_order"
    assert "args.order_id: recorded 7 now 8" in str(err)
    assert err.closest and err.closest[0]["differences"] == [
        {"path": "args.order_id", "recorded": 7, "actual": 8}
    ]


def test_strict_miss_suggests_near_names() -> None:
    bundle = {"tools": {"get_weather": [{"output": 1}]}}
    with (
        tracely.fixtures(bundle),
        pytest.raises(tracely.ReplayError, match="did you mean tools:get_weather"),
    ):
        tracely.call_tool("get_wether", _boom)


def test_strict_miss_when_every_entry_was_served() -> None:
    bundle = {"tools": {"roll": [{"output": 4}]}}
    with tracely.fixtures(bundle) as rep:
        assert tracely.call_tool("roll", _boom) == 4
        with pytest.raises(tracely.ReplayError, match="all already served"):
            tracely.call_tool("roll", _boom)
    assert rep.served == ["tools:roll"]


def test_miss_span_is_errored_and_stamped(capture: Any) -> None:
    with tracely.fixtures({}), pytest.raises(tracely.ReplayError):
        tracely.call_tool("get_weather", _boom, args={"city": "Paris"})
    span = capture.span("execute_tool get_weather")
    assert span.attributes[A.REPLAY_MISS] is True
    assert span.status.status_code.name == "ERROR"


# -- matching ---------------------------------------------------------------------------------


def test_entry_without_args_matches_by_order() -> None:
    bundle = {"tools": {"roll": [{"output": 1}, {"output": 2}, {"output": 3}]}}
    with tracely.fixtures(bundle) as rep:
        got = [tracely.call_tool("roll", _boom, args={"n": i}) for i in range(3)]
    assert got == [1, 2, 3] and rep.clean


def test_args_matched_canonically_out_of_order() -> None:
    bundle = {
        "tools": {
            "lookup": [
                {"args": {"id": 1, "tags": ["a", "b"]}, "output": "one"},
                {"args": '{"tags": ["c"], "id": 2}', "output": "two"},
            ]
        }
    }
    with tracely.fixtures(bundle) as rep:
        # key order, tuple/list and JSON-string encoding are all ignored
        assert tracely.call_tool("lookup", _boom, args={"tags": ("c",), "id": 2}) == "two"
        assert tracely.call_tool("lookup", _boom, args='{"id": 1, "tags": ["a", "b"]}') == "one"
    assert rep.clean


def test_llm_looked_up_by_model_then_any_recorded_llm_call(capture: Any) -> None:
    bundle = {"llm": {"chat gpt-4o": [{"output": "from the auto-instrumentor span"}]}}
    with tracely.fixtures(bundle) as rep:
        assert tracely.call_llm("gpt-4o", _boom) == "from the auto-instrumentor span"
    assert rep.served == ["llm:gpt-4o"] and rep.clean
    assert capture.span("chat gpt-4o").attributes[A.REPLAY_RECORDED_NAME] == "chat gpt-4o"


def test_llm_input_divergence_is_served_in_order_and_reported(capture: Any) -> None:
    with tracely.fixtures(ORDER_BUNDLE) as rep:
        out = tracely.call_llm("gpt-4o", _boom, input=[{"role": "user", "content": "hello there"}])
    assert out == "Hello"
    assert rep.diverged == ["llm:gpt-4o"] and not rep.clean
    span = capture.span("chat gpt-4o")
    assert span.attributes[A.REPLAY_DIVERGENCE] == "input"
    assert span.attributes[A.GEN_AI_USAGE_INPUT_TOKENS] == 812


def test_llm_strict_miss_when_no_llm_call_is_left() -> None:
    with (
        tracely.fixtures({"tools": {}}) as rep,
        pytest.raises(tracely.ReplayError, match="llm:gpt-4o"),
    ):
        tracely.call_llm("gpt-4o", _boom, input="hi")
    assert rep.errors


def test_unused_lists_calls_never_asked_for_and_is_not_an_error() -> None:
    with tracely.fixtures(ORDER_BUNDLE) as rep:
        tracely.call_llm("gpt-4o", _boom, input=[{"role": "user", "content": "hi"}])
    assert rep.unused == ["tools:get_order"]
    assert rep.errors == [] and not rep.clean


def test_clean_only_for_exact_strict_reproduction() -> None:
    with tracely.fixtures(ORDER_BUNDLE) as rep:
        assert tracely.call_tool("get_order", _boom, args={"order_id": 7}) == {"status": "shipped"}
        tracely.call_llm("gpt-4o", _boom, input=[{"role": "user", "content": "hi"}], usage=(1, 1))
    assert rep.clean and rep.served == ["tools:get_order", "llm:gpt-4o"]


# -- lenient ----------------------------------------------------------------------------------


def test_lenient_falls_through_live_and_serves_mismatch_in_order() -> None:
    with tracely.fixtures(ORDER_BUNDLE, strict=False) as rep:
        mismatched = tracely.call_tool("get_order", _boom, args={"order_id": 99})
        live = tracely.call_tool("get_weather", lambda: "live sun", args={"city": "Oslo"})
    assert mismatched == {"status": "shipped"} and live == "live sun"
    assert rep.mode == "lenient" and not rep.clean
    assert rep.live == ["tools:get_weather"] and rep.diverged == ["tools:get_order"]


def test_lenient_is_never_clean_even_when_exact() -> None:
    with tracely.fixtures(ORDER_BUNDLE, strict=False) as rep:
        tracely.call_tool("get_order", _boom, args={"order_id": 7})
        tracely.call_llm("gpt-4o", _boom, input=[{"role": "user", "content": "hi"}])
    assert rep.mode == "lenient" and not rep.clean


# -- recorded errors --------------------------------------------------------------------------


def test_recorded_error_replays_as_tool_error() -> None:
    bundle = {"tools": {"get_weather": [{"error": {"type": "os.system", "message": "boom"}}]}}
    with tracely.fixtures(bundle) as rep, pytest.raises(tracely.ToolError) as info:
        tracely.call_tool("get_weather", _boom)
    assert info.value.type == "os.system" and str(info.value) == "boom"
    assert info.value.label == "tools:get_weather"
    assert rep.served == ["tools:get_weather"]


def test_recorded_llm_error_replays_as_llm_error() -> None:
    bundle = {"llm": {"m": [{"error": {"type": "RateLimitError", "message": "slow down"}}]}}
    with tracely.fixtures(bundle), pytest.raises(tracely.LLMError, match="slow down"):
        tracely.call_llm("m", _boom)


# -- @observe ---------------------------------------------------------------------------------


@tracely.observe(as_type="tool")
def get_order(order_id: int) -> dict[str, Any]:
    raise AssertionError("the body of an observed tool must not run under fixtures")


@tracely.observe(as_type="tool", name="get_order")
async def aget_order(order_id: int) -> dict[str, Any]:
    raise AssertionError("the body of an observed tool must not run under fixtures")


def test_observed_tool_is_hermetic() -> None:
    with tracely.fixtures(ORDER_BUNDLE) as rep:
        assert get_order(7) == {"status": "shipped"}
    assert rep.served == ["tools:get_order"]


def test_observed_async_tool_is_hermetic() -> None:
    async def main() -> Any:
        with tracely.fixtures(ORDER_BUNDLE):
            return await aget_order(order_id=7)

    assert asyncio.run(main()) == {"status": "shipped"}


def test_observed_tool_replays_recorded_failure() -> None:
    bundle = {"tools": {"get_order": [{"error": {"type": "KeyError", "message": "7"}}]}}
    with tracely.fixtures(bundle), pytest.raises(tracely.ToolError):
        get_order(7)


def test_observed_llm_and_agent() -> None:
    @tracely.observe(as_type="llm", name="gpt-4o")
    def chat(messages: list[dict[str, str]]) -> str:
        raise AssertionError("not under fixtures")

    @tracely.observe(as_type="agent")
    def support(question: str) -> str:
        return chat([{"role": "user", "content": question}])

    with tracely.fixtures({"llm": {"gpt-4o": [{"output": "Hello"}]}}) as rep:
        assert support("hi") == "Hello"
    assert rep.clean


def test_observe_rejects_unknown_type_and_generators() -> None:
    with pytest.raises(ValueError, match="as_type"):
        tracely.observe(as_type="generation")
    with pytest.raises(TypeError, match="generator"):

        @tracely.observe(as_type="tool")
        def gen() -> Any:
            yield 1


# -- peek -------------------------------------------------------------------------------------


def test_fixture_peeks_without_consuming() -> None:
    with tracely.fixtures(ORDER_BUNDLE) as rep:
        assert tracely.fixture("tools", "get_order") == {"status": "shipped"}
        assert tracely.fixture("tool", "get_order") == {"status": "shipped"}
        assert tracely.fixture("llm", "gpt-4o") == "Hello"
        assert tracely.call_tool("get_order", _boom, args={"order_id": 7}) == {"status": "shipped"}
        assert tracely.fixture("tools", "get_order") is None
    assert rep.served == ["tools:get_order"]
    assert tracely.fixture("tools", "get_order") is None  # nothing active outside the block


# -- async, contexts, threads -----------------------------------------------------------------


def test_async_twins_never_await_under_replay() -> None:
    async def never() -> Any:
        raise AssertionError("not awaited under fixtures")

    async def main() -> Any:
        with tracely.fixtures(ORDER_BUNDLE) as rep:
            order = await tracely.acall_tool("get_order", never, args={"order_id": 7})
            text = await tracely.acall_llm(
                "gpt-4o", never, input=[{"role": "user", "content": "hi"}]
            )
        return order, text, rep

    order, text, rep = asyncio.run(main())
    assert order == {"status": "shipped"} and text == "Hello" and rep.clean


def test_async_twins_live() -> None:
    async def live() -> str:
        return "live"

    assert asyncio.run(tracely.acall_tool("t", live)) == "live"


def test_concurrent_tasks_replaying_their_own_bundles_never_cross_talk() -> None:
    async def one(i: int) -> tuple[list[int], Any]:
        bundle = {"tools": {"n": [{"output": i * 10 + k} for k in range(5)]}}
        with tracely.fixtures(bundle) as rep:
            got = []
            for _ in range(5):
                got.append(tracely.call_tool("n", _boom))
                await asyncio.sleep(0)
        return got, rep

    async def main() -> list[tuple[list[int], Any]]:
        return await asyncio.gather(*(one(i) for i in range(8)))

    for i, (got, rep) in enumerate(asyncio.run(main())):
        assert got == [i * 10 + k for k in range(5)] and rep.clean


def test_worker_thread_with_copied_context_is_served() -> None:
    bundle = {"tools": {"n": [{"output": k} for k in range(4)]}}
    with tracely.fixtures(bundle) as rep, ThreadPoolExecutor(2) as pool:
        futures = [
            pool.submit(contextvars.copy_context().run, tracely.call_tool, "n", _boom)
            for _ in range(4)
        ]
        assert sorted(f.result() for f in futures) == [0, 1, 2, 3]
    assert rep.clean


def test_plain_thread_pool_inside_one_replay_is_served_from_it() -> None:
    bundle = {"tools": {"n": [{"output": 1}]}}
    with tracely.fixtures(bundle) as rep, ThreadPoolExecutor(1) as pool:
        assert pool.submit(tracely.call_tool, "n", _boom).result() == 1
    assert rep.clean


def test_thread_without_context_refuses_to_guess_between_two_replays() -> None:
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def replay_in_thread() -> None:
        with tracely.fixtures({"tools": {"n": [{"output": 1}]}}):
            barrier.wait()
            barrier.wait()

    t = threading.Thread(target=replay_in_thread)
    t.start()
    barrier.wait()
    with tracely.fixtures({"tools": {"n": [{"output": 2}]}}):
        th = threading.Thread(target=lambda: _catch(errors))
        th.start()
        th.join()
    barrier.wait()
    t.join()
    assert len(errors) == 1 and "2 fixtures() blocks are active" in str(errors[0])


def _catch(errors: list[BaseException]) -> None:
    try:
        tracely.call_tool("n", _boom)
    except tracely.ReplayError as exc:
        errors.append(exc)


def test_live_again_after_the_block_also_after_an_exception() -> None:
    with pytest.raises(RuntimeError), tracely.fixtures({}):
        raise RuntimeError("agent crashed")
    assert tracely.call_tool("t", lambda: "live") == "live"
    with tracely.fixtures({"tools": {"t": [{"output": "rec"}]}}):
        assert tracely.call_tool("t", _boom) == "rec"
    assert tracely.call_tool("t", lambda: "live") == "live"


# -- replayed types ---------------------------------------------------------------------------


@dataclass
class Order:
    order_id: int
    status: str


def fetch_order(order_id: int) -> Order:
    return Order(order_id, "shipped")


def test_served_value_rebuilt_from_the_functions_return_annotation() -> None:
    bundle = {"tools": {"fetch": [{"output": {"order_id": 7, "status": "shipped"}}]}}
    with tracely.fixtures(bundle):
        got = tracely.call_tool("fetch", lambda: fetch_order(7), returns=Order)
        assert got == Order(7, "shipped")
    with tracely.fixtures(bundle):
        assert tracely.call_tool("fetch", fetch_order) == Order(7, "shipped")  # annotation of fn


def test_served_value_rebuilt_from_the_recorded_builtin_tag(capture: Any) -> None:
    with tracely.fixtures(None):
        tracely.call_tool("pair", lambda: (1, 2))
    bundle = capture.last_bundle
    assert bundle["tools"]["pair"][0]["output_type"] == "tuple"
    with tracely.fixtures(bundle):
        assert tracely.call_tool("pair", _boom) == (1, 2)


def test_served_values_are_fresh_copies() -> None:
    bundle = {"tools": {"t": [{"output": {"items": [1]}}]}}
    with tracely.fixtures(bundle):
        peeked = tracely.fixture("tools", "t")
        peeked["items"].append(2)
        assert tracely.call_tool("t", _boom) == {"items": [1]}


# -- bundle validation ------------------------------------------------------------------------


def test_a_bundle_that_fails_its_integrity_check_is_not_a_recording() -> None:
    bundle = seal({"tools": {"t": [{"output": 1}]}})
    bundle["tools"]["t"][0]["output"] = 2
    with pytest.raises(tracely.BundleError, match="checksum"), tracely.fixtures(bundle):
        pass


@pytest.mark.parametrize(
    ("bundle", "problem"),
    [
        ({"tool": {}}, "unknown key"),
        ({"tools": {"t": [{"args": {}}]}}, "exactly one of 'output' or 'error'"),
        ({"tools": {"t": {"output": 1}}}, "must be a list"),
        ({"llm": {"m": [{"output": 1, "usage": [1]}]}}, "usage"),
        ({"tools": {"t": [{"error": "boom"}]}}, "error must be an object"),
        ([], "expected an object"),
    ],
)
def test_malformed_bundles_get_a_clear_error(bundle: Any, problem: str) -> None:
    with pytest.raises(tracely.BundleError, match=problem), tracely.fixtures(bundle):
        pass


def test_each_diverged_call_carries_what_differed() -> None:
    bundle = {
        "tools": {"get_order": [{"args": {"order_id": 7}, "output": {"status": "shipped"}}]},
        "llm": {"m": [{"input": [{"role": "user", "content": "hi"}], "output": "Hello"}]},
    }
    with tracely.fixtures(bundle, strict=False) as rep:
        tracely.call_tool("get_order", _boom, args={"order_id": 8})
        tracely.call_llm("m", _boom, input=[{"role": "user", "content": "hello"}])
    assert rep.diverged == ["tools:get_order", "llm:m"]
    assert [(d["label"], d["field"], d["differences"]) for d in rep.divergences] == [
        ("tools:get_order", "args", [{"path": "order_id", "recorded": 7, "actual": 8}]),
        ("llm:m", "input", [{"path": "[0].content", "recorded": "hi", "actual": "hello"}]),
    ]
    assert rep.divergences[1]["recorded"] == [{"role": "user", "content": "hi"}]
    assert rep.divergences[1]["actual"] == [{"role": "user", "content": "hello"}]
    assert rep.divergences[1]["entry"] == "llm:m #1 (seq 2)"
    assert rep.to_dict()["divergences"] == rep.divergences


def test_a_session_calls_its_end_hooks_once_when_its_block_ends() -> None:
    from tracely_sdk._replay import current_session

    ended: list[str] = []
    with tracely.fixtures({}):
        session = current_session()
        assert session is not None
        session.on_end(lambda: ended.append("first"))
        session.on_end(lambda: ended.append("second"))
        assert ended == []
    assert ended == ["first", "second"]
    session.finish()  # a second finish calls nothing again
    assert ended == ["first", "second"]


# -- the timeline of a recording ------------------------------------------------------------------


def test_a_recordings_timeline_carries_each_calls_usage_and_times(capture: Any) -> None:
    from examples import weather_agent
    from tracely_sdk._replay import recorded_calls

    weather_agent.run("Paris")
    bundle = capture.last_bundle
    steps = recorded_calls(bundle)
    assert [s["label"] for s in steps] == [
        "llm:local-weather-model",
        "tools:get_weather",
        "llm:local-weather-model",
    ]
    assert [s.get("usage") for s in steps] == [[15, 7], None, [28, 6]]
    entry = bundle["tools"]["get_weather"][0]
    assert (steps[1]["started_at"], steps[1]["ended_at"]) == (
        entry["started_at"],
        entry["ended_at"],
    )
    by_hand = {s["label"]: s for s in recorded_calls(ORDER_BUNDLE)}
    assert by_hand["llm:gpt-4o"]["usage"] == [812, 96]
    assert not {"usage", "started_at", "ended_at"} & set(by_hand["tools:get_order"])
