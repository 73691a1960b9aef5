"""The matcher: which recorded entry answers a call. One implementation for every path.

Rules (from the recording's point of view):

- A tool entry recorded without args matches by order: the next unused entry of that name.
- Otherwise the call's args and the entry's args are canonicalised and compared for equality;
  the first unused entry of that name that is args-less or equal answers the call.
- An LLM call is looked up by model id, falling back to the next recorded LLM call of any name
  (auto-instrumentor span names are not model ids). It is served in order even when its input
  differs from the recording; the difference is reported as divergence, not hidden.
- The call's masks (``_masks``: the project's and its own ``ignore=``) are applied to both
  canonical values before they are compared, for matching and for divergence alike.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import orjson

from tracely_otel import Bundle, RecordedError
from tracely_sdk._canonical import (
    canonical,
    canonical_equal_json,
    canonical_from_json,
    canonical_json_bytes,
    sorted_json,
)
from tracely_sdk._diff import Difference, diff_values, render
from tracely_sdk._masks import Masks
from tracely_sdk._types import dumps
from tracely_sdk.errors import BundleError

TOOLS = "tools"
LLM = "llm"
_NON_STR_KEYS = orjson.OPT_NON_STR_KEYS
_SORT_KEYS = orjson.OPT_SORT_KEYS
_MAX_DIFFERENCES = 5
_MISS_WIDTH = 60  # a miss's message lists several entries on one line
_UNMADE: Any = object()  # an Entry's key or output text not made yet
_ABSENT: Any = object()


class CallKey:
    """A call's args or input as the matcher compares them.

    Two keys are equal when their values are canonically equal. The canonical form costs a
    parse and a sorted dump, so it is made only when the recorded JSON texts differ: equal
    texts hold equal values, and a replayed call usually passes exactly what was recorded.
    A call's key carries the call's masks (``masks``), which :meth:`matches` applies to both
    sides; a recorded entry's key has none.
    """

    __slots__ = ("_canonical", "_masked", "_sorted", "masks", "text")

    def __init__(self, text: bytes, masks: Masks | None = None) -> None:
        self.text = text  # compact JSON, as the recording encoder writes it
        self.masks = masks or None
        self._canonical: bytes | None = None
        self._sorted: bytes | None = None
        self._masked: dict[Masks, tuple[bytes, tuple[str, ...]]] | None = None

    def sorted_text(self) -> bytes:
        """The JSON with sorted keys: equal ones hold equal values (a stored recording's keys
        are sorted, a live call's are in the order the code wrote them)."""
        if self._sorted is None:
            self._sorted = sorted_json(self.text)
        return self._sorted

    def canonical(self) -> bytes:
        """The canonical JSON (sorted keys), under this key's own masks: equal bytes iff
        canonically equal."""
        if self._canonical is None:
            if self.masks is None:
                self._canonical = canonical_json_bytes(self.text)
            else:
                self._canonical = self.masked(self.masks)[0]
        return self._canonical

    def masked(self, masks: Masks) -> tuple[bytes, tuple[str, ...]]:
        """The canonical JSON under ``masks``, and the masks that changed it."""
        cache = self._masked
        if cache is None:
            cache = self._masked = {}
        found = cache.get(masks)
        if found is None:
            value, applied = masks.apply(canonical_from_json(self.text))
            found = cache[masks] = (orjson.dumps(value, option=_SORT_KEYS), applied)
        return found

    def matches(self, recorded: CallKey) -> bool:
        """Whether this call's value equals the ``recorded`` one, both under this key's masks."""
        if self.masks is None:
            return canonical_equal_json(self.text, recorded.text)
        if self.text == recorded.text or self.sorted_text() == recorded.sorted_text():
            return True  # equal values, masked or not
        return self.canonical() == recorded.masked(self.masks)[0]

    def applied(self, recorded: CallKey) -> tuple[str, ...]:
        """The masks that changed this call's value or the ``recorded`` one, when they differ
        as recorded (equal texts need no mask, and are not looked into)."""
        if self.masks is None or self.text == recorded.text:
            return ()
        ours = self.masked(self.masks)[1]
        theirs = recorded.masked(self.masks)[1]
        return tuple(s for s in self.masks.specs if s in ours or s in theirs)

    def recorded_view(self, recorded: CallKey) -> Any:
        """The ``recorded`` value as this call compares it (canonical, under its masks)."""
        if self.masks is None:
            return orjson.loads(recorded.canonical())
        return orjson.loads(recorded.masked(self.masks)[0])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CallKey):
            return NotImplemented
        return (
            self.text == other.text
            or self.sorted_text() == other.sorted_text()
            or self.canonical() == other.canonical()
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CallKey({self.text!r})"


class Entry:
    """One recorded call, with what matching and serving need made when they first need it.

    A case's calls are served from its entries one by one, and most of a recording is
    never compared or served twice: the key (``args``/``input`` as the matcher compares it)
    and the output's JSON text are made on first use, so a call nobody makes costs nothing.
    """

    __slots__ = (
        "_key",
        "_output_json",
        "index",
        "kind",
        "messages_input",
        "name",
        "raw",
        "seq",
        "used",
    )

    def __init__(
        self,
        kind: str,
        name: str,
        index: int,  # position among the entries of this name
        seq: int,  # place in the trace's order of calls
        raw: Mapping[str, Any],  # a ToolEntry or an LLMEntry, read by field name
        key: CallKey | None = _UNMADE,  # given: the key; else made from ``raw`` on first use
        output_json: bytes | None = _UNMADE,  # likewise the recorded output's JSON text
    ) -> None:
        self.kind = kind
        self.name = name
        self.index = index
        self.seq = seq
        self.raw = raw
        self._key = key
        self._output_json = output_json
        self.used = False
        # LLM: the input is the GenAI conventions' messages (read from another instrumentor's
        # span, or written by hand in that shape), not a provider's own arguments.
        self.messages_input = False

    @property
    def key(self) -> CallKey | None:
        """The recorded args (tools) or input (LLM) as compared; None when not recorded."""
        key = self._key
        if key is _UNMADE:
            field = "args" if self.kind == TOOLS else "input"
            raw = self.raw
            key = self._key = call_key(raw[field]) if field in raw else None
        return key

    @property
    def output_json(self) -> bytes | None:
        """The recorded output as JSON text (None: the entry records an error)."""
        output = self._output_json
        if output is _UNMADE:
            output = self._output_json = _output_text(self)
        return output

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}"

    @property
    def error(self) -> RecordedError | None:
        error = self.raw.get("error")
        # A loaded bundle's errors were checked to have a string type and message.
        return cast(RecordedError, error) if isinstance(error, Mapping) else None

    def describe(self) -> str:
        return f"{self.label} #{self.index + 1} (seq {self.seq})"

    def __repr__(self) -> str:
        return f"Entry({self.describe()}, used={self.used})"


def _seq(entry: Entry) -> int:
    return entry.seq


def _is_json_data(section: Mapping[str, Any]) -> bool:
    """Whether a bundle's section encodes as JSON as a whole (one pass, in C)."""
    try:
        orjson.dumps(section, option=_NON_STR_KEYS)
    except (TypeError, ValueError):
        return False
    return True


def _output_text(entry: Entry) -> bytes | None:
    """``entry``'s recorded output as JSON text, or None when it has none; BundleError when
    it is not JSON data (a bundle built in code)."""
    output = entry.raw.get("output", _ABSENT)
    if output is _ABSENT:
        return None
    try:
        return orjson.dumps(output, option=_NON_STR_KEYS)
    except (TypeError, ValueError) as exc:
        raise BundleError(
            f"invalid fixture bundle: {entry.kind}:{entry.name}[{entry.index}]: "
            f"not JSON data ({exc})"
        ) from exc


@dataclass(slots=True)
class Match:
    entry: Entry
    diverged: bool = False  # served although the input differs (LLM) or args differ (lenient)
    fallback: bool = False  # an LLM entry of another model id
    masked: tuple[str, ...] = ()  # the masks that applied to the call and the entry


class _Queue:
    """The entries of one name, with a cursor past the used prefix so lookups stay O(1)."""

    __slots__ = ("cursor", "entries")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.cursor = 0

    def first_unused(self) -> Entry | None:
        """The first entry not yet served; moves the cursor up to it."""
        entries = self.entries
        count = len(entries)
        i = self.cursor
        while i < count and entries[i].used:
            i += 1
        self.cursor = i
        return entries[i] if i < count else None

    def unused(self) -> Iterator[Entry]:
        self.first_unused()
        entries = self.entries
        for i in range(self.cursor, len(entries)):
            if not entries[i].used:
                yield entries[i]


def is_messages(value: Any) -> bool:
    """Whether ``value`` is a list of the GenAI conventions' messages (each with ``parts``)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, Mapping) and "parts" in m for m in value)
    )


def call_key(value: Any) -> CallKey:
    """The key of a call's args or input, compared canonically."""
    return CallKey(dumps(value))


class ServedEntries:
    """The entries of one bundle and which of them have been served.

    ``json_data``: the bundle was read from JSON text (a stored case, a case file), so every
    output is JSON data. Otherwise (a bundle built in code) that is checked here, so that a
    bundle that cannot be served fails when its block starts, not halfway through a run.
    """

    def __init__(self, bundle: Bundle, *, json_data: bool = False) -> None:
        self._queues: dict[tuple[str, str], _Queue] = {}
        self._llm_all = _Queue()
        self.incomplete: dict[str, list[str]] = {}
        self.messages_inputs = False  # whether any LLM entry has messages_input
        # Whether any LLM entry's output has a type tag other than the HTTP client's (an entry
        # of an earlier version's SDK patches, or read from another instrumentor's span).
        self.tagged_outputs = False
        entries: list[Entry] = []
        order = 0
        sections: tuple[tuple[str, Mapping[str, Sequence[Mapping[str, Any]]]], ...] = (
            (TOOLS, bundle.get("tools") or {}),
            (LLM, bundle.get("llm") or {}),
        )
        for kind, section in sections:
            llm = kind == LLM
            for name, raws in section.items():
                queue = self._queues.setdefault((kind, name), _Queue())
                for index, raw in enumerate(raws):
                    order += 1
                    try:
                        entry = Entry(kind, name, index, int(raw.get("seq", order)), raw)
                    except (TypeError, ValueError) as exc:  # in a bundle built in code
                        raise BundleError(
                            f"invalid fixture bundle: {kind}:{name}[{index}]: not JSON data ({exc})"
                        ) from exc
                    if llm:
                        if is_messages(raw.get("input")):
                            entry.messages_input = self.messages_inputs = True
                        if raw.get("output_type") not in (None, "http.response"):
                            self.tagged_outputs = True
                    queue.entries.append(entry)
                    entries.append(entry)
            if not json_data and not _is_json_data(section):
                for entry in entries:
                    if entry.kind == kind:
                        entry.output_json  # noqa: B018 - raises BundleError naming the entry
        # Hand-written bundles have no seq: they keep the order they were written in.
        self._entries = sorted(entries, key=_seq)
        self._llm_all.entries = [e for e in self._entries if e.kind == LLM]
        for item in bundle.get("incomplete") or ():
            self.incomplete.setdefault(item["label"], []).append(item["reason"])

    # -- lookups -------------------------------------------------------------------------

    def match_tool(self, name: str, key: CallKey | None, *, strict: bool) -> Match | None:
        queue = self._queues.get((TOOLS, name))
        first = queue.first_unused() if queue is not None else None
        if queue is None or first is None:
            return None
        entries = queue.entries  # walked in place: this runs on every replayed tool call
        for i in range(queue.cursor, len(entries)):
            entry = entries[i]
            if not entry.used and (
                entry.key is None or (key is not None and key.matches(entry.key))
            ):
                entry.used = True
                return Match(entry, masked=_applied(key, entry))
        if strict:
            return None
        first.used = True  # lenient: ordered serve on an args mismatch
        return Match(first, diverged=True, masked=_applied(key, first))

    def match_llm(self, model: str, key: CallKey | None) -> Match | None:
        queue = self._queues.get((LLM, model))
        entry = queue.first_unused() if queue is not None else None
        fallback = False
        if entry is None:
            entry = self._llm_all.first_unused()
            fallback = entry is not None
        if entry is None:
            return None
        entry.used = True
        diverged = key is not None and entry.key is not None and not key.matches(entry.key)
        return Match(entry, diverged=diverged, fallback=fallback, masked=_applied(key, entry))

    def peek(self, kind: str, name: str) -> Entry | None:
        queue = self._queues.get((kind, name))
        entry = queue.first_unused() if queue is not None else None
        if entry is None and kind == LLM:
            entry = self._llm_all.first_unused()
        return entry

    def unused(self) -> list[Entry]:
        return [e for e in self._entries if not e.used]

    def entries(self) -> list[Entry]:
        """Every recorded call, in seq order."""
        return list(self._entries)

    def labels(self) -> list[str]:
        return sorted({f"{k}:{n}" for (k, n) in self._queues})

    # -- explaining a miss ---------------------------------------------------------------

    def explain_miss(
        self, kind: str, name: str, key: CallKey | None
    ) -> tuple[str, list[dict[str, Any]]]:
        """The message of a strict miss and the closest recorded entries with what differed."""
        label = f"{kind}:{name}"
        message = f"no recorded call for {label}"
        details: list[str] = []
        closest: list[dict[str, Any]] = []
        queue = self._queues.get((kind, name))
        if queue is not None and queue.entries:
            candidates = list(queue.unused()) or queue.entries
            used_up = not any(not e.used for e in queue.entries)
            if used_up:
                details.append(
                    f"the recording has {len(queue.entries)} call(s) to {label}, all already "
                    "served; this run makes more calls than the recorded one"
                )
            called = orjson.loads(key.canonical()) if key is not None else None
            for entry in candidates[:3]:
                recorded = _compared(entry, key)
                diffs, total = diff_values(recorded, called, "args", limit=_MAX_DIFFERENCES)
                closest.append(
                    {"entry": entry.describe(), "used": entry.used, "differences": diffs}
                )
                if diffs and not used_up:
                    shown = render(diffs, total - len(diffs), width=_MISS_WIDTH)
                    details.append(f"closest: {entry.describe()}: " + "; ".join(shown))
        else:
            others = [lbl for lbl in self.labels() if lbl.startswith(kind + ":")]
            near = difflib.get_close_matches(label, others, n=3, cutoff=0.6)
            if near:
                details.append(f"did you mean {', '.join(near)}?")
                closest.extend(
                    {"entry": n, "used": None, "differences": [_name_difference(n, label)]}
                    for n in near
                )
            elif others:
                details.append(f"the recording has {', '.join(others)}")
            else:
                details.append(f"the recording has no {'tool' if kind == TOOLS else 'LLM'} calls")
        for reason in self.incomplete.get(label, ()):
            details.append(
                f"{label} was called in the recorded run but could not be recorded: {reason}"
            )
        # Calls whose spans never reached the recording are known only by their kind.
        for reason in (*self.incomplete.get(kind, ()), *self.incomplete.get("calls", ())):
            details.append(f"the recording is missing calls: {reason}")
        if details:
            message += " (" + "; ".join(details) + ")"
        message += (
            ". Strict replay never runs the call live: if the code now makes this call on "
            "purpose, re-record the case from a run of the fixed code"
        )
        return message, closest


def _applied(key: CallKey | None, entry: Entry) -> tuple[str, ...]:
    return () if key is None or entry.key is None else key.applied(entry.key)


def _compared(entry: Entry, key: CallKey | None) -> Any:
    """An entry's args as a call compares them: canonical, under the call's masks."""
    if entry.key is None:
        return None
    if key is None:
        return canonical(entry.raw.get("args"))
    return key.recorded_view(entry.key)


def _name_difference(recorded_label: str, called_label: str) -> Difference:
    return Difference(path="name", recorded=recorded_label, actual=called_label)
