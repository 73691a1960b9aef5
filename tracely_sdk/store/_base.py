"""The store interface, and the rules every backend applies the same way.

A backend (SQLite here; the HTTP client and PostgreSQL in the server module) implements
:class:`Store`. The decisions themselves — whether a recording may become a case, what a
recapture writes, when a late bundle replaces an earlier one — are the functions below, so that
every backend answers the same request the same way.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from tracely_otel import Bundle, BundleFormatError, validate_bundle
from tracely_sdk._canonical import canonical_equal
from tracely_sdk.errors import Conflict, NotFound, StoreError
from tracely_sdk.store._model import (
    Case,
    CaseVersion,
    InvalidCase,
    Recording,
    Run,
    dumps_json,
    normalise_tags,
    slugify,
    validate_case_id,
    validate_entrypoint,
)
from tracely_sdk.store._outline import (
    CallOutline,
    CaseCalls,
    RecordedCalls,
    RecordingSummary,
    VersionSummary,
    calls_of,
    case_summary_of,
    entries_of,
    page_of,
    summary_of,
    version_summary_of,
)

__all__ = [
    "Promotion",
    "StatedRun",
    "Store",
    "check_call_input",
    "plan_edit",
    "plan_promotion",
    "plan_recapture",
    "unreplayable_calls",
]

_Made = TypeVar("_Made")


@dataclasses.dataclass(frozen=True)
class StatedRun:
    """The agent call of a trace recorded without one, as the person promoting it states it.

    A trace recorded by ``tracely run`` or ``TRACELY_INSTRUMENT`` (no code change, so no
    ``tracely.agent`` root span) holds the tool and LLM calls, but not the call of the agent
    function that made them: what to replay them through (``input``, the
    ``{"args": [...], "kwargs": {...}}`` the entrypoint is called with) and what it returned
    (``expected_output``).
    """

    input: Any
    expected_output: Any

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "expected_output": self.expected_output}


@dataclasses.dataclass(frozen=True)
class Promotion:
    """One trace to make a case of: what :meth:`Store.promote` takes, as a value, so that
    :meth:`Store.promote_many` can take many."""

    trace_id: str
    name: str
    case_id: str | None = None
    entrypoint: str | None = None
    tags: tuple[str, ...] = ()
    stated: StatedRun | None = None


class Store(abc.ABC):
    """Recordings and regression cases, behind a URL (see :func:`tracely_sdk.store.open_store`).

    Errors: a missing trace or case raises :class:`~tracely_sdk.errors.NotFound` naming it; a
    request that contradicts what is stored raises :class:`~tracely_sdk.errors.Conflict` and
    changes nothing; an unusable id/name/tag raises :class:`~tracely_sdk.store.InvalidCase`; any
    other failure of the backend raises :class:`~tracely_sdk.errors.StoreError`.
    """

    url: str

    # recordings ---------------------------------------------------------------------------

    @abc.abstractmethod
    def put_recording(self, recording: Recording) -> bool:
        """Store ``recording``; True if it was new or replaced a less complete one.

        Idempotent by trace id: the same content again is ignored (False). A later bundle of the
        same trace that reflects more spans replaces the stored one (late spans complete a
        recording); one that reflects no more spans is ignored.
        """

    def put_recordings(self, recordings: Iterable[Recording]) -> list[bool]:
        """:meth:`put_recording` for each; a backend may do it in one transaction."""
        return [self.put_recording(r) for r in recordings]

    @abc.abstractmethod
    def get_recording(self, trace_id: str) -> Recording:
        """The recording of ``trace_id``; NotFound if there is none."""

    @abc.abstractmethod
    def list_recordings(
        self,
        limit: int = 50,
        offset: int = 0,
        service: str | None = None,
        agent: str | None = None,
    ) -> list[Recording]:
        """Recordings newest first (by ``started_at``), optionally of one service or agent."""

    def recording_summaries(
        self,
        limit: int = 50,
        offset: int = 0,
        service: str | None = None,
        agent: str | None = None,
        *,
        cut: bool = True,
    ) -> list[RecordingSummary]:
        """:meth:`list_recordings` as a list of traces shows them: without their calls, the
        input, output, service and agent name cut (see :mod:`tracely_sdk.store._outline`);
        ``cut=False``: whole, with the replay mode and when each was received (``ended_at``
        is None). This reads whole recordings; a backend that can reads the summary only."""
        found = self.list_recordings(limit=limit, offset=offset, service=service, agent=agent)
        return [
            summary_of(r, cut=True) if cut else dataclasses.replace(summary_of(r), ended_at=None)
            for r in found
        ]

    def recording_calls(self, trace_id: str, offset: int = 0, limit: int = 20) -> RecordedCalls:
        """The facts of the recording of ``trace_id``, the outline of all its calls in the
        trace's order, and the whole entries of ``limit`` of them from ``offset``; NotFound if
        there is none. This reads the whole recording; a backend that can reads only those."""
        return calls_of(self.get_recording(trace_id), offset, limit)

    # cases --------------------------------------------------------------------------------

    @abc.abstractmethod
    def promote(
        self,
        trace_id: str,
        *,
        case_id: str | None = None,
        name: str,
        entrypoint: str | None = None,
        tags: Iterable[str] = (),
        stated: StatedRun | None = None,
    ) -> Case:
        """Make the recording of ``trace_id`` a regression case (version 1). See :func:`plan_promotion`."""

    @abc.abstractmethod
    def promote_many(self, promotions: Sequence[Promotion]) -> list[Case]:
        """Every promotion of ``promotions``, in one transaction: all the cases (in order), or,
        when one is refused, an error naming it and no case at all. Ids made from a name are
        unique across the batch (``-2``, ``-3``, ...), as one promotion after another makes them.
        """

    @abc.abstractmethod
    def get_case(self, case_id: str) -> Case:
        """The case ``case_id``; NotFound if there is none."""

    def case_calls(
        self, case_id: str, offset: int = 0, limit: int = 20
    ) -> tuple[list[CallOutline], list[Any]]:
        """The outline of every call of the case's current recording, in the trace's order,
        and the whole entries of ``limit`` of them from ``offset``; NotFound if there is no
        such case. This reads the whole case; a backend that can reads only those entries."""
        return page_of(self.get_case(case_id).bundle, offset, limit)

    def case_page(self, case_id: str, offset: int = 0, limit: int = 20) -> CaseCalls:
        """The case's facts without its recording, the outline of every call of its current
        recording, and the whole entries of ``limit`` of them from ``offset`` (what a case's
        page shows); NotFound if there is no such case. This reads the whole case; a backend
        that can reads only those entries."""
        case = self.get_case(case_id)
        outline, entries = page_of(case.bundle, offset, limit)
        return CaseCalls(case_summary_of(case), outline, offset, entries)

    def case_versions(self, case_id: str) -> list[VersionSummary]:
        """Every version of ``case_id`` without its values, oldest first; NotFound if there
        is no such case. This reads them whole; a backend that can reads their facts only."""
        return [version_summary_of(v) for v in self.case_history(case_id)]

    def case_version(self, case_id: str, version: int) -> CaseVersion:
        """Version ``version`` of ``case_id``; NotFound if there is none."""
        for v in self.case_history(case_id):
            if v.version == version:
                return v
        raise NotFound(f"case {case_id!r} has no version {version}")

    def version_entries(
        self, case_id: str, version: int, calls: Sequence[CallOutline]
    ) -> tuple[Any, list[Any]]:
        """Version ``version`` of ``case_id``'s expected output, and the entries of its
        recording at the places of ``calls`` (their kind, name and index; None where it has
        none). This reads the version whole; a backend that can reads only those entries."""
        v = self.case_version(case_id, version)
        return v.expected_output, entries_of(v.bundle, calls)

    @abc.abstractmethod
    def list_cases(
        self, tag: str | None = None, *, limit: int | None = None, offset: int = 0
    ) -> list[Case]:
        """Every case (or every case with ``tag``), by id; ``limit`` of them from ``offset``."""

    def cases_for_replay(
        self, make: Callable[..., _Made], *, tag: str | None = None, case_id: str | None = None
    ) -> list[_Made | Case]:
        """The cases replay runs: the case ``case_id`` (NotFound if there is none), else every
        case (or every case with ``tag``), by id.

        A backend that can prove a stored case sound from its row alone builds the runner's
        case itself: ``make(id=, name=, version=, entrypoint=, input=, expected_output=,
        bundle=, tags=, source_trace_id=)``, the fields as a :class:`Case` would hold them.
        Every other case is the :class:`Case` that :meth:`get_case` reads (with its
        ``problem``, or the error it raises). This reads them all as Cases.
        """
        if case_id is not None:
            return [self.get_case(case_id)]
        return list(self.list_cases(tag=tag))

    @abc.abstractmethod
    def case_history(self, case_id: str) -> list[CaseVersion]:
        """Every version of ``case_id``, oldest first."""

    @abc.abstractmethod
    def recapture(self, case_id: str, trace_id: str, *, note: str | None = None) -> Case:
        """Re-record ``case_id`` from the run ``trace_id`` (same input). See :func:`plan_recapture`."""

    @abc.abstractmethod
    def update_case(
        self,
        case_id: str,
        *,
        name: str | None = None,
        tags: Iterable[str] | None = None,
        entrypoint: str | None = None,
    ) -> Case:
        """Change a case's name, tags or entrypoint (``None`` keeps it; ``entrypoint=""`` clears it).

        The recording is unchanged; the change is kept in the case's history as a new version
        whose note says what changed (see :func:`plan_edit`). Changing nothing writes nothing.
        """

    @abc.abstractmethod
    def delete_case(self, case_id: str) -> None:
        """Remove the case and its whole history; there is no undo (export first to keep it)."""

    @abc.abstractmethod
    def put_case(self, case: Case, history: Sequence[CaseVersion]) -> Case:
        """Store ``case`` with exactly ``history``, replacing any case with its id (import)."""

    # replay runs --------------------------------------------------------------------------

    @abc.abstractmethod
    def save_run(self, run: Run) -> None:
        """Keep the results of a replay run. Saving the same run again changes nothing; a
        different run with a stored run's id raises Conflict."""

    @abc.abstractmethod
    def get_run(self, run_id: str) -> Run:
        """The run ``run_id`` with its cases; NotFound if there is none."""

    @abc.abstractmethod
    def list_runs(self, limit: int = 20, offset: int = 0, trace_id: str | None = None) -> list[Run]:
        """Runs newest first, without their cases (:meth:`get_run` has them); with
        ``trace_id``, only the runs one of whose cases made that replay trace."""

    # the pages' sign-in sessions (the server's; a store that cannot share them refuses) ---

    def create_session(self, session: str, token: str, expires_at: int) -> None:
        """Keep a sign-in session: ``session`` and ``token`` are hashes (hex), ``expires_at``
        ns since the epoch. Expired sessions are let go of."""
        raise StoreError(f"the store {self.url} keeps no sign-in sessions")

    def session_token(self, session: str, now: int) -> str | None:
        """The token hash of a session that has not expired at ``now``, else None."""
        raise StoreError(f"the store {self.url} keeps no sign-in sessions")

    def delete_session(self, session: str) -> None:
        """End a session (signing out); ending one that is gone is not an error."""
        raise StoreError(f"the store {self.url} keeps no sign-in sessions")

    # lifecycle ----------------------------------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None:
        """Release the backend's resources; closing twice is harmless."""

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {getattr(self, 'url', '?')}>"


# the shared rules -------------------------------------------------------------------------


def check_page(limit: int, offset: int) -> None:
    """ValueError unless ``limit`` and ``offset`` are whole numbers from 0, as a page needs."""
    for what, n in (("limit", limit), ("offset", offset)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"{what} must be a non-negative integer, got {n!r}")


def check_recorded(
    recording: Recording, stated: StatedRun | None = None, *, promoting: bool = True
) -> Bundle:
    """The recording's validated bundle, or Conflict saying why it cannot be a case.

    A recording without an agent input needs ``stated`` when promoting (and one with an input
    refuses it: the recorded call is the case's); a recapture needs the recorded input."""
    trace = recording.trace_id
    if recording.replay_mode is not None:
        raise Conflict(
            f"trace {trace} was made by a replay run ({recording.replay_mode} mode): a replayed "
            "run is not a production recording; promote or recapture from a live run"
        )
    if recording.input is None and stated is None:
        stating = (
            ", or state what to replay it through: `tracely cases promote TRACE_ID --input "
            "JSON --expected JSON --entrypoint MODULE:FUNCTION`"
            if promoting
            else " (a recapture compares the case's input with the one the trace recorded)"
        )
        raise Conflict(
            f"trace {trace} has no recorded agent input (it was recorded without an agent "
            "span, e.g. by `tracely run` or TRACELY_INSTRUMENT): record the run under "
            f"`tracely.agent(name, input=...)` or `@observe(as_type='agent')`{stating}"
        )
    if recording.input is not None and stated is not None:
        raise Conflict(
            f"trace {trace} has a recorded agent input, {dumps_json(recording.input)}, which "
            "is the case's; an input and expected output are given only for a trace recorded "
            "without an agent span"
        )
    try:
        bundle = validate_bundle(recording.bundle)
    except BundleFormatError as exc:
        raise Conflict(f"trace {trace} is not a usable recording: {exc}") from exc
    # A call that could not be recorded is named, and replay reports it as INCOMPLETE where
    # the run makes it; calls whose spans never arrived are not even named, so the order of
    # what was kept is not the run's: such a recording is not a case.
    for item in bundle.get("incomplete") or ():
        if item["label"] in _LOST_LABELS:
            raise Conflict(
                f"trace {trace} is not a whole recording: {item['reason']}; promote or "
                "recapture a trace whose spans all arrived"
            )
    return bundle


_LOST_LABELS = frozenset({"tools", "llm", "calls"})


# What fixes a reason the extractor gives without saying it (the others name their fix).
_FIXES = {
    "the call ended without a recorded output": "its span ended before the result was "
    "recorded (the call was cancelled, or the process exited mid-call): record a run where "
    "the call completes",
    "the span has no integrity digest (tracely.digest); it was not recorded by tracely": (
        "record the call through tracely: tracely.init(instrument=...) for a provider SDK or "
        "MCP, or tracely.call_tool/call_llm around your own function"
    ),
}


def unreplayable_calls(bundle: Mapping[str, Any]) -> list[str]:
    """One line per call the recording saw but cannot serve on replay: its label, why, and
    the setting or method that would have recorded it (replay of such a case is INCOMPLETE
    where the run makes the call)."""
    out: list[str] = []
    for item in bundle.get("incomplete") or ():
        if not isinstance(item, Mapping) or item.get("label") in _LOST_LABELS:
            continue  # lost spans: such a recording is refused as a whole (check_recorded)
        reason = str(item.get("reason"))
        fix = _FIXES.get(reason)
        out.append(f"{item.get('label')}: {reason}" + (f"; {fix}" if fix else ""))
    return out


def plan_promotion(
    recording: Recording,
    *,
    case_id: str | None,
    name: str,
    entrypoint: str | None,
    tags: Iterable[str],
    now: int,
    exists: Callable[[str], bool],
    stated: StatedRun | None = None,
) -> tuple[Case, CaseVersion]:
    """The case (version 1) and its first history entry that promoting ``recording`` writes.

    Refuses (Conflict) a recording made by a replay run, one without an agent input (unless
    ``stated`` gives it, with the expected output), one whose bundle fails validation, and an
    explicit ``case_id`` that is taken. Without ``case_id`` the id is the slug of ``name``,
    made unique with ``-2``, ``-3``, ...
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidCase(f"a case needs a non-empty name, got {name!r}")
    validate_entrypoint(entrypoint)
    tag_tuple = normalise_tags(tags)
    if stated is not None:
        check_call_input(stated.input)
    bundle = check_recorded(recording, stated)
    if case_id is not None:
        validate_case_id(case_id)
        if exists(case_id):
            raise Conflict(f"case {case_id} already exists; choose another id or recapture it")
    else:
        base = slugify(name)
        case_id, n = base, 1
        while exists(case_id):
            n += 1
            case_id = f"{base}-{n}"
    case = Case(
        id=case_id,
        name=name,
        entrypoint=entrypoint,
        input=recording.input if stated is None else stated.input,
        expected_output=recording.output if stated is None else stated.expected_output,
        bundle=bundle,
        source_trace_id=recording.trace_id,
        version=1,
        tags=tag_tuple,
        created_at=now,
        updated_at=now,
    )
    note = f"promoted from trace {recording.trace_id}"
    if stated is not None:
        note += " (recorded without an agent span; input and expected output as stated)"
    return case, _version_of(case, now, note)


def check_call_input(value: Any) -> None:
    """InvalidCase unless ``value`` is an agent call's input: ``{"args": [...], "kwargs": {...}}``."""
    if (
        not isinstance(value, Mapping)
        or set(value) != {"args", "kwargs"}
        or not isinstance(value["args"], list)
        or not isinstance(value["kwargs"], Mapping)
        or not all(isinstance(k, str) for k in value["kwargs"])
    ):
        raise InvalidCase(
            f'a stated input must be {{"args": [...], "kwargs": {{...}}}}, got {dumps_json(value)}'
        )


def plan_recapture(
    case: Case, recording: Recording, *, note: str | None, now: int
) -> tuple[Case, CaseVersion] | None:
    """The next version of ``case`` recorded from ``recording``, or None if it already is that.

    The recording must be a production recording (as for promotion) of the same input, compared
    canonically (key order and tuple/list ignored); a different input raises Conflict showing
    both. Recapturing from the trace and bundle the case already holds changes nothing (None).
    """
    bundle = check_recorded(recording, promoting=False)
    if not canonical_equal(recording.input, case.input):
        raise Conflict(
            f"trace {recording.trace_id} ran with a different input than case {case.id}: "
            f"the case's input is {dumps_json(case.input)}, the trace's is "
            f"{dumps_json(recording.input)}; recapture needs the same input "
            "(promote the trace as a new case instead)"
        )
    if recording.trace_id == case.source_trace_id and dumps_json(bundle) == dumps_json(case.bundle):
        return None
    new = Case(
        id=case.id,
        name=case.name,
        entrypoint=case.entrypoint,
        input=recording.input,
        expected_output=recording.output,
        bundle=bundle,
        source_trace_id=recording.trace_id,
        version=case.version + 1,
        tags=case.tags,
        created_at=case.created_at,
        updated_at=max(now, case.updated_at),
    )
    return new, _version_of(new, new.updated_at, note)


def plan_edit(
    case: Case, changes: Mapping[str, Any], *, now: int
) -> tuple[Case, CaseVersion] | None:
    """The case with ``changes`` (name, entrypoint, tags) applied, and its history entry.

    The recording (input, expected output, bundle, source trace) is unchanged; the version goes
    up by one so that the history shows when the case started to run differently, with a note
    naming each old and new value. None when nothing would change.
    """
    edited = [
        f"{field} {_shown(getattr(case, field))} -> {_shown(value)}"
        for field, value in changes.items()
        if getattr(case, field) != value
    ]
    if not edited:
        return None
    new = dataclasses.replace(
        case, **changes, version=case.version + 1, updated_at=max(now, case.updated_at)
    )
    return new, _version_of(new, new.updated_at, "edited: " + "; ".join(edited))


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return "-" if value is None else repr(value)


def check_history(case: Case, history: Sequence[CaseVersion]) -> list[CaseVersion]:
    """``history`` sorted by version, checked to belong to ``case`` and to end at its content."""
    if not history:
        raise InvalidCase(f"case {case.id}: the history must hold at least the current version")
    ordered = sorted(history, key=lambda v: v.version)
    seen: set[int] = set()
    for v in ordered:
        if v.case_id != case.id:
            raise InvalidCase(
                f"case {case.id}: history entry v{v.version} belongs to case {v.case_id}"
            )
        if v.version in seen:
            raise InvalidCase(f"case {case.id}: version {v.version} appears twice in the history")
        seen.add(v.version)
        try:
            validate_bundle(v.bundle)
        except BundleFormatError as exc:
            raise InvalidCase(f"case {case.id} v{v.version}: {exc}") from exc
    last = ordered[-1]
    if last.version != case.version:
        raise InvalidCase(
            f"case {case.id} is at version {case.version} but its history ends at v{last.version}"
        )
    current = (case.input, case.expected_output, case.bundle, case.source_trace_id)
    recorded = (last.input, last.expected_output, last.bundle, last.source_trace_id)
    if dumps_json(current) != dumps_json(recorded):
        raise InvalidCase(
            f"case {case.id}: its input/expected_output/bundle/source_trace_id differ from its "
            f"history's v{last.version}"
        )
    return ordered


def _version_of(case: Case, created_at: int, note: str | None) -> CaseVersion:
    return CaseVersion(
        case_id=case.id,
        version=case.version,
        input=case.input,
        expected_output=case.expected_output,
        bundle=case.bundle,
        source_trace_id=case.source_trace_id,
        created_at=created_at,
        note=note,
    )
