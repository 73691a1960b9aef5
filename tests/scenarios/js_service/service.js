// A support chat service in Node.js, traced only by the official OpenTelemetry JS SDK: its
// spans follow the GenAI conventions (`invoke_agent`, `chat MODEL`, `execute_tool NAME`) and go
// over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT. It stands for a service whose tracing nobody
// at tracely wrote.
//
//   node service.js --llm BASE_URL --port 0
//
// POST /chat {"message", "conversation_id"} -> {"reply"}. A message naming an order looks it up
// (`lookup_order`); one asking for a refund also runs `issue_refund`, which fails for order 13;
// either way the model (BASE_URL speaks the OpenAI API) writes the reply. Any other message is
// answered without a model call. Each request continues the caller's W3C traceparent.
"use strict";

const http = require("node:http");
const { context, propagation, trace, SpanKind, SpanStatusCode } = require("@opentelemetry/api");
const { W3CTraceContextPropagator } = require("@opentelemetry/core");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-http");
const { resourceFromAttributes } = require("@opentelemetry/resources");
const { BasicTracerProvider, BatchSpanProcessor } = require("@opentelemetry/sdk-trace-base");

const MODEL = "gpt-4o-mini";
const AGENT = "support-agent";

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : fallback;
}

const llm = option("--llm");
const port = Number(option("--port", "0"));

const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": "js-support-service" }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter(), { scheduledDelayMillis: 50 })],
});
trace.setGlobalTracerProvider(provider);
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
const tracer = trace.getTracer("js-support-service");

const history = new Map(); // conversation id -> messages

function text(content) {
  return [{ type: "text", content }];
}

function tool(name, args, parent, run) {
  const span = tracer.startSpan(
    `execute_tool ${name}`,
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": JSON.stringify(args),
      },
    },
    parent,
  );
  try {
    const result = run(args);
    span.setAttribute("gen_ai.tool.call.result", JSON.stringify(result));
    return result;
  } catch (error) {
    span.setAttribute("error.type", error.name);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    return { error: error.message };
  } finally {
    span.end();
  }
}

class RefundDenied extends Error {
  constructor(message) {
    super(message);
    this.name = "RefundDenied";
  }
}

const TOOLS = {
  lookup_order: ({ order_id }) => ({ order_id, status: "shipped" }),
  issue_refund: ({ order_id }) => {
    if (order_id === "13") throw new RefundDenied(`order ${order_id} cannot be refunded`);
    return { order_id, refunded: true };
  },
};

async function chat(messages, parent) {
  const span = tracer.startSpan(
    `chat ${MODEL}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "gen_ai.input.messages": JSON.stringify(
          messages.map((m) => ({ role: m.role, parts: text(m.content) })),
        ),
      },
    },
    parent,
  );
  try {
    const response = await fetch(`${llm}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer test-key" },
      body: JSON.stringify({ model: MODEL, messages }),
    });
    const body = await response.json();
    const reply = body.choices[0].message.content;
    span.setAttributes({
      "gen_ai.response.model": body.model,
      "gen_ai.response.id": body.id,
      "gen_ai.response.finish_reasons": [body.choices[0].finish_reason],
      "gen_ai.usage.input_tokens": body.usage.prompt_tokens,
      "gen_ai.usage.output_tokens": body.usage.completion_tokens,
      "gen_ai.output.messages": JSON.stringify([
        { role: "assistant", parts: text(reply), finish_reason: "stop" },
      ]),
    });
    return reply;
  } catch (error) {
    span.setAttribute("error.type", error.name);
    span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
    throw error;
  } finally {
    span.end();
  }
}

async function answer(message, conversationId, parent) {
  const agent = tracer.startSpan(
    `invoke_agent ${AGENT}`,
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT,
        "gen_ai.conversation.id": conversationId,
        "gen_ai.input.messages": JSON.stringify([{ role: "user", parts: text(message) }]),
      },
    },
    parent,
  );
  const inside = trace.setSpan(parent, agent);
  try {
    const messages = history.get(conversationId) || [];
    history.set(conversationId, messages);
    messages.push({ role: "user", content: message });
    const order = /order (\d+)/i.exec(message);
    let reply;
    if (order) {
      const found = tool("lookup_order", { order_id: order[1] }, inside, TOOLS.lookup_order);
      let note = `order ${found.order_id} is ${found.status}`;
      if (/refund/i.test(message)) {
        const refund = tool("issue_refund", { order_id: order[1] }, inside, TOOLS.issue_refund);
        note += refund.error ? `; refund failed: ${refund.error}` : "; refunded";
      }
      reply = await chat([...messages, { role: "system", content: note }], inside);
    } else {
      reply = "Happy to help! Which order is it about?"; // no model call
    }
    messages.push({ role: "assistant", content: reply });
    agent.setAttribute(
      "gen_ai.output.messages",
      JSON.stringify([{ role: "assistant", parts: text(reply), finish_reason: "stop" }]),
    );
    return reply;
  } finally {
    agent.end();
  }
}

const server = http.createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", async () => {
    const parent = propagation.extract(context.active(), request.headers);
    const span = tracer.startSpan("POST /chat", { kind: SpanKind.SERVER }, parent);
    let status = 200;
    let body;
    try {
      const { message, conversation_id: conversationId } = JSON.parse(Buffer.concat(chunks));
      body = { reply: await answer(message, String(conversationId), trace.setSpan(parent, span)) };
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
      status = 500;
      body = { error: String(error) };
    } finally {
      span.end();
    }
    const data = JSON.stringify(body);
    response.writeHead(status, { "content-type": "application/json" });
    response.end(data);
  });
});

server.listen(port, "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});

function stop() {
  server.close();
  provider.shutdown().finally(() => process.exit(0));
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
