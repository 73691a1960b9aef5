"""Installing the patches: wrapt wrappers put on class attributes, undone exactly.

See :mod:`tracely_sdk.providers._patching` for how a patched call runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import wrapt

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


# --------------------------------------------------------------------------- installing wrappers


@dataclass(eq=False)
class _Installed:
    owner: type
    attribute: str
    original: Any
    wrapper: Any
    enabled: bool = True


_installed: dict[tuple[type, str], _Installed] = {}
_install_lock = threading.RLock()
_changes = 0  # see installed_state


def _changed() -> None:
    global _changes
    _changes += 1


def in_chain(obj: Any, target: Any) -> bool:
    """Whether ``target`` is ``obj`` or one of the wrappers/functions it wraps."""
    if target is None:
        return False
    for _ in range(64):
        if obj is None:
            return False
        # A wrapt wrapper bound to a class (what getattr on the class gives) names its parent.
        if obj is target or getattr(obj, "_self_parent", None) is target:
            return True
        try:
            obj = getattr(obj, "__wrapped__", None)
        except Exception:
            return False
    return False


def _gate(record: _Installed, wrapper: Wrapper) -> Wrapper:
    def gate(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        if not record.enabled:
            return wrapped(*args, **kwargs)
        return wrapper(wrapped, instance, args, kwargs)

    return gate


def install(owner: type, attribute: str, wrapper: Wrapper) -> None:
    """Wrap ``owner.attribute`` with ``wrapper`` (wrapt's signature); idempotent."""
    with _install_lock:
        key = (owner, attribute)
        current = owner.__dict__.get(attribute)
        record = _installed.get(key)
        if record is not None:
            if in_chain(current, record.wrapper):
                if not record.enabled:
                    record.enabled = True
                    _changed()
                return
            # Someone removed tracely's wrapper (a naive unwrap of a wrapper under it).
            record.enabled = False
            del _installed[key]
        _changed()
        if current is None:
            raise AttributeError(f"{owner.__qualname__} has no attribute {attribute!r} to patch")
        record = _Installed(owner, attribute, current, None)
        function_wrapper = wrapt.FunctionWrapper(current, _gate(record, wrapper))
        record.wrapper = function_wrapper
        setattr(owner, attribute, function_wrapper)
        _installed[key] = record


def uninstall(owner: type, attribute: str) -> None:
    """Undo :func:`install`: restore the original, or leave a pass-through (module docstring)."""
    with _install_lock:
        key = (owner, attribute)
        record = _installed.get(key)
        if record is None:
            return
        _changed()
        current = owner.__dict__.get(attribute)
        # OpenTelemetry's `unwrap` puts back `getattr(owner, attribute).__wrapped__`: tracely's
        # wrapper bound to the class, which is still tracely's own at the top of the chain.
        if current is record.wrapper or getattr(current, "_self_parent", None) is record.wrapper:
            setattr(owner, attribute, record.original)
            record.enabled = False
            del _installed[key]
        elif in_chain(current, record.wrapper):
            record.enabled = False  # stays in the other wrapper's chain, as a pass-through
        else:
            record.enabled = False
            del _installed[key]


def installed_state() -> tuple[int, list[Any]]:
    """How many times tracely's patches changed (installed, removed, switched on or off), and
    the object each patched attribute holds now. A later state with the same count and the
    same objects, one by one, means nothing was installed, removed or wrapped again since."""
    with _install_lock:
        return _changes, [r.owner.__dict__.get(r.attribute) for r in _installed.values()]


def is_installed(owner: type, attribute: str) -> bool:
    """Whether tracely's wrapper on ``owner.attribute`` is in place and switched on."""
    record = _installed.get((owner, attribute))
    return (
        record is not None
        and record.enabled
        and in_chain(owner.__dict__.get(attribute), record.wrapper)
    )


def wrapper_of(owner: type, attribute: str) -> Any:
    """Tracely's wrapper object on ``owner.attribute`` (None when not installed)."""
    record = _installed.get((owner, attribute))
    return None if record is None else record.wrapper
