"""Readers for the LLM spans of other instrumentors: the calls tracely did not record itself.

An app that already runs another instrumentor records every LLM call without tracely's seam.
When that instrumentor captured the messages, the span is a recording like tracely's own and
the extractor turns it into an ``llm:`` entry. Four sources are read:

``otel-genai``
    The OpenTelemetry GenAI semantic conventions (the contrib instrumentations, and any
    library that follows them): ``gen_ai.operation.name`` ``chat`` / ``text_completion`` /
    ``generate_content``, the messages as ``gen_ai.input.messages`` /
    ``gen_ai.output.messages`` JSON (plus ``gen_ai.system_instructions``), or, in the older
    event-based form, as span events (``gen_ai.user.message`` ... ``gen_ai.choice``,
    ``gen_ai.client.inference.operation.details``, ``gen_ai.content.prompt``/``completion``).
    Content is on the span only with
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only`` (or ``span_and_event``);
    content sent only as log records (``event_only``) never reaches a trace.
``openllmetry``
    OpenLLMetry (Traceloop): its current releases write the GenAI JSON attributes, older ones
    flat attributes (``gen_ai.prompt.N.role/content/tool_calls.M.*``,
    ``gen_ai.completion.N.*``, ``llm.usage.*``, ``llm.request.type``). Content is captured
    unless ``TRACELOOP_TRACE_CONTENT=false``.
``openinference``
    OpenInference (Arize): ``openinference.span.kind`` ``LLM`` with
    ``llm.input_messages.N.message.*`` / ``llm.output_messages.N.message.*``,
    ``llm.model_name``, ``llm.token_count.*``. Content is captured unless one of the
    ``OPENINFERENCE_HIDE_*`` settings hides it.
``anthropic-sdk``
    The anthropic SDK's own ``anthropic.messages.create`` spans (scope
    ``com.anthropic.sdk.python``), made whenever a tracer provider is set. They carry the
    messages only with ``ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content`` (or the
    client's ``open_telemetry={"traces": {"content_mode": "content"}}``).

Whatever the source, an entry has one shape, so the provider replay code can build an SDK
response from it::

    {"input": [{"role": "user", "parts": [{"type": "text", "content": "..."}]}, ...],
     "output": {"messages": [{"role": "assistant", "parts": [...], "finish_reason": "stop"}],
                "model": "gpt-4o-2024-08-06", "id": "chatcmpl-..."},
     "output_type": "gen_ai.messages", "usage": [812, 96], "provider": "otel-genai"}

Parts are the conventions' ``text`` (``content``), ``tool_call`` (``id``, ``name``,
``arguments`` parsed from JSON text when it is JSON), ``tool_call_response`` (``id``,
``response``) and, kept as the source wrote them, any other part (``reasoning``, ``uri``,
...). System instructions recorded apart from the messages become a leading ``system``
message, and a message that only returns tool results has the role ``tool`` (Anthropic sends
them as ``user``), its text results as text (not text blocks): one form for one conversation,
whoever recorded it, which :func:`input_messages` also gives a replayed call's arguments so
that they compare. ``finish_reason`` is the conventions' value (``stop``, ``length``,
``content_filter``, ``tool_call``, ``error``) where the source's maps to one, else the
source's own; where none was recorded it is ``tool_call`` for a message that calls a tool and
``stop`` otherwise. The entry is named after the request model (what a replayed call asks
for), else the response model, else the span name.

A span that is an LLM call but cannot be served (content not captured, cut short, evicted by
the attribute count limit, or the call failed) is a :class:`NotReplayable` whose reason names
the setting to change; never a half entry. Tool spans of other instrumentors are not entries:
their results are rarely captured, and a tool decorated with ``@tracely.observe`` is recorded
by tracely itself. Embeddings and every other non-LLM operation are not calls a bundle serves.
That a call happened, though, is read from every agent, tool and LLM span of every source
(:func:`read_call`, into the bundle's trace summary), for the checks of a trace.

Every reader is a pure function of a :class:`SpanRecord` and never raises.
"""

from __future__ import annotations

from typing import Final

from tracely_otel._foreign._calls import SOURCES, call_of, conversation_of, read_call, user_text
from tracely_otel._foreign._common import OUTPUT_TYPE, genai_finish_reason
from tracely_otel._foreign._genai import read_anthropic_sdk_span, read_genai_span
from tracely_otel._foreign._messages import (
    content_parts,
    input_messages,
    tool_call_part,
    tool_response_part,
)
from tracely_otel._foreign._openinference import read_openinference_span
from tracely_otel._foreign._openllmetry import read_openllmetry_span
from tracely_otel._foreign._pairs import same_call_beside
from tracely_otel._reads import SpanReader

__all__ = [
    "FOREIGN_READERS",
    "OUTPUT_TYPE",
    "SOURCES",
    "call_of",
    "conversation_of",
    "content_parts",
    "genai_finish_reason",
    "input_messages",
    "read_anthropic_sdk_span",
    "read_genai_span",
    "read_openinference_span",
    "read_call",
    "read_openllmetry_span",
    "same_call_beside",
    "tool_call_part",
    "tool_response_part",
    "user_text",
]

FOREIGN_READERS: Final[tuple[SpanReader, ...]] = (
    read_anthropic_sdk_span,
    read_openinference_span,
    read_openllmetry_span,
    read_genai_span,
)
"""The readers, in the order the extractor tries them after tracely's own."""
