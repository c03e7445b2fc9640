"""The chat window with MCP tools (a call run and its result, a second call waiting for the
person's answer, the chat settings' Tools section open), and with a remote server as its engine
(a real `hearth serve` on the starter model, started as the server tests start it; the Engine
menu open). The first always runs (its picture into a temporary folder), the second only with
HEARTH_SCREENSHOTS=1, which rewrites docs/screenshots/chat-tools.png and chat-remote.png. Under
Xvfb (QT_QPA_PLATFORM=xcb) the screen is grabbed, so the open menu is in the picture."""

from __future__ import annotations

import json
import os

import pytest
from mcp.client._memory import InMemoryTransport
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from app.chat.tool_catalog import ToolCatalog
from app.chat.view import ChatView
from app.common.theme import apply_theme
from app.shell.main_window import MainWindow
from app.shell.pages import CHAT, PageSpec
from engine.chat.store import ConversationStore
from engine.remote.endpoints import RemoteChoice
from engine.runtime import protocol as p
from engine.tools.servers import STDIO, McpServer, ServerList
from tests.app.conftest import WAIT_MS, load_fake_model
from tests.app.fake_engine import done
from tests.engine.server.conftest import serving
from tests.engine.tools.example_server import server as example_server

from .test_screenshots_transfer import _target


def _grab(window: MainWindow):
    """The whole window; under a real X server the screen, so that an open menu shows."""
    if QGuiApplication.platformName() == "xcb":
        frame = window.frameGeometry()
        return window.screen().grabWindow(0, frame.x(), frame.y(), frame.width(), frame.height())
    return window.grab()


def _window(qtbot, bridge, tmp_path, catalog=None) -> MainWindow:
    apply_theme(QApplication.instance())
    store = ConversationStore.open(tmp_path / "chats.sqlite3")
    pages = [
        PageSpec(
            CHAT,
            lambda w: ChatView(
                w.bridge,
                store=store,
                host=w,
                tool_catalog=catalog,
                remote_choice_path=tmp_path / "remote.json",
            ),
        )
    ]
    window = MainWindow(bridge, pages=pages)
    qtbot.addWidget(window)
    window.resize(1320, 720)
    window.move(0, 0)  # all of it on the screen that is grabbed
    window.show()
    qtbot.waitExposed(window)
    return window


def _call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _answer(qtbot, chat, client, text: str) -> None:
    request_id = client.commands[-1][1][0]
    client.emit(p.TokenText(request_id=request_id, text=text))
    client.emit(done(request_id, n_generated=24))
    qtbot.waitUntil(lambda: chat.request_id != request_id, timeout=WAIT_MS)


def _send(qtbot, chat, text: str) -> None:
    chat.input.setPlainText(text)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)


def test_tools_screenshot(qtbot, bridge, tmp_path):
    servers = ServerList(tmp_path / "mcp-servers.json")
    servers.save(McpServer("calc", STDIO, "python", ("calc_server.py",)))
    catalog = ToolCatalog(
        servers_path=servers.path,
        connect_for=lambda server: lambda: InMemoryTransport(example_server),
    )
    window = _window(qtbot, bridge, tmp_path, catalog)
    chat = window.chat_view
    qtbot.waitUntil(lambda: len(catalog.tools) == 4, timeout=WAIT_MS)
    client = load_fake_model(qtbot, bridge, tmp_path / "Qwen3-8B-Q4_K_M.gguf")
    _send(qtbot, chat, "What is 2 + 3.5? Use the calculator.")
    _answer(qtbot, chat, client, _call("calc__add", a=2, b=3.5))
    qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
    generates = client.names().count("generate")
    chat.tool_approval.allow_once.click()
    qtbot.waitUntil(lambda: client.names().count("generate") == generates + 1, timeout=WAIT_MS)
    _answer(qtbot, chat, client, "2 + 3.5 = **5.5**.")
    _send(qtbot, chat, "Now say hello back to me through the echo tool.")
    _answer(qtbot, chat, client, _call("calc__echo", text="hello"))
    qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
    chat.header.settings_button.click()
    chat.settings_drawer.verticalScrollBar().setValue(
        chat.settings_drawer.verticalScrollBar().maximum()
    )  # the Tools section, at the end of the settings
    qtbot.wait(300)
    assert _grab(window).save(str(_target(tmp_path, "chat-tools.png")))


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("HEARTH_SCREENSHOTS") != "1",
    reason="starts a hearth serve of its own: only when the pictures are rewritten "
    "(tests/engine/server/test_remote_engine_client.py and test_remote_engine.py test the same)",
)
def test_remote_engine_screenshot(qtbot, bridge, starter_model, tmp_path_factory, tmp_path):
    name = starter_model.name.removesuffix(".gguf")
    served = serving(tmp_path_factory, name, ["--ctx", "1024"])
    server = next(served)  # a real `hearth serve` on the starter model, as another machine's
    try:
        window = _window(qtbot, bridge, tmp_path)
        chat = window.chat_view
        chat.engine_source.use_remote(RemoteChoice(server.base_url, name), server.key)
        chat.max_tokens = 48
        _send(qtbot, chat, "In one sentence: what is a cache?")
        qtbot.waitUntil(lambda: not chat.generating, timeout=120_000)
        reply = chat.model.entries()[-1]
        assert not reply.failed and "tok/s" in reply.footer, reply.footer
        button = chat.engine_source.button
        menu = chat.engine_source.menu
        menu.popup(button.mapToGlobal(QPoint(0, 0)))  # filled as it shows; then above the button
        qtbot.wait(100)
        menu.move(button.mapToGlobal(QPoint(button.width() - menu.width(), -menu.height())))
        qtbot.wait(300)
        assert _grab(window).save(str(_target(tmp_path, "chat-remote.png")))
        chat.engine_source.menu.close()
    finally:
        served.close()  # stops the server
