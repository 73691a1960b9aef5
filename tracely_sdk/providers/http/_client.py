"""The hooks on HTTP client libraries: what they share (:class:`ClientHook`, which the hooks on
urllib3 (``_urllib3``) and aiohttp (``aiohttp``) subclass too), and the hook on an httpx-style
library (httpx, and httpx2, its fork with the same API).

``Client.send`` and ``AsyncClient.send`` are patched: every request of a client passes there,
``client.post(...)`` and ``client.stream(...)`` alike, once per call whatever its redirects and
retries of authentication. A model call (:meth:`ClientHook.wire_call`) is intercepted there;
anything else goes on untouched.
"""

from __future__ import annotations

import abc
import importlib
import sys
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

from tracely_sdk import _replay
from tracely_sdk._seam import in_call_body
from tracely_sdk.providers._patching import aintercept, install, intercept, is_installed, uninstall
from tracely_sdk.providers._streams import served_stream, teed_body
from tracely_sdk.providers.http._exchange import Target, WireCall, model_call, served_pieces

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


class ClientHook(abc.ABC):
    """One client library's patches, whether its model calls are recorded outside
    ``fixtures()`` blocks, and what :class:`WireCall` asks of the library: how a response is
    read and teed, and made of recorded bytes."""

    def __init__(self, module: str) -> None:
        self.name = module
        self.live = False
        self.riders: set[str] = set()  # the SDKs recording live through this library

    @property
    def module(self) -> Any:
        return sys.modules[self.name]

    # -- state and patches -----------------------------------------------------------------

    def set_live(self, live: bool) -> None:
        self.live = live

    def set_live_for(self, sdk: str, live: bool) -> None:
        """Record this library's model calls live on behalf of an SDK that sends through it
        (``instrument("openai")``), whatever the library's own setting."""
        if live:
            self.riders.add(sdk)
        else:
            self.riders.discard(sdk)

    def wanted(self) -> bool:
        """Whether this library's patches are still wanted outside ``fixtures()`` blocks."""
        return self.live or bool(self.riders)

    def watching(self) -> bool:
        """Whether a request sent now may be a call to record or serve: recording is on, or a
        ``fixtures()`` block is active, and no layer above records this call already."""
        return (
            self.live or bool(self.riders) or _replay.current_session() is not None
        ) and not in_call_body()

    @abc.abstractmethod
    def _targets(self) -> list[tuple[type, str, Callable[..., Any]]]:
        raise NotImplementedError

    def install(self) -> None:
        for owner, method, wrapper in self._targets():
            install(owner, method, wrapper)

    def uninstall(self) -> None:
        for owner, method, _ in self._targets():
            uninstall(owner, method)

    def patched(self) -> list[str]:
        return [
            f"{self.name}.{owner.__name__}.{method}"
            for owner, method, _ in self._targets()
            if is_installed(owner, method)
        ]

    def wire_call(
        self,
        request: Any,
        target: Target,
        content: Any,
        *,
        provider: str,
        is_async: bool,
        stream: bool,
        sent_path: str | None = None,
    ) -> WireCall | None:
        """The call a request is, when it is a model call (:func:`._exchange.model_call`: its
        path, as sent (``sent_path``, when ``target.path`` is decoded from it), and its
        ``content``), else None. ``request`` is the library's own, given back to the hook when
        the call is served or fails."""
        found = model_call(target.method, target.path if sent_path is None else sent_path, content)
        if found is None:
            return None
        codec, body, model = found
        return WireCall(
            codec,
            self,
            request,
            target,
            body,
            model,
            provider=provider,
            is_async=is_async,
            stream=stream,
        )

    # -- what a WireCall asks ----------------------------------------------------------------

    @abc.abstractmethod
    def response_head(self, response: Any) -> tuple[int, list[tuple[str, str]]]:
        """A live response's status and headers."""
        raise NotImplementedError

    @abc.abstractmethod
    def read_body(self, response: Any, encoding: str | None) -> bytes | None:
        """A live response's body, decoded, when the client has read it already; else None
        (it is teed as the client reads it)."""
        raise NotImplementedError

    @abc.abstractmethod
    def tee_body(self, response: Any, recorder: Any, is_async: bool) -> None:
        """Record a live response's body as the client reads it (``recorder``, of
        ``_streams.body_recorder``)."""
        raise NotImplementedError

    @abc.abstractmethod
    def decoded(self, raw: bytes, encoding: str | None) -> bytes:
        """A body read as it came off the wire (``content-encoding`` applied), decoded."""
        raise NotImplementedError

    @abc.abstractmethod
    def served_response(
        self, request: Any, output: Mapping[str, Any], *, stream: bool, session: Any
    ) -> Any:
        """The library's own response, made of a recorded exchange."""
        raise NotImplementedError

    @abc.abstractmethod
    def transport_error(self, error: Mapping[str, Any], request: Any) -> BaseException | None:
        """The library's own exception for a recorded failure (one of a fixed set), or None."""
        raise NotImplementedError

    def cut_error(self, cut: Any, request: Any) -> BaseException | None:
        """What reading a recorded body cut short (``"cut": {"type", "message"}``, a transport
        error of the library) raises after its last piece; None for a whole body."""
        return self.transport_error(cut, request) if isinstance(cut, Mapping) else None


def served_status(output: Mapping[str, Any]) -> int:
    """A recorded exchange's status, checked."""
    status = output["status"]
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        raise ValueError(f"a recorded HTTP status is an integer from 100 to 599, not {status!r}")
    return status


# What frames a body on the wire: a served body is the recorded one decoded and serialised
# afresh, so the recorded values would not describe the bytes served.
_FRAMING = frozenset({"content-length", "content-encoding", "transfer-encoding"})


def served_headers(output: Mapping[str, Any], length: int | None) -> list[tuple[str, str]]:
    """A recorded exchange's headers as they are served with a body of ``length`` bytes (None
    for a body served as a stream, which then has no length), unencoded."""
    headers = [
        (str(k), str(v))
        for k, v in (output.get("headers") or {}).items()
        if str(k).lower() not in _FRAMING
    ]
    if length is not None:
        headers.append(("content-length", str(length)))
    return headers


class HTTPLibrary(ClientHook):
    """The hook on an httpx-style library."""

    def __init__(self, module: str) -> None:
        super().__init__(module)
        self._streams: tuple[type, type, type] | None = None

    def _targets(self) -> list[tuple[type, str, Callable[..., Any]]]:
        http = importlib.import_module(self.name)
        return [(http.Client, "send", self._send), (http.AsyncClient, "send", self._asend)]

    # -- the wrappers ----------------------------------------------------------------------

    def _spec(self, instance: Any, args: Any, kwargs: Any, is_async: bool) -> WireCall | None:
        if not self.watching():
            return None
        request = args[0] if args else kwargs.get("request")
        try:
            url = request.url
            target = Target(request.method, url.scheme, url.host, url.port, url.path)
            content = request.content
        except Exception:
            return None  # a streamed upload is not read: not a model call
        owner = "AsyncClient" if is_async else "Client"
        return self.wire_call(
            request,
            target,
            content,
            provider=f"{self.name}.{owner}.send",
            is_async=is_async,
            stream=bool(kwargs.get("stream")),
        )

    def _send(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        spec = self._spec(instance, args, kwargs, is_async=False)
        if spec is None:
            return wrapped(*args, **kwargs)
        return intercept(spec, lambda: wrapped(*args, **kwargs))

    async def _asend(
        self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
    ) -> Any:
        spec = self._spec(instance, args, kwargs, is_async=True)
        if spec is None:
            return await wrapped(*args, **kwargs)
        return await aintercept(spec, lambda: wrapped(*args, **kwargs))

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
                def __init__(
                    self, pieces: Sequence[bytes], cut: BaseException | None = None
                ) -> None:
                    self.pieces = pieces
                    self.cut = cut  # a body cut short: the error its reader gets after the pieces

                def __iter__(self) -> Iterator[bytes]:
                    yield from self.pieces
                    if self.cut is not None:
                        raise self.cut

                async def __aiter__(self) -> Any:
                    for piece in self.pieces:
                        yield piece
                    if self.cut is not None:
                        raise self.cut

            self._streams = (Teed, AsyncTeed, Replayed)
        return self._streams

    def response_head(self, response: Any) -> tuple[int, list[tuple[str, str]]]:
        return int(response.status_code), list(response.headers.multi_items())

    def read_body(self, response: Any, encoding: str | None) -> bytes | None:
        content: bytes = response.content
        return content

    def tee_body(self, response: Any, recorder: Any, is_async: bool) -> None:
        teed, async_teed, _ = self._stream_classes()
        response.stream = (async_teed if is_async else teed)(response.stream, recorder)
        # Dropped unread and never closed: record what was read when the response is freed.
        weakref.finalize(response, recorder.finish)

    def decoded(self, raw: bytes, encoding: str | None) -> bytes:
        if not encoding:
            return raw
        content: bytes = self.module.Response(
            200, headers={"content-encoding": encoding}, content=raw
        ).content
        return content

    def served_response(
        self, request: Any, output: Mapping[str, Any], *, stream: bool, session: Any
    ) -> Any:
        http = self.module
        status = served_status(output)
        pieces = served_pieces(output)
        if stream:
            replayed = self._stream_classes()[2]
            cut = self.cut_error(output.get("cut"), request)
            headers = served_headers(output, None)
            response = http.Response(
                status, headers=headers, stream=replayed(pieces, cut), request=request
            )
            served_stream(session, response)
        else:
            content = b"".join(pieces)
            headers = served_headers(output, len(content))
            response = http.Response(status, headers=headers, content=content, request=request)
        response.elapsed = timedelta(0)
        return response

    def transport_error(self, error: Mapping[str, Any], request: Any) -> BaseException | None:
        name = str(error.get("type"))
        if name not in _TRANSPORT_ERRORS:
            return None
        cls = getattr(self.module, name, None)
        if isinstance(cls, type) and issubclass(cls, self.module.TransportError):
            exc: BaseException = cls(str(error.get("message")), request=request)
            return exc
        return None
