"""The pytest plugin: one test item per case, the tracely_replay fixture and marker."""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
import pytest

from examples import weather_agent
from tracely_sdk.store import Recording, SQLiteStore, export_cases

pytest_plugins = ["pytester"]

WEATHER = "examples.weather_agent"
PLUGIN = ("-p", "tracely_sdk.pytest_plugin")


def _record(capture: Any, store: SQLiteStore, fn: Any, city: str) -> str:
    try:
        fn(city)
    except Exception:
        pass  # a recorded failure is a recording too
    bundle = capture.last_bundle
    store.put_recording(Recording.from_bundle(bundle))
    return str(bundle["trace_id"])


ALLOW_WEATHER = '[tool.tracely]\nentrypoints = ["examples.weather_agent:*"]\n'


@pytest.fixture
def store_url(
    capture: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> str:
    """A store with two cases of ``run``: paris-weather (passes) and oslo-weather (broken run).

    The inner pytest runs in a project of its own, which allows the reference agent (it lives
    outside that project) in its pyproject.toml.
    """
    # the inner pytest runs load only the plugin under test, whatever is installed
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("TRACELY_STORE", raising=False)
    monkeypatch.delenv("TRACELY_ENTRYPOINTS", raising=False)
    pytester.makepyprojecttoml(ALLOW_WEATHER)
    path = tmp_path / "store" / "tracely.db"
    store = SQLiteStore(path)
    try:
        paris = _record(capture, store, weather_agent.run, "Paris")
        store.promote(paris, name="Paris weather", entrypoint=f"{WEATHER}:run", tags=["smoke"])
        oslo = _record(capture, store, weather_agent.run_broken, "Oslo")
        store.promote(oslo, name="Oslo weather", entrypoint=f"{WEATHER}:run")
    finally:
        store.close()
    return f"sqlite:///{path.as_posix().lstrip('/')}"


def test_collects_one_item_per_case(pytester: pytest.Pytester, store_url: str) -> None:
    result = pytester.runpytest(
        *PLUGIN,
        "--tracely-store",
        store_url,
        "--tracely-entrypoint",
        f"{WEATHER}:run",
        "--collect-only",
        "-q",
    )
    result.stdout.fnmatch_lines(
        ["tracely::oslo-weather", "tracely::paris-weather", "*2 tests collected*"]
    )


def test_failures_show_the_same_reasons_as_the_cli(
    pytester: pytest.Pytester, store_url: str
) -> None:
    result = pytester.runpytest(
        *PLUGIN, "--tracely-store", store_url, "--tracely-entrypoint", f"{WEATHER}:run", "-v"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*tracely::oslo-weather FAILED*",
            "*tracely::paris-weather PASSED*",
            "INCOMPLETE oslo-weather v1 (Oslo weather)",
            "  - no recorded call for tools:get_weather*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_the_entrypoint_option_is_the_default_for_cases_without_their_own(
    pytester: pytest.Pytester, store_url: str, capture: Any
) -> None:
    store = SQLiteStore(store_url.removeprefix("sqlite://"))
    try:
        lisbon = _record(capture, store, weather_agent.run, "Lisbon")
        store.promote(lisbon, name="Lisbon weather")  # no entrypoint of its own
    finally:
        store.close()
    pytester.makepyfile(
        test_handwritten="""
        def test_its_own(tracely_replay):
            assert tracely_replay("paris-weather").verdict == "PASS"

        def test_the_default(tracely_replay):
            assert tracely_replay("lisbon-weather", check=False).verdict == "FAIL"
        """
    )
    result = pytester.runpytest(
        *PLUGIN,
        "--tracely-store",
        store_url,
        "--tracely-entrypoint",
        f"{WEATHER}:run_broken",
        "-k",
        "paris or lisbon or handwritten",
        "-v",
    )
    # paris-weather replays through its own run; lisbon-weather through the default, broken
    result.assert_outcomes(passed=3, failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "*test_handwritten.py::test_its_own PASSED*",
            "*test_handwritten.py::test_the_default PASSED*",
            "*tracely::lisbon-weather FAILED*",
            "*tracely::paris-weather PASSED*",
            "FAIL lisbon-weather v1 (Lisbon weather)",
            "  - recorded call(s) never made: tools:get_weather, llm:local-weather-model",
            "  - output differs from the expected output",
            '    output: recorded "It*" now "Let me check the weather in Lisbon."',
        ]
    )


def test_k_and_tags_select_cases(pytester: pytest.Pytester, store_url: str) -> None:
    args = (*PLUGIN, "--tracely-store", store_url, "--tracely-entrypoint", f"{WEATHER}:run")
    pytester.runpytest(*args, "-k", "paris").assert_outcomes(passed=1, deselected=1)
    pytester.runpytest(*args, "-k", "smoke").assert_outcomes(
        passed=1, deselected=1
    )  # tags are keywords
    pytester.runpytest(*args, "-m", "tracely_case").assert_outcomes(passed=1, failed=1)
    pytester.runpytest(
        *PLUGIN, "--tracely-store", store_url, "--tracely-tag", "smoke"
    ).assert_outcomes(passed=1)


def test_cases_from_a_directory_including_a_corrupt_one(
    pytester: pytest.Pytester, store_url: str, tmp_path: Path
) -> None:
    store = SQLiteStore(store_url.removeprefix("sqlite://"))
    export_cases(store, tmp_path / "cases")
    store.close()
    oslo = tmp_path / "cases" / "oslo-weather.json"
    doc = orjson.loads(oslo.read_bytes())
    doc["history"][0]["bundle"]["llm"] = {}
    oslo.write_bytes(orjson.dumps(doc))
    result = pytester.runpytest(*PLUGIN, "--tracely-cases", str(tmp_path / "cases"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["ERRORED oslo-weather v1 (Oslo weather)", "  - the case file cannot be loaded*"]
    )


def test_the_fixture_and_marker_in_a_hand_written_test(
    pytester: pytest.Pytester, store_url: str
) -> None:
    pytester.makepyfile(
        test_handwritten=f"""
        import pytest

        @pytest.mark.tracely_case("paris-weather")
        def test_marked(tracely_replay):
            result = tracely_replay()
            assert result.verdict == "PASS"
            assert "tools:get_weather" in result.replay.served
            assert result.replay.clean

        @pytest.mark.tracely_case("paris-weather", entrypoint="{WEATHER}:run_broken")
        def test_marked_with_entrypoint(tracely_replay):
            assert tracely_replay(check=False).verdict == "FAIL"

        def test_by_id(tracely_replay):
            result = tracely_replay("oslo-weather", check=False)
            assert result.verdict == "INCOMPLETE"
            assert result.replay.errors[0].label == "tools:get_weather"
            assert tracely_replay.case("oslo-weather").version == 1

        def test_lenient(tracely_replay):
            assert tracely_replay("paris-weather", strict=False).verdict == "LENIENT"

        def test_needs_an_id(tracely_replay):
            tracely_replay()

        def test_unknown_case(tracely_replay):
            tracely_replay("lima")
        """
    )
    result = pytester.runpytest(*PLUGIN, "--tracely-store", store_url, "-k", "handwritten")
    result.assert_outcomes(passed=4, failed=2, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_needs_an_id _*",
            "tracely_replay() needs a case id, or a @pytest.mark.tracely_case('id') marker",
            "*_ test_unknown_case _*",
            "tracely: no case 'lima' in sqlite:*",
            "*short test summary*",
        ]
    )
    assert "During handling" not in result.stdout.str()


def test_nothing_happens_without_tracely_options(pytester: pytest.Pytester, store_url: str) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest(*PLUGIN, "-v", "--strict-markers")
    result.assert_outcomes(passed=1)
    assert "tracely::" not in result.stdout.str()


def test_a_bad_entrypoint_option_fails_without_stopping_other_tests(
    pytester: pytest.Pytester, store_url: str
) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest(
        *PLUGIN, "--tracely-store", store_url, "--tracely-entrypoint", f"{WEATHER}:nope", "-k", "x"
    )
    # every case has its own entrypoint, and a selection of cases does not hide the typo
    result.assert_outcomes(passed=0, failed=1, deselected=3)
    result.stdout.fnmatch_lines(
        [
            "*_ tracely [[]entrypoint] _*",
            "tracely: --tracely-entrypoint: entrypoint 'examples.weather_agent:nope'*"
            "has no attribute 'nope'*",
        ]
    )
    both = pytester.runpytest(*PLUGIN, "--tracely-store", store_url, "--tracely-cases", "x")
    assert both.ret == pytest.ExitCode.USAGE_ERROR


def test_verdicts_are_junit_properties(pytester: pytest.Pytester, store_url: str) -> None:
    pytester.runpytest(
        *PLUGIN,
        "--tracely-store",
        store_url,
        "--tracely-entrypoint",
        f"{WEATHER}:run",
        "--junitxml=out.xml",
    )
    root = ET.parse(pytester.path / "out.xml").getroot()
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in root.iter("testcase")
    }
    assert props["paris-weather"]["tracely.verdict"] == "PASS"
    assert props["paris-weather"]["tracely.case.version"] == "1"
    assert props["oslo-weather"]["tracely.verdict"] == "INCOMPLETE"


def test_registered_as_a_pytest11_entry_point() -> None:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib is Python 3.11+")
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["pytest11"] == {
        "tracely": "tracely_sdk.pytest_plugin"
    }


def test_a_failing_verdict_fails_the_hand_written_test(
    pytester: pytest.Pytester, store_url: str
) -> None:
    pytester.makepyfile(
        test_handwritten="""
        import pytest

        @pytest.mark.tracely_case("oslo-weather")
        def test_incomplete(tracely_replay):
            tracely_replay()

        @pytest.mark.tracely_case("paris-weather", entrypoint="examples.weather_agent:run_broken")
        def test_fail(tracely_replay):
            tracely_replay()

        @pytest.mark.tracely_case("oslo-weather")
        def test_inspected(tracely_replay):
            result = tracely_replay(check=False)
            assert result.verdict == "INCOMPLETE"
        """
    )
    result = pytester.runpytest(*PLUGIN, "--tracely-store", store_url, "-k", "handwritten")
    result.assert_outcomes(passed=1, failed=2, deselected=2)
    # the same verdict, reasons and diff as `tracely replay` prints
    result.stdout.fnmatch_lines(
        [
            "*_ test_incomplete _*",
            "INCOMPLETE oslo-weather v1 (Oslo weather)",
            "  - no recorded call for tools:get_weather*",
            "*_ test_fail _*",
            "FAIL paris-weather v1 (Paris weather)",
            "  - recorded call(s) never made: tools:get_weather, llm:local-weather-model",
            "  - output differs from the expected output",
            '    output: recorded "It\'s 18°C and cloudy in Paris." now '
            '"Let me check the weather in Paris."',
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_case_cannot_choose_code_outside_the_project(
    pytester: pytest.Pytester, capture: Any, store_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "executed"
    store = SQLiteStore(store_url.removeprefix("sqlite://"))
    try:
        trace_id = _record(capture, store, weather_agent.run, f"touch {marker}")
        store.promote(trace_id, name="evil", entrypoint="os:system", tags=["evil"])
    finally:
        store.close()
    pytester.makepyfile(
        test_handwritten="""
        def test_by_id(tracely_replay):
            tracely_replay("evil")
        """
    )
    result = pytester.runpytest(*PLUGIN, "--tracely-store", store_url, "--tracely-tag", "evil")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "ERRORED evil v1 (evil)",
            "  - entrypoint 'os:system' is not allowed, so it was not imported:*"
            "*tool.tracely* entrypoints in pyproject.toml*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["FAILED test_handwritten.py::test_by_id*", "FAILED *tracely::evil*"]
    )
    assert not marker.exists()


def test_no_case_selected_is_an_error(pytester: pytest.Pytester, store_url: str) -> None:
    result = pytester.runpytest(*PLUGIN, "--tracely-store", store_url, "--tracely-tag", "smok")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*tracely: no cases to replay: the store {store_url} holds 2 case(s), none "
            "selected by --tracely-tag smok. A run that replays nothing is not a pass:*"
        ]
    )
    allowed = pytester.runpytest(
        *PLUGIN, "--tracely-store", store_url, "--tracely-tag", "smok", "--tracely-allow-empty"
    )
    assert allowed.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_the_store_option_alone_collects_the_store_cases(
    pytester: pytest.Pytester, store_url: str, tmp_path: Path
) -> None:
    result = pytester.runpytest(*PLUGIN, "--tracely-store", store_url, "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*tracely::oslo-weather FAILED*", "*tracely::paris-weather PASSED*"]
    )

    empty = tmp_path / "empty.db"
    SQLiteStore(empty).close()
    empty_url = f"sqlite:///{empty.as_posix().lstrip('/')}"
    nothing = pytester.runpytest(*PLUGIN, "--tracely-store", empty_url)
    assert nothing.ret == pytest.ExitCode.USAGE_ERROR
    nothing.stderr.fnmatch_lines(
        [f"*tracely: no cases to replay: the store {empty_url} holds no cases*not a pass*"]
    )


def test_a_case_whose_agent_fails_to_import_fails_alone(
    pytester: pytest.Pytester, store_url: str, capture: Any
) -> None:
    store = SQLiteStore(store_url.removeprefix("sqlite://"))
    try:
        lisbon = _record(capture, store, weather_agent.run, "Lisbon")
        store.promote(lisbon, name="Lisbon weather", entrypoint="broken_agent:run")
    finally:
        store.close()
    pytester.makepyfile(
        broken_agent="raise RuntimeError('AGENT_CONFIG is not set')\n",
        test_plain="def test_one():\n    assert True\n",
    )
    result = pytester.runpytest(*PLUGIN, "--tracely-store", store_url, "-v")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_plain.py::test_one PASSED*",
            "*tracely::lisbon-weather FAILED*",
            "ERRORED lisbon-weather v1 (Lisbon weather)",
            "  - entrypoint 'broken_agent:run': importing 'broken_agent' failed: RuntimeError: "
            "AGENT_CONFIG is not set; the case was not run",
        ]
    )


@pytest.mark.parametrize("source", ["--tracely-cases", "--tracely-store"])
def test_cases_that_cannot_be_read_fail_without_stopping_other_tests(
    pytester: pytest.Pytester, store_url: str, tmp_path: Path, source: str
) -> None:
    missing = tmp_path / "nowhere"
    where = str(missing) if source == "--tracely-cases" else f"sqlite:///{missing}/tracely.db"
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest(*PLUGIN, source, where, "-k", "one")
    result.assert_outcomes(passed=1, failed=1)  # -k selects cases, never hides this
    result.stdout.fnmatch_lines(
        ["*_ tracely [[]cases] _*", f"tracely: no case could be read from the * {where}: *"]
    )


def test_an_openai_case_file_replays_with_no_key_beside_the_other_tests(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent builds ``openai.OpenAI()`` at import, which needs a key; strict replay gives it
    the placeholder ``tracely replay`` gives, and only while tracely imports and replays it."""
    import subprocess

    from examples.llm_server import serve
    from tracely_sdk.store import open_store

    root = Path(__file__).resolve().parents[2]
    url = f"sqlite:///{(tmp_path / 'tracely.db').as_posix().lstrip('/')}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELY_"))}
    with serve() as (server, base_url):
        env.update(
            PYTHONPATH=str(root),
            TRACELY_STORE=url,
            OTEL_TRACES_EXPORTER="none",
            OPENAI_BASE_URL=f"{base_url}/v1",
            OPENAI_API_KEY="test-key",
        )
        live = subprocess.run(
            [sys.executable, str(root / "examples" / "openai_quickstart.py"), "What is OTel?"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=tmp_path,
        )
        assert live.returncode == 0, live.stderr
        assert len(server.requests) == 1
    with open_store(url) as store:
        (recording,) = store.list_recordings()
        store.promote(
            recording.trace_id, name="openai hello", entrypoint="examples.openai_quickstart:run"
        )
        export_cases(store, pytester.path / "cases")

    pytester.makepyprojecttoml('[tool.tracely]\nentrypoints = ["examples.*"]\n')
    pytester.makepyfile(
        test_plain="""
        import os

        def test_the_environment_is_the_suites_own():
            assert "OPENAI_API_KEY" not in os.environ
        """
    )
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("TRACELY_STORE", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(root))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess(*PLUGIN, "--tracely-cases", "cases", "-v", timeout=120)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_plain.py::*PASSED*", "*tracely::openai-hello PASSED*"])


def test_the_docs_pytest_example_runs_as_written(pytester: pytest.Pytester, store_url: str) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "ci.md").read_text()
    section = readme[readme.index("**pytest.**") :]
    example = section[section.index("```python\n") + 10 :].partition("\n```")[0]
    pytester.makepyfile(test_readme=example)
    result = pytester.runpytest(*PLUGIN, "--tracely-store", store_url, "-k", "readme", "-v")
    result.assert_outcomes(passed=2, deselected=2)
