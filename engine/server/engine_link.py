"""The server's side of the engine worker: requests in, their events out, on the event loop.

One EngineClient may serve the window and the server together: this link listens to its events
beside the window and takes only those of its own request ids. Events arrive on the client's
reader thread and are handed to the event loop; each generation reads its own queue.

Admission: as many generations as the worker decodes together (n_parallel), plus a bounded
number waiting; past that a request is refused at once with 503 and Retry-After, rather than
queued without end. A generation whose reader goes away (the client disconnected, the request
timed out) is stopped in the worker at once, which frees its sequence for the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed
from engine.server.errors import APIError

_FINAL = (p.GenerationDone, p.GenerationFailed, EngineCrashed)


@dataclass(frozen=True)
class GenerationRequest:
    """What a route asks of the engine, in the engine's terms."""

    messages: tuple[p.ChatMessage, ...] = ()
    prompt: str | None = None
    sampling: p.SamplingParams = field(default_factory=p.SamplingParams)
    max_tokens: int = 1024
    stop: tuple[str, ...] = ()
    top_logprobs: int = -1
    tools_json: str = ""
    ignore_eos: bool = False


class EngineLink:
    def __init__(self, client: EngineClient, *, n_parallel: int, queue_length: int):
        self.client = client
        self.n_parallel = n_parallel
        self.capacity = n_parallel + queue_length
        self.model: p.ModelLoaded | None = None
        self.crashed: EngineCrashed | None = None
        self.in_flight = 0
        self._streams: dict[int, asyncio.Queue] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._status_waiters: list[asyncio.Future] = []

    # -- wiring ---------------------------------------------------------------------------------

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start taking events (call on the event loop that will serve the requests)."""
        self._loop = loop
        self.client.add_listener(self._on_event)

    def detach(self) -> None:
        self.client.remove_listener(self._on_event)

    def _on_event(self, event: Any) -> None:  # the client's reader thread
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._dispatch, event)

    def _dispatch(self, event: Any) -> None:  # the event loop
        if isinstance(event, p.ModelLoaded):
            self.model, self.crashed = event, None
        elif isinstance(event, p.Unloaded | p.LoadFailed):
            self.model = None
        elif isinstance(event, EngineCrashed):
            self.model, self.crashed = None, event
            for queue in self._streams.values():
                queue.put_nowait(event)
        elif isinstance(event, p.Status):
            waiters, self._status_waiters = self._status_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(event)
        request_id = getattr(event, "request_id", None)
        if request_id is not None and request_id in self._streams:
            self._streams[request_id].put_nowait(event)

    # -- generation -----------------------------------------------------------------------------

    def require_model(self) -> p.ModelLoaded:
        if self.model is None:
            if self.crashed is not None:
                raise APIError(503, f"{self.crashed.message} (the server needs a restart)")
            raise APIError(
                503,
                "No model is loaded. Load one in Hearth, then try again.",
                headers={"Retry-After": "5"},
            )
        return self.model

    def admit(self) -> None:
        """Refuse now, with 503 and Retry-After, when the queue is full."""
        if self.in_flight >= self.capacity:
            raise APIError(
                503,
                f"The server is busy: {self.n_parallel} requests are decoding and "
                f"{self.capacity - self.n_parallel} waiting. Retry after a few seconds.",
                headers={"Retry-After": "2"},
            )

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Any]:
        """The events of one generation: TokenText..., then GenerationDone / GenerationFailed /
        EngineCrashed. Closing the iterator early stops the generation in the worker."""
        self.require_model()
        self.admit()
        self.in_flight += 1
        queue: asyncio.Queue = asyncio.Queue()
        request_id = None
        finished = False
        try:
            request_id = self.client.generate(
                messages=request.messages,
                prompt=request.prompt,
                sampling=request.sampling,
                max_tokens=request.max_tokens,
                stop=request.stop,
                top_logprobs=request.top_logprobs,
                tools_json=request.tools_json,
                ignore_eos=request.ignore_eos,
            )
            # No await between generate() and here: its events are dispatched on this loop,
            # so none can have been missed.
            self._streams[request_id] = queue
            while True:
                event = await queue.get()
                finished = isinstance(event, _FINAL)
                yield event
                if finished:
                    return
        except BrokenPipeError:
            raise APIError(503, "The engine is not running; restart the server.") from None
        finally:
            self.in_flight -= 1
            if request_id is not None:
                self._streams.pop(request_id, None)
                if not finished:
                    self._stop_quietly(request_id)

    async def embed(self, inputs: tuple[str, ...], timeout_s: float, query: str = "") -> p.Embedded:
        """The pooled embeddings of `inputs` (with a query: a reranker's scores of them); APIError
        for a failure the client can act on."""
        self.require_model()
        self.admit()
        self.in_flight += 1
        queue: asyncio.Queue = asyncio.Queue()
        request_id = None
        try:
            request_id = self.client.embed(inputs, query)
            self._streams[request_id] = queue
            event = await asyncio.wait_for(queue.get(), timeout_s)
        except BrokenPipeError:
            raise APIError(503, "The engine is not running; restart the server.") from None
        except TimeoutError:
            raise APIError(504, "The embeddings took longer than the server's limit.") from None
        finally:
            self.in_flight -= 1
            if request_id is not None:
                self._streams.pop(request_id, None)
        if isinstance(event, p.Embedded):
            return event
        if isinstance(event, p.GenerationFailed):
            raise APIError(400, event.message)
        raise APIError(500, getattr(event, "message", "The engine stopped."))

    def _stop_quietly(self, request_id: int) -> None:
        with contextlib.suppress(OSError):  # the engine is gone: nothing left to stop
            self.client.stop(request_id)

    async def status(self, timeout: float = 5.0) -> p.Status:
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._status_waiters.append(waiter)
        self.client.request_status()
        return await asyncio.wait_for(waiter, timeout)


def now_unix() -> int:
    return int(time.time())
