"""Model calls and MCP tool calls recorded live and served on replay.

Importing this package imports no provider SDK or HTTP library; a provider's module is loaded
only when its library is asked for, or is already imported by the application.

- Model calls are recorded and served at the HTTP client (``providers.http``): httpx and httpx2
  at their clients' ``send``, ``urllib3`` at ``HTTPConnectionPool.urlopen`` (beneath requests
  and boto3) and ``aiohttp`` at ``ClientSession._request``. The OpenAI, Anthropic and Google
  Gen AI SDKs are not patched themselves: ``openai``, ``anthropic`` and ``google`` switch on the
  hooks of the HTTP libraries their client modules import (``_sdk.WireSDK``), so every call of
  theirs is recorded once, as the wire carried it, and on replay the SDK builds its own objects,
  streams and errors from the recorded bytes.
- :func:`instrument` (``tracely.init(instrument=...)``, ``TRACELY_INSTRUMENT``, or the
  ``tracely_openai`` / ``tracely_anthropic`` / ``tracely_google_genai`` / ``tracely_mcp``
  OpenTelemetry instrumentors) records calls live, each a tracely ``llm`` span (``chat MODEL``)
  with the GenAI attributes; message content goes to ``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
  is true. The recording replay needs is tracely's own ``tracely.input`` / ``tracely.output``.
- Inside every ``fixtures()`` block the same hooks are installed (on the block's first start in
  the process; they then stay, as pass-throughs whenever nothing is instrumented or replayed),
  so calls are served from the recording; under strict replay the network guard refuses every
  other connection. ``rep.providers`` lists the patched methods (:func:`patched_methods`).
- MCP's ``ClientSession`` is patched itself (``mcp.py``): its transport is not HTTP.

With another instrumentor of the same SDK active (the contrib ``openai-v2``, OpenLLMetry,
OpenInference), its span is the parent of tracely's (the HTTP request is made inside the SDK
call), and the extractor makes one ``llm:`` entry of the pair.
"""

from __future__ import annotations

import importlib
import importlib.util
import operator
import sys
import threading
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from tracely_sdk._config import PROVIDERS
from tracely_sdk._replay import register_activation_hook
from tracely_sdk.errors import MissingDependency

__all__ = ["PROVIDERS", "instrument", "patched_methods", "uninstrument"]


_lock = threading.RLock()
_live: set[str] = set()  # providers whose calls are recorded live
_deferred: set[str] = set()  # providers to patch when their SDK is imported
_hooked: set[str] = set()  # SDK names with a post-import hook registered


def _installed(sdk: str) -> bool:
    if sdk in sys.modules:
        return sys.modules[sdk] is not None
    try:
        return importlib.util.find_spec(sdk) is not None
    except (ImportError, ValueError):
        return False


def _module(name: str) -> ModuleType:
    return importlib.import_module(PROVIDERS[name][1])


def _apply(name: str) -> None:
    """Patch ``name``'s SDK (already imported) and switch live recording as wanted."""
    module = _module(name)
    module.install()
    module.set_live(name in _live)


def _on_import(name: str) -> None:
    with _lock:
        if name in _deferred:
            _deferred.discard(name)
            _apply(name)


def _defer(name: str) -> None:
    """Patch ``name`` as soon as the application imports its SDK."""
    import wrapt

    _deferred.add(name)
    sdk = PROVIDERS[name][0]
    if sdk not in _hooked:
        _hooked.add(sdk)
        wrapt.register_post_import_hook(lambda _module: _on_import(name), sdk)


def _names(names: Iterable[str] | str | None) -> list[str]:
    if names is None:
        return list(PROVIDERS)
    if isinstance(names, str):
        names = [names]
    out: list[str] = []
    for raw in names:
        name = str(raw).strip().lower()
        if name == "auto":
            out.extend(n for n in PROVIDERS if n not in out)
        elif name in PROVIDERS:
            if name not in out:
                out.append(name)
        else:
            raise ValueError(f"unknown provider {raw!r}; use {', '.join(['auto', *PROVIDERS])}")
    return out


def instrument(names: Iterable[str] | str = ("auto",)) -> list[str]:
    """Record every call of the named provider SDKs live (``"auto"``: every installed one).

    A provider named explicitly must be installed, else :class:`MissingDependency` names the
    extra to install; ``"auto"`` skips the ones that are not. An SDK not yet imported is
    patched when the application imports it. Idempotent. Returns the patched methods.
    """
    from tracely_sdk.providers import _patching

    requested = [names] if isinstance(names, str) else list(names)
    explicit = {str(n).strip().lower() for n in requested} - {"auto"}
    _patching.refresh_settings()
    with _lock:
        for name in _names(requested):
            sdk = PROVIDERS[name][0]
            if name in explicit:
                try:
                    importlib.import_module(sdk)
                except ImportError as exc:
                    raise MissingDependency(sdk, name) from exc
            elif not _installed(sdk):
                continue
            _live.add(name)
            if sys.modules.get(sdk) is not None:
                _apply(name)
            else:
                _defer(name)
    return patched_methods()


def uninstrument(names: Iterable[str] | str | None = None) -> None:
    """Stop recording ``names`` (default: every provider) and remove their patches.

    Each patched method gets back exactly the object it had, unless another instrumentor
    wrapped it since; tracely's wrapper then stays inside that chain as a pass-through. The
    next ``fixtures()`` block patches again.
    """
    from tracely_sdk.providers import _patching

    with _lock:
        for name in _names(names):
            _live.discard(name)
            _deferred.discard(name)
            if (
                sys.modules.get(PROVIDERS[name][0]) is not None
                and PROVIDERS[name][1] in sys.modules
            ):
                module = sys.modules[PROVIDERS[name][1]]
                module.set_live(False)
                module.uninstall()
    _patching.close_finished_streams()


def patched_methods() -> list[str]:
    """The SDK methods tracely has patched in this process, e.g. ``OpenAI.chat.completions.create``."""
    methods: list[str] = []
    for sdk, module_name in PROVIDERS.values():
        module = sys.modules.get(module_name)
        if module is not None and sys.modules.get(sdk) is not None:
            methods.extend(module.patched())
    return sorted(set(methods))


# The last activation for a case of a run: the run, what it looked at, and what it returned.
_last_activation: tuple[object, tuple[Any, ...], list[Any], list[str]] | None = None


def _activation_state() -> tuple[tuple[Any, ...], list[Any]]:
    """What an activation looks at: the providers recording live and deferred and how often
    the patches changed (compared by value), and which SDKs are imported and the object on
    each patched attribute (compared by identity)."""
    from tracely_sdk.providers._install import installed_state

    changes, attributes = installed_state()
    imported = [sys.modules.get(sdk) for sdk, _ in PROVIDERS.values()]
    return (frozenset(_live), frozenset(_deferred), changes), imported + attributes


def _activate(run: object | None = None) -> list[str]:
    """On entering a fixtures() block: patch every provider SDK the application uses.

    For a case of a ``run`` (the runner's RunSettings) whose earlier case activated them, and
    nothing has changed since (no SDK imported, no patch installed, removed or wrapped by
    another instrumentor, no provider instrumented), the patches are in place and the settings
    read for the run still hold: that activation's answer is the answer.
    """
    global _last_activation
    from tracely_sdk.providers import _patching

    _patching.close_finished_streams()
    last = _last_activation
    if run is not None and last is not None and last[0] is run:
        values, objects = _activation_state()
        if (
            values == last[1]
            and len(objects) == len(last[2])
            and all(map(operator.is_, objects, last[2]))  # in C: this runs for every case
        ):
            return list(last[3])
    _patching.refresh_settings()
    with _lock:
        for name, (sdk, _) in PROVIDERS.items():
            if sys.modules.get(sdk) is not None:
                _apply(name)
            # A deferred provider is patched by its import hook: looking for the SDK on disk
            # again (a search of sys.path) would cost every block more than the rest of it.
            elif name not in _deferred and _installed(sdk):
                _defer(name)
        methods = patched_methods()
        _last_activation = None if run is None else (run, *_activation_state(), methods)
    return list(methods)


register_activation_hook(_activate)
