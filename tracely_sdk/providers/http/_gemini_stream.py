"""The Gemini API's streamed wire format: ``POST .../models/{model}:streamGenerateContent``.

The request is ``:generateContent``'s (see :mod:`._gemini`), answered by a stream of its
responses: server-sent ``data:`` events when the query asks ``alt=sse``, else one JSON array
whose items arrive one by one (recorded as the array).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tracely_sdk.providers.http import _gemini


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return _gemini.operation(method, path) == "streamGenerateContent"


def streamed(body: Mapping[str, Any]) -> bool:
    return True  # the path asks for the stream, whatever the body says


CODEC = dataclasses.replace(_gemini.CODEC, name="gemini_stream", answers=answers, streamed=streamed)
