"""The list of conversations beside the chat: new, search, rename (double-click or menu), export,
delete.

It reads and writes the store directly; the chat page listens for which conversation to show and
for the one it shows being deleted.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtWidgets import (
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.common.accessibility import named
from engine.chat.store import ConversationStore

IdRole = Qt.ItemDataRole.UserRole + 1

# Local to the sidebar, in palette roles, so it follows the light or dark system theme.
STYLE = """
QWidget#conversationSidebar { background: palette(window); border-right: 1px solid palette(mid); }
QListWidget#conversationList { border: none; background: transparent; outline: 0; }
QListWidget#conversationList::item { padding: 6px 8px; border-radius: 6px; margin: 1px 0; }
QListWidget#conversationList::item:selected {
    background: palette(highlight); color: palette(highlighted-text);
}
QLineEdit#conversationSearch {
    padding: 5px 8px; border-radius: 6px; border: 1px solid palette(mid);
    background: palette(base);
}
QPushButton#sidebarNewChat {
    padding: 6px 10px; border-radius: 6px; font-weight: bold;
    border: 1px solid palette(mid); background: palette(base);
}
"""


class ConversationSidebar(QWidget):
    chosen = Signal(int)  # a conversation id to show
    new_requested = Signal()
    deleted = Signal(int)
    export_requested = Signal(int)  # a conversation id to save to a file

    def __init__(self, store: ConversationStore, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("conversationSidebar")
        self.setFixedWidth(220)
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setStyleSheet(STYLE)
        self._store = store
        self._current: int | None = None
        self._refreshing = False

        self.new_button = QPushButton("+  New chat")
        self.new_button.setObjectName("sidebarNewChat")
        self.new_button.setToolTip("New chat (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        self.search = named(QLineEdit(), "Search chats")
        self.search.setObjectName("conversationSearch")
        self.search.setPlaceholderText("Search chats")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _text: self.refresh())
        self.list = named(QListWidget(), "Chats")
        self.list.setObjectName("conversationList")
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._show_menu)
        self.list.itemClicked.connect(self._on_clicked)
        self.list.itemChanged.connect(self._on_item_renamed)
        self.list.setEditTriggers(QListWidget.EditTrigger.DoubleClicked)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 10, 6, 10)
        layout.setSpacing(8)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        self.refresh()

    def set_current(self, conversation_id: int | None) -> None:
        self._current = conversation_id
        self.refresh()

    def titles(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def refresh(self) -> None:
        self._refreshing = True
        try:
            self.list.clear()
            for chat in self._store.conversations(self.search.text()):
                item = QListWidgetItem(chat.title or "Untitled chat")
                item.setData(IdRole, chat.id)
                item.setToolTip(chat.title)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                self.list.addItem(item)
                if chat.id == self._current:
                    self.list.setCurrentItem(item)
        finally:
            self._refreshing = False

    def rename(self, conversation_id: int, title: str) -> None:
        title = " ".join(title.split())
        if title:
            self._store.rename(conversation_id, title)
        self.refresh()

    def delete(self, conversation_id: int) -> None:
        self._store.delete_conversation(conversation_id)
        self.refresh()
        self.deleted.emit(conversation_id)

    def _on_clicked(self, item: QListWidgetItem) -> None:
        self.chosen.emit(int(item.data(IdRole)))

    def _on_item_renamed(self, item: QListWidgetItem) -> None:
        if not self._refreshing:
            self.rename(int(item.data(IdRole)), item.text())

    def _show_menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        conversation_id = int(item.data(IdRole))
        menu = QMenu(self)
        menu.addAction("Rename", lambda: self.list.editItem(item))
        menu.addAction("Export…", lambda: self.export_requested.emit(conversation_id))
        menu.addAction("Delete…", lambda: self._confirm_delete(conversation_id, item.text()))
        menu.exec(self.list.viewport().mapToGlobal(pos))

    def _confirm_delete(self, conversation_id: int, title: str) -> None:
        answer = QMessageBox.question(
            self,
            "Delete chat",
            f"Delete “{title}” and all its messages? This cannot be undone.",
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.delete(conversation_id)
