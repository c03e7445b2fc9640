"""Anthropic's Messages API: /v1/messages (whole, or streamed as Anthropic's named SSE events)
and /v1/messages/count_tokens, for the SDKs and coding agents that speak it.

A conversation becomes the engine's chat messages through engine/server/chat_request.py, as the
OpenAI routes' do: `system` first, a `tool_result` block as a "tool" message answering its call,
an assistant's `tool_use` blocks as its tool calls. Tools are offered the same way (in the
template when it takes them, else in a system message) and read back from the reply the same
way; `tool_choice` "any" or a named tool forces a call with a grammar.

The stream's events, in Anthropic's order: message_start; for each content block
content_block_start, content_block_delta..., content_block_stop (a ping after the first block's
start); message_delta (stop_reason, usage); message_stop. Errors after the first event come as an
`error` event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from engine.enums import StopReason
from engine.runtime import protocol as p
from engine.server import request_params as rp
from engine.server.anthropic_schema import CountTokensRequest, MessageIn, MessagesRequest
from engine.server.chat_request import (
    ToolCallWatch,
    ToolOffer,
    Turn,
    call_arguments,
    checked_functions,
    openai_call,
    part_not_taken,
    prepared,
)
from engine.server.completion import Reply, pieces
from engine.server.config import Limits
from engine.server.engine_link import GenerationRequest
from engine.server.errors import APIError, anthropic_error
from engine.server.responding import logged_stream, stream_response, whole_replies
from engine.server.server_state import ServerState, state_of
from engine.server.streaming import named_sse

router = APIRouter(prefix="/v1", tags=["Anthropic"])

STOP_REASONS = {
    StopReason.EOS: "end_turn",
    StopReason.STOP_STRING: "stop_sequence",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.CONTEXT_FULL: "max_tokens",
    StopReason.STOPPED: "end_turn",
}


@dataclass(frozen=True)
class MessagesPlan:
    request: GenerationRequest
    tools_offered: bool


@router.post("/messages")
async def create_message(body: MessagesRequest, request: Request) -> Response:
    state = state_of(request)
    state, model, model_id = await state.serving(request, body.model)
    limits = state.config.limits
    plan = plan_messages(body, model, limits, rp.max_tokens_of(body.max_tokens, limits))
    job = state.start_job(request, "/v1/messages", model_id, body.stream)
    if body.stream:
        return await stream_response(request, job, _events(state, job, plan))
    (reply,) = await whole_replies(request, state, job, [plan.request])
    calls = ToolCallWatch(plan.tools_offered).calls(reply.text)
    blocks = [_tool_use(call) for call in calls] if calls else []
    if not calls and reply.text:
        blocks = [{"type": "text", "text": reply.text}]
    stop_reason, stop_sequence = _stop(plan, reply, calls)
    return JSONResponse(
        {
            **_message(job, content=blocks, stop_reason=stop_reason, stop_sequence=stop_sequence),
            "usage": {
                "input_tokens": reply.prompt_tokens,
                "output_tokens": reply.completion_tokens,
            },
        }
    )


@router.post("/messages/count_tokens")
async def count_tokens(body: CountTokensRequest, request: Request) -> dict[str, Any]:
    """The prompt's tokens as the model's template renders it, tools included. The worker has
    no count-only command, so this reads the prompt count of a one-token reply."""
    state = state_of(request)
    state, model, model_id = await state.serving(request, body.model)
    plan = plan_messages(body, model, state.config.limits, max_tokens=1)
    job = state.start_job(request, "/v1/messages/count_tokens", model_id, False)
    (reply,) = await whole_replies(request, state, job, [plan.request])
    return {"input_tokens": reply.prompt_tokens}


def plan_messages(
    body: CountTokensRequest, model: p.ModelLoaded, limits: Limits, max_tokens: int
) -> MessagesPlan:
    if len(body.messages) > limits.max_messages:
        raise APIError(400, f"At most {limits.max_messages} messages are taken.", param="messages")
    turns = [Turn("system", system)] if (system := _system_text(body.system)) else []
    for i, message in enumerate(body.messages):
        turns.extend(_turns_of(message, i))
    offer = _tools(body, limits)
    messages, grammar, tools_json = prepared(turns, offer, "", model.template_takes_tools)
    sampling = (
        rp.sampling_of(body, grammar=grammar)
        if isinstance(body, MessagesRequest)
        else p.SamplingParams(grammar=grammar)
    )
    stop = rp.stop_of(body.stop_sequences, limits) if isinstance(body, MessagesRequest) else ()
    request = GenerationRequest(
        messages=messages, sampling=sampling, max_tokens=max_tokens, stop=stop,
        tools_json=tools_json,
    )  # fmt: skip
    return MessagesPlan(request=request, tools_offered=bool(offer.functions))


def _system_text(system: str | list[dict[str, Any]] | None) -> str:
    if system is None or isinstance(system, str):
        return system or ""
    return "\n".join(_text_block(block, f"system[{i}]") for i, block in enumerate(system))


def _turns_of(message: MessageIn, index: int) -> list[Turn]:
    if isinstance(message.content, str):
        return [Turn(message.role, message.content)]
    texts, calls, results = [], [], []
    for j, block in enumerate(message.content):
        where = f"messages[{index}].content[{j}]"
        kind = block.get("type")
        if kind == "text":
            texts.append(_text_block(block, where))
        elif kind == "tool_use" and message.role == "assistant":
            calls.append(openai_call(str(block.get("id", "")), str(block.get("name", "")),
                                     block.get("input") or {}))  # fmt: skip
        elif kind == "tool_result" and message.role == "user":
            results.append(Turn("tool", _result_text(block, where),
                                call_id=str(block.get("tool_use_id", ""))))  # fmt: skip
        elif kind in ("thinking", "redacted_thinking"):
            continue  # reasoning a model wrote before: not replayed to this one
        else:
            raise part_not_taken(
                where,
                f"a {kind!r} block in a {message.role} message",
                "text blocks, and tool_use (assistant) and tool_result (user) blocks",
            )
    # Tool results answer the calls of the assistant turn before, so they come first.
    if texts or calls or not results:
        results.append(Turn(message.role, "\n".join(texts), calls=tuple(calls)))
    return results


def _text_block(block: Any, where: str) -> str:
    if not isinstance(block, dict) or block.get("type") != "text":
        raise APIError(400, f"{where} must be a text block.", param=where)
    text = block.get("text")
    if not isinstance(text, str):
        raise APIError(400, f"{where}.text must be a string.", param=where)
    return text


def _result_text(block: dict[str, Any], where: str) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(_text_block(b, f"{where}.content[{k}]") for k, b in enumerate(content))
    else:
        raise APIError(400, f"{where}.content must be text or text blocks.", param=where)
    return f"Error: {text}" if block.get("is_error") else text


def _tools(body: CountTokensRequest, limits: Limits) -> ToolOffer:
    tools = body.tools or []
    choice = body.tool_choice
    if not tools or (choice and choice.type == "none"):
        return ToolOffer()
    for i, tool in enumerate(tools):
        if tool.type not in (None, "custom"):
            raise APIError(
                400,
                f"tools[{i}] is Anthropic's server tool {tool.type!r}; this server runs only "
                "tools the client defines (name, description, input_schema).",
                param=f"tools[{i}]",
            )
    functions = checked_functions(
        [{"name": t.name, "description": t.description, "parameters": t.input_schema}
         for t in tools],
        limits,
    )  # fmt: skip
    if choice is None or choice.type == "auto":
        return ToolOffer(functions)
    if choice.type == "tool" and not choice.name:
        raise APIError(400, "tool_choice of type 'tool' needs a name.", param="tool_choice")
    return ToolOffer(functions, forced=True, forced_name=choice.name)


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": "toolu_" + call["id"].removeprefix("call_"),
        "name": call["function"]["name"],
        "input": call_arguments(call),
    }


def _stop(plan: MessagesPlan, reply: Reply, calls) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence). The engine says that a stop string ended the reply but not
    which, so the sequence is named only when one was sent."""
    if calls:
        return "tool_use", None
    reason = STOP_REASONS.get(reply.stop_reason, "end_turn")
    stops = plan.request.stop
    return reason, (stops[0] if reason == "stop_sequence" and len(stops) == 1 else None)


def _message(job, **fields) -> dict[str, Any]:
    return {"id": job.reply_id("msg"), "type": "message", "role": "assistant",
            "model": job.model, **fields}  # fmt: skip


def _events(state: ServerState, job, plan: MessagesPlan):
    reply = Reply()
    limits = state.config.limits
    events = pieces(state.link, plan.request, limits.request_seconds, reply, limits.token_seconds)

    def error_event(error: APIError) -> str:
        return named_sse("error", {"error": anthropic_error(error.status, error.message)["error"]})

    return logged_stream(job, reply, events, _message_events(job, plan, reply, events), error_event)


async def _message_events(job, plan: MessagesPlan, reply: Reply, events):
    watch = ToolCallWatch(plan.tools_offered)
    blocks = _Blocks()
    start = named_sse(
        "message_start",
        {"message": _message(job, content=[], stop_reason=None, stop_sequence=None,
                             usage={"input_tokens": 0, "output_tokens": 0})},
    )  # fmt: skip
    async for piece in events:
        out = start + "".join(blocks.text(x.text) for x in watch.feed(piece))
        start = ""
        if out:
            yield out
    calls = watch.calls(reply.text)
    out = start + (blocks.text(watch.rest()) if not calls else "")
    for call in calls or ():
        out += blocks.tool_use(_tool_use(call))
    stop_reason, stop_sequence = _stop(plan, reply, calls)
    usage = {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens}
    yield out + blocks.close() + named_sse(
        "message_delta",
        {"delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence}, "usage": usage},
    ) + named_sse("message_stop", {})  # fmt: skip


class _Blocks:
    """The content blocks of a streamed message: each opened, filled and closed in turn; one
    ping after the first block opens."""

    def __init__(self):
        self.index = -1
        self.open_kind = ""
        self.pinged = False

    def text(self, text: str) -> str:
        if not text:
            return ""
        out = "" if self.open_kind == "text" else self._open({"type": "text", "text": ""})
        delta = {"type": "text_delta", "text": text}
        return out + named_sse("content_block_delta", {"index": self.index, "delta": delta})

    def tool_use(self, block: dict[str, Any]) -> str:
        out = self._open({**block, "input": {}})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        return out + named_sse("content_block_delta", {"index": self.index, "delta": delta})

    def close(self) -> str:
        out = "" if self.pinged else named_sse("ping", {})
        self.pinged = True
        if self.open_kind:
            out += named_sse("content_block_stop", {"index": self.index})
            self.open_kind = ""
        return out

    def _open(self, block: dict[str, Any]) -> str:
        out = self.close() if self.open_kind else ""
        self.index += 1
        self.open_kind = block["type"]
        out += named_sse("content_block_start", {"index": self.index, "content_block": block})
        if not self.pinged:
            self.pinged = True
            out += named_sse("ping", {})
        return out
