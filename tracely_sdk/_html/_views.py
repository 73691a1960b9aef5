"""The pages of a store, as plain functions: what was asked in, the whole HTML page out.

Any web layer serves them (the tracely server behind a token, ``tracely ui`` on 127.0.0.1):
it parses the request, calls :class:`Pages`, and maps :class:`~tracely_sdk.errors.NotFound`
and :class:`PageError` to their status. Every list is paginated (``offset``, :data:`PAGE_SIZE`
rows) so a page costs the same whatever the store holds. Forms that change the store carry
the ``csrf`` value the web layer gives in :class:`Viewer`, and are only shown to a viewer who
may write.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from tracely_sdk._diff import diff_values
from tracely_sdk._html._calls import waterfall_view
from tracely_sdk._html._markup import Html, Node, join, tag
from tracely_sdk._html._render import (
    PARTS,
    VERDICTS,
    case_page,
    cases_table,
    differences_view,
    matches,
    page,
    run_summary,
    timeline_view,
    value_view,
    verdict_badge,
    when,
)
from tracely_sdk._html._values import json_text
from tracely_sdk._matching import Entry
from tracely_sdk._replay import recorded_calls, timeline
from tracely_sdk.errors import NotFound
from tracely_sdk.store import (
    CallOutline,
    Case,
    Cut,
    RecordingSummary,
    Run,
    Store,
    readable_case_result,
)

__all__ = ["PAGE_SIZE", "PageError", "Pages", "Viewer"]

PAGE_SIZE = 50
_SHORT = 80
# The calls of a recording shown on one page of a trace or a case.
CALLS_PAGE_SIZE = 20
# Each value of a call on those pages is cut to this many characters, with a link to the
# whole of it (the call's own value, not the whole recording).
CALL_SHOWN = 3_000
_FACT = 500


class PageError(ValueError):
    """A request a page cannot answer (a bad query value); ``status`` is its HTTP status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Viewer:
    """Who is looking: ``csrf`` is the value write forms must send back (None: no forms),
    ``notice`` a line to show at the top (the result of the last action), ``signed_in``
    whether to offer signing out."""

    csrf: str | None = None
    notice: str | None = None
    error: str | None = None
    signed_in: bool = False


def _short(value: Any) -> str:
    """A value in a list, cut (a :class:`~tracely_sdk.store.Cut` is the beginning of one)."""
    if isinstance(value, Cut):
        return value.text[: _SHORT - 1] + "…"
    text = value if isinstance(value, str) else json_text(value)
    return text if len(text) <= _SHORT else text[: _SHORT - 1] + "…"


def _fact(value: str | None) -> str | None:
    """A name shown among a page's facts, cut (its JSON has it whole): a span's service or agent
    name is whatever the exporter sent, megabytes of it as well."""
    if value is None or len(value) <= _FACT:
        return value
    return f"{value[:_FACT]}… ({len(value) - _FACT} more characters)"


def _table(headings: Sequence[str], rows: Node) -> Html:
    """A table with one heading per column and the given body rows."""
    return tag(
        "div",
        tag(
            "table",
            tag("thead", tag("tr", [tag("th", h) for h in headings])),
            tag("tbody", rows),
        ),
        class_="scroll",
    )


def _offset(query: Mapping[str, str], key: str = "offset") -> int:
    raw = query.get(key) or "0"
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise PageError(f"{key} must be a whole number of rows, got {raw[:20]!r}")
    return int(raw)


class Pages:
    """The store's pages under ``prefix`` (``/ui``); assets are at ``{prefix}/assets/``."""

    def __init__(self, store: Store, *, prefix: str = "/ui", page_size: int = PAGE_SIZE) -> None:
        self.store = store
        self.prefix = prefix.rstrip("/")
        self.page_size = page_size

    # -- the frame ------------------------------------------------------------------------

    def url(self, *parts: str, **query: Any) -> str:
        path = "/".join([self.prefix, *(quote(p, safe="") for p in parts)])
        shown = {k: v for k, v in query.items() if v not in (None, "", 0)}
        return path + ("?" + urlencode(shown) if shown else "")

    def _page(self, title: str, body: Node, viewer: Viewer) -> str:
        nav = [
            ("Cases", self.url("cases")),
            ("Traces", self.url("traces")),
            ("Runs", self.url("runs")),
        ]
        top: list[Node] = []
        if viewer.signed_in:
            top.append(
                tag(
                    "form",
                    tag("button", "Sign out", type="submit"),
                    method="post",
                    action=self.url("logout"),
                    class_="signout",
                )
            )
        if viewer.notice:
            top.append(tag("p", viewer.notice, class_="notice", role="status"))
        if viewer.error:
            top.append(tag("p", viewer.error, class_="error", role="alert"))
        return page(title, [top, body], nav=nav, assets=self.prefix + "/assets/")

    def _pager(self, offset: int, shown: int, more: bool, *parts: str, **query: Any) -> Html:
        links: list[Node] = []
        if offset > 0:
            before = max(0, offset - self.page_size)
            links.append(tag("a", "← previous", href=self.url(*parts, **query, offset=before)))
        links.append(
            tag("span", f"rows {offset + 1 if shown else 0} to {offset + shown}", class_="muted")
        )
        if more:
            links.append(
                tag("a", "next →", href=self.url(*parts, **query, offset=offset + self.page_size))
            )
        return tag("nav", links, class_="pager", aria_label="pages")

    def _calls(
        self, total: int, offset: int, shown: Sequence[Any], *parts: str, **keep: Any
    ) -> tuple[Node, Html]:
        """A page of a recording's calls (``shown``, CALLS_PAGE_SIZE at most, from
        ``offset`` of ``total``), each value cut to CALL_SHOWN characters with a link to the
        whole of it (:meth:`call_value`), so a page's size is bounded by a constant whatever
        the recording holds. Returns (heading and links, the calls)."""
        if offset and offset >= total:
            raise PageError(f"this recording has {total} calls, none from {offset + 1}", 404)
        heading: list[Node] = [tag("h2", f"Calls ({total})", id="calls")]
        if total > CALLS_PAGE_SIZE:
            links: list[Node] = []
            if offset > 0:
                before = max(0, offset - CALLS_PAGE_SIZE)
                href = self.url(*parts, **keep, calls=before) + "#calls"
                links.append(tag("a", "← earlier calls", href=href))
            links.append(
                tag(
                    "span",
                    f"calls {offset + 1} to {offset + len(shown)} of {total}",
                    class_="muted",
                )
            )
            if offset + len(shown) < total:
                href = self.url(*parts, **keep, calls=offset + CALLS_PAGE_SIZE) + "#calls"
                links.append(tag("a", "later calls →", href=href))
            heading.append(tag("nav", join(links, " "), class_="pager", aria_label="calls"))

        def full(at: int, part: str) -> str:
            return self.url(*parts, "calls", str(offset + at + 1), part)

        return heading, timeline_view(shown, right=None, full=full, limit=CALL_SHOWN)

    def call_value(self, kind: str, key: str, number: str, part: str) -> tuple[bytes, str]:
        """The whole of one recorded call's value: ``number`` counts the calls from 1 as the
        pages do, ``part`` is ``input`` (a tool's args, an LLM's input), ``output`` or
        ``error``, ``kind`` is ``traces`` or ``cases`` (the case's current version). Returns
        the body and its media type: a string as text, anything else as JSON. The call is
        read alone (:meth:`~tracely_sdk.store.Store.recording_calls`,
        :meth:`~tracely_sdk.store.Store.case_calls`)."""
        wanted = (
            int(number) - 1 if number.isascii() and number.isdigit() and len(number) <= 9 else 0
        )
        at = max(wanted, 0)
        if kind == "traces":
            found = self.store.recording_calls(key, at, 1)
            outline, entries = found.outline, found.entries
        else:
            outline, entries = self.store.case_calls(key, at, 1)
        count, steps = len(outline), _steps(outline[at : at + 1], entries)
        index = wanted - at
        if not (number.isascii() and number.isdigit()) or len(number) > 9:
            raise PageError(f"a call is a number from 1 to {count}, got {number[:20]!r}")
        if not 0 <= wanted < count:
            raise PageError(f"this recording has {count} calls, no call {number}", 404)
        key_of = {v: k for k, v in PARTS.items()}
        step: Mapping[str, Any] = steps[index]
        if part not in key_of or key_of[part] not in step:
            raise PageError(f"call {number} recorded no {part[:20]!r}", 404)
        value = step[key_of[part]]
        if isinstance(value, str):
            try:
                return value.encode("utf-8"), "text/plain; charset=utf-8"
            except UnicodeEncodeError:  # a lone surrogate: kept, as a JSON escape
                return json.dumps(value).encode("ascii"), "application/json"
        return _json(value), "application/json"

    def _hidden_csrf(self, viewer: Viewer) -> Html:
        return tag("input", type="hidden", name="csrf", value=viewer.csrf)

    def error(self, status: int, message: str, viewer: Viewer) -> str:
        """A page saying what went wrong."""
        return self._page(f"{status}", [tag("h1", f"{status}"), tag("p", message)], viewer)

    def login(self, viewer: Viewer, *, next_url: str = "", problem: str | None = None) -> str:
        """The sign-in form: a token (read scope at least), kept in an HttpOnly cookie."""
        form = tag(
            "form",
            tag(
                "p",
                tag(
                    "label",
                    "Token ",
                    tag(
                        "input",
                        type="password",
                        name="token",
                        autocomplete="current-password",
                        required=True,
                        autofocus=True,
                    ),
                ),
            ),
            tag("input", type="hidden", name="next", value=next_url),
            self._hidden_csrf(viewer) if viewer.csrf else None,
            tag("button", "Sign in", type="submit"),
            method="post",
            action=self.url("login"),
        )
        return self._page(
            "Sign in",
            [
                tag("h1", "Sign in"),
                tag(
                    "p",
                    "A token with the read scope shows the pages; write also allows promoting and recapturing.",
                ),
                tag("p", problem, class_="error", role="alert") if problem else None,
                form,
            ],
            viewer,
        )

    # -- cases ----------------------------------------------------------------------------

    def _latest_verdicts(self) -> tuple[Run | None, dict[str, str]]:
        runs = self.store.list_runs(limit=1)
        if not runs:
            return None, {}
        run = self.store.get_run(runs[0].id)
        return run, {str(c["case_id"]): str(c.get("verdict")) for c in run.cases}

    def _cases_with_verdict(
        self, verdicts: Mapping[str, str], verdict: str, tag_wanted: str | None, offset: int
    ) -> list[Case]:
        """A page (and one more) of the cases whose verdict in the latest run is ``verdict``."""
        found: list[Case] = []
        skipped = 0
        for case_id in sorted(k for k, v in verdicts.items() if v == verdict):
            try:
                case = self.store.get_case(case_id)
            except NotFound:  # deleted since the run
                continue
            if tag_wanted is not None and tag_wanted not in case.tags:
                continue
            if skipped < offset:
                skipped += 1
                continue
            found.append(case)
            if len(found) > self.page_size:
                break
        return found

    def cases(self, query: Mapping[str, str], viewer: Viewer) -> str:
        """The cases, filtered by tag and by their verdict in the latest run, paginated."""
        tag_wanted = query.get("tag") or None
        verdict = query.get("verdict") or None
        if verdict is not None and verdict not in VERDICTS:
            raise PageError(f"verdict must be one of {', '.join(VERDICTS)}, got {verdict[:20]!r}")
        offset = _offset(query)
        run, verdicts = self._latest_verdicts()
        if verdict is None:
            found = self.store.list_cases(tag=tag_wanted, limit=self.page_size + 1, offset=offset)
        else:
            found = self._cases_with_verdict(verdicts, verdict, tag_wanted, offset)
        shown = found[: self.page_size]
        rows = [
            tag(
                "tr",
                tag("td", tag("a", c.id, href=self.url("cases", c.id))),
                tag("td", _short(c.name)),
                tag("td", c.version),
                tag(
                    "td", [tag("a", t, href=self.url("cases", tag=t), class_="tag") for t in c.tags]
                ),
                tag("td", verdict_badge(verdicts[c.id]) if c.id in verdicts else "—"),
                tag("td", when(c.updated_at)),
                class_="row",
            )
            for c in shown
        ]
        filters = tag(
            "form",
            tag("label", "tag ", tag("input", type="text", name="tag", value=tag_wanted or "")),
            tag(
                "label",
                " verdict in the latest run ",
                tag(
                    "select",
                    tag("option", "any", value=""),
                    [tag("option", v, value=v, selected=v == verdict) for v in VERDICTS],
                    name="verdict",
                ),
            ),
            tag("button", "Filter", type="submit"),
            method="get",
            action=self.url("cases"),
            class_="filters",
        )
        latest = (
            tag(
                "p",
                "Verdicts from run ",
                tag("a", run.id, href=self.url("runs", run.id)),
                f", {when(run.started_at)}.",
                class_="muted",
            )
            if run is not None
            else tag("p", "No replay run kept yet.", class_="muted")
        )
        table = _table(("case", "name", "version", "tags", "latest verdict", "updated"), rows)
        body = [
            tag("h1", "Cases"),
            filters,
            latest,
            table,
            self._pager(
                offset,
                len(shown),
                len(found) > self.page_size,
                "cases",
                tag=tag_wanted,
                verdict=verdict,
            ),
        ]
        return self._page("Cases", body, viewer)

    def case(
        self,
        case_id: str,
        query: Mapping[str, str],
        viewer: Viewer,
        *,
        conflict: tuple[Any, Any] | None = None,
    ) -> str:
        """One case: its facts, versions, the difference between two versions, its calls, and
        (for a writer) the recapture form. ``conflict`` is (case input, trace input) of a
        refused recapture, shown as their difference."""
        case = self.store.get_case(case_id)
        history = self.store.case_history(case_id)
        numbers = [v.version for v in history]
        a = _version(query, "a", max(1, case.version - 1), numbers)
        b = _version(query, "b", case.version, numbers)
        by_number = {v.version: v for v in history}
        facts: list[tuple[str, Node]] = [
            ("name", case.name),
            ("version", case.version),
            ("tags", ", ".join(case.tags) or None),
            ("entrypoint", case.entrypoint),
            (
                "source trace",
                tag("a", case.source_trace_id, href=self.url("traces", case.source_trace_id))
                if case.source_trace_id
                else None,
            ),
            ("created", when(case.created_at)),
            ("updated", when(case.updated_at)),
        ]
        versions = _table(
            ("version", "created", "source trace", "note"),
            [
                tag(
                    "tr",
                    tag("td", v.version),
                    tag("td", when(v.created_at)),
                    tag(
                        "td",
                        tag("a", v.source_trace_id, href=self.url("traces", v.source_trace_id))
                        if v.source_trace_id
                        else "—",
                    ),
                    tag("td", v.note or ""),
                )
                for v in history
            ],
        )
        raw = self.url("cases", case.id, "raw")
        steps = recorded_calls(case.bundle)
        agent = case.bundle.get("agent")
        body: list[Node] = [
            tag("h1", "Case ", tag("code", case.id)),
            tag(
                "dl",
                [[tag("dt", k), tag("dd", v)] for k, v in facts if v is not None],
                class_="meta",
            ),
            tag("h2", "Input"),
            value_view(case.input, "input", full=raw),
            tag("h2", "Expected output"),
            value_view(case.expected_output, "expected output", full=raw),
            tag("h2", f"Versions ({len(history)})"),
            versions,
        ]
        if len(history) > 1:
            body.append(self._versions_diff(case, by_number[a], by_number[b], numbers))
        offset = _offset(query, "calls")
        calls_heading, calls = self._calls(
            len(steps),
            offset,
            steps[offset : offset + CALLS_PAGE_SIZE],
            "cases",
            case.id,
            a=query.get("a"),
            b=query.get("b"),
        )
        body += [
            tag("h2", f"Recorded calls (version {case.version})"),
            waterfall_view(
                steps,
                started_at=case.bundle.get("started_at"),
                ended_at=agent.get("ended_at") if isinstance(agent, Mapping) else None,
            ),
            calls_heading,
            calls,
            tag("p", tag("a", "the case as JSON", href=raw), class_="muted"),
        ]
        if viewer.csrf:
            body.append(self._recapture_form(case, viewer, conflict))
        return self._page(f"Case {case.id}", body, viewer)

    def _versions_diff(self, case: Case, va: Any, vb: Any, numbers: Sequence[int]) -> Html:
        choose = tag(
            "form",
            tag(
                "label",
                "compare version ",
                tag(
                    "select",
                    [tag("option", n, value=n, selected=n == va.version) for n in numbers],
                    name="a",
                ),
            ),
            tag(
                "label",
                " with version ",
                tag(
                    "select",
                    [tag("option", n, value=n, selected=n == vb.version) for n in numbers],
                    name="b",
                ),
            ),
            tag("button", "Compare", type="submit"),
            method="get",
            action=self.url("cases", case.id),
            class_="filters",
        )
        parts: list[Node] = [tag("h2", f"Version {va.version} → version {vb.version}"), choose]
        labels = (f"version {va.version}", f"version {vb.version}")
        for title, left, right, root in (
            ("Expected output", va.expected_output, vb.expected_output, "expected_output"),
            ("Recording", recorded_content(va.bundle), recorded_content(vb.bundle), "bundle"),
        ):
            differences, total = diff_values(left, right, root, limit=50)
            parts.append(tag("h3", title))
            parts.append(
                differences_view(differences, total - len(differences), labels=labels)
                if differences
                else tag("p", "the same in both versions", class_="muted")
            )
        return join(parts)

    def case_json(self, case_id: str) -> bytes:
        """The case's current version as JSON: what its page cuts short, whole."""
        case = self.store.get_case(case_id)
        return _json(
            {
                "id": case.id,
                "version": case.version,
                "input": case.input,
                "expected_output": case.expected_output,
                "bundle": case.bundle,
            }
        )

    def _recapture_form(self, case: Case, viewer: Viewer, conflict: tuple[Any, Any] | None) -> Html:
        parts: list[Node] = [tag("h2", "Recapture")]
        if conflict is not None:
            differences, total = diff_values(conflict[0], conflict[1], "input")
            parts += [
                tag(
                    "p",
                    "Refused: the trace was called with a different input than the case. Where they differ (recorded is the case's):",
                    class_="error",
                ),
                differences_view(differences, total - len(differences)),
            ]
        parts.append(
            tag(
                "form",
                self._hidden_csrf(viewer),
                tag(
                    "label",
                    "trace id ",
                    tag(
                        "input",
                        type="text",
                        name="trace_id",
                        required=True,
                        pattern="[0-9a-f]{32}",
                        size=34,
                    ),
                ),
                tag("label", " note ", tag("input", type="text", name="note")),
                " ",
                tag("button", "Recapture from this trace", type="submit"),
                method="post",
                action=self.url("cases", case.id, "recapture"),
                class_="filters",
            )
        )
        return join(parts)

    # -- traces ---------------------------------------------------------------------------

    def traces(self, query: Mapping[str, str], viewer: Viewer) -> str:
        """The recorded traces, newest first, paginated."""
        offset = _offset(query)
        service = query.get("service") or None
        agent = query.get("agent") or None
        found = self.store.recording_summaries(
            limit=self.page_size + 1, offset=offset, service=service, agent=agent
        )
        shown = found[: self.page_size]
        rows = [
            tag(
                "tr",
                tag("td", tag("a", r.trace_id, href=self.url("traces", r.trace_id), class_="mono")),
                tag("td", when(r.started_at)),
                tag("td", _short(r.service)),
                tag("td", _short(r.agent_name) if r.agent_name else "—"),
                tag("td", r.status),
                tag("td", _short(r.input)),
                tag("td", _short(r.output)),
                class_="row",
            )
            for r in shown
        ]
        table = _table(("trace", "started", "service", "agent", "status", "input", "output"), rows)
        body = [
            tag("h1", "Recorded traces"),
            table,
            self._pager(
                offset,
                len(shown),
                len(found) > self.page_size,
                "traces",
                service=service,
                agent=agent,
            ),
        ]
        return self._page("Traces", body, viewer)

    def trace(
        self,
        trace_id: str,
        viewer: Viewer,
        query: Mapping[str, str] | None = None,
        *,
        problem: str | None = None,
    ) -> str:
        """One recorded trace: its facts, its calls in order, and (for a writer) the promote form.
        Only the page of calls shown is read whole (and the times of them all, for the
        waterfall): :meth:`~tracely_sdk.store.Store.recording_calls`."""
        offset = _offset(query or {}, "calls")
        found = self.store.recording_calls(trace_id, offset, CALLS_PAGE_SIZE)
        recording = found.summary
        facts = [
            ("service", _fact(recording.service)),
            ("agent", _fact(recording.agent_name)),
            ("started", when(recording.started_at)),
            ("status", recording.status),
            ("replay mode", recording.replay_mode),
        ]
        raw = self.url("traces", recording.trace_id, "raw")
        shown = found.outline[offset : offset + len(found.entries)]
        calls_heading, calls = self._calls(
            len(found.outline), offset, _steps(shown, found.entries), "traces", recording.trace_id
        )
        times = [
            {"label": f"{c.kind}:{c.name}", "started_at": c.started_at, "ended_at": c.ended_at}
            | ({} if c.usage is None else {"usage": c.usage})
            for c in found.outline
        ]
        body: list[Node] = [
            tag("h1", "Trace ", tag("code", recording.trace_id)),
            tag(
                "dl",
                [[tag("dt", k), tag("dd", v)] for k, v in facts if v is not None],
                class_="meta",
            ),
            tag("div", "input: ", value_view(recording.input, "input", full=raw)),
            tag("div", "output: ", value_view(recording.output, "output", full=raw)),
            waterfall_view(times, started_at=recording.started_at, ended_at=recording.ended_at),
            calls_heading,
            calls,
            tag("p", tag("a", "the recording as JSON", href=raw), class_="muted"),
        ]
        if viewer.csrf:
            body.append(self._promote_form(recording, viewer, problem))
        return self._page(f"Trace {recording.trace_id}", body, viewer)

    def trace_json(self, trace_id: str) -> bytes:
        """The recording of a trace (its bundle) as JSON: what its page cuts short, whole."""
        return _json(self.store.get_recording(trace_id).bundle)

    def _promote_form(
        self, recording: RecordingSummary, viewer: Viewer, problem: str | None
    ) -> Html:
        return join(
            tag("h2", "Promote to a case"),
            tag("p", problem, class_="error", role="alert") if problem else None,
            tag(
                "form",
                self._hidden_csrf(viewer),
                tag(
                    "label",
                    "name ",
                    tag(
                        "input",
                        type="text",
                        name="name",
                        required=True,
                        # a default only: a name longer than the form may send is no help
                        value=(recording.agent_name or "")[:_FACT],
                    ),
                ),
                tag("label", " case id ", tag("input", type="text", name="id")),
                tag(
                    "label",
                    " entrypoint ",
                    tag("input", type="text", name="entrypoint", placeholder="module:function"),
                ),
                tag(
                    "label",
                    " tags ",
                    tag("input", type="text", name="tags", placeholder="comma,separated"),
                ),
                " ",
                tag("button", "Promote", type="submit"),
                method="post",
                action=self.url("traces", recording.trace_id, "promote"),
                class_="filters",
            ),
        )

    # -- runs -----------------------------------------------------------------------------

    def runs(self, query: Mapping[str, str], viewer: Viewer) -> str:
        """The replay runs kept in the store, newest first, with their counts by verdict."""
        offset = _offset(query)
        found = self.store.list_runs(limit=self.page_size + 1, offset=offset)
        shown = found[: self.page_size]
        rows = [
            tag(
                "tr",
                tag("td", tag("a", r.id, href=self.url("runs", r.id), class_="mono")),
                tag("td", when(r.started_at)),
                tag("td", f"{r.duration_s:.2f}s"),
                tag("td", r.mode),
                tag("td", verdict_badge("PASS" if r.ok else "FAIL")),
                tag(
                    "td",
                    ", ".join(
                        f"{r.summary.get(key, 0)} {key}"
                        for key in (
                            "passed",
                            "failed",
                            "incomplete",
                            "errored",
                            "lenient",
                            "not_run",
                        )
                        if r.summary.get(key)
                    )
                    or "—",
                ),
                tag("td", _short(r.source) if r.source else "—"),
                class_="row",
            )
            for r in shown
        ]
        table = _table(
            ("run", "started", "duration", "mode", "gate", "verdicts", "cases from"), rows
        )
        body = [
            tag("h1", "Replay runs"),
            table,
            self._pager(offset, len(shown), len(found) > self.page_size, "runs"),
        ]
        return self._page("Runs", body, viewer)

    def run(self, run_id: str, query: Mapping[str, str], viewer: Viewer) -> str:
        """One run: its counts and facts, and its cases a page at a time (filtered by verdict
        and text), each linking to its page."""
        verdict = query.get("verdict") or None
        if verdict is not None and verdict not in VERDICTS:
            raise PageError(f"verdict must be one of {', '.join(VERDICTS)}, got {verdict[:20]!r}")
        text = query.get("q") or None
        offset = _offset(query)
        run = self.store.get_run(run_id)
        cases = [readable_case_result(c) for c in run.cases]
        chosen = [(n, c) for n, c in enumerate(cases, start=1) if matches(c, verdict, text)]
        shown = chosen[offset : offset + self.page_size]
        facts = [
            ("started", when(run.started_at)),
            ("duration", f"{run.duration_s:.2f}s"),
            ("mode", run.mode),
            ("store", _fact(run.source)),
            ("spans exported to", _fact(run.otlp_endpoint)),
            ("tracely", run.tracely_version),
        ]
        body = [
            tag("h1", "Run ", tag("code", run.id)),
            run_summary(run.summary, facts),
            cases_table(
                shown,
                lambda n: self.url("runs", run.id, "cases", str(n)),
                total=len(chosen),
                action=self.url("runs", run.id),
                verdict=verdict,
                text=text,
            ),
            self._pager(
                offset,
                len(shown),
                offset + len(shown) < len(chosen),
                "runs",
                run.id,
                verdict=verdict,
                q=text,
            ),
        ]
        return self._page(f"Run {run.id}", body, viewer)

    def run_case(self, run_id: str, number: str, viewer: Viewer) -> str:
        """One case of a run: the same page as in the HTML report."""
        run = self.store.get_run(run_id)
        if not (number.isascii() and number.isdigit()) or not 1 <= int(number) <= len(run.cases):
            raise PageError(
                f"run {run.id} has cases 1 to {len(run.cases)}, not {number[:20]!r}", 404
            )
        case = readable_case_result(run.cases[int(number) - 1])
        body = [
            tag("p", tag("a", f"← run {run.id}", href=self.url("runs", run.id))),
            case_page(case),
        ]
        return self._page(f"{case.get('verdict')} {case.get('case_id')}", body, viewer)


# What a recording holds only to be checked or traced back (its checksum, span ids, the times
# of its spans, its trace id): it changes with every recording, so a difference between two
# versions of a case would be all noise.
_BOOKKEEPING = frozenset({"checksum", "trace_id", "started_at", "ended_at", "span_id"})


def recorded_content(bundle: Mapping[str, Any]) -> dict[str, Any]:
    """A bundle without its bookkeeping fields: what was recorded, to compare two versions."""

    def clean(section: Any) -> Any:
        # One level only: a recorded value may hold keys of these names, and they are data.
        if isinstance(section, Mapping):
            return {k: v for k, v in section.items() if k not in _BOOKKEEPING}
        return section

    content: dict[str, Any] = clean(bundle)
    content["agent"] = clean(content.get("agent"))
    if content["agent"] is None:
        del content["agent"]
    for kind in ("tools", "llm"):
        calls = content.get(kind)
        if isinstance(calls, dict):
            content[kind] = {
                name: [clean(e) for e in entries] if isinstance(entries, list) else entries
                for name, entries in calls.items()
            }
    if isinstance(content.get("incomplete"), list):
        content["incomplete"] = [clean(i) for i in content["incomplete"]]
    summary = content.get("trace")
    if isinstance(summary, Mapping):
        content["trace"] = {**summary}
        if isinstance(summary.get("calls"), list):
            content["trace"]["calls"] = [clean(c) for c in summary["calls"]]
    return content


def _steps(shown: Sequence[CallOutline], entries: Sequence[Any]) -> list[Any]:
    """The calls a page shows (their outlines and entries), as
    :func:`~tracely_sdk._replay.recorded_calls` gives them."""
    made = [
        Entry(c.kind, c.name, c.index, c.seq, raw if isinstance(raw, Mapping) else {}, None, None)
        for c, raw in zip(shown, entries, strict=True)
    ]
    return list(timeline(made, [], unmade="recorded"))


def _json(value: Any) -> bytes:
    return json_text(value, indent=True).encode()


def _version(query: Mapping[str, str], key: str, default: int, numbers: Sequence[int]) -> int:
    raw = query.get(key)
    if raw is None or raw == "":
        return default if default in numbers else numbers[-1]
    if not (raw.isascii() and raw.isdigit()) or int(raw) not in numbers:
        raise PageError(
            f"{key} must be one of the case's versions ({', '.join(map(str, numbers))})"
        )
    return int(raw)
