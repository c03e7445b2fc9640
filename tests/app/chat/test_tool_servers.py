"""Settings › Tools › Servers: a stdio server and an HTTP one with headers added, a server that
cannot be used refused with the reason in the dialog (nothing saved), one renamed and one
removed; the chat lists the tools again when the servers change."""

from __future__ import annotations

from app.chat.tool_servers import ToolServersDialog
from engine.tools.servers import HTTP, STDIO, McpServer, ServerList


def _dialog(qtbot, tmp_path) -> ToolServersDialog:
    dialog = ToolServersDialog(ServerList(tmp_path / "mcp-servers.json"))
    qtbot.addWidget(dialog)
    return dialog


def _fill(dialog, name, transport, *, command="", url="", headers=""):
    dialog.add_button.click()
    dialog.name.setText(name)
    dialog.transport.setCurrentIndex(dialog.transport.findData(transport))
    dialog.command.setText(command)
    dialog.url.setText(url)
    dialog.headers.setPlainText(headers)


def test_servers_are_added_checked_renamed_and_removed(qtbot, tmp_path):
    dialog = _dialog(qtbot, tmp_path)
    assert dialog.list.count() == 0 and dialog.name.text() == "New server"
    saved = []
    dialog.saved.connect(lambda: saved.append(True))

    _fill(dialog, "files", STDIO, command="npx -y server-files '/home/me/my notes'")
    assert dialog.save() and dialog.status.text().startswith("Saved files.")
    _fill(dialog, "search", HTTP, url="https://tools.lan/mcp", headers="Authorization: Bearer k")
    assert not dialog.command.isVisibleTo(dialog) and dialog.url.isVisibleTo(dialog)
    assert dialog.save()
    servers = dialog.server_list.servers()
    assert servers == [
        McpServer("files", STDIO, "npx", ("-y", "server-files", "/home/me/my notes")),
        McpServer(
            "search", HTTP, url="https://tools.lan/mcp", headers={"Authorization": "Bearer k"}
        ),
    ]

    _fill(dialog, "broken", HTTP, url="tools.lan/mcp")
    assert not dialog.save()
    assert "http:// or https://" in dialog.status.text() and len(dialog.server_list.servers()) == 2

    dialog.list.setCurrentRow(0)  # files, shown in the form as it was typed
    assert dialog.command.text() == "npx -y server-files '/home/me/my notes'"
    dialog.name.setText("notes")
    assert dialog.save()
    assert [s.name for s in dialog.server_list.servers()] == ["search", "notes"]
    dialog.list.setCurrentRow(0)
    dialog.remove_button.click()
    assert [s.name for s in dialog.server_list.servers()] == ["notes"]
    assert len(saved) == 4
