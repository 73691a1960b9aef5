"""The Google Gen AI SDK (google-genai), recorded and served at its HTTP clients: httpx, and
aiohttp for the async client when it is installed.

Nothing of the SDK is patched: ``models.generate_content`` and ``generate_content_stream``
(sync and ``client.aio``) send ``POST .../models/MODEL:generateContent`` and
``:streamGenerateContent``, each one ``llm:MODEL`` call at the client (``providers.http``'s
Gemini codecs). On replay the SDK is given the recorded response and makes its own
``GenerateContentResponse`` objects, streams and errors from it, as live. Any other request
(``count_tokens``, ``embed_content``, files) is not a model call: under strict replay the
network guard refuses it.
"""

from __future__ import annotations

from tracely_sdk.providers._sdk import WireSDK

LAYER = WireSDK("google", "google.genai._api_client")
set_live = LAYER.set_live
install = LAYER.install
uninstall = LAYER.uninstall
patched = LAYER.patched
