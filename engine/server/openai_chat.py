"""From an OpenAI chat request to an engine generation: messages, tools, response format."""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.runtime import protocol as p
from engine.server import request_params as rp
from engine.server import tool_calls as tc
from engine.server.chat_request import ToolOffer, Turn, prepared
from engine.server.config import Limits
from engine.server.engine_link import GenerationRequest
from engine.server.errors import APIError
from engine.server.images import Fetch, engine_images, image_of_part
from engine.server.openai_schema import ChatCompletionRequest, ChatMessageIn
from engine.server.structured_output import grammar_for_response_format


@dataclass(frozen=True)
class ChatPlan:
    requests: tuple[GenerationRequest, ...]  # one per choice (n)
    tools_offered: bool  # read tool calls from the reply
    forced_tool: bool  # the grammar makes the reply a call


def plan_chat(
    body: ChatCompletionRequest, model: p.ModelLoaded, limits: Limits, fetch: Fetch | None = None
) -> ChatPlan:
    """The generations a chat request asks for. `fetch`: how an http(s) image URL is fetched,
    when the server allows it (None: such a URL is refused)."""
    if len(body.messages) > limits.max_messages:
        raise APIError(400, f"At most {limits.max_messages} messages are taken.", param="messages")
    n = rp.n_of(body.n, limits)
    max_tokens = rp.max_tokens_of(
        body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens,
        limits,
        "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens",
    )
    offer = _tools(body, limits)
    grammar = grammar_for_response_format(body.response_format)
    contents = [_content_of(m, i, fetch) for i, m in enumerate(body.messages)]
    images = engine_images([shown for _, shown in contents], model)
    turns = [
        replace(_turn(m, text), images=shown)
        for m, (text, _), shown in zip(body.messages, contents, images, strict=True)
    ]
    messages, grammar, tools_json = prepared(turns, offer, grammar, model.template_takes_tools)
    requests = tuple(
        GenerationRequest(
            messages=messages,
            sampling=rp.sampling_of(body, grammar=grammar, seed_offset=i),
            max_tokens=max_tokens,
            stop=rp.stop_of(body.stop, limits),
            top_logprobs=rp.top_logprobs_of(body.logprobs, body.top_logprobs, limits),
            tools_json=tools_json,
            ignore_eos=body.ignore_eos,
        )
        for i in range(n)
    )
    return ChatPlan(
        requests=requests, tools_offered=bool(offer.functions), forced_tool=offer.forced
    )


def _tools(body: ChatCompletionRequest, limits: Limits) -> ToolOffer:
    tools = body.tools or []
    if len(tools) > limits.max_tools:
        raise APIError(400, f"At most {limits.max_tools} tools are taken.", param="tools")
    choice = body.tool_choice
    if not tools or choice == "none":
        return ToolOffer()
    functions = tc.tool_functions(tools)
    if choice in (None, "auto"):
        return ToolOffer(functions)
    if choice == "required":
        return ToolOffer(functions, forced=True)
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return ToolOffer(functions, forced=True, forced_name=choice["function"].get("name"))
    raise APIError(
        400,
        "tool_choice must be 'none', 'auto', 'required' or "
        "{'type': 'function', 'function': {'name': ...}}.",
        param="tool_choice",
    )


def _turn(m: ChatMessageIn, text: str) -> Turn:
    return Turn(
        role="system" if m.role == "developer" else m.role,
        content=text,
        calls=tuple(call.model_dump(exclude_none=True) for call in m.tool_calls or ()),
        call_id=m.tool_call_id or "",
        name=m.name or "",
    )


def _content_of(m: ChatMessageIn, index: int, fetch: Fetch | None) -> tuple[str, list[bytes]]:
    """A message's text and its images (`image_url` parts), in order."""
    if m.content is None:
        return "", []
    if isinstance(m.content, str):
        return m.content, []
    texts, images = [], []
    for j, part in enumerate(m.content):
        param = f"messages[{index}].content[{j}]"
        if part.type == "image_url":
            images.append(image_of_part(part.image_url, param, fetch))
        elif part.type == "text" and part.text is not None:
            texts.append(part.text)
        else:
            raise APIError(
                400,
                f"messages[{index}] has a {part.type!r} part; this server takes text and "
                "image_url parts.",
                param=f"messages[{index}].content",
            )
    return "".join(texts), images
