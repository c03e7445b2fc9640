"""The tools the configured MCP servers offer, listed off the GUI thread, and each call run off
it too (engine/tools/client.py: a short session per call, bounded by a deadline).

Tool work has a pool of its own: a server that takes its time starting must not hold the
threads the rest of the window's background work shares.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QThreadPool, Signal

from app.common.background import TaskRunner
from engine.tools.client import (
    DEFAULT_TIMEOUT_S,
    Connect,
    ToolInfo,
    ToolResult,
    call_tool,
    list_tools,
)
from engine.tools.servers import McpServer, ServerList

# Tests (and an in-process server) reach a server without starting it: None means its settings.
ConnectFor = Callable[[McpServer], Connect | None]


class ToolCatalog(QObject):
    changed = Signal()  # the tools or the servers' problems changed, or a listing started

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        servers_path: Path | None = None,
        connect_for: ConnectFor | None = None,
    ):
        super().__init__(parent)
        self.server_list = ServerList(servers_path)
        self.connect_for = connect_for or (lambda server: None)
        self.timeout_s = DEFAULT_TIMEOUT_S
        self.tools: list[ToolInfo] = []
        self.problems: dict[str, str] = {}  # server name -> why its tools are not listed
        self.listing = False
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(2)
        self._tasks = TaskRunner(self, self._pool)
        self._generation = 0

    def servers(self) -> list[McpServer]:
        return self.server_list.servers()

    def refresh(self) -> None:
        """List every enabled server's tools again, in the background."""
        self._generation += 1
        generation = self._generation
        servers = [s for s in self.servers() if s.enabled]
        if not servers:
            self.tools, self.problems, self.listing = [], {}, False
            self.changed.emit()
            return
        self.listing = True
        self.changed.emit()
        timeout_s, connect_for = self.timeout_s, self.connect_for

        def list_all():
            tools, problems = [], {}
            for server in servers:
                try:
                    tools += list_tools(server, timeout_s=timeout_s, connect=connect_for(server))
                except Exception as exc:
                    problems[server.name] = str(exc)
            return tools, problems

        self._tasks.run(list_all, lambda result: self._listed(generation, result))

    def _listed(self, generation: int, result) -> None:
        if generation != self._generation:
            return  # an older listing: the servers changed since
        self.listing = False
        if isinstance(result, Exception):
            self.tools, self.problems = [], {"": str(result)}
        else:
            self.tools, self.problems = result
        self.changed.emit()

    def run(self, tool: ToolInfo, arguments: dict, done: Callable[[object], None]) -> None:
        """Run `tool` off the GUI thread; `done((ToolResult, seconds) or ToolError)` on it."""
        server = self.server_list.server(tool.server)
        timeout_s, connect_for = self.timeout_s, self.connect_for

        def call():
            if server is None:
                from engine.tools.client import ToolError

                raise ToolError(f"The server {tool.server} is no longer configured.")
            started = time.monotonic()
            result: ToolResult = call_tool(
                server, tool.name, arguments, timeout_s=timeout_s, connect=connect_for(server)
            )
            return result, time.monotonic() - started

        self._tasks.run(call, done)
