"""MCP tools in the chat window, against the example MCP server of tests/engine/tools (run
in-process: no network, no child process) and the fake engine playing the model: the tools are
listed in the chat's settings, a call is shown with its arguments and runs only once allowed,
its result is fed back; a denied call and a hanging tool end with a message, not a frozen chat;
Stop ends a call waiting for its answer; the calls are kept with the chat."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from mcp.client._memory import InMemoryTransport
from PySide6.QtCore import Qt

from app.chat.tool_catalog import ToolCatalog
from app.chat.view import ChatView
from engine.enums import EngineState
from engine.runtime import protocol as p
from engine.tools.approval import REFUSED_TEXT, RoundCounter
from engine.tools.servers import STDIO, McpServer, ServerList
from engine.tools.transcript import ToolState
from tests.app.conftest import WAIT_MS, client_of, load_fake_model
from tests.app.fake_engine import done, model_loaded
from tests.engine.tools.example_server import server as example_server


@pytest.fixture
def catalog(qtbot, tmp_path):
    servers = ServerList(tmp_path / "mcp-servers.json")
    servers.save(McpServer("example", STDIO, "unused: the server runs in-process"))
    catalog = ToolCatalog(
        servers_path=servers.path,
        connect_for=lambda server: lambda: InMemoryTransport(example_server),
    )
    catalog.timeout_s = 5
    yield catalog
    catalog.deleteLater()


@pytest.fixture
def chat(qtbot, bridge, catalog, tmp_path) -> ChatView:
    view = ChatView(bridge, tool_catalog=catalog, remote_choice_path=tmp_path / "remote.json")
    qtbot.addWidget(view)
    view.resize(900, 600)
    view.show()
    qtbot.waitUntil(lambda: len(catalog.tools) == 4, timeout=WAIT_MS)
    return view


def _call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _last_generate(client):
    request_id, messages, _sampling, _max = client.commands[-1][1]
    assert client.commands[-1][0] == "generate"
    return request_id, messages


def _reply(qtbot, chat, client, text: str) -> None:
    """The fake model answers the last request with `text`."""
    request_id, _ = _last_generate(client)
    client.emit(p.TokenText(request_id=request_id, text=text))
    client.emit(done(request_id))
    qtbot.waitUntil(lambda: chat.request_id != request_id, timeout=WAIT_MS)


def _ask(qtbot, chat, bridge, tmp_path, question="What is 2 + 3.5?"):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    chat.input.setPlainText(question)
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    return client


def test_the_tools_are_listed_and_offered_to_the_model(qtbot, chat, bridge, tmp_path):
    assert chat.tools_panel.list.count() == 4
    assert "4 of 4 tools on" in chat.tools_panel.status.text()
    chat.tools_panel.list.item(0).setCheckState(Qt.CheckState.Unchecked)  # add: off
    client = _ask(qtbot, chat, bridge, tmp_path)
    _, messages = _last_generate(client)
    # The fake model's template does not render tools: they are described in the system message.
    assert messages[0].role == "system" and "example__echo" in messages[0].content
    assert "example__add" not in messages[0].content
    stored = chat.session.store.conversation(chat.session.conversation_id).settings
    assert stored["tools_off"] == "example__add"  # kept with the chat
    chat.new_chat()
    assert chat.tools_panel.turned_off == set()  # a new chat offers them all
    chat.open_conversation(chat.session.store.conversations()[0].id)
    assert chat.tools_panel.turned_off == {"example__add"}


def test_an_allowed_call_runs_and_the_model_gets_its_result(qtbot, chat, bridge, tmp_path):
    client = _ask(qtbot, chat, bridge, tmp_path)
    _reply(qtbot, chat, client, "Let me add." + _call("example__add", a=2, b=3.5))
    qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
    assert "example__add" in chat.tool_approval.question.text()
    assert '{"a": 2, "b": 3.5}' in chat.tool_approval.question.text()
    row = chat.model.entries()[-1]
    assert row.role == "tool" and row.tool.state == ToolState.ASKING and '"b": 3.5' in row.text
    assert not chat.send_button.isEnabled() and chat.stop_button.isEnabled()
    generates = client.names().count("generate")

    chat.tool_approval.allow_once.click()
    qtbot.waitUntil(lambda: client.names().count("generate") == generates + 1, timeout=WAIT_MS)
    row = chat.model.entries()[-2]  # the call, then the model's next reply streaming
    assert (row.tool.state, row.tool.result) == (ToolState.DONE, "5.5")
    assert "**Result**" in row.text and row.footer.startswith("Ran in")
    _, messages = _last_generate(client)
    assert (messages[-1].role, messages[-1].content) == ("tool", "5.5")
    assert messages[-1].tool_call_id == row.tool.call_id
    # The reply shows what it said; its call is the row after it, and is written back for a
    # template without tools in the form the model was asked for.
    assert chat.model.entries()[1].text == "Let me add."
    assert messages[-2].content.startswith('Let me add.<tool_call>\n{"name": "example__add"')
    _reply(qtbot, chat, client, "2 + 3.5 = 5.5.")
    assert chat.model.entries()[-1].text == "2 + 3.5 = 5.5." and chat.send_button.isEnabled()

    # Kept with the chat: opened again, the call is there with its result.
    chat_id = chat.session.conversation_id
    chat.new_chat()
    chat.open_conversation(chat_id)
    roles = [(e.role, e.tool.state if e.tool else None) for e in chat.model.entries()]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("tool", ToolState.DONE),
        ("assistant", None),
    ]


def test_a_template_that_renders_tools_gets_them_as_tools(qtbot, chat, bridge, tmp_path):
    bridge.load(p.ModelParams(path=str(tmp_path / "m.gguf")))
    client = client_of(bridge)
    client.emit(replace(model_loaded(tmp_path / "m.gguf"), template_takes_tools=True))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    chat.input.setPlainText("What is 2 + 3.5?")
    qtbot.keyClick(chat.input, Qt.Key.Key_Return)
    _, messages = _last_generate(client)
    offered = json.loads(client.fitting[-1]["tools_json"])
    assert {t["function"]["name"] for t in offered} == {
        "example__add",
        "example__echo",
        "example__fail",
        "example__hang",
    }
    assert [m.role for m in messages] == ["user"]  # no description in a system message
    _reply(qtbot, chat, client, _call("example__add", a=1, b=2))
    qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
    chat.tool_approval.allow_once.click()
    qtbot.waitUntil(lambda: client.names().count("generate") == 2, timeout=WAIT_MS)
    _, messages = _last_generate(client)
    assistant, result = messages[-2:]
    assert assistant.content == "" and json.loads(assistant.tool_calls_json)[0]["id"] == (
        result.tool_call_id
    )
    assert (result.role, result.content) == ("tool", "3.0")


def test_a_denied_call_does_not_run_and_the_model_is_told(qtbot, chat, bridge, tmp_path):
    client = _ask(qtbot, chat, bridge, tmp_path)
    _reply(qtbot, chat, client, _call("example__echo", text="secret"))
    qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
    chat.tool_approval.deny.click()
    assert not chat.tool_approval.isVisible()
    row = chat.model.entries()[-2]
    assert row.tool.state == ToolState.REFUSED and "not allowed" in row.footer
    _, messages = _last_generate(client)
    assert messages[-1].content == REFUSED_TEXT
    _reply(qtbot, chat, client, "I was not allowed to.")
    assert chat.send_button.isEnabled()


def test_always_and_never_are_not_asked_again_in_this_chat(qtbot, chat, bridge, tmp_path):
    client = _ask(qtbot, chat, bridge, tmp_path)
    _reply(qtbot, chat, client, _call("example__echo", text="a"))
    qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
    chat.tool_approval.allow_always.click()
    qtbot.waitUntil(lambda: not chat.tools_busy and chat.request_id is not None, timeout=WAIT_MS)
    _reply(qtbot, chat, client, _call("example__echo", text="b") + _call("example__add", a=1, b=1))
    # echo runs without asking; add asks.
    qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
    assert "example__add" in chat.tool_approval.question.text()
    chat.tool_approval.never.click()
    qtbot.waitUntil(lambda: not chat.tools_busy and chat.request_id is not None, timeout=WAIT_MS)
    states = [(e.tool.name, e.tool.state, e.tool.result) for e in chat.model.entries() if e.tool]
    assert states == [
        ("example__echo", ToolState.DONE, "a"),
        ("example__echo", ToolState.DONE, "b"),
        ("example__add", ToolState.REFUSED, ""),
    ]


def test_a_hanging_tool_times_out_with_a_message_and_the_chat_goes_on(
    qtbot, chat, catalog, bridge, tmp_path
):
    catalog.timeout_s = 0.3
    client = _ask(qtbot, chat, bridge, tmp_path)
    _reply(qtbot, chat, client, _call("example__hang"))
    qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
    generates = client.names().count("generate")
    chat.tool_approval.allow_once.click()
    qtbot.waitUntil(lambda: client.names().count("generate") == generates + 1, timeout=WAIT_MS)
    row = chat.model.entries()[-2]
    assert row.tool.state == ToolState.FAILED
    assert "did not finish running hang within 0.3 s" in row.tool.result
    assert "did not finish" in row.text  # shown in the chat
    _, messages = _last_generate(client)
    assert "did not finish" in messages[-1].content  # and the model is told


def test_a_failing_tool_gives_its_error_to_the_model(qtbot, chat, bridge, tmp_path):
    client = _ask(qtbot, chat, bridge, tmp_path)
    _reply(qtbot, chat, client, _call("example__fail", reason="disk on fire"))
    qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
    chat.tool_approval.allow_once.click()
    qtbot.waitUntil(lambda: not chat.tools_busy, timeout=WAIT_MS)
    row = [e for e in chat.model.entries() if e.tool][-1]
    assert row.tool.state == ToolState.DONE and row.tool.failed and "fail" in row.tool.result
    assert "**Error**" in row.text


def test_stop_ends_a_call_waiting_for_its_answer(qtbot, chat, bridge, tmp_path):
    client = _ask(qtbot, chat, bridge, tmp_path)
    _reply(qtbot, chat, client, _call("example__echo", text="x") + _call("example__add", a=1, b=2))
    qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
    generates = client.names().count("generate")
    chat.stop_button.click()
    states = [e.tool.state for e in chat.model.entries() if e.tool]
    assert states == [ToolState.STOPPED, ToolState.STOPPED]
    assert not chat.tool_approval.isVisible() and chat.send_button.isEnabled()
    assert client.names().count("generate") == generates  # the model was not asked again


def test_the_round_limit_ends_the_calls(qtbot, chat, bridge, tmp_path, monkeypatch):
    monkeypatch.setattr("app.chat.tool_replies.RoundCounter", lambda: RoundCounter(1))
    client = _ask(qtbot, chat, bridge, tmp_path)
    _reply(qtbot, chat, client, _call("example__echo", text="1"))
    qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
    chat.tool_approval.allow_always.click()
    qtbot.waitUntil(lambda: not chat.tools_busy and chat.request_id is not None, timeout=WAIT_MS)
    _reply(qtbot, chat, client, _call("example__echo", text="2"))
    qtbot.waitUntil(lambda: chat.request_id is not None, timeout=WAIT_MS)
    assert [e.tool.state for e in chat.model.entries() if e.tool] == [
        ToolState.DONE,
        ToolState.LIMIT,
    ]
    _reply(qtbot, chat, client, _call("example__echo", text="3"))  # past the limit: not run
    assert not chat.tools_busy and chat.send_button.isEnabled()
    assert len([e for e in chat.model.entries() if e.tool]) == 2


def test_a_remote_engine_gets_the_tools_and_the_results_the_openai_way(
    qtbot, chat, catalog, tmp_path
):
    from engine.remote.endpoints import RemoteChoice

    from .openai_stand_in import OpenAIStandIn

    with OpenAIStandIn(pieces=("It is 5.5.",)) as server:
        server.tool_calls = [[("example__add", '{"a": 2, "b": 3.5}')]]
        chat.engine_source.use_remote(RemoteChoice(server.url + "/v1", "remote-model"), "")
        chat.input.setPlainText("What is 2 + 3.5?")
        qtbot.keyClick(chat.input, Qt.Key.Key_Return)
        qtbot.waitUntil(chat.tool_approval.isVisible, timeout=WAIT_MS)
        chat.tool_approval.allow_once.click()
        qtbot.waitUntil(lambda: len(server.requests) == 2 and not chat.generating, timeout=WAIT_MS)
    first, second = server.requests
    assert {t["function"]["name"] for t in first["tools"]} >= {"example__add", "example__hang"}
    _user, assistant, result = second["messages"]
    (call,) = assistant["tool_calls"]
    assert call["function"] == {"name": "example__add", "arguments": '{"a": 2, "b": 3.5}'}
    assert result == {
        "role": "tool",
        "content": "5.5",
        "tool_call_id": call["id"],
        "name": "example__add",
    }
    assert chat.model.entries()[-1].text == "It is 5.5."
