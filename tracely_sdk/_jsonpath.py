"""JSON paths: the one path language of masks (``ignore=``) and scenario files.

``$`` is the value itself and may be left out; then steps: ``.key`` or ``['odd key']`` /
``["odd key"]``, ``[N]`` (negative counts from the end), ``[*]`` or ``.*`` (every item or
value) and ``..key`` (that key at any depth). Nothing else: no filters and no expressions,
so a path read from a file selects values and never runs anything.
"""

from __future__ import annotations

import re
from typing import Any, Final

from tracely_sdk.errors import ConfigError

__all__ = ["PathError", "Step", "parse_path"]

Step = tuple[str, Any]  # ("key", name) | ("index", n) | ("any", None) | ("deep", name)

_STEP: Final = re.compile(
    r"""\.\.(?P<deep>[^.\[\]]+)
    | \.?\*
    | \.(?P<key>[^.\[\]*]+)
    | \[\s*(?P<index>-?\d+)\s*\]
    | \[\*\]
    | \[(?P<quoted>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\]""",
    re.VERBOSE,
)
_MAX_STEPS: Final = 64


class PathError(ConfigError):
    """A JSON path outside the language; the message names where it came from and the spot."""


def parse_path(spec: Any, where: str = "path", *, whole: bool = False) -> tuple[Step, ...]:
    """The steps of the path ``spec``; ``whole`` allows ``$`` alone (no steps)."""
    if not isinstance(spec, str) or not spec.strip():
        raise PathError(f"{where}: a JSON path is a non-empty string, got {spec!r}")
    text = spec.strip()
    if text.startswith("$"):
        text = text[1:]
    elif not text.startswith((".", "[")):
        text = "." + text
    steps: list[Step] = []
    pos = 0
    while pos < len(text):
        match = _STEP.match(text, pos)
        if match is None:
            raise PathError(
                f"{where}: cannot read the JSON path {spec!r} at {text[pos:]!r}; write keys as "
                "a.b or ['a b'], items as [0] or [*], a key at any depth as $..key"
            )
        if match["deep"] is not None:
            steps.append(("deep", match["deep"]))
        elif match["key"] is not None:
            steps.append(("key", match["key"]))
        elif match["index"] is not None:
            steps.append(("index", int(match["index"])))
        elif match["quoted"] is not None:
            quoted = match["quoted"]
            steps.append(("key", re.sub(r"\\(.)", r"\1", quoted[1:-1])))
        else:
            steps.append(("any", None))
        pos = match.end()
    if len(steps) > _MAX_STEPS:
        raise PathError(f"{where}: the JSON path {spec!r} has more than {_MAX_STEPS} steps")
    if not steps and not whole:
        raise PathError(f"{where}: the JSON path {spec!r} names the whole value; name a part")
    return tuple(steps)
