"""The MCP client against a small example server (tests/engine/tools/example_server.py): tools
listed, a call answered, a tool that fails, one that hangs, a server that cannot start. Most run
the server in-process (the SDK's memory transport: fast); one starts it over stdio, as Hearth
starts a configured server (no network either way)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp.client._memory import InMemoryTransport

from engine.tools.client import ToolError, call_tool, list_tools
from engine.tools.servers import STDIO, McpServer

from .example_server import server as example_server

EXAMPLE = McpServer(
    "example", STDIO, sys.executable, (str(Path(__file__).with_name("example_server.py")),)
)
STDIO_TIMEOUT_S = 60  # a Python server's start on a loaded 2-core machine


def in_process():
    return InMemoryTransport(example_server)


def test_the_example_servers_tools_are_listed_over_stdio():
    tools = {t.name: t for t in list_tools(EXAMPLE, timeout_s=STDIO_TIMEOUT_S)}
    assert set(tools) == {"add", "echo", "fail", "hang"}
    assert tools["add"].description == "Add two numbers."
    assert set(tools["add"].input_schema["properties"]) == {"a", "b"}
    assert tools["add"].server == "example"


def test_a_tool_is_called_with_its_arguments():
    result = call_tool(EXAMPLE, "add", {"a": 2, "b": 3.5}, connect=in_process)
    assert (result.text, result.failed) == ("5.5", False)


def test_a_failing_tool_gives_a_failed_result_for_the_model():
    result = call_tool(EXAMPLE, "fail", {"reason": "disk on fire"}, connect=in_process)
    assert result.failed and "fail" in result.text


def test_a_hanging_tool_ends_with_a_message():
    with pytest.raises(ToolError, match=r"example did not finish running hang within 0.5 s"):
        call_tool(EXAMPLE, "hang", {}, timeout_s=0.5, connect=in_process)


def test_an_unknown_tool_is_a_failed_result_that_names_it():
    result = call_tool(EXAMPLE, "nope", {}, connect=in_process)
    assert result.failed and "nope" in result.text


def test_a_server_that_cannot_start_says_so():
    missing = McpServer("ghost", STDIO, "/nonexistent/mcp-server")
    with pytest.raises(ToolError, match=r"ghost failed while listing its tools: .*not found"):
        list_tools(missing, timeout_s=STDIO_TIMEOUT_S)
