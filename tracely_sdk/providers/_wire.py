"""In-memory HTTP bodies for replayed provider responses, shared by both SDK codecs.

Nothing here imports an SDK or its HTTP library: each codec passes the HTTP module its SDK is
built on (``httpx2``, or ``httpx`` for older SDKs).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta
from typing import Any


class ReplayBody:
    """An in-memory response body, sync and async at once, that yields one piece per recorded chunk."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self._pieces = list(pieces)

    @property
    def elapsed(self) -> timedelta:
        # `Response.elapsed` reads it from its stream until the client sets it: nothing was waited for.
        return timedelta(0)

    def __iter__(self) -> Iterator[bytes]:
        yield from self._pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


@functools.cache
def replay_body_class(http: Any) -> type[ReplayBody]:
    """:class:`ReplayBody` as a stream of ``http`` (both its sync and async byte-stream bases,
    as the library's own ``ByteStream`` is), so one body serves the sync and async SDK."""
    return type("ReplayBody", (ReplayBody, http.SyncByteStream, http.AsyncByteStream), {})
