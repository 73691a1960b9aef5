"""``tracely cases ...``: regression cases promoted from recorded traces, with their history."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from tracely_sdk.cli._output import rfc3339
from tracely_sdk.cli._traces import (
    add_trace_filters,
    calls_of,
    compact,
    format_input,
    format_time,
    shorten,
)

if TYPE_CHECKING:
    from tracely_sdk.cli import Context

__all__ = ["case_summary", "register"]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    cases = commands.add_parser(
        "cases",
        parents=[common],
        help="promote traces to regression cases and manage them",
        description="Regression cases: recorded runs promoted to tests that `tracely replay` "
        "replays hermetically. Recapturing keeps every earlier version.",
    )
    sub = cases.add_subparsers(dest="cases_command", metavar="COMMAND")
    sub.required = True

    def add(name: str, help_text: str, handler: Any, description: str | None = None) -> Any:
        p = sub.add_parser(
            name, parents=[common], help=help_text, description=description or help_text
        )
        p.set_defaults(handler=handler)
        return p

    p = add(
        "promote",
        "make recorded traces regression cases (version 1)",
        cmd_promote,
        "Make the recording of each TRACE_ID a regression case; or, with --latest, of the "
        "newest trace; or of every trace the filters select (--agent, --service, --since, "
        "--limit, as for `tracely traces list`). All are promoted in one store transaction: "
        "if one is refused, none is. --name, --entrypoint and --tag apply to each case; ids "
        "are the slug of the name, made unique with -2, -3, ... A case's input and expected "
        "output are its trace's root agent span's (tracely.agent(name, input=...) or "
        "@observe(as_type='agent')). A trace recorded without one (by `tracely run` or "
        "TRACELY_INSTRUMENT) is promoted by stating them: --input and --expected.",
    )
    p.add_argument(
        "trace_ids", metavar="TRACE_ID", nargs="*", help="the traces to promote (or choose below)"
    )
    p.add_argument(
        "--latest",
        action="store_true",
        help="the newest trace (with filters: the newest they select)",
    )
    add_trace_filters(p, limit=None)
    p.add_argument("--name", required=True, help="a human name for the case (each case)")
    p.add_argument(
        "--id",
        dest="case_id",
        metavar="ID",
        help="the case id (default: the slug of the name); one trace only",
    )
    p.add_argument(
        "--entrypoint",
        metavar="MODULE:FUNCTION",
        help="the agent function the case replays through (e.g. examples.weather_agent:run)",
    )
    p.add_argument(
        "--tag", dest="tags", action="append", default=[], metavar="TAG", help="a tag (repeatable)"
    )
    p.add_argument(
        "--input",
        metavar="JSON",
        help="for one trace recorded without an agent span: the arguments to replay it with "
        "(a JSON array: the positional arguments; an object: keyword arguments; any other "
        "value: the one argument), e.g. --input '[\"Paris\"]'",
    )
    p.add_argument(
        "--expected",
        metavar="JSON",
        help="with --input: what the entrypoint should return, as JSON (a trace without an "
        "agent span recorded no return value)",
    )
    p.add_argument(
        "--with-faults",
        nargs="?",
        const="",
        default=None,
        metavar="CALL:KIND,...",
        help="also keep derived robustness runs of each case promoted as reviewed cases of "
        "their own (needs --entrypoint): each is replayed through the agent as `tracely "
        "replay --faults` does ([tool.tracely.faults] kinds, retry and max_calls apply) and "
        "each HANDLED one is kept, or those the selectors choose: CALL is a call "
        "(llm:gpt-4o, 'tools:get_weather #1') and KIND a fault kind, both may use * (e.g. "
        "llm:*:rate_limit). A kept case's recording is the faulted one, its expected output "
        "what the agent answered; its id is the case's with the kind and call "
        "(paris-rate_limit-llm-gpt-4o-1), its tags the case's with fault and fault:KIND",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse (exit 2) a trace holding calls tracely could not record for replay "
        "(without it, they are listed as a warning)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="machine-readable output (for one TRACE_ID a case, else a list of them)",
    )

    p = add(
        "edit",
        "change a case's name, entrypoint or tags in place (kept in its history)",
        cmd_edit,
        "Change case ID's name, entrypoint or tags. The recording is unchanged; the edit is "
        "kept in the case's history as a new version whose note says what changed. A new "
        "entrypoint is checked as at promote time.",
    )
    p.add_argument("case_id", metavar="ID")
    p.add_argument("--name", help="the new name")
    p.add_argument(
        "--entrypoint",
        metavar="MODULE:FUNCTION",
        help="the new agent function ('' removes it: then replay needs --entrypoint)",
    )
    p.add_argument(
        "--tag",
        dest="tags",
        action="append",
        default=None,
        metavar="TAG",
        help="the new tags, replacing the old ones (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = add("list", "every case, by id", cmd_list)
    p.add_argument("--tag", help="only cases with this tag")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = add("show", "one case: its input, expected output and recorded calls", cmd_show)
    p.add_argument("case_id", metavar="ID")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = add("history", "every version of a case, oldest first", cmd_history)
    p.add_argument("case_id", metavar="ID")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = add(
        "delete",
        "delete a case and its whole history",
        cmd_delete,
        "Delete a case and its whole history. There is no undo: `tracely cases export DIR` first "
        "to keep a copy. On a terminal it asks first; elsewhere (a script, CI) it deletes "
        "only with --yes.",
    )
    p.add_argument("case_id", metavar="ID")
    p.add_argument("-y", "--yes", action="store_true", help="delete without asking")

    p = add(
        "recapture",
        "re-record a case from a newer run with the same input (bumps the version)",
        cmd_recapture,
        "Re-record case CASE_ID from the run TRACE_ID. The trace must have the same input as the "
        "case (compared canonically); otherwise nothing changes. Earlier versions are kept.",
    )
    p.add_argument("case_id", metavar="CASE_ID")
    p.add_argument("trace_id", metavar="TRACE_ID")
    p.add_argument("--note", help="why the case was re-recorded (kept in its history)")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = add(
        "export",
        "write one reviewable JSON file per case to DIR",
        cmd_export,
        "Write DIR/<case id>.json for every case: the case and its whole history, with stable "
        "key order, suitable for committing.",
    )
    p.add_argument("directory", metavar="DIR")

    p = add(
        "import",
        "read case files from DIR into the store",
        cmd_import,
        "Import every case file in DIR (as written by `tracely cases export`). All files are "
        "checked first; if one is malformed nothing is imported.",
    )
    p.add_argument("directory", metavar="DIR")

    p = add(
        "reseal",
        "seal case files edited by hand, printing the fields that changed",
        cmd_reseal,
        "A case file carries a checksum over everything replay uses (entrypoint, input, "
        "expected output, recorded calls); a file that does not match it is refused. After "
        "editing FILE on purpose, review the change and reseal it: the file is checked as an "
        "import would, its new checksum written, and the fields that changed printed. A "
        "recording (a history entry's bundle) has a checksum of its own, and an edit inside "
        "it is refused unless --accept-recording-edit is given.",
    )
    p.add_argument("files", metavar="FILE", nargs="+")
    p.add_argument(
        "--accept-recording-edit",
        action="store_true",
        help="also seal a recording changed by hand, after printing what changed in it "
        "(compared with the store's copy of that case version or trace, when it has one)",
    )


def case_summary(case: Any) -> dict[str, Any]:
    """A case's listing fields, with the stable names of the JSON output."""
    return {
        "case_id": case.id,
        "name": case.name,
        "version": case.version,
        "entrypoint": case.entrypoint,
        "tags": list(case.tags),
        "source_trace_id": case.source_trace_id,
        "created_at": rfc3339(case.created_at),
        "updated_at": rfc3339(case.updated_at),
    }


def _case_detail(case: Any) -> dict[str, Any]:
    data = case_summary(case)
    data["input"] = case.input
    data["expected_output"] = case.expected_output
    data["calls"] = calls_of(case.bundle)
    data["bundle"] = case.bundle
    return data


def cmd_promote(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk._entrypoints import placeholder_api_keys
    from tracely_sdk._runner import check_entrypoint
    from tracely_sdk.cli import EXIT_FAILED, EXIT_USAGE
    from tracely_sdk.store._base import Promotion, unreplayable_calls
    from tracely_sdk.store._model import dumps_json

    store = ctx.store(create=False)
    selectors = _fault_selectors(args)
    recordings = _chosen_recordings(args, ctx, store)
    stated = _stated_run(args, recordings)
    if args.entrypoint is not None:
        placeholder_api_keys()
        checked: set[str] = set()
        for recording in recordings:
            given = stated.input if stated is not None else recording.input
            if given is not None and dumps_json(given) not in checked:
                check_entrypoint(args.entrypoint, given)
                checked.add(dumps_json(given))
    refused = False
    for recording in recordings:
        unreplayable = unreplayable_calls(recording.bundle)
        if not unreplayable:
            continue
        listed = "\n".join(f"  - {line}" for line in unreplayable)
        what = (
            f"trace {recording.trace_id} holds {len(unreplayable)} call(s) tracely could not "
            "record for replay; replaying the case reports INCOMPLETE where the run makes "
            f"them. Fix what each names and record the run again:\n{listed}"
        )
        if args.strict:
            ctx.out.error(what)
            refused = True
        else:
            ctx.out.note(f"warning: {what}")
    if refused:
        ctx.out.error("not promoted (--strict): no case was made")
        return EXIT_USAGE
    cases = store.promote_many(
        [
            Promotion(
                trace_id=r.trace_id,
                name=args.name,
                case_id=args.case_id,
                entrypoint=args.entrypoint,
                tags=tuple(args.tags),
                stated=stated,
            )
            for r in recordings
        ]
    )
    one = len(args.trace_ids) == 1
    kept: list[tuple[Any, dict[str, Any]]] = []
    if selectors is not None:
        kept, not_kept = _keep_fault_runs(store, cases, selectors)
    if args.json:
        if one and selectors is None:
            ctx.out.document("tracely.cases.promote/1", case_summary(cases[0]))
        elif selectors is None:
            ctx.out.document("tracely.cases.promote/1", {"cases": [case_summary(c) for c in cases]})
        else:
            ctx.out.document(
                "tracely.cases.promote/1",
                {
                    "cases": [case_summary(c) for c in cases],
                    "fault_cases": [
                        {
                            **case_summary(c),
                            "from_case": row["case_id"],
                            "call": row["call"],
                            "fault": row["fault"],
                            "verdict": row["verdict"],
                        }
                        for c, row in kept
                    ],
                    "not_kept": not_kept,
                },
            )
        return 0 if selectors is None or kept else EXIT_FAILED
    for recording, case in zip(recordings, cases, strict=True):
        ctx.out.line(
            f"promoted trace {recording.trace_id} as case {case.id} (version {case.version})"
        )
    if not one:
        ctx.out.line(f"{len(cases)} case{'s' if len(cases) != 1 else ''} promoted")
    if selectors is None:
        return 0
    for case, row in kept:
        ctx.out.line(
            f"kept {row['call']} / {row['fault']} of case {row['case_id']} ({row['verdict']}: "
            f"{row['next']}) as case {case.id}"
        )
    for row in not_kept:
        ctx.out.note(
            f"not kept: {row['call']} / {row['fault']} of case {row['case_id']} is "
            f"{row['verdict']} ({'; '.join(row['reasons']) or row['next']}); a case of it "
            "would not pass"
        )
    if not kept:
        ctx.out.error(
            "--with-faults kept no derived run: none was HANDLED"
            + (" among those the selectors choose" if selectors else "")
            + " (`tracely replay --faults` shows every verdict)"
        )
        return EXIT_FAILED
    return 0


def _fault_selectors(args: argparse.Namespace) -> tuple[tuple[str, str], ...] | None:
    """The derived runs --with-faults keeps: () for every HANDLED one, None without it."""
    from tracely_sdk._faults import parse_selectors
    from tracely_sdk.errors import ConfigError

    if args.with_faults is None:
        return None
    if not args.entrypoint:
        raise ConfigError(
            "--with-faults replays each promoted case's derived runs through its agent: give "
            "--entrypoint MODULE:FUNCTION"
        )
    if not args.with_faults.strip():
        return ()
    return parse_selectors(args.with_faults)


def _keep_fault_runs(
    store: Any, cases: list[Any], selectors: tuple[tuple[str, str], ...]
) -> tuple[list[tuple[Any, dict[str, Any]]], list[dict[str, Any]]]:
    """Run the derived runs of ``cases`` that ``selectors`` choose; store each HANDLED one as a
    case of its own. Returns the kept cases with their runs, and the runs not kept."""
    import time

    from tracely_sdk import _config
    from tracely_sdk._robustness import kept_runs
    from tracely_sdk._runner import ReplayCase, load_entrypoint
    from tracely_sdk.errors import NotFound
    from tracely_sdk.store._model import Case, CaseVersion, normalise_tags, slugify

    config = _config.resolve("faults")
    kept: list[tuple[Any, dict[str, Any]]] = []
    not_kept: list[dict[str, Any]] = []
    for case in cases:
        fn = load_entrypoint(case.entrypoint)
        for row, bundle in kept_runs(ReplayCase.of(case), fn, config, selectors):
            row = {**row, "case_id": case.id}
            if bundle is None:
                not_kept.append(
                    {
                        k: row.get(k)
                        for k in ("case_id", "call", "fault", "verdict", "reasons", "next")
                    }
                )
                continue
            base = slugify(f"{case.id} {row['fault']} {row['call']}")
            case_id, n = base, 1
            while _exists(store, case_id, NotFound):
                n += 1
                case_id = f"{base}-{n}"
            now = time.time_ns()
            fault_case = Case(
                id=case_id,
                name=f"{case.name} [{row['call']} / {row['fault']}]",
                entrypoint=case.entrypoint,
                input=case.input,
                expected_output=row["output"],
                bundle=bundle,
                source_trace_id=case.source_trace_id,
                version=1,
                tags=normalise_tags((*case.tags, "fault", f"fault:{row['fault']}")),
                created_at=now,
                updated_at=now,
            )
            note = (
                f"a robustness run of case {case.id} v{case.version}: {row['call']} / "
                f"{row['fault']} (retry {row['retry']}), {row['verdict']}: {row['next']}"
            )
            version = CaseVersion(
                case_id=case_id,
                version=1,
                input=fault_case.input,
                expected_output=fault_case.expected_output,
                bundle=bundle,
                source_trace_id=fault_case.source_trace_id,
                created_at=now,
                note=note,
            )
            kept.append((store.put_case(fault_case, [version]), row))
    return kept, not_kept


def _exists(store: Any, case_id: str, not_found: type[Exception]) -> bool:
    try:
        store.get_case(case_id)
    except not_found:
        return False
    return True


def _chosen_recordings(args: argparse.Namespace, ctx: Context, store: Any) -> list[Any]:
    """The recordings ``cases promote`` was asked for: by id, the newest, or by filter."""
    from tracely_sdk.cli._traces import select_recordings
    from tracely_sdk.errors import ConfigError

    filters = [
        f"--{name} {value}"
        for name, value in (("agent", args.agent), ("service", args.service))
        if value is not None
    ]
    if args.since is not None:
        filters.append(f"--since {format_time(args.since)}")
    if args.limit is not None:
        filters.append(f"--limit {args.limit}")
    if args.trace_ids:
        if args.latest or filters:
            raise ConfigError(
                "give either TRACE_IDs or --latest and filters (--agent, --service, --since, "
                "--limit) to choose traces, not both"
            )
        recordings = [store.get_recording(trace_id) for trace_id in args.trace_ids]
    elif not args.latest and not filters:
        raise ConfigError(
            "say which traces to promote: TRACE_ID ..., --latest (the newest), or filters "
            "(--agent, --service, --since, --limit) to promote every trace they select"
        )
    else:
        replayed: list[Any] = []

        def live(recording: Any) -> bool:
            if recording.replay_mode is not None:
                replayed.append(recording)
                return False
            return True

        limit = 1 if args.latest else args.limit
        recordings = select_recordings(store, args, limit=limit, keep=live)
        if replayed:
            ctx.out.note(
                f"left out {len(replayed)} trace(s) made by replay runs (they are not "
                "production recordings)"
            )
        if not recordings:
            chosen = " ".join((["--latest"] if args.latest else []) + filters)
            raise ConfigError(
                f"no recorded trace in {ctx.store_url or 'the store'} matches {chosen}: "
                "nothing promoted (`tracely traces list` shows what is there)"
            )
    if args.case_id is not None and len(recordings) > 1:
        raise ConfigError(
            f"--id names one case, but {len(recordings)} traces were chosen; leave --id out "
            "to name each case after --name"
        )
    return recordings


def _stated_run(args: argparse.Namespace, recordings: list[Any]) -> Any:
    """The ``--input``/``--expected`` of a trace recorded without an agent span, or None."""
    from tracely_sdk.errors import ConfigError
    from tracely_sdk.store._base import StatedRun

    if args.input is None:
        if args.expected is not None:
            raise ConfigError(
                "--expected goes with --input, for a trace recorded without an agent span; a "
                "trace with one has its recorded output as the expected output"
            )
        return None
    if len(recordings) != 1:
        raise ConfigError(
            f"--input states the input of one run, but {len(recordings)} traces were chosen: "
            "promote one trace with it"
        )
    if args.expected is None:
        raise ConfigError(
            "--input needs --expected JSON too: what the entrypoint should return for that "
            "input (a trace recorded without an agent span has no recorded return value), "
            "e.g. --expected '\"Sunny in Paris\"'"
        )
    value = _json_option("--input", args.input)
    if isinstance(value, list):
        call = {"args": value, "kwargs": {}}
    elif isinstance(value, dict):
        call = {"args": [], "kwargs": value}
    else:
        call = {"args": [value], "kwargs": {}}
    return StatedRun(input=call, expected_output=_json_option("--expected", args.expected))


def _json_option(option: str, text: str) -> Any:
    import orjson

    from tracely_sdk.errors import ConfigError

    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(
            f"{option} {text!r} is not JSON ({exc}); a string needs its quotes: "
            f"{option} '\"Paris\"'"
        ) from None


def cmd_edit(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk._entrypoints import placeholder_api_keys
    from tracely_sdk._runner import check_entrypoint
    from tracely_sdk.errors import ConfigError

    if args.name is None and args.entrypoint is None and args.tags is None:
        raise ConfigError("nothing to change: give --name, --entrypoint and/or --tag")
    store = ctx.store(create=False)
    before = store.get_case(args.case_id)
    if args.entrypoint:
        placeholder_api_keys()
        check_entrypoint(args.entrypoint, before.input)
    after = store.update_case(
        args.case_id, name=args.name, entrypoint=args.entrypoint, tags=args.tags
    )
    if args.json:
        data = case_summary(after)
        data["previous_version"] = before.version
        data["changed"] = after.version != before.version
        ctx.out.document("tracely.cases.edit/1", data)
    elif after.version == before.version:
        ctx.out.line(f"case {after.id} already is so; nothing changed")
    else:
        (last,) = store.case_history(after.id)[-1:]
        ctx.out.line(f"case {after.id} version {before.version} -> {after.version}: {last.note}")
    return 0


def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    cases = ctx.store(create=False).list_cases(tag=args.tag)
    if args.json:
        ctx.out.document("tracely.cases.list/1", {"cases": [case_summary(c) for c in cases]})
        return 0
    if not cases:
        ctx.out.note("no cases yet: `tracely cases promote TRACE_ID --name NAME`")
        return 0
    rows = [
        [
            c.id,
            str(c.version),
            c.name,
            c.entrypoint or "-",
            ",".join(c.tags) or "-",
            format_time(c.updated_at),
        ]
        for c in cases
    ]
    ctx.out.table(["CASE", "VERSION", "NAME", "ENTRYPOINT", "TAGS", "UPDATED"], rows, shrink=2)
    return 0


def cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    case = ctx.store(create=False).get_case(args.case_id)
    if args.json:
        ctx.out.document("tracely.cases.show/1", _case_detail(case))
        return 0
    ctx.out.fields(
        [
            ("case", case.id),
            ("name", case.name),
            ("version", str(case.version)),
            ("entrypoint", case.entrypoint or "- (pass --entrypoint to tracely replay)"),
            ("tags", ", ".join(case.tags) or "-"),
            ("source trace", case.source_trace_id or "-"),
            ("updated", format_time(case.updated_at)),
            ("input", format_input(case.input)),
            ("expected", compact(case.expected_output)),
        ]
    )
    ctx.out.line("")
    rows = []
    for call in calls_of(case.bundle):
        if call.get("error") is not None:
            result = f"error {call['error'].get('type')}: {call['error'].get('message')}"
        else:
            result = compact(call.get("output"))
        rows.append(["" if call["seq"] is None else str(call["seq"]), call["label"], result])
    if rows:
        ctx.out.table(["SEQ", "CALL", "RECORDED RESULT"], rows, shrink=2)
    else:
        ctx.out.line("no tool or LLM calls recorded")
    return 0


def cmd_history(args: argparse.Namespace, ctx: Context) -> int:
    versions = ctx.store(create=False).case_history(args.case_id)
    if args.json:
        ctx.out.document(
            "tracely.cases.history/1",
            {
                "case_id": args.case_id,
                "versions": [
                    {
                        "case_id": v.case_id,
                        "version": v.version,
                        "source_trace_id": v.source_trace_id,
                        "created_at": rfc3339(v.created_at),
                        "note": v.note,
                        "input": v.input,
                        "expected_output": v.expected_output,
                        "calls": calls_of(v.bundle),
                    }
                    for v in versions
                ],
            },
        )
        return 0
    rows = [
        [
            str(v.version),
            format_time(v.created_at),
            v.source_trace_id or "-",
            shorten(compact(v.expected_output), 48),
            v.note or "",
        ]
        for v in versions
    ]
    ctx.out.table(["VERSION", "CREATED", "SOURCE TRACE", "EXPECTED OUTPUT", "NOTE"], rows, shrink=4)
    return 0


def cmd_delete(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk.cli import EXIT_FAILED, EXIT_USAGE

    store = ctx.store(create=False)
    versions = len(store.case_history(args.case_id))
    if not args.yes:
        what = f"case {args.case_id} and its {versions} version{'s' if versions != 1 else ''}"
        answer = ctx.out.confirm(f"delete {what}? There is no undo.")
        if answer is None:
            ctx.out.error(
                f"not deleting {what} without a confirmation: no terminal to ask on; pass "
                "--yes to delete from a script"
            )
            return EXIT_USAGE
        if not answer:
            ctx.out.line("nothing deleted")
            return EXIT_FAILED
    store.delete_case(args.case_id)
    ctx.out.line(f"deleted case {args.case_id} ({versions} version{'s' if versions != 1 else ''})")
    return 0


def cmd_recapture(args: argparse.Namespace, ctx: Context) -> int:
    store = ctx.store(create=False)
    before = store.get_case(args.case_id)
    note = args.note or f"recaptured from trace {args.trace_id}"
    after = store.recapture(args.case_id, args.trace_id, note=note)
    if args.json:
        data = case_summary(after)
        data["previous_version"] = before.version
        data["changed"] = after.version != before.version
        ctx.out.document("tracely.cases.recapture/1", data)
    elif after.version == before.version:
        ctx.out.line(
            f"case {after.id} already is the recording of trace {args.trace_id} "
            f"(version {after.version}); nothing changed"
        )
    else:
        ctx.out.line(
            f"recaptured case {after.id} from trace {args.trace_id}: version {before.version} -> "
            f"{after.version}"
        )
    return 0


def cmd_export(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk.store import export_cases

    paths = export_cases(ctx.store(create=False), args.directory)
    ctx.out.line(
        f"exported {len(paths)} case file{'s' if len(paths) != 1 else ''} to {args.directory}"
    )
    return 0


def cmd_import(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk.store import import_cases

    cases = import_cases(ctx.store(), args.directory)
    ctx.out.line(
        f"imported {len(cases)} case{'s' if len(cases) != 1 else ''} from {args.directory}"
    )
    _note_refused_entrypoints(ctx, cases)
    return 0


def _note_refused_entrypoints(ctx: Context, cases: Any) -> None:
    """Say which imported cases name an entrypoint this project does not allow replay to run."""
    from tracely_sdk._entrypoints import EntrypointPolicy

    policy = EntrypointPolicy.for_project()
    for case in cases:
        reason = policy.refusal(case.entrypoint) if case.entrypoint else None
        if reason is not None:
            ctx.out.note(f"case {case.id}: {reason}; replay will report it ERRORED")


def cmd_reseal(args: argparse.Namespace, ctx: Context) -> int:
    from tracely_sdk.store import edited_recordings, reseal_case_file

    for path in args.files:
        if args.accept_recording_edit:
            for field, bundle in edited_recordings(path).items():
                _show_recording_edit(ctx, path, field, bundle)
        changed = reseal_case_file(path, accept_recording_edit=args.accept_recording_edit)
        if changed:
            ctx.out.line(f"resealed {path}: changed {', '.join(changed)}")
        else:
            ctx.out.line(f"{path}: already sealed, nothing changed")
    return 0


def _show_recording_edit(ctx: Context, path: str, field: str, bundle: dict[str, Any]) -> None:
    """Print what a hand edit changed in a recording: against the store's copy of the same
    case version, else of the trace it was recorded from; the calls it now holds when the
    store has neither."""
    from tracely_sdk._diff import diff_values, render

    original, source = _original_recording(ctx, path, field, bundle)
    ctx.out.line(f"{path}: {field}: the recording was edited by hand")
    if original is None:
        ctx.out.line("  no copy of it in the store to compare with; it now holds:")
        for call in calls_of(bundle):
            result = call.get("error") if call.get("error") is not None else call.get("output")
            ctx.out.line(f"  {call['label']}: {shorten(compact(result), 100)}")
        return
    original = {k: v for k, v in original.items() if k != "checksum"}
    differences, total = diff_values(original, bundle)
    ctx.out.line(f"  compared with {source}:")
    for line in render(differences, total - len(differences)):
        ctx.out.line(f"  {line}")


def _original_recording(
    ctx: Context, path: str, field: str, bundle: dict[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    from pathlib import Path

    import orjson

    from tracely_sdk.errors import ConfigError, StoreError

    try:
        doc = orjson.loads(Path(path).read_bytes())
        index = int(field[len("history[") : field.index("]")])
        entry = doc["history"][index]
        store = ctx.store(create=False)
        try:
            for version in store.case_history(doc["id"]):
                if version.version == entry.get("version"):
                    return dict(version.bundle), f"case {doc['id']} v{version.version} in the store"
        except StoreError:
            pass
        trace_id = bundle.get("trace_id")
        if isinstance(trace_id, str):
            return dict(store.get_recording(trace_id).bundle), f"trace {trace_id} in the store"
    except (ConfigError, StoreError, ValueError, KeyError, TypeError, OSError):
        pass  # no store, or not this case's: the edited recording is shown as it is
    return None, ""
