"""The server's side of the engine worker: requests in, their events out, on the event loop.

One EngineClient may serve the window and the server together: this link listens to its events
beside the window and takes only those of its own request ids. Events arrive on the client's
reader thread and are handed to the event loop; each generation reads its own queue.

Admission: as many generations as the worker decodes together (n_parallel), plus a bounded
number waiting; past that a request is refused at once with 503 and Retry-After, rather than
queued without end. A generation whose reader goes away (the client disconnected, the request
timed out) is stopped in the worker at once, which frees its sequence for the next.

A worker that has not ended a stopped generation within `stop_grace_s` is stuck inside one C
call (llama.cpp's grammar sampler can search for minutes): it is killed, which every listener
sees as a crash, and `hearth serve`'s keeper (engine_keeper.py) starts it again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed
from engine.server.console import Console
from engine.server.errors import APIError, crash_message, generation_failed
from engine.untrusted_text import printable_line

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
    def __init__(
        self,
        client: EngineClient,
        *,
        n_parallel: int,
        queue_length: int,
        stop_grace_s: float = 60.0,
        keeper: Any = None,
    ):
        self.client = client
        self.keeper = keeper  # an EngineKeeper under `hearth serve`; None beside the window
        self.reload_on_demand = False  # serving the Library: the next request loads it again
        self.stop_grace_s = stop_grace_s
        self.say: Callable[[str], None] = Console(sys.stderr).line
        self._stopping: dict[int, asyncio.TimerHandle] = {}
        # Requests whose end the worker has sent (kept a while): one stopped after its end
        # was sent, but before it was read, has nothing left to stop.
        self._ended: collections.deque[int] = collections.deque(maxlen=256)
        self.n_parallel = n_parallel
        self.capacity = n_parallel + queue_length
        self.model: p.ModelLoaded | None = None
        self.template_note = ""  # the format chats are written in, when not the model's own
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
            self.template_note = event.chat_template
        elif isinstance(event, p.Unloaded | p.LoadFailed):
            self.model = None
        elif isinstance(event, EngineCrashed):
            self.model, self.crashed = None, event
            for queue in self._streams.values():
                queue.put_nowait(event)
            for timer in self._stopping.values():
                timer.cancel()
            self._stopping.clear()
            if self.keeper is not None:
                self.keeper.restart(event.message.split(". ")[0] + ".")
        elif isinstance(event, p.ChatTemplateChanged):
            self.template_note = event.template
            self.say(f"[Chats are now written in {printable_line(event.template)}.]")
        elif isinstance(event, p.Status):
            waiters, self._status_waiters = self._status_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(event)
        request_id = getattr(event, "request_id", None)
        if isinstance(event, (*_FINAL, p.Embedded)) and request_id is not None:
            self._ended.append(request_id)
            if request_id in self._stopping:
                self._stopping.pop(request_id).cancel()  # the worker did stop it
        if request_id is not None and request_id in self._streams:
            self._streams[request_id].put_nowait(event)

    # -- generation -----------------------------------------------------------------------------

    @property
    def reloads_after_crash(self) -> bool:
        """Whether a crashed worker's model is loaded again without the person: by the keeper
        (`hearth serve MODEL`), or by the next request (`reload_on_demand`, the Library)."""
        return self.keeper is not None or self.reload_on_demand

    @property
    def restarting(self) -> bool:
        return self.keeper is not None and self.keeper.restarting

    def require_model(self) -> p.ModelLoaded:
        if self.model is None:
            if self.restarting or (self.crashed is not None and self.keeper is not None):
                raise APIError(
                    503,
                    "The engine stopped and is being started again with the model; retry in "
                    "a few seconds.",
                    headers={"Retry-After": "5"},
                )
            if self.crashed is not None:
                raise APIError(
                    503,
                    f"{self.crashed.message} Until then, requests cannot be answered.",
                    headers={"Retry-After": "10"},
                )
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
                    self._stop_and_watch(request_id)

    async def embed(self, inputs: tuple[str, ...], timeout_s: float, query: str = "") -> p.Embedded:
        """The pooled embeddings of `inputs` (with a query: a reranker's scores of them); APIError
        for a failure the client can act on."""
        self.require_model()
        self.admit()
        self.in_flight += 1
        queue: asyncio.Queue = asyncio.Queue()
        request_id = None
        answered = False
        try:
            request_id = self.client.embed(inputs, query)
            self._streams[request_id] = queue
            event = await asyncio.wait_for(queue.get(), timeout_s)
            answered = True
        except BrokenPipeError:
            raise APIError(503, "The engine is not running; restart the server.") from None
        except TimeoutError:
            raise APIError(
                504,
                f"The embeddings took longer than the server's limit of {timeout_s:.0f} s and "
                "were stopped; send fewer or shorter inputs.",
            ) from None
        finally:
            self.in_flight -= 1
            if request_id is not None:
                self._streams.pop(request_id, None)
                if not answered:  # timed out, or the client went away (cancelled)
                    self._stop_and_watch(request_id)
        if isinstance(event, p.Embedded):
            return event
        if isinstance(event, p.GenerationFailed):
            raise generation_failed(event)
        if isinstance(event, p.GenerationDone):
            raise APIError(503, "The embeddings were stopped (the model is being changed).")
        if isinstance(event, EngineCrashed):
            raise APIError(503, crash_message(event, self.reloads_after_crash),
                           headers={"Retry-After": "5"})  # fmt: skip
        raise APIError(503, getattr(event, "message", "The engine stopped."))

    def _stop_and_watch(self, request_id: int) -> None:
        """Stop the request in the worker, and end a worker that does not within the grace."""
        try:
            self.client.stop(request_id)
        except OSError:  # the engine is gone: nothing left to stop
            return
        ended = request_id in self._ended
        if self._loop is not None and not ended and request_id not in self._stopping:
            self._stopping[request_id] = self._loop.call_later(
                self.stop_grace_s, self._stop_overdue, request_id
            )

    def _stop_overdue(self, request_id: int) -> None:
        if self._stopping.pop(request_id, None) is None:
            return
        self.say(
            f"[The engine did not stop request {request_id} within {self.stop_grace_s:g} s: it "
            "is stuck inside one call (a grammar can do this). Ending it.]"
        )
        with contextlib.suppress(OSError):
            self.client.abort_hung()

    async def status(self, timeout: float = 5.0) -> p.Status | None:
        """The worker's own account, or None when it is not running or does not answer."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._status_waiters.append(waiter)
        try:
            self.client.request_status()
            return await asyncio.wait_for(waiter, timeout)
        except (OSError, TimeoutError):
            return None
        finally:
            if waiter in self._status_waiters:
                self._status_waiters.remove(waiter)


def now_unix() -> int:
    return int(time.time())
