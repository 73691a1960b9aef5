"""What several wire codecs do the same way: the response headers a recording keeps, and the
word-sized pieces a stream made from a plain-text answer sends."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def word_pieces(text: str) -> list[str]:
    """``text`` cut into the pieces a stream made from a plain-text answer sends: its words,
    each after the first with the space before it, so the pieces join back to ``text``."""
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)] if text else []


def kept_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    safe: frozenset[str],
    prefix: str | None = None,
) -> dict[str, str]:
    """The response headers a recording may keep: those in ``safe`` and the rate-limit ones
    starting with ``prefix`` (if the API has them), names lowercased."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    kept: dict[str, str] = {}
    for key, value in items:
        name = key.lower()
        if name in safe or (prefix is not None and name.startswith(prefix)):
            kept[name] = value
    return kept
