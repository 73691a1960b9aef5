"""The one provider layer: what every patched SDK shares, written once.

An adapter (``openai.py``, ``anthropic.py``) states only what is its SDK's own: which methods
to patch and how a call to one becomes a spec (a :class:`ProviderCall` subclass), and how a
body, chunk or event becomes a recording and back (its codec module and the subclass's
``_body_of`` / ``stream_body`` / ``rebuild``). This module holds the rest:

- :class:`Provider`: the adapter's on/off state, the wrappers around its methods (a call is
  intercepted when the provider records live or a ``fixtures()`` block is active), the
  network safety net of recorded replay, and install/uninstall of all of it;
- :class:`ProviderCall`: recording a live result (plain, raw or streamed), its response
  attributes, and recording and re-raising failures.

Adding a provider is one adapter module (its ``Provider``, a ``ProviderCall`` subclass and a
codec) registered in ``PROVIDERS`` (``providers/__init__.py``), and its tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, NoReturn, Protocol

import orjson

from tracely_otel.genai import OutputMessage
from tracely_sdk import _replay
from tracely_sdk.errors import LLMError, ReplayError
from tracely_sdk.providers._install import ProviderPatches, Wrapper
from tracely_sdk.providers._patching import (
    CapturedResult,
    Intercepted,
    InterceptedCall,
    ResponseReader,
    TeeStream,
    aintercept,
    find_stream,
    intercept,
    request_attributes,
    response_attributes,
    served_at_the_client,
    served_stream,
    wire_body,
)


class Codec(Protocol):
    """What the base asks of an SDK's codec module (``_openai_codec``, ``_anthropic_codec``):
    pure functions from the SDK's results, chunks, headers and failures to recorded JSON, and
    from a recorded failure back to the SDK's exception. What else a codec rebuilds (responses,
    streams, raw responses) only its adapter calls, with the SDK's own arguments."""

    def record_response(self, obj: Any, wire: dict[str, Any] | None = ...) -> dict[str, Any]: ...

    def record_chunk(self, chunk: Any, wire: dict[str, Any] | None = ...) -> dict[str, Any]: ...

    def record_headers(
        self, headers: Mapping[str, str] | Iterable[tuple[str, str]]
    ) -> dict[str, str]: ...

    def record_error(self, exc: BaseException) -> dict[str, Any]: ...

    def rebuild_error(self, recorded: Mapping[str, Any], *, url: str = ...) -> Any: ...

    def raw_response_mode(
        self, extra_headers: Mapping[str, Any] | None
    ) -> Literal["raw", "stream"] | None: ...


SpecFactory = Callable[[Any, Any, dict[str, Any]], InterceptedCall | None]
"""Makes the spec of one call from ``(instance, args, kwargs)``; None leaves the call alone."""


class Provider:
    """One SDK's patches, and whether its calls are recorded outside ``fixtures()`` blocks."""

    def __init__(
        self,
        name: str,
        codec: Codec,
        clients: tuple[type, ...],
        bases: tuple[type, type],
        refused: Mapping[str, str] | None = None,
        *,
        sends: Sequence[tuple[type, str, bool]] | None = None,
    ) -> None:
        self.name = name  # the name in ``instrument(...)``
        self.codec = codec
        # URL path endings of requests never served, with the reason the safety net gives.
        self.refused = dict(refused or {})
        self.live = False
        # The SDK's methods that send a request, (owner, method, is_async): the sync and async
        # base clients' ``request`` unless the SDK says otherwise.
        if sends is None:
            sends = ((bases[0], "request", False), (bases[1], "request", True))
        nets: list[tuple[type, str, Wrapper]] = [
            (owner, method, self._anet if is_async else self._net)
            for owner, method, is_async in sends
        ]
        self.patches = ProviderPatches([], clients, nets)

    # -- state -----------------------------------------------------------------------------

    def set_live(self, live: bool) -> None:
        """Record calls outside fixtures() blocks too (``instrument``)."""
        self.live = live

    def wanted(self) -> bool:
        """Whether a call made now is intercepted: recorded live, or served in replay."""
        return self.live or _replay.current_session() is not None

    # -- wrappers --------------------------------------------------------------------------

    def patch(self, owner: type, method: str, name: str, wrapper: Wrapper) -> None:
        """Add ``owner.method`` (reported as ``name``) to what :meth:`install` patches."""
        self.patches.targets.append((owner, method, name, wrapper))

    def wrapper(self, spec: SpecFactory, is_async: bool) -> Wrapper:
        """The wrapper of a method whose calls ``spec`` describes, sync or async."""
        if is_async:

            async def async_wrapper(
                wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
            ) -> Any:
                call = spec(instance, args, kwargs) if self.wanted() else None
                if call is None or served_at_the_client(call.model):
                    return await wrapped(*args, **kwargs)
                return await aintercept(call, lambda: wrapped(*args, **kwargs))

            return async_wrapper

        def sync_wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
            call = spec(instance, args, kwargs) if self.wanted() else None
            if call is None or served_at_the_client(call.model):
                return wrapped(*args, **kwargs)
            return intercept(call, lambda: wrapped(*args, **kwargs))

        return sync_wrapper

    # -- the safety net --------------------------------------------------------------------

    def stopped_request(
        self, instance: Any, args: Any, kwargs: Any
    ) -> tuple[str, str, Any, str | None]:
        """The method, URL and model of a request the safety net stopped, and why it was not
        served when the request itself tells (None: the ``refused`` table says, or nothing).

        This reads the request options of the SDKs generated from one template (OpenAI,
        Anthropic); an adapter of another SDK overrides it.
        """
        options = args[1] if len(args) > 1 else kwargs.get("options")
        method = str(getattr(options, "method", "?")).upper()
        url = str(getattr(options, "url", "?"))
        body = getattr(options, "json_data", None)
        model = body.get("model") if isinstance(body, Mapping) else None
        headers = getattr(options, "headers", None) or {}
        if self.codec.raw_response_mode(headers if isinstance(headers, Mapping) else {}) is None:
            return method, url, model, None
        # A raw-response request reached the base client's request method without passing a
        # patched create method: two different mistakes look alike here, so name both.
        why = (
            "it came through the SDK's generic request method, client.post/request, not a "
            "patched create method. Either the code calls client.post/request itself, as "
            "litellm does for its openai/... models: record it at the HTTP client "
            "(tracely.init(instrument='auto'), which includes 'httpx') so its entry is served "
            "there; or a .with_raw_response/.with_streaming_response wrapper was bound before "
            f"tracely patched the SDK: patch at startup with tracely.init(instrument='{self.name}') "
            f"(or tracely.providers.instrument('{self.name}')) so the wrappers bind the patched "
            "methods"
        )
        return method, url, model, why

    def _network_error(self, instance: Any, args: Any, kwargs: Any, session: Any) -> ReplayError:
        method, url, model, why = self.stopped_request(instance, args, kwargs)
        if why is None:
            path = url.split("?", 1)[0]
            why = next(
                (reason for end, reason in self.refused.items() if path.endswith(end)),
                "tracely does not serve this SDK method from a recording",
            )
        error = ReplayError(
            f"recorded replay: {self.name} {method} {url} would reach the network ({why}). "
            "Recorded mode never makes a live call; tracely serves "
            + ", ".join(self.patched())
            + ".",
            label=f"llm:{model}" if isinstance(model, str) else None,
        )
        session.report.errors.append(error)
        return error

    def _served_below(self, instance: Any, args: Any, kwargs: Any) -> bool:
        """Whether the HTTP client below serves this request: a model call whose recording
        was made there (litellm's, which sends ``client.post("/chat/completions")``)."""
        from tracely_sdk.providers.http import answers

        method, url, model, _ = self.stopped_request(instance, args, kwargs)
        return answers(method, url) and served_at_the_client(model)

    def _net(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        session = _replay.current_session()
        if session is None or not session.strict or self._served_below(instance, args, kwargs):
            return wrapped(*args, **kwargs)
        raise self._network_error(instance, args, kwargs, session)

    async def _anet(
        self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
    ) -> Any:
        session = _replay.current_session()
        if session is None or not session.strict or self._served_below(instance, args, kwargs):
            return await wrapped(*args, **kwargs)
        raise self._network_error(instance, args, kwargs, session)

    # -- installing ------------------------------------------------------------------------

    def install(self) -> None:
        """Patch the methods and the network safety net (idempotent)."""
        self.patches.install()

    def uninstall(self) -> None:
        """Remove every patch (see :func:`tracely_sdk.providers._patching.uninstall`)."""
        self.patches.uninstall()

    def patched(self) -> list[str]:
        """The patched methods, as ``OpenAI.chat.completions.create``."""
        return self.patches.patched()


class ProviderCall(Intercepted):
    """One call to a patched method: what every SDK records and serves alike.

    A subclass sets the class attributes below, ``client``/``raw``/``stream`` per call, and
    the SDK's own steps: ``_body_of`` (a recorded output as the response body), ``stream_body``
    (a recorded stream as the body it adds up to), ``body_usage``, ``reasons``,
    ``output_messages`` and ``rebuild``.
    """

    __slots__ = (
        "attributes",
        "call",
        "client",
        "input",
        "kwargs",
        "model",
        "parsed",
        "provider",
        "raw",
        "stream",
    )

    attributes: dict[str, Any]  # the request attributes the span starts with
    call: Any  # the seam's Call while the call runs
    client: Any
    input: Any  # what the recording's input is compared with
    kwargs: dict[str, Any]
    model: str
    parsed: bool
    provider: str  # the patched method, as ``OpenAI.chat.completions.create``
    raw: Any  # the raw-response mode of a .with_raw_response call, else None
    stream: bool

    codec: Any  # the SDK's codec module
    api_error: type[BaseException]  # the SDK's API error: recorded with its response
    streams: tuple[type, ...]  # the SDK's stream classes

    def __init__(
        self,
        provider: str,
        client: Any,
        kwargs: dict[str, Any],
        model: str,
        *,
        parsed: bool = False,
        stream: bool = False,
        raw: Any = None,
    ) -> None:
        """What every call has; an adapter's ``__init__`` adds its request's input and
        attributes."""
        self.provider = provider
        self.client = client
        self.kwargs = kwargs
        self.model = model
        self.parsed = parsed
        self.stream = stream
        self.raw = raw
        self.call: Any = None

    # -- the SDK's own steps ---------------------------------------------------------------

    @property
    def tags(self) -> tuple[str, str]:
        """The type tags of a plain and of a streamed recording."""
        raise NotImplementedError

    def _body_of(self, output: Any, entry: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def stream_body(self, chunks: list[dict[str, Any]]) -> dict[str, Any]:
        raise NotImplementedError

    def body_usage(self, body: Mapping[str, Any]) -> tuple[int, int] | None:
        raise NotImplementedError

    def reasons(self, body: Mapping[str, Any]) -> list[str]:
        raise NotImplementedError

    def output_messages(self, body: Mapping[str, Any]) -> list[OutputMessage]:
        raise NotImplementedError

    def asks_for_tools(self, body: Mapping[str, Any]) -> bool:
        """Whether the response asks for a tool call (a cheap look, before any conversion)."""
        raise NotImplementedError

    def _url(self) -> str:
        raise NotImplementedError

    def _chunks_of(self, output: Any, entry: Mapping[str, Any]) -> tuple[list[Any], dict[str, str]]:
        """The recorded chunks (and response headers) a streamed call is served from."""
        raise NotImplementedError

    def _response(self, recording: Mapping[str, Any] | bytes) -> Any:
        """The SDK's result of a plain call, from a response recording or its JSON text."""
        raise NotImplementedError

    def _stream(self, chunks: list[Any], headers: dict[str, str]) -> Any:
        """The SDK's stream of a streamed call, over the recorded chunks."""
        raise NotImplementedError

    def _raw_response(
        self, recording: Mapping[str, Any] | None, chunks: list[Any] | None, headers: Any
    ) -> Any:
        """The SDK's raw response of a ``.with_raw_response``/``.with_streaming_response``
        call, over a response recording or (streamed) its chunks."""
        raise NotImplementedError

    # -- serving ---------------------------------------------------------------------------

    def rebuild(self, output_json: bytes, entry: Mapping[str, Any]) -> Any:
        """The SDK's own value of this call, served from the recorded output (JSON text)."""
        if not self.stream and self.raw is None and entry.get("output_type") == self.tags[0]:
            # What most served calls are: validated straight from the recorded JSON text.
            return self._response(output_json)
        output = orjson.loads(output_json)
        if self.stream:
            chunks, headers = self._chunks_of(output, entry)
            session = self.call.session if self.call is not None else None
            if self.raw is not None:
                served = self._raw_response(None, chunks, headers)
                served_stream(session, served.http_response)
            else:
                served = self._stream(chunks, headers)
                served_stream(session, served.response)
            return served
        recording = self._body_of(output, entry)
        if self.raw is not None:
            return self._raw_response(recording, None, recording.get("headers") or {})
        return self._response(recording)

    # -- recording -------------------------------------------------------------------------

    # Where a response body names its model and its id.
    model_key = "model"
    id_key = "id"

    def _response_attributes(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return response_attributes(self, body)

    def _recording(self, result: Any, headers: Mapping[str, str] | None) -> CapturedResult:
        value = self.codec.record_response(result, wire_body(result))
        if headers:
            value["headers"] = dict(headers)
        body = value["body"]
        return CapturedResult(
            value, self.tags[0], self.body_usage(body), self._response_attributes(body)
        )

    def _parsed_recordable(
        self, result: Any, headers: Mapping[str, str] | None
    ) -> CapturedResult | TeeStream:
        stream = find_stream(result, self.streams) if self.stream else None
        if stream is not None:
            if headers is None:
                headers = self.codec.record_headers(stream.response.headers)
            return TeeStream(stream, headers)
        return self._recording(result, headers)

    def recordable(self, result: Any) -> CapturedResult | TeeStream:
        if self.raw is not None:
            headers = self.codec.record_headers(result.headers)
            return self._parsed_recordable(result.parse(), headers)
        return self._parsed_recordable(result, None)

    async def arecordable(self, result: Any) -> CapturedResult | TeeStream:
        if self.raw is not None:
            headers = self.codec.record_headers(result.headers)
            parsed = result.parse()
            if hasattr(parsed, "__await__"):
                parsed = await parsed
            return self._parsed_recordable(parsed, headers)
        return self._parsed_recordable(result, None)

    def record_item(self, item: Any, wire: dict[str, Any] | None) -> dict[str, Any]:
        recorded: dict[str, Any] = self.codec.record_chunk(item, wire)
        return recorded

    def record_stream(
        self, chunks: list[dict[str, Any]], headers: Mapping[str, str] | None
    ) -> CapturedResult:
        value: dict[str, Any] = {"chunks": chunks}
        if headers:
            value["headers"] = dict(headers)
        body = self.stream_body(chunks)
        return CapturedResult(
            value, self.tags[1], self.body_usage(body), self._response_attributes(body)
        )

    def failure_recording(self, exc: BaseException) -> CapturedResult | None:
        return None

    def record_error(self, exc: BaseException) -> dict[str, Any]:
        if isinstance(exc, self.api_error):
            recorded: dict[str, Any] = self.codec.record_error(exc)
            return recorded
        return {"type": type(exc).__qualname__, "message": str(exc)}

    def raise_error(self, error: Mapping[str, Any], label: str) -> NoReturn:
        if "status" in error and "timeout" in error:
            raise self.codec.rebuild_error(error, url=self._url())
        raise LLMError(label, str(error.get("type")), str(error.get("message")))

    # -- serving ---------------------------------------------------------------------------

    def served_attributes(self, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
        try:
            body = self._body_of(entry["output"], entry)["body"]
        except ValueError:
            return None  # a stream recorded cut short before its first event
        return self._response_attributes(body)


__all__ = [
    "Provider",
    "ProviderCall",
    "ResponseReader",
    "SpecFactory",
    "request_attributes",
    "response_attributes",
]
