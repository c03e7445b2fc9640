"""Answering with a generation: whole (several choices at once, stopped if the client goes) or
streamed (headers only once the first piece is ready, so refusals keep their status code); and
with pooled outputs (embeddings, a reranker's scores)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from starlette.requests import Request
from starlette.responses import Response

from engine.runtime import protocol as p
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


async def pooled_outputs(
    state: ServerState, request: Request, job, inputs: tuple[str, ...], query: str = ""
) -> p.Embedded:
    """The pooled output of each input (with a query: a reranker's scores); the job is logged.
    A client that goes away stops the work in the worker (link.embed's finally)."""
    try:
        done = await unless_disconnected(
            request, state.link.embed(inputs, state.config.limits.request_seconds, query)
        )
    except ClientGone:
        job.finish(499, [], note="client disconnected")
        raise
    except APIError as error:
        job.finish(error.status, [], note=error.message)
        raise
    job.finish(200, [])
    return done


async def logged_stream(
    job, reply: Reply, events, chunks: AsyncIterator[str], error_event: Callable[[APIError], str]
) -> AsyncIterator[str]:
    """`chunks` (made from the generation's `events`), logged once when the stream ends. An API
    error before anything was sent is raised, so stream_response answers it with its status
    code; after, it goes out as `error_event(error)`. Closing this closes `events`, which stops
    the generation."""
    status, note, sent = 200, "", False
    try:
        async for chunk in chunks:
            sent = True
            yield chunk
    except APIError as error:
        status, note = error.status, error.message
        if not sent:
            raise
        yield error_event(error)
    except BaseException:
        status, note = 499, "client disconnected"
        raise
    finally:
        await chunks.aclose()
        await events.aclose()
        job.finish(status, [reply], note=note or reply.stop_reason)
