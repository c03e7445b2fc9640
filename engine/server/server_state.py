"""What every route shares: the engine link (or, serving the whole Library, the model pool),
the settings and the request log; and a `Job` per request, which writes the request's line in
the log when it ends.

A route asks `state.serving(request, body.model)` for the model a request names: it gets a
view of the state whose `link` is that model's (loaded on demand from the pool, and released
when the request ends, stream included: the ModelLeases middleware), so everything after it
reads `state.link` as with one model."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field, replace

from starlette.requests import Request

from engine.runtime import protocol as p
from engine.server import request_params as rp
from engine.server.api_keys import SCOPE_KEY_NAME
from engine.server.config import ServerConfig
from engine.server.engine_link import EngineLink
from engine.server.keep_alive import keep_alive_seconds
from engine.server.model_pool import ModelPool
from engine.server.request_log import RequestLog, RequestRecord
from engine.server.response_store import ResponseStore

LEASES = "hearth.leases"  # the request scope's list of the pool models it holds


@dataclass
class ServerState:
    link: EngineLink | None  # the one model's; None when serving the Library (`models`)
    config: ServerConfig
    log: RequestLog = field(default_factory=RequestLog)
    responses: ResponseStore = field(default_factory=ResponseStore)  # previous_response_id
    models: ModelPool | None = None

    def start_job(self, request: Request, route: str, model: str, stream: bool) -> Job:
        client = request.client.host if request.client else "?"
        key = request.scope.get(SCOPE_KEY_NAME, "")
        return Job(self.log, route=route, model=model, stream=stream, client=client, key=key)

    async def serving(
        self, request: Request, requested: str, keep_alive=None
    ) -> tuple[ServerState, p.ModelLoaded, str]:
        """(this state with the named model's link, the model, its id for replies). With one
        model: 404 for another name. With the Library: the model loaded on demand (or waited
        for) and held until the request ends; `keep_alive` (Ollama's) sets its idle time."""
        if self.models is None:
            model = self.link.require_model()
            return self, model, rp.check_model_name(requested, model)
        keep_s = keep_alive_seconds(keep_alive, self.models.settings.keep_alive_s)
        entry = await self.models.acquire(requested, keep_s)
        leases = request.scope.get(LEASES)
        if leases is None:  # no ModelLeases around this app: nothing would release it
            self.models.release(entry)
        else:
            leases.append(entry)
        model = entry.loaded or entry.link.require_model()
        return replace(self, link=entry.link), model, entry.model_id


class ModelLeases:
    """Releases the pool models a request held once its answer is sent (a stream's too)."""

    def __init__(self, app, state: ServerState):
        self.app = app
        self.state = state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.state.models is None:
            await self.app(scope, receive, send)
            return
        leases: list = []
        scope[LEASES] = leases
        try:
            await self.app(scope, receive, send)
        finally:
            for entry in leases:
                self.state.models.release(entry)


def state_of(request: Request) -> ServerState:
    return request.app.state.hearth


class Job:
    def __init__(
        self, log: RequestLog, *, route: str, model: str, stream: bool, client: str, key: str = ""
    ):
        self._log = log
        self.number = log.next_number()
        self.route, self.model, self.stream, self.client = route, model, stream, client
        self.key = key  # the API key's name ("" without named keys)
        self.created = int(time.time())
        self._started = time.monotonic()
        self._id = uuid.uuid4().hex[:24]
        self._done = False

    def reply_id(self, prefix: str) -> str:
        return f"{prefix}-{self._id}"

    def finish(self, status: int, replies, note: str = "") -> None:
        """Log the request once (the first call wins: a stream may end in several places)."""
        if self._done:
            return
        self._done = True
        stats = [r.stats for r in replies if r.stats is not None]
        self._log.add(
            RequestRecord(
                number=self.number,
                started_at=self.created,
                client=self.client,
                route=self.route,
                model=self.model,
                status=status,
                prompt_tokens=stats[0].n_prompt_tokens if stats else 0,
                prompt_tokens_reused=stats[0].n_prompt_tokens_reused if stats else 0,
                completion_tokens=sum(r.completion_tokens for r in replies),
                seconds=time.monotonic() - self._started,
                first_token_seconds=min((s.time_to_first_token for s in stats), default=0.0),
                stream=self.stream,
                note=note[:200],
                decode_seconds=max((s.decode_seconds for s in stats), default=0.0),
                key=self.key,
            )
        )
