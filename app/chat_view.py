"""The Chat page: the transcript, the message box, Send and Stop.

The conversation sent to the engine is exactly what is on screen (finished messages, failed replies
left out); the worker renders it with the model's chat template.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPoint, Qt
from PySide6.QtGui import QGuiApplication, QKeySequence, QPalette, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListView,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.banner import Banner
from app.chat_input import ChatInput
from app.conversation_model import (
    ROLE_ASSISTANT,
    ROLE_USER,
    ChatEntry,
    ConversationModel,
    stats_line,
)
from app.engine_bridge import STATE_GENERATING, STATE_IDLE, EngineBridge
from app.message_delegate import MessageDelegate
from engine.runtime import protocol as p

BOTTOM_SLACK_PX = 24  # within this distance of the end counts as "following the reply"


class TranscriptView(QListView):
    """A list view that repaints a changed row without laying out every row again.

    QListView answers any dataChanged by re-asking every row for its size. A streaming reply
    changes 30 times a second; with a long conversation that relayout would cost more than the
    decode it shows. Here a change only repaints its row, and the delegate asks for a relayout
    (sizeHintChanged) when the row's height really changed.
    """

    def dataChanged(self, top_left, bottom_right, roles=()) -> None:
        QAbstractItemView.dataChanged(self, top_left, bottom_right, roles)


class ChatView(QWidget):
    def __init__(self, bridge: EngineBridge, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setBackgroundRole(QPalette.ColorRole.Base)
        self.setAutoFillBackground(True)
        self._bridge = bridge
        self.sampling = p.SamplingParams()
        self.max_tokens = 512
        self.assistant_name = "Assistant"
        self._request_id: int | None = None
        self._reply_row: int | None = None

        self.notice = Banner(self)
        self.notice.setObjectName("chatNotice")

        self.model = ConversationModel(self)
        self.transcript = TranscriptView(self)
        self.transcript.setObjectName("transcript")
        self.transcript.setModel(self.model)
        self.transcript.setFrameShape(QFrame.Shape.NoFrame)
        self.transcript.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.transcript.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.transcript.setResizeMode(QListView.ResizeMode.Adjust)
        self.transcript.setUniformItemSizes(False)
        self.transcript.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.transcript.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.transcript.customContextMenuRequested.connect(self._show_context_menu)
        self.delegate = MessageDelegate(self.transcript)
        self.transcript.setItemDelegate(self.delegate)
        # A reply that grows may change its row's height; the delegate relayouts only then.
        self.model.dataChanged.connect(
            lambda top_left, _bottom_right, _roles=(): self.delegate.row_changed(top_left)
        )
        self.model.modelReset.connect(self.delegate.clear_cache)

        self.input = ChatInput(self)
        self.input.setObjectName("chatInput")
        self.input.submitted.connect(self.send)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setDefault(True)
        self.send_button.setToolTip("Send (Enter)")
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopButton")
        self.stop_button.setToolTip("Stop the reply (Esc)")
        self.stop_button.clicked.connect(self.stop)
        self.new_chat_button = QPushButton("New chat")
        self.new_chat_button.setObjectName("newChatButton")
        self.new_chat_button.setFlat(True)
        self.new_chat_button.clicked.connect(self.new_chat)

        composer = QFrame(self)
        composer.setObjectName("composer")
        composer_layout = QHBoxLayout(composer)
        composer_layout.setContentsMargins(6, 6, 6, 6)
        composer_layout.setSpacing(6)
        composer_layout.addWidget(self.input, 1)
        composer_layout.addWidget(self.stop_button, 0, Qt.AlignmentFlag.AlignBottom)
        composer_layout.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)

        hint = QLabel("Enter to send · Shift+Enter for a new line · Esc to stop")
        hint.setObjectName("composerHint")
        hints = QHBoxLayout()
        hints.setContentsMargins(4, 0, 0, 0)
        hints.addWidget(hint, 1)
        hints.addWidget(self.new_chat_button)

        bottom = QVBoxLayout()
        bottom.setContentsMargins(18, 6, 18, 8)
        bottom.setSpacing(2)
        bottom.addWidget(composer)
        bottom.addLayout(hints)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.notice)
        layout.addWidget(self.transcript, 1)
        layout.addLayout(bottom)

        stop_shortcut = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        stop_shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        stop_shortcut.activated.connect(self.stop)
        copy_shortcut = QShortcut(QKeySequence.StandardKey.Copy, self.transcript)
        copy_shortcut.setContext(Qt.ShortcutContext.WidgetShortcut)
        copy_shortcut.activated.connect(self.copy_selected)

        bridge.token_text.connect(self._on_token_text)
        bridge.generation_done.connect(self._on_generation_done)
        bridge.generation_failed.connect(self._on_generation_failed)
        bridge.command_failed.connect(self._on_command_failed)
        bridge.engine_crashed.connect(self._on_engine_crashed)
        bridge.state_changed.connect(self._update_buttons)
        self._update_buttons()

    # -- actions --------------------------------------------------------------------------------

    @property
    def generating(self) -> bool:
        return self._request_id is not None

    def send(self) -> None:
        text = self.input.toPlainText().strip()
        if not text or not self.send_button.isEnabled():
            return
        self.model.append(ChatEntry(role=ROLE_USER, text=text))
        request_id = self._bridge.generate(
            self.model.chat_messages(), sampling=self.sampling, max_tokens=self.max_tokens
        )
        self.input.clear()
        if request_id is None:
            self.model.append(
                ChatEntry(
                    role=ROLE_ASSISTANT,
                    text="",
                    author=self.assistant_name,
                    footer="The engine is not ready; wait for the model to load and try again.",
                    failed=True,
                )
            )
        else:
            self._request_id = request_id
            self._reply_row = self.model.append(
                ChatEntry(role=ROLE_ASSISTANT, text="", author=self.assistant_name, streaming=True)
            )
        self.transcript.scrollToBottom()
        self._update_buttons()

    def stop(self) -> None:
        if self.generating:
            self._bridge.stop()

    def new_chat(self) -> None:
        self.stop()
        self._end_reply()
        self.model.clear()
        self.input.setFocus()

    def copy_selected(self) -> None:
        index = self.transcript.currentIndex()
        if index.isValid():
            QGuiApplication.clipboard().setText(self.model.entry(index.row()).text)

    # -- engine events --------------------------------------------------------------------------

    def _on_token_text(self, request_id: int, text: str, _n_tokens: int) -> None:
        if request_id != self._request_id or self._reply_row is None:
            return
        follow = self._at_bottom()
        self.model.append_text(self._reply_row, text)
        if follow:
            self.transcript.scrollToBottom()

    def _on_generation_done(self, done: p.GenerationDone) -> None:
        if done.request_id == self._request_id:
            self._finish_reply(stats_line(done))

    def _on_generation_failed(self, failed: p.GenerationFailed) -> None:
        if failed.request_id == self._request_id:
            self._finish_reply(f"The reply failed: {failed.message}", failed=True)

    def _on_command_failed(self, failed: p.CommandFailed) -> None:
        if failed.command == "Generate" and self.generating:
            self._finish_reply(f"The engine could not reply: {failed.message}", failed=True)

    def _on_engine_crashed(self, _crash) -> None:
        if self.generating:
            self._finish_reply(
                "Interrupted: the engine process stopped. Reload the model to go on.", failed=True
            )

    def _finish_reply(self, footer: str, *, failed: bool = False) -> None:
        follow = self._at_bottom()
        if self._reply_row is not None:
            self.model.finish(self._reply_row, footer, failed=failed)
        self._end_reply()
        if follow:
            self.transcript.scrollToBottom()

    def _end_reply(self) -> None:
        self._request_id = None
        self._reply_row = None
        self._update_buttons()

    # -- helpers --------------------------------------------------------------------------------

    def _at_bottom(self) -> bool:
        bar = self.transcript.verticalScrollBar()
        return bar.value() >= bar.maximum() - BOTTOM_SLACK_PX

    def _update_buttons(self, *_args) -> None:
        state = self._bridge.state
        self.send_button.setEnabled(state == STATE_IDLE and not self.generating)
        self.stop_button.setEnabled(self.generating and state == STATE_GENERATING)

    def _show_context_menu(self, pos: QPoint) -> None:
        index: QModelIndex = self.transcript.indexAt(pos)
        if not index.isValid():
            return
        self.transcript.setCurrentIndex(index)
        menu = QMenu(self)
        menu.addAction("Copy message", self.copy_selected)
        menu.exec(self.transcript.viewport().mapToGlobal(pos))
