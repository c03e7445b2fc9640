"""The question above the message box when the model asks to run a tool: the call and its
arguments, and four answers (once, always for this tool, deny, never for this tool)."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.common.accessibility import named
from engine.tools.approval import Answer, ToolCall
from engine.untrusted_text import printable_line

MAX_ARGUMENT_CHARS = 300


class ToolApprovalBar(QFrame):
    answered = Signal(object)  # engine.tools.approval.Answer

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("toolApproval")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.question = QLabel("")
        self.question.setObjectName("toolApprovalQuestion")
        self.question.setWordWrap(True)
        self.question.setTextFormat(Qt.TextFormat.PlainText)  # the model's arguments: not HTML
        self.allow_once = named(QPushButton("Allow once"), "Allow this tool call once")
        self.allow_always = named(QPushButton("Always allow"), "Always allow this tool")
        self.deny = named(QPushButton("Deny"), "Deny this tool call")
        self.never = named(QPushButton("Never allow"), "Never allow this tool")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for button, answer in (
            (self.allow_once, Answer.ONCE),
            (self.allow_always, Answer.ALWAYS),
            (self.deny, Answer.DENY),
            (self.never, Answer.NEVER),
        ):
            button.clicked.connect(lambda _=False, a=answer: self.answered.emit(a))
            row.addWidget(button)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.addWidget(self.question)
        layout.addLayout(row)
        self.hide()

    def ask(self, call: ToolCall) -> None:
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        if len(arguments) > MAX_ARGUMENT_CHARS:
            arguments = arguments[:MAX_ARGUMENT_CHARS] + "…"
        self.question.setText(
            f"The model wants to run {printable_line(call.name)} with {printable_line(arguments)}."
        )
        self.allow_always.setToolTip(f"Run {call.name} without asking for the rest of this chat")
        self.never.setToolTip(f"Refuse {call.name} without asking for the rest of this chat")
        self.show()
        self.allow_once.setFocus()
