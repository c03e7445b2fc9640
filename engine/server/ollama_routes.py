"""Ollama's API, for the tools that speak it: /api/chat and /api/generate (NDJSON streams by
default, as Ollama's), /api/tags, /api/show, /api/ps, /api/version.

Model names are compared with the served models' names only (request_params.model_names);
nothing a request says is ever used as a path. Serving the Library, `keep_alive` sets how long
the model stays loaded after the request (model_pool.py), and a request with no prompt loads
the model, or with keep_alive 0 unloads it, as Ollama's do.
"""

from __future__ import annotations

import math
import os
import time
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import JSONResponse, Response

from engine.runtime import protocol as p
from engine.server import request_params as rp
from engine.server.completion import Reply, pieces
from engine.server.engine_link import GenerationRequest
from engine.server.errors import APIError
from engine.server.images import engine_images, image_of_base64
from engine.server.keep_alive import keep_alive_seconds
from engine.server.responding import stream_response, whole_replies
from engine.server.server_state import ServerState, state_of
from engine.server.streaming import ndjson
from engine.server.structured_output import schema_grammar

router = APIRouter(prefix="/api", tags=["Ollama"])
HEARTH_VERSION = "0.1.0"


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class OllamaOptions(_Body):
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_k: int | None = Field(None, ge=0, le=1000)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    repeat_penalty: float | None = Field(None, gt=0.0, le=10.0)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    seed: int | None = None
    num_predict: int | None = None
    stop: list[str] | None = None


class OllamaMessage(_Body):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    images: list[str] | None = None


class _Generating(_Body):
    model: str = Field("", max_length=256)
    stream: bool = True
    format: str | dict[str, Any] | None = None
    options: OllamaOptions = Field(default_factory=OllamaOptions)
    keep_alive: str | float | None = None  # "5m", 300, 0 (unload after), -1 (keep loaded)


class ChatBody(_Generating):
    messages: list[OllamaMessage] = Field(default_factory=list)


class GenerateBody(_Generating):
    prompt: str = ""
    system: str | None = None
    raw: bool = False
    images: list[str] | None = None


class ShowBody(_Body):
    model: str = Field("", max_length=256)
    name: str = Field("", max_length=256)  # older clients


@router.get("/version")
async def version() -> dict[str, str]:
    return {"version": HEARTH_VERSION}


@router.get("/tags")
async def tags(request: Request) -> dict[str, Any]:
    """The models this server can answer with: the one loaded, or the whole Library."""
    state = state_of(request)
    state.start_job(request, "/api/tags", "", False).finish(200, [])
    if state.models is not None:
        loaded = {e.path: e.loaded for e in state.models.loaded_models()}
        return {"models": [_model_entry(loaded[path]) if path in loaded else _file_entry(path)
                           for path, _ in state.models.available()]}  # fmt: skip
    model = state.link.model
    return {"models": [_model_entry(model)] if model else []}


@router.get("/ps")
async def running(request: Request) -> dict[str, Any]:
    """The models loaded now, with when each is unloaded for idleness."""
    state = state_of(request)
    if state.models is not None:
        entries = []
        for loaded in state.models.loaded_models():
            entry = _model_entry(loaded.loaded)
            busy = loaded.leases > 0 or math.isinf(loaded.keep_s)
            entry.update(expires_at=_FOREVER if busy else _iso(loaded.expires_at_unix),
                         size_vram=_bytes_on_gpus(loaded.loaded))  # fmt: skip
            entries.append(entry)
        return {"models": entries}
    model = state.link.model
    if model is None:
        return {"models": []}
    entry = _model_entry(model)
    entry.update(expires_at=_FOREVER, size_vram=_bytes_on_gpus(model))
    return {"models": [entry]}


@router.post("/show")
async def show(body: ShowBody, request: Request) -> dict[str, Any]:
    _, model, _ = await state_of(request).serving(request, body.model or body.name)
    entry = _model_entry(model)
    return {
        "modelfile": "",
        "parameters": "",
        "template": "",
        "details": entry["details"],
        "model_info": {
            "general.architecture": entry["details"]["family"],
            "general.parameter_count": model.n_params,
            "context_length": model.n_ctx,
        },
        "capabilities": ["completion", "tools", *(["vision"] if model.vision else [])],
    }


async def _unloaded(state: ServerState, body: _Generating, empty: bool) -> dict | None:
    """Ollama's way to unload a model: a request with no prompt and keep_alive 0."""
    if state.models is None or not empty or body.keep_alive in (None, ""):
        return None
    if keep_alive_seconds(body.keep_alive, state.models.settings.keep_alive_s) > 0:
        return None
    await state.models.unload(body.model)
    return {"model": body.model, "created_at": _now(), "done": True, "done_reason": "unload"}


@router.post("/chat")
async def chat(body: ChatBody, request: Request) -> Response:
    state = state_of(request)
    unloaded = await _unloaded(state, body, not body.messages)
    if unloaded is not None:
        return JSONResponse({**unloaded, "message": {"role": "assistant", "content": ""}})
    state, model, name = await state.serving(request, body.model, body.keep_alive)
    limit = state.config.limits.max_messages
    if len(body.messages) > limit:
        raise APIError(400, f"At most {limit} messages are taken (this request has "
                       f"{len(body.messages)}); send a shorter conversation.")  # fmt: skip
    if not body.messages:  # Ollama's way to load a model: it is loaded
        return JSONResponse(_final(name, {"message": {"role": "assistant", "content": ""}},
                                   Reply(stop_reason="load")))  # fmt: skip
    images = engine_images(
        [[image_of_base64(b, f"messages[{i}].images[{j}]") for j, b in enumerate(m.images or ())]
         for i, m in enumerate(body.messages)],
        model,
    )  # fmt: skip
    generation = GenerationRequest(
        messages=tuple(
            p.ChatMessage(role=m.role, content=m.content, images=shown)
            for m, shown in zip(body.messages, images, strict=True)
        ),
        **_settings(body, state),
    )
    return await _answer(request, state, "/api/chat", name, body.stream, generation, "chat")


@router.post("/generate")
async def generate(body: GenerateBody, request: Request) -> Response:
    state = state_of(request)
    unloaded = await _unloaded(state, body, not body.prompt)
    if unloaded is not None:
        return JSONResponse({**unloaded, "response": ""})
    state, model, name = await state.serving(request, body.model, body.keep_alive)
    [images] = engine_images(
        [[image_of_base64(b, f"images[{j}]") for j, b in enumerate(body.images or ())]], model
    )
    if images and body.raw:
        raise APIError(400, "A raw prompt cannot carry images; send them without raw.")
    if not body.prompt:
        return JSONResponse(_final(name, {"response": ""}, Reply(stop_reason="load")))
    if body.raw:
        generation = GenerationRequest(prompt=body.prompt, **_settings(body, state))
    else:
        messages = [p.ChatMessage(role="user", content=body.prompt, images=images)]
        if body.system:
            messages.insert(0, p.ChatMessage(role="system", content=body.system))
        generation = GenerationRequest(messages=tuple(messages), **_settings(body, state))
    return await _answer(request, state, "/api/generate", name, body.stream, generation, "generate")


# -- the parts ----------------------------------------------------------------------------------


def _settings(body: _Generating, state: ServerState) -> dict[str, Any]:
    limits = state.config.limits
    options = body.options
    predict = options.num_predict
    max_tokens = rp.max_tokens_of(None if predict in (None, -1, -2) else predict, limits,
                                  "options.num_predict")  # fmt: skip
    grammar = ""
    if body.format == "json":
        grammar = schema_grammar({"type": "object"}, param="format")
    elif isinstance(body.format, dict):
        grammar = schema_grammar(body.format, param="format")
    elif body.format not in (None, ""):
        raise APIError(400, "format must be 'json' or a JSON schema object.")
    return {
        "sampling": rp.sampling_of(options, grammar=grammar),
        "max_tokens": max_tokens,
        "stop": rp.stop_of(options.stop, limits),
    }


async def _answer(request, state, route, name, stream, generation, kind) -> Response:
    job = state.start_job(request, route, name, stream)
    if stream:
        return await stream_response(request, job, _lines(state, job, generation, kind),
                             media_type="application/x-ndjson")  # fmt: skip
    replies = await whole_replies(request, state, job, (generation,))
    reply = replies[0]
    content = {"message": {"role": "assistant", "content": reply.text}} if kind == "chat" else {
        "response": reply.text}  # fmt: skip
    return JSONResponse(_final(name, content, reply))


async def _lines(state: ServerState, job, generation: GenerationRequest, kind: str):
    reply = Reply()
    limits = state.config.limits
    events = pieces(state.link, generation, limits.request_seconds, reply, limits.token_seconds)
    status, note = 200, ""
    try:
        async for piece in events:
            yield ndjson({"model": job.model, "created_at": _now(), **_content(kind, piece.text),
                          "done": False})  # fmt: skip
        yield ndjson(_final(job.model, _content(kind, ""), reply))
    except APIError as error:
        status, note = error.status, error.message
        if reply.n_tokens == 0:
            raise
        yield ndjson({"error": error.message})
    except BaseException:
        status, note = 499, "client disconnected"
        raise
    finally:
        await events.aclose()
        job.finish(status, [reply], note=note or reply.stop_reason)


def _content(kind: str, text: str) -> dict[str, Any]:
    if kind == "chat":
        return {"message": {"role": "assistant", "content": text}}
    return {"response": text}


def _final(name: str, content: dict[str, Any], reply: Reply) -> dict[str, Any]:
    stats = reply.stats
    ns = 1_000_000_000
    done_reason = reply.stop_reason if reply.stop_reason == "load" else reply.finish_reason
    final = {"model": name, "created_at": _now(), **content, "done": True,
             "done_reason": done_reason}  # fmt: skip
    if stats is not None:
        final.update(
            total_duration=int((stats.time_to_first_token + stats.decode_seconds) * ns),
            load_duration=0,
            prompt_eval_count=stats.n_prompt_tokens,
            prompt_eval_duration=int(stats.prefill_seconds * ns),
            eval_count=stats.n_generated,
            eval_duration=int(stats.decode_seconds * ns),
        )
    return final


def _model_entry(model: p.ModelLoaded) -> dict[str, Any]:
    served = rp.served_model_id(model.path)
    family = model.description.split(" ")[0] if model.description else "unknown"
    quant = model.description.split(" ")[-1] if model.description else ""
    return {
        "name": f"{served}:latest",
        "model": f"{served}:latest",
        "modified_at": _now(),
        "size": model.size_bytes,
        "digest": "",
        "details": {
            "format": "gguf",
            "family": family,
            "families": [family],
            "parameter_size": _parameter_size(model.n_params),
            "quantization_level": quant,
        },
    }


def _file_entry(path) -> dict[str, Any]:
    """A Library model that is not loaded: what its file says, without reading it."""
    served = rp.served_model_id(str(path))
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    quant = served.rsplit("-", 1)[-1].rsplit(".", 1)[-1] if "-" in served or "." in served else ""
    return {
        "name": f"{served}:latest",
        "model": f"{served}:latest",
        "modified_at": _now(),
        "size": size,
        "digest": "",
        "details": {"format": "gguf", "family": "", "families": [], "parameter_size": "",
                    "quantization_level": quant},
    }  # fmt: skip


def _parameter_size(n: int) -> str:
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def _bytes_on_gpus(model: p.ModelLoaded) -> int:
    return sum(a.bytes for a in model.allocations if not a.device.upper().startswith("CPU"))


def _now() -> str:
    return _iso(time.time())


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat().replace("+00:00", "Z")


_FOREVER = "9999-12-31T23:59:59Z"  # as Ollama says "kept loaded" (keep_alive -1) or in use
