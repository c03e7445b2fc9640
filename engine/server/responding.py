"""Answering with a generation: whole (several choices at once, stopped if the client goes) or
streamed (headers only once the first piece is ready, so refusals keep their status code)."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from engine.server.completion import Reply, whole_reply
from engine.server.errors import APIError
from engine.server.server_state import ServerState
from engine.server.streaming import ClientGone, WatchedStream, unless_disconnected


async def whole_replies(request: Request, state: ServerState, job, requests) -> list[Reply]:
    limits = state.config.limits

    async def all_of() -> list[Reply]:
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(
                    whole_reply(state.link, r, limits.request_seconds, limits.token_seconds)
                )
                for r in requests
            ]
        return [t.result() for t in tasks]

    try:
        replies = await unless_disconnected(request, all_of())
    except ClientGone:
        job.finish(499, [], note="client disconnected")
        raise
    except ExceptionGroup as group:  # from the TaskGroup: the first API error is the answer
        error = next((e for e in group.exceptions if isinstance(e, APIError)), None)
        if error is None:
            raise
        job.finish(error.status, [], note=error.message)
        raise error from None
    job.finish(200, replies)
    return replies


async def stream_response(
    request: Request, job, chunks, media_type: str = "text/event-stream"
) -> Response:
    """Send the headers once the first piece is ready, so that a request refused by the engine
    (busy, prompt too long) gets its real status code instead of an error inside a 200."""
    try:
        first = await unless_disconnected(request, anext(chunks))
    except ClientGone:
        await chunks.aclose()
        job.finish(499, [], note="client disconnected")
        raise
    except APIError as error:
        job.finish(error.status, [], note=error.message)
        raise

    async def body():
        try:
            yield first
            async for chunk in chunks:
                yield chunk
        finally:
            await chunks.aclose()  # stops the generation when the client has gone

    return WatchedStream(
        body(),
        media_type=media_type,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
