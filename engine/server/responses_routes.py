"""OpenAI's Responses API: POST /v1/responses (whole, or streamed as its semantic events) and
GET /v1/responses/{id}.

Input is a string or a list of items: messages (text parts), `function_call` items (the model's
earlier calls) and `function_call_output` items (their results). `instructions` becomes the
system message; it is not carried over to a response that continues this one, as OpenAI's is
not. `previous_response_id` continues a conversation this server answered while it runs
(engine/server/response_store.py), unless that response was asked with `store: false`.
Function tools are offered and read back as in the chat routes (engine/server/chat_request.py);
`text.format` takes JSON schemas as `response_format` does there.

The stream: response.created, response.in_progress; for a text reply output_item.added,
content_part.added, output_text.delta..., output_text.done, content_part.done,
output_item.done; for each call output_item.added, function_call_arguments.delta and .done,
output_item.done; then response.completed (or response.incomplete when max_output_tokens cut
the reply). Every event carries a sequence_number.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from engine.server import request_params as rp
from engine.server.chat_request import (
    ToolCallWatch,
    ToolOffer,
    Turn,
    checked_functions,
    openai_call,
    part_not_taken,
    prepared,
)
from engine.server.completion import Reply, pieces
from engine.server.config import Limits
from engine.server.engine_link import GenerationRequest
from engine.server.errors import APIError
from engine.server.responding import logged_stream, stream_response, whole_replies
from engine.server.responses_schema import ResponsesRequest
from engine.server.server_state import ServerState, state_of
from engine.server.streaming import named_sse
from engine.server.structured_output import grammar_for_response_format

router = APIRouter(prefix="/v1", tags=["OpenAI"])

_TEXT_PARTS = ("input_text", "output_text", "text")


@dataclass(frozen=True)
class ResponsesPlan:
    request: GenerationRequest
    turns: tuple[Turn, ...]  # the conversation so far, without the instructions
    tools_offered: bool
    echo: dict[str, Any]  # the request's settings, as the response object repeats them


@router.post("/responses")
async def create_response(body: ResponsesRequest, request: Request) -> Response:
    state = state_of(request)
    state, model, model_id = await state.serving(request, body.model)
    plan = plan_response(body, state, model.template_takes_tools)
    job = state.start_job(request, "/v1/responses", model_id, body.stream)
    if body.stream:
        return await stream_response(request, job, _events(state, job, plan))
    (reply,) = await whole_replies(request, state, job, [plan.request])
    items = _Items(job)
    calls = ToolCallWatch(plan.tools_offered).calls(reply.text)
    output = [items.call(c)[1] for c in calls] if calls else [items.message(reply.text)]
    return JSONResponse(_finished(state, job, plan, reply, calls, output))


@router.get("/responses/{response_id}")
async def get_response(response_id: str, request: Request) -> dict[str, Any]:
    stored = state_of(request).responses.get(response_id)
    if stored is None:
        raise APIError(404, _unknown(response_id), param="response_id")
    return stored.body


def plan_response(body: ResponsesRequest, state: ServerState, native_tools: bool):
    limits = state.config.limits
    turns = []
    if body.previous_response_id:
        stored = state.responses.get(body.previous_response_id)
        if stored is None:
            raise APIError(404, _unknown(body.previous_response_id), param="previous_response_id")
        turns = list(stored.turns)
    turns = input_turns(body.input, turns)
    if len(turns) > limits.max_messages:
        raise APIError(400, f"At most {limits.max_messages} messages are taken.", param="input")
    offer = _tools(body, limits)
    grammar = grammar_for_response_format(_response_format(body.text))
    system = [Turn("system", body.instructions)] if body.instructions else []
    messages, grammar, tools_json = prepared(system + turns, offer, grammar, native_tools)
    request = GenerationRequest(
        messages=messages,
        sampling=rp.sampling_of(body, grammar=grammar),
        max_tokens=rp.max_tokens_of(body.max_output_tokens, limits, "max_output_tokens"),
        stop=rp.stop_of(body.stop, limits),
        tools_json=tools_json,
    )
    echo = {
        "instructions": body.instructions,
        "max_output_tokens": body.max_output_tokens,
        "previous_response_id": body.previous_response_id,
        "temperature": body.temperature,
        "top_p": body.top_p,
        "tools": body.tools or [],
        "tool_choice": body.tool_choice or "auto",
        "text": body.text or {"format": {"type": "text"}},
        "metadata": body.metadata or {},
        "parallel_tool_calls": True,
        "store": body.store,
    }
    return ResponsesPlan(request, tuple(turns), bool(offer.functions), echo)


def input_turns(given: str | list[dict[str, Any]], turns: list[Turn]) -> list[Turn]:
    """`turns` followed by the request's input items."""
    if isinstance(given, str):
        return [*turns, Turn("user", given)]
    turns = list(turns)
    for i, item in enumerate(given):
        where = f"input[{i}]"
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise APIError(400, f"{where}.role must be user, assistant, system or developer.",
                               param=f"{where}.role")  # fmt: skip
            role = "system" if role == "developer" else role
            turns.append(Turn(role, _text(item.get("content"), where)))
        elif kind == "function_call":
            call = openai_call(str(item.get("call_id", "")), str(item.get("name", "")),
                               item.get("arguments") or "{}")  # fmt: skip
            if turns and turns[-1].role == "assistant":  # one turn: its text, then its calls
                turns[-1] = replace(turns[-1], calls=(*turns[-1].calls, call))
            else:
                turns.append(Turn("assistant", calls=(call,)))
        elif kind == "function_call_output":
            output = _text(item.get("output"), where)
            turns.append(Turn("tool", output, call_id=str(item.get("call_id", ""))))
        elif kind == "reasoning":
            continue  # reasoning a model wrote before: not replayed to this one
        else:
            raise part_not_taken(
                where, f"a {kind!r} item", "message, function_call and function_call_output items"
            )
    return turns


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise APIError(400, f"{where}.content must be text or a list of text parts.", param=where)
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in (*_TEXT_PARTS, "refusal"):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise APIError(400, f"{where}.content[{j}] is a {kind!r} part; this server takes "
                           "text only.", param=f"{where}.content[{j}]")  # fmt: skip
        text = part.get("refusal" if part["type"] == "refusal" else "text")
        if not isinstance(text, str):
            raise APIError(400, f"{where}.content[{j}] has no text.", param=where)
        texts.append(text)
    return "".join(texts)


def _tools(body: ResponsesRequest, limits: Limits) -> ToolOffer:
    tools = body.tools or []
    choice = body.tool_choice
    if not tools or choice == "none":
        return ToolOffer()
    for i, tool in enumerate(tools):
        if tool.get("type") != "function":
            raise APIError(400, f"tools[{i}] is a {tool.get('type')!r} tool; this server runs "
                           "function tools only.", param=f"tools[{i}]")  # fmt: skip
    functions = checked_functions(
        [{k: t[k] for k in ("name", "description", "parameters") if t.get(k) is not None}
         for t in tools],
        limits,
    )  # fmt: skip
    if choice in (None, "auto"):
        return ToolOffer(functions)
    if choice == "required":
        return ToolOffer(functions, forced=True)
    if isinstance(choice, dict) and choice.get("type") == "function" and choice.get("name"):
        return ToolOffer(functions, forced=True, forced_name=choice["name"])
    raise APIError(400, "tool_choice must be 'none', 'auto', 'required' or "
                   "{'type': 'function', 'name': ...}.", param="tool_choice")  # fmt: skip


def _response_format(text: dict[str, Any] | None) -> dict[str, Any] | None:
    """The Responses API's `text.format`, as the chat API's `response_format`."""
    form = (text or {}).get("format")
    if not isinstance(form, dict) or form.get("type") != "json_schema":
        return form
    return {"type": "json_schema", "json_schema": {"name": form.get("name", ""),
                                                   "schema": form.get("schema")}}  # fmt: skip


def _unknown(response_id: str) -> str:
    return (
        f"There is no response {response_id[:100]!r} here: this server keeps the last responses "
        "it gave while it runs. Send the whole conversation as input instead."
    )


class _Items:
    """Output items with their ids, made the same way whole or streamed."""

    def __init__(self, job):
        self.job = job
        self.message_id = job.reply_id("msg")

    def message(self, text: str, status: str = "completed") -> dict[str, Any]:
        content = [self.part(text)] if status == "completed" else []
        return {"type": "message", "id": self.message_id, "status": status,
                "role": "assistant", "content": content}  # fmt: skip

    @staticmethod
    def part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    @staticmethod
    def call(call: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the item as it starts, the item done)."""
        function = call["function"]
        done = {"type": "function_call", "id": "fc_" + call["id"].removeprefix("call_"),
                "call_id": call["id"], "name": function["name"],
                "arguments": function["arguments"], "status": "completed"}  # fmt: skip
        return {**done, "arguments": "", "status": "in_progress"}, done


def _response(job, plan: ResponsesPlan, status: str, output: list, **fields) -> dict[str, Any]:
    return {"id": job.reply_id("resp"), "object": "response", "created_at": job.created,
            "status": status, "error": None, "incomplete_details": None, "model": job.model,
            "output": output, "usage": None, **plan.echo, **fields}  # fmt: skip


def _finished(state: ServerState, job, plan: ResponsesPlan, reply: Reply, calls, output):
    """The response object at its end; kept for `previous_response_id` unless `store` is
    false."""
    cut = not calls and reply.finish_reason == "length"
    usage = {
        "input_tokens": reply.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": reply.stats.n_prompt_tokens_reused if reply.stats else 0
        },
        "output_tokens": reply.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }
    body = _response(
        job, plan, "incomplete" if cut else "completed", output, usage=usage,
        incomplete_details={"reason": "max_output_tokens"} if cut else None,
    )  # fmt: skip
    if plan.echo["store"]:
        said = Turn("assistant", calls=tuple(calls)) if calls else Turn("assistant", reply.text)
        state.responses.put(body["id"], (*plan.turns, said), body)
    return body


def _events(state: ServerState, job, plan: ResponsesPlan):
    reply = Reply()
    limits = state.config.limits
    events = pieces(state.link, plan.request, limits.request_seconds, reply, limits.token_seconds)
    sequence = iter(range(1 << 62))

    def event(kind: str, **data) -> str:
        return named_sse(kind, {"sequence_number": next(sequence), **data})

    def error_event(error: APIError) -> str:
        return event("error", code=str(error.status), message=error.message, param=error.param)

    chunks = _response_events(state, job, plan, reply, events, event)
    return logged_stream(job, reply, events, chunks, error_event)


async def _response_events(state: ServerState, job, plan: ResponsesPlan, reply, events, event):
    watch = ToolCallWatch(plan.tools_offered)
    items = _Items(job)
    text_open = False
    item_id = items.message_id

    def text(delta: str) -> str:
        nonlocal text_open
        out = ""
        if not text_open:
            text_open = True
            out = event("response.output_item.added", output_index=0,
                        item=items.message("", "in_progress")) + event(
                "response.content_part.added", item_id=item_id, output_index=0,
                content_index=0, part=items.part(""))  # fmt: skip
        if delta:
            out += event("response.output_text.delta", item_id=item_id, output_index=0,
                         content_index=0, delta=delta, logprobs=[])  # fmt: skip
        return out

    started = _response(job, plan, "in_progress", [])
    start = event("response.created", response=started) + event(
        "response.in_progress", response=started
    )
    async for piece in events:
        out = start + "".join(text(x.text) for x in watch.feed(piece))
        start = ""
        if out:
            yield out
    out = start  # still unsent when the reply had no text at all
    calls = watch.calls(reply.text)
    output = []
    if not calls and (rest := watch.rest()):
        out += text(rest)
    if not calls:
        if not text_open:
            out += text("")
        done = items.message(reply.text)
        out += (
            event("response.output_text.done", item_id=item_id, output_index=0,
                  content_index=0, text=reply.text, logprobs=[])
            + event("response.content_part.done", item_id=item_id, output_index=0,
                    content_index=0, part=done["content"][0])
            + event("response.output_item.done", output_index=0, item=done)
        )  # fmt: skip
        output.append(done)
    for index, call in enumerate(calls or ()):
        added, done = items.call(call)
        out += (
            event("response.output_item.added", output_index=index, item=added)
            + event("response.function_call_arguments.delta", item_id=done["id"],
                    output_index=index, delta=done["arguments"])
            + event("response.function_call_arguments.done", item_id=done["id"],
                    output_index=index, name=done["name"], arguments=done["arguments"])
            + event("response.output_item.done", output_index=index, item=done)
        )  # fmt: skip
        output.append(done)
    body = _finished(state, job, plan, reply, calls, output)
    final = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    yield out + event(final, response=body)
