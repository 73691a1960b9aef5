"""google-genai SDK patches: ``client.models`` and ``client.aio.models`` content generation.

Patched (class attributes, so every client sees them, Gemini API and Vertex AI alike):
``Models._generate_content`` and ``Models._generate_content_stream`` and their ``AsyncModels``
twins, each one request to the API. The public ``generate_content`` / ``generate_content_stream``
call them once per request, so automatic function calling (one request per turn, the Python
functions run in between), automatic continuation and chat sessions (``client.chats``, which call
the public methods) are recorded and served request by request, with the SDK's own loops
unchanged. Replay serves the SDK's own ``GenerateContentResponse`` objects, and for a stream a
generator (an async generator for ``client.aio``) of them, as the SDK's methods return.

The recording of a call (``tracely.output``): ``google.genai.response``, the response as the
SDK's JSON (``{"body": {...}}``), or ``google.genai.response.chunks``, ``{"chunks": [...]}`` with
every streamed response in order. Its input (``tracely.input``) is ``{"contents",
"system_instruction", "tools", "output_format"}``, the keys the call gave, in the SDK's own
normal form (a prompt given as text is the one user ``Content`` it stands for; a Python function
given as a tool is its declaration). An error the API answered is recorded with its code, status
and details, and replayed as the SDK's ``ClientError`` / ``ServerError``.

Not intercepted, so under recorded replay they reach the safety net (the API client's
``request``, ``request_streamed``, ``async_request`` and ``async_request_streamed``) and raise
ReplayError: every other method of the client (``count_tokens``, ``embed_content``, files,
caches, ...). Run them live in lenient mode, or outside the replayed code.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, Literal, NoReturn

import orjson
from google.genai import _transformers as transformers
from google.genai import errors, types
from google.genai._api_client import BaseApiClient
from google.genai.models import AsyncModels, Models

from tracely_otel import attributes as A
from tracely_otel.genai import OutputMessage, content_parts
from tracely_sdk.errors import LLMError, ReplayError
from tracely_sdk.providers import _google_genai_codec as codec
from tracely_sdk.providers import _patching as P
from tracely_sdk.providers._provider import Provider, ProviderCall, request_attributes

NAME = "google"
GEN_AI_PROVIDER = "gcp.gen_ai"  # the conventions' value for a Google GenAI endpoint of either API

TAG_RESPONSE = "google.genai.response"
TAG_CHUNKS = "google.genai.response.chunks"
TAG_GENAI = "gen_ai.messages"

_MODEL_IN_PATH = re.compile(r"models/([^/:?]+):")


class _Provider(Provider):
    def stopped_request(
        self, instance: Any, args: Any, kwargs: Any
    ) -> tuple[str, str, Any, str | None]:
        # BaseApiClient.request(http_method, path, request_dict, http_options)
        method = args[0] if args else kwargs.get("http_method", "?")
        path = str(args[1] if len(args) > 1 else kwargs.get("path", "?"))
        options = getattr(instance, "_http_options", None)
        base = str(getattr(options, "base_url", "") or "").rstrip("/")
        version = getattr(options, "api_version", None)
        url = "/".join(p for p in (base, version, path) if p)
        match = _MODEL_IN_PATH.search(path)
        return str(method).upper(), url, match.group(1) if match else None, None


PROVIDER_LAYER = _Provider(
    NAME,
    codec,
    (),
    (BaseApiClient, BaseApiClient),
    refused={
        ":countTokens": (
            "models.count_tokens is not served: a token count is not a model's answer, and "
            "replay serves only recorded answers; run it live in lenient mode, or outside the "
            "replayed code"
        ),
    },
    sends=(
        (BaseApiClient, "request", False),
        (BaseApiClient, "request_streamed", False),
        (BaseApiClient, "async_request", True),
        (BaseApiClient, "async_request_streamed", True),
    ),
)
set_live = PROVIDER_LAYER.set_live
install = PROVIDER_LAYER.install
uninstall = PROVIDER_LAYER.uninstall
patched = PROVIDER_LAYER.patched


# --------------------------------------------------------------------------- GenAI conventions


def _dump(value: Any) -> Any:
    return value.model_dump(mode="json", exclude_none=True)


def _contents(contents: Any) -> list[Any]:
    """Contents in the SDK's normal form, as its JSON: a list of ``Content``."""
    if type(contents) is str:  # what most calls give: the one user turn the SDK makes of it
        return [_user_text(contents)]
    return [_dump(c) for c in transformers.t_contents(contents)]


def _content(content: Any) -> Any:
    """One content (a system instruction) in the SDK's normal form, as its JSON."""
    if type(content) is str:
        return _user_text(content)
    return _dump(transformers.t_content(content))


def _user_text(text: str) -> dict[str, Any]:
    return {"parts": [{"text": text}], "role": "user"}


genai_input_messages = codec.genai_input_messages
genai_output_messages = codec.genai_output_messages
_usage_of = codec.usage_of

_FINISH_FROM_GENAI = {"length": "MAX_TOKENS", "content_filter": "SAFETY"}


def body_from_reply(reply: P.Reply) -> dict[str, Any]:
    """A response body (``record_response``'s ``body``) answering ``reply``."""
    candidates = []
    for index, (text, calls, reason) in enumerate(reply.messages):
        parts: list[dict[str, Any]] = []
        if text is not None and (text or not calls):
            parts.append({"text": text})
        parts.extend(
            {"function_call": {"id": cid, "name": name, "args": P.json_value(arguments)}}
            for cid, name, arguments in calls
        )
        candidates.append(
            {
                "content": {"role": "model", "parts": parts},
                "finish_reason": _FINISH_FROM_GENAI.get(reason, "STOP"),
                "index": index,
            }
        )
    body: dict[str, Any] = {
        "candidates": candidates,
        "model_version": reply.model,
        "response_id": reply.response_id,
    }
    usage = P.token_counts(
        reply.usage, ("prompt_token_count", "candidates_token_count", "total_token_count")
    )
    if usage is not None:
        body["usage_metadata"] = usage
    return body


# --------------------------------------------------------------------------- one call


def _config(config: Any) -> types.GenerateContentConfig:
    if config is None:
        return types.GenerateContentConfig()
    if isinstance(config, types.GenerateContentConfig):
        return config
    return types.GenerateContentConfig.model_validate(config)


def _request_attributes(
    config: types.GenerateContentConfig, client: Any, stream: bool
) -> dict[str, Any]:
    attributes = request_attributes(
        GEN_AI_PROVIDER,
        P.url_server_attributes(str(client._http_options.base_url or "")),
        stream=stream,
        max_tokens=config.max_output_tokens,
        temperature=config.temperature,
        top_p=config.top_p,
    )
    return attributes


def _parse_of(config: types.GenerateContentConfig) -> dict[str, Any] | None:
    """What the SDK gives its own parsing of a structured answer (``parsed``), or None."""
    if config.response_schema is None and config.response_json_schema is None:
        return None
    return {
        "config": {
            "response_schema": config.response_schema,
            "response_json_schema": config.response_json_schema,
            "include_all_fields": getattr(config, "include_all_fields", None),
        }
    }


def _format_name(config: types.GenerateContentConfig) -> str | None:
    schema = config.response_schema or config.response_json_schema
    if isinstance(schema, type):
        return schema.__name__
    if schema is not None:
        return "json_schema"
    return "json" if config.response_mime_type == "application/json" else None


class _Call(ProviderCall):
    """One request of a patched google-genai method: what to record, and how to serve it."""

    codec = codec
    api_error = errors.APIError
    streams = ()
    model_key = "model_version"
    id_key = "response_id"

    __slots__ = ("is_async", "parse")

    parse: dict[str, Any] | None  # what the SDK's parsing of a structured answer is given

    def __init__(
        self,
        streams: Literal["", "sync", "async"],
        provider: str,
        instance: Any,
        kwargs: dict[str, Any],
        model: str,
    ) -> None:
        # `streams`: "" for generate_content, "sync" or "async" for generate_content_stream.
        stream, is_async = bool(streams), streams == "async"
        super().__init__(provider, instance._api_client, kwargs, model, stream=stream)
        self.is_async = is_async
        config = _config(kwargs.get("config"))
        contents = _contents(kwargs.get("contents"))
        key: dict[str, Any] = {"contents": contents}
        system = None
        if config.system_instruction is not None:
            system = _content(config.system_instruction)
            key["system_instruction"] = system
        if config.tools:
            key["tools"] = [_dump(t) for t in transformers.t_tools(self.client, config.tools)]
        attributes = _request_attributes(config, self.client, stream)
        fmt = _format_name(config)
        if fmt is not None:
            key["output_format"] = fmt
            attributes[P.GEN_AI_OUTPUT_TYPE] = "json"
        self.parse = _parse_of(config)
        self.input: Any = key
        system_parts = system.get("parts") if system is not None else None
        if P.compared_as_messages(model):
            # The only form the recorded entry has: compare the input as messages.
            try:
                self.input = genai_input_messages(contents, system_parts)
            except ValueError:
                pass  # not messages: compared as given, which reports the difference
        if P.settings.capture_content:
            try:
                attributes[A.GEN_AI_INPUT_MESSAGES] = P.content_json(genai_input_messages(contents))
                if system_parts:
                    attributes[P.GEN_AI_SYSTEM_INSTRUCTIONS] = P.content_json(
                        content_parts(system_parts)
                    )
            except Exception:
                P.warn_once(
                    "google-content", "tracely: could not capture the input messages", exc_info=True
                )
        self.attributes = attributes

    # -- recording -----------------------------------------------------------------------

    @property
    def tags(self) -> tuple[str, str]:
        return TAG_RESPONSE, TAG_CHUNKS

    def reasons(self, body: Mapping[str, Any]) -> list[str]:
        return codec.finish_reasons(body)

    def asks_for_tools(self, body: Mapping[str, Any]) -> bool:
        return codec.asks_for_tools(body)

    def output_messages(self, body: Mapping[str, Any]) -> list[OutputMessage]:
        return genai_output_messages(body)

    def body_usage(self, body: Mapping[str, Any]) -> tuple[int, int] | None:
        return _usage_of(body)

    def stream_body(self, chunks: list[dict[str, Any]]) -> dict[str, Any]:
        return codec.body_from_chunks(chunks)

    def recordable(self, result: Any) -> P.CapturedResult | P.TeeStream:
        if self.stream:
            return P.TeeStream(result, replace=True)  # a plain generator: teed in its place
        return self._recording(result, None)

    async def arecordable(self, result: Any) -> P.CapturedResult | P.TeeStream:
        return self.recordable(result)

    def raise_error(self, error: Mapping[str, Any], label: str) -> NoReturn:
        if isinstance(error.get("code"), int) and "details" in error:
            raise codec.rebuild_error(error)
        raise LLMError(label, str(error.get("type")), str(error.get("message")))

    # -- serving -------------------------------------------------------------------------

    def _body_of(self, output: Any, entry: Mapping[str, Any]) -> dict[str, Any]:
        tag = entry.get("output_type")
        if tag == TAG_RESPONSE:
            return output if type(output) is dict else dict(output)
        if tag == TAG_CHUNKS:
            return {"body": codec.body_from_chunks(output.get("chunks") or [])}
        usage = P.entry_usage(entry)
        if tag == TAG_GENAI and isinstance(output, Mapping):
            reply = P.reply_from_genai(output, model=self.model, usage=usage)
        elif isinstance(tag, str) and tag.startswith(("openai.", "anthropic.")):
            raise ReplayError(
                f"llm:{self.model}: the recorded call was made with the {tag.split('.')[0]} SDK "
                "and cannot be served to a google-genai call; re-record the case",
                label=f"llm:{self.model}",
            )
        else:
            reply = P.reply_from_value(output, model=self.model, usage=usage)
        return {"body": body_from_reply(reply)}

    def rebuild(self, output_json: bytes, entry: Mapping[str, Any]) -> Any:
        tag = entry.get("output_type")
        if not self.stream and tag == TAG_RESPONSE:
            # What most served calls are: validated straight from the recorded JSON text.
            return codec.rebuild_response(output_json, parse=self.parse)
        output = orjson.loads(output_json)
        if not self.stream:
            return codec.rebuild_response(self._body_of(output, entry), parse=self.parse)
        if tag == TAG_CHUNKS:
            chunks = list(output.get("chunks") or [])
        else:
            chunks = [self._body_of(output, entry)["body"]]  # a whole answer is a stream of one
        return codec.rebuild_stream(chunks, is_async=self.is_async, parse=self.parse)


def _spec(
    provider: str,
    stream: bool,
    is_async: bool,
    instance: Any,
    args: Any,
    kwargs: dict[str, Any],
) -> _Call | None:
    model = kwargs.get("model")
    if not isinstance(model, str) or not model or args:
        return None  # the SDK's own argument checks answer this call
    try:
        streams: Literal["", "sync", "async"] = ("async" if is_async else "sync") if stream else ""
        return _Call(streams, provider, instance, kwargs, model)
    except Exception:
        # Arguments the SDK refuses (no contents, a bad config) are its to answer.
        P.warn_once("google-spec", "tracely: could not read a google-genai call", exc_info=True)
        return None


# --------------------------------------------------------------------------- installing

for _owner, _client, _async in (
    (Models, "Client.models", False),
    (AsyncModels, "Client.aio.models", True),
):
    for _method, _stream in (("generate_content", False), ("generate_content_stream", True)):
        _name = f"{_client}.{_method}"
        PROVIDER_LAYER.patch(
            _owner,
            f"_{_method}",
            _name,
            PROVIDER_LAYER.wrapper(functools.partial(_spec, _name, _stream, _async), _async),
        )
