"""The Anthropic SDK, recorded and served at its HTTP client (httpx2 for anthropic 2.x).

Nothing of the SDK is patched: ``messages.create``, ``parse`` and ``stream()``, and their
``beta.messages`` twins, send ``POST .../v1/messages`` through the client's ``send``, where each
is one ``llm:MODEL`` call (``providers.http``). On replay the SDK is given the recorded
response, so it makes its own messages, streams, raw responses and errors from the recorded
bytes, as live. Any other request (``count_tokens``, ``models.list``, batches) is not a model
call: under strict replay the network guard refuses it.
"""

from __future__ import annotations

from tracely_sdk.providers._sdk import WireSDK

LAYER = WireSDK("anthropic", "anthropic._base_client")
set_live = LAYER.set_live
install = LAYER.install
uninstall = LAYER.uninstall
patched = LAYER.patched
