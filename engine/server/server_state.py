"""What every route shares: the engine link, the settings and the request log; and a `Job`
per request, which writes the request's line in the log when it ends."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from starlette.requests import Request

from engine.server.config import ServerConfig
from engine.server.engine_link import EngineLink
from engine.server.request_log import RequestLog, RequestRecord
from engine.server.response_store import ResponseStore


@dataclass
class ServerState:
    link: EngineLink
    config: ServerConfig
    log: RequestLog = field(default_factory=RequestLog)
    responses: ResponseStore = field(default_factory=ResponseStore)  # previous_response_id

    def start_job(self, request: Request, route: str, model: str, stream: bool) -> Job:
        client = request.client.host if request.client else "?"
        return Job(self.log, route=route, model=model, stream=stream, client=client)


def state_of(request: Request) -> ServerState:
    return request.app.state.hearth


class Job:
    def __init__(self, log: RequestLog, *, route: str, model: str, stream: bool, client: str):
        self._log = log
        self.number = log.next_number()
        self.route, self.model, self.stream, self.client = route, model, stream, client
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
                completion_tokens=sum(r.completion_tokens for r in replies),
                seconds=time.monotonic() - self._started,
                first_token_seconds=min((s.time_to_first_token for s in stats), default=0.0),
                stream=self.stream,
                note=note[:200],
                decode_seconds=max((s.decode_seconds for s in stats), default=0.0),
            )
        )
