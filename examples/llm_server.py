"""A small local server that speaks enough of the OpenAI, Anthropic and Gemini wire formats for the real SDKs.

It exists for tests and demos: point an unmodified ``openai.OpenAI``, ``anthropic.Anthropic`` or
``google.genai.Client`` at it and every call is answered by a deterministic toy "model", over real HTTP,
including streaming::

    from examples.llm_server import serve

    with serve() as (server, base_url):
        client = openai.OpenAI(api_key="test-key", base_url=server.openai_base_url)
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        anthropic.Anthropic(api_key="test-key", base_url=server.anthropic_base_url)
        assert len(server.requests) == 1
        genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=server.gemini_base_url))

Routes: ``POST /v1/chat/completions`` (JSON, or SSE ``data:`` chunks ending in ``[DONE]``, with the usage chunk
when ``stream_options.include_usage`` is set), ``POST /v1/responses`` (JSON, or SSE with typed ``event:`` lines),
``POST /v1/messages`` (Anthropic JSON, or its named SSE events including ``ping``), and ``GET
/v1/responses/{id}`` for a response this server made (JSON, or with ``?stream=true`` its events again,
after ``starting_after`` when given: what ``responses.stream(response_id=...)`` resumes), and the Gemini API's
``POST /v1/models/{model}:generateContent`` (JSON; ``/v1beta`` and ``/v1alpha`` too) and ``:streamGenerateContent``
(with ``?alt=sse``, SSE ``data:`` lines, one ``GenerateContentResponse`` each; without it, one JSON array of them
sent an item at a time). Also ``POST /v1/embeddings`` (a made-up vector per input,
floats or ``encoding_format: base64``), Groq's ``POST /openai/v1/chat/completions``, Cohere's ``POST /v2/chat`` (JSON,
or SSE events whose data names its ``type``: ``message-start`` ... ``message-end``), and Ollama's ``POST
/api/chat`` and ``/api/generate`` (newline-delimited JSON, ``application/x-ndjson``, the last line ``"done":
true``; one JSON body with ``"stream": false``), and Amazon Bedrock's runtime API: ``POST /model/{modelId}/converse``
(JSON), ``/converse-stream`` (an AWS binary event stream, ``application/vnd.amazon.eventstream``), ``/invoke``
(the model's own JSON: Anthropic's messages format) and ``/invoke-with-response-stream`` (an event stream of
``chunk`` events, each carrying one Anthropic stream event as base64 JSON in ``bytes``), the model id
URL-encoded in the path as botocore sends it (point ``boto3.client("bedrock-runtime", endpoint_url=server.base_url)`` at it).

The model: when the request offers tools and the last turn is the user's, it calls the first tool, with
arguments made from the tool's JSON schema and the user's text (a string property gets the last capitalised
word, so "What is the weather in Paris?" gives ``{"city": "Paris"}``). Once a tool result is the last turn,
it answers in text that quotes the result. Without tools it answers ``"You said: <prompt>"``. A JSON-schema
response format (chat ``response_format``, responses ``text.format``, Anthropic ``output_config.format``,
Gemini ``generationConfig.responseJsonSchema``)
gets a JSON document that satisfies the schema. Token counts are word counts.

Faults, by request header ``x-test-fault`` (or queued with ``server.fail_next``):
``429`` (the provider's rate-limit error body, with ``retry-after`` and ``retry-after-ms``; Gemini's
``RESOURCE_EXHAUSTED``), ``500`` (the provider's server error body), ``cut`` (the response stops midway and the connection is dropped: a stream
after half its events, a JSON body after half its bytes).

Every request is kept in ``server.requests`` (method, path, lower-cased headers, parsed body), faulted ones
included, so a test can assert how many calls reached the network.

Run it alone with ``python -m examples.llm_server --port 8765``; it prints the base URL.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import re
import socket
import struct
import threading
import urllib.parse
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LLMServer", "SeenRequest", "main", "serve", "start"]

CREATED = 1_700_000_000
"""The fixed creation time of every object the server makes, so that responses are reproducible."""

FAULT_HEADER = "x-test-fault"
FAULTS = ("429", "500", "cut")

_WORD = re.compile(r"\S+")
# The SDK's default API version (``v1``) or one chosen in its ``HttpOptions(api_version=...)``.
_GEMINI_PATH = re.compile(
    r"^/v1(?:beta|alpha)?/models/([^/:]+):(generateContent|streamGenerateContent)$"
)
_CAPITALISED = re.compile(r"\b[A-Z][\w-]*")
_BEDROCK_PATH = re.compile(
    r"^/model/([^/]+)/(converse|converse-stream|invoke|invoke-with-response-stream)$"
)


@dataclass
class SeenRequest:
    """One request that reached the server."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    fault: str | None = None

    def __getitem__(self, key: str) -> Any:
        # Lets tests read a request either as an object or as a mapping.
        return getattr(self, key)


@dataclass
class _Reply:
    """What the model says: text, or one call of a tool."""

    text: str | None = None
    tool_name: str | None = None
    tool_arguments: dict[str, Any] = field(default_factory=dict)
    prompt_tokens: int = 0

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.tool_arguments, separators=(",", ":"))

    @property
    def completion_tokens(self) -> int:
        if self.tool_name is not None:
            return max(
                1, len(_WORD.findall(" ".join(str(v) for v in self.tool_arguments.values())))
            )
        return len(_WORD.findall(self.text or ""))


# --------------------------------------------------------------------------------------------- the model


def _words(text: str) -> int:
    return len(_WORD.findall(text))


def _text_of(content: Any) -> str:
    """The text of a message's content in any of the three APIs' shapes."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif part.get("type") == "tool_result":
                    parts.append(_text_of(part.get("content")))
        return " ".join(p for p in parts if p)
    if isinstance(content, dict):
        return _text_of([content])
    return str(content)


def _argument_word(text: str) -> str:
    capitalised: list[str] = [
        w for w in _CAPITALISED.findall(text) if not w.isupper() or len(w) > 1
    ]
    # The first word of a sentence is capitalised too; prefer any later one.
    if len(capitalised) > 1 or (capitalised and not text.lstrip().startswith(capitalised[0])):
        return capitalised[-1]
    words = [w.strip(".,!?;:\"'") for w in _WORD.findall(text)]
    words = [w for w in words if w]
    return words[-1] if words else "unknown"


def _resolve(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    while isinstance(schema, dict) and "$ref" in schema:
        ref = str(schema["$ref"])
        node: Any = root
        for part in ref.lstrip("#/").split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        schema = node
    return schema if isinstance(schema, dict) else {}


def _value_for(schema: Any, text: str, root: dict[str, Any], depth: int = 0) -> Any:
    """A deterministic value that satisfies the JSON ``schema``, made from ``text``."""
    schema = _resolve(schema, root)
    if depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            options = [_resolve(o, root) for o in schema[key]]
            chosen = next((o for o in options if o.get("type") != "null"), options[0])
            return _value_for(chosen, text, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        return {name: _value_for(sub, text, root, depth + 1) for name, sub in props.items()}
    if kind == "array":
        return [_value_for(schema.get("items") or {"type": "string"}, text, root, depth + 1)]
    if kind == "integer":
        return _words(text)
    if kind == "number":
        return float(_words(text))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _argument_word(text)


def _json_answer(schema: dict[str, Any], text: str) -> str:
    return json.dumps(_value_for(schema, text, schema), separators=(",", ":"))


# --------------------------------------------------------------------------------------------- the server


class LLMServer(ThreadingHTTPServer):
    """The server; ``requests`` holds every request it has seen."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        super().__init__(address, _Handler)
        self.requests: list[SeenRequest] = []
        self.retry_after_ms = 20
        """The ``retry-after-ms`` of a 429, which both SDKs prefer to ``retry-after`` (always ``1``)."""
        self._lock = threading.Lock()
        self._queued_faults: list[str] = []
        self._counter = 0
        self._thread: threading.Thread | None = None
        self._responses: dict[str, tuple[dict[str, Any], int]] = {}  # id -> (request, number)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def host(self) -> str:
        host = str(self.server_address[0])
        return "127.0.0.1" if host in ("", "0.0.0.0") else host

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: the Anthropic base URL."""
        return f"http://{self.host}:{self.port}"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"{self.base_url}/v1"

    @property
    def gemini_base_url(self) -> str:
        """``http://127.0.0.1:PORT``: the google-genai ``HttpOptions(base_url=...)``."""
        return self.base_url

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that goes away mid-request (a cancelled stream, a dropped keep-alive) is not an error here.
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)

    def fail_next(self, fault: str, times: int = 1) -> None:
        """Answer the next ``times`` requests with ``fault`` (one of ``FAULTS``), whatever their headers."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; expected one of {FAULTS}")
        with self._lock:
            self._queued_faults.extend([fault] * times)

    def reset(self) -> None:
        """Forget the requests seen and any queued faults; request ids start again from 1."""
        with self._lock:
            self.requests.clear()
            self._queued_faults.clear()
            self._counter = 0
            self._responses.clear()

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def _admit(self, request: SeenRequest) -> int:
        with self._lock:
            if self._queued_faults and request.fault is None:
                request.fault = self._queued_faults.pop(0)
            self.requests.append(request)
            self._counter += 1
            return self._counter

    def start(self) -> LLMServer:
        """Serve in a daemon thread; returns ``self``."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self.serve_forever, name=f"llm-server:{self.port}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: LLMServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "llm-server/1.0"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing

    def _read_body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send_json(
        self, status: int, payload: Any, headers: dict[str, str] | None = None, *, cut: bool = False
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if cut:
            self.wfile.write(data[: len(data) // 2])
            self._drop_connection()
            return
        self.wfile.write(data)

    def _start_sse(self, headers: dict[str, str], content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_events(
        self,
        events: list[bytes],
        headers: dict[str, str],
        *,
        cut: bool,
        content_type: str = "text/event-stream; charset=utf-8",
    ) -> None:
        self._start_sse(headers, content_type)
        if cut:
            for event in events[: max(1, len(events) // 2)]:
                self._send_chunk(event)
            self._drop_connection()
            return
        for event in events:
            self._send_chunk(event)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop_connection(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # -- routing

    def do_GET(self) -> None:
        request = self._record(None)
        number = self.server._admit(request)
        path, _, query = self.path.partition("?")
        stored = None
        if path.startswith("/v1/responses/"):
            with self.server._lock:
                stored = self.server._responses.get(path[len("/v1/responses/") :])
        if stored is None:
            self._not_found(request)
            return
        if request.fault in ("429", "500"):
            self._fault(request, number)
            return
        body, created = stored
        completed, events = _responses_payload(body, created)
        headers = {"x-request-id": f"req_{number:06d}", "openai-processing-ms": "1"}
        params = urllib.parse.parse_qs(query)
        if params.get("stream") != ["true"]:
            self._send_json(200, completed, headers, cut=request.fault == "cut")
            return
        after = int(params.get("starting_after", ["-1"])[0])
        wire = [_event_bytes(e) for e in events if e["sequence_number"] > after]
        self._send_events(wire, headers, cut=request.fault == "cut")

    def do_POST(self) -> None:
        body = self._read_body()
        request = self._record(body)
        number = self.server._admit(request)
        route = {
            "/v1/chat/completions": self._chat,
            "/v1/responses": self._responses,
            "/v1/messages": self._messages,
            "/openai/v1/chat/completions": self._chat,  # Groq's path
            "/v1/embeddings": self._embeddings,
            "/v2/chat": self._cohere_chat,
            "/api/chat": self._ollama,
            "/api/generate": self._ollama,
        }.get(self.path.split("?")[0])
        if route is None and _GEMINI_PATH.match(self.path.split("?")[0]):
            route = self._generate_content
        if route is None and self._is_bedrock(request):
            route = self._bedrock
        if route is None:
            self._not_found(request)
            return
        if not isinstance(body, dict):
            self._error(
                request, 400, "invalid_request_error", "The request body is not a JSON object."
            )
            return
        if request.fault in ("429", "500"):
            self._fault(request, number)
            return
        route(body, number, cut=request.fault == "cut")

    def _record(self, body: Any) -> SeenRequest:
        headers = {k.lower(): v for k, v in self.headers.items()}
        fault = headers.get(FAULT_HEADER)
        return SeenRequest(
            method=self.command,
            path=self.path,
            headers=headers,
            body=body,
            fault=fault if fault in FAULTS else None,
        )

    def _is_anthropic(self, request: SeenRequest) -> bool:
        return request.path.startswith("/v1/messages")

    def _is_gemini(self, request: SeenRequest) -> bool:
        return bool(_GEMINI_PATH.match(request.path.split("?")[0]))

    def _is_bedrock(self, request: SeenRequest) -> bool:
        return bool(_BEDROCK_PATH.match(request.path.split("?")[0]))

    def _gemini_error(self, status: int, reason: str, message: str) -> None:
        payload = {"error": {"code": status, "message": message, "status": reason}}
        self._send_json(status, payload)

    def _not_found(self, request: SeenRequest) -> None:
        self._error(
            request, 404, "not_found_error", f"Unknown request URL: {request.method} {request.path}"
        )

    def _error(self, request: SeenRequest, status: int, kind: str, message: str) -> None:
        number = self.server._counter
        if self._is_bedrock(request):
            self._bedrock_error(status, "ValidationException", message)
        elif self._is_gemini(request):
            self._gemini_error(
                status, "INVALID_ARGUMENT" if status == 400 else "NOT_FOUND", message
            )
        elif self._is_anthropic(request):
            payload: dict[str, Any] = {
                "type": "error",
                "error": {"type": kind, "message": message},
                "request_id": f"req_{number:06d}",
            }
            self._send_json(status, payload, {"request-id": f"req_{number:06d}"})
        else:
            payload = {"error": {"message": message, "type": kind, "param": None, "code": None}}
            self._send_json(status, payload, {"x-request-id": f"req_{number:06d}"})

    def _fault(self, request: SeenRequest, number: int) -> None:
        if self._is_bedrock(request):
            if request.fault == "429":
                self._bedrock_error(429, "ThrottlingException", "Too many requests, please wait.")
            else:
                self._bedrock_error(500, "InternalServerException", "An internal error occurred.")
            return
        if self._is_gemini(request):
            if request.fault == "429":
                message = "Resource has been exhausted (e.g. check quota)."
                self._gemini_error(429, "RESOURCE_EXHAUSTED", message)
            else:
                self._gemini_error(500, "INTERNAL", "An internal error has occurred.")
            return
        anthropic = self._is_anthropic(request)
        request_id = f"req_{number:06d}"
        if request.fault == "429":
            headers = {
                "retry-after": "1",
                "retry-after-ms": str(self.server.retry_after_ms),
                "request-id" if anthropic else "x-request-id": request_id,
            }
            if anthropic:
                payload: dict[str, Any] = {
                    "type": "error",
                    "error": {
                        "type": "rate_limit_error",
                        "message": "Number of requests has exceeded your rate limit.",
                    },
                    "request_id": request_id,
                }
            else:
                headers["x-ratelimit-remaining-requests"] = "0"
                payload = {
                    "error": {
                        "message": "Rate limit reached for requests. Please try again in 1s.",
                        "type": "requests",
                        "param": None,
                        "code": "rate_limit_exceeded",
                    }
                }
            self._send_json(429, payload, headers)
            return
        if anthropic:
            payload = {
                "type": "error",
                "error": {"type": "api_error", "message": "Internal server error"},
                "request_id": request_id,
            }
            self._send_json(500, payload, {"request-id": request_id})
        else:
            payload = {
                "error": {
                    "message": "The server had an error while processing your request. Sorry about that!",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            }
            self._send_json(500, payload, {"x-request-id": request_id})

    # -- chat completions

    def _chat(self, body: dict[str, Any], number: int, *, cut: bool) -> None:
        messages = body.get("messages") or []
        reply = _chat_reply(body, messages)
        model = str(body.get("model") or "gpt-4o")
        headers = {"x-request-id": f"req_{number:06d}", "openai-processing-ms": "1"}
        completion_id = f"chatcmpl-{number:06d}"
        usage = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        }
        call_id = f"call_{number:06d}_0"
        finish = "tool_calls" if reply.tool_name else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {
                "role": "assistant",
                "content": reply.text,
                "refusal": None,
                "annotations": [],
            }
            if reply.tool_name:
                message["tool_calls"] = [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": reply.tool_name, "arguments": reply.arguments_json},
                    }
                ]
            payload = {
                "id": completion_id,
                "object": "chat.completion",
                "created": CREATED,
                "model": model,
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
                ],
                "usage": usage,
                "service_tier": "default",
                "system_fingerprint": "fp_llm_server",
            }
            self._send_json(200, payload, headers, cut=cut)
            return

        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            data: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "service_tier": "default",
                "system_fingerprint": "fp_llm_server",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }
            if include_usage:
                data["usage"] = None
            return data

        chunks = [
            chunk(
                {
                    "role": "assistant",
                    "content": "" if reply.text is not None else None,
                    "refusal": None,
                }
            )
        ]
        if reply.tool_name:
            pieces = _split(reply.arguments_json, 8)
            chunks.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": reply.tool_name, "arguments": ""},
                            }
                        ]
                    }
                )
            )
            chunks.extend(
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces
            )
        else:
            chunks.extend(chunk({"content": p}) for p in _tokens(reply.text or ""))
        chunks.append(chunk({}, finish))
        if include_usage:
            final = chunk({})
            final["choices"] = []
            final["usage"] = usage
            chunks.append(final)
        events = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks]
        events.append(b"data: [DONE]\n\n")
        self._send_events(events, headers, cut=cut)

    # -- responses

    def _responses(self, body: dict[str, Any], number: int, *, cut: bool) -> None:
        completed, events = _responses_payload(body, number)
        with self.server._lock:
            self.server._responses[completed["id"]] = (body, number)
        headers = {"x-request-id": f"req_{number:06d}", "openai-processing-ms": "1"}
        if not body.get("stream"):
            self._send_json(200, completed, headers, cut=cut)
            return
        self._send_events([_event_bytes(e) for e in events], headers, cut=cut)

    # -- embeddings, Cohere v2 chat, Ollama's native API

    def _embeddings(self, body: dict[str, Any], number: int, *, cut: bool) -> None:
        given = body.get("input")
        texts = [given] if isinstance(given, str) else list(given or [])
        data = []
        for index, text in enumerate(texts):
            vector = _embedding(text if isinstance(text, str) else json.dumps(text))
            encoded: Any = vector
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(_words(t) for t in texts if isinstance(t, str))
        payload = {
            "object": "list",
            "data": data,
            "model": str(body.get("model") or "text-embedding-3-small"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        headers = {"x-request-id": f"req_{number:06d}", "openai-processing-ms": "1"}
        self._send_json(200, payload, headers, cut=cut)

    def _cohere_chat(self, body: dict[str, Any], number: int, *, cut: bool) -> None:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        reply = _chat_reply(body, messages)
        call_id = f"call_{number:06d}_0"
        tokens = {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens}
        usage = {"billed_units": dict(tokens), "tokens": tokens}
        finish = "TOOL_CALL" if reply.tool_name else "COMPLETE"
        plan = f"I will call {reply.tool_name}."
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant"}
            if reply.tool_name:
                message["tool_plan"] = plan
                function = {"name": reply.tool_name, "arguments": reply.arguments_json}
                message["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
            else:
                message["content"] = [{"type": "text", "text": reply.text}]
            payload = {
                "id": f"chat_{number:06d}",
                "finish_reason": finish,
                "message": message,
                "usage": usage,
            }
            self._send_json(200, payload, cut=cut)
            return

        def event(kind: str, **fields: Any) -> bytes:
            return _event_bytes({"type": kind, **fields})

        def says(**message: Any) -> dict[str, Any]:
            return {"message": message}

        events = [event("message-start", id=f"chat_{number:06d}", delta=says(role="assistant"))]
        if reply.tool_name:
            events.append(event("tool-plan-delta", delta=says(tool_plan=plan)))
            function = {"name": reply.tool_name, "arguments": ""}
            call = {"id": call_id, "type": "function", "function": function}
            events.append(event("tool-call-start", index=0, delta=says(tool_calls=call)))
            for piece in _split(reply.arguments_json, 8):
                delta = says(tool_calls={"function": {"arguments": piece}})
                events.append(event("tool-call-delta", index=0, delta=delta))
            events.append(event("tool-call-end", index=0))
        else:
            start = says(content={"type": "text", "text": ""})
            events.append(event("content-start", index=0, delta=start))
            for piece in _tokens(reply.text or ""):
                delta = says(content={"text": piece})
                events.append(event("content-delta", index=0, delta=delta))
            events.append(event("content-end", index=0))
        events.append(event("message-end", delta={"finish_reason": finish, "usage": usage}))
        self._send_events(events, {}, cut=cut)

    def _ollama(self, body: dict[str, Any], number: int, *, cut: bool) -> None:
        chat = self.path.split("?")[0] == "/api/chat"
        if chat:
            reply = _chat_reply(
                body, [m for m in body.get("messages") or [] if isinstance(m, dict)]
            )
        else:
            prompt = str(body.get("prompt") or "")
            words = _words(prompt) + _words(str(body.get("system") or ""))
            reply = _Reply(text=_answer(prompt, None), prompt_tokens=words)
        model = str(body.get("model") or "llama3.2")

        def line(piece: str, **fields: Any) -> dict[str, Any]:
            said = (
                {"message": {"role": "assistant", "content": piece}}
                if chat
                else {"response": piece}
            )
            return {"model": model, "created_at": "2023-11-14T22:13:20Z", **said, **fields}

        final = line(
            "" if body.get("stream") is not False else reply.text or "",
            done=True,
            done_reason="stop",
            total_duration=1000,
            load_duration=10,
            prompt_eval_count=reply.prompt_tokens,
            prompt_eval_duration=100,
            eval_count=reply.completion_tokens,
            eval_duration=500,
        )
        if reply.tool_name:
            final["message"]["tool_calls"] = [
                {"function": {"name": reply.tool_name, "arguments": reply.tool_arguments}}
            ]
        if body.get("stream") is False:
            self._send_json(200, final, cut=cut)
            return
        lines = [line(piece, done=False) for piece in _tokens(reply.text or "")]
        wire = [json.dumps(x, separators=(",", ":")).encode() + b"\n" for x in [*lines, final]]
        self._send_events(wire, {}, cut=cut, content_type="application/x-ndjson")

    # -- anthropic messages

    def _messages(self, body: dict[str, Any], number: int, *, cut: bool) -> None:
        reply = _messages_reply(body)
        model = str(body.get("model") or "claude-sonnet-4-5")
        message_id = f"msg_{number:06d}"
        headers = {"request-id": f"req_{number:06d}", "anthropic-organization-id": "org_llm_server"}
        stop_reason = "tool_use" if reply.tool_name else "end_turn"
        tool_id = f"toolu_{number:06d}"
        if reply.tool_name:
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": tool_id,
                "name": reply.tool_name,
                "input": reply.tool_arguments,
            }
        else:
            block = {"type": "text", "text": reply.text or "", "citations": None}
        usage = {
            "input_tokens": reply.prompt_tokens,
            "output_tokens": reply.completion_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "standard",
        }
        if not body.get("stream"):
            payload = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [block],
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": usage,
            }
            self._send_json(200, payload, headers, cut=cut)
            return

        start_usage = {**usage, "output_tokens": 1}
        events: list[tuple[str, dict[str, Any]]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": start_usage,
                    },
                },
            )
        ]
        if reply.tool_name:
            start_block: dict[str, Any] = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in ["", *_split(reply.arguments_json, 8)]
            ]
        else:
            start_block = {**block, "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _tokens(reply.text or "")]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": start_block},
            )
        )
        events.append(("ping", {"type": "ping"}))
        events.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d})
            for d in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": reply.completion_tokens},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        wire = [
            f"event: {name}\n".encode() + b"data: " + json.dumps(data).encode() + b"\n\n"
            for name, data in events
        ]
        self._send_events(wire, headers, cut=cut)

    # -- gemini generateContent

    def _generate_content(self, body: dict[str, Any], number: int, *, cut: bool) -> None:
        path, _, query = self.path.partition("?")
        match = _GEMINI_PATH.match(path)
        assert match is not None
        model, method = match.group(1), match.group(2)
        reply = _gemini_reply(body)
        if reply.tool_name:
            part: dict[str, Any] = {
                "functionCall": {"name": reply.tool_name, "args": reply.tool_arguments}
            }
        else:
            part = {"text": reply.text or ""}
        usage = {
            "promptTokenCount": reply.prompt_tokens,
            "candidatesTokenCount": reply.completion_tokens,
            "totalTokenCount": reply.prompt_tokens + reply.completion_tokens,
        }

        def response(
            parts: list[Any], finish: str | None, tokens: dict[str, Any]
        ) -> dict[str, Any]:
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
            if finish is not None:
                candidate["finishReason"] = finish
            return {
                "candidates": [candidate],
                "usageMetadata": tokens,
                "modelVersion": model,
                "responseId": f"resp_{number:06d}",
            }

        if method == "generateContent":
            self._send_json(200, response([part], "STOP", usage), cut=cut)
            return
        if reply.tool_name:
            chunks = [response([part], "STOP", usage)]
        else:
            pieces = _tokens(reply.text or "")
            prompt_only = {"promptTokenCount": reply.prompt_tokens}
            chunks = [
                response(
                    [{"text": p}], None, {**prompt_only, "totalTokenCount": reply.prompt_tokens}
                )
                for p in pieces[:-1]
            ]
            chunks.append(response([{"text": pieces[-1]}], "STOP", usage))
        if urllib.parse.parse_qs(query).get("alt") == ["sse"]:
            events = [b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks]
            self._send_events(events, {}, cut=cut)
            return
        # Without alt=sse the API streams one JSON array, an item at a time.
        items = [
            (b"[" if i == 0 else b",\r\n") + json.dumps(c).encode() for i, c in enumerate(chunks)
        ]
        items[-1] += b"]"
        self._send_events(items, {}, cut=cut, content_type="application/json")

    # -- bedrock runtime

    def _bedrock_error(self, status: int, kind: str, message: str) -> None:
        headers = {
            "x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        }
        self._send_json(status, {"message": message}, headers)

    def _bedrock(self, body: dict[str, Any], number: int, *, cut: bool) -> None:
        match = _BEDROCK_PATH.match(self.path.split("?")[0])
        assert match is not None
        model, operation = urllib.parse.unquote(match.group(1)), match.group(2)
        headers = {"x-amzn-RequestId": f"req-{number:06d}"}
        if operation in ("invoke", "invoke-with-response-stream"):
            reply = _messages_reply(body)
            content: dict[str, Any] = (
                {"type": "tool_use", "id": f"toolu_bdrk_{number:06d}", "name": reply.tool_name}
                | {"input": reply.tool_arguments}
                if reply.tool_name
                else {"type": "text", "text": reply.text or ""}
            )
            headers["X-Amzn-Bedrock-Input-Token-Count"] = str(reply.prompt_tokens)
            headers["X-Amzn-Bedrock-Output-Token-Count"] = str(reply.completion_tokens)
            message = {
                "id": f"msg_bdrk_{number:06d}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [content],
                "stop_reason": "tool_use" if reply.tool_name else "end_turn",
                "stop_sequence": None,
                "usage": {
                    "input_tokens": reply.prompt_tokens,
                    "output_tokens": reply.completion_tokens,
                },
            }
            if operation == "invoke":
                self._send_json(200, message, headers, cut=cut)
                return
            del headers["X-Amzn-Bedrock-Input-Token-Count"]  # the stream's last chunk has them
            del headers["X-Amzn-Bedrock-Output-Token-Count"]
            chunks = [
                _eventstream_message("chunk", {"bytes": base64.b64encode(data).decode(), "p": "ab"})
                for data in _invoke_stream_events(message, reply)
            ]
            self._send_eventstream(chunks, headers, cut=cut)
            return
        reply = _messages_reply(_converse_as_messages(body))
        usage = {
            "inputTokens": reply.prompt_tokens,
            "outputTokens": reply.completion_tokens,
            "totalTokens": reply.prompt_tokens + reply.completion_tokens,
        }
        stop = "tool_use" if reply.tool_name else "end_turn"
        tool_id = f"tooluse_{number:06d}"
        if operation == "converse":
            block: dict[str, Any] = (
                {"toolUse": {"toolUseId": tool_id, "name": reply.tool_name}}
                if reply.tool_name
                else {"text": reply.text or ""}
            )
            if reply.tool_name:
                block["toolUse"]["input"] = reply.tool_arguments
            answer = {
                "output": {"message": {"role": "assistant", "content": [block]}},
                "stopReason": stop,
                "usage": usage,
                "metrics": {"latencyMs": 1},
            }
            self._send_json(200, answer, headers, cut=cut)
            return
        events: list[tuple[str, dict[str, Any]]] = [("messageStart", {"role": "assistant"})]
        if reply.tool_name:
            start = {"toolUse": {"toolUseId": tool_id, "name": reply.tool_name}}
            events.append(("contentBlockStart", {"contentBlockIndex": 0, "start": start}))
            events.extend(
                ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": p}}})
                for p in _split(reply.arguments_json, 8)
            )
        else:
            events.extend(
                ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}})
                for p in _tokens(reply.text or "")
            )
        events.append(("contentBlockStop", {"contentBlockIndex": 0}))
        events.append(("messageStop", {"stopReason": stop}))
        events.append(("metadata", {"usage": usage, "metrics": {"latencyMs": 1}}))
        self._send_eventstream([_eventstream_message(k, d) for k, d in events], headers, cut=cut)

    def _send_eventstream(self, frames: list[bytes], headers: dict[str, str], *, cut: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.amazon.eventstream")
        self.send_header("Transfer-Encoding", "chunked")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        for frame in frames[: max(1, len(frames) // 2)] if cut else frames:
            self._send_chunk(frame)
        if cut:
            self._drop_connection()
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


# --------------------------------------------------------------------------------------------- replies


def _responses_payload(
    body: dict[str, Any], number: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The completed response to a Responses request, and the events that stream it."""
    reply = _responses_reply(body)
    model = str(body.get("model") or "gpt-4o")
    response_id = f"resp_{number:06d}"
    if reply.tool_name:
        item: dict[str, Any] = {
            "id": f"fc_{number:06d}",
            "type": "function_call",
            "status": "completed",
            "arguments": reply.arguments_json,
            "call_id": f"call_{number:06d}_0",
            "name": reply.tool_name,
        }
    else:
        item = {
            "id": f"msg_{number:06d}",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [
                {
                    "type": "output_text",
                    "text": reply.text or "",
                    "annotations": [],
                    "logprobs": [],
                }
            ],
        }
    usage = {
        "input_tokens": reply.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": reply.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }

    def response(status: str, output: list[Any], usage_: Any) -> dict[str, Any]:
        return {
            "id": response_id,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "background": False,
            "completed_at": CREATED if status == "completed" else None,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "metadata": body.get("metadata") or {},
            "model": model,
            "output": output,
            "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
            "previous_response_id": body.get("previous_response_id"),
            "store": bool(body.get("store", True)),
            "temperature": float(body.get("temperature", 1.0)),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": [_response_tool(t) for t in body.get("tools") or []],
            "top_p": float(body.get("top_p", 1.0)),
            "truncation": body.get("truncation") or "disabled",
            "usage": usage_,
            "user": body.get("user"),
        }

    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response("in_progress", [], None)},
        {"type": "response.in_progress", "response": response("in_progress", [], None)},
    ]
    if reply.tool_name:
        added = {**item, "status": "in_progress", "arguments": ""}
        events.append({"type": "response.output_item.added", "output_index": 0, "item": added})
        events.extend(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": item["id"],
                "output_index": 0,
                "delta": piece,
            }
            for piece in _split(reply.arguments_json, 8)
        )
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "item_id": item["id"],
                "output_index": 0,
                "arguments": reply.arguments_json,
            }
        )
    else:
        text = reply.text or ""
        added = {**item, "status": "in_progress", "content": []}
        empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        events.append({"type": "response.output_item.added", "output_index": 0, "item": added})
        events.append(
            {
                "type": "response.content_part.added",
                "item_id": item["id"],
                "output_index": 0,
                "content_index": 0,
                "part": empty_part,
            }
        )
        events.extend(
            {
                "type": "response.output_text.delta",
                "item_id": item["id"],
                "output_index": 0,
                "content_index": 0,
                "delta": piece,
                "logprobs": [],
            }
            for piece in _tokens(text)
        )
        events.append(
            {
                "type": "response.output_text.done",
                "item_id": item["id"],
                "output_index": 0,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            }
        )
        events.append(
            {
                "type": "response.content_part.done",
                "item_id": item["id"],
                "output_index": 0,
                "content_index": 0,
                "part": item["content"][0],
            }
        )
    events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    events.append({"type": "response.completed", "response": response("completed", [item], usage)})
    for sequence, event in enumerate(events):
        event["sequence_number"] = sequence
    return response("completed", [item], usage), events


def _event_bytes(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\n".encode() + b"data: " + json.dumps(event).encode() + b"\n\n"


def _embedding(text: str) -> list[float]:
    """A made-up vector of a text: the same text, the same vector."""
    return [len(text) / 100, _words(text) / 10, (ord(text[0]) if text else 0) / 1000, 0.5]


def _tokens(text: str) -> list[str]:
    """``text`` in word-sized pieces that join back to it exactly (``"a b"`` -> ``["a", " b"]``)."""
    pieces = re.findall(r"\s*\S+|\s+$", text)
    return pieces or [text]


def _split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _format_schema(spec: Any) -> dict[str, Any] | None:
    """The JSON schema of a structured-output request, from any of the three APIs' shapes."""
    if not isinstance(spec, dict) or spec.get("type") != "json_schema":
        return None
    inner: dict[str, Any] = (
        spec["json_schema"] if isinstance(spec.get("json_schema"), dict) else spec
    )
    schema = inner.get("schema")
    return schema if isinstance(schema, dict) else {}


def _answer(text: str, schema: dict[str, Any] | None) -> str:
    if schema is not None:
        return _json_answer(schema, text)
    return f"You said: {text}" if text else "You said nothing."


def _chat_reply(body: dict[str, Any], messages: list[Any]) -> _Reply:
    prompt_tokens = sum(_words(_text_of(m.get("content"))) for m in messages if isinstance(m, dict))
    schema = _format_schema(body.get("response_format"))
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    if last.get("role") == "tool":
        names = {
            call.get("id"): (call.get("function") or {}).get("name")
            for m in messages
            if isinstance(m, dict)
            for call in m.get("tool_calls") or []
        }
        name = names.get(last.get("tool_call_id")) or "the tool"
        result = _text_of(last.get("content"))
        return _Reply(text=_tool_answer(name, result, schema), prompt_tokens=prompt_tokens)
    user_text = _text_of(last.get("content"))
    if tools and last.get("role") == "user":
        function = tools[0].get("function") or tools[0]
        return _Reply(
            tool_name=str(function.get("name") or "tool"),
            tool_arguments=_arguments(function.get("parameters"), user_text),
            prompt_tokens=prompt_tokens,
        )
    return _Reply(text=_answer(user_text, schema), prompt_tokens=prompt_tokens)


def _responses_reply(body: dict[str, Any]) -> _Reply:
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    items = [i for i in items or [] if isinstance(i, dict)]
    prompt_tokens = sum(_words(_text_of(i.get("content") or i.get("output"))) for i in items)
    prompt_tokens += _words(str(body.get("instructions") or ""))
    schema = _format_schema((body.get("text") or {}).get("format"))
    last = items[-1] if items else {}
    if last.get("type") == "function_call_output":
        names = {i.get("call_id"): i.get("name") for i in items if i.get("type") == "function_call"}
        name = names.get(last.get("call_id")) or "the tool"
        result = _text_of(last.get("output"))
        return _Reply(text=_tool_answer(name, result, schema), prompt_tokens=prompt_tokens)
    user_text = _text_of(last.get("content"))
    tools = [
        t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function"
    ]
    if tools and last.get("role", "user") == "user":
        return _Reply(
            tool_name=str(tools[0].get("name") or "tool"),
            tool_arguments=_arguments(tools[0].get("parameters"), user_text),
            prompt_tokens=prompt_tokens,
        )
    return _Reply(text=_answer(user_text, schema), prompt_tokens=prompt_tokens)


def _messages_reply(body: dict[str, Any]) -> _Reply:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = body.get("system")
    prompt_tokens = sum(_words(_text_of(m.get("content"))) for m in messages) + _words(
        _text_of(system)
    )
    schema = _format_schema((body.get("output_config") or {}).get("format"))
    last = messages[-1] if messages else {}
    content = last.get("content")
    results = (
        [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if isinstance(content, list)
        else []
    )
    if last.get("role") == "user" and results:
        names = {
            block.get("id"): block.get("name")
            for m in messages
            if isinstance(m.get("content"), list)
            for block in m["content"]
            if isinstance(block, dict) and block.get("type") == "tool_use"
        }
        name = names.get(results[-1].get("tool_use_id")) or "the tool"
        return _Reply(
            text=_tool_answer(name, _text_of(results[-1].get("content")), schema),
            prompt_tokens=prompt_tokens,
        )
    user_text = _text_of(content)
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict) and "name" in t]
    if tools and last.get("role") == "user":
        return _Reply(
            tool_name=str(tools[0]["name"]),
            tool_arguments=_arguments(tools[0].get("input_schema"), user_text),
            prompt_tokens=prompt_tokens,
        )
    return _Reply(text=_answer(user_text, schema), prompt_tokens=prompt_tokens)


def _gemini_schema(schema: Any) -> Any:
    """A Gemini ``Schema`` (upper-case type names) as the JSON schema it stands for."""
    if isinstance(schema, dict):
        return {
            k: v.lower() if k == "type" and isinstance(v, str) else _gemini_schema(v)
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [_gemini_schema(v) for v in schema]
    return schema


def _gemini_reply(body: dict[str, Any]) -> _Reply:
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    parts_of = [[p for p in c.get("parts") or [] if isinstance(p, dict)] for c in contents]
    system = (body.get("systemInstruction") or {}).get("parts")
    prompt_tokens = sum(_words(_text_of(parts)) for parts in parts_of) + _words(_text_of(system))
    config = body.get("generationConfig") or {}
    raw_schema = config.get("responseJsonSchema", config.get("responseSchema"))
    schema = _gemini_schema(raw_schema) if isinstance(raw_schema, dict) else None
    last = parts_of[-1] if parts_of else []
    results = [p["functionResponse"] for p in last if isinstance(p.get("functionResponse"), dict)]
    if results:
        result = results[-1]
        response = result.get("response")
        output = (
            response.get("output", response.get("result")) if isinstance(response, dict) else None
        )
        text = (
            output
            if isinstance(output, str)
            else json.dumps(response if output is None else output)
        )
        return _Reply(
            text=_tool_answer(str(result.get("name") or "the tool"), text, schema),
            prompt_tokens=prompt_tokens,
        )
    user_text = _text_of(last)
    declarations = [
        d
        for tool in body.get("tools") or []
        if isinstance(tool, dict)
        for d in tool.get("functionDeclarations") or []
        if isinstance(d, dict)
    ]
    role = contents[-1].get("role", "user") if contents else "user"
    if declarations and role == "user":
        first = declarations[0]
        # The SDK sends a schema made from a Python function under its snake_case name.
        parameters = next(
            (
                first[k]
                for k in ("parametersJsonSchema", "parameters_json_schema", "parameters")
                if k in first
            ),
            None,
        )
        return _Reply(
            tool_name=str(first.get("name") or "tool"),
            tool_arguments=_arguments(_gemini_schema(parameters), user_text),
            prompt_tokens=prompt_tokens,
        )
    return _Reply(text=_answer(user_text, schema), prompt_tokens=prompt_tokens)


def _arguments(schema: Any, text: str) -> dict[str, Any]:
    if not isinstance(schema, dict) or not schema.get("properties"):
        return {}
    value = _value_for(schema, text, schema)
    return value if isinstance(value, dict) else {}


def _tool_answer(name: str, result: str, schema: dict[str, Any] | None) -> str:
    if schema is not None:
        return _json_answer(schema, result)
    return f"According to {name}: {result}"


def _response_tool(tool: Any) -> Any:
    if isinstance(tool, dict) and tool.get("type") == "function":
        return {
            "type": "function",
            "name": tool.get("name"),
            "description": tool.get("description"),
            "parameters": tool.get("parameters"),
            "strict": tool.get("strict", True),
        }
    return tool


# --------------------------------------------------------------------------------------------- bedrock


def _converse_as_messages(body: dict[str, Any]) -> dict[str, Any]:
    """A Converse request as the Anthropic request the toy model answers: the same turns, tools
    and system prompt."""

    def block(part: Any) -> Any:
        if not isinstance(part, dict):
            return part
        if "text" in part:
            return {"type": "text", "text": part["text"]}
        if isinstance(part.get("toolUse"), dict):
            use = part["toolUse"]
            return {"type": "tool_use", "id": use.get("toolUseId"), "name": use.get("name")}
        if isinstance(part.get("toolResult"), dict):
            result = part["toolResult"]
            texts = [
                {"type": "text", "text": c["text"] if "text" in c else json.dumps(c.get("json"))}
                for c in result.get("content") or []
                if isinstance(c, dict)
            ]
            return {"type": "tool_result", "tool_use_id": result.get("toolUseId"), "content": texts}
        return part

    messages = [
        {"role": m.get("role"), "content": [block(p) for p in m.get("content") or []]}
        for m in body.get("messages") or []
        if isinstance(m, dict)
    ]
    tools = [
        {
            "name": t["toolSpec"].get("name"),
            "input_schema": (t["toolSpec"].get("inputSchema") or {}).get("json"),
        }
        for t in (body.get("toolConfig") or {}).get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("toolSpec"), dict)
    ]
    system = " ".join(s.get("text", "") for s in body.get("system") or [] if isinstance(s, dict))
    return {"messages": messages, "tools": tools, "system": system or None}


def _invoke_stream_events(message: dict[str, Any], reply: _Reply) -> list[bytes]:
    """The Anthropic stream events (JSON) that add up to ``message``, as InvokeModel with a
    response stream sends them: Bedrock's invocation metrics on the last one."""
    (block,) = message["content"]
    if reply.tool_name:
        start: dict[str, Any] = {**block, "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": p} for p in _split(reply.arguments_json, 8)
        ]
    else:
        start = {**block, "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in _tokens(reply.text or "")]
    usage = message["usage"]
    first = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    metrics = {
        "inputTokenCount": usage["input_tokens"],
        "outputTokenCount": usage["output_tokens"],
        "invocationLatency": 1,
        "firstByteLatency": 1,
    }
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": first},
        {"type": "content_block_start", "index": 0, "content_block": start},
        *({"type": "content_block_delta", "index": 0, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
        {"type": "message_stop", "amazon-bedrock-invocationMetrics": metrics},
    ]
    return [json.dumps(event).encode() for event in events]


def _eventstream_message(kind: str, data: dict[str, Any]) -> bytes:
    """One AWS event-stream message, framed as AWS frames it. The stand-in writes its own frames,
    apart from tracely's encoder, so that what botocore reads live is not tracely's output."""
    headers = b""
    for name, value in (
        (":event-type", kind),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + len(raw).to_bytes(2, "big") + raw
    payload = json.dumps(data).encode()
    total = 12 + len(headers) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(headers).to_bytes(4, "big")
    prelude += (zlib.crc32(prelude) & 0xFFFFFFFF).to_bytes(4, "big")
    message = prelude + headers + payload
    return message + (zlib.crc32(message) & 0xFFFFFFFF).to_bytes(4, "big")


# --------------------------------------------------------------------------------------------- running


def start(port: int = 0, host: str = "127.0.0.1") -> tuple[LLMServer, str]:
    """Start a server in a daemon thread; returns it and its base URL. Call ``server.stop()`` when done."""
    server = LLMServer((host, port)).start()
    return server, server.base_url


@contextlib.contextmanager
def serve(port: int = 0, host: str = "127.0.0.1") -> Iterator[tuple[LLMServer, str]]:
    """A running server for the duration of the block: ``with serve() as (server, base_url): ...``."""
    server, base_url = start(port, host)
    try:
        yield server, base_url
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--port", type=int, default=0, help="port to listen on (0 picks a free one)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    server = LLMServer((args.host, args.port))
    print(server.base_url, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
