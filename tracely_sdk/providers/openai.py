"""The OpenAI SDK, recorded and served at its HTTP client (httpx2 for openai 3.x).

Nothing of the SDK is patched: every request it sends passes through the client's ``send``,
where a chat completion (``POST .../chat/completions``), a Responses call (``.../responses``)
or an embedding (``.../embeddings``) is one ``llm:MODEL`` call (``providers.http``). On replay
the SDK is given the recorded response, so ``create``, ``parse``, ``stream()``,
``.with_raw_response`` / ``.with_streaming_response`` and its errors make the SDK's own objects
from the recorded bytes, as live. Any other request (``files``, ``models.list``,
``responses.retrieve``) is not a model call: under strict replay the network guard refuses it.
"""

from __future__ import annotations

from tracely_sdk.providers._sdk import WireSDK

LAYER = WireSDK("openai", "openai._base_client")
set_live = LAYER.set_live
install = LAYER.install
uninstall = LAYER.uninstall
patched = LAYER.patched
