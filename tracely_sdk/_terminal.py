"""Untrusted text made safe to print on a terminal: the one escaping every printed value goes
through (the CLI's output, the server's log lines), so a stored name or a request path can
neither clear a screen, plant a hyperlink nor reorder what a line shows."""

from __future__ import annotations

import re

__all__ = ["terminal_safe"]

# C0 controls but newline and tab, DEL, C1 controls (CSI, OSC, ... as single bytes), and the
# bidirectional overrides and isolates, which reorder what a line shows.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every control character a terminal would act on shown as an escape
    (``\\x1b``, ``\\u202e``); newlines and tabs are kept."""
    return _UNSAFE.sub(_escaped, text)
