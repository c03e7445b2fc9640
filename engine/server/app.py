"""The API server's FastAPI application: routes, the request guard, error shapes, CORS.

    state = ServerState(link, config.check())
    app = create_app(state)      # then uvicorn serves it (engine/server/runner.py)

The OpenAPI page is at /docs (FastAPI's), the schema at /openapi.json.
"""

from __future__ import annotations

import json

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse, PlainTextResponse, Response

from engine.chat.prompt import MODEL_TEMPLATE
from engine.server import (
    anthropic_routes,
    ollama_routes,
    openai_routes,
    rerank_routes,
    responses_routes,
)
from engine.server.errors import APIError, error_body, error_response
from engine.server.guard import RequestGuard
from engine.server.server_state import LEASES, ModelLeases, ServerState, state_of
from engine.server.streaming import ClientGone
from engine.untrusted_text import printable_line


def create_app(state: ServerState) -> FastAPI:
    app = FastAPI(
        title="Hearth local API",
        version=ollama_routes.HEARTH_VERSION,
        description="OpenAI- and Ollama-compatible API over the model loaded in Hearth.",
    )
    app.state.hearth = state
    app.include_router(openai_routes.router)
    app.include_router(ollama_routes.router)
    app.include_router(anthropic_routes.router)
    app.include_router(responses_routes.router)
    app.include_router(rerank_routes.router)

    @app.get("/", include_in_schema=False)
    async def root() -> Response:
        return PlainTextResponse("Hearth is running")  # what Ollama's clients look for

    @app.get("/health", tags=["Hearth"])
    async def health(request: Request) -> Response:
        """The engine's state as it is: 200 when requests can be answered, 503 while the
        engine is down, being restarted or not answering (with what to expect)."""
        state = state_of(request)
        if state.models is not None:
            return JSONResponse(await pool_health(state))
        link = state.link
        status = None if link.model is None else await link.status(timeout=2.0)
        state = engine_state_word(link, status)
        body = {
            "model": link.model.path.rsplit("/", 1)[-1] if link.model else None,
            "state": state,
            "active_sequences": status.n_active_sequences if status else 0,
            "waiting": status.n_waiting if status else 0,
            "requests_in_flight": link.in_flight,
            "n_parallel": link.n_parallel,
        }
        healthy = state in ("idle", "generating", "busy", "loading")
        return JSONResponse(body, status_code=200 if healthy else 503)

    @app.exception_handler(APIError)
    async def api_error(request: Request, exc: APIError) -> Response:
        return error_response(request.url.path, exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        return JSONResponse(
            error_body(request.url.path, 400, _validation_message(exc), param=_first_field(exc)),
            status_code=400,
        )

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        message = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if exc.status_code == 404:
            message = f"There is no {request.method} {request.url.path[:100]} here; see /docs."
        elif exc.status_code == 405:
            message = f"{request.url.path[:100]} does not take {request.method}; see /docs."
        # a client asking for a route that is not here is worth seeing in the log too
        state.start_job(request, request.url.path[:100], "", False).finish(
            exc.status_code, [], note=message
        )
        return JSONResponse(error_body(request.url.path, exc.status_code, message),
                            status_code=exc.status_code, headers=exc.headers)  # fmt: skip

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, exc: ClientGone) -> Response:
        return Response(status_code=499)  # nobody is left to read it

    config = state.config
    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(OllamaBodiesAreJSON)
    app.add_middleware(TemplateNotice, link=state.link)
    app.add_middleware(ModelLeases, state=state)  # outside the notice: it reads the leases
    app.add_middleware(RequestGuard, config=config)  # outermost: before anything else runs
    return app


TEMPLATE_HEADER = b"x-hearth-chat-template"


class TemplateNotice:
    """When chats are not written in the model's own template (it failed, or tried something
    unsafe, and a built-in format stands in), every answer to a POST says so in the
    X-Hearth-Chat-Template header, as `hearth chat` and the console say it: the replies of a
    model prompted in another format than its own may be worse, and the file may be hostile."""

    def __init__(self, app, link):
        self.app = app
        self.link = link

    async def __call__(self, scope, receive, send):
        # Read per request (the template may change with a reload): the model the request
        # was answered by, serving the Library. A link without one (a test's stand-in) has
        # nothing to say.
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return

        def note_now() -> str:
            leases = scope.get(LEASES) or ()
            link = leases[-1].link if leases else self.link
            return getattr(link, "template_note", "") if link is not None else ""

        async def send_with_notice(message):
            note = note_now() if message["type"] == "http.response.start" else ""
            if note not in ("", MODEL_TEMPLATE):
                value = printable_line(note).encode("ascii", "backslashreplace")[:500]
                headers = [*message.get("headers", ()), (TEMPLATE_HEADER, value)]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_notice)


class OllamaBodiesAreJSON:
    """Ollama takes its bodies as JSON whatever the Content-Type says (its own documentation
    uses `curl -d`, which says form data): /api requests are read as JSON here too."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("path", "").startswith("/api/"):
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-type"]
            scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        await self.app(scope, receive, send)


async def pool_health(state: ServerState) -> dict:
    """Serving the Library: the models loaded now, each with its engine's state."""
    models = []
    for entry in state.models.loaded_models():
        link = entry.link
        status = await link.status(timeout=2.0)
        models.append({
            "model": entry.model_id,
            "state": engine_state_word(link, status),
            "active_sequences": status.n_active_sequences if status else 0,
            "waiting": status.n_waiting if status else 0,
            "requests_in_flight": link.in_flight,
            "n_parallel": link.n_parallel,
        })  # fmt: skip
    return {"state": "library", "models": models}


def engine_state_word(link, status) -> str:
    """One word for /health: the worker's own state, "busy" while requests are in the server's
    hands that the worker does not count yet (rendering, tokenizing, waiting for a sequence),
    or why nothing can be answered: "restarting", "crashed", "no_model", "not_answering"."""
    if link.model is None:
        if getattr(link, "restarting", False):
            return "restarting"
        return "crashed" if link.crashed is not None else "no_model"
    if status is None:
        return "not_answering"
    if status.state == "idle" and link.in_flight:
        return "busy"
    return str(status.state)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(x) for x in error.get("loc", ()) if x != "body")
        if error.get("type") == "json_invalid":
            return "The request body is not valid JSON; send a JSON object."
        parts.append(f"{where or 'body'}: {error.get('msg', 'invalid')}")
    return "Invalid request: " + "; ".join(parts)


def _first_field(exc: RequestValidationError) -> str | None:
    for error in exc.errors()[:1]:
        if error.get("type") == "json_invalid":
            return None
        loc = [str(x) for x in error.get("loc", ()) if x != "body"]
        return ".".join(loc) or None
    return None
