"""Running cases: one test (at least) per verdict rule, isolation, entrypoints and ``-j``."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import tracely_sdk as tracely
from examples import weather_agent
from tracely_otel import attributes as A
from tracely_otel import validate_bundle
from tracely_sdk._runner import (
    ERRORED,
    FAIL,
    INCOMPLETE,
    LENIENT,
    PASS,
    CaseResult,
    EntrypointError,
    ReplayCase,
    Shard,
    load_case_dir,
    load_cases,
    load_entrypoint,
    natural_key,
    run_case,
    run_cases,
)
from tracely_sdk.errors import NotFound
from tracely_sdk.store import Recording, SQLiteStore, export_cases

WEATHER = "examples.weather_agent"


def record(
    capture: Any, fn: Any, *args: Any, raises: type[Exception] | None = None
) -> dict[str, Any]:
    """Run ``fn`` live and return the bundle of its trace (a recorded failure is one too)."""
    before = len(capture.bundles)
    if raises is not None:
        with pytest.raises(raises):
            fn(*args)
    else:
        fn(*args)
    assert len(capture.bundles) == before + 1
    return validate_bundle(capture.last_bundle)


def case_of(
    recorded: dict[str, Any], case_id: str = "paris-weather", /, **changes: Any
) -> ReplayCase:
    agent = recorded["agent"]
    case = ReplayCase(
        id=case_id,
        name=case_id.replace("-", " ").title(),
        version=1,
        entrypoint=f"{WEATHER}:run",
        input=agent["input"],
        expected_output=agent.get("output"),
        bundle=recorded,
    )
    return dataclasses.replace(case, **changes)


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a live call was made under replay")


def hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, any live tool or model call fails the test."""
    monkeypatch.setattr(weather_agent, "get_weather", _refuse)
    monkeypatch.setattr(weather_agent, "local_model", _refuse)


# -- verdicts ---------------------------------------------------------------------------------


def test_pass_when_the_replay_reproduces_the_recording(capture: Any, monkeypatch: Any) -> None:
    case = case_of(record(capture, weather_agent.run, "Paris"))
    hermetic(monkeypatch)
    result = run_case(case, weather_agent.run)
    assert result.verdict == PASS and result.ok
    assert result.reasons == [] and result.diff is None
    assert result.output == result.expected_output == "It's 18°C and cloudy in Paris."
    assert result.served == [
        "llm:local-weather-model",
        "tools:get_weather",
        "llm:local-weather-model",
    ]
    assert result.replay is not None and result.replay.clean
    assert result.trace_id is not None and len(result.trace_id) == 32
    # the replayed trace went through the pipeline, stamped with the case
    agent_span = [s for s in capture.spans if s.attributes.get(A.CASE_ID) == "paris-weather"]
    assert len(agent_span) == 1
    assert format(agent_span[0].context.trace_id, "032x") == result.trace_id
    assert agent_span[0].attributes[A.CASE_VERSION] == 1


def test_with_no_span_sampled_the_verdict_is_the_same_and_the_trace_id_is_the_agents(
    capture: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids: list[str] = []

    def ask(city: str) -> Any:
        with tracely.agent("ask", input=city) as run:
            ids.append(run.trace_id)
            run.output = tracely.call_tool("get_weather", lambda: {"temp": 18}, args={"city": city})
            return run.output

    case = case_of(record(capture, ask, "Paris"), entrypoint=None)
    sampled = run_case(case, ask)
    # what `tracely replay` builds when no exporter is configured: nothing is sampled, so no
    # span processor sees a span, and the trace id comes from the replay itself
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", TracerProvider(sampler=ALWAYS_OFF))
    unsampled = run_case(case, ask)
    assert unsampled.verdict == sampled.verdict == PASS
    assert unsampled.trace_id == ids[-1] != sampled.trace_id == ids[-2]

    def plain(result: CaseResult) -> dict[str, Any]:
        return {**result.to_dict(), "trace_id": None, "duration": None}

    assert plain(unsampled) == plain(sampled)


def test_incomplete_on_a_strict_miss_and_the_call_never_runs(
    capture: Any, monkeypatch: Any
) -> None:
    broken = record(capture, weather_agent.run_broken, "Paris")
    hermetic(monkeypatch)
    result = run_case(case_of(broken), weather_agent.run)
    assert result.verdict == INCOMPLETE and not result.ok
    assert result.reasons[0].startswith("no recorded call for tools:get_weather")
    assert len(result.reasons) == 1


def test_incomplete_even_when_the_agent_swallows_the_replay_error(capture: Any) -> None:
    broken = record(capture, weather_agent.run_broken, "Paris")

    def swallowing(city: str) -> str:
        try:
            return weather_agent.run(city)
        except tracely.ReplayError:
            return "Let me check the weather in Paris."

    result = run_case(case_of(broken), swallowing)
    assert result.verdict == INCOMPLETE
    assert "no recorded call for tools:get_weather" in result.reasons[0]
    assert result.output == "Let me check the weather in Paris."


def test_fail_on_the_missing_tool(capture: Any, monkeypatch: Any) -> None:
    fixed = record(capture, weather_agent.run, "Paris")
    hermetic(monkeypatch)
    result = run_case(case_of(fixed), weather_agent.run_broken)
    assert result.verdict == FAIL and not result.ok
    assert (
        result.reasons[0]
        == "recorded call(s) never made: tools:get_weather, llm:local-weather-model"
    )
    assert "output differs from the expected output" in result.reasons
    assert result.diff == (
        'output: recorded "It\'s 18°C and cloudy in Paris." now "Let me check the weather in Paris."'
    )


def test_fail_on_a_different_output_with_a_readable_diff(capture: Any) -> None:
    def structured(city: str) -> dict[str, Any]:
        with tracely.agent("structured", input=city) as run:
            weather = tracely.call_tool(
                "get_weather", lambda: weather_agent.get_weather(city), args={"city": city}
            )
            run.output = {"city": city, "summary": weather["sky"], "temp": weather["temp_c"]}
            return run.output

    bundle = record(capture, structured, "Oslo")

    def changed(city: str) -> dict[str, Any]:
        out = structured(city)
        return {**out, "temp": out["temp"] + 1}

    result = run_case(case_of(bundle), changed)
    assert result.verdict == FAIL
    assert result.reasons == ["output differs from the expected output"]
    assert result.diff == "output.temp: recorded 3 now 4"
    assert result.output_differences == [{"path": "output.temp", "recorded": 3, "actual": 4}]
    # key order is irrelevant: the comparison is canonical
    result = run_case(case_of(bundle), lambda city: dict(reversed(list(structured(city).items()))))
    assert result.verdict == PASS


def test_fail_on_input_divergence(capture: Any) -> None:
    def ask(question: str, extra: str = "") -> str:
        with tracely.agent("asker", input=question) as run:
            run.output = tracely.call_llm("m", lambda: "42", input=[question + extra])
            return run.output

    bundle = record(capture, ask, "meaning?")
    result = run_case(case_of(bundle), lambda q: ask(q, " (rephrased)"))
    assert result.verdict == FAIL
    assert result.reasons == ["served despite a different input: llm:m"]
    assert result.diverged == ["llm:m"]
    (divergence,) = result.divergences
    assert divergence["label"] == "llm:m" and divergence["field"] == "input"
    assert divergence["recorded"] == ["meaning?"]
    assert divergence["actual"] == ["meaning? (rephrased)"]
    assert divergence["differences"] == [
        {"path": "[0]", "recorded": "meaning?", "actual": "meaning? (rephrased)"}
    ]
    assert divergence["omitted"] == 0


def test_errored_when_the_agent_raises(capture: Any) -> None:
    bundle = record(capture, weather_agent.run, "Paris")

    def raising(city: str) -> str:
        raise RuntimeError("boom")

    result = run_case(case_of(bundle), raising)
    assert result.verdict == ERRORED
    assert result.reasons == ["the agent raised RuntimeError: boom"]
    assert result.traceback is not None and "RuntimeError: boom" in result.traceback


SECRET = "api_key=sk-live-0123456789abcdefghij"


def _connect(city: str) -> str:
    raise ConnectionError(f"weather backend refused {city} with {SECRET}")


def failing_agent(city: str) -> str:
    return _connect(city)


async def failing_async_agent(city: str) -> str:
    return _connect(city)


@pytest.mark.parametrize("agent", [failing_agent, failing_async_agent])
def test_an_errored_case_keeps_the_agents_frames_redacted(capture: Any, agent: Any) -> None:
    result = run_case(case_of(record(capture, weather_agent.run, "Paris")), agent)
    assert result.verdict == ERRORED
    assert result.error == {
        "type": "ConnectionError",
        "message": "weather backend refused Paris with api_key=[REDACTED]",
    }
    assert result.reasons == [f"the agent raised ConnectionError: {result.error['message']}"]
    tb = result.traceback or ""
    assert tb.startswith("Traceback (most recent call last):\n")
    assert f"in {agent.__name__}\n" in tb and "in _connect\n" in tb
    assert "ConnectionError: weather backend refused Paris with api_key=[REDACTED]" in tb
    assert "sk-live" not in tb
    # the runner that called the agent, and the event loop it awaited it on, are not the agent's
    assert "tracely_sdk" not in tb and "asyncio" not in tb and "During handling" not in tb
    assert "of tracely and its runner not shown" in tb


def test_tracelys_frames_are_left_out_of_every_exception_in_the_chain(capture: Any) -> None:
    def agent(city: str) -> str:
        try:
            tracely.call_tool("get_forecast", lambda: {}, args={"city": city})
        except tracely.ReplayError as exc:
            raise RuntimeError("no forecast") from exc
        return "unreachable"

    result = run_case(case_of(record(capture, weather_agent.run, "Paris")), agent)
    assert result.verdict == INCOMPLETE
    assert result.reasons[-1] == "the agent then raised RuntimeError: no forecast"
    assert result.error == {"type": "RuntimeError", "message": "no forecast"}
    tb = result.traceback or ""
    assert "ReplayError: no recorded call for tools:get_forecast" in tb
    assert "The above exception was the direct cause" in tb
    assert tb.count("in agent\n") == 2  # the call_tool line, then the raise
    assert "tracely_sdk/" not in tb and "tracely_otel/" not in tb


def test_a_recorded_failure_reproduced_is_the_expected_outcome(
    capture: Any, monkeypatch: Any
) -> None:
    # get_weather raised, and so did the agent: that failure is what was recorded
    bundle = record(
        capture, weather_agent.run, "Atlantis", raises=weather_agent.WeatherServiceError
    )
    hermetic(monkeypatch)
    assert bundle["agent"]["error"]["type"] == "WeatherServiceError"
    case = case_of(bundle, "atlantis")
    assert run_case(case, weather_agent.run).verdict == PASS

    def swallowing(city: str) -> str:
        try:
            return weather_agent.run(city)
        except tracely.ToolError:
            return "Sorry."

    handled = run_case(case, swallowing)
    assert handled.verdict == FAIL
    assert handled.reasons == [
        "the recorded run raised WeatherServiceError: no weather data for 'Atlantis'; "
        "the replayed agent returned instead"
    ]


def test_unloadable_recording_is_errored_without_running_the_agent(capture: Any) -> None:
    bundle = record(capture, weather_agent.run, "Paris")
    tampered = {
        **bundle,
        "tools": {"get_weather": [{**bundle["tools"]["get_weather"][0], "output": {}}]},
    }
    ran = []
    capture.exporter.clear()
    result = run_case(case_of(tampered, version=3), lambda city: ran.append(city))
    assert ran == []
    assert result.verdict == ERRORED
    assert "cannot be loaded, so the agent was not run" in result.reasons[0]
    assert "checksum" in result.reasons[0]
    # ... and the case's trace is emitted, errored: one agent span, no calls
    (span,) = capture.spans
    assert span.name == "invoke_agent paris-weather"
    assert span.status.status_code.name == "ERROR"
    assert span.attributes[A.KIND] == A.KIND_AGENT
    assert span.attributes[A.CASE_ID] == "paris-weather"
    assert span.attributes[A.CASE_VERSION] == 3
    assert span.attributes[A.ERROR_TYPE] == "BundleError"
    assert "checksum" in orjson.loads(span.attributes[A.ERROR])["message"]
    assert result.trace_id == format(span.context.trace_id, "032x")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"problem": "the case file is not JSON"}, "the case file is not JSON"),
        ({"input": "Paris"}, "is not a recorded call"),
        ({"input": {"args": "Paris"}}, "is not a recorded call"),
        ({"bundle": "not a bundle"}, "cannot be loaded"),
    ],
)
def test_a_corrupt_case_is_errored_and_never_run(
    capture: Any, changes: dict[str, Any], expected: str
) -> None:
    bundle = record(capture, weather_agent.run, "Paris")
    ran = []
    result = run_case(case_of(bundle, **changes), lambda *a, **k: ran.append(a))
    assert ran == [] and result.verdict == ERRORED
    assert expected in result.reasons[0]


def test_lenient_is_never_a_pass(capture: Any) -> None:
    fixed = record(capture, weather_agent.run, "Paris")
    clean = run_case(case_of(fixed), weather_agent.run, strict=False)
    assert clean.verdict == LENIENT and clean.reasons == [] and clean.ok
    assert clean.report is not None and clean.report["mode"] == "lenient"

    broken = record(capture, weather_agent.run_broken, "Paris")
    fell_through = run_case(case_of(broken), weather_agent.run, strict=False)
    assert fell_through.verdict == LENIENT and not fell_through.ok
    assert (
        "not in the recording, ran live: tools:get_weather, llm:local-weather-model"
        in fell_through.reasons
    )
    assert "output differs from the expected output" in fell_through.reasons


def test_async_entrypoints_are_awaited(capture: Any) -> None:
    async def arun(city: str) -> str:
        async with tracely.agent("async-weather", input=city) as run:

            async def fetch() -> dict[str, Any]:
                return weather_agent.get_weather(city)

            weather = await tracely.acall_tool("get_weather", fetch, args={"city": city})
            run.output = f"{weather['temp_c']}C"
            return run.output

    bundle = record(capture, lambda c: asyncio.run(arun(c)), "Tokyo")
    result = run_case(case_of(bundle), arun)
    assert result.verdict == PASS and result.output == "21C"


def test_async_entrypoint_from_inside_a_running_loop(capture: Any) -> None:
    async def arun(city: str) -> str:
        with tracely.agent("async-weather", input=city) as run:
            run.output = tracely.call_tool("t", lambda: city.upper(), args={"c": city})
            return run.output

    bundle = record(capture, lambda c: asyncio.run(arun(c)), "Oslo")

    async def caller() -> CaseResult:
        return run_case(case_of(bundle), arun)

    assert asyncio.run(caller()).verdict == PASS


_leak: contextvars.ContextVar[str] = contextvars.ContextVar("leak", default="clean")


def test_each_case_runs_in_a_fresh_context(capture: Any) -> None:
    bundle = record(capture, weather_agent.run, "Paris")
    seen = []

    def leaky(city: str) -> str:
        seen.append(_leak.get())
        _leak.set("dirty")
        return weather_agent.run(city)

    cases = [case_of(bundle, f"c{i}") for i in range(3)]
    results = [run_case(c, leaky) for c in cases]
    assert seen == ["clean", "clean", "clean"]
    assert [r.verdict for r in results] == [PASS, PASS, PASS]
    assert len({r.trace_id for r in results}) == 3  # each case is its own trace
    assert _leak.get() == "clean"


# -- entrypoints ------------------------------------------------------------------------------


def test_load_entrypoint_finds_the_function() -> None:
    assert load_entrypoint(f"{WEATHER}:run") is weather_agent.run
    assert load_entrypoint("examples.weather_agent:TOOLS.copy") is not None  # dotted attribute


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("examples.weather_agent", "expected 'module:function'"),
        ("examples/weather_agent.py:run", "expected 'module:function'"),
        ("no_such_module_xyz:run", "no module named 'no_such_module_xyz'"),
        ("examples.no_such_agent:run", "no module named 'examples.no_such_agent'"),
        ("examples.weather_agent:runn", "has no attribute 'runn'; did you mean 'run'?"),
        ("examples.weather_agent:MODEL", "is a str, not a function"),
    ],
)
def test_load_entrypoint_says_what_is_missing(spec: str, message: str) -> None:
    with pytest.raises(EntrypointError, match=message.replace("(", r"\(").replace("?", r"\?")):
        load_entrypoint(spec)


def test_load_entrypoint_reports_a_module_that_fails_to_import(
    tmp_path: Path, monkeypatch: Any
) -> None:
    (tmp_path / "broken_agent_mod.py").write_text("import not_installed_dependency_xyz\n")
    (tmp_path / "raising_agent_mod.py").write_text("raise RuntimeError('config missing')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    with pytest.raises(
        EntrypointError, match="importing 'broken_agent_mod' failed: ModuleNotFoundError"
    ):
        load_entrypoint("broken_agent_mod:run")
    with pytest.raises(EntrypointError, match="RuntimeError: config missing"):
        load_entrypoint("raising_agent_mod:run")


def test_load_entrypoint_puts_the_cwd_on_the_path(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "cwd_agent_mod.py").write_text("def run(x):\n    return x\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "cwd_agent_mod", raising=False)
    assert load_entrypoint("cwd_agent_mod:run")(5) == 5
    assert sys.path[0] == str(tmp_path)


# -- many cases -------------------------------------------------------------------------------


def _mixed_cases(capture: Any) -> list[ReplayCase]:
    fixed = record(capture, weather_agent.run, "Paris")
    broken = record(capture, weather_agent.run_broken, "Lisbon")
    tampered = {**fixed, "llm": {}}
    return [
        case_of(fixed, "a-pass"),
        case_of(broken, "b-incomplete"),
        case_of(fixed, "c-fail", entrypoint=f"{WEATHER}:run_broken"),
        case_of(tampered, "d-errored"),
    ]


def test_run_cases_in_order_with_progress(capture: Any) -> None:
    seen: list[str] = []
    results = run_cases(_mixed_cases(capture), progress=lambda r: seen.append(r.case_id))
    assert [(r.case_id, r.verdict) for r in results] == [
        ("a-pass", PASS),
        ("b-incomplete", INCOMPLETE),
        ("c-fail", FAIL),
        ("d-errored", ERRORED),
    ]
    assert seen == ["a-pass", "b-incomplete", "c-fail", "d-errored"]
    assert results[2].entrypoint == f"{WEATHER}:run_broken"


def test_the_entrypoint_argument_overrides_each_cases_own(capture: Any) -> None:
    results = run_cases(_mixed_cases(capture), f"{WEATHER}:run_broken")
    assert [r.verdict for r in results] == [FAIL, PASS, FAIL, ERRORED]


def test_parallel_workers_give_the_same_verdicts(capture: Any) -> None:
    cases = _mixed_cases(capture) * 2
    serial = run_cases(cases)
    seen: list[str] = []
    parallel = run_cases(cases, jobs=2, progress=lambda r: seen.append(r.case_id))
    assert [(r.case_id, r.verdict, r.reasons) for r in parallel] == [
        (r.case_id, r.verdict, r.reasons) for r in serial
    ]
    assert sorted(seen) == sorted(c.id for c in cases)
    assert parallel[0].replay is None and parallel[0].report is not None  # plain data came back


def test_a_bad_entrypoint_stops_everything_before_any_case_runs(capture: Any) -> None:
    cases = _mixed_cases(capture)
    with pytest.raises(EntrypointError, match="no attribute 'nope'"):
        run_cases(cases, f"{WEATHER}:nope")
    with pytest.raises(EntrypointError, match="have no entrypoint"):
        run_cases([dataclasses.replace(cases[0], entrypoint=None)])


def test_results_travel_as_plain_data(capture: Any) -> None:
    (result,) = run_cases(_mixed_cases(capture)[2:3])
    data = orjson.loads(orjson.dumps(result.to_dict()))
    again = CaseResult.from_dict(data)
    assert again == result
    assert again.to_dict() == result.to_dict()


# -- case sources -----------------------------------------------------------------------------


def _store_with_cases(capture: Any, path: Path) -> SQLiteStore:
    store = SQLiteStore(path)
    for fn, city, tags in (
        (weather_agent.run, "Paris", ["smoke"]),
        (weather_agent.run, "Oslo", []),
    ):
        bundle = record(capture, fn, city)
        store.put_recording(Recording.from_bundle(bundle))
        store.promote(
            bundle["trace_id"], name=f"{city} weather", entrypoint=f"{WEATHER}:run", tags=tags
        )
    return store


def test_load_cases_from_a_store(capture: Any, tmp_path: Path) -> None:
    store = _store_with_cases(capture, tmp_path / "t.db")
    try:
        assert [c.id for c in load_cases(store=store)] == ["oslo-weather", "paris-weather"]
        assert [c.id for c in load_cases(store=store, tags=["smoke"])] == ["paris-weather"]
        assert [c.id for c in load_cases(store=store, case_ids=["oslo-weather"])] == [
            "oslo-weather"
        ]
        with pytest.raises(NotFound):
            load_cases(store=store, case_ids=["nope"])
    finally:
        store.close()


def test_a_corrupt_case_file_is_an_errored_case_not_a_crash(capture: Any, tmp_path: Path) -> None:
    store = _store_with_cases(capture, tmp_path / "t.db")
    export_cases(store, tmp_path / "cases")
    store.close()
    paris = tmp_path / "cases" / "paris-weather.json"
    doc = orjson.loads(paris.read_bytes())
    doc["history"][0]["bundle"]["tools"]["get_weather"][0]["output"]["temp_c"] = (
        99  # checksum now wrong
    )
    paris.write_bytes(orjson.dumps(doc))
    (tmp_path / "cases" / "garbage.json").write_text("{not json")

    cases = load_case_dir(tmp_path / "cases")
    assert [(c.id, c.problem is not None) for c in cases] == [
        ("garbage", True),
        ("oslo-weather", False),
        ("paris-weather", True),
    ]
    paris_case = cases[2]
    assert paris_case.version == 1 and paris_case.tags == ("smoke",)
    assert "history[0].bundle" in (paris_case.problem or "")
    # a tag filter keeps the file whose tags cannot be read, so it cannot drop out silently
    assert [c.id for c in load_cases(cases_dir=tmp_path / "cases", tags=["smoke"])] == [
        "garbage",
        "paris-weather",
    ]
    results = run_cases(cases, f"{WEATHER}:run")
    assert [r.verdict for r in results] == [ERRORED, PASS, ERRORED]
    assert "the case file cannot be loaded" in results[2].reasons[0]


@tracely.observe(as_type="agent", name="observed-agent")
def observed(city: str, *, units: str = "C") -> str:
    weather = tracely.call_tool(
        "get_weather", lambda: weather_agent.get_weather(city), args={"city": city}
    )
    return f"{weather['temp_c']}{units}"


def test_an_observed_agent_is_called_with_its_recorded_arguments(capture: Any) -> None:
    bundle = record(capture, lambda: observed("Lisbon", units="°C"))
    assert bundle["agent"]["input"] == {"args": ["Lisbon"], "kwargs": {"units": "°C"}}
    result = run_case(case_of(bundle), observed)
    assert result.verdict == PASS and result.output == "24°C"


def test_the_agent_version_is_the_cases_own_else_its_installed_distribution(
    capture: Any,
) -> None:
    import importlib.metadata

    bundle = record(capture, weather_agent.run, "Paris")
    # the example agent is a module of this project, not an installed distribution
    assert run_case(case_of(bundle), weather_agent.run).agent_version is None
    pinned = case_of(bundle, agent_version="2.1.0")
    assert run_case(pinned, weather_agent.run).agent_version == "2.1.0"
    installed = run_case(case_of(bundle), weather_agent.run, entrypoint="orjson:loads")
    assert installed.agent_version == importlib.metadata.version("orjson")
    assert CaseResult.from_dict(installed.to_dict()).agent_version == installed.agent_version


# -- the timeline ------------------------------------------------------------------------------


def test_the_timeline_shows_each_recorded_call_beside_the_replay(
    capture: Any, monkeypatch: Any
) -> None:
    fixed = record(capture, weather_agent.run, "Paris")
    hermetic(monkeypatch)
    result = run_case(case_of(fixed), weather_agent.run_rewritten)
    assert result.verdict == FAIL
    steps = result.timeline
    assert [(s["outcome"], s["label"], s["call"]) for s in steps] == [
        ("diverged", "llm:local-weather-model", 1),
        ("never made", "tools:get_weather", None),
        ("never made", "llm:local-weather-model", None),
    ]
    assert [s["seq"] for s in steps] == sorted(s["seq"] for s in steps)
    first, tool, _ = steps
    assert first["field"] == "input" and first["entry"] == "llm:local-weather-model #1 (seq 1)"
    assert first["recorded"]["messages"][0]["content"] == weather_agent.SYSTEM
    assert first["actual"]["messages"][0]["content"] == weather_agent.REWRITTEN_SYSTEM
    assert first["differences"] == [
        {
            "path": "messages[0].content",
            "recorded": weather_agent.SYSTEM,
            "actual": weather_agent.REWRITTEN_SYSTEM,
        }
    ]
    assert first["output"]["content"] == "Let me check the weather in Paris."
    assert tool["field"] == "args" and tool["recorded"] == {"city": "Paris"}
    assert tool["output"] == {"city": "Paris", "temp_c": 18, "sky": "cloudy"}
    assert "actual" not in tool


def test_a_call_the_recording_cannot_answer_follows_the_call_served_before_it(
    capture: Any, monkeypatch: Any
) -> None:
    broken = record(capture, weather_agent.run_broken, "Paris")
    hermetic(monkeypatch)
    result = run_case(case_of(broken), weather_agent.run)
    assert result.verdict == INCOMPLETE
    (served, missed) = result.timeline
    assert (served["outcome"], served["call"]) == ("served", 1)
    assert "actual" not in served and served["output"]["tool_call"]["name"] == "get_weather"
    assert missed["outcome"] == "missed" and missed["label"] == "tools:get_weather"
    assert (missed["seq"], missed["entry"], missed["call"]) == (None, None, 2)
    assert missed["actual"] == {"city": "Paris"}
    assert missed["message"] == result.reasons[0]


def test_a_lenient_live_call_is_in_the_timeline(capture: Any, monkeypatch: Any) -> None:
    broken = record(capture, weather_agent.run_broken, "Paris")
    result = run_case(case_of(broken), weather_agent.run, strict=False)
    assert [(s["outcome"], s["label"]) for s in result.timeline] == [
        ("served", "llm:local-weather-model"),
        ("live", "tools:get_weather"),
        ("live", "llm:local-weather-model"),
    ]


def test_the_timeline_travels_in_the_json_report_and_the_stored_run(
    capture: Any, monkeypatch: Any
) -> None:
    from tracely_sdk._reports import json_report, run_of

    fixed = record(capture, weather_agent.run, "Paris")
    hermetic(monkeypatch)
    result = run_case(case_of(fixed), weather_agent.run_rewritten)
    again = CaseResult.from_dict(orjson.loads(orjson.dumps(result.to_dict())))
    assert again.timeline == result.timeline
    (case,) = json_report([result])["cases"]
    assert case["timeline"] == result.timeline
    (stored,) = run_of([result], started_at=1).cases
    assert stored["timeline"] == result.timeline


def test_natural_order_reads_numbers_as_numbers() -> None:
    names = ["city10", "city2", "b", "City1", "city1", "a10b2", "a10b10", "a9"]
    assert sorted(names, key=natural_key) == [
        "a9", "a10b2", "a10b10", "b", "City1", "city1", "city2", "city10",
    ]  # fmt: skip


def test_a_cases_shard_is_chosen_by_its_id_alone() -> None:
    ids = [f"case-{n}" for n in range(400)]
    shards = [Shard(k, 4) for k in range(1, 5)]
    where = {i: [s.index for s in shards if s.holds(i)] for i in ids}
    assert all(len(found) == 1 for found in where.values())  # every case in exactly one shard
    sizes = [sum(1 for found in where.values() if found == [k]) for k in range(1, 5)]
    assert min(sizes) > 60  # spread over the shards, not all in one
    # adding cases, or listing them in another order, moves no case to another shard
    more = [*reversed(ids), "new-a", "new-b"]
    assert all([s.index for s in shards if s.holds(i)] == where[i] for i in more if i in where)
    assert Shard.parse(" 2/4 ") == Shard(2, 4) and str(Shard(2, 4)) == "2/4"
    assert Shard(1, 1).holds("anything")


def _counting(monkeypatch: Any, module: Any, name: str) -> list[Any]:
    """Count the calls ``module`` makes to its ``name`` (still calling the real one)."""
    calls: list[Any] = []
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_run_of_case_files_validates_each_bundle_once(
    capture: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    from tracely_sdk import _replay
    from tracely_sdk.store import _files

    store = _store_with_cases(capture, tmp_path / "t.db")
    export_cases(store, tmp_path / "cases")
    store.close()
    hermetic(monkeypatch)
    validated = _counting(monkeypatch, _files, "validate_bundle")
    revalidated = _counting(monkeypatch, _replay, "validate_bundle")
    cases = load_case_dir(tmp_path / "cases")
    results = run_cases(cases, f"{WEATHER}:run")
    assert [r.verdict for r in results] == [PASS, PASS]
    assert (len(validated), len(revalidated)) == (2, 0)


def test_a_run_of_stored_cases_does_not_validate_them_again(
    capture: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    from tracely_sdk import _replay

    store = _store_with_cases(capture, tmp_path / "t.db")
    try:
        cases = load_cases(store=store)
    finally:
        store.close()
    hermetic(monkeypatch)
    revalidated = _counting(monkeypatch, _replay, "validate_bundle")
    assert [r.verdict for r in run_cases(cases, f"{WEATHER}:run")] == [PASS, PASS]
    assert revalidated == []


def test_a_bundle_not_loaded_by_the_runner_is_always_validated(capture: Any) -> None:
    bundle = record(capture, weather_agent.run, "Paris")
    tampered = {
        **bundle,
        "tools": {"get_weather": [{**bundle["tools"]["get_weather"][0], "output": {}}]},
    }
    with pytest.raises(tracely.BundleError, match="checksum"), tracely.fixtures(tampered):
        pass
    # a case built by hand, not loaded from a store or a case file, is not taken on trust
    ran: list[Any] = []
    (result,) = run_cases([case_of(tampered)], f"{WEATHER}:run")
    assert result.verdict == ERRORED and "checksum" in result.reasons[0]
    result = run_case(case_of(tampered), lambda city: ran.append(city))
    assert ran == [] and result.verdict == ERRORED


def test_a_run_resolves_its_settings_once_and_each_run_anew(capture: Any, monkeypatch: Any) -> None:
    from tracely_sdk import _config

    cases = [case_of(record(capture, weather_agent.run, c), c.lower()) for c in ("Paris", "Oslo")]
    hermetic(monkeypatch)
    resolved = _counting(monkeypatch, _config, "resolve")
    assert [r.verdict for r in run_cases(cases * 3, f"{WEATHER}:run")] == [PASS] * 6
    replay_settings = [args[0] for args in resolved if args[0] in ("ignore", "allow_network")]
    assert sorted(replay_settings) == ["allow_network", "ignore"]
    # the next run reads them again (a fixtures() block reads them on entering: see the
    # network guard's tests)
    monkeypatch.setenv("TRACELY_IGNORE", "$$$")
    with pytest.raises(tracely.ConfigError, match="TRACELY_IGNORE"):
        run_cases(cases, f"{WEATHER}:run")


def test_a_case_that_nobody_reports_on_never_builds_its_timeline_or_report_copy(
    capture: Any, monkeypatch: Any
) -> None:
    from tracely_sdk import _replay

    cases = _mixed_cases(capture)
    built = _counting(monkeypatch, _replay, "timeline")
    results = run_cases(cases)
    assert [r.verdict for r in results] == [PASS, INCOMPLETE, FAIL, ERRORED]
    assert built == []  # the verdicts need neither
    report = results[0].report
    assert report is not None and len(built) == 1
    assert [s["outcome"] for s in report["timeline"]] == ["served", "served", "served"]
    assert results[0].report is report and results[0].timeline == report["timeline"]
    assert len(built) == 1  # made once


def test_every_report_read_after_the_run_is_the_one_read_as_each_case_ended(
    capture: Any, tmp_path: Path
) -> None:
    from tracely_sdk._html import report_document
    from tracely_sdk._reports import json_report, junit_xml, run_of

    fixed = record(capture, weather_agent.run, "Paris")
    # The first model call recorded with another prompt (and the seal taken off): served, diverged.
    llm = {m: [{**e, "input": "other"} for e in es] for m, es in fixed["llm"].items()}
    changed = {k: v for k, v in fixed.items() if k != "checksum"} | {"llm": llm}
    cases = [*_mixed_cases(capture), case_of(changed, "e-diverged")]

    def outputs(results: list[CaseResult]) -> list[bytes]:
        for r in results:
            r.duration, r.trace_id = 0.5, "f" * 32
        report = json_report(results, 1.0)
        return [
            orjson.dumps(report),
            junit_xml(results, elapsed=1.0),
            report_document(report, store="s", tracely_version="v").encode(),
            orjson.dumps(run_of(results, started_at=1, elapsed=1.0).cases),
        ]

    at_once = run_cases(cases, progress=lambda r: (r.report, r.replay and r.replay.timeline))
    later = run_cases(cases)
    assert "served despite a different input" in later[-1].reasons[0]
    assert outputs(later) == outputs(at_once)
