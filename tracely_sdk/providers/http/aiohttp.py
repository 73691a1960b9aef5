"""aiohttp's client: model calls recorded and served at ``ClientSession._request``
(see :mod:`tracely_sdk.providers.http`).

``session.request``, ``session.post`` and the other verbs all send through ``_request``, which
returns the response once its headers are read, its body left for the caller
(``await resp.json()``, ``resp.read()``, ``async for line in resp.content``). Live, the body is
recorded as it arrives in the response's ``StreamReader``; the recording is made at its end,
when the response is closed or released, or when it is dropped. On replay the caller is given a
genuine ``ClientResponse`` whose ``content`` is a ``StreamReader`` holding the recorded bytes,
so everything the caller reads it with works as live. The session's ``raise_for_status`` is
applied to both alike, after the exchange is recorded or served.
"""

from __future__ import annotations

import asyncio
import http
import importlib
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tracely_sdk.providers._patching import aintercept, warn_once
from tracely_sdk.providers.http._client import ClientHook, served_headers, served_status
from tracely_sdk.providers.http._exchange import Target, WireCall, served_pieces

# aiohttp's exceptions a recorded failure may be raised as again, looked up only in this set:
# those made from a message alone, and the failure to connect.
_TRANSPORT_ERRORS = frozenset(
    {
        "ClientConnectionError",
        "ClientConnectionResetError",
        "ClientOSError",
        "ClientPayloadError",
        "ConnectionTimeoutError",
        "ServerConnectionError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "SocketTimeoutError",
    }
)
_CONNECTOR_ERROR = "ClientConnectorError"

# The live StreamReaders being recorded: StreamReader has slots and no weak references, so its
# recorder is kept here, by the reader's id, until the body ends.
_recorders: dict[int, Any] = {}


@dataclass(frozen=True, slots=True)
class _Request:
    """What a served response is made with: the session, and the request as aiohttp would
    have sent it."""

    session: Any
    method: str
    url: Any
    headers: Any  # as the caller gave them: the session's own are added only when served


class _NoWriter:
    """The writer of a request already sent, as a response made without one reads it."""

    output_size = 0


class AiohttpLibrary(ClientHook):
    """aiohttp's hook: ``ClientSession._request``."""

    def __init__(self) -> None:
        super().__init__("aiohttp")
        self._teed: type | None = None

    def _targets(self) -> list[tuple[type, str, Callable[..., Any]]]:
        aiohttp = importlib.import_module("aiohttp")
        return [(aiohttp.ClientSession, "_request", self._request)]

    # -- the wrapper -----------------------------------------------------------------------

    def _spec(self, session: Any, args: Any, kwargs: Any) -> WireCall | None:
        if not self.watching():
            return None
        try:
            method = str(args[0] if args else kwargs["method"]).upper()
            url = session._build_url(args[1] if len(args) > 1 else kwargs["str_or_url"])
            params = kwargs.get("params")
            if params:
                url = url.extend_query(params)
            content = _sent_json(session, kwargs)
            target = Target(method, url.scheme, url.host or "", url.port, url.path)
        except Exception:
            return None  # aiohttp's own checks answer a request it cannot send
        return self.wire_call(
            _Request(session, method, url, kwargs.get("headers")),
            target,
            content,
            provider="aiohttp.ClientSession._request",
            is_async=True,
            stream=True,
            sent_path=url.raw_path,
        )

    async def _request(
        self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
    ) -> Any:
        spec = self._spec(instance, args, kwargs)
        if spec is None:
            return await wrapped(*args, **kwargs)
        raise_for_status = kwargs.get("raise_for_status")
        if raise_for_status is None:
            raise_for_status = instance._raise_for_status
        # The status is checked once the exchange is recorded, live or served alike.
        unchecked = {**kwargs, "raise_for_status": False}
        response = await aintercept(spec, lambda: wrapped(*args, **unchecked))
        if callable(raise_for_status):
            await raise_for_status(response)
        elif raise_for_status and response.status >= 400:
            try:
                await response.read()  # the error's body is part of the recording
            finally:
                response.raise_for_status()
        return response

    # -- what a WireCall asks ----------------------------------------------------------------

    def response_head(self, response: Any) -> tuple[int, list[tuple[str, str]]]:
        return int(response.status), list(response.headers.items())

    def _teed_reader(self) -> type:
        """StreamReader with each piece fed to it recorded: a live response's ``content``
        takes this class, so the parser above it and the caller below keep the same object."""
        if self._teed is None:
            from aiohttp import StreamReader

            class TeedReader(StreamReader):
                __slots__ = ()

                def feed_data(self, data: bytes, *args: Any) -> Any:
                    recorder = _recorders.get(id(self))
                    if recorder is not None and data:
                        recorder.add(bytes(data))
                    return super().feed_data(data, *args)

                def set_exception(self, exc: BaseException, *args: Any) -> None:
                    recorder = _recorders.pop(id(self), None)
                    if recorder is not None:
                        recorder.fail(exc)
                    super().set_exception(exc, *args)

            self._teed = TeedReader
        return self._teed

    def read_body(self, response: Any, encoding: str | None) -> bytes | None:
        return None  # the body is still to come: teed as it arrives

    def decoded(self, raw: bytes, encoding: str | None) -> bytes:
        return raw  # aiohttp's parser feeds the reader the body with its encoding undone

    def tee_body(self, response: Any, recorder: Any, is_async: bool) -> None:
        from aiohttp import StreamReader

        reader = response.content
        if type(reader) is not StreamReader:
            # No body to read (aiohttp's empty reader): recorded as the empty body it is.
            recorder.finish()
            return
        key, finish = id(reader), recorder.finish

        def ended() -> None:
            if _recorders.get(key) is recorder:
                del _recorders[key]
                finish()

        # What arrived with the headers is buffered already; nothing has been read yet.
        buffered = b"".join(reader._buffer)
        reader.__class__ = self._teed_reader()
        _recorders[key] = recorder
        if buffered:
            recorder.add(buffered)
        reader.on_eof(ended)  # at once when the whole body is in
        for name in ("close", "release"):
            _on_close(response, name, ended)
        weakref.finalize(response, ended)  # dropped unread: what arrived is the recording

    def served_response(
        self, request: _Request, output: Mapping[str, Any], *, stream: bool, session: Any
    ) -> Any:
        """A genuine ``ClientResponse`` of the request's session whose ``content`` holds the
        recorded body, whole and ended."""
        from aiohttp import HttpVersion11, RequestInfo, StreamReader
        from aiohttp.base_protocol import BaseProtocol
        from aiohttp.helpers import TimerNoop
        from multidict import CIMultiDict, CIMultiDictProxy

        status = served_status(output)
        loop = asyncio.get_running_loop()
        pieces = served_pieces(output)
        headers = CIMultiDictProxy(
            CIMultiDict(served_headers(output, sum(len(piece) for piece in pieces)))
        )
        owner = request.session
        sent = CIMultiDictProxy(owner._prepare_headers(request.headers))
        response = owner._response_class(
            request.method,
            request.url,
            writer=None,
            continue100=None,
            timer=TimerNoop(),
            request_info=RequestInfo(request.url, request.method, sent, request.url),
            traces=[],
            loop=loop,
            session=owner,
            stream_writer=_NoWriter(),
        )
        reader = StreamReader(BaseProtocol(loop), 2**16, loop=loop)
        for piece in pieces:
            reader.feed_data(piece)
        reader.feed_eof()
        response.version = HttpVersion11
        response.status = status
        try:
            response.reason = http.HTTPStatus(status).phrase
        except ValueError:
            response.reason = ""
        response._headers = headers
        response._raw_headers = tuple((k.encode(), v.encode()) for k, v in headers.items())
        response.content = reader
        # As aiohttp's own start() does: the response is done when its body is all in, as this
        # one is already (there is no connection to release).
        response._closed = False
        reader.on_eof(response._response_eof)
        return response

    def transport_error(self, error: Mapping[str, Any], request: Any) -> BaseException | None:
        aiohttp = importlib.import_module("aiohttp")
        name, message = str(error.get("type")), str(error.get("message"))
        if name == _CONNECTOR_ERROR and isinstance(request, _Request):
            from aiohttp.client_reqrep import ConnectionKey

            url = request.url
            key = ConnectionKey(
                url.host or "", url.port, url.scheme == "https", True, None, None, None
            )
            refused: BaseException = aiohttp.ClientConnectorError(key, OSError(None, message))
            return refused
        if name not in _TRANSPORT_ERRORS:
            return None
        cls = getattr(aiohttp, name, None)
        if isinstance(cls, type) and issubclass(cls, aiohttp.ClientError):
            exc: BaseException = cls(message)
            return exc
        return None


def _sent_json(session: Any, kwargs: Mapping[str, Any]) -> Any:
    """The body a request sends when it may be JSON (``json=`` as the session writes it, or
    ``data=`` as bytes or text), else None."""
    if kwargs.get("json") is not None:
        return session._json_serialize(kwargs["json"])
    data = kwargs.get("data")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode()
    return None  # a form, a file or a stream: not a model call's body


def _on_close(response: Any, name: str, ended: Callable[[], None]) -> None:
    """Record the body read so far when the response is closed or released early (before
    aiohttp marks its reader as cut, which is not a failure of the call)."""
    original = getattr(type(response), name)
    ref = weakref.ref(response)  # a dropped response is still freed at once

    def closing() -> Any:
        try:
            ended()
        except Exception:
            warn_once("aiohttp-close", "tracely: could not record a closed aiohttp response")
        target = ref()
        return original(target) if target is not None else None

    setattr(response, name, closing)


LIBRARY = AiohttpLibrary()
set_live = LIBRARY.set_live
install = LIBRARY.install
uninstall = LIBRARY.uninstall
patched = LIBRARY.patched
