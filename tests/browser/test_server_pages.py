"""The server's pages in Chromium: sign in once, click through to a FAIL case, act on a trace."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server._support import ServerProcess

import tracely_sdk as tracely
from examples import weather_agent
from tests.browser._chromium import Watch
from tracely_otel import validate_bundle
from tracely_sdk._reports import run_of
from tracely_sdk._runner import run_case
from tracely_sdk.store import Recording, SQLiteStore

SCRIPT = "<script>alert(1)</script>"


def _hostile(city: str) -> str:
    with tracely.agent("hostile", input=city) as run:
        run.output = tracely.call_tool("lookup", lambda: SCRIPT, args={"q": city})
        return str(run.output)


class Seeded:
    """A store with the reference agent's traces, a case made from one, and a failed run."""

    def __init__(self, capture: Any, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.url = f"sqlite:///{directory / 'tracely.db'}"
        store = SQLiteStore(directory / "tracely.db")
        try:
            self.paris = self._record(capture, store, weather_agent.run, "Paris")
            self.paris_again = self._record(capture, store, weather_agent.run, "Paris")
            self.oslo = self._record(capture, store, weather_agent.run, "Oslo")
            self.hostile = self._record(capture, store, _hostile, "Rome")
            store.promote(self.paris, case_id="paris-weather", name="Paris weather", tags=["smoke"])
            case = store.get_case("paris-weather")
            result = run_case(case, weather_agent.run_rewritten)
            assert result.verdict == "FAIL"
            self.run_id = run_of([result], started_at=1_700_000_000_000_000_000).id
            store.save_run(run_of([result], started_at=1_700_000_000_000_000_000))
            self.run_id = store.list_runs()[0].id
        finally:
            store.close()

    @staticmethod
    def _record(capture: Any, store: SQLiteStore, fn: Any, city: str) -> str:
        fn(city)
        bundle = validate_bundle(capture.last_bundle)
        store.put_recording(Recording.from_bundle(bundle))
        return str(bundle["trace_id"])


@pytest.fixture
def seeded(capture: Any, tmp_path: Path) -> Seeded:
    return Seeded(capture, tmp_path / "store")


@pytest.fixture
def server(seeded: Seeded, tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "server", store=seeded.url, args=["--rate-limit", "0"])
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def _sign_in(page: Any, server: ServerProcess, token: str) -> None:
    page.goto(server.url + "/ui/cases")
    page.wait_for_url(re.compile(r"/ui/login\?next="))
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/ui/cases$"))


def test_signing_in_sets_an_httponly_strict_cookie_and_a_bad_token_is_refused(
    page: Any, server: ServerProcess, watch: Watch
) -> None:
    watch.expected_statuses = [401, 401]
    page.goto(server.url + "/ui/runs")
    page.get_by_label("Token").fill("not-a-token")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").inner_text() == "that token is not valid"
    page.get_by_label("Token").fill(server.tokens.ingest)
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").inner_text() == "that token may not read"
    page.get_by_label("Token").fill(server.tokens.read)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/ui/runs$"))
    (cookie,) = page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    assert server.tokens.read not in cookie["value"]
    answer = page.request.get(server.url + "/ui/runs")
    csp = answer.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(r"/ui/login\?done=signed-out$"))
    assert page.get_by_role("status").inner_text() == "Signed out."
    assert page.context.cookies() == []


def test_clicking_through_to_a_fail_case_of_a_run(
    page: Any, server: ServerProcess, seeded: Seeded
) -> None:
    _sign_in(page, server, server.tokens.read)
    page.get_by_role("link", name="Runs").click()
    page.get_by_role("link", name=seeded.run_id).click()
    assert "FAIL 1" in " ".join(page.locator("ul.counts").inner_text().split())
    page.get_by_role("link", name="paris-weather").click()
    page.wait_for_url(re.compile(rf"/ui/runs/{seeded.run_id}/cases/1$"))
    steps = page.locator("li.step")
    assert [steps.nth(i).get_attribute("data-outcome") for i in range(3)] == [
        "diverged",
        "never made",
        "never made",
    ]
    diverged = steps.nth(0).locator("table.diff")
    assert diverged.get_by_text(weather_agent.SYSTEM, exact=True).is_visible()
    assert diverged.get_by_text(weather_agent.REWRITTEN_SYSTEM, exact=True).is_visible()
    assert steps.nth(1).get_attribute("data-label") == "tools:get_weather"
    assert "the replay never made this call" in steps.nth(1).inner_text()


def test_the_keyboard_reaches_a_case_and_its_calls(
    page: Any, server: ServerProcess, seeded: Seeded
) -> None:
    _sign_in(page, server, server.tokens.read)
    page.goto(f"{server.url}/ui/runs/{seeded.run_id}")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "case-search"
    page.keyboard.type("paris")
    page.keyboard.press("Tab")  # the Filter button
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "paris-weather"
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/cases/1$"))
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.dataset.outcome") == "diverged"


def test_a_trace_shows_its_calls_in_order_and_recorded_markup_as_text(
    page: Any, server: ServerProcess, seeded: Seeded
) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    _sign_in(page, server, server.tokens.read)
    page.get_by_role("link", name="Traces").click()
    links = page.locator("table a.mono")
    assert links.count() == 4
    assert links.first.inner_text() == seeded.hostile  # newest first
    links.first.click()
    page.wait_for_url(re.compile(rf"/ui/traces/{seeded.hostile}$"))
    assert page.locator("li.step").count() == 1
    assert page.locator("li.step").first.get_attribute("data-outcome") == "recorded"
    assert page.get_by_text(SCRIPT).first.is_visible()
    assert page.locator("main form:not(.signout)").count() == 0  # a reader gets no forms
    assert dialogs == []


def test_a_writer_promotes_a_trace_and_a_refused_recapture_shows_the_inputs(
    page: Any, server: ServerProcess, seeded: Seeded, watch: Watch
) -> None:
    watch.expected_statuses = [409]
    _sign_in(page, server, server.tokens.write)
    page.goto(f"{server.url}/ui/traces/{seeded.paris_again}")
    page.get_by_label("name").fill("Paris, again")
    page.get_by_label("case id").fill("paris-again")
    page.get_by_label("tags").fill("smoke, weather")
    page.get_by_role("button", name="Promote").click()
    page.wait_for_url(re.compile(r"/ui/cases/paris-again\?done=promoted$"))
    assert "Promoted" in page.get_by_role("status").inner_text()

    page.get_by_label("trace id").fill(seeded.oslo)
    page.get_by_role("button", name="Recapture from this trace").click()
    assert page.get_by_role("alert").is_visible()
    refused = page.locator("p.error", has_text="Refused")
    assert refused.is_visible()
    table = page.locator("table.diff").last
    assert "input.args[0]" in table.inner_text()
    assert "Paris" in table.inner_text() and "Oslo" in table.inner_text()

    page.get_by_label("trace id").fill(seeded.paris)
    page.get_by_role("button", name="Recapture from this trace").click()
    page.wait_for_url(re.compile(r"\?done=recaptured$"))
    assert "Version 1 → version 2" in page.content()


def test_a_write_without_the_pages_csrf_value_or_from_elsewhere_is_refused(
    page: Any, server: ServerProcess, seeded: Seeded
) -> None:
    _sign_in(page, server, server.tokens.write)
    url = f"{server.url}/ui/traces/{seeded.oslo}/promote"
    answer = page.request.post(url, form={"name": "x", "csrf": "forged"})
    assert answer.status == 403 and "the form has expired" in answer.text()
    page.goto(f"{server.url}/ui/traces/{seeded.oslo}")
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    answer = page.request.post(
        url, form={"name": "x", "csrf": csrf}, headers={"Origin": "https://evil.example"}
    )
    assert answer.status == 403 and "another site" in answer.text()
    reader = server.request(
        "POST",
        f"/ui/traces/{seeded.oslo}/promote",
        f"name=x&csrf={csrf}".encode(),
        token=None,
        content_type="application/x-www-form-urlencoded",
    )
    assert reader.status == 303 and "/ui/login" in reader.headers["location"]


def test_a_trace_of_500_calls_loads_collapsed_and_stays_interactive(
    capture: Any, page: Any, server: ServerProcess, seeded: Seeded
) -> None:
    from tests.browser.test_report_page import _many_calls

    store = SQLiteStore(Path(seeded.url.removeprefix("sqlite:///")))
    try:
        busy = Seeded._record(capture, store, _many_calls, 500)  # type: ignore[arg-type]
    finally:
        store.close()
    _sign_in(page, server, server.tokens.read)
    page.goto(f"{server.url}/ui/traces/{busy}")
    steps = page.locator("li.step")
    assert steps.count() == 500
    output = steps.nth(321).locator("details.value")
    assert not output.locator("pre").is_visible()
    output.locator("summary").click()
    assert '"i": 321' in output.locator("pre").inner_text()
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.dataset.outcome") == "recorded"


def test_a_sandboxed_frame_elsewhere_cannot_sign_the_visitor_in(
    page: Any, server: ServerProcess, watch: Watch
) -> None:
    # The attack: a page on another site frames a sandboxed form (its origin is opaque, so the
    # browser sends "Origin: null") that posts the attacker's own token to the sign-in form and
    # navigates the whole tab there; the visitor would then work as the attacker, unaware.
    watch.expected_statuses = [403]
    frame = (
        f"<form method='post' action='{server.url}/ui/login' target='_top'>"
        f"<input name='token' value='{server.tokens.write}'>"
        "<input name='next' value='/ui/cases'></form>"
        "<script>document.forms[0].submit()</script>"
    )
    page.set_content(
        '<iframe sandbox="allow-forms allow-scripts allow-top-navigation" '
        f'srcdoc="{frame}"></iframe>'
    )
    page.wait_for_url(re.compile(re.escape(server.url) + r"/ui/"))
    assert page.context.cookies() == [], "the attacker's token signed the visitor in"
    assert page.url == f"{server.url}/ui/login"
    assert "a form from another site was refused" in page.content()


OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


@pytest.mark.parametrize("width", [390, 1280])
def test_a_trace_a_case_and_a_run_fit_the_width_of_a_phone_and_a_desktop(
    browser: Any, watch: Watch, server: ServerProcess, seeded: Seeded, width: int
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 844})
    page = context.new_page()
    watch.attach(page)
    page.set_default_timeout(15_000)
    try:
        _sign_in(page, server, server.tokens.read)
        for path in (
            f"/ui/traces/{seeded.paris}",
            "/ui/cases/paris-weather",
            f"/ui/runs/{seeded.run_id}",
            f"/ui/runs/{seeded.run_id}/cases/1",
            "/ui/traces",
            "/ui/cases",
            "/ui/runs",
        ):
            page.goto(server.url + path)
            assert page.evaluate(OVERFLOW) == 0, path
        page.goto(f"{server.url}/ui/traces/{seeded.paris}")
        rows = page.locator("ol.waterfall li.w-row")
        assert rows.locator("code").all_inner_texts() == [
            "llm:local-weather-model",
            "tools:get_weather",
            "llm:local-weather-model",
        ]
        assert "43 in · 13 out tokens" in page.locator("section.waterfall h3").inner_text()
        assert rows.evaluate_all("rows => rows.every(r => r.scrollWidth <= r.clientWidth)")
        first = page.locator("li.step").first
        assert first.locator("ol.chat li.msg .role").first.inner_text() == "SYSTEM"
    finally:
        context.close()


def test_the_raw_recording_behind_a_trace_page_is_one_click_away(
    page: Any, server: ServerProcess, seeded: Seeded
) -> None:
    _sign_in(page, server, server.tokens.read)
    page.goto(f"{server.url}/ui/traces/{seeded.hostile}")
    with page.expect_response(re.compile(r"/raw$")) as answer:
        page.get_by_role("link", name="the recording as JSON").click()
    response = answer.value
    assert response.headers["content-type"] == "application/json"
    assert "default-src 'none'" in response.headers["content-security-policy"]
    bundle = response.json()
    assert bundle["trace_id"] == seeded.hostile
    assert bundle["tools"]["lookup"][0]["output"] == SCRIPT
    signed_out = server.request("GET", f"/ui/traces/{seeded.hostile}/raw", token=None)
    assert signed_out.status == 303 and "/ui/login" in signed_out.headers["location"]
