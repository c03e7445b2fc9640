"""Configured MCP servers: checked when saved or read, kept in one JSON file."""

from __future__ import annotations

import json

import pytest

from engine.tools.servers import HTTP, STDIO, McpServer, ServerConfigError, ServerList, server_from


def test_servers_are_saved_replaced_and_removed(tmp_path):
    servers = ServerList(tmp_path / "mcp-servers.json")
    local = McpServer("files", STDIO, "npx", ("-y", "server-filesystem", "/tmp"), {"A": "1"})
    remote = McpServer("search", HTTP, url="https://mcp.example/mcp", headers={"X-Key": "k"})
    servers.save(local)
    servers.save(remote)
    servers.save(McpServer("files", STDIO, "uvx", ("files",)))
    assert [s.name for s in servers.servers()] == ["search", "files"]
    assert servers.server("files").command == "uvx"
    assert ServerList(servers.path).server("search") == remote
    servers.remove("search")
    assert [s.name for s in servers.servers()] == ["files"]


@pytest.mark.parametrize(
    "data, reason",
    [
        ([], "should be an object"),
        ({"transport": STDIO, "command": "x"}, "needs a name"),
        ({"name": "a", "transport": "carrier pigeon"}, "transport should be"),
        ({"name": "a", "transport": STDIO}, "command to start the server is missing"),
        ({"name": "a", "transport": STDIO, "command": "x", "args": "-v"}, "list of text"),
        ({"name": "a", "transport": STDIO, "command": "x\0y"}, "NUL"),
        ({"name": "a", "transport": STDIO, "command": "x", "env": {"A": 1}}, "map names to text"),
        ({"name": "a", "transport": HTTP, "url": "ftp://host/mcp"}, "http:// or https://"),
        ({"name": "a", "transport": HTTP, "url": "https:///x"}, "http:// or https://"),
        (
            {"name": "a", "transport": HTTP, "url": "http://h/m", "headers": {"K": "v\r\nX: y"}},
            "line break",
        ),
        ({"name": "a", "transport": HTTP, "url": "http://h/m", "enabled": "yes"}, "true or"),
    ],
)
def test_a_server_that_cannot_be_used_is_refused_with_the_reason(data, reason):
    with pytest.raises(ServerConfigError, match=reason):
        server_from(data)


def test_a_bad_entry_is_skipped_and_a_damaged_file_set_aside(tmp_path):
    servers = ServerList(tmp_path / "mcp-servers.json")
    good = {"name": "ok", "transport": STDIO, "command": "x"}
    servers.path.write_text(json.dumps({"servers": [good, {"name": "bad"}]}))
    assert [s.name for s in servers.servers()] == ["ok"]
    servers.path.write_text("{")
    assert servers.servers() == []
    assert servers.path.with_suffix(".bad").exists()
