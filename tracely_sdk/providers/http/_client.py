"""The hook on an httpx-style client library (httpx, and httpx2, its fork with the same API).

``Client.send`` and ``AsyncClient.send`` are patched: every request of a client passes there,
``client.post(...)`` and ``client.stream(...)`` alike, once per call whatever its redirects and
retries of authentication. A model call (:func:`format_for`) is intercepted there; anything
else goes on untouched.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

from tracely_sdk.providers._patching import aintercept, intercept
from tracely_sdk.providers._streams import served_stream, teed_body
from tracely_sdk.providers.http._exchange import WireCall, body_bytes, sse_pieces
from tracely_sdk.providers.http._hook import ClientHook, recorded_status

# The library's exceptions a recorded failure may be raised as again: its transport errors,
# named in the recording, looked up only in this fixed set.
_TRANSPORT_ERRORS = frozenset(
    {
        "ConnectError",
        "ConnectTimeout",
        "LocalProtocolError",
        "NetworkError",
        "PoolTimeout",
        "ProxyError",
        "ReadError",
        "ReadTimeout",
        "RemoteProtocolError",
        "TimeoutException",
        "UnsupportedProtocol",
        "WriteError",
        "WriteTimeout",
    }
)


class HTTPLibrary(ClientHook):
    """An httpx-style library's hook: ``Client.send`` and ``AsyncClient.send``."""

    def __init__(self, module: str) -> None:
        super().__init__(module)
        self._streams: tuple[type, type, type] | None = None

    @property
    def module(self) -> Any:
        return sys.modules[self.name]

    def _targets(self) -> list[tuple[type, str, Callable[..., Any]]]:
        http = importlib.import_module(self.name)
        return [(http.Client, "send", self._send), (http.AsyncClient, "send", self._asend)]

    # -- the wrappers ----------------------------------------------------------------------

    def _spec(self, args: Any, kwargs: Any, is_async: bool) -> WireCall | None:
        if not self.wanted():
            return None
        request = args[0] if args else kwargs.get("request")
        try:
            content = request.content  # a streamed upload is not read: not a model call
        except Exception:
            return None
        owner = "AsyncClient" if is_async else "Client"
        return self.model_call(
            request,
            request.method,
            request.url,
            content,
            provider=f"{self.name}.{owner}.send",
            is_async=is_async,
            stream=bool(kwargs.get("stream")),
        )

    def _send(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        spec = self._spec(args, kwargs, is_async=False)
        if spec is None:
            return wrapped(*args, **kwargs)
        return intercept(spec, lambda: wrapped(*args, **kwargs))

    async def _asend(
        self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
    ) -> Any:
        spec = self._spec(args, kwargs, is_async=True)
        if spec is None:
            return await wrapped(*args, **kwargs)
        return await aintercept(spec, lambda: wrapped(*args, **kwargs))

    # -- responses -------------------------------------------------------------------------

    def head(self, response: Any) -> tuple[int, list[tuple[str, str]]]:
        return int(response.status_code), list(response.headers.multi_items())

    def content(self, response: Any) -> bytes:
        return bytes(response.content)

    def tee(self, response: Any, recorder: Any, is_async: bool) -> None:
        response.stream = self.teeing_stream(response.stream, recorder, is_async)

    # -- bodies ----------------------------------------------------------------------------

    def _stream_classes(self) -> tuple[type, type, type]:
        """The byte streams this library's responses are given: a live body teed (sync,
        async), and a replayed one (both at once, as the library's own ``ByteStream``)."""
        if self._streams is None:
            http = self.module

            class Teed(http.SyncByteStream):  # type: ignore[name-defined,misc]
                def __init__(self, inner: Any, recorder: Any) -> None:
                    self.inner = inner
                    self.recorder = recorder

                def __iter__(self) -> Iterator[bytes]:
                    return teed_body(iter(self.inner), self.recorder)  # type: ignore[no-any-return]

                def close(self) -> None:
                    try:
                        self.inner.close()
                    finally:
                        self.recorder.closed()

            class AsyncTeed(http.AsyncByteStream):  # type: ignore[name-defined,misc]
                def __init__(self, inner: Any, recorder: Any) -> None:
                    self.inner = inner
                    self.recorder = recorder

                def __aiter__(self) -> Any:
                    return teed_body(self.inner.__aiter__(), self.recorder)

                async def aclose(self) -> None:
                    try:
                        await self.inner.aclose()
                    finally:
                        self.recorder.closed()

            class Replayed(http.SyncByteStream, http.AsyncByteStream):  # type: ignore[name-defined,misc]
                def __init__(self, pieces: Sequence[bytes]) -> None:
                    self.pieces = pieces

                def __iter__(self) -> Iterator[bytes]:
                    yield from self.pieces

                async def __aiter__(self) -> Any:
                    for piece in self.pieces:
                        yield piece

            self._streams = (Teed, AsyncTeed, Replayed)
        return self._streams

    def teeing_stream(self, inner: Any, recorder: Any, is_async: bool) -> Any:
        """A live response's byte stream in place of ``inner``: each piece read is recorded."""
        teed, async_teed, _ = self._stream_classes()
        return (async_teed if is_async else teed)(inner, recorder)

    def decoded(self, raw: bytes, encoding: str | None) -> bytes:
        """A body read as it came off the wire (``content-encoding`` applied), decoded."""
        if not encoding:
            return raw
        content: bytes = self.module.Response(
            200, headers={"content-encoding": encoding}, content=raw
        ).content
        return content

    def served_response(
        self, request: Any, output: Mapping[str, Any], *, stream: bool, session: Any
    ) -> Any:
        """The library's own response, made of a recorded exchange."""
        http = self.module
        status = recorded_status(output)
        headers = [(str(k), str(v)) for k, v in (output.get("headers") or {}).items()]
        events = output.get("events")
        pieces = sse_pieces(events) if isinstance(events, list) else [body_bytes(output)]
        if stream:
            replayed = self._stream_classes()[2]
            response = http.Response(
                status, headers=headers, stream=replayed(pieces), request=request
            )
            served_stream(session, response)
        else:
            response = http.Response(
                status, headers=headers, content=b"".join(pieces), request=request
            )
        response.elapsed = timedelta(0)
        return response

    def transport_error(self, error: Mapping[str, Any], request: Any) -> BaseException | None:
        """The library's transport error named in ``error`` (one of a fixed set), or None."""
        name = str(error.get("type"))
        if name not in _TRANSPORT_ERRORS:
            return None
        cls = getattr(self.module, name, None)
        if isinstance(cls, type) and issubclass(cls, self.module.TransportError):
            exc: BaseException = cls(str(error.get("message")), request=request)
            return exc
        return None
