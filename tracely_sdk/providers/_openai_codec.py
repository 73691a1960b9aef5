"""The OpenAI API's bodies as the wire codecs read and make them: pure functions over JSON.

What the chat completions and Responses wire formats (``providers.http._openai_chat``,
``_openai_responses``) share: the GenAI conventions' messages of a request and of an answer,
usage, a stream's events added up to the body they stand for, the headers a recording keeps,
and the bodies and events made for an entry tracely did not record at the client (a
hand-written answer, another instrumentor's messages).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from tracely_otel.genai import (
    ChatMessage,
    MessagePart,
    OutputMessage,
    content_parts,
    genai_finish_reason,
    tool_call_part,
    tool_response_part,
)
from tracely_sdk.providers import _wire
from tracely_sdk.providers._patching import Reply, pieces, token_counts

SAFE_HEADERS = frozenset(
    {
        "content-type",
        "x-request-id",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "openai-processing-ms",
        "openai-version",
    }
)
"""Response headers a recording may keep, besides ``x-ratelimit-*``: nothing that names an account."""


# --------------------------------------------------------------------------------------------- recording


def record_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers of a response that a recording may keep (``SAFE_HEADERS`` and ``x-ratelimit-*``)."""
    return _wire.kept_headers(headers, SAFE_HEADERS, "x-ratelimit-")


# --------------------------------------------------------------------------------------------- plain text


def recording_from_text(
    kind: Literal["chat.completion", "response"],
    text: str,
    *,
    model: str,
    usage: tuple[int, int] | None = None,
    response_id: str = "replay",
) -> dict[str, Any]:
    """The recording of a chat completion (``kind="chat.completion"``) or a Responses API
    response (``"response"``) whose one message says ``text``: what a
    hand-written entry (``{"output": "Hello", "usage": [812, 96]}``) is served as."""
    prompt, completion = usage or (0, 0)
    if kind == "chat.completion":
        body: dict[str, Any] = {
            "id": response_id,
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "logprobs": None,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                }
            ],
        }
        if usage is not None:
            body["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
    elif kind == "response":
        body = {
            "id": response_id,
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": model,
            "output": [
                {
                    "id": f"{response_id}_msg",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
        if usage is not None:
            body["usage"] = {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + completion,
            }
    else:
        raise ValueError(f"unknown kind {kind!r}; expected 'chat.completion' or 'response'")
    return {"object": kind, "body": body, "request_id": None}


def chunks_from_text(
    kind: Literal["chat.completion"],
    text: str,
    *,
    model: str,
    usage: tuple[int, int] | None = None,
    response_id: str = "replay",
) -> list[dict[str, Any]]:
    """Recorded chat chunks that stream ``text`` word by word, for an entry that
    holds only the answer's text; with ``usage`` the last chunk is the ``include_usage`` one."""
    if kind != "chat.completion":
        raise ValueError("chunks_from_text makes chat completion chunks only")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "event": None,
            "data": {
                "id": response_id,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            },
        }

    pieces = _wire.word_pieces(text)
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in pieces]
    chunks.append(chunk({}, "stop"))
    if usage is not None:
        last = chunk({})
        last["data"]["choices"] = []
        last["data"]["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        }
        chunks.append(last)
    return chunks


# --------------------------------------------------------------------------------------------- bodies


def genai_chat_output(body: Mapping[str, Any]) -> list[OutputMessage]:
    """A chat completion body's choices in the ``gen_ai.output.messages`` shape."""
    out: list[OutputMessage] = []
    for choice in body.get("choices") or []:
        message = choice.get("message") or {}
        parts = content_parts(message.get("content"))
        if message.get("refusal"):
            parts.append({"type": "text", "content": message["refusal"]})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            parts.append(
                tool_call_part(call.get("id"), function.get("name"), function.get("arguments"))
            )
        reason = choice.get("finish_reason")
        out.append(
            {
                "role": "assistant",
                "parts": parts,
                "finish_reason": genai_finish_reason(reason),
            }
        )
    return out


def chat_body_from_chunks(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The chat completion body that recorded ``chunks`` add up to."""
    base: dict[str, Any] = {}
    usage: Any = None
    acc: dict[int, dict[str, Any]] = {}
    for recorded in chunks:
        data = recorded.get("data") if isinstance(recorded, Mapping) else None
        if not isinstance(data, Mapping):
            continue
        if not base:
            base = {k: data.get(k) for k in ("id", "created", "model")}
            for key in ("system_fingerprint", "service_tier"):
                if data.get(key) is not None:
                    base[key] = data[key]
        if data.get("usage") is not None:
            usage = data["usage"]
        for choice in data.get("choices") or []:
            index = int(choice.get("index") or 0)
            state = acc.setdefault(
                index, {"content": None, "refusal": None, "calls": {}, "finish": None}
            )
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                state["content"] = (state["content"] or "") + delta["content"]
            if isinstance(delta.get("refusal"), str):
                state["refusal"] = (state["refusal"] or "") + delta["refusal"]
            for call in delta.get("tool_calls") or []:
                slot = state["calls"].setdefault(
                    int(call.get("index") or 0),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                if function.get("name"):
                    slot["function"]["name"] = function["name"]
                if function.get("arguments"):
                    slot["function"]["arguments"] += function["arguments"]
            if choice.get("finish_reason"):
                state["finish"] = choice["finish_reason"]
    choices = []
    for index in sorted(acc):
        state = acc[index]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": state["content"],
            "refusal": state["refusal"],
        }
        if state["calls"]:
            message["tool_calls"] = [state["calls"][n] for n in sorted(state["calls"])]
        choices.append(
            {
                "index": index,
                "finish_reason": state["finish"] or "stop",
                "logprobs": None,
                "message": message,
            }
        )
    body = {
        "id": base.get("id") or "replay",
        "object": "chat.completion",
        "created": base.get("created") or 0,
        "model": base.get("model") or "",
        "choices": choices,
        **{k: v for k, v in base.items() if k not in ("id", "created", "model")},
    }
    if usage is not None:
        body["usage"] = usage
    return body


def genai_responses_input(value: Any) -> list[ChatMessage]:
    """A Responses API ``input`` (a string, or its items as JSON) in the GenAI conventions'
    ``gen_ai.input.messages`` shape."""
    if isinstance(value, str):
        return [{"role": "user", "parts": [{"type": "text", "content": value}]}]
    out: list[ChatMessage] = []
    for item in value or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "function_call":
            call = tool_call_part(item.get("call_id"), item.get("name"), item.get("arguments"))
            out.append({"role": "assistant", "parts": [call]})
        elif kind == "function_call_output":
            response = tool_response_part(item.get("call_id"), item.get("output"))
            out.append({"role": "tool", "parts": [response]})
        elif kind == "reasoning":
            text = " ".join(
                s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)
            )
            out.append({"role": "assistant", "parts": [{"type": "reasoning", "content": text}]})
        elif "role" in item:
            out.append({"role": item["role"], "parts": content_parts(item.get("content"))})
        else:
            out.append({"role": "user", "parts": [item]})
    return out


def responses_finish(body: Mapping[str, Any]) -> str:
    """The GenAI finish reason of a Responses API response."""
    output = body.get("output") or []
    if body.get("status") == "incomplete":
        reason = (body.get("incomplete_details") or {}).get("reason")
        return "content_filter" if reason == "content_filter" else "length"
    if any(isinstance(i, dict) and i.get("type") == "function_call" for i in output):
        return "tool_call"
    return "stop"


def genai_responses_output(body: Mapping[str, Any]) -> list[OutputMessage]:
    """A Responses API response's output in the ``gen_ai.output.messages`` shape."""
    parts: list[MessagePart] = []
    for item in body.get("output") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            parts.extend(content_parts(item.get("content")))
        elif kind == "function_call":
            parts.append(
                tool_call_part(item.get("call_id"), item.get("name"), item.get("arguments"))
            )
        elif kind == "reasoning":
            text = " ".join(
                s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)
            )
            parts.append({"type": "reasoning", "content": text})
    return [{"role": "assistant", "parts": parts, "finish_reason": responses_finish(body)}]


def response_events_from_body(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Responses API events a streamed call would have sent."""
    events: list[dict[str, Any]] = []

    def add(event: dict[str, Any]) -> None:
        event["sequence_number"] = len(events)
        events.append({"event": event["type"], "data": event})

    started = {**body, "status": "in_progress", "output": [], "usage": None}
    started.pop("completed_at", None)
    add({"type": "response.created", "response": started})
    add({"type": "response.in_progress", "response": dict(started)})
    for index, item in enumerate(body.get("output") or []):
        if not isinstance(item, dict):
            continue
        item_id = item.get("id")
        if item.get("type") == "message":
            add(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "content": []},
                }
            )
            for n, part in enumerate(item.get("content") or []):
                empty = {**part, "text": ""} if part.get("type") == "output_text" else part
                add(
                    {
                        "type": "response.content_part.added",
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": n,
                        "part": empty,
                    }
                )
                if part.get("type") == "output_text":
                    for piece in _wire.word_pieces(part.get("text") or ""):
                        add(
                            {
                                "type": "response.output_text.delta",
                                "item_id": item_id,
                                "output_index": index,
                                "content_index": n,
                                "delta": piece,
                                "logprobs": [],
                            }
                        )
                    add(
                        {
                            "type": "response.output_text.done",
                            "item_id": item_id,
                            "output_index": index,
                            "content_index": n,
                            "text": part.get("text") or "",
                            "logprobs": [],
                        }
                    )
                add(
                    {
                        "type": "response.content_part.done",
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": n,
                        "part": part,
                    }
                )
        elif item.get("type") == "function_call":
            add(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "arguments": ""},
                }
            )
            arguments = item.get("arguments") or ""
            add(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item_id,
                    "output_index": index,
                    "delta": arguments,
                }
            )
            add(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item_id,
                    "output_index": index,
                    "arguments": arguments,
                }
            )
        else:
            add({"type": "response.output_item.added", "output_index": index, "item": item})
        add({"type": "response.output_item.done", "output_index": index, "item": item})
    final = "response.incomplete" if body.get("status") == "incomplete" else "response.completed"
    add({"type": final, "response": dict(body)})
    return events


def response_body_from_events(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The response a recorded Responses stream ended with."""
    last: Any = None
    for recorded in chunks:
        data = recorded.get("data") if isinstance(recorded, Mapping) else None
        if isinstance(data, Mapping) and isinstance(data.get("response"), Mapping):
            last = data["response"]
            if data.get("type") in ("response.completed", "response.incomplete", "response.failed"):
                break
    if last is None:
        raise ValueError("the recorded Responses stream holds no response event")
    return dict(last)


def usage_of(body: Mapping[str, Any], keys: tuple[str, str]) -> tuple[int, int] | None:
    """The (input, output) token counts of a body whose usage names them ``keys``."""
    usage = body.get("usage")
    if not isinstance(usage, Mapping):
        return None
    tokens_in, tokens_out = usage.get(keys[0]), usage.get(keys[1])
    if isinstance(tokens_in, int) and isinstance(tokens_out, int):
        return tokens_in, tokens_out
    return None


# The optional arguments a call's spec reads, by API (the rest are the SDK's business).


# --------------------------------------------------------------------------- replies as bodies

_FINISH_FROM_GENAI = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_call": "tool_calls",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


def chat_body_from_reply(reply: Reply) -> dict[str, Any]:
    """A chat completion body answering ``reply``."""
    choices = []
    for index, (text, calls, finish) in enumerate(reply.messages):
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in calls
            ]
        choices.append(
            {
                "index": index,
                "finish_reason": _FINISH_FROM_GENAI.get(finish, "stop"),
                "logprobs": None,
                "message": message,
            }
        )
    body: dict[str, Any] = {
        "id": reply.response_id,
        "object": "chat.completion",
        "created": 0,
        "model": reply.model,
        "choices": choices,
    }
    usage = token_counts(reply.usage, ("prompt_tokens", "completion_tokens", "total_tokens"))
    if usage is not None:
        body["usage"] = usage
    return body


def response_body_from_reply(reply: Reply) -> dict[str, Any]:
    """A Responses API response body answering ``reply``."""
    body: dict[str, Any] = recording_from_text(
        "response", "", model=reply.model, usage=reply.usage, response_id=reply.response_id
    )["body"]
    output: list[dict[str, Any]] = []
    finish = "stop"
    for index, (text, calls, reason) in enumerate(reply.messages):
        finish = reason if reason != "stop" else finish
        if text is not None:
            output.append(
                {
                    "id": f"msg_{reply.response_id}_{index}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        for n, (cid, name, args) in enumerate(calls):
            output.append(
                {
                    "id": f"fc_{reply.response_id}_{index}_{n}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": cid,
                    "name": name,
                    "arguments": args,
                }
            )
    body["output"] = output
    if finish in ("length", "content_filter"):
        body["status"] = "incomplete"
        reason = "max_output_tokens" if finish == "length" else "content_filter"
        body["incomplete_details"] = {"reason": reason}
    return body


def chat_chunks_from_body(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chunks a streamed call would have sent for ``body``."""
    base = {
        "id": body.get("id"),
        "object": "chat.completion.chunk",
        "created": body.get("created", 0),
        "model": body.get("model"),
    }
    for key in ("system_fingerprint", "service_tier"):
        if body.get(key) is not None:
            base[key] = body[key]

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"event": None, "data": {**base, "choices": [choice]}}

    chunks = []
    for choice in body.get("choices") or []:
        index = int(choice.get("index") or 0)
        message = choice.get("message") or {}
        content = message.get("content")
        chunks.append(
            chunk(index, {"role": "assistant", "content": "" if content is not None else None})
        )
        chunks.extend(chunk(index, {"content": piece}) for piece in pieces(content or ""))
        if message.get("refusal"):
            chunks.append(chunk(index, {"refusal": message["refusal"]}))
        for n, call in enumerate(message.get("tool_calls") or []):
            delta_call = {
                "index": n,
                "id": call.get("id"),
                "type": "function",
                "function": dict(call.get("function") or {}),
            }
            chunks.append(chunk(index, {"tool_calls": [delta_call]}))
        chunks.append(chunk(index, {}, choice.get("finish_reason") or "stop"))
    if body.get("usage") is not None:
        chunks.append({"event": None, "data": {**base, "choices": [], "usage": body["usage"]}})
    return chunks
