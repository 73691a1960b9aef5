"""A chat service that knows nothing of tracely: the OpenAI SDK, traced by OpenTelemetry's
contrib GenAI instrumentor, exporting over OTLP. It stands for a service in any language whose
spans follow the GenAI conventions.

    python tests/scenarios/_otel_service.py --llm BASE_URL --port 0

``POST /chat`` ``{"message", "conversation_id"}`` → ``{"reply"}``; the conversation's history
is kept per id and sent to the model each turn.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.propagate import extract
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

MODEL = "gpt-4o-mini"


class Service(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, llm: str) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.client = openai.OpenAI(api_key="test-key", base_url=llm)
        self.history: dict[str, list[dict[str, str]]] = {}
        self.lock = threading.Lock()
        self.tracer = trace.get_tracer("otel-chat-service")


class Handler(BaseHTTPRequestHandler):
    server: Service
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        carrier = {k.lower(): v for k, v in self.headers.items()}
        with self.server.tracer.start_as_current_span(
            "POST /chat", context=extract(carrier), kind=SpanKind.SERVER
        ):
            with self.server.lock:
                history = self.server.history.setdefault(body["conversation_id"], [])
                history.append({"role": "user", "content": body["message"]})
                messages = list(history)
            completion = self.server.client.chat.completions.create(
                model=MODEL,
                messages=messages,  # type: ignore[arg-type]
            )
            reply = completion.choices[0].message.content or ""
            with self.server.lock:
                history.append({"role": "assistant", "content": reply})
        data = json.dumps({"reply": reply}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--llm", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    provider = TracerProvider(resource=Resource.create({"service.name": "otel-chat-service"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # OTEL_EXPORTER_OTLP_*
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    service = Service(args.port, args.llm)
    print(f"listening on http://127.0.0.1:{service.server_address[1]}", flush=True)
    try:
        service.serve_forever()
    finally:
        provider.shutdown()


if __name__ == "__main__":
    main()
