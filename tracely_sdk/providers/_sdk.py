"""An SDK whose model calls are recorded and served at the HTTP client it sends through.

OpenAI, Anthropic and Google Gen AI are not patched themselves. ``instrument("openai")`` (and
every ``fixtures()`` block) installs the hooks of the HTTP libraries the SDK's client module
imports (``providers.http``: httpx2 for openai 3.x and anthropic 2.x, httpx and aiohttp for
google-genai) and switches their live recording on for the SDK. Each call is then one exchange
recorded at the client, and served there on replay, so the SDK makes its own response objects,
streams and errors from the recorded bytes, exactly as it did live.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from tracely_sdk._config import PROVIDERS

# The HTTP libraries a hook exists for, in the order they are looked for.
_LIBRARIES = ("httpx2", "httpx", "aiohttp")


class WireSDK:
    """One SDK's switch on the HTTP client hooks beneath it."""

    def __init__(self, name: str, client_module: str) -> None:
        self.name = name  # the name in ``instrument(...)``
        self.client_module = client_module  # the SDK's module that imports its HTTP libraries
        self._hooks: list[Any] | None = None

    def hooks(self) -> list[Any]:
        """The hooks (``providers.http``'s ``ClientHook``) of the libraries the SDK sends through."""
        if self._hooks is None:
            if sys.modules.get(self.client_module) is None:
                return []  # the SDK is not imported (yet): nothing beneath it to hook
            module = sys.modules[self.client_module]
            names = [n for n in _LIBRARIES if getattr(module, n, None) is sys.modules.get(n)]
            self._hooks = [
                importlib.import_module(PROVIDERS[n][1]).LIBRARY
                for n in names
                if sys.modules.get(n) is not None
            ]
        return self._hooks

    @property
    def live(self) -> bool:
        """Whether the SDK's calls are recorded outside ``fixtures()`` blocks (``instrument``)."""
        return any(self.name in hook.riders for hook in self.hooks())

    def set_live(self, live: bool) -> None:
        for hook in self.hooks():
            hook.set_live_for(self.name, live)

    def install(self) -> None:
        for hook in self.hooks():
            hook.install()

    def uninstall(self) -> None:
        # A hook another SDK or the library itself still records live through stays.
        for hook in self.hooks():
            if not hook.wanted():
                hook.uninstall()

    def patched(self) -> list[str]:
        return [method for hook in self.hooks() for method in hook.patched()]
