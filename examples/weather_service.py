"""A multi-turn weather chat service over HTTP, wrapping the reference agent.

``POST /chat`` with ``{"message": "...", "conversation_id": "..."}`` answers
``{"reply": "...", "conversation_id": "..."}``; without a ``conversation_id`` the service
starts a conversation and its reply carries the id it issued. The service remembers, per
conversation, the city last asked about, so a follow-up without a city ("Is it still like
that?") is about the same city. ``GET /healthz`` answers ``ok``.

It is instrumented the way a production service is: ``tracely.init()`` sets up the
OpenTelemetry pipeline from the standard ``OTEL_*`` variables, and each request continues the
caller's W3C ``traceparent``, so the spans of one turn (the request, the agent run, its tool and
LLM calls) form the trace the caller named. Export them to a tracely server and ``tracely
scenarios run`` can check them::

    tracely serve --port 8711 &
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:8711 OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \\
        python -m examples.weather_service --port 8780 &
    TRACELY_STORE=http://127.0.0.1:8711 \\
        tracely scenarios run examples/scenarios --target http://127.0.0.1:8780

``--broken`` serves the silent failure (:func:`examples.weather_agent.run_broken`): the agent
answers without calling the weather tool.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry import trace
from opentelemetry.propagate import extract
from opentelemetry.trace import SpanKind, Status, StatusCode

import tracely_sdk as tracely
from examples import weather_agent

CITIES = tuple(weather_agent._WEATHER)
_CITY = re.compile(r"\b(" + "|".join(CITIES) + r")\b")
_MAX_BODY = 64 * 1024


class Conversations:
    """The city each conversation last asked about (a service's memory, kept in-process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._city: dict[str, str] = {}

    def city_for(self, conversation_id: str, message: str) -> str | None:
        found = _CITY.search(message)
        with self._lock:
            if found:
                self._city[conversation_id] = found.group(1)
            return self._city.get(conversation_id)


class WeatherService(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], *, broken: bool = False) -> None:
        super().__init__(address, _Handler)
        self.agent = weather_agent.run_broken if broken else weather_agent.run
        self.memory = Conversations()
        self.tracer = trace.get_tracer("examples.weather_service")

    def answer_turn(self, message: str, conversation_id: str) -> str:
        """One turn, as the GenAI conventions' ``invoke_agent`` span: the conversation and the
        user's own message are in the trace (the agent is called with the city alone)."""
        with self.tracer.start_as_current_span(
            "invoke_agent weather-service",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "weather-service",
                "gen_ai.conversation.id": conversation_id,
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": message}]}]
                ),
            },
        ):
            return self.answer(message, conversation_id)

    def answer(self, message: str, conversation_id: str) -> str:
        city = self.memory.city_for(conversation_id, message)
        if city is None:
            return f"Which city? I know the weather in {', '.join(CITIES)}."
        return self.agent(city)


class _Handler(BaseHTTPRequestHandler):
    server: WeatherService
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # or every small response waits for the delayed ACK

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        if self.path != "/chat":
            self._send(404, {"error": "not found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= _MAX_BODY:
            self._send(400, {"error": "send a JSON body of at most 64 KiB"})
            return
        try:
            body = json.loads(self.rfile.read(length))
            message = body["message"]
            conversation_id = str(body.get("conversation_id") or f"c-{uuid.uuid4().hex[:12]}")
            if not isinstance(message, str):
                raise TypeError("message must be a string")
        except (ValueError, KeyError, TypeError) as exc:
            self._send(400, {"error": f"bad request: {exc}"})
            return
        # Continue the caller's trace: the turn's spans join the trace it named. The W3C
        # propagator reads lower-case keys, and HTTP header names are case-insensitive.
        parent = extract({k.lower(): v for k, v in self.headers.items()})
        with self.server.tracer.start_as_current_span(
            "POST /chat", context=parent, kind=SpanKind.SERVER
        ) as span:
            span.set_attribute("http.request.method", "POST")
            span.set_attribute("http.route", "/chat")
            try:
                reply = self.server.answer_turn(message, conversation_id)
            except Exception as exc:
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                self._send(500, {"error": "the agent failed"})
                return
        self._send(200, {"reply": reply, "conversation_id": conversation_id})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.weather_service")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8780, help="0 picks a free port")
    parser.add_argument("--broken", action="store_true", help="serve the silent failure")
    args = parser.parse_args(argv)
    provider = tracely.init(service_name="weather-service")
    service = WeatherService((args.host, args.port), broken=args.broken)
    host, port = service.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    try:
        service.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        service.server_close()
        if provider is not None:
            provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
