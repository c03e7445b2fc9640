"""The strip above the transcript: the conversation's title, how full the context is, and the
button that shows the chat settings."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

WARN_FRACTION = 0.8


class ChatHeader(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("chatHeader")
        self.title = QLabel("New chat")
        self.title.setObjectName("chatTitle")
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
        layout = QHBoxLayout(self)
        layout.setContentsMargins(18, 8, 12, 6)
        layout.setSpacing(8)
        layout.addWidget(self.title, 1)
        layout.addWidget(self.context_label)
        layout.addWidget(self.context_bar)
        layout.addWidget(self.settings_button)
        self.set_usage(0, 0)

    def set_usage(self, used: int, n_ctx: int, *, estimated: bool = False) -> None:
        """`used` of `n_ctx` tokens are taken by the conversation (n_ctx 0: no model);
        `estimated`: counted from the text, not by the loaded model (it has not answered in
        this conversation yet)."""
        if n_ctx <= 0:
            self.context_label.setText("No model")
            self.context_bar.setRange(0, 1)
            self.context_bar.setValue(0)
            self.context_label.setToolTip("")
            return
        used = min(used, n_ctx)
        self.context_bar.setRange(0, n_ctx)
        self.context_bar.setValue(used)
        percent = round(100 * used / n_ctx)
        about = "≈" if estimated else ""
        self.context_label.setText(f"Context {about}{used:,} / {n_ctx:,} ({percent}%)")
        full = used >= WARN_FRACTION * n_ctx
        self.context_bar.setProperty("warn", full)
        self.context_bar.style().unpolish(self.context_bar)
        self.context_bar.style().polish(self.context_bar)
        tip = (
            "The conversation is close to the model's context length; older turns will "
            "not fit much longer."
            if full
            else "Tokens of the model's context this conversation uses."
        )
        if estimated:
            tip += " Estimated from the text: the loaded model counts it exactly at its reply."
        self.context_label.setToolTip(tip)
