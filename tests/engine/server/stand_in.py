"""An engine link that answers at once (no worker), and a way to call the ASGI app directly:
for tests of what the server does with requests, in milliseconds."""

from __future__ import annotations

import asyncio
import json

from engine.runtime import protocol as p
from engine.server.app import create_app
from engine.server.config import ServerConfig
from engine.server.engine_link import EngineLink
from engine.server.errors import APIError
from engine.server.server_state import ServerState

LOADED = p.ModelLoaded(path="/m/tiny.gguf", description="llama 1M Q4_1", n_ctx=512,
                       n_ctx_train=512, n_params=1, size_bytes=1, n_layers=1, n_gpu_layers=0,
                       flash_attn="on", chat_template="the model's chat template",
                       load_seconds=0.0, n_parallel=1)  # fmt: skip
STATS = p.GenerationStats(
    n_prompt_tokens=3,
    n_prompt_tokens_reused=0,
    n_generated=1,
    prefill_seconds=0.0,
    time_to_first_token=0.0,
    decode_seconds=0.0,
)


class StandInLink:
    """EngineLink's face to the routes: every generation says "ok", every embedding is [1, 0]."""

    n_parallel = 1
    capacity = 2

    def __init__(self, model: p.ModelLoaded | None = LOADED):
        self.model = model
        self.crashed = None
        self.restarting = False
        self.template_note = model.chat_template if model else ""
        self.in_flight = 0
        self.status_answer: p.Status | None = p.Status(
            state="idle", model_path="/m/tiny.gguf", n_ctx=512, n_tokens_cached=0
        )
        self.generated = []

    def require_model(self) -> p.ModelLoaded:
        if self.model is None:
            raise APIError(503, "No model is loaded.")
        return self.model

    async def generate(self, request):
        self.generated.append(request)
        yield p.TokenText(request_id=1, text="ok")
        yield p.GenerationDone(request_id=1, stop_reason="eos", stats=STATS)

    async def embed(self, inputs, timeout_s, query: str = ""):
        return p.Embedded(request_id=1, vectors=tuple((1.0, 0.0) for _ in inputs), n_tokens=1)

    async def status(self, timeout: float = 5.0):
        return self.status_answer

    def attach(self, loop):
        pass

    def detach(self):
        pass


def app_with(link=None, config: ServerConfig | None = None):
    return create_app(ServerState(link=link or StandInLink(), config=config or ServerConfig()))


def call(app, method: str, path: str, body=None, headers: dict[str, str] | None = None,
         receive=None) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    """(status, headers, body) of one request through the ASGI app (no sockets)."""
    raw = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
    sent_headers = {"host": "127.0.0.1:8741", "content-type": "application/json",
                    **{k.lower(): v for k, v in (headers or {}).items()}}  # fmt: skip
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8741),
        "headers": [(k.encode(), v.encode("latin-1")) for k, v in sent_headers.items()
                    if v is not None],
    }  # fmt: skip
    messages = [{"type": "http.request", "body": raw, "more_body": False}]

    async def receive_body():
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # no disconnect: the reply comes first

    out = []

    async def send(message):
        out.append(message)

    asyncio.run(app(scope, receive or receive_body, send))
    start = next(m for m in out if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in out if m["type"] == "http.response.body")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, content


def message_of(content: bytes) -> str:
    error = json.loads(content)["error"]
    return error if isinstance(error, str) else error["message"]


__all__ = ["LOADED", "EngineLink", "StandInLink", "app_with", "call", "message_of"]
