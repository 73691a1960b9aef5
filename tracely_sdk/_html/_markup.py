"""A tiny auto-escaping HTML builder: every value is escaped unless it is already :class:`Html`.

Recorded values, case ids, tags, reasons: all of it is untrusted, so nothing reaches a page
without passing through :func:`html.escape`. Markup is only ever made by :func:`tag` and
:func:`join`, which escape what they are given.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Union

__all__ = ["Html", "Node", "esc", "join", "tag"]


class Html(str):
    """Text that is already markup (made by :func:`tag`, :func:`join` or :func:`esc`)."""

    __slots__ = ()


Node = Union[Html, str, int, float, None, Iterable["Node"]]

# Elements with no content and no closing tag.
_VOID = frozenset({"br", "hr", "img", "input", "link", "meta"})


def esc(value: object) -> Html:
    """``value`` as text in a page: markup stays as it is, anything else is escaped."""
    if isinstance(value, Html):
        return value
    return Html(html.escape(str(value), quote=True))


def join(*children: Node) -> Html:
    """The children side by side; strings escaped, None left out, iterables flattened."""
    parts: list[str] = []
    _flatten(children, parts)
    return Html("".join(parts))


def _flatten(node: Node, parts: list[str]) -> None:
    if node is None or node is False:
        return
    if isinstance(node, (str, int, float)):
        parts.append(esc(node))
        return
    for child in node:
        _flatten(child, parts)


def tag(element: str, /, *children: Node, **attrs: object) -> Html:
    """``<element attrs>children</element>``. ``class_`` is ``class``, ``data_x`` is ``data-x``;
    an attribute that is None or False is left out, True is written bare."""
    shown = []
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        attr = key.rstrip("_").replace("_", "-")
        shown.append(f" {attr}" if value is True else f' {attr}="{esc(value)}"')
    opening = f"<{element}{''.join(shown)}>"
    if element in _VOID:
        return Html(opening)
    # One join for the whole element: a page is tags nested a dozen deep, each copy of a
    # large value inside them counts.
    parts = [opening]
    _flatten(children, parts)
    parts.append(f"</{element}>")
    return Html("".join(parts))
