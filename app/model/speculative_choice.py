"""The Model page's "Speculative decoding" row: off, prompt lookup, a draft model (a file of the
same family), or the model's own MTP layers when its file has them.

The row reads headers only (engine.gguf): a draft whose tokenizer plainly differs is refused here
with the reason, before any load; the worker compares the vocabularies token by token when it
loads both. The draft's memory (engine.planner.draft) is set aside from the budget the main model
is planned against, and said under the row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.common.accessibility import named
from app.common.file_text import show_plain
from app.model.memory_bar import gib
from engine.gguf import GGUFError, read_model_info
from engine.gguf.model_info import ModelInfo
from engine.planner.draft import (
    SpeculativeMemory,
    mtp_layers,
    reserve,
    speculation_memory,
    tokenizer_mismatch,
)
from engine.planner.records import PlanRequest
from engine.runtime.protocol import SpeculativeParams

METHODS = (
    ("Off", "off"),
    ("Prompt lookup", "prompt_lookup"),
    ("Draft model", "draft_model"),
    ("MTP (the model's own layers)", "mtp"),
    ("Automatic (where measured faster)", "auto"),
)
WHAT_EACH_DOES = {
    "off": "",
    "prompt_lookup": "Drafts from the conversation itself: fast on edits, quotes and summaries.",
    "draft_model": "A small model of the same family drafts; the model checks its guesses.",
    "mtp": "The model's own multi-token-prediction layers draft.",
    "auto": "Prompt lookup where the engine's own trial on this model says it is faster "
    "(the Hearth engine measures once per model); off on llama.cpp.",
}


def _choose_gguf(parent: QWidget) -> str | None:
    path, _ = QFileDialog.getOpenFileName(parent, "Choose the draft model", "", "GGUF (*.gguf)")
    return path or None


class SpeculativeChoice(QWidget):
    changed = Signal()

    def __init__(
        self,
        choose_file: Callable[[QWidget], str | None] = _choose_gguf,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self._choose_file = choose_file
        self._main: ModelInfo | None = None
        self._draft: ModelInfo | None = None
        self._draft_path = ""
        self._problem = ""
        self.method = named(QComboBox(), "Speculative decoding")
        for label, method in METHODS:
            self.method.addItem(label, method)
        self.method.setToolTip(
            "Replies come faster where the drafts are kept; the text is the same"
        )
        self.draft_button = QPushButton("Choose draft model…")
        self.draft_name = QLabel()
        self.note = QLabel()
        self.note.setObjectName("speculativeNote")
        self.note.setWordWrap(True)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.method)
        row.addWidget(self.draft_button)
        row.addWidget(self.draft_name, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.note)
        self.method.currentIndexChanged.connect(self._method_changed)
        self.draft_button.clicked.connect(self.choose_draft)
        self._method_changed()

    # -- the model and the draft --------------------------------------------------------------

    def set_model(self, info: ModelInfo) -> None:
        """The main model: MTP is offered only when its file declares MTP layers."""
        self._main = info
        n = mtp_layers(info)
        item = self.method.model().item(self.method.findData("mtp"))
        item.setEnabled(n > 0)
        item.setText(f"MTP ({n} layer{'s' if n != 1 else ''} in this model)" if n else
                     "MTP (not in this model)")  # fmt: skip
        if n == 0 and self.selected() == "mtp":
            self.method.setCurrentIndex(0)
        if self._draft_path:
            self.set_draft(self._draft_path)
        self._method_changed()

    def choose_draft(self) -> None:
        path = self._choose_file(self)
        if path:
            self.set_draft(path)

    def set_draft(self, path: str | Path) -> None:
        self._draft_path = str(path)
        self._draft, self._problem = None, ""
        try:
            self._draft = read_model_info(self._draft_path)
        except (GGUFError, OSError) as exc:
            self._problem = f"{Path(path).name} is not a readable GGUF model: {exc}"
        if self._draft is not None and self._main is not None:
            why = tokenizer_mismatch(self._main, self._draft)
            if why:
                self._draft = None
                self._problem = (
                    f"{Path(path).name} cannot draft for this model: {why}. Choose a small "
                    "model of the same family."
                )
        show_plain(self.draft_name, Path(path).name)
        self._method_changed()

    # -- what the page asks -------------------------------------------------------------------

    def selected(self) -> str:
        return self.method.currentData()

    def params(self) -> SpeculativeParams:
        """What the load asks for: off while a draft model is chosen but not usable."""
        method = self.selected()
        if method == "draft_model" and self._draft is None:
            return SpeculativeParams()
        draft = self._draft_path if method == "draft_model" else ""
        return SpeculativeParams(method=method, draft_path=draft)

    def reserve(
        self, request: PlanRequest, *, n_ctx: int, kv_type: str, flash_attn: bool, on_gpu: bool
    ) -> PlanRequest:
        """`request` less what speculation takes (the draft model, the checked logits)."""
        memory = self.memory(request, n_ctx=n_ctx, kv_type=kv_type, flash_attn=flash_attn,
                             on_gpu=on_gpu)  # fmt: skip
        self._show_memory(memory)
        return request if memory is None else reserve(request, memory)

    def memory(
        self, request: PlanRequest, *, n_ctx: int, kv_type: str, flash_attn: bool, on_gpu: bool
    ) -> SpeculativeMemory | None:
        if self._main is None:
            return None
        if not on_gpu:  # the main model runs on the CPU: so do the drafter's extras
            request = replace(request, gpus=())
        return speculation_memory(self._main, self.params(), request, n_ctx=n_ctx,
                                  kv_type=kv_type, flash_attn=flash_attn,
                                  draft=self._draft)  # fmt: skip

    # -- showing ------------------------------------------------------------------------------

    def _method_changed(self, *_args) -> None:
        method = self.selected()
        drafting = method == "draft_model"
        self.draft_button.setVisible(drafting)
        self.draft_name.setVisible(drafting)
        if drafting and not self._draft_path:
            self.draft_name.setText("no file chosen")
        self._show_memory(None)
        self.changed.emit()

    def _show_memory(self, memory: SpeculativeMemory | None) -> None:
        method = self.selected()
        text = WHAT_EACH_DOES.get(method, "")
        if method == "draft_model" and self._problem:
            text = self._problem
        elif method == "draft_model" and self._draft is None:
            text = "Choose a small GGUF of the same family (the same tokenizer)."
        elif memory is not None and memory.weights_bytes:
            text += (
                f" Draft model: {gib(memory.weights_bytes)} of weights and "
                f"{gib(memory.kv_bytes)} of KV cache, set aside from the budget."
            )
        elif method == "mtp" and memory is not None:
            text += (
                f" Set aside from the budget: {gib(memory.logits_bytes)} for a whole batch of "
                f"output rows and {gib(memory.kv_bytes)} for the MTP layers' KV cache."
            )
        self.note.setText(text)
        self.note.setVisible(bool(text))
