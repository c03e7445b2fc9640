"""A small MCP server for the tests, over stdio, with no network: `python example_server.py`.

Tools: `add` (two numbers), `echo` (text back), `fail` (raises: the result is an error),
`hang` (sleeps far past any test's timeout: a tool that never answers).
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("hearth-example")


@server.tool(description="Add two numbers.")
def add(a: float, b: float) -> str:
    return str(a + b)


@server.tool(description="Say the text back.")
def echo(text: str) -> str:
    return text


@server.tool(description="Always fails.")
def fail(reason: str = "broken on purpose") -> str:
    raise RuntimeError(reason)


@server.tool(description="Never answers in time.")
async def hang() -> str:
    await anyio.sleep(3600)  # cancellable, so an in-process server stops with its session
    return "too late"


if __name__ == "__main__":
    server.run()
