"""Model calls recorded and served at the HTTP client: whatever library sends them.

A request is a model call when one of the wire-format codecs answers its method and path
(``_openai_chat``: ``POST .../chat/completions``, what OpenAI and the servers copying its API
speak; ``_anthropic_messages``: ``POST .../v1/messages``; ``_gemini``:
``POST .../models/MODEL:generateContent`` and ``:streamGenerateContent``) and it names a model
(in its JSON body's ``model``, or in its path). Any other request is left alone. The clients
hooked are httpx's and httpx2's (``Client.send`` and ``AsyncClient.send``, through which every
request passes, streamed or not) and aiohttp's (``ClientSession._request``), each patched
lazily like the SDKs: ``httpx``, ``httpx2`` and ``aiohttp`` in ``PROVIDERS``; what they share
is :class:`._hook.ClientHook`.

Such a request is one ``llm:MODEL`` call (see :mod:`._exchange`): a ``chat MODEL`` span with the
GenAI attributes and ``server.*``, whose recorded input is the request (method, path, JSON
body) and whose output is the response as the wire carried it: status, the headers a client
reads, and the body (JSON) or, streamed as server-sent events, the events in order. On replay
the client is given a response of its own library made of those bytes, so the code above it
(litellm, an SDK, the application's own) makes its objects, streams and errors as it did live.

A call already being recorded by a layer above (a patched SDK method, ``call_llm``,
``@observe``) runs in that call's body (``_seam.in_call_body``): the HTTP layer stands aside,
so each call is recorded once. On replay a call is served by the layer that recorded it: a
patched SDK method whose recorded entry was recorded at the client lets the call through
(:func:`served_at_the_client`), and so does the SDKs' network safety net.
"""

from __future__ import annotations

from tracely_sdk.providers._patching import served_at_the_client
from tracely_sdk.providers.http._exchange import answers, format_for

__all__ = ["answers", "format_for", "served_at_the_client"]
