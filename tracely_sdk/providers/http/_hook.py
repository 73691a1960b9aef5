"""What every HTTP client library's hook shares: its patches, whether it records live, and
which of its requests are model calls.

A library's hook (``_client.HTTPLibrary`` for httpx and httpx2, ``aiohttp.AiohttpLibrary``)
subclasses :class:`ClientHook` with the methods patched (``_targets``) and the few steps that
read and make the library's own objects; one exchange is then the same :class:`WireCall`
whichever library carried it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import orjson

from tracely_sdk import _replay
from tracely_sdk._seam import in_call_body
from tracely_sdk.errors import LLMError
from tracely_sdk.providers._patching import install, is_installed, uninstall
from tracely_sdk.providers.http._exchange import WireCall, format_for, request_facts


class ClientHook:
    """One client library's patches, and whether its model calls are recorded outside
    ``fixtures()`` blocks."""

    name: str

    def __init__(self, name: str) -> None:
        self.name = name
        self.live = False

    # -- state and patches -----------------------------------------------------------------

    def set_live(self, live: bool) -> None:
        self.live = live

    def _targets(self) -> list[tuple[type, str, Callable[..., Any]]]:
        """The (class, method, wrapper) patched."""
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

    # -- which requests are model calls ----------------------------------------------------

    def wanted(self) -> bool:
        """Whether a request sent now may be intercepted: recorded live or served in replay,
        and not already the body of a call a layer above records."""
        return (self.live or _replay.current_session() is not None) and not in_call_body()

    def model_call(
        self,
        request: Any,
        method: str,
        url: Any,
        content: Any,
        *,
        provider: str,
        is_async: bool,
        stream: bool,
    ) -> WireCall | None:
        """The call a request is, when its format's codec answers it (``url`` has ``scheme``,
        ``host``, ``port``, ``path`` and ``query_string``, as httpx's and yarl's URLs do;
        ``content`` is the JSON body sent, as bytes or already parsed), else None."""
        try:
            codec = format_for(method, url.path)
            if codec is None:
                return None
            body = (
                orjson.loads(content) if isinstance(content, (bytes, bytearray, str)) else content
            )
            if not isinstance(body, dict):
                return None
            query = url.query if isinstance(url.query, (str, bytes)) else url.query_string
            query = query.decode() if isinstance(query, bytes) else query
            model, streamed = request_facts(codec, url.path, query, body)
        except Exception:
            return None  # a body that is not JSON: not a model call
        if model is None:
            return None
        return WireCall(
            codec,
            self,
            request,
            body,
            method=method.upper(),
            url=url,
            model=model,
            streamed=streamed,
            provider=provider,
            is_async=is_async,
            stream=stream,
        )

    # -- what differs between libraries ------------------------------------------------------

    def head(self, response: Any) -> tuple[int, list[tuple[str, str]]]:
        """A live response's status and headers."""
        raise NotImplementedError

    def content(self, response: Any) -> bytes:
        """A live response's whole body, when the library has read it already."""
        raise NotImplementedError

    def tee(self, response: Any, recorder: Any, is_async: bool) -> None:
        """Make ``recorder`` see each piece of the live ``response``'s body: its ``add`` for a
        piece, ``finish`` at the end, ``fail`` on a failure, ``closed`` when closed early."""
        raise NotImplementedError

    def decoded(self, raw: bytes, encoding: str | None) -> bytes:
        """A body teed as it came off the wire, with its ``content-encoding`` undone."""
        return raw

    def served_response(
        self, request: Any, output: Mapping[str, Any], *, stream: bool, session: Any
    ) -> Any:
        """The library's own response, made of a recorded exchange."""
        raise NotImplementedError

    def transport_error(self, error: Mapping[str, Any], request: Any) -> BaseException | None:
        """The library's own exception for a recorded transport failure, or None."""
        return None

    def raise_error(self, error: Mapping[str, Any], label: str, request: Any) -> NoReturn:
        exc = self.transport_error(error, request)
        if exc is not None:
            raise exc
        raise LLMError(label, str(error.get("type")), str(error.get("message")))


def recorded_status(output: Mapping[str, Any]) -> int:
    """A recorded exchange's HTTP status, checked."""
    status = output["status"]
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        raise ValueError(f"a recorded HTTP status is an integer from 100 to 599, not {status!r}")
    return status


__all__ = ["ClientHook", "recorded_status"]
