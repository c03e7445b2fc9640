"""Replies with tools: after a reply that asks for tool calls, each call is shown in the
transcript with its arguments and runs only once the person allows it (the bar above the
message box: once, always for this tool, deny, never); its result is fed back and the model
answers again, until it answers without calls or the reply's limit on rounds is reached.

The rules are engine/tools/approval.py's; each call runs off the GUI thread with a deadline
(app/chat/tool_catalog.py), so a tool that hangs or fails ends its row with a message and the
model is told, never a frozen chat. Stop ends the calls still waiting. Mixed into ChatView.
"""

from __future__ import annotations

import json

from app.chat.conversation_model import ChatEntry, entry_messages, sent_entries
from app.chat.tool_approval import ToolApprovalBar
from app.chat.tool_catalog import ToolCatalog
from app.chat.tool_servers import ToolServersDialog
from app.chat.tools_panel import ToolsPanel
from engine.runtime import protocol as p
from engine.server.tool_calls import parse_tool_calls
from engine.tools.approval import (
    Answer,
    Decision,
    RoundCounter,
    ToolCall,
    ToolPermissions,
    offered_tools,
    tool_definitions,
)
from engine.tools.client import ToolInfo, ToolResult
from engine.tools.transcript import (
    ToolRecord,
    ToolState,
    model_messages,
    record_markdown,
    status_line,
)

ROLE_TOOL = "tool"
TOOLS_OFF = "tools_off"
TOOL_AUTHOR = "Tool"


class ToolReplies:
    """Needs the ChatView's model, session, settings panel and `_start_reply`."""

    def _init_tools(self, catalog: ToolCatalog | None) -> None:
        self.tool_catalog = catalog or ToolCatalog(self)
        self.tools_panel = ToolsPanel(self.tool_catalog, self.settings_panel)
        # In the settings drawer, under the chat's own settings (before its closing stretch).
        panel_layout = self.settings_panel.layout()
        panel_layout.insertWidget(panel_layout.count() - 1, self.tools_panel)
        self.tools_panel.servers_button.clicked.connect(self.open_tool_servers)
        self.tools_panel.turned_off_changed.connect(self._save_tools_off)
        self.tool_approval = ToolApprovalBar(self)
        self.tool_approval.answered.connect(self._on_tool_answer)
        self._permissions = ToolPermissions()
        self._tool_rounds: RoundCounter | None = None  # the rounds of the reply being written
        self._tool_limit_hit = False
        self._tool_offered: dict[str, ToolInfo] = {}
        self._tool_queue: list[dict] = []  # calls of this round not yet asked about
        self._tool_row: int | None = None  # the call being asked about or run
        self._tool_parent: int | None = None  # the stored message the next one follows
        self._tool_epoch = 0  # bumped by Stop: a result that comes later is dropped
        self.tool_catalog.refresh()

    @property
    def tools_busy(self) -> bool:
        """A round of calls is under way (asking, or a tool running)."""
        return self._tool_row is not None or bool(self._tool_queue)

    def open_tool_servers(self) -> None:
        dialog = ToolServersDialog(self.tool_catalog.server_list, self)
        dialog.saved.connect(self.tool_catalog.refresh)
        dialog.exec()

    def reset_tools_for_chat(self, settings: dict | None = None) -> None:
        """Another chat is open (`settings`: its own): its tools on/off, and nothing allowed
        "always" yet."""
        self._permissions = ToolPermissions()
        off = (settings or {}).get(TOOLS_OFF)
        self.tools_panel.set_turned_off(off.split(",") if isinstance(off, str) and off else ())

    def _save_tools_off(self) -> None:
        chat_id = self.session.conversation_id
        if chat_id is not None:
            settings = self.session.store.conversation(chat_id).settings
            self.session.store.set_settings(chat_id, self.with_tools_off(settings))

    def with_tools_off(self, settings: dict) -> dict:
        """`settings` with this chat's tools turned off (kept with the chat, as one line of
        offered names, which hold no comma: a chat file's settings are short text or numbers)."""
        settings = {k: v for k, v in settings.items() if k != TOOLS_OFF}
        off = ",".join(sorted(self.tools_panel.turned_off))
        return {**settings, TOOLS_OFF: off} if off else settings

    # -- the conversation the model is shown ----------------------------------------------------

    def messages_for_reply(
        self, system_prompt: str, *, native: bool
    ) -> tuple[list[p.ChatMessage], str, list[dict]]:
        """(messages, tools JSON for the local template, the tools offered) for a reply."""
        self._tool_offered = offered_tools(self.tool_catalog.tools, self.tools_panel.turned_off)
        tools = tool_definitions(self._tool_offered)
        entries = sent_entries(self.model.entries())
        system = [p.ChatMessage(role="system", content=system_prompt)] if system_prompt else []
        messages = system + entry_messages(entries)
        records = [None] * len(system) + [e.tool for e in entries]
        shown, tools_json = model_messages(messages, records, tools, native=native)
        return shown, tools_json, tools

    # -- after a reply --------------------------------------------------------------------------

    def tool_calls_in(self, reply: str) -> list[dict] | None:
        """The calls a finished reply asks for, when tools were offered and may still run."""
        if not self._tool_offered or self._tool_limit_hit:
            return None
        return parse_tool_calls(reply)

    def tools_after_reply(self, row: int, calls: list[dict] | None) -> None:
        """The reply at `row` has ended: run the `calls` it asks for, if any."""
        entry = self.model.entry(row)
        if not calls or entry.message_id is None:
            self._end_tool_rounds()
            return
        if self._tool_rounds is None:
            self._tool_rounds = RoundCounter()
        self._tool_parent = entry.message_id
        if not self._tool_rounds.take():
            # Past the limit: each call is answered with the limit, and the model answers once
            # more without running any.
            self._tool_limit_hit = True
            for raw in calls:
                record = _record_of(raw)
                self._finish_call(self._append_call(record), record.finish(ToolState.LIMIT, ""))
            self._start_reply(self._tool_parent)
            return
        self._tool_queue = list(calls)
        self._next_call()

    def _next_call(self) -> None:
        if not self._tool_queue:
            self._tool_row = None
            self._update_buttons()
            self._start_reply(self._tool_parent)  # the model answers with the results
            return
        record = _record_of(self._tool_queue.pop(0))
        row = self._append_call(record)
        self._tool_row = row
        call = ToolCall(record.name, record.arguments)
        decision = self._permissions.decide(call, self._tool_offered)
        self._update_buttons()
        if decision is Decision.ASK:
            self.tool_approval.ask(call)
            self.follower.jump_to_latest()
            return
        self._decided(row, decision)

    def _on_tool_answer(self, answer: Answer) -> None:
        row = self._tool_row
        if row is None or self.model.entry(row).tool is None:
            return
        self.tool_approval.hide()
        self.input.setFocus()
        record = self.model.entry(row).tool
        self._decided(
            row, self._permissions.answer(ToolCall(record.name, record.arguments), answer)
        )

    def _decided(self, row: int, decision: Decision) -> None:
        record = self.model.entry(row).tool
        if decision is not Decision.RUN:
            self._finish_call(row, record.finish(ToolState.REFUSED, ""))
            self._next_call()
            return
        self._show_call(row, record.finish(ToolState.RUNNING, ""))
        epoch = self._tool_epoch
        self.tool_catalog.run(
            self._tool_offered[record.name],
            record.arguments,
            lambda result: self._tool_ran(epoch, row, result),
        )

    def _tool_ran(self, epoch: int, row: int, result) -> None:
        if epoch != self._tool_epoch:
            return  # stopped meanwhile: the row already says so
        record = self.model.entry(row).tool
        if isinstance(result, Exception):  # failed to run, or took too long
            self._finish_call(row, record.finish(ToolState.FAILED, str(result), failed=True))
        else:
            done, seconds = result
            assert isinstance(done, ToolResult)
            finished = record.finish(ToolState.DONE, done.text, failed=done.failed, seconds=seconds)
            self._finish_call(row, finished)
        self._next_call()

    def stop_tools(self) -> None:
        """Stop: the call being asked about or run, and those after it, end as stopped."""
        self._tool_epoch += 1
        self.tool_approval.hide()
        rows = [self._tool_row] if self._tool_row is not None else []
        rows += [self._append_call(_record_of(raw)) for raw in self._tool_queue]
        for row in rows:
            self._finish_call(row, self.model.entry(row).tool.finish(ToolState.STOPPED, ""))
        self._tool_queue = []
        self._tool_row = None
        self._end_tool_rounds()
        self._update_buttons()

    def _end_tool_rounds(self) -> None:
        self._tool_rounds = None
        self._tool_limit_hit = False

    # -- rows -----------------------------------------------------------------------------------

    def _append_call(self, record: ToolRecord) -> int:
        return self.model.append(
            ChatEntry(
                role=ROLE_TOOL,
                text=record_markdown(record),
                author=f"{TOOL_AUTHOR} · {record.name}",
                footer=status_line(record),
                tool=record,
            )
        )

    def _show_call(self, row: int, record: ToolRecord) -> None:
        self.model.update(
            row, text=record_markdown(record), footer=status_line(record), tool=record
        )

    def _finish_call(self, row: int, record: ToolRecord) -> None:
        """Show the call's end and keep it in the store, after the message before it."""
        self._show_call(row, record)
        chat_id = self.session.conversation_id
        if chat_id is None:
            return
        message_id = self.session.store.add_message(
            chat_id, ROLE_TOOL, record.to_json(), parent_id=self._tool_parent
        )
        self._tool_parent = message_id
        self.model.update(row, message_id=message_id)


def _record_of(raw: dict) -> ToolRecord:
    function = raw["function"]
    return ToolRecord(raw["id"], function["name"], json.loads(function["arguments"]))
