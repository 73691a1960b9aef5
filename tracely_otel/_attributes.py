"""Span attribute names: tracely's own and the GenAI semantic conventions they map to.

Every name a span or an extractor uses is spelled once, here.
"""

from __future__ import annotations

from typing import Final

# tracely's own attributes -------------------------------------------------------------
KIND: Final = "tracely.kind"  # "agent" | "tool" | "llm"
NAME: Final = "tracely.name"  # tool name, model id or agent name
ARGS: Final = "tracely.args"  # JSON: a tool call's arguments
INPUT: Final = "tracely.input"  # JSON: an LLM call's input, or an agent's {"args", "kwargs"}
OUTPUT: Final = "tracely.output"  # JSON: what the call returned
OUTPUT_TYPE: Final = "tracely.output.type"  # type tag used to rebuild the value on replay
ERROR: Final = "tracely.error"  # JSON: {"type": ..., "message": ...}
# JSON [input_tokens, output_tokens], written by earlier tracely versions and still read from
# their spans: the token counts are now gen_ai.usage.input_tokens / output_tokens alone.
USAGE: Final = "tracely.usage"
DIGEST: Final = "tracely.digest"  # JSON: {attribute: [length, crc32]} of each JSON value above
UNSERIALISABLE: Final = "tracely.unserialisable"  # names of values recorded only as a marker
PROVIDER: Final = "tracely.provider"  # which SDK create-method produced an llm span
SDK_VERSION: Final = "tracely.sdk.version"

REPLAY_MODE: Final = "tracely.replay.mode"  # "recorded" | "lenient"
REPLAY_SERVED: Final = "tracely.replay.served"  # True when the value came from the recording
REPLAY_LIVE: Final = "tracely.replay.live"  # True when a lenient run fell through to live
REPLAY_DIVERGENCE: Final = "tracely.replay.divergence"  # "input" when served despite a new input
REPLAY_RECORDED_NAME: Final = "tracely.replay.recorded_name"  # LLM entry served by fallback
REPLAY_MISS: Final = "tracely.replay.miss"  # a strict miss raised at this call
CASE_ID: Final = "tracely.case.id"
CASE_VERSION: Final = "tracely.case.version"
# On the root agent span: how many tool and LLM calls the run made, and the seq of its last
# call, so that the extractor can tell a recording that lost spans on the way from a whole one.
CALLS_TOOLS: Final = "tracely.calls.tools"
CALLS_LLM: Final = "tracely.calls.llm"
CALLS_LAST_SEQ: Final = "tracely.calls.last_seq"

# the values that carry a length and hash in DIGEST
DIGESTED: Final = (ARGS, INPUT, OUTPUT, ERROR)

TRACESTATE_KEY: Final = "tracely"  # a tracestate member asking for the trace to be recorded
KIND_AGENT: Final = "agent"
KIND_TOOL: Final = "tool"
KIND_LLM: Final = "llm"

# GenAI semantic conventions -------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_SYSTEM: Final = "gen_ai.system"  # the pre-1.37 name of gen_ai.provider.name
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"  # the model's id of the call a tool answers
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"  # seconds
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
ERROR_TYPE: Final = "error.type"
OPENAI_API_TYPE: Final = "openai.api.type"  # "chat_completions" | "responses"
OPENAI_REQUEST_SERVICE_TIER: Final = "openai.request.service_tier"
OPENAI_RESPONSE_SERVICE_TIER: Final = "openai.response.service_tier"
OPENAI_RESPONSE_SYSTEM_FINGERPRINT: Final = "openai.response.system_fingerprint"

TOOL_TYPE_FUNCTION: Final = "function"  # a tool the application runs itself
# gen_ai.provider.name is required and its values are open: a model id tracely cannot place
# gets the value the conventions use for one outside their known set.
PROVIDER_OTHER: Final = "_OTHER"
# The provider a model id names, by its family's prefix, for calls that do not say: the
# conventions ask for the instrumentation's best knowledge.
_PROVIDER_PREFIXES: Final = (
    (("gpt-", "chatgpt-", "o1", "o3", "o4", "text-embedding-", "davinci", "babbage"), "openai"),
    (("claude",), "anthropic"),
    (("gemini",), "gcp.gemini"),
    (("mistral", "mixtral", "codestral", "ministral", "pixtral"), "mistral_ai"),
    (("command",), "cohere"),
    (("deepseek",), "deepseek"),
    (("grok",), "x_ai"),
    (("sonar",), "perplexity"),
)

OP_INVOKE_AGENT: Final = "invoke_agent"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_CHAT: Final = "chat"

OPERATION_FOR_KIND: Final = {
    KIND_AGENT: OP_INVOKE_AGENT,
    KIND_TOOL: OP_EXECUTE_TOOL,
    KIND_LLM: OP_CHAT,
}


def provider_for_model(model: str) -> str:
    """The ``gen_ai.provider.name`` a model id names: ``claude-3-5-haiku`` is ``anthropic``."""
    lowered = model.lower()
    for prefixes, provider in _PROVIDER_PREFIXES:
        if lowered.startswith(prefixes):
            return provider
    return PROVIDER_OTHER


def span_name(kind: str, name: str) -> str:
    """The span name the GenAI conventions give a call: ``execute_tool get_weather``."""
    return f"{OPERATION_FOR_KIND[kind]} {name}"
