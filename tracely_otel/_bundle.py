"""The fixture bundle: a recording of one trace's tool and LLM outputs, as plain JSON.

A bundle is hand-writable in a test::

    {"tools": {"get_order": [{"args": {"order_id": 7}, "output": {"status": "shipped"}}]},
     "llm":   {"gpt-4o": [{"input": [...], "output": "Hello", "usage": [812, 96]}]}}

Extracted bundles also carry ``format``, ``trace_id``, the ``agent`` root's input/output,
``incomplete`` (calls that were seen but cannot be served) and a ``checksum`` over everything
else. A bundle whose checksum does not match is not a recording.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

FORMAT = "tracely.bundle/1"

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
        "checksum",
    }
)
_ENTRY_KEYS = frozenset(
    {"seq", "args", "input", "output", "error", "usage", "output_type", "provider", "span_id"}
)
_AGENT_KEYS = frozenset({"name", "input", "output", "error", "output_type", "span_id"})


class BundleFormatError(ValueError):
    """The object is not a fixture bundle; the message names the field and what to fix."""


def bundle_checksum(bundle: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` over the canonical JSON of every field except ``checksum``."""
    body = {k: v for k, v in bundle.items() if k != "checksum"}
    digest = hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return f"sha256:{digest}"


def seal(bundle: dict[str, Any]) -> dict[str, Any]:
    """Set the bundle's checksum (in place) and return it."""
    bundle.pop("checksum", None)
    bundle["checksum"] = bundle_checksum(bundle)
    return bundle


def _fail(where: str, problem: str) -> BundleFormatError:
    return BundleFormatError(f"invalid fixture bundle: {where}: {problem}")


def _check_error(where: str, err: Any) -> None:
    if not isinstance(err, Mapping):
        raise _fail(where, 'an error must be an object {"type": ..., "message": ...}')
    for key in ("type", "message"):
        if not isinstance(err.get(key), str):
            raise _fail(where, f"error.{key} must be a string")


def _check_entry(label: str, index: int, entry: Any, kind: str) -> None:
    # Replay validates every entry of a bundle on load: the message is built only on failure.
    if not isinstance(entry, Mapping):
        raise _fail(f"{label}[{index}]", "each recorded call must be an object")
    if not _ENTRY_KEYS.issuperset(entry):
        raise _fail(
            f"{label}[{index}]",
            f"unknown field(s) {sorted(set(entry) - _ENTRY_KEYS)}; an entry has output or "
            "error, and optionally args, input, usage, seq",
        )
    if ("output" in entry) == ("error" in entry):
        raise _fail(f"{label}[{index}]", "an entry needs exactly one of 'output' or 'error'")
    if "error" in entry:
        _check_error(f"{label}[{index}]", entry["error"])
    if kind == "tools":
        if "input" in entry or "usage" in entry:
            raise _fail(f"{label}[{index}]", "tool entries take 'args', not 'input'/'usage'")
    elif "args" in entry:
        raise _fail(f"{label}[{index}]", "LLM entries take 'input', not 'args'")
    usage = entry.get("usage")
    if usage is not None and not (
        isinstance(usage, (list, tuple))
        and len(usage) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in usage)
    ):
        raise _fail(
            f"{label}[{index}]",
            "usage must be [input_tokens, output_tokens], two non-negative ints",
        )
    seq = entry.get("seq")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool)):
        raise _fail(f"{label}[{index}]", "seq must be an integer")


def validate_bundle(bundle: Any) -> dict[str, Any]:
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
    for kind in ("tools", "llm"):
        section = bundle.get(kind, {})
        if not isinstance(section, Mapping):
            raise _fail(kind, "must map a name to a list of recorded calls")
        for name, entries in section.items():
            label = f"{kind}:{name}"
            if not isinstance(entries, (list, tuple)):
                raise _fail(label, "must be a list of recorded calls")
            for i, entry in enumerate(entries):
                _check_entry(label, i, entry, kind)
    agent = bundle.get("agent")
    if agent is not None:
        if not isinstance(agent, Mapping) or set(agent) - _AGENT_KEYS:
            raise _fail("agent", f"must be an object with keys from {sorted(_AGENT_KEYS)}")
        if "error" in agent:
            _check_error("agent", agent["error"])
    incomplete = bundle.get("incomplete", [])
    if not isinstance(incomplete, (list, tuple)) or not all(
        isinstance(i, Mapping)
        and isinstance(i.get("label"), str)
        and isinstance(i.get("reason"), str)
        for i in incomplete
    ):
        raise _fail("incomplete", 'must be a list of {"label": ..., "reason": ...}')
    checksum = bundle.get("checksum")
    if checksum is not None and checksum != bundle_checksum(bundle):
        raise _fail(
            "checksum",
            "does not match the bundle's content: it was changed or cut short after it was "
            "recorded, so it is not a recording (re-extract it from its trace)",
        )
    return dict(bundle)


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
