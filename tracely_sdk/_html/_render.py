"""The one renderer of replay results and recordings as HTML, for the static report and the
server's pages alike: the timeline of a case (each recorded call beside what the replay did
with it), a case's page, the cases table, a run's summary, and the page around them.

Every value shown comes from a recording or a run and is untrusted: it goes through
:mod:`tracely_sdk._html._markup`, which escapes it. Large values are collapsed into a
``<details>`` element and cut to :data:`MAX_SHOWN` characters, so a page with hundreds of calls
stays light.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from tracely_sdk._faults import KINDS
from tracely_sdk._html._assets import CSS, JS
from tracely_sdk._html._calls import call_facts, conversation_view, reply_view, waterfall_view
from tracely_sdk._html._diffs import differences_view
from tracely_sdk._html._markup import Html, Node, join, tag
from tracely_sdk._html._values import MAX_SHOWN, cut, value_view

__all__ = [
    "Full",
    "MAX_SHOWN",
    "PARTS",
    "VERDICTS",
    "case_page",
    "cases_table",
    "differences_view",
    "matches",
    "page",
    "REPORT_CSP",
    "run_summary",
    "timeline_view",
    "value_view",
]

VERDICTS = ("PASS", "FAIL", "INCOMPLETE", "ERRORED", "LENIENT", "NOT_RUN")
_OUTCOME_TEXT = {
    "served": "served",
    "diverged": "diverged",
    "missed": "missed",
    "live": "ran live",
    "never made": "never made",
    "recorded": "recorded",
}


def _badge(outcome: str) -> Html:
    css = "o-" + outcome.replace(" ", "-")
    return tag("span", _OUTCOME_TEXT.get(outcome, outcome), class_=f"badge {css}")


# Where the whole of a value cut short is: one address for every value (the whole recording's
# JSON), or, given a call's position among the steps shown and which of its values ("input",
# "output", "error"), that one value's.
Full = str | Callable[[int, str], str] | None
# What a recorded call's value is called in the address of its whole text.
PARTS = {"recorded": "input", "output": "output", "error": "error"}


def _recorded_value(
    step: Mapping[str, Any], key: str, field: str, full: str | None, limit: int
) -> Html:
    """A recorded call's input (an LLM's as a conversation), args, output (an LLM's reply as a
    message, its whole value below it) or error."""
    value = step[key]
    llm = str(step.get("label", "")).startswith("llm:")
    if key == "recorded":
        chat = conversation_view(value, field, full=full, limit=limit) if llm else None
        if chat is not None:
            return tag("div", f"recorded {field}:", chat)
        return tag("div", f"recorded {field}: ", value_view(value, field, full=full, limit=limit))
    reply = reply_view(value, limit) if llm and key == "output" else None
    if reply is not None:
        return tag(
            "div",
            "recorded reply:",
            reply,
            tag(
                "details",
                tag("summary", "the whole output"),
                value_view(value, key, full=full, limit=limit),
            ),
        )
    return tag("div", f"recorded {key}: ", value_view(value, key, full=full, limit=limit))


def _step(
    step: Any, full: Full = None, *, alone: bool = False, limit: int = MAX_SHOWN, at: int = 0
) -> Html:
    if not isinstance(step, Mapping):  # "… [N more items]" in a stored run
        return tag("li", tag("div", str(step), class_="muted"), class_="step")
    outcome = str(step.get("outcome") or "")
    field = step.get("field") or (
        "input" if str(step.get("label", "")).startswith("llm:") else "args"
    )
    seq = step.get("seq")
    whole = None if callable(full) else full  # a replayed value is in no recorded call
    recorded: list[Node] = []
    if seq is not None:
        recorded.append(
            tag(
                "div",
                tag("span", f"#{seq}", class_="muted"),
                tag("code", step.get("entry") or step.get("label")),
                call_facts(step),
                class_="step-title",
            )
        )
        recorded += [
            _recorded_value(
                step, key, field, full(at, PARTS[key]) if callable(full) else full, limit
            )
            for key in ("recorded", "error", "output")
            if key in step
        ]
    else:
        recorded.append(tag("div", "not in the recording", class_="muted"))
    if alone:
        return tag(
            "li",
            tag("div", recorded, class_="recorded"),
            class_=f"step o-{outcome.replace(' ', '-')}",
            data_outcome=outcome,
            data_label=step.get("label"),
            tabindex="-1",
        )
    replay: list[Node] = [
        tag(
            "div",
            _badge(outcome),
            tag("code", step.get("label")) if seq is None else None,
            tag("span", f"call {step['call']}", class_="muted") if step.get("call") else None,
            class_="step-title",
        )
    ]
    if outcome == "never made":
        replay.append(tag("div", "the replay never made this call"))
    elif outcome == "served":
        replay.append(tag("div", f"served from the recording with the recorded {field}"))
    elif outcome == "diverged":
        replay.append(tag("div", f"served from the recording although its {field} differs:"))
        replay.append(
            differences_view(step.get("differences") or (), int(step.get("omitted") or 0))
        )
        if "actual" in step:
            replay.append(
                tag("div", f"called with {field}: ", value_view(step["actual"], field, full=whole))
            )
    elif outcome in ("missed", "live"):
        if step.get("message"):
            replay.append(tag("div", step["message"], class_="error"))
        if outcome == "live":
            replay.append(tag("div", "not in the recording: ran live"))
        if "actual" in step:
            replay.append(
                tag("div", f"called with {field}: ", value_view(step["actual"], field, full=whole))
            )
    return tag(
        "li",
        tag("div", recorded, class_="recorded"),
        tag("div", replay, class_="replay"),
        class_=f"step o-{outcome.replace(' ', '-')}",
        data_outcome=outcome,
        data_label=step.get("label"),
        tabindex="-1",
    )


def timeline_view(
    steps: Sequence[Any],
    *,
    right: str | None = "Replay",
    full: Full = None,
    limit: int = MAX_SHOWN,
) -> Html:
    """The calls in ``seq`` order: the recording on the left, what the replay did on the right
    (headed ``right``; None: a recording alone, one column). ``full`` is where the whole of a
    recorded value cut short (past ``limit`` characters) can be read (see :data:`Full` and
    :func:`~tracely_sdk._html._values.value_view`)."""
    if not steps:
        return tag("p", "No tool or LLM calls were recorded.", class_="muted")
    if right is None:
        return tag(
            "ol",
            [_step(s, full, alone=True, limit=limit, at=i) for i, s in enumerate(steps)],
            class_="timeline alone",
            aria_label="calls in recorded order",
        )
    return tag(
        "ol",
        tag("li", tag("div", "Recording"), tag("div", right), class_="head", aria_hidden="true"),
        [_step(s, full, limit=limit, at=i) for i, s in enumerate(steps)],
        class_="timeline",
        aria_label="calls in recorded order",
    )


def verdict_badge(verdict: Any) -> Html:
    return tag("span", verdict, class_=f"badge v-{verdict}")


def faults_view(rows: Sequence[Any]) -> Html:
    """A case's robustness runs (``replay --faults``): each faulted call / each fault kind,
    with the verdict, what the agent did next, and why."""
    rows = [r for r in rows if isinstance(r, Mapping)]
    kinds = [k for k in KINDS if any(r.get("fault") == k for r in rows)]
    calls: dict[str, dict[str, Mapping[str, Any]]] = {}
    for row in rows:
        calls.setdefault(str(row.get("call")), {})[str(row.get("fault"))] = row

    def cell(row: Mapping[str, Any] | None) -> Html:
        if row is None:
            return tag("td", "")
        verdict = str(row.get("verdict"))
        if verdict == "SKIPPED":
            return tag("td", "—", title="; ".join(str(x) for x in row.get("reasons") or ()))
        why = row.get("reasons") or ()
        return tag(
            "td",
            verdict_badge(verdict),
            tag("div", row.get("next"), class_="muted"),
            tag("ul", [tag("li", r) for r in why], class_="reasons") if why else None,
        )

    return join(
        tag("h3", "Robustness: each recorded call failing"),
        tag(
            "table",
            tag("thead", tag("tr", tag("th", "Call"), [tag("th", k) for k in kinds])),
            tag(
                "tbody",
                [
                    tag("tr", tag("td", tag("code", call)), [cell(by.get(k)) for k in kinds])
                    for call, by in calls.items()
                ],
            ),
            class_="faults",
        ),
    )


def case_page(case: Mapping[str, Any]) -> Html:
    """One case of a run (a JSON report case or a stored run's): why, the timeline, the output."""
    verdict = case.get("verdict")
    version = case.get("version")
    parts: list[Node] = [
        tag(
            "h2",
            verdict_badge(verdict),
            " ",
            case.get("case_id"),
            f" v{version}" if version is not None else None,
            tag("span", f" — {case['name']}", class_="muted") if case.get("name") else None,
        )
    ]
    facts = [
        ("tags", ", ".join(str(t) for t in case.get("tags") or ()) or None),
        ("entrypoint", case.get("entrypoint")),
        ("agent version", case.get("agent_version")),
        ("duration", f"{float(case.get('duration_s') or 0):.3f}s"),
        ("replay trace", case.get("trace_id")),
    ]
    parts.append(tag("dl", [[tag("dt", k), tag("dd", v)] for k, v in facts if v], class_="meta"))
    reasons = case.get("reasons") or ()
    if reasons:
        parts += [tag("h3", "Why"), tag("ul", [tag("li", r) for r in reasons], class_="reasons")]
    scenario = case.get("scenario")
    if isinstance(scenario, Mapping):
        parts.append(scenario_view(scenario))
        return join(parts)
    steps = case.get("timeline") or ()
    heading = f"Calls: the recording beside the replay ({len(steps)})"
    calls = join(waterfall_view(steps, title="The recorded run"), timeline_view(steps))
    if verdict == "PASS":
        parts.append(tag("details", tag("summary", heading), calls))
    else:
        parts += [tag("h3", heading), calls]
    differences = case.get("output_differences") or ()
    if differences or (verdict != "PASS" and "expected_output" in case):
        parts.append(tag("h3", "Output: expected vs actual"))
        if differences:
            parts.append(differences_view(differences, labels=("expected", "actual")))
        parts.append(tag("div", "expected: ", value_view(case.get("expected_output"), "expected")))
        error = case.get("error")
        if isinstance(error, Mapping) and case.get("output") is None:
            raised = f"{error.get('type')}: {error.get('message')}"
            parts.append(tag("div", "actual: the agent raised ", tag("code", raised)))
        else:
            parts.append(tag("div", "actual: ", value_view(case.get("output"), "output")))
    faults = case.get("faults")
    if isinstance(faults, list) and faults:
        parts.append(faults_view(faults))
    if case.get("traceback"):
        parts.append(
            tag(
                "details",
                tag("summary", "Traceback"),
                tag("pre", cut(case["traceback"])[0], class_="traceback"),
                open=verdict == "ERRORED",
            )
        )
    return join(parts)


def _held(held: Mapping[str, Any]) -> str:
    """``7 span(s); tool: otel-genai 2; llm: openinference 1``: what a turn's trace held, and
    who made its calls."""
    parts = [f"{held.get('spans', 0)} span(s)"]
    for kind in ("agent", "tool", "llm"):
        made = held.get(kind)
        if isinstance(made, Mapping) and made:
            parts.append(f"{kind}: " + ", ".join(f"{by} {n}" for by, n in sorted(made.items())))
    return "; ".join(parts)


def _turn(turn: Any) -> Html:
    if not isinstance(turn, Mapping):  # "… [N more items]" in a stored run
        return tag("li", str(turn), class_="muted")
    failures = [f for f in turn.get("failures") or () if isinstance(f, Mapping)]
    calls = turn.get("calls") if isinstance(turn.get("calls"), Mapping) else None
    called: list[Html] = []
    if calls is not None:
        called = [
            tag("li", tag("code", f"tools:{c.get('name')}"), " ", value_view(c.get("args"), "args"))
            for c in calls.get("tools") or ()
            if isinstance(c, Mapping)
        ] + [
            tag("li", tag("code", f"llm:{c.get('model')}"))
            for c in calls.get("llm") or ()
            if isinstance(c, Mapping)
        ]
    outcome = "failed" if failures or turn.get("error") else "passed"
    return tag(
        "li",
        tag(
            "div",
            tag("strong", f"Turn {turn.get('turn')}"),
            " ",
            _badge("diverged" if outcome == "failed" else "served"),
            tag("span", f" {float(turn.get('latency_ms') or 0):.0f} ms", class_="muted"),
            class_="step-title",
        ),
        tag("div", "user: ", value_view(turn.get("user"), "user")),
        tag("div", "reply: ", value_view(turn.get("reply"), "reply")),
        tag("div", turn["error"], class_="error") if turn.get("error") else None,
        tag(
            "ul",
            [
                tag(
                    "li",
                    tag("code", f.get("check")),
                    ": expected ",
                    f.get("expected"),
                    "; got ",
                    f.get("got"),
                )
                for f in failures
            ],
            class_="reasons",
        )
        if failures
        else None,
        tag("div", f"trace checks: {turn.get('trace_checks')}", class_="muted"),
        tag("div", f"its trace held: {_held(calls['held'])}", class_="muted")
        if calls is not None and isinstance(calls.get("held"), Mapping)
        else None,
        tag("div", "calls in its trace:", tag("ul", called)) if called else None,
        tag("div", f"trace {turn.get('trace_id')}", class_="muted"),
        class_=f"step o-{outcome}",
        tabindex="-1",
    )


def scenario_view(scenario: Mapping[str, Any]) -> Html:
    """A scenario's turns (of its last run when it was repeated): messages, replies, checks."""
    attempts = [a for a in scenario.get("attempts") or () if isinstance(a, Mapping)]
    repeat = scenario.get("repeat") or 1
    parts: list[Node] = []
    if repeat != 1:
        parts.append(
            tag(
                "p",
                f"passed {scenario.get('passed_runs')} of {repeat} runs "
                f"(threshold {scenario.get('pass_threshold')}); the last run:",
            )
        )
    turns = attempts[-1].get("turns") or () if attempts else ()
    parts += [
        tag("h3", f"Turns ({len(turns)})"),
        tag("ol", [_turn(t) for t in turns], class_="timeline", aria_label="turns in order"),
    ]
    return join(parts)


def _search_text(case: Mapping[str, Any]) -> str:
    words = [case.get("case_id"), case.get("name"), *(case.get("tags") or ())]
    return " ".join(str(w) for w in words if w).lower()


def matches(case: Mapping[str, Any], verdict: str | None, text: str | None) -> bool:
    """Whether a case of a run has ``verdict`` and contains ``text`` in its id, name or tags."""
    if verdict and case.get("verdict") != verdict:
        return False
    return not text or text.strip().lower() in _search_text(case)


def cases_table(
    cases: Sequence[tuple[int, Mapping[str, Any]]],
    href: Callable[[int], str],
    *,
    total: int | None = None,
    action: str | None = None,
    verdict: str | None = None,
    text: str | None = None,
) -> Html:
    """A run's cases (each with its number in the run), one row each, filterable by verdict
    and searchable by id, name and tag as you type. With ``action`` the filters are also a
    form sent to the server, for a run shown a page at a time (``total`` cases in all)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for _, c in cases:
        counts[str(c.get("verdict"))] = counts.get(str(c.get("verdict")), 0) + 1
    controls: list[Node] = [
        tag(
            "label",
            "verdict ",
            tag(
                "select",
                tag("option", "all", value=""),
                [
                    tag(
                        "option",
                        v if action else f"{v} ({counts[v]})",
                        value=v,
                        selected=v == verdict,
                    )
                    for v in VERDICTS
                    if action or counts.get(v)
                ],
                id="verdict-filter",
                name="verdict" if action else None,
            ),
        ),
        tag(
            "label",
            "search ",
            tag(
                "input",
                type="search",
                id="case-search",
                name="q" if action else None,
                value=text or None,
                placeholder="id, name or tag  ( / )",
            ),
        ),
        tag("button", "Filter", type="submit") if action else None,
        tag(
            "span",
            tag("span", len(cases), id="shown-count"),
            f" of {len(cases) if total is None else total} shown",
            class_="muted",
        ),
    ]
    filters = (
        tag("form", controls, method="get", action=action, class_="filters")
        if action
        else tag("div", controls, class_="filters")
    )
    rows = []
    for n, c in cases:
        link = href(n)
        reasons = c.get("reasons")
        rows.append(
            tag(
                "tr",
                tag("td", tag("a", c.get("case_id"), href=link)),
                tag("td", c.get("version")),
                tag("td", verdict_badge(c.get("verdict"))),
                tag("td", c.get("name")),
                tag("td", ", ".join(str(t) for t in c.get("tags") or ())),
                tag("td", reasons[0] if isinstance(reasons, list) and reasons else "—"),
                data_verdict=c.get("verdict"),
                data_search=_search_text(c),
                data_href=link,
            )
        )
    headings = ("case", "version", "verdict", "name", "tags", "first reason")
    table = tag(
        "table",
        tag("thead", tag("tr", [tag("th", h) for h in headings])),
        tag("tbody", rows),
        class_="cases",
    )
    return join(filters, tag("div", table, class_="scroll"))


def when(ns: Any) -> str:
    """A time in nanoseconds since the epoch as UTC text."""
    try:
        return datetime.fromtimestamp(int(ns) / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (TypeError, ValueError, OverflowError, OSError):
        return "—"


def run_summary(summary: Mapping[str, Any], facts: Sequence[tuple[str, Any]]) -> Html:
    """The counts by verdict, then the run's facts (duration, store, version, ...)."""
    counts = [
        ("passed", "PASS"),
        ("failed", "FAIL"),
        ("incomplete", "INCOMPLETE"),
        ("errored", "ERRORED"),
        ("lenient", "LENIENT"),
        ("not_run", "NOT_RUN"),
    ]
    return join(
        tag(
            "ul",
            tag("li", tag("strong", summary.get("total", 0)), " cases"),
            [
                tag("li", verdict_badge(verdict), " ", tag("strong", summary.get(key, 0)))
                for key, verdict in counts
                if summary.get(key) or verdict in ("PASS", "FAIL")
            ],
            tag("li", "gate ", tag("strong", "passed" if summary.get("ok") else "failed")),
            class_="counts",
        ),
        tag("dl", [[tag("dt", k), tag("dd", v)] for k, v in facts if v is not None], class_="meta"),
    )


def _source_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# A static report is opened from disk, where no server can send a header: its policy is a
# <meta> element. The page's own stylesheet and script are allowed by their hashes, so a
# recorded value that made it into markup could neither run a script nor load anything.
REPORT_CSP = (
    f"default-src 'none'; style-src {_source_hash(CSS)}; script-src {_source_hash(JS)}; "
    "base-uri 'none'; form-action 'none'"
)


def page(
    title: str,
    body: Node,
    *,
    inline: bool = False,
    nav: Sequence[tuple[str, str]] = (),
    assets: str = "",
    body_class: str | None = None,
) -> str:
    """A whole HTML document. ``inline``: the stylesheet and script are in the page (a static
    file with no server), under :data:`REPORT_CSP`; otherwise they are loaded from ``assets``
    (``{assets}app.css``) and the server sends the policy."""
    if inline:
        head: Node = [
            tag("meta", http_equiv="Content-Security-Policy", content=REPORT_CSP),
            tag("style", Html(CSS)),
            tag("script", Html(JS)),
        ]
    else:
        head = [
            tag("link", rel="stylesheet", href=f"{assets}app.css"),
            tag("script", src=f"{assets}app.js", defer=True),
        ]
    top = tag(
        "header",
        tag("strong", "tracely"),
        [tag("a", label, href=link) for label, link in nav],
        class_="top",
    )
    document = join(
        Html("<!doctype html>"),
        tag(
            "html",
            tag(
                "head",
                tag("meta", charset="utf-8"),
                tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
                head,
                tag("title", title),
            ),
            tag("body", top, tag("main", body, class_="page"), class_=body_class),
            lang="en",
        ),
    )
    return str(document) + "\n"


def report_document(
    report: Mapping[str, Any], *, store: str | None = None, tracely_version: str | None = None
) -> str:
    """A replay run's JSON report as one self-contained HTML file: the summary, the cases
    table, and a page per case (shown when its ``#case-N`` anchor is the target). A report of
    one case opens on that case."""
    summary: Mapping[str, Any] = report.get("summary") or {}
    cases: Sequence[Mapping[str, Any]] = report.get("cases") or ()
    facts = [
        ("duration", f"{float(summary.get('duration_s') or 0):.2f}s"),
        ("mode", summary.get("mode")),
        ("store", store),
        ("tracely", tracely_version),
    ]
    title = f"tracely replay: {summary.get('failed', 0)} failed of {summary.get('total', 0)}"
    if len(cases) == 1:
        only = tag(
            "section",
            case_page(cases[0]),
            class_="case-page only",
            id="case-1",
            aria_label=f"case {cases[0].get('case_id')}",
        )
        index = tag("div", tag("h1", "Replay report"), run_summary(summary, facts), id="index")
        return page(title, [index, only], inline=True, body_class="report")
    index = tag(
        "div",
        tag("h1", "Replay report"),
        run_summary(summary, facts),
        cases_table(list(enumerate(cases, start=1)), lambda n: f"#case-{n}"),
        id="index",
    )
    pages = [
        tag(
            "section",
            tag("p", tag("a", "← all cases", href="#index")),
            case_page(c),
            class_="case-page",
            id=f"case-{n + 1}",
            aria_label=f"case {c.get('case_id')}",
        )
        for n, c in enumerate(cases)
    ]
    return page(title, [index, pages], inline=True, body_class="report")
