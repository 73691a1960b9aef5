"""Amazon Bedrock's Converse wire format: ``POST /model/{modelId}/converse``.

The model is in the path; the request and its JSON answer are described in :mod:`._bedrock`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracely_sdk.providers.http import _bedrock
from tracely_sdk.providers.http._codec import Codec


def answers(method: str, path: str) -> bool:
    """Whether a request is a model call of this format."""
    return _bedrock.operation(method, path) == "converse"


def streamed(body: Mapping[str, Any]) -> bool:
    return False


CODEC = Codec.of("bedrock_converse", vars(_bedrock), answers=answers, streamed=streamed)
