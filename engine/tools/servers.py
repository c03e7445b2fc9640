"""MCP servers the person configured: how to reach each one, checked, and kept in one small JSON
file beside the other settings (mcp-servers.json in Hearth's data folder).

A server is either a command Hearth starts and talks to over its stdin/stdout (`stdio`), or an
address it talks to over HTTP (`http`, MCP's streamable HTTP transport) with optional headers
(an API key, say). Nothing here connects to anything: engine/tools/client.py does.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from engine.files import write_json_atomic
from engine.paths import data_dir

STDIO = "stdio"
HTTP = "http"
MAX_NAME_CHARS = 60


class ServerConfigError(ValueError):
    """A server that cannot be used as configured; the message says what to change."""


@dataclass(frozen=True)
class McpServer:
    name: str
    transport: str  # STDIO or HTTP
    command: str = ""  # stdio: the program, then its arguments
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # stdio: added to the environment
    url: str = ""  # http: the server's MCP endpoint
    headers: dict[str, str] = field(default_factory=dict)  # http: sent with every request
    enabled: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
            "url": self.url,
            "headers": dict(self.headers),
            "enabled": self.enabled,
        }


def server_from(data: Any) -> McpServer:
    """A server from its stored (or typed) form; ServerConfigError says what is wrong."""
    if not isinstance(data, dict):
        raise ServerConfigError("A server should be an object.")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        raise ServerConfigError(f"A server needs a name of 1 to {MAX_NAME_CHARS} characters.")
    name = " ".join(name.split())
    transport = data.get("transport")
    enabled = data.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ServerConfigError(f"{name}: “enabled” should be true or false.")
    if transport == STDIO:
        command, args = data.get("command"), data.get("args", [])
        if not isinstance(command, str) or not command.strip():
            raise ServerConfigError(f"{name}: the command to start the server is missing.")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ServerConfigError(f"{name}: the arguments should be a list of text.")
        env = _text_map(data.get("env", {}), name, "environment")
        if "\0" in command or any("\0" in a for a in args):
            raise ServerConfigError(f"{name}: the command holds a NUL character.")
        return McpServer(name, STDIO, command.strip(), tuple(args), env, enabled=enabled)
    if transport == HTTP:
        url = data.get("url")
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ServerConfigError(f"{name}: the address should be an http:// or https:// URL.")
        headers = _text_map(data.get("headers", {}), name, "headers")
        if any("\n" in k + v or "\r" in k + v for k, v in headers.items()):
            raise ServerConfigError(f"{name}: a header holds a line break.")
        return McpServer(name, HTTP, url=url, headers=headers, enabled=enabled)
    raise ServerConfigError(f"{name}: the transport should be “{STDIO}” or “{HTTP}”.")


def server_from_form(
    name: str,
    transport: str,
    command_line: str = "",
    url: str = "",
    headers_text: str = "",
    *,
    enabled: bool = True,
    env: dict[str, str] | None = None,
) -> McpServer:
    """A server from the Settings form: a command line as a shell would split it, headers one
    per line as `Name: value`; ServerConfigError says what to change."""
    if transport == STDIO:
        try:
            parts = shlex.split(command_line)
        except ValueError as exc:
            raise ServerConfigError(f"{name}: the command line does not parse ({exc}).") from None
        data = {"command": parts[0] if parts else "", "args": parts[1:], "env": env or {}}
    else:
        data = {"url": url.strip(), "headers": headers_from_text(headers_text, name)}
    return server_from({"name": name, "transport": transport, "enabled": enabled, **data})


def headers_from_text(text: str, name: str = "server") -> dict[str, str]:
    headers = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, colon, value = line.partition(":")
        if not colon or not key.strip():
            raise ServerConfigError(f"{name}: write each header as “Name: value” on its own line.")
        headers[key.strip()] = value.strip()
    return headers


def form_text(server: McpServer) -> tuple[str, str]:
    """(command line, headers text) of `server`, as the form shows them."""
    command = shlex.join([server.command, *server.args]) if server.command else ""
    return command, "\n".join(f"{k}: {v}" for k, v in server.headers.items())


def _text_map(value: Any, name: str, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ServerConfigError(f"{name}: the {what} should map names to text.")
    return dict(value)


def default_servers_path() -> Path:
    return data_dir() / "mcp-servers.json"


class ServerList:
    """The configured servers, in the order they were added; a damaged file is set aside."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_servers_path()

    def servers(self) -> list[McpServer]:
        found = {}
        for item in self._read():
            try:
                server = server_from(item)
            except ServerConfigError:
                continue  # hand-edited: skipped, the others still work
            found[server.name] = server
        return list(found.values())

    def server(self, name: str) -> McpServer | None:
        return next((s for s in self.servers() if s.name == name), None)

    def save(self, server: McpServer) -> McpServer:
        server = server_from(server.to_dict())
        kept = [
            s for s in self._read() if not (isinstance(s, dict) and s.get("name") == server.name)
        ]
        write_json_atomic(self.path, {"version": 1, "servers": [*kept, server.to_dict()]})
        return server

    def remove(self, name: str) -> None:
        kept = [s for s in self._read() if not (isinstance(s, dict) and s.get("name") == name)]
        write_json_atomic(self.path, {"version": 1, "servers": kept})

    def _read(self) -> list:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            self.path.replace(self.path.with_suffix(".bad"))
            return []
        servers = data.get("servers") if isinstance(data, dict) else None
        return servers if isinstance(servers, list) else []
