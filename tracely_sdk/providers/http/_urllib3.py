"""The hook on urllib3: ``HTTPConnectionPool.urlopen``, where every request of urllib3 is sent.

``requests`` (its ``HTTPAdapter.send``), ``botocore`` (``URLLib3Session.send``, so every boto3
client) and urllib3's own ``PoolManager`` and ``request()`` all call ``urlopen`` on a
connection pool (HTTPS pools inherit it), once per request; urllib3's own retries and
redirects call it again from inside, and are the same call. A model call
(:func:`model_call`) is intercepted there; anything else goes on untouched.

Live, a body read inside ``urlopen`` (``preload_content=True``, urllib3's default) is recorded
at once. One left unread (``preload_content=False``, what requests and botocore ask for) is
recorded as the caller reads it, through whichever of the response's public reading methods it
uses (``stream()``, ``read()``, ``read1()``, ``read_chunked()``, and ``data``, iteration and
``readinto`` through them): the call is recorded when the body is read to its end, closed, or
dropped. On replay the caller is given a real ``urllib3.HTTPResponse`` of the recorded bytes,
so requests and botocore make their own responses, errors and event streams of it.
"""

from __future__ import annotations

import http.client
import importlib
import io
import urllib.parse
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tracely_sdk.providers._patching import intercept
from tracely_sdk.providers._streams import teed_body
from tracely_sdk.providers.http._client import ClientHook, served_status
from tracely_sdk.providers.http._exchange import Target, WireCall, model_call, served_pieces

# urlopen(method, url, body, headers, retries, redirect, assert_same_host, timeout,
#         pool_timeout, release_conn, chunked, body_pos, preload_content, decode_content)
_POSITIONS = {"method": 0, "url": 1, "body": 2, "preload_content": 12, "decode_content": 13}


def _argument(args: tuple[Any, ...], kwargs: Mapping[str, Any], name: str, default: Any) -> Any:
    index = _POSITIONS[name]
    return args[index] if len(args) > index else kwargs.get(name, default)


@dataclass(frozen=True, slots=True)
class Sent:
    """What a replayed response is made for: the request, and how its caller reads bodies."""

    method: str
    url: str
    preload_content: bool
    decode_content: bool


def _decoding(response: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
    """Whether a reading method called with ``args`` returns the body decoded: its
    ``decode_content`` (the second parameter of each), else the response's."""
    flag = args[1] if len(args) > 1 else kwargs.get("decode_content")
    return bool(response.decode_content if flag is None else flag)


def _tee(response: Any, recorder: Any, spec: WireCall) -> None:
    """Record ``response``'s body as its caller reads it, by any of its reading methods.

    Only the outermost reading call records (``stream()`` reads through ``read()``: the
    recorder is active while it pulls). The wrappers hold the response weakly: a response
    dropped unread is freed at once, and its recording finished then.
    """
    ref = weakref.ref(response)
    cls = type(response)
    released = [False]  # the connection went back to the pool while a read pulled the end

    def decoding(target: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
        decode = _decoding(target, args, kwargs)
        if decode and spec.encoding:
            # The pieces come decoded: there is no content-encoding left to undo, and urllib3
            # may hold decoded bytes back until a later read.
            spec.encoding = None
            return True
        return False

    def reader(name: str, reads_all: Callable[[tuple[Any, ...], Mapping[str, Any]], bool]) -> Any:
        original = getattr(cls, name)

        def read(*args: Any, **kwargs: Any) -> Any:
            target = ref()
            if target is None:
                return b""  # called while the response is being freed: nothing left to read
            if recorder.active or recorder.done:
                return original(target, *args, **kwargs)
            buffering = decoding(target, args, kwargs)
            with recorder:
                data = original(target, *args, **kwargs)
            if data:
                recorder.add(data)
            if not data or reads_all(args, kwargs) or (released[0] and not buffering):
                recorder.finish()
            return data

        return read

    def generator(name: str) -> Any:
        original = getattr(cls, name)

        def pieces(*args: Any, **kwargs: Any) -> Iterator[bytes]:
            target = ref()
            if target is None:
                return iter(())  # called while the response is being freed
            if recorder.active or recorder.done:
                return original(target, *args, **kwargs)  # type: ignore[no-any-return]
            decoding(target, args, kwargs)
            return teed_body(original(target, *args, **kwargs), recorder)  # type: ignore[no-any-return]

        return pieces

    def ending(name: str) -> Any:
        original = getattr(cls, name)

        def end(*args: Any, **kwargs: Any) -> Any:
            target = ref()
            try:
                # A response being freed (the garbage collector clears weak references first)
                # has nothing to release: its connection goes with it.
                return None if target is None else original(target, *args, **kwargs)
            finally:
                if recorder.active:
                    released[0] = True
                else:
                    recorder.closed()

        return end

    def amount(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        return args[0] if args else kwargs.get("amt")

    response.read = reader("read", lambda a, k: amount(a, k) is None or amount(a, k) < 0)
    response.read1 = reader("read1", lambda a, k: False)
    response.stream = generator("stream")
    response.read_chunked = generator("read_chunked")
    response.release_conn = ending("release_conn")
    response.close = ending("close")
    weakref.finalize(response, recorder.finish)


# The library's exceptions a recorded failure may be raised as again, looked up only in this
# fixed set; a name resolution failure is the connection failure it is a kind of.
_ERRORS = {
    "NewConnectionError": "NewConnectionError",
    "NameResolutionError": "NewConnectionError",
    "ConnectTimeoutError": "ConnectTimeoutError",
    "ReadTimeoutError": "ReadTimeoutError",
    "ProtocolError": "ProtocolError",
    "MaxRetryError": "MaxRetryError",
}


class URLLib3(ClientHook):
    """The hook on urllib3."""

    def _targets(self) -> list[tuple[type, str, Callable[..., Any]]]:
        urllib3 = importlib.import_module(self.name)
        return [(urllib3.HTTPConnectionPool, "urlopen", self._urlopen)]

    def _spec(self, pool: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> WireCall | None:
        try:
            method = str(_argument(args, kwargs, "method", "GET")).upper()
            url = str(_argument(args, kwargs, "url", "/"))
            parts = urllib.parse.urlsplit(url)
            found = model_call(method, parts.path, _argument(args, kwargs, "body", None))
            if found is None:
                return None
            # A URL given whole (through a proxy, or botocore's for http) names its own host.
            scheme = parts.scheme or str(pool.scheme)
            host = parts.hostname or str(pool.host)
            port = parts.port if parts.hostname else pool.port
        except Exception:
            return None
        codec, body, model = found
        preload = bool(_argument(args, kwargs, "preload_content", True))
        sent = Sent(method, url, preload, bool(_argument(args, kwargs, "decode_content", True)))
        return WireCall(
            codec,
            self,
            sent,
            Target(method, scheme, host, port, urllib.parse.unquote(parts.path)),
            body,
            model,
            provider=f"{self.name}.HTTPConnectionPool.urlopen",
            is_async=False,
            stream=not preload,
        )

    def _urlopen(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        spec = self._spec(instance, args, kwargs) if self.watching() else None
        if spec is None:
            return wrapped(*args, **kwargs)
        return intercept(spec, lambda: wrapped(*args, **kwargs))

    # -- what a WireCall asks ----------------------------------------------------------------

    def response_head(self, response: Any) -> tuple[int, list[tuple[str, str]]]:
        return int(response.status), [(str(k), str(v)) for k, v in response.headers.items()]

    def read_body(self, response: Any, encoding: str | None) -> bytes | None:
        data: bytes = response.data
        return data if response.decode_content else self.decoded(data, encoding)

    def tee_body(self, response: Any, recorder: Any, is_async: bool) -> None:
        _tee(response, recorder, recorder.spec)

    def decoded(self, raw: bytes, encoding: str | None) -> bytes:
        if not encoding:
            return raw
        headers = {"content-encoding": encoding}
        content: bytes = self.module.HTTPResponse(body=io.BytesIO(raw), headers=headers).data
        return content

    def served_response(
        self, request: Any, output: Mapping[str, Any], *, stream: bool, session: Any
    ) -> Any:
        status = served_status(output)
        headers = self.module.HTTPHeaderDict()
        for key, value in (output.get("headers") or {}).items():
            headers.add(str(key), str(value))
        return self.module.HTTPResponse(
            body=io.BytesIO(b"".join(served_pieces(output))),
            headers=headers,
            status=status,
            version=11,
            reason=http.client.responses.get(status, ""),
            preload_content=request.preload_content,
            decode_content=request.decode_content,
            request_method=request.method,
            request_url=request.url,
        )

    def transport_error(self, error: Mapping[str, Any], request: Any) -> BaseException | None:
        errors = self.module.exceptions
        name = _ERRORS.get(str(error.get("type")))
        message = str(error.get("message"))
        if name == "NewConnectionError":
            return errors.NewConnectionError(None, message.split(">: ", 1)[-1])  # type: ignore[no-any-return]
        if name in ("ConnectTimeoutError", "ProtocolError"):
            return getattr(errors, name)(message)  # type: ignore[no-any-return]
        if name == "ReadTimeoutError":
            return errors.ReadTimeoutError(None, request.url, message)  # type: ignore[no-any-return]
        if name == "MaxRetryError":
            reason = error.get("reason")
            cause = self.transport_error(reason, request) if isinstance(reason, Mapping) else None
            return errors.MaxRetryError(None, request.url, cause)  # type: ignore[no-any-return]
        return None
