"""From an OpenAI chat request to an engine generation: messages, tools, response format."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from engine.runtime import protocol as p
from engine.server import request_params as rp
from engine.server import tool_calls as tc
from engine.server.config import Limits
from engine.server.engine_link import GenerationRequest
from engine.server.errors import APIError
from engine.server.openai_schema import ChatCompletionRequest, ChatMessageIn
from engine.server.structured_output import grammar_for_response_format


@dataclass(frozen=True)
class ChatPlan:
    requests: tuple[GenerationRequest, ...]  # one per choice (n)
    tools_offered: bool  # read tool calls from the reply
    forced_tool: bool  # the grammar makes the reply a call


def plan_chat(body: ChatCompletionRequest, model: p.ModelLoaded, limits: Limits) -> ChatPlan:
    if len(body.messages) > limits.max_messages:
        raise APIError(400, f"At most {limits.max_messages} messages are taken.", param="messages")
    n = rp.n_of(body.n, limits)
    max_tokens = rp.max_tokens_of(
        body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens,
        limits,
        "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens",
    )
    functions, forced_name, forced = _tools(body, limits)
    grammar = grammar_for_response_format(body.response_format)
    if forced:
        if grammar:
            raise APIError(
                400,
                "A forced tool call and response_format cannot go together.",
                param="tool_choice",
            )
        grammar = tc.forced_call_grammar(functions, forced_name)
    native = model.template_takes_tools
    messages = [_engine_message(m, i, native) for i, m in enumerate(body.messages)]
    if functions and not native:
        messages = _with_tools_text(messages, tc.tools_system_text(functions))
    tools_json = json.dumps([{"type": "function", "function": f} for f in functions]) if (
        functions and native) else ""  # fmt: skip
    requests = tuple(
        GenerationRequest(
            messages=tuple(messages),
            sampling=rp.sampling_of(body, grammar=grammar, seed_offset=i),
            max_tokens=max_tokens,
            stop=rp.stop_of(body.stop, limits),
            top_logprobs=rp.top_logprobs_of(body.logprobs, body.top_logprobs, limits),
            tools_json=tools_json,
            ignore_eos=body.ignore_eos,
        )
        for i in range(n)
    )
    return ChatPlan(requests=requests, tools_offered=bool(functions), forced_tool=forced)


def _tools(body: ChatCompletionRequest, limits: Limits):
    """(functions offered, the forced function's name, whether a call is forced)."""
    tools = body.tools or []
    if len(tools) > limits.max_tools:
        raise APIError(400, f"At most {limits.max_tools} tools are taken.", param="tools")
    choice = body.tool_choice
    if not tools or choice == "none":
        return [], None, False
    functions = tc.tool_functions(tools)
    if choice in (None, "auto"):
        return functions, None, False
    if choice == "required":
        return functions, None, True
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return functions, choice["function"].get("name"), True
    raise APIError(
        400,
        "tool_choice must be 'none', 'auto', 'required' or "
        "{'type': 'function', 'function': {'name': ...}}.",
        param="tool_choice",
    )


def _engine_message(m: ChatMessageIn, index: int, native_tools: bool) -> p.ChatMessage:
    content = _text_of(m, index)
    role = "system" if m.role == "developer" else m.role
    calls_json = ""
    if m.tool_calls:
        calls = [call.model_dump(exclude_none=True) for call in m.tool_calls]
        calls_json = json.dumps(calls)
        if not native_tools:  # the model sees its calls the way it was asked to write them
            content += "".join(
                "<tool_call>\n" + json.dumps(_plain_call(call)) + "\n</tool_call>" for call in calls
            )
    return p.ChatMessage(
        role=role,
        content=content,
        tool_calls_json=calls_json if native_tools else "",
        tool_call_id=m.tool_call_id or "",
        name=m.name or "",
    )


def _plain_call(call: dict) -> dict:
    function = call.get("function") or {}
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # not JSON: the model sees it as it was sent
            arguments = json.loads(arguments)
    return {"name": function.get("name", ""), "arguments": arguments}


def _text_of(m: ChatMessageIn, index: int) -> str:
    if m.content is None:
        return ""
    if isinstance(m.content, str):
        return m.content
    texts = []
    for part in m.content:
        if part.type != "text" or part.text is None:
            raise APIError(
                400,
                f"messages[{index}] has a {part.type!r} part; this server takes text only.",
                param=f"messages[{index}].content",
            )
        texts.append(part.text)
    return "".join(texts)


def _with_tools_text(messages: list[p.ChatMessage], text: str) -> list[p.ChatMessage]:
    if messages and messages[0].role == "system":
        first = messages[0]
        merged = p.ChatMessage(role="system", content=f"{first.content}\n\n{text}".strip())
        return [merged, *messages[1:]]
    return [p.ChatMessage(role="system", content=text), *messages]
