"""httpx2's clients: model calls recorded and served at ``Client.send`` / ``AsyncClient.send``
(see :mod:`tracely_sdk.providers.http`)."""

from __future__ import annotations

from tracely_sdk.providers.http._client import HTTPLibrary

LIBRARY = HTTPLibrary("httpx2")
set_live = LIBRARY.set_live
install = LIBRARY.install
uninstall = LIBRARY.uninstall
patched = LIBRARY.patched
