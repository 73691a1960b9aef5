"""A support chat service traced only by OpenInference: its OpenAI instrumentor makes the LLM
spans, OpenInference's tracer the TOOL spans; tracely is not in it. It exports over OTLP.

    python tests/scenarios/_openinference_service.py --llm BASE_URL --port 0

``POST /chat`` ``{"message", "conversation_id"}`` → ``{"reply"}``. A message naming an order
looks it up (``lookup_order``); one asking for a refund also runs ``issue_refund``, which
raises for order 13; the model then writes the reply. Any other message is answered without a
model call, so its trace holds only the request's span.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
from openinference.instrumentation import OITracer, TraceConfig, using_session
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagate import extract
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

MODEL = "gpt-4o-mini"
_ORDER = re.compile(r"order (\d+)", re.IGNORECASE)


class RefundDenied(Exception):
    pass


def lookup_order(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "status": "shipped"}


def issue_refund(order_id: str) -> dict[str, Any]:
    if order_id == "13":
        raise RefundDenied(f"order {order_id} cannot be refunded")
    return {"order_id": order_id, "refunded": True}


class Service(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, llm: str, tracer: OITracer) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.client = openai.OpenAI(api_key="test-key", base_url=llm)
        self.history: dict[str, list[dict[str, str]]] = {}
        self.lock = threading.Lock()
        self.tracer = tracer

    def tool(self, name: str, fn: Any, order_id: str) -> dict[str, Any]:
        try:
            with self.tracer.start_as_current_span(name, openinference_span_kind="tool") as span:
                span.set_tool(name=name, parameters={"order_id": order_id})
                result = fn(order_id)
                span.set_output(json.dumps(result), mime_type="application/json")
                return dict(result)
        except RefundDenied as exc:  # the span recorded it, with status ERROR
            return {"error": str(exc)}

    def answer(self, message: str, conversation_id: str) -> str:
        with self.lock:
            history = self.history.setdefault(conversation_id, [])
            history.append({"role": "user", "content": message})
            messages = list(history)
        order = _ORDER.search(message)
        if order is None:
            reply = "Happy to help! Which order is it about?"
        else:
            found = self.tool("lookup_order", lookup_order, order.group(1))
            note = f"order {found['order_id']} is {found['status']}"
            if "refund" in message.lower():
                refund = self.tool("issue_refund", issue_refund, order.group(1))
                note += f"; refund failed: {refund['error']}" if "error" in refund else "; refunded"
            completion = self.client.chat.completions.create(
                model=MODEL,
                messages=[*messages, {"role": "system", "content": note}],  # type: ignore[list-item]
            )
            reply = completion.choices[0].message.content or ""
        with self.lock:
            history.append({"role": "assistant", "content": reply})
        return reply


class Handler(BaseHTTPRequestHandler):
    server: Service
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        carrier = {k.lower(): v for k, v in self.headers.items()}
        conversation_id = str(body["conversation_id"])
        with (
            trace.get_tracer("oi-support-service").start_as_current_span(
                "POST /chat", context=extract(carrier), kind=SpanKind.SERVER
            ),
            using_session(conversation_id),
        ):
            reply = self.server.answer(body["message"], conversation_id)
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
    provider = TracerProvider(resource=Resource.create({"service.name": "oi-support-service"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # OTEL_EXPORTER_OTLP_*
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = OITracer(provider.get_tracer("oi-support-service"), config=TraceConfig())
    service = Service(args.port, args.llm, tracer)
    print(f"listening on http://127.0.0.1:{service.server_address[1]}", flush=True)
    try:
        service.serve_forever()
    finally:
        provider.shutdown()


if __name__ == "__main__":
    main()
