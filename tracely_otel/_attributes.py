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
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
ERROR_TYPE: Final = "error.type"

OP_INVOKE_AGENT: Final = "invoke_agent"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_CHAT: Final = "chat"

OPERATION_FOR_KIND: Final = {
    KIND_AGENT: OP_INVOKE_AGENT,
    KIND_TOOL: OP_EXECUTE_TOOL,
    KIND_LLM: OP_CHAT,
}


def span_name(kind: str, name: str) -> str:
    """The span name the GenAI conventions give a call: ``execute_tool get_weather``."""
    return f"{OPERATION_FOR_KIND[kind]} {name}"
