"""Talking to an MCP server through the official `mcp` SDK: the tools it offers, and one call of
one of them. Each is a short session of its own (start or reach the server, initialize, ask,
close), bounded by a deadline: a server that does not start, answer or finish in time ends with
a ToolError that says so, never a frozen chat, and a stdio server is stopped when its session
ends.

Synchronous on purpose: the caller (the window's background pool, the CLI) runs it on a thread
of its own; anyio runs the SDK's async session inside.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from engine.tools.servers import HTTP, McpServer

DEFAULT_TIMEOUT_S = 30.0
MAX_RESULT_CHARS = 100_000  # what a result may give the model; the rest is cut, and said so
_STDERR_LINES = 5

T = TypeVar("T")
# How to reach a server other than by its settings (an in-process server, in tests): an async
# context manager giving the (read, write) streams of a session.
Connect = Callable[[], AbstractAsyncContextManager[Any]]


class ToolError(RuntimeError):
    """A server or tool that could not be reached, failed the protocol or took too long; the
    message says which and what to do."""


@dataclass(frozen=True)
class ToolInfo:
    server: str
    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    text: str
    failed: bool = False  # the tool itself said it failed (the model is told, and may retry)


def list_tools(
    server: McpServer, *, timeout_s: float = DEFAULT_TIMEOUT_S, connect: Connect | None = None
) -> list[ToolInfo]:
    """Every tool `server` offers (all pages of its list)."""

    async def ask(session) -> list[ToolInfo]:
        tools, cursor = [], None
        for _page in range(100):
            from mcp_types import PaginatedRequestParams

            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools += [
                ToolInfo(server.name, t.name, t.description or "", dict(t.input_schema or {}))
                for t in page.tools
            ]
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    return _run(server, ask, timeout_s, "listing its tools", connect)


def call_tool(
    server: McpServer,
    name: str,
    arguments: dict[str, Any],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    connect: Connect | None = None,
) -> ToolResult:
    """Run tool `name` of `server` with `arguments`; its result as text for the model."""

    async def ask(session) -> ToolResult:
        result = await session.call_tool(name, arguments)
        return ToolResult(_result_text(result.content), bool(result.is_error))

    return _run(server, ask, timeout_s, f"running {name}", connect)


def _run(
    server: McpServer,
    ask: Callable[[Any], Awaitable[T]],
    timeout_s: float,
    doing: str,
    connect: Connect | None,
) -> T:
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:

        async def session_then_ask() -> T:
            from mcp import ClientSession

            transport = connect() if connect is not None else _transport(server, errlog)
            with anyio.fail_after(timeout_s):
                async with transport as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    return await ask(session)

        try:
            return anyio.run(session_then_ask)
        except TimeoutError:
            raise ToolError(
                f"{server.name} did not finish {doing} within {timeout_s:g} s and was stopped. "
                "Try again, or check the server."
            ) from None
        except Exception as exc:  # the SDK's errors, a spawn failure, an HTTP error...
            cause = _first_leaf(exc)
            said = _last_lines(errlog)
            raise ToolError(
                f"{server.name} failed while {doing}: {_describe(cause)}."
                + (f" It said: {said}" if said else "")
                + " Check its settings in Settings › Tools."
            ) from exc


@asynccontextmanager
async def _transport(server: McpServer, errlog):
    if server.transport == HTTP:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with (
            httpx2.AsyncClient(headers=server.headers) as http,
            streamable_http_client(server.url, http_client=http) as streams,
        ):
            yield streams[0], streams[1]
    else:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=server.command, args=list(server.args), env=server.env or None
        )
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams[0], streams[1]


def _result_text(content: list[Any]) -> str:
    parts = []
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        else:
            parts.append(f"[{kind or 'content'} not shown to the model]")
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[cut: the result had {len(text):,} characters]"
    return text


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"its command was not found ({exc.filename or exc})"
    text = str(exc).strip() or type(exc).__name__
    return text.rstrip(".")


def _last_lines(errlog) -> str:
    try:
        errlog.seek(0)
        lines = [line.strip() for line in errlog.read().splitlines() if line.strip()]
    except (OSError, ValueError):
        return ""
    return " / ".join(lines[-_STDERR_LINES:])[:1000]
