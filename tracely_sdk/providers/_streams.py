"""Live response bodies teed as they are read, and replayed streams closed when their block
ends.

A live body read in pieces (``providers.http``) is teed: each piece is recorded as it passes,
and the call is recorded, and its span ended, when the body is exhausted, closed, or fails.
One :class:`_StreamRecorder` does that work for sync and async bodies alike; the two tees only
pull the next piece and close the inner iterator, which is all that differs between them.

A replayed stream the agent never reads is closed when its ``fixtures()`` block ends (when
the block's session is released), or at the latest when the next block starts.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tracely_otel import attributes as A
from tracely_sdk._seam import Call
from tracely_sdk.providers._settings import warn_once

if TYPE_CHECKING:
    from tracely_sdk.providers._patching import CapturedResult, InterceptedCall


def succeed(call: Call, recording: CapturedResult) -> None:
    # One pass of the SDK's attribute checks: the response attributes first, then the seam's
    # recorded values, then tracely.kind, last.
    call.succeeded(recording, recording.attributes)


def release(call: Call, spec: InterceptedCall) -> None:
    """End the call and break the call/spec cycle, so the call (and the replay session it
    holds) is freed at once: the session's end closes its unread replayed streams."""
    call.end()
    spec.call = None


class _StreamRecorder:
    """The items of one live stream, each recorded as it passes; the stream is recorded on the
    call when it is done.

    Each pull of the next item runs inside ``with recorder:``: the end of the stream or its
    failure is recorded as it leaves the pull.
    """

    __slots__ = (
        "active",
        "call",
        "chunks",
        "done",
        "exhausted",
        "first_chunk",
        "headers",
        "last",
        "spec",
        "started",
    )

    def __init__(
        self,
        call: Call,
        spec: InterceptedCall,
        headers: Mapping[str, str] | None,
        started: float,
        last: type[BaseException],
    ) -> None:
        self.call = call
        self.spec = spec
        self.headers = headers
        self.started = started  # perf_counter() when the request was sent
        self.last = last  # what the inner iterator raises when it is exhausted
        self.first_chunk: float | None = None  # seconds from the request to the first item
        # None once an item could not be recorded: the stream is then not recorded at all, as
        # a recording missing an item would be served as if it were whole.
        self.chunks: list[dict[str, Any]] | None = []
        self.active = False  # inside the inner next(): its closing is its end, not a cut
        self.done = False
        self.exhausted = False

    def __enter__(self) -> None:
        self.active = True

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> bool:
        self.active = False
        if exc is None:
            return False
        if isinstance(exc, self.last):
            # Exhausted: swallowed here, as a generator may not let StopIteration escape.
            self.exhausted = True
            self.finish()
            return True
        self.fail(exc)
        return False

    def add(self, item: Any) -> Any:
        """Record ``item`` before the caller has it: the caller may reuse its buffer."""
        if self.first_chunk is None:
            self.first_chunk = time.perf_counter() - self.started
        chunks = self.chunks
        if chunks is None:
            return item
        try:
            chunks.append(self.spec.record_item(item))
        except Exception:
            self.chunks = None
            self._unrecorded()
        return item

    def _unrecorded(self) -> None:
        warn_once(
            "stream", "tracely: could not record the stream of %s", self.call.label, exc_info=True
        )

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        chunks, self.chunks = self.chunks, []
        try:
            if chunks is not None:
                recording = self.spec.record_stream(chunks, self.headers)
                if self.first_chunk is not None:
                    recording.attributes = {
                        **(recording.attributes or {}),
                        A.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: self.first_chunk,
                    }
                succeed(self.call, recording)
        except Exception:
            self._unrecorded()
        finally:
            release(self.call, self.spec)

    def fail(self, exc: BaseException) -> None:
        if self.done:
            return
        self.done = True
        self.chunks = []
        try:
            self.call.failed(exc)
        finally:
            release(self.call, self.spec)

    def closed(self) -> None:
        if not self.active:
            self.finish()

    def close(self, inner: Any) -> None:
        """Closed early: closing the inner iterator closes the response (and ends the call)."""
        close = getattr(inner, "close", None)
        if close is not None:
            close()
        self.closed()

    async def aclose(self, inner: Any) -> None:
        aclose = getattr(inner, "aclose", None)
        if aclose is not None:
            await aclose()
        self.closed()


def _sync_tee(inner: Iterator[Any], recorder: _StreamRecorder) -> Iterator[Any]:
    try:
        while True:
            with recorder:
                item = next(inner)
            if recorder.exhausted:
                return
            yield recorder.add(item)
    finally:
        recorder.close(inner)


async def _async_tee(inner: AsyncIterator[Any], recorder: _StreamRecorder) -> AsyncIterator[Any]:
    try:
        while True:
            with recorder:
                item = await inner.__anext__()
            if recorder.exhausted:
                return
            yield recorder.add(item)
    finally:
        await recorder.aclose(inner)


# --------------------------------------------------------------------------- replayed streams


_served: dict[int, tuple[weakref.ref[Any], list[weakref.ref[Any]]]] = {}
_ended: set[int] = set()  # the sessions in _served whose fixtures() block has ended
_served_lock = threading.Lock()


def served_stream(session: Any, response: Any) -> None:
    """Remember a replayed stream's response, to close it when ``session``'s block ends."""
    if session is None:
        return
    key = id(session)
    with _served_lock:
        entry = _served.get(key)
        if entry is None or entry[0]() is not session:
            entry = (weakref.ref(session), [])
            _served[key] = entry
            _ended.discard(key)
            weakref.finalize(session, _close_served, key)
            # A replayed stream may still be read after its block ends: it is closed at the
            # next block or when the session is freed, whichever comes first.
            session.on_end(lambda: _end(key))
        entry[1].append(weakref.ref(response))


def _end(key: int) -> None:
    with _served_lock:
        _ended.add(key)


def _close_served(key: int) -> None:
    with _served_lock:
        entry = _served.pop(key, None)
        _ended.discard(key)
    if entry is None:
        return
    for ref in entry[1]:
        response = ref()
        if response is not None and not getattr(response, "is_closed", True):
            try:
                # A replayed body is sync and async at once: a sync close works for both.
                response.close()
            except Exception:
                warn_once("close-replayed", "tracely: could not close a replayed stream")


def close_finished_streams() -> None:
    """Close the replayed streams of every fixtures() block that has ended."""
    with _served_lock:
        keys = [k for k, (ref, _) in _served.items() if ref() is None or k in _ended]
    for key in keys:
        _close_served(key)


def body_recorder(
    call: Call,
    spec: InterceptedCall,
    headers: Mapping[str, str] | None,
    started: float,
    *,
    is_async: bool,
) -> _StreamRecorder:
    """The recorder of a live HTTP response's body, read in pieces by the library above the
    client (``providers.http``): :func:`teed_body` records each piece as it passes."""
    return _StreamRecorder(
        call, spec, headers, started, StopAsyncIteration if is_async else StopIteration
    )


def teed_body(inner: Any, recorder: _StreamRecorder) -> Any:
    """The pieces of ``inner`` (an iterator, or an async iterator when the recorder is
    async's), each recorded by ``recorder`` as it passes."""
    if recorder.last is StopAsyncIteration:
        return _async_tee(inner, recorder)
    return _sync_tee(inner, recorder)
