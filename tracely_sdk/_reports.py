"""Replay results as files for CI: JUnit XML, a JSON report, an HTML report, and a Markdown
step summary.

The JSON report's field names are a contract for scripts (docs/json-output.md)::

    {"schema": "tracely.replay/1", "format": "tracely.replay-report/1",
     "summary": {"total": 3, "passed": 1, "failed": 1, "incomplete": 1, "errored": 0,
                 "lenient": 0, "not_run": 0, "ok": false, "mode": "recorded", "duration_s": 0.12},
     "cases": [{"case_id": "paris-weather", "version": 2, "tags": ["weather"],
                "verdict": "FAIL",
                "reasons": ["recorded call(s) never made: tools:get_weather"],
                "output": ..., "expected_output": ..., "diff": "...",
                "output_differences": [{"path": "output", "recorded": ..., "actual": ...}],
                "served": [...], "unused": [...], "diverged": [...],
                "divergences": [{"label": "llm:gpt-4o", "entry": "llm:gpt-4o #1 (seq 2)",
                                 "seq": 2, "field": "input", "recorded": ..., "actual": ...,
                                 "differences": [{"path": "messages[0].content",
                                                  "recorded": ..., "actual": ...}],
                                 "omitted": 0}],
                "masked": {"llm:gpt-4o": ["@iso-timestamp"]},
                "timeline": [{"outcome": "diverged", "label": "llm:gpt-4o", "seq": 2,
                              "entry": "llm:gpt-4o #1 (seq 2)", "call": 1, "field": "input",
                              "recorded": ..., "output": ..., "actual": ...,
                              "differences": [...], "omitted": 0},
                             {"outcome": "never made", "label": "tools:get_weather", ...}],
                "duration_s": 0.004, "trace_id": "...", "agent_version": null,
                "tracely_version": "0.4.3",
                "error": {"type": "...", "message": "..."}, "traceback": "..."}, ...]}

``error`` and ``traceback`` are what the agent raised (null when it did not), redacted, the
traceback cut to the agent's frames. With ``--shard K/N`` the summary has ``"shard": {"index":
K, "count": N, "selected": M}``, for :func:`merge_reports` to check the shards by.

A difference leaves out ``recorded`` (or ``actual``) when that side has nothing at the path.
``timeline`` is every recorded call in ``seq`` order beside what the replay did with it
(``served``, ``diverged``, ``never made``), with the calls the recording could not answer
(``missed``, ``live``) in place (see :class:`tracely_sdk._replay.Step`).
Terminal, JUnit and Markdown show the same differences as text, through one renderer
(:mod:`tracely_sdk._diff`).
"""

from __future__ import annotations

import os
import re
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from tracely_sdk._diff import render
from tracely_sdk._runner import (
    ERRORED,
    FAIL,
    INCOMPLETE,
    LENIENT,
    NOT_RUN,
    PASS,
    CaseResult,
    natural_key,
)
from tracely_sdk._version import __version__
from tracely_sdk.errors import ConfigError
from tracely_sdk.store._model import Run, new_run_id, redact_url

__all__ = [
    "REPORT_FORMAT",
    "REPORT_SCHEMA",
    "append_step_summary",
    "difference_lines",
    "failure_groups",
    "format_group",
    "format_result",
    "in_case_order",
    "json_report",
    "junit_xml",
    "markdown_summary",
    "merge_reports",
    "otlp_endpoint",
    "run_of",
    "summarize",
    "write_html",
    "write_json",
    "write_junit",
]

REPORT_FORMAT = "tracely.replay-report/1"
REPORT_SCHEMA = "tracely.replay/1"
GITHUB_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"

# Characters XML 1.0 cannot carry at all (an agent's output may hold any of them).
_XML_INVALID = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def summarize(results: Sequence[CaseResult], elapsed: float | None = None) -> dict[str, Any]:
    """Counts by verdict, whether the gate passes, the run's mode and duration.

    ``elapsed`` is the run's wall-clock time (with ``-j N`` less than the sum of the cases').
    """
    counts = dict.fromkeys((PASS, FAIL, INCOMPLETE, ERRORED, LENIENT, NOT_RUN), 0)
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    lenient = counts[LENIENT] > 0
    live = sorted({p for r in results for p in (r.report or {}).get("live_patterns") or ()})
    summary: dict[str, Any] = {
        "total": len(results),
        "passed": counts[PASS],
        "failed": counts[FAIL],
        "incomplete": counts[INCOMPLETE],
        "errored": counts[ERRORED],
        "lenient": counts[LENIENT],
        "not_run": counts[NOT_RUN],
        "ok": all(r.ok for r in results),
        "mode": "lenient" if lenient else "recorded",
        "duration_s": round(sum(r.duration for r in results) if elapsed is None else elapsed, 6),
    }
    if live:  # replay --live: the label patterns that ran live (the mode is still recorded)
        summary["live_patterns"] = live
    return summary


def summary_line(results: Sequence[CaseResult], elapsed: float | None = None) -> str:
    """``3 cases: 1 passed, 1 failed, 1 incomplete in 0.12s``."""
    s = summarize(results, elapsed)
    parts = [
        f"{s[key]} {label}"
        for key, label in (
            ("passed", "passed"),
            ("failed", "failed"),
            ("incomplete", "incomplete"),
            ("errored", "errored"),
            ("lenient", "lenient (not a recorded pass)"),
            ("not_run", "not run"),
        )
        if s[key]
    ]
    noun = "case" if s["total"] == 1 else "cases"
    live = f" (live: {', '.join(s['live_patterns'])})" if s.get("live_patterns") else ""
    return (
        f"{s['total']} {noun}: {', '.join(parts) or 'nothing run'} in {s['duration_s']:.2f}s" + live
    )


def difference_lines(diff: str | None, divergences: Sequence[Mapping[str, Any] | str]) -> list[str]:
    """What differed in a case, as indented text: each diverged call with its differences,
    then the output's. A stored run's cases are shown with the same lines (a divergence its
    store collapsed to a note is shown as that note)."""
    lines = []
    for d in divergences:
        if not isinstance(d, Mapping):
            lines.append(str(d))
            continue
        what = "different args" if d.get("field") == "args" else "a different input"
        lines.append(f"{d.get('entry') or d.get('label')} was served despite {what}:")
        lines += [
            "  " + line
            for line in render(list(d.get("differences") or ()), int(d.get("omitted") or 0))
        ]
    if diff:
        lines += diff.splitlines()
    return lines


def _details_lines(result: CaseResult) -> list[str]:
    """What a case's verdict rests on, below its heading: reasons, differences, traceback."""
    lines = [f"  - {reason}" for reason in result.reasons]
    lines += ["    " + line for line in difference_lines(result.diff, result.divergences)]
    masked = (result.report or {}).get("masked") or {}
    if masked:
        lines.append("  masked " + "; ".join(f"{k}: {', '.join(v)}" for k, v in masked.items()))
    if result.traceback:
        lines += [("    " + line).rstrip() for line in result.traceback.rstrip().splitlines()]
    return lines


def format_result(result: CaseResult) -> str:
    """A case's verdict with its reasons and diff, as plain text (the CLI and pytest share it)."""
    version = f" v{result.version}" if result.version is not None else ""
    lines = [f"{result.verdict} {result.case_id}{version} ({result.name})"]
    lines += _details_lines(result)
    if result.trace_id:
        lines.append(f"  trace {result.trace_id}")
    return "\n".join(lines)


def in_case_order(results: Iterable[CaseResult]) -> list[CaseResult]:
    """``results`` in the natural order of their case ids (``city2`` before ``city10``)."""
    return sorted(results, key=lambda r: natural_key(r.case_id))


def failure_groups(results: Sequence[CaseResult]) -> list[list[CaseResult]]:
    """The cases that did not pass and have something to show, alike ones together.

    Cases are alike when they have the same verdict and the same reasons, differences and
    traceback, word for word. Groups come in the order of their first case.
    """
    groups: dict[tuple[str, tuple[str, ...]], list[CaseResult]] = {}
    for r in in_case_order(results):
        if r.verdict != PASS and (r.reasons or r.diff):
            groups.setdefault((r.verdict, tuple(_details_lines(r))), []).append(r)
    return list(groups.values())


def format_group(group: Sequence[CaseResult], width: int = 100) -> str:
    """A group of alike cases (see :func:`failure_groups`) as plain text: one case is shown
    by :func:`format_result`; several by their verdict, the case ids, and what they share."""
    if len(group) == 1:
        return format_result(group[0])
    head = f"{group[0].verdict} {len(group)} cases alike:"
    names = textwrap.wrap(
        ", ".join(r.case_id for r in group),
        width=max(40, width),
        initial_indent="  cases ",
        subsequent_indent="        ",
        break_on_hyphens=False,
    )
    return "\n".join([head, *names, *_details_lines(group[0])])


# -- JSON ----------------------------------------------------------------------------------


def case_entry(result: CaseResult) -> dict[str, Any]:
    """One case of the JSON report, with its stable field names."""
    report: Mapping[str, Any] = result.report or {}
    entry = {
        "case_id": result.case_id,
        "version": result.version,
        "name": result.name,
        "tags": list(result.tags),
        "entrypoint": result.entrypoint,
        "verdict": result.verdict,
        "ok": result.ok,
        "reasons": list(result.reasons),
        "output": result.output,
        "expected_output": result.expected_output,
        "diff": result.diff,
        "output_differences": list(result.output_differences),
        "mode": report.get("mode"),
        "served": list(report.get("served", ())),
        "unused": list(report.get("unused", ())),
        "diverged": list(report.get("diverged", ())),
        "divergences": list(report.get("divergences", ())),
        "live": list(report.get("live", ())),
        "live_patterns": list(report.get("live_patterns", ())),
        "live_checks": list(report.get("live_checks", ())),
        "misses": list(report.get("errors", ())),
        "masked": {k: list(v) for k, v in (report.get("masked") or {}).items()},
        "timeline": list(report.get("timeline", ())),
        "duration_s": round(result.duration, 6),
        "trace_id": result.trace_id,
        "agent_version": result.agent_version,
        "tracely_version": __version__,
        "error": dict(result.error) if result.error else None,
        "traceback": result.traceback,
    }
    if result.faults is not None:  # replay --faults: the case's robustness runs
        entry["faults"] = [dict(row) for row in result.faults]
    if report.get("kind") == "scenario":
        # A scenario's turns: each one's reply, failed checks, trace id and what its trace held.
        entry["scenario"] = dict(report)
    return entry


def json_report(
    results: Sequence[CaseResult],
    elapsed: float | None = None,
    *,
    shard: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The whole run as JSON-compatible data (see the module docstring); ``shard`` is the
    shard the run replayed (``index``, ``count``, ``selected``), kept in the summary."""
    summary = summarize(results, elapsed)
    if shard is not None:
        summary["shard"] = dict(shard)
    return {
        "schema": REPORT_SCHEMA,
        "format": REPORT_FORMAT,
        "summary": summary,
        "cases": [case_entry(r) for r in in_case_order(results)],
    }


def write_json(
    results: Sequence[CaseResult],
    path: str | os.PathLike[str],
    elapsed: float | None = None,
    *,
    shard: Mapping[str, int] | None = None,
) -> Path:
    """Write :func:`json_report` to ``path`` (2-space indent, trailing newline)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(
        orjson.dumps(
            json_report(results, elapsed, shard=shard),
            option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS,
            default=str,
        )
    )
    return target


# -- merging the reports of shards -----------------------------------------------------------

# The keys of a JSON report's case that come from the case's ReplayReport.
_REPORT_KEYS = (
    *("mode", "served", "unused", "diverged", "divergences"),
    *("live", "live_patterns", "live_checks", "masked", "timeline"),
)


def _result_of_entry(entry: Mapping[str, Any]) -> CaseResult:
    """A case of a JSON report back as a result (the inverse of :func:`case_entry`)."""
    scenario = entry.get("scenario")
    if isinstance(scenario, Mapping):
        report: dict[str, Any] = dict(scenario)
    else:
        report = {k: entry[k] for k in _REPORT_KEYS if k in entry}
        report["errors"] = list(entry.get("misses") or ())
    error = entry.get("error")
    for key in ("reasons", "tags", "output_differences"):
        if not isinstance(entry.get(key) or [], list):
            raise ValueError(f"{key} must be a list")
    return CaseResult(
        case_id=entry["case_id"],
        version=entry.get("version"),
        name=str(entry.get("name") or entry["case_id"]),
        verdict=entry["verdict"],
        reasons=[str(r) for r in entry.get("reasons") or ()],
        output=entry.get("output"),
        expected_output=entry.get("expected_output"),
        diff=entry.get("diff"),
        report=report,
        duration=float(entry.get("duration_s") or 0.0),
        trace_id=entry.get("trace_id"),
        entrypoint=entry.get("entrypoint"),
        traceback=entry.get("traceback"),
        output_differences=list(entry.get("output_differences") or ()),
        agent_version=entry.get("agent_version"),
        tags=[str(t) for t in entry.get("tags") or ()],
        error=dict(error) if isinstance(error, Mapping) else None,
        faults=[dict(f) for f in entry["faults"] if isinstance(f, Mapping)]
        if isinstance(entry.get("faults"), list)
        else None,
    )


def _read_report(path: Path) -> tuple[dict[str, Any], list[CaseResult]]:
    """A JSON report's summary and cases; ConfigError saying what is wrong with the file."""
    from tracely_sdk._runner import VERDICTS

    def bad(problem: str) -> ConfigError:
        return ConfigError(
            f"{path} is not a tracely replay report ({problem}): merge the files "
            "`tracely replay --json FILE` wrote"
        )

    try:
        doc = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read the report {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise bad(f"not JSON: {exc}") from None
    if not isinstance(doc, Mapping):
        raise bad("not a JSON object")
    if doc.get("schema") != REPORT_SCHEMA and doc.get("format") != REPORT_FORMAT:
        raise bad(f'no "schema": "{REPORT_SCHEMA}"')
    summary, cases = doc.get("summary"), doc.get("cases")
    if not isinstance(summary, Mapping) or not isinstance(cases, list):
        raise bad('"summary" must be an object and "cases" a list')
    results = []
    for n, entry in enumerate(cases):
        if not (
            isinstance(entry, Mapping)
            and isinstance(entry.get("case_id"), str)
            and entry.get("verdict") in VERDICTS
        ):
            raise bad(f"case #{n + 1} has no case_id or no verdict")
        try:
            results.append(_result_of_entry(entry))
        except (TypeError, ValueError) as exc:
            raise bad(f"case {entry['case_id']!r}: {exc}") from None
    return dict(summary), results


def _check_shards(reports: Sequence[tuple[Path, Mapping[str, Any], int]]) -> None:
    """Every shard of one sharded run, each once, holding between them every selected case."""
    if all(summary.get("shard") is None for _, summary, _ in reports):
        return
    shards: list[tuple[Path, Mapping[str, Any], int]] = []
    unsharded = []
    for path, summary, n in reports:
        shard = summary.get("shard")
        if isinstance(shard, Mapping) and all(
            type(shard.get(k)) is int for k in ("index", "count")
        ):
            shards.append((path, shard, n))
        else:
            unsharded.append(str(path))
    if unsharded:
        raise ConfigError(
            f"{unsharded[0]} is not the report of a shard, but other reports are: merge the "
            "reports of the shards of one run (`tracely replay --shard K/N --json FILE`)"
        )
    counts = {s["count"] for _, s, _ in shards}
    selected = {s.get("selected") for _, s, _ in shards}
    if len(counts) != 1 or len(selected) != 1:
        raise ConfigError(
            "the reports are shards of different runs (their N in K/N, or the cases selected, "
            "differ): merge the reports of one run's shards"
        )
    (count,) = counts
    seen: dict[Any, Path] = {}
    for path, shard, _ in shards:
        if shard["index"] in seen:
            raise ConfigError(
                f"{seen[shard['index']]} and {path} are both shard {shard['index']}/{count}"
            )
        seen[shard["index"]] = path
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in seen]
    if missing:
        raise ConfigError(
            f"the report of shard {', '.join(missing)} is missing: a merged gate must hold "
            "every shard's report, or cases would pass by not being run"
        )
    (total,) = selected
    held = sum(n for _, _, n in shards)
    if isinstance(total, int) and held != total:
        raise ConfigError(
            f"the shards hold {held} cases between them, but {total} were selected: the "
            "shards replayed different suites (the same store or case directory, and the "
            "same filters, for every shard)"
        )


def merge_reports(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[CaseResult], float]:
    """The cases of JSON reports (the shards of one run, or separate runs) as one run, and its
    duration (the longest report's: shards run side by side).

    Raises ConfigError when a file is not a report, a case is in two reports, or the reports
    are shards (``--shard``) but not every shard of one run, each once.
    """
    read = []
    for path in map(Path, paths):
        summary, results = _read_report(path)
        read.append((path, summary, results))
    _check_shards([(path, summary, len(results)) for path, summary, results in read])
    merged: dict[str, tuple[Path, CaseResult]] = {}
    for path, _, results in read:
        for result in results:
            if result.case_id in merged:
                raise ConfigError(
                    f"case {result.case_id!r} is in both {merged[result.case_id][0]} and {path}: "
                    "merge each report once, and the reports of one run's shards"
                )
            merged[result.case_id] = (path, result)
    elapsed = max((float(s.get("duration_s") or 0.0) for _, s, _ in read), default=0.0)
    return in_case_order(r for _, r in merged.values()), elapsed


# -- HTML ----------------------------------------------------------------------------------


def write_html(
    results: Sequence[CaseResult],
    path: str | os.PathLike[str],
    elapsed: float | None = None,
    *,
    store: str | None = None,
) -> Path:
    """Write the run as one self-contained HTML file (no network: style and script inline).

    The summary, a cases table filterable by verdict and searchable by id, name and tag, and a
    page per case: its reasons, each recorded call beside what the replay did, and the output
    against the expected output. ``store`` is where the cases came from.
    """
    from tracely_sdk._html import report_document

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    document = report_document(
        json_report(results, elapsed), store=store, tracely_version=__version__
    )
    target.write_text(document, encoding="utf-8")
    return target


# -- the run kept in the store --------------------------------------------------------------


def otlp_endpoint(environ: Mapping[str, str] | None = None) -> str | None:
    """Where this process exports its spans over OTLP (password hidden), or None: the
    standard variables, as the OpenTelemetry SDK reads them."""
    env = os.environ if environ is None else environ
    exporters = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters and "otlp" not in {e.strip() for e in exporters.split(",")}:
        return None
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        value = env.get(name, "").strip()
        if value:
            return redact_url(value)
    return None


def run_of(
    results: Sequence[CaseResult],
    *,
    started_at: int,
    elapsed: float | None = None,
    source: str | None = None,
    environ: Mapping[str, str] | None = None,
    mode: str | None = None,
) -> Run:
    """The run to keep in the store: the summary, and each case as in the JSON report (with
    its traceback), bounded in size by :class:`~tracely_sdk.store.Run`."""
    summary = summarize(results, elapsed)
    return Run(
        id=new_run_id(),
        started_at=started_at,
        duration_s=summary["duration_s"],
        mode=mode or summary["mode"],
        ok=summary["ok"],
        summary=summary,
        source=source,
        otlp_endpoint=otlp_endpoint(environ),
        tracely_version=__version__,
        cases=tuple(case_entry(r) for r in in_case_order(results)),
    )


# -- JUnit ---------------------------------------------------------------------------------


def _xml_text(text: Any) -> str:
    return _XML_INVALID.sub("\ufffd", str(text))


def _details(result: CaseResult) -> str:
    parts = list(result.reasons)
    shown = difference_lines(result.diff, result.divergences)
    if shown:
        parts += ["", *shown]
    if result.traceback:
        parts += ["", result.traceback.rstrip()]
    return "\n".join(parts)


def junit_xml(
    results: Sequence[CaseResult], *, suite: str = "tracely replay", elapsed: float | None = None
) -> bytes:
    """A JUnit XML document: one ``<testcase>`` per case, named by case id.

    FAIL, INCOMPLETE and a LENIENT run with reasons are ``<failure>``s, ERRORED is an
    ``<error>``; the ``type`` attribute is the verdict and the ``message`` the first reason. Each
    test case carries its verdict, case version and trace id as ``<properties>``.
    """
    s = summarize(results, elapsed)
    failures = sum(1 for r in results if not r.ok and r.verdict not in (ERRORED, NOT_RUN))
    errors = s["errored"]
    derived = [row for r in results for row in r.faults or () if row.get("verdict") != "SKIPPED"]
    attrs = {
        "name": suite,
        "tests": str(s["total"] + len(derived)),
        "failures": str(failures + sum(1 for row in derived if row.get("gates"))),
        "errors": str(errors),
        "skipped": str(s["not_run"]),
        "time": f"{s['duration_s']:.6f}",
    }
    root = ET.Element("testsuites", attrs)
    testsuite = ET.SubElement(
        root,
        "testsuite",
        {**attrs, "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")},
    )
    for r in in_case_order(results):
        classname = f"tracely.{r.entrypoint}" if r.entrypoint else "tracely"
        case = ET.SubElement(
            testsuite,
            "testcase",
            {
                "classname": _xml_text(classname),
                "name": _xml_text(r.case_id),
                "time": f"{r.duration:.6f}",
            },
        )
        props = ET.SubElement(case, "properties")
        for name, value in (
            ("tracely.verdict", r.verdict),
            ("tracely.case.name", r.name),
            ("tracely.case.version", r.version),
            ("tracely.trace_id", r.trace_id),
        ):
            if value is not None:
                ET.SubElement(props, "property", {"name": name, "value": _xml_text(value)})
        _junit_faults(testsuite, r, classname)
        if r.ok:
            continue
        message = r.reasons[0] if r.reasons else r.verdict
        if r.verdict == NOT_RUN:
            ET.SubElement(case, "skipped", {"message": _xml_text(message)})
            continue
        tag = "error" if r.verdict == ERRORED else "failure"
        element = ET.SubElement(case, tag, {"type": r.verdict, "message": _xml_text(message)})
        element.text = _xml_text(_details(r))
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"


def _junit_faults(testsuite: ET.Element, result: CaseResult, classname: str) -> None:
    """A ``<testcase>`` per derived run of ``result`` (``replay --faults``), named
    ``CASE [CALL / KIND]``: a ``<failure>`` when the project's ``fail_on`` gates its verdict,
    otherwise passed, with the verdict and what the agent did next as properties."""
    for row in result.faults or ():
        if row.get("verdict") == "SKIPPED":
            continue
        case = ET.SubElement(
            testsuite,
            "testcase",
            {
                "classname": _xml_text(classname),
                "name": _xml_text(f"{result.case_id} [{row.get('call')} / {row.get('fault')}]"),
                "time": f"{float(row.get('duration_s') or 0):.6f}",
            },
        )
        props = ET.SubElement(case, "properties")
        for name, value in (
            ("tracely.fault.verdict", row.get("verdict")),
            ("tracely.fault.call", row.get("call")),
            ("tracely.fault.kind", row.get("fault")),
            ("tracely.fault.next", row.get("next")),
        ):
            if value is not None:
                ET.SubElement(props, "property", {"name": name, "value": _xml_text(value)})
        if row.get("gates"):
            reasons = [str(x) for x in row.get("reasons") or ()]
            element = ET.SubElement(
                case,
                "failure",
                {
                    "type": str(row.get("verdict")),
                    "message": _xml_text(reasons[0] if reasons else ""),
                },
            )
            element.text = _xml_text(
                "\n".join([*reasons, "", str(row.get("traceback") or "")]).rstrip()
            )


def write_junit(
    results: Sequence[CaseResult], path: str | os.PathLike[str], elapsed: float | None = None
) -> Path:
    """Write :func:`junit_xml` to ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(junit_xml(results, elapsed=elapsed))
    return target


# -- Markdown ------------------------------------------------------------------------------

_ICONS = {PASS: "✅", FAIL: "❌", INCOMPLETE: "⚠️", ERRORED: "💥", LENIENT: "🟡", NOT_RUN: "⏹️"}


def _cell(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def markdown_summary(
    results: Sequence[CaseResult], elapsed: float | None = None, *, html_url: str | None = None
) -> str:
    """The run as Markdown: a summary line, a verdict table, and the diffs of failed cases;
    with ``html_url``, a link to the HTML report there."""
    lines = [f"### tracely replay: {summary_line(results, elapsed)}", ""]
    if html_url:
        link = html_url.replace("(", "%28").replace(")", "%29").replace(" ", "%20")
        lines += [f"[The full report, call by call]({link})", ""]
    if results:
        lines += ["| Case | Version | Verdict | Reasons |", "| --- | --- | --- | --- |"]
        for r in in_case_order(results):
            reasons = "<br>".join(_cell(x) for x in r.reasons) or "—"
            version = "" if r.version is None else str(r.version)
            lines.append(
                f"| `{_cell(r.case_id)}` | {version} | {_ICONS.get(r.verdict, '')} {r.verdict} | {reasons} |"
            )
        lines.append("")
    for r in in_case_order(results):
        shown = difference_lines(r.diff, r.divergences)
        if shown:
            lines += [
                f"<details><summary>{_cell(r.case_id)}: what differed</summary>",
                "",
                "```",
                "\n".join(shown).replace("```", "`\u200b``"),
                "```",
                "",
                "</details>",
                "",
            ]
    return "\n".join(lines) + "\n"


def append_step_summary(
    results: Sequence[CaseResult],
    environ: Mapping[str, str] | None = None,
    elapsed: float | None = None,
    *,
    html_url: str | None = None,
) -> Path | None:
    """Append :func:`markdown_summary` to ``$GITHUB_STEP_SUMMARY`` when it is set; the path or None."""
    env = os.environ if environ is None else environ
    target = env.get(GITHUB_STEP_SUMMARY, "").strip()
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(markdown_summary(results, elapsed, html_url=html_url))
    return path
