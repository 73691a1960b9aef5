"""Amazon Bedrock's ConverseStream wire format: ``POST /model/{modelId}/converse-stream``.

The model is in the path; the request is Converse's, answered by an AWS event stream
(``application/vnd.amazon.eventstream``, see :mod:`._eventstream`) of Converse's pieces.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tracely_sdk.providers.http import _bedrock, _bedrock_converse


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return _bedrock.operation(method, path) == "converse-stream"


def streamed(body: Mapping[str, Any]) -> bool:
    return True  # the path asks for the stream, whatever the body says


CODEC = dataclasses.replace(
    _bedrock_converse.CODEC, name="bedrock_converse_stream", answers=answers, streamed=streamed
)
