"""The fixture bundle: a recording of one trace's tool and LLM outputs, as plain JSON.

A bundle is hand-writable in a test::

    {"tools": {"get_order": [{"args": {"order_id": 7}, "output": {"status": "shipped"}}]},
     "llm":   {"gpt-4o": [{"input": [...], "output": "Hello", "usage": [812, 96]}]}}

Extracted bundles also carry ``format``, ``trace_id``, the ``agent`` root's input/output,
``incomplete`` (calls that were seen but cannot be served), ``trace`` (every call of the trace,
whoever recorded it: what checks of the trace read) and a ``checksum`` over everything else. A bundle whose checksum does not match is not a recording.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final, TypedDict, cast

import orjson

FORMAT = "tracely.bundle/1"

MAX_NESTING: Final = 64
"""How deeply a recorded value (args, input, output) may nest. JSON text held in a string
counts as one more level when it holds an object or array, since calls are compared with it
parsed."""

MIN_INT: Final = -(2**63)
MAX_INT: Final = 2**64 - 1
"""The integers a recorded value may hold: what JSON tooling reads exactly (64 bits)."""


class RecordedError(TypedDict):
    """A call or agent run that raised: the exception's type name and message."""

    type: str
    message: str


class ToolEntry(TypedDict, total=False):
    """One recorded tool call: ``output`` or ``error``, and the call's ``args``."""

    seq: int
    args: Any
    output: Any
    error: RecordedError
    output_type: str
    span_id: str
    started_at: int
    ended_at: int


class LLMEntry(TypedDict, total=False):
    """One recorded LLM call: ``output`` or ``error``, its ``input`` and token ``usage``
    (``[input_tokens, output_tokens]``)."""

    seq: int
    input: Any
    output: Any
    error: RecordedError
    usage: list[int]
    output_type: str
    provider: str
    span_id: str
    started_at: int
    ended_at: int


class IncompleteItem(TypedDict, total=False):
    """A call seen in the trace that cannot be served: its label and why. ``missing`` counts
    the calls of a kind whose spans were lost."""

    label: str
    reason: str
    seq: int
    span_id: str
    missing: int


class AgentSection(TypedDict, total=False):
    """The agent run at the root of the trace."""

    name: str
    input: Any
    output: Any
    error: RecordedError
    output_type: str
    span_id: str
    ended_at: int


class TraceSummary(TypedDict, total=False):
    """What the trace held, whoever made its spans: the evidence Scenarios' trace checks read.

    ``calls`` lists every agent run, tool call and LLM call in trace order
    (``{"kind", "name", "by", "span_id"}``, and ``seq`` when the call is an entry of the
    bundle, else its recorded ``args`` / ``result`` / ``input``; ``usage``, ``error`` and
    ``conversation`` where recorded); ``errored`` names the root spans that failed.
    """

    spans: int
    calls: list[dict[str, Any]]
    errored: list[str]
    services: list[str]
    conversation: str


class Bundle(TypedDict, total=False):
    """A fixture bundle. Only ``tools`` and ``llm`` are needed by hand; an extracted bundle
    carries the rest."""

    format: str
    trace_id: str
    service: str
    started_at: int
    agent: AgentSection
    tools: dict[str, list[ToolEntry]]
    llm: dict[str, list[LLMEntry]]
    incomplete: list[IncompleteItem]
    replay: dict[str, Any]
    trace: TraceSummary
    checksum: str


_TOP_LEVEL = frozenset(
    {
        "format",
        "trace_id",
        "service",
        "started_at",
        "agent",
        "tools",
        "llm",
        "incomplete",
        "replay",
        "trace",
        "checksum",
    }
)
_ENTRY_KEYS = frozenset(
    {
        "seq",
        "args",
        "input",
        "output",
        "error",
        "usage",
        "output_type",
        "provider",
        "span_id",
        "started_at",
        "ended_at",
    }
)
_AGENT_KEYS = frozenset({"name", "input", "output", "error", "output_type", "span_id", "ended_at"})
# When a call (or the agent run) started and ended, in nanoseconds since the epoch: what the
# pages draw a run's waterfall from. Never used to match or serve a call.
_TIMES = ("started_at", "ended_at")


class BundleFormatError(ValueError):
    """The object is not a fixture bundle; the message names the field and what to fix."""


def _canonical_text(bundle: Mapping[str, Any]) -> bytes | None:
    """The JSON the checksum is over, or None when the bundle is not JSON data."""
    body = {k: v for k, v in bundle.items() if k != "checksum"}
    try:
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson's word for a value JSON cannot hold
        return None


_NOT_JSON: Final = (
    "not JSON data: it holds a value JSON cannot (a set, an object, a non-string key, an "
    "integer past 64 bits) or nests deeper than 255 levels"
)


def bundle_checksum(bundle: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` over the canonical JSON of every field except ``checksum``.

    Raises :class:`BundleFormatError` when the bundle is not JSON data.
    """
    text = _canonical_text(bundle)
    if text is None:
        raise BundleFormatError(f"invalid fixture bundle: {_NOT_JSON}")
    return f"sha256:{hashlib.sha256(text).hexdigest()}"


def seal(bundle: Bundle) -> Bundle:
    """Set the bundle's checksum (in place) and return it."""
    bundle.pop("checksum", None)
    bundle["checksum"] = bundle_checksum(bundle)
    return bundle


def _fail(where: str, problem: str) -> BundleFormatError:
    return BundleFormatError(f"invalid fixture bundle: {where}: {problem}")


JSON_SPACE: Final = " \t\n\r"
"""The whitespace JSON text may have around it; a string that holds JSON is compared parsed."""

# Brackets of one kind (in JSON text they pair up, so only the depth is left) and quotes.
_ONE_KIND: Final = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE: Final = bytes(b for b in range(256) if b not in b'[]{}"')


def _plain(text: bytes | None) -> bool:
    """Whether JSON ``text`` is certainly within the limits of a recorded value: orjson wrote
    it (so its integers fit), no string in it holds a bracket (so none holds JSON), and it
    nests at most :data:`MAX_NESTING` levels. Decided with bytes methods only, which run in C;
    False sends the value to the exact check."""
    if text is None:
        return False
    # With escaped backslashes and quotes gone, every quote left opens or closes a string.
    text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    if b'" ' in text or b'"\\' in text:  # a string that starts with whitespace
        return False
    brackets = text.translate(_ONE_KIND, _NOT_STRUCTURE).replace(b'""', b"")
    # Scanning from the left, each string without brackets is now gone; the first string with
    # one keeps its opening quote, since a bracket follows it.
    if b'"' in brackets:
        return False
    for _ in range(MAX_NESTING):
        if not brackets:
            return True
        brackets = brackets.replace(b"[]", b"")  # one level, the innermost, each time
    return not brackets


def _shallow(text: bytes | None) -> bool:
    """Whether JSON ``text`` is certainly within the limits of a recorded value, strings in it
    that hold JSON included (which :func:`_plain` leaves to the exact check).

    orjson wrote ``text``, so its integers fit, and JSON it parses from a string holds none
    that do not. The nesting is bounded from the brackets: a value inside a string that holds
    JSON is deeper than the string by one level for the parse, and by at most two for each of
    the string's opening brackets (a container, and a string in it holding JSON). Without
    ``\\u`` in the text, every bracket of every level of JSON in strings is in it as written.
    """
    # find, not `in`: bytes.__contains__ first tries the needle as an int, raising and
    # clearing a TypeError on its way to the search.
    if text is None or text.find(b"\\u") != -1:
        return False
    # With escaped backslashes and quotes gone, every quote left opens or closes a string: the
    # pieces between quotes are the structure and the strings, by turns.
    pieces = text.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')
    around = b"".join(pieces[::2])  # the structure, without the strings
    held = _opening(text) - _opening(around)  # the opening brackets in strings
    if not held:
        return _nests_within(around, MAX_NESTING)
    # All of them as if in one string first: a quicker bound than the most one string holds.
    if _nests_within(around, MAX_NESTING - 1 - 2 * held):
        return True
    most = max(_opening(s) for s in pieces[1::2])
    return _nests_within(around, MAX_NESTING - 1 - 2 * most)


def _opening(text: bytes) -> int:
    return text.count(b"[") + text.count(b"{")


def _nests_within(structure: bytes, levels: int) -> bool:
    """Whether the brackets of ``structure`` (JSON text without its strings) nest at most
    ``levels`` deep."""
    brackets = structure.translate(_ONE_KIND, _NOT_STRUCTURE)
    for _ in range(levels):
        if not brackets:
            return True
        brackets = brackets.replace(b"[]", b"")  # one level, the innermost, each time
    return levels >= 0 and not brackets


def text_within_limits(text: str | bytes) -> bool:
    """Whether the value orjson parses from the JSON ``text`` is certainly within the limits
    of a recorded value (:func:`value_problem` finds nothing in it), decided from the text.

    For a value the extractor has just parsed from a span's attribute: it needs neither
    encoding again nor walking. orjson parses an integer beyond 64 bits as a float, so such a
    value holds none out of range (nor a lone surrogate), and the nesting is bounded by the
    text's brackets. False sends the value to the exact check.
    """
    # Most values have few brackets: each opening bracket is at most two levels (its container,
    # and a string holding JSON that starts with it), and without \u every bracket of every
    # level is in the text as written.
    if isinstance(text, str):
        if 2 * (text.count("[") + text.count("{")) + 2 <= MAX_NESTING and "\\u" not in text:
            return True
        text = text.encode("utf-8", "surrogatepass")
    elif 2 * _opening(text) + 2 <= MAX_NESTING and text.find(b"\\u") == -1:
        return True
    return _plain(text) or _shallow(text)


def _text(value: Any) -> bytes | None:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return None


def value_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a recorded value (too deep, an integer out of range), or None.

    Iterative, so hostile nesting cannot exhaust the stack.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            return f"nests deeper than {MAX_NESTING} levels"
        if isinstance(item, str):
            stripped = item.strip(JSON_SPACE)
            if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
                try:
                    stack.append((orjson.loads(stripped), depth + 1))
                except orjson.JSONDecodeError:
                    pass
            continue
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            if isinstance(item, int) and not MIN_INT <= item <= MAX_INT:
                return f"holds the integer {item}, outside the 64-bit range JSON tools read exactly"
            continue
        for child in children:
            if isinstance(child, (str, Mapping, list, tuple, int)):
                stack.append((child, depth + 1))
    return None


def field_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the recorded field ``name`` of a call or an agent run, or None.

    ``error`` must be ``{"type": str, "message": str}``; ``args``, ``input`` and ``output``
    must stay within :data:`MAX_NESTING` and the 64-bit integer range.
    """
    if name == "error":
        if not isinstance(value, Mapping):
            return 'an error must be an object {"type": ..., "message": ...}'
        for key in ("type", "message"):
            if not isinstance(value.get(key), str):
                return f"error.{key} must be a string"
        return None
    problem = value_problem(value)
    return None if problem is None else f"{name}: {problem}"


def entry_problem(entry: Any, kind: str, *, values: bool = True) -> str | None:
    """Why ``entry`` cannot be a recorded call of ``kind`` ("tools" | "llm"), or None.

    ``values=False`` leaves out the checks of the recorded values' nesting and integers (for a
    bundle already known to be within the limits).
    """
    if not isinstance(entry, Mapping):
        return "each recorded call must be an object"
    if not _ENTRY_KEYS.issuperset(entry):
        return (
            f"unknown field(s) {sorted(set(entry) - _ENTRY_KEYS)}; an entry has output or "
            "error, and optionally args, input, usage, seq"
        )
    if ("output" in entry) == ("error" in entry):
        return "an entry needs exactly one of 'output' or 'error'"
    if kind == "tools":
        if "input" in entry or "usage" in entry:
            return "tool entries take 'args', not 'input'/'usage'"
    elif "args" in entry:
        return "LLM entries take 'input', not 'args'"
    if "error" in entry:
        problem = field_problem("error", entry["error"])
        if problem is not None:
            return problem
    if values and not _plain(_text(entry)):
        for name in ("args", "input", "output"):
            if name in entry:
                problem = field_problem(name, entry[name])
                if problem is not None:
                    return problem
    usage = entry.get("usage")
    if usage is not None and not (
        isinstance(usage, (list, tuple))
        and len(usage) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_INT for n in usage)
    ):
        return "usage must be [input_tokens, output_tokens], two non-negative ints"
    seq = entry.get("seq")
    if seq is not None and (
        not isinstance(seq, int) or isinstance(seq, bool) or not MIN_INT <= seq <= MAX_INT
    ):
        return "seq must be an integer"
    return _times_problem(entry)


def _times_problem(section: Mapping[str, Any]) -> str | None:
    for key in _TIMES:
        value = section.get(key)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_INT
        ):
            return f"{key} must be a time in nanoseconds since the epoch (a non-negative integer)"
    return None


def _check_entry(label: str, index: int, entry: Any, kind: str, values: bool) -> None:
    # Replay validates every entry of a bundle on load: the message is built only on failure.
    problem = entry_problem(entry, kind, values=values)
    if problem is not None:
        raise _fail(f"{label}[{index}]", problem)


def validate_bundle(bundle: Any) -> Bundle:
    """Check ``bundle``'s shape and integrity and return it as a dict.

    Raises :class:`BundleFormatError` naming the first problem found.
    """
    if isinstance(bundle, (str, bytes)):
        try:
            bundle = orjson.loads(bundle)
        except orjson.JSONDecodeError as exc:
            raise BundleFormatError(f"invalid fixture bundle: not JSON ({exc})") from exc
    if not isinstance(bundle, Mapping):
        raise BundleFormatError(
            f"invalid fixture bundle: expected an object with 'tools'/'llm', got "
            f"{type(bundle).__name__}"
        )
    unknown = set(bundle) - _TOP_LEVEL
    if unknown:
        raise _fail(
            "top level",
            f"unknown key(s) {sorted(unknown)}; expected 'tools' and/or 'llm' "
            "(and the metadata an extracted bundle carries)",
        )
    fmt = bundle.get("format")
    if fmt is not None and fmt != FORMAT:
        raise _fail("format", f"{fmt!r} is not a format this version reads ({FORMAT!r})")
    text = _canonical_text(bundle)
    # One look at the whole bundle's text clears the values of most bundles at once.
    values = not (_shallow(text) or _plain(text))
    for kind in ("tools", "llm"):
        section = bundle.get(kind, {})
        if not isinstance(section, Mapping):
            raise _fail(kind, "must map a name to a list of recorded calls")
        for name, entries in section.items():
            label = f"{kind}:{name}"
            if not isinstance(entries, (list, tuple)):
                raise _fail(label, "must be a list of recorded calls")
            for i, entry in enumerate(entries):
                _check_entry(label, i, entry, kind, values)
    agent = bundle.get("agent")
    if agent is not None:
        if not isinstance(agent, Mapping) or set(agent) - _AGENT_KEYS:
            raise _fail("agent", f"must be an object with keys from {sorted(_AGENT_KEYS)}")
        problem = _times_problem(agent)
        if problem is not None:
            raise _fail("agent", problem)
        for name in ("error", "input", "output") if values else ("error",):
            if name in agent:
                problem = field_problem(name, agent[name])
                if problem is not None:
                    raise _fail("agent", problem)
    incomplete = bundle.get("incomplete", [])
    if not isinstance(incomplete, (list, tuple)) or not all(
        isinstance(i, Mapping)
        and isinstance(i.get("label"), str)
        and isinstance(i.get("reason"), str)
        for i in incomplete
    ):
        raise _fail("incomplete", 'must be a list of {"label": ..., "reason": ...}')
    summary = bundle.get("trace")
    if summary is not None and not (
        isinstance(summary, Mapping)
        and isinstance(summary.get("calls", []), (list, tuple))
        and all(
            isinstance(c, Mapping)
            and isinstance(c.get("kind"), str)
            and isinstance(c.get("name"), str)
            for c in summary.get("calls", [])
        )
    ):
        raise _fail("trace", 'must be an object whose "calls" are {"kind": ..., "name": ...}')
    checksum = bundle.get("checksum")
    if checksum is not None and text is None:
        raise BundleFormatError(f"invalid fixture bundle: {_NOT_JSON}")
    if checksum is not None and checksum != f"sha256:{hashlib.sha256(text or b'').hexdigest()}":
        raise _fail(
            "checksum",
            "does not match the bundle's content: it was changed or cut short after it was "
            "recorded, so it is not a recording (re-extract it from its trace)",
        )
    return cast(Bundle, dict(bundle))  # its shape was checked above


def entry_labels(bundle: Mapping[str, Any]) -> list[str]:
    """Every recorded call's label (``tools:NAME`` / ``llm:MODEL``), in trace order."""
    calls: list[tuple[int, int, str]] = []
    order = 0
    for kind in ("tools", "llm"):
        for name, entries in (bundle.get(kind) or {}).items():
            for entry in entries:
                calls.append((entry.get("seq", 1 << 62), order, f"{kind}:{name}"))
                order += 1
    return [label for _, _, label in sorted(calls)]
