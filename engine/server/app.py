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

from engine.server import (
    anthropic_routes,
    ollama_routes,
    openai_routes,
    rerank_routes,
    responses_routes,
)
from engine.server.errors import APIError, error_body, error_response
from engine.server.guard import RequestGuard
from engine.server.server_state import ServerState, state_of
from engine.server.streaming import ClientGone


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
    async def health(request: Request) -> dict:
        link = state_of(request).link
        status = await link.status()
        return {
            "model": link.model.path.rsplit("/", 1)[-1] if link.model else None,
            "state": status.state,
            "active_sequences": status.n_active_sequences,
            "waiting": status.n_waiting,
            "requests_in_flight": link.in_flight,
            "n_parallel": link.n_parallel,
        }

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
    app.add_middleware(RequestGuard, config=config)  # outermost: before anything else runs
    return app


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
