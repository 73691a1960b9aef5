"""Model calls recorded and served at the HTTP client: whatever library sends them.

A request is a model call when one of the wire-format codecs answers its method and path
(``_openai_chat``: ``POST .../chat/completions``, what OpenAI and the servers copying its API
speak, with ``_openai_responses``: ``.../responses`` and ``_openai_embeddings``:
``.../embeddings``, whose span is ``embeddings MODEL``; ``_anthropic_messages``:
``POST .../v1/messages``; ``_cohere_chat``: ``POST .../v2/chat``; ``_ollama_chat`` and
``_ollama_generate``: ``POST .../api/chat`` and ``.../api/generate``; Bedrock's
``_bedrock_converse``, ``_bedrock_converse_stream``, ``_bedrock_invoke`` and
``_bedrock_invoke_stream``:
``POST /model/{modelId}/...``; ``_gemini`` and ``_gemini_stream``:
``POST .../models/MODEL:generateContent`` and ``:streamGenerateContent``) and it names a model:
its JSON body's ``model``, or the path's for a format that puts it there (Bedrock, Gemini: the
codec's ``path_model``). Any other request is left alone. The clients hooked are httpx's and
httpx2's (``Client.send`` and ``AsyncClient.send``, through which every request passes,
streamed or not), urllib3's (``HTTPConnectionPool.urlopen``, beneath requests and botocore) and
aiohttp's (``ClientSession._request``), each patched lazily like the SDKs: ``httpx``,
``httpx2``, ``urllib3`` and ``aiohttp`` in ``PROVIDERS``. What every hook shares, and the few
steps that read and make its library's own objects, is :class:`._client.ClientHook`.

Such a request is one ``llm:MODEL`` call (see :mod:`._exchange`): a ``chat MODEL`` span with the
GenAI attributes and ``server.*``, whose recorded input is the request (method, path, JSON
body) and whose output is the response as the wire carried it: status, the headers a client
reads, and the body (JSON) or, streamed, the server-sent events, AWS event-stream messages
or newline-delimited JSON lines in order. On replay
the client is given a response of its own library made of those bytes, so the code above it
(litellm, an SDK, the application's own) makes its objects, streams and errors as it did live.

A call already being recorded by a layer above (``call_llm``, ``@observe``) runs in that call's
body (``_seam.in_call_body``): the HTTP layer stands aside, so each call is recorded once. The
OpenAI, Anthropic and Google Gen AI SDKs are not patched: their calls are recorded here
(``providers._sdk``).
"""

from __future__ import annotations

from tracely_sdk.providers.http._exchange import answers, format_for

__all__ = ["answers", "format_for"]
