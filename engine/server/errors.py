"""Errors in the shape each API's clients read: OpenAI's `{"error": {...}}` under /v1, Ollama's
`{"error": "..."}` under /api, Anthropic's `{"type": "error", "error": {...}}` under
/v1/messages. Every message says what was wrong and what to do instead."""

from __future__ import annotations

import json

from starlette.responses import JSONResponse

from engine.enums import WorkLimit
from engine.runtime import protocol as p
from engine.runtime.client import EngineCrashed

_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    501: "invalid_request_error",
    503: "server_error",
    504: "timeout_error",
}


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
}


class APIError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}


# The status for a request that went over a bound on the engine's work (GenerationFailed).
_OVER_LIMIT_STATUS = {WorkLimit.PROMPT: 413, WorkLimit.GRAMMAR: 422, WorkLimit.BUSY: 503}


def generation_failed(event: p.GenerationFailed) -> APIError:
    """The error for the engine's GenerationFailed: 400 (the request cannot be answered as it
    is), or the status of the bound it went over, with the engine's message (which names it)."""
    status = _OVER_LIMIT_STATUS.get(event.over_limit, 400)
    headers = {"Retry-After": "5"} if status == 503 else None
    return APIError(status, event.message, headers=headers)


def is_ollama_path(path: str) -> bool:
    return path.startswith("/api/")


def is_anthropic_path(path: str) -> bool:
    return path == "/v1/messages" or path.startswith("/v1/messages/")


def anthropic_error(status: int, message: str) -> dict:
    return {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"),
                                       "message": message}}  # fmt: skip


def error_body(path: str, status: int, message: str, *, param=None, code=None) -> dict:
    if is_ollama_path(path):
        return {"error": message}
    if is_anthropic_path(path):
        return anthropic_error(status, message)
    return {
        "error": {
            "message": message,
            "type": _OPENAI_TYPES.get(status, "invalid_request_error"),
            "param": param,
            "code": code,
        }
    }


def error_response(path: str, error: APIError) -> JSONResponse:
    body = error_body(path, error.status, error.message, param=error.param, code=error.code)
    return JSONResponse(body, status_code=error.status, headers=error.headers)


def error_bytes(path: str, status: int, message: str) -> bytes:
    return json.dumps(error_body(path, status, message)).encode()


def crash_message(crash: EngineCrashed, reloads: bool) -> str:
    """What a request the crash ended is told: how the worker ended, what llama.cpp said
    first (an abort's reason), and what happens next: `hearth serve` loads the model again by
    itself (`reloads`); beside the window, the person reloads it there."""
    said = f" llama.cpp said: {crash.cause_lines[0][:300]}" if crash.cause_lines else ""
    then = ("The server loads the model again; retry in a few seconds." if reloads
            else "Reload the model in Hearth, then retry.")  # fmt: skip
    return f"{crash.message.split('. ')[0]}.{said} {then}"
