"""Regenerate docs/report-fail-case.png and docs/report-fail-case-phone.png, the README's
pictures of a FAIL case in the HTML report, on a desktop and on a phone (390 px wide).

A real run, every step its own ``tracely`` process against a throwaway store: the reference
agent answers about Paris live and is recorded, the recording is promoted to a case, and the
case is replayed through ``examples.weather_agent:run_rewritten`` (a changed system prompt, no
tool call). The report's FAIL case page is photographed in headless Chromium at each width.

    python scripts/screenshot.py [OUT.png]   (the phone picture is OUT-phone.png beside it)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser._chromium import Watch, chromium, find_chromium  # noqa: E402


def _tracely(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracely_sdk.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )


def make_report(workdir: Path) -> Path:
    """The HTML report of the failing replay, written by ``tracely replay --html``."""
    env = {
        **os.environ,
        "TRACELY_STORE": f"sqlite:///{(workdir / 'tracely.db').as_posix().lstrip('/')}",
        "OTEL_TRACES_EXPORTER": "none",
    }
    env.pop("GITHUB_STEP_SUMMARY", None)
    live = subprocess.run(
        [sys.executable, "-m", "examples.weather_agent", "Paris"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    trace_id = re.search(r"recorded trace ([0-9a-f]{32})", live.stderr)
    if trace_id is None:
        raise SystemExit(f"the agent's run was not recorded:\n{live.stderr}")
    promoted = _tracely(
        env,
        "cases",
        "promote",
        trace_id.group(1),
        "--name",
        "Paris weather",
        "--tag",
        "weather",
        "--entrypoint",
        "examples.weather_agent:run",
    )
    if promoted.returncode != 0:
        raise SystemExit(promoted.stderr)
    report = workdir / "report.html"
    replayed = _tracely(
        env,
        "replay",
        "--entrypoint",
        "examples.weather_agent:run_rewritten",
        "--html",
        str(report),
    )
    if replayed.returncode != 1 or not report.exists():
        raise SystemExit(f"the replay should fail and write a report:\n{replayed.stderr}")
    return report


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "docs" / "report-fail-case.png"
    executable, reason = find_chromium()
    if executable is None:
        print(reason, file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        report = make_report(Path(tmp))
        watch = Watch()
        phone = out.with_name(out.stem + "-phone" + out.suffix)
        with chromium(executable) as browser:
            for path, width in ((out, 1100), (phone, 390)):
                page = browser.new_page(viewport={"width": width, "height": 900})
                watch.attach(page)
                page.goto(report.as_uri() + "#case-1")
                page.locator("#case-1 li.step").first.wait_for()
                path.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(path), full_page=True)
                page.close()
        if watch.outside or watch.console_errors:
            print(f"the page misbehaved: {watch}", file=sys.stderr)
            return 1
    for path in (out, phone):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
