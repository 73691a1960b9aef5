"""The store's pages as plain functions: lists paginated, one case, one trace, one run."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.sdk.store._helpers import make_recording, make_run, trace_id
from tracely_sdk._html._views import PageError, Pages, Viewer
from tracely_sdk.errors import NotFound
from tracely_sdk.store import SQLiteStore

SCRIPT = "<script>alert(1)</script>"
READER = Viewer()
WRITER = Viewer(csrf="token-for-forms")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "t.db")
    for n in range(60):
        s.put_recording(make_recording(n, started_at=1_700_000_000_000_000_000 + n * 10**9))
    s.put_recording(make_recording("hostile", output=SCRIPT, tools=2))
    s.put_recording(make_recording("v2", output="Rainy in Paris"))
    s.promote(trace_id(3), case_id="paris", name="Paris <weather>", tags=["smoke", "<b>"])
    s.recapture("paris", trace_id("v2"), note="the forecast changed")
    s.promote(trace_id(4), case_id="other", name="Other", tags=["slow"])
    s.save_run(make_run(1, cases=1, case_id="paris"))
    yield s
    s.close()


def test_traces_are_listed_newest_first_a_page_at_a_time(store: SQLiteStore) -> None:
    pages = Pages(store)
    first = pages.traces({}, READER)
    assert first.count('class="row"') == 50
    assert first.index(trace_id(59)) < first.index(trace_id(58))
    assert 'href="/ui/traces?offset=50"' in first and "next →" in first
    second = pages.traces({"offset": "50"}, READER)
    assert second.count('class="row"') == 12
    assert 'href="/ui/traces"' in second and "next →" not in second
    for bad in ("-1", "²", "1" * 10):
        with pytest.raises(PageError, match="offset must be a whole number"):
            pages.traces({"offset": bad}, READER)


def test_a_trace_shows_its_calls_in_order_escaped(store: SQLiteStore) -> None:
    shown = Pages(store).trace(trace_id("hostile"), READER)
    assert shown.count('data-outcome="recorded"') == 3
    assert shown.index("tools:get_weather #1 (seq 0)") < shown.index("tools:get_weather #2 (seq 1)")
    assert shown.index("tools:get_weather #2 (seq 1)") < shown.index("llm:gpt-4o #1 (seq 2)")
    assert SCRIPT not in shown and "&lt;script&gt;alert(1)&lt;/script&gt;" in shown
    assert "<form" not in shown  # a reader gets no forms
    with_form = Pages(store).trace(trace_id("hostile"), WRITER)
    assert 'action="/ui/traces/' + trace_id("hostile") + '/promote"' in with_form
    assert 'name="csrf" value="token-for-forms"' in with_form
    with pytest.raises(NotFound):
        Pages(store).trace(trace_id("never"), READER)


def test_cases_filter_by_tag_and_by_verdict_in_the_latest_run(store: SQLiteStore) -> None:
    pages = Pages(store)
    listed = pages.cases({}, READER)
    assert listed.count('class="row"') == 2 and "Paris &lt;weather&gt;" in listed
    assert 'href="/ui/cases?tag=%3Cb%3E"' in listed
    assert pages.cases({"tag": "slow"}, READER).count('class="row"') == 1
    failing = pages.cases({"verdict": "FAIL"}, READER)
    assert failing.count('class="row"') == 1 and 'href="/ui/cases/paris"' in failing
    assert pages.cases({"verdict": "FAIL", "tag": "slow"}, READER).count('class="row"') == 0
    paged = Pages(store, page_size=1)
    assert 'href="/ui/cases?offset=1"' in paged.cases({}, READER)
    assert 'href="/ui/cases/other"' not in paged.cases({"offset": "1"}, READER)
    with pytest.raises(PageError, match="verdict must be one of"):
        pages.cases({"verdict": "MAYBE"}, READER)


def test_a_case_shows_its_versions_and_the_difference_between_two(store: SQLiteStore) -> None:
    pages = Pages(store)
    shown = pages.case("paris", {}, READER)
    assert "Version 1 → version 2" in shown
    assert "the forecast changed" in shown
    assert "expected_output" in shown
    assert "<del>Sunny</del> in Paris" in shown and "<ins>Rainy</ins> in Paris" in shown
    assert shown.count('data-outcome="recorded"') == 2
    same = pages.case("paris", {"a": "2", "b": "2"}, READER)
    assert same.count("the same in both versions") == 2
    for bad in ("7", "²"):
        with pytest.raises(PageError, match="must be one of the case's versions"):
            pages.case("paris", {"a": bad}, READER)
    conflict = pages.case("paris", {}, WRITER, conflict=({"args": ["Paris"]}, {"args": ["Oslo"]}))
    assert "Refused: the trace was called with a different input" in conflict
    assert "input.args[0]" in conflict and "Oslo" in conflict


def test_a_run_and_each_of_its_cases(store: SQLiteStore) -> None:
    pages = Pages(store)
    run_id = store.list_runs()[0].id
    listed = pages.runs({}, READER)
    assert f'href="/ui/runs/{run_id}"' in listed and "1 failed" in listed
    shown = pages.run(run_id, {}, READER)
    assert f'data-href="/ui/runs/{run_id}/cases/1"' in shown and 'data-verdict="FAIL"' in shown
    assert 'data-verdict="FAIL"' not in pages.run(run_id, {"verdict": "PASS"}, READER)
    assert 'data-verdict="FAIL"' in pages.run(run_id, {"q": "PARIS"}, READER)
    assert 'data-verdict="FAIL"' not in pages.run(run_id, {"q": "lisbon"}, READER)
    case = pages.run_case(run_id, "1", READER)
    assert "served despite a different input: llm:m" in case
    for bad in ("2", "0", "²"):
        with pytest.raises(PageError, match="has cases 1 to 1"):
            pages.run_case(run_id, bad, READER)


@pytest.fixture
def recorded(capture: Any, tmp_path: Path) -> Iterator[tuple[SQLiteStore, list[str]]]:
    """A store with the reference agent's runs for Paris: fixed, fixed again, broken."""
    from examples import weather_agent
    from tracely_otel import validate_bundle
    from tracely_sdk.store import Recording

    s = SQLiteStore(tmp_path / "r.db")
    traces = []
    for fn in (weather_agent.run, weather_agent.run, weather_agent.run_broken):
        fn("Paris")
        bundle = validate_bundle(capture.last_bundle)
        s.put_recording(Recording.from_bundle(bundle))
        traces.append(str(bundle["trace_id"]))
    yield s, traces
    s.close()


def test_two_versions_differ_by_what_was_recorded_never_by_ids_checksums_or_times(
    recorded: tuple[SQLiteStore, list[str]],
) -> None:
    store, (fixed, again, broken) = recorded
    store.promote(fixed, case_id="paris", name="Paris")
    store.recapture("paris", again, note="the same run again")
    pages = Pages(store)
    same = pages.case("paris", {}, READER)
    assert "Version 1 → version 2" in same
    assert same.count("the same in both versions") == 2
    store.recapture("paris", broken, note="the silent failure")
    changed = pages.case("paris", {"a": "2", "b": "3"}, READER)
    assert "<th>version 2</th><th>version 3</th>" in changed
    table = changed[changed.index("<h3>Recording</h3>") :]
    paths = re.findall(r'<td class="path">([^<]*)</td>', table)
    assert "bundle.tools.get_weather" in paths and "bundle.agent.output" in paths
    for internal in ("checksum", "span_id", "started_at", "ended_at", "trace_id"):
        assert not [p for p in paths if internal in p], internal


def test_a_trace_page_draws_its_waterfall_and_links_to_its_whole_recording(
    recorded: tuple[SQLiteStore, list[str]],
) -> None:
    store, (fixed, _, _) = recorded
    pages = Pages(store)
    shown = pages.trace(fixed, READER)
    assert shown.count('<li class="w-row">') == 3
    assert '<ol class="timeline alone"' in shown  # a recording alone: one column, no replay
    assert 'class="replay"' not in shown
    assert "43 in · 13 out tokens" in shown
    assert "15 in · 7 out tokens" in shown  # on the call itself
    assert f'href="/ui/traces/{fixed}/raw"' in shown
    whole = orjson.loads(pages.trace_json(fixed))
    assert whole == store.get_recording(fixed).bundle
    store.promote(fixed, case_id="paris", name="Paris")
    case = pages.case("paris", {}, READER)
    assert case.count('<li class="w-row">') == 3 and 'href="/ui/cases/paris/raw"' in case
    assert orjson.loads(pages.case_json("paris"))["bundle"] == store.get_case("paris").bundle
    with pytest.raises(NotFound):
        pages.trace_json(trace_id("never"))


def test_a_calls_long_values_are_cut_with_a_link_to_each_whole_value(tmp_path: Path) -> None:
    from tests.sdk.store._helpers import make_bundle
    from tracely_otel._bundle import seal
    from tracely_sdk.store import Recording

    said = SCRIPT * 1_000  # 25,000 characters
    bundle = make_bundle(trace_id("long"))
    del bundle["checksum"]
    bundle["llm"]["gpt-4o"][0]["input"] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": said},
    ]
    bundle["llm"]["gpt-4o"][0]["output"] = said
    store = SQLiteStore(tmp_path / "t.db")
    store.put_recording(Recording.from_bundle(seal(bundle)))
    pages = Pages(store)
    tid = trace_id("long")

    shown = pages.trace(tid, READER)
    assert SCRIPT not in shown and len(shown) < 40_000  # 50,000 characters recorded, escaped
    assert f'href="/ui/traces/{tid}/calls/2/input"' in shown
    assert f'href="/ui/traces/{tid}/calls/2/output"' in shown
    assert f'href="/ui/traces/{tid}/calls/1/input"' not in shown  # short: shown whole
    assert pages.call_value("traces", tid, "2", "output") == (
        said.encode(),
        "text/plain; charset=utf-8",
    )
    body, kind = pages.call_value("traces", tid, "2", "input")
    assert kind == "application/json" and orjson.loads(body)[1]["content"] == said
    assert orjson.loads(pages.call_value("traces", tid, "1", "input")[0]) == {"city": "Paris"}
    for number, part, status in (("3", "input", 404), ("0", "output", 404), ("1", "error", 404)):
        with pytest.raises(PageError) as info:
            pages.call_value("traces", tid, number, part)
        assert info.value.status == status
    with pytest.raises(PageError, match="a call is a number"):
        pages.call_value("traces", tid, "²", "input")
    with pytest.raises(NotFound):
        pages.call_value("traces", trace_id("none"), "1", "input")
    store.close()
