"""The static HTML report, opened from disk in Chromium: what a person sees and can do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tracely_sdk as tracely
from examples import weather_agent
from tests.browser._chromium import Watch
from tracely_otel import validate_bundle
from tracely_sdk._reports import write_html
from tracely_sdk._runner import ReplayCase, run_case

SCRIPT = "<script>alert(1)</script>"


def _recorded(capture: Any, fn: Any, *args: Any) -> dict[str, Any]:
    fn(*args)
    return validate_bundle(capture.last_bundle)


def _case(bundle: dict[str, Any], case_id: str, *tags: str) -> ReplayCase:
    agent = bundle["agent"]
    return ReplayCase(
        id=case_id,
        name=case_id.replace("-", " "),
        version=1,
        entrypoint=None,
        input=agent["input"],
        expected_output=agent.get("output"),
        bundle=bundle,
        tags=tags,
    )


def _hostile(city: str) -> str:
    with tracely.agent("hostile", input=city) as run:
        run.output = tracely.call_tool("lookup", lambda: SCRIPT, args={"q": city})
        return str(run.output)


@pytest.fixture
def report(capture: Any, tmp_path: Path) -> Path:
    """A report of three cases: a FAIL (changed prompt, no tool call), a PASS, and a FAIL
    whose recorded output is markup."""
    paris = _recorded(capture, weather_agent.run, "Paris")
    oslo = _recorded(capture, weather_agent.run, "Oslo")
    hostile = _recorded(capture, _hostile, "Rome")
    results = [
        run_case(_case(paris, "paris-weather", "weather", "smoke"), weather_agent.run_rewritten),
        run_case(_case(oslo, "oslo-weather", "weather"), weather_agent.run),
        run_case(_case(hostile, "hostile-output"), lambda city: _hostile(city) + "!"),
    ]
    assert [r.verdict for r in results] == ["FAIL", "PASS", "FAIL"]
    return write_html(results, tmp_path / "report.html", 0.5, store="sqlite:///ci.db")


def _visible_rows(page: Any) -> list[str]:
    rows = page.locator("tr[data-verdict]:visible td:first-child")
    return [t.strip() for t in rows.all_inner_texts()]


def test_the_summary_and_the_cases_table_filter_by_verdict_and_search(
    page: Any, report: Path
) -> None:
    page.goto(report.as_uri())
    counts = page.locator("ul.counts").inner_text()
    assert "3 cases" in counts and "FAIL 2" in " ".join(counts.split())
    assert "sqlite:///ci.db" in page.locator("dl.meta").first.inner_text()
    assert _visible_rows(page) == ["hostile-output", "oslo-weather", "paris-weather"]  # by id
    page.select_option("#verdict-filter", "FAIL")
    assert _visible_rows(page) == ["hostile-output", "paris-weather"]
    page.select_option("#verdict-filter", "")
    page.fill("#case-search", "smoke")
    assert _visible_rows(page) == ["paris-weather"]


def test_a_fail_case_shows_the_diverged_call_both_prompts_and_the_call_never_made(
    page: Any, report: Path
) -> None:
    page.goto(report.as_uri())
    page.get_by_role("link", name="paris-weather").click()
    case = page.locator("section.case-page:visible")
    assert case.count() == 1
    assert not page.locator("#index").is_visible()
    assert "FAIL" in case.locator("h2").inner_text()
    assert (
        "recorded call(s) never made: tools:get_weather" in case.locator("ul.reasons").inner_text()
    )
    steps = case.locator("li.step")
    assert steps.count() == 3
    diverged = steps.nth(0)
    assert diverged.get_attribute("data-outcome") == "diverged"
    assert diverged.locator(".badge").inner_text() == "diverged"
    differences = diverged.locator("table.diff")
    assert differences.locator("td.path").inner_text() == "messages[0].content"
    assert differences.get_by_text(weather_agent.SYSTEM, exact=True).is_visible()
    assert differences.get_by_text(weather_agent.REWRITTEN_SYSTEM, exact=True).is_visible()
    tool = steps.nth(1)
    assert tool.get_attribute("data-label") == "tools:get_weather"
    assert tool.locator(".replay .badge").inner_text() == "never made"
    assert "the replay never made this call" in tool.inner_text()
    assert 'recorded args: {"city":"Paris"}' in tool.locator(".recorded").inner_text()
    output = case.locator("table.diff").last
    assert "It's 18°C and cloudy in Paris." in output.inner_text()
    assert "Let me check the weather in Paris." in output.inner_text()
    page.get_by_role("link", name="← all cases").first.click()
    assert page.locator("#index").is_visible()


def test_a_pass_case_expands_to_the_same_timeline(page: Any, report: Path) -> None:
    page.goto(report.as_uri() + "#case-2")
    case = page.locator("#case-2")
    assert not case.locator("li.step").first.is_visible()
    case.locator("summary", has_text="Calls: the recording beside the replay").click()
    steps = case.locator("li.step")
    assert [steps.nth(i).get_attribute("data-outcome") for i in range(steps.count())] == [
        "served",
        "served",
        "served",
    ]
    assert steps.nth(0).is_visible()


def test_the_keyboard_reaches_a_case_and_its_calls(page: Any, report: Path) -> None:
    page.goto(report.as_uri())
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "case-search"
    page.keyboard.type("paris")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "paris-weather"
    page.keyboard.press("Enter")
    page.wait_for_url("**#case-3")
    assert page.locator("#case-3").is_visible()
    page.keyboard.press("j")
    focused = page.evaluate("document.activeElement.getAttribute('data-outcome')")
    assert focused == "diverged"
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.getAttribute('data-outcome')") == "never made"


def test_a_recorded_script_is_shown_as_text_and_never_runs(page: Any, report: Path) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(report.as_uri() + "#case-1")
    case = page.locator("#case-1")
    assert case.get_by_text(SCRIPT, exact=True).first.is_visible()
    assert page.locator("script").count() == 1  # the report's own
    page.get_by_role("link", name="← all cases").last.click()
    assert dialogs == []


def _many_calls(n: int) -> str:
    with tracely.agent("busy", input=n) as run:
        for i in range(n):
            tracely.call_tool("step", lambda i=i: {"i": i, "text": "x" * 400}, args={"i": i})
        run.output = "done"
        return "done"


def test_a_timeline_of_500_calls_loads_collapsed_and_stays_interactive(
    capture: Any, page: Any, tmp_path: Path
) -> None:
    bundle = _recorded(capture, _many_calls, 500)
    result = run_case(_case(bundle, "busy"), lambda n: _many_calls(n - 1))
    assert result.verdict == "FAIL"
    report = write_html([result], tmp_path / "big.html")
    page.goto(report.as_uri() + "#case-1")
    steps = page.locator("#case-1 li.step")
    assert steps.count() == 500
    last = steps.nth(499)
    assert last.get_attribute("data-outcome") == "never made"
    output = steps.nth(250).locator("details.value")
    assert output.count() == 1 and not output.locator("pre").is_visible()
    output.locator("summary").click()
    assert output.locator("pre").is_visible()
    assert '"i": 250' in output.locator("pre").inner_text()
    last.scroll_into_view_if_needed()
    assert last.is_visible()


# -- reading a case: conversation, waterfall, changed words, widths, the policy ---------------

OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


@pytest.fixture
def phone(browser: Any, watch: Watch) -> Any:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    p = context.new_page()
    watch.attach(p)
    p.set_default_timeout(15_000)
    yield p
    context.close()


@pytest.mark.parametrize("width", ["phone", "desktop"])
def test_the_index_and_a_fail_case_fit_the_width_of_a_phone_and_a_desktop(
    request: pytest.FixtureRequest, report: Path, width: str
) -> None:
    page = request.getfixturevalue("phone" if width == "phone" else "page")
    page.goto(report.as_uri())
    assert page.evaluate(OVERFLOW) == 0
    page.goto(report.as_uri() + "#case-3")
    case = page.locator("#case-3")
    assert case.locator("li.step").first.is_visible()
    assert page.evaluate(OVERFLOW) == 0
    bars = case.locator("ol.waterfall li.w-row")
    assert bars.count() == 3
    assert bars.evaluate_all("rows => rows.every(r => r.scrollWidth <= r.clientWidth)")
    tracks = bars.locator("svg.w-bar").evaluate_all(
        "bars => bars.map(b => { const r = b.getBoundingClientRect(); return [r.left, r.width]; })"
    )
    assert len({(round(x), round(w)) for x, w in tracks}) == 1  # one time axis for every call
    box = bars.nth(0).locator("svg.w-bar").bounding_box()
    assert box is not None and box["width"] > 100  # the bar has room at either width
    path = case.locator("table.diff td.path").first
    assert path.inner_text() == "messages[0].content"
    lines = "el => { const r = document.createRange(); r.selectNodeContents(el); return r.getClientRects().length; }"
    assert path.evaluate(lines) == 1  # the path reads on one line, never a letter a line
    columns = case.locator("li.step").first.evaluate(
        "el => getComputedStyle(el).gridTemplateColumns.split(' ').length"
    )
    assert columns == (1 if width == "phone" else 2)


def test_a_fail_case_reads_as_a_conversation_with_the_changed_words_marked(
    page: Any, report: Path
) -> None:
    page.goto(report.as_uri() + "#case-3")
    diverged = page.locator("#case-3 li.step").first
    turns = diverged.locator(".recorded ol.chat").first.locator("li.msg")
    assert turns.locator(".role").all_inner_texts() == ["SYSTEM", "USER"]  # shown in capitals
    assert turns.nth(0).locator(".said").inner_text() == weather_agent.SYSTEM
    assert "15 in · 7 out tokens" in diverged.locator(".step-title").first.inner_text()
    reply = diverged.locator("ol.chat[aria-label=reply]")
    assert "Let me check the weather in Paris." in reply.inner_text()
    assert "calls get_weather" in reply.inner_text()
    table = diverged.locator("table.diff")
    assert table.locator("del").all_inner_texts() == [
        "weather",
        "Use get_weather for current conditions",
    ]
    assert table.locator("ins").all_inner_texts() == ["terse", "Answer in one sentence"]
    deleted = table.locator("del").first.evaluate("el => getComputedStyle(el).textDecorationLine")
    assert deleted == "line-through"


def test_the_report_renders_and_works_under_its_policy_which_refuses_anything_else(
    page: Any, report: Path, watch: Watch
) -> None:
    page.goto(report.as_uri())
    policy = page.locator("meta[http-equiv=Content-Security-Policy]").get_attribute("content")
    assert "default-src 'none'" in policy and "script-src 'sha256-" in policy
    badge = page.locator("ul.counts .badge.v-FAIL")
    assert badge.evaluate("el => getComputedStyle(el).backgroundColor") == "rgb(207, 34, 46)"
    page.select_option("#verdict-filter", "PASS")  # the report's own script runs
    assert _visible_rows(page) == ["oslo-weather"]
    refused = page.evaluate(
        """() => new Promise(done => {
            document.addEventListener("securitypolicyviolation", e => done(e.violatedDirective));
            const s = document.createElement("script");
            s.textContent = "window.ran = true";
            document.body.appendChild(s);
        })"""
    )
    assert refused.startswith("script-src") and page.evaluate("window.ran") is None
    assert all("Content Security Policy" in e for e in watch.console_errors)
    watch.console_errors.clear()


def test_a_report_of_one_case_opens_on_it(capture: Any, page: Any, tmp_path: Path) -> None:
    paris = _recorded(capture, weather_agent.run, "Paris")
    result = run_case(_case(paris, "paris-weather"), weather_agent.run_rewritten)
    report = write_html([result], tmp_path / "one.html")
    page.goto(report.as_uri())
    case = page.locator("section.case-page")
    assert case.is_visible() and "paris-weather" in case.locator("h2").inner_text()
    assert page.locator("ul.counts").is_visible()
    assert page.locator("#verdict-filter").count() == 0


def test_a_value_cut_short_shows_the_whole_of_it_on_request(
    capture: Any, page: Any, tmp_path: Path
) -> None:
    def long_answer(city: str) -> str:
        with tracely.agent("long", input=city) as run:
            run.output = tracely.call_tool("essay", lambda: city * 12_000 + "THE END", args={})
            return str(run.output)

    bundle = _recorded(capture, long_answer, "Oslo")
    result = run_case(_case(bundle, "long"), lambda city: long_answer(city) + "!")
    assert result.verdict == "FAIL"
    report = write_html([result], tmp_path / "long.html")
    page.goto(report.as_uri())
    output = page.locator("details.value", has_text="output (48,007 characters)").first
    output.locator("summary").first.click()
    assert "THE END" not in output.locator("pre").inner_text()
    whole = output.locator("details.cut")
    whole.locator("summary").click()
    assert whole.locator("textarea").input_value().endswith("OsloTHE END")
