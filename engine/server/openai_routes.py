"""OpenAI's API: /v1/models, /v1/chat/completions, /v1/completions (streamed or whole), and
/v1/embeddings."""

from __future__ import annotations

import asyncio
import base64
import math
import os
import struct
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from engine.runtime import protocol as p
from engine.server import request_params as rp
from engine.server.chat_request import ToolCallWatch
from engine.server.completion import Reply, pieces
from engine.server.errors import APIError
from engine.server.images import fetch_remote_image
from engine.server.openai_chat import ChatPlan, plan_chat
from engine.server.openai_schema import (
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
)
from engine.server.responding import pooled_outputs, stream_response, whole_replies
from engine.server.server_state import ServerState, state_of
from engine.server.streaming import sse
from engine.server.tool_calls import parse_tool_calls

router = APIRouter(prefix="/v1", tags=["OpenAI"])


@router.get("/models")
async def list_models(request: Request) -> dict[str, Any]:
    """The one model served; serving the Library, every model in it (`meta.loaded` says which
    are loaded now: a request naming another loads it)."""
    state = state_of(request)
    job = state.start_job(request, "/v1/models", "", False)
    if state.models is not None:
        loaded = {e.path: e.loaded for e in state.models.loaded_models()}
        cards = [_library_card(path, loaded.get(path)) for path, _ in state.models.available()]
        job.finish(200, [])
        return {"object": "list", "data": cards}
    try:
        model = state.link.require_model()
    except APIError as error:
        job.finish(error.status, [], note=error.message)
        raise
    job.finish(200, [])
    return {"object": "list", "data": [_model_card(model)]}


@router.get("/models/{model_id:path}")
async def get_model(model_id: str, request: Request) -> dict[str, Any]:
    state = state_of(request)
    if state.models is not None:
        path = state.models.path_for(model_id)
        entry = state.models.entry_for(path)
        return _library_card(path, entry.loaded if entry else None)
    model = state.link.require_model()
    rp.check_model_name(model_id, model)
    return _model_card(model)


def _library_card(path, loaded: p.ModelLoaded | None) -> dict[str, Any]:
    """A Library model's card: the loaded model's own when it is loaded."""
    if loaded is not None:
        card = _model_card(loaded)
        card["meta"]["loaded"] = True
        return card
    try:
        created = int(os.stat(path).st_mtime)
    except OSError:
        created = 0
    return {"id": rp.served_model_id(str(path)), "object": "model", "created": created,
            "owned_by": "hearth", "meta": {"loaded": False}}  # fmt: skip


def _model_card(model: p.ModelLoaded) -> dict[str, Any]:
    try:
        created = int(os.stat(model.path).st_mtime)
    except OSError:
        created = 0
    return {
        "id": rp.served_model_id(model.path),
        "object": "model",
        "created": created,
        "owned_by": "hearth",
        "meta": {
            "n_ctx": model.n_ctx,
            "n_params": model.n_params,
            "n_parallel": model.n_parallel,
            # the format chats are written in, and why the model's own template is not used
            # (it failed, or tried something unsafe), as the window and the console say it
            "chat_template": model.chat_template,
            "chat_template_problem": model.chat_template_problem,
        },
    }


@router.post("/chat/completions")
async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
    state = state_of(request)
    state, model, model_id = await state.serving(request, body.model)
    if state.config.fetch_remote_images and _has_remote_image(body):
        # a fetch takes seconds: off the event loop, so other requests go on meanwhile
        plan = await asyncio.to_thread(plan_chat, body, model, state.config.limits,
                                       fetch_remote_image)  # fmt: skip
    else:
        plan = plan_chat(body, model, state.config.limits)
    job = state.start_job(request, "/v1/chat/completions", model_id, body.stream)
    if body.stream:
        if len(plan.requests) > 1:
            raise APIError(400, "n above 1 is not streamed; ask with stream=false.", param="n")
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return await stream_response(request, job, _chat_chunks(state, job, plan, include_usage))
    replies = await whole_replies(request, state, job, plan.requests)
    choices = [_chat_choice(i, reply, plan) for i, reply in enumerate(replies)]
    return JSONResponse(
        {
            "id": job.reply_id("chatcmpl"),
            "object": "chat.completion",
            "created": job.created,
            "model": model_id,
            "choices": choices,
            "usage": _usage(replies),
        }
    )


@router.post("/completions")
async def completions(body: CompletionRequest, request: Request) -> Response:
    state = state_of(request)
    limits = state.config.limits
    state, _, model_id = await state.serving(request, body.model)
    prompts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
    if len(prompts) != 1:
        raise APIError(400, "Send one prompt per request.", param="prompt")
    if body.suffix:
        raise APIError(400, "suffix (fill-in-the-middle) is not supported.", param="suffix")
    if body.echo and body.logprobs is not None:
        raise APIError(
            400,
            "echo with logprobs is not supported: the prompt's log probabilities are not "
            "computed. Ask for one of the two.",
            param="echo",
        )
    from engine.server.structured_output import grammar_for_response_format

    grammar = grammar_for_response_format(body.response_format)
    n = rp.n_of(body.n, limits)
    top = -1 if body.logprobs is None else rp.top_logprobs_of(True, body.logprobs, limits)
    requests = tuple(
        _completion_request(body, prompts[0], grammar, i, top, limits) for i in range(n)
    )
    job = state.start_job(request, "/v1/completions", model_id, body.stream)
    echo = prompts[0] if body.echo else ""
    if body.stream:
        if n > 1:
            raise APIError(400, "n above 1 is not streamed; ask with stream=false.", param="n")
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        chunks = _completion_chunks(state, job, requests[0], echo, include_usage)
        return await stream_response(request, job, chunks)
    replies = await whole_replies(request, state, job, requests)
    return JSONResponse(
        {
            "id": job.reply_id("cmpl"),
            "object": "text_completion",
            "created": job.created,
            "model": model_id,
            "choices": [
                {
                    "index": i,
                    "text": echo + reply.text,
                    "logprobs": _completion_logprobs(reply.logprobs) if top >= 0 else None,
                    "finish_reason": reply.finish_reason,
                }
                for i, reply in enumerate(replies)
            ],
            "usage": _usage(replies),
        }
    )


@router.post("/embeddings")
async def embeddings(body: EmbeddingRequest, request: Request) -> Response:
    """Mean-pooled (or the model's own pooling) embeddings, unit length as OpenAI's are."""
    state = state_of(request)
    state, _, model_id = await state.serving(request, body.model)
    given = [body.input] if isinstance(body.input, str) else list(body.input)
    inputs = rp.pooled_inputs_of(given, state.config.limits, "input")
    job = state.start_job(request, "/v1/embeddings", model_id, False)
    done = await pooled_outputs(state, request, job, inputs)
    data = []
    for i, vector in enumerate(done.vectors):
        unit = _unit(vector)
        encoded = (
            base64.b64encode(struct.pack(f"<{len(unit)}f", *unit)).decode()
            if body.encoding_format == "base64"
            else unit
        )
        data.append({"object": "embedding", "index": i, "embedding": encoded})
    return JSONResponse(
        {
            "object": "list",
            "data": data,
            "model": model_id,
            "usage": {"prompt_tokens": done.n_tokens, "total_tokens": done.n_tokens},
        }
    )


def _unit(vector) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


# -- the parts ----------------------------------------------------------------------------------


def _completion_request(body, prompt, grammar, i, top, limits):
    from engine.server.engine_link import GenerationRequest

    return GenerationRequest(
        prompt=prompt,
        sampling=rp.sampling_of(body, grammar=grammar, seed_offset=i),
        max_tokens=rp.max_tokens_of(body.max_tokens, limits),
        stop=rp.stop_of(body.stop, limits),
        top_logprobs=top,
        ignore_eos=body.ignore_eos,
    )


async def _chat_chunks(state: ServerState, job, plan: ChatPlan, include_usage: bool):
    reply = Reply()
    cid = job.reply_id("chatcmpl")

    def chunk(delta: dict, finish: str | None = None, logprobs=None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        return sse({"id": cid, "object": "chat.completion.chunk", "created": job.created,
                    "model": job.model, "choices": [choice]})  # fmt: skip

    limits = state.config.limits
    events = pieces(state.link, plan.requests[0], limits.request_seconds, reply,
                    limits.token_seconds)  # fmt: skip
    watch = ToolCallWatch(plan.tools_offered)
    status, note = 200, ""
    role = {"role": "assistant"}  # said in the first chunk, as OpenAI does
    try:
        async for piece in events:
            ready = watch.feed(piece)
            if not ready and role:  # held back: the role goes out now
                yield chunk({**role, "content": ""})
                role = {}
            for x in ready:
                yield chunk({**role, "content": x.text}, logprobs=_chat_logprobs(x.logprobs))
                role = {}
        finish = reply.finish_reason
        calls = watch.calls(reply.text)
        if calls:
            deltas = [{"index": i, **call} for i, call in enumerate(calls)]
            yield chunk({"tool_calls": deltas})
            finish = "tool_calls"
        elif rest := watch.rest():
            yield chunk({"content": rest})
        if role:  # nothing was said at all
            yield chunk({**role, "content": ""})
        yield chunk({}, finish=finish)
        if include_usage:
            yield sse({"id": cid, "object": "chat.completion.chunk", "created": job.created,
                       "model": job.model, "choices": [], "usage": _usage([reply])})  # fmt: skip
        yield "data: [DONE]\n\n"
    except APIError as error:
        status, note = error.status, error.message
        if reply.n_tokens == 0 and not watch.held:
            raise  # nothing sent yet: a real status code (see _stream)
        yield sse({"error": {"message": error.message, "type": "server_error", "code": None}})
    except BaseException:
        status, note = 499, "client disconnected"
        raise
    finally:
        await events.aclose()
        job.finish(status, [reply], note=note or reply.stop_reason)


async def _completion_chunks(state: ServerState, job, request, echo: str, include_usage: bool):
    reply = Reply()
    cid = job.reply_id("cmpl")

    def chunk(text: str, finish: str | None = None, logprobs=None) -> str:
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}
        return sse({"id": cid, "object": "text_completion", "created": job.created,
                    "model": job.model, "choices": [choice]})  # fmt: skip

    limits = state.config.limits
    events = pieces(state.link, request, limits.request_seconds, reply, limits.token_seconds)
    status, note = 200, ""
    want_logprobs = request.top_logprobs >= 0
    try:
        first = True
        async for piece in events:
            text = (echo + piece.text) if first else piece.text
            first = False
            logprobs = _completion_logprobs(list(piece.logprobs)) if want_logprobs else None
            yield chunk(text, logprobs=logprobs)
        yield chunk("", finish=reply.finish_reason)
        if include_usage:
            yield sse({"id": cid, "object": "text_completion", "created": job.created,
                       "model": job.model, "choices": [], "usage": _usage([reply])})  # fmt: skip
        yield "data: [DONE]\n\n"
    except APIError as error:
        status, note = error.status, error.message
        if reply.n_tokens == 0:
            raise
        yield sse({"error": {"message": error.message, "type": "server_error", "code": None}})
    except BaseException:
        status, note = 499, "client disconnected"
        raise
    finally:
        await events.aclose()
        job.finish(status, [reply], note=note or reply.stop_reason)


def _chat_choice(index: int, reply: Reply, plan: ChatPlan) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    finish = reply.finish_reason
    calls = parse_tool_calls(reply.text) if plan.tools_offered else None
    if calls:
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    wanted = plan.requests[index].top_logprobs >= 0
    return {
        "index": index,
        "message": message,
        "logprobs": _chat_logprobs(reply.logprobs) if wanted else None,
        "finish_reason": finish,
    }


def _chat_logprobs(entries) -> dict[str, Any] | None:
    if not entries:
        return None
    return {
        "content": [
            {
                "token": e.token,
                "logprob": e.logprob,
                "bytes": list(e.token.encode()),
                "top_logprobs": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in e.top
                ],
            }
            for e in entries
        ]
    }


def _completion_logprobs(entries) -> dict[str, Any]:
    offsets, at = [], 0
    for e in entries:
        offsets.append(at)
        at += len(e.token)
    return {
        "tokens": [e.token for e in entries],
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": [dict(e.top) for e in entries],
        "text_offset": offsets,
    }


def _usage(replies: list[Reply]) -> dict:
    prompt = replies[0].prompt_tokens if replies else 0
    completion = sum(r.completion_tokens for r in replies)
    usage: dict = {"prompt_tokens": prompt, "completion_tokens": completion,
                   "total_tokens": prompt + completion}  # fmt: skip
    # OpenAI's field for prompt tokens served from the cache (a chat's earlier turn, or a
    # prefix shared with other requests): prompt_tokens minus it is the prefill work done
    reused = replies[0].stats.n_prompt_tokens_reused if replies and replies[0].stats else 0
    if reused:
        usage["prompt_tokens_details"] = {"cached_tokens": reused}
    return usage


def _has_remote_image(body: ChatCompletionRequest) -> bool:
    return any(
        part.type == "image_url"
        and not str(
            part.image_url.get("url", "") if isinstance(part.image_url, dict) else part.image_url
        ).startswith("data:")
        for m in body.messages
        if isinstance(m.content, list)
        for part in m.content
    )
