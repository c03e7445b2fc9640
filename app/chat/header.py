"""The strip above the transcript: the conversation's title, a warning when the model's own chat
template was refused, how full the context is, the button that shows the chat settings, and, for
a model without a chat template (a base model), what its chats are formatted with: plain
completion or one of llama.cpp's built-in formats."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.chat.model_picker import ModelPicker
from app.common.accessibility import named
from app.common.file_text import plain_tooltip
from engine.runtime import protocol as p

WARN_FRACTION = 0.8


class ChatHeader(QWidget):
    format_chosen = Signal(str)  # a chat format picked for a model without a template

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("chatHeader")
        self.title = QLabel("New chat")
        self.title.setObjectName("chatTitle")
        self.title.setTextFormat(Qt.TextFormat.PlainText)  # a title is the person's own words
        self.title.setMinimumWidth(1)  # a long title is cut, never a reason to widen the page
        self.template_warning = QLabel("⚠ Chat template refused")
        self.template_warning.setObjectName("templateWarning")
        self.template_warning.setTextFormat(Qt.TextFormat.PlainText)
        self.template_warning.hide()
        self.context_bar = QProgressBar()
        self.context_bar.setObjectName("contextBar")
        self.context_bar.setTextVisible(False)
        self.context_bar.setFixedSize(90, 6)
        self.context_label = QLabel()
        self.context_label.setObjectName("contextUsage")
        self.settings_button = QPushButton("Settings")
        self.settings_button.setObjectName("chatSettingsButton")
        self.settings_button.setCheckable(True)
        self.settings_button.setToolTip("System prompt, sampling and context policy")
        # Shown when the chat list has given way to a narrow page or the settings: the way back.
        self.chats_button = QPushButton("Chats")
        self.chats_button.setObjectName("chatsButton")
        self.chats_button.setCheckable(True)
        self.chats_button.setToolTip("Show the list of chats")
        self.chats_button.hide()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(18, 8, 12, 6)
        layout.setSpacing(8)
        self.model_picker = ModelPicker()
        layout.addWidget(self.chats_button)
        layout.addWidget(self.title, 1)
        layout.addWidget(self.model_picker)
        layout.addWidget(self.template_warning)
        self.format_note = QLabel("No chat template:")
        self.format_note.setObjectName("chatFormatNote")
        self.format_note.setToolTip(
            "This model file has no chat template (often a base model, which continues text "
            "rather than chatting). Choose how the conversation is given to it: plain "
            "completion continues your text; a chat format may suit a fine-tuned model."
        )
        self.chat_format = named(QComboBox(), "Chat format")
        self.chat_format.setObjectName("chatFormat")
        self.chat_format.activated.connect(
            lambda _i: self.format_chosen.emit(self.chat_format.currentData())
        )
        layout.addWidget(self.format_note)
        layout.addWidget(self.chat_format)
        self.show_formats(None)
        layout.addWidget(self.context_label)
        layout.addWidget(self.context_bar)
        layout.addWidget(self.settings_button)
        self.set_usage(0, 0)

    def show_template(self, template: str, problem: str) -> None:
        """The format chats are written in; `problem` (why the model's own template was refused,
        and the advice to distrust the file) shows the warning, with both in its tooltip."""
        self.template_warning.setVisible(bool(problem))
        self.template_warning.setToolTip(
            plain_tooltip(problem, "", f"Chats are written in {template}.") if problem else ""
        )

    def set_usage(self, used: int | None, n_ctx: int) -> None:
        """`used` of `n_ctx` tokens are taken by the conversation (n_ctx 0: no model; used
        None: not counted by the loaded model yet, which has not answered in this
        conversation)."""
        if n_ctx <= 0:
            self.context_label.setText("No model")
            self.context_bar.setRange(0, 1)
            self.context_bar.setValue(0)
            self.context_label.setToolTip("")
            return
        if used is None:
            self.context_label.setText(f"Context – / {n_ctx:,}")
            self.context_bar.setRange(0, n_ctx)
            self.context_bar.setValue(0)
            self.context_label.setToolTip(
                "Counted by the loaded model at its first reply in this conversation (another "
                "model's count was for another tokenizer)."
            )
            return
        used = min(used, n_ctx)
        self.context_bar.setRange(0, n_ctx)
        self.context_bar.setValue(used)
        percent = round(100 * used / n_ctx)
        self.context_label.setText(f"Context {used:,} / {n_ctx:,} ({percent}%)")
        full = used >= WARN_FRACTION * n_ctx
        self.context_bar.setProperty("warn", full)
        self.context_bar.style().unpolish(self.context_bar)
        self.context_bar.style().polish(self.context_bar)
        self.context_label.setToolTip(
            "The conversation is close to the model's context length; older turns will "
            "not fit much longer."
            if full
            else "Tokens of the model's context this conversation uses."
        )

    def show_formats(self, loaded: p.ModelLoaded | None, chosen: str | None = None) -> None:
        """Offer the formats for a model without a chat template; hide them otherwise."""
        offer = loaded is not None and not loaded.own_chat_template
        self.format_note.setVisible(offer)
        self.chat_format.setVisible(offer)
        self.chat_format.clear()
        if not offer:
            return
        self.chat_format.addItem("Plain completion", p.PLAIN_COMPLETION)
        for name in loaded.builtin_formats:
            suffix = " (suggested)" if name == loaded.suggested_format else ""
            self.chat_format.addItem(f"Chat format: {name}{suffix}", name)
        wanted = chosen or loaded.suggested_format or p.PLAIN_COMPLETION
        index = self.chat_format.findData(wanted)
        self.chat_format.setCurrentIndex(max(index, 0))

    def current_format(self) -> str:
        """What Generate.chat_format should say: "" (the model's own template) unless offered."""
        if not self.chat_format.isVisibleTo(self) or self.chat_format.count() == 0:
            return ""
        return self.chat_format.currentData() or ""
