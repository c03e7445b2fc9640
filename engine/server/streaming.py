"""Responses that watch the client: a stream that ends its generation the moment the client
disconnects, and a wait that does the same for replies sent whole.

Starlette's StreamingResponse notices a disconnect only when it next writes (and leaves the
iterator unclosed); a request waiting for a free sequence or a long prompt writes nothing for a
while. Here the connection is watched all along, and the body iterator is always closed, which
stops the generation in the worker (EngineLink.generate's `finally`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable
from typing import Any, TypeVar

import anyio
from starlette.requests import Request
from starlette.responses import StreamingResponse

T = TypeVar("T")


class ClientGone(Exception):
    """The client closed the connection before the reply was ready."""


class WatchedStream(StreamingResponse):
    async def __call__(self, scope, receive, send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    with contextlib.suppress(OSError):
                        await self.stream_response(send)
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            with contextlib.suppress(Exception):
                await self.body_iterator.aclose()


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`; cancel it and raise ClientGone if the client disconnects first."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if task in done:
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    raise ClientGone


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def sse(data: Any) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def ndjson(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False) + "\n"


def named_sse(event: str, data: dict[str, Any]) -> str:
    """An SSE event with a name, as Anthropic's and the Responses API's streams send them (the
    name is also the data's `type`)."""
    return f"event: {event}\ndata: {json.dumps({'type': event, **data}, ensure_ascii=False)}\n\n"
