"""What can be done to one message of the transcript: copy, regenerate, edit and resend, delete,
and switching between its versions (regenerated replies and edited messages are kept as siblings
in the store). Mixed into ChatView; the context menu offers them.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPoint
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMenu

from app.chat.conversation_model import ROLE_ASSISTANT, ROLE_USER
from app.chat.message_buttons import CONTINUE, COPY, EDIT, REGENERATE, cut_short
from app.common import banner as b


class MessageActions:
    """Needs the ChatView's model, session, transcript, input, notice and reply machinery."""

    def regenerate(self, row: int) -> None:
        """A new reply in place of the one at `row`; the old one stays as another version."""
        entry = self.model.entry(row)
        if entry.role != ROLE_ASSISTANT or self.generating or not self.send_button.isEnabled():
            return
        self.model.truncate(row)
        self._start_reply(self._last_message_id())

    def edit_message(self, row: int) -> None:
        """Put a user message back in the box; sending it starts a new branch from there."""
        entry = self.model.entry(row)
        if entry.role != ROLE_USER or self.generating:
            return
        self._editing_row = row
        self.input.setPlainText(entry.text)
        self.input.setFocus()
        self.edit_notice.show_message(
            b.INFO,
            "Editing a message",
            "Send to branch the conversation from here (the old version is kept). Esc cancels.",
        )

    def delete_message(self, row: int) -> None:
        if self.generating:
            return
        entry = self.model.entry(row)
        if entry.message_id is not None:
            self.session.store.delete_message(entry.message_id)
        self.model.remove(row)

    def show_version(self, row: int, step: int) -> None:
        """Show the previous (-1) or next (+1) version of the message at `row`."""
        entry = self.model.entry(row)
        if entry.message_id is None or self.generating:
            return
        store = self.session.store
        siblings = store.siblings(entry.message_id)
        target = siblings.index(entry.message_id) + step
        if 0 <= target < len(siblings):
            store.set_active_leaf(self.session.conversation_id, store.latest_leaf(siblings[target]))
            self.model.set_entries(self.session.entries(self.assistant_name))
            # The first message shown changed: the title follows (unless renamed).
            first_changed = row == 0 and entry.role == ROLE_USER
            if first_changed and self.session.retitle_for_first_message(
                entry.text, self.model.entry(0).text
            ):
                self._show_title()

    def _show_title(self) -> None:
        chat_id = self.session.conversation_id
        if chat_id is not None:
            self.header.title.setText(self.session.store.conversation(chat_id).title)
            self.sidebar.set_current(chat_id)

    def on_message_action(self, row: int, action: str) -> None:
        """A click on one of a message's actions in sight (message_buttons.py)."""
        if action == COPY:
            QGuiApplication.clipboard().setText(self.model.entry(row).text)
        elif action == REGENERATE:
            self.regenerate(row)
        elif action == EDIT:
            self.edit_message(row)
        elif action == CONTINUE:
            self.continue_reply(row)

    def copy_selected(self) -> None:
        index = self.transcript.currentIndex()
        if index.isValid():
            QGuiApplication.clipboard().setText(self.model.entry(index.row()).text)

    def _show_context_menu(self, pos: QPoint) -> None:
        index: QModelIndex = self.transcript.indexAt(pos)
        if not index.isValid():
            return
        self.transcript.setCurrentIndex(index)
        menu = self.context_menu(index.row())
        menu.exec(self.transcript.viewport().mapToGlobal(pos))

    def _show_text_menu(self, row: int, global_pos: QPoint, selected: str) -> None:
        """A right-click on a message's selectable text: the message's menu, with the
        selection's Copy first."""
        self.transcript.setCurrentIndex(self.model.index(row))
        self.context_menu(row, selected=selected).exec(global_pos)

    def context_menu(self, row: int, *, selected: str = "") -> QMenu:
        entry = self.model.entry(row)
        idle = not self.generating
        menu = QMenu(self)
        if selected:
            copy_part = menu.addAction("Copy selected text")
            copy_part.triggered.connect(lambda: QGuiApplication.clipboard().setText(selected))
        menu.addAction("Copy message", self.copy_selected)
        if entry.role == ROLE_ASSISTANT:
            regenerate = menu.addAction("Regenerate", lambda: self.regenerate(row))
            regenerate.setEnabled(idle and self.send_button.isEnabled())
            if row == self.model.rowCount() - 1 and cut_short(entry) and not entry.failed:
                go_on = menu.addAction("Continue", lambda: self.continue_reply(row))
                go_on.setEnabled(idle and self.send_button.isEnabled())
        else:
            menu.addAction("Edit and resend", lambda: self.edit_message(row)).setEnabled(idle)
        which, count = entry.branches
        if count > 1:
            menu.addSeparator()
            previous = menu.addAction(
                f"Previous version ({which}/{count})", lambda: self.show_version(row, -1)
            )
            previous.setEnabled(idle and which > 1)
            following = menu.addAction(
                f"Next version ({which}/{count})", lambda: self.show_version(row, +1)
            )
            following.setEnabled(idle and which < count)
        menu.addSeparator()
        menu.addAction("Delete message", lambda: self.delete_message(row)).setEnabled(idle)
        return menu
