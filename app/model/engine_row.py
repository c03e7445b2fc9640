"""The Model page's engine and KV cache controls: "Engine: llama.cpp / Hearth engine", and the K
and V cache types the chosen engine holds, each disabled with its reason where it cannot run.

llama.cpp holds f16, q8_0 and q4_0 with K and V alike (its GPU flash attention has kernels for
matching pairs only, engine/planner/backends.py); the Hearth engine holds f16, q8, rot4 and, for
K only, rot2, K and V chosen independently (engine/hearth/capabilities.py). What a model or
device cannot do comes from the same checks the planner and the worker use, so the page never
offers a load the engine would refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from app.common.accessibility import named
from engine.enums import KV_TYPES
from engine.hearth.capabilities import K_FORMATS, V_FORMATS
from engine.planner.engine_table import HEARTH, LLAMA

# A pair's problem for the loaded model on this machine (None: it can run).
PairCheck = Callable[[str, str], str | None]
_TIPS = {
    "f16": "16 bits a value: no loss",
    "q8_0": "about half the memory of f16, close to lossless",
    "q4_0": "about a quarter of the memory of f16, at a visible cost",
    "q8": "8.1 bits a value; closer to f16 than llama.cpp's q8_0",
    "rot4": "5 bits a value (rotated, 4-bit); K q8 with V rot4 matches llama.cpp's q8_0",
    "kivi4": "5 bits a value, K only (4-bit per channel, the newest 64 positions exact): with "
    "V rot4 as close to f16 as llama.cpp's q8_0 at 10 bits a pair; decodes slower than rot4",
    "rot2": "3 bits a value, K only: too lossy for most models (measured perplexity 82.6 "
    "against 24.1 on SmolLM2)",
}


def _select(combo: QComboBox, data: str) -> None:
    index = combo.findData(data)
    if index >= 0:
        combo.setCurrentIndex(index)


def _set_enabled(combo: QComboBox, index: int, enabled: bool, tip: str) -> None:
    model = combo.model()
    assert isinstance(model, QStandardItemModel)
    item = model.item(index)
    item.setEnabled(enabled)
    item.setToolTip(tip)


class EngineControls(QWidget):
    """Two rows' worth of widgets: `engine` (+ `note`) and `k_type`, `v_type`."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.engine = named(QComboBox(), "Engine")
        for key in (LLAMA, HEARTH):
            self.engine.addItem(key.display_name, key)
        self.note = QLabel()
        self.note.setObjectName("engineNote")
        self.note.setWordWrap(True)
        self.k_type = named(QComboBox(), "K cache type")
        self.v_type = named(QComboBox(), "V cache type")
        self.k_type.setToolTip("The key cache's type")
        self._hearth_reason: str | None = "no model loaded"
        self.has_gpu = True  # the panel says; the V box's reason names the GPU only where one is
        self._pair_problem: PairCheck = lambda _k, _v: None
        self._filling = False
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.engine)
        row.addWidget(self.note, 1)
        self._fill_types(LLAMA)
        self.engine.currentIndexChanged.connect(self._engine_changed)
        self.k_type.currentIndexChanged.connect(self._k_changed)
        self.v_type.currentIndexChanged.connect(self._emit)

    # -- what the model and the machine allow --------------------------------------------------

    def set_support(self, hearth_reason: str | None, pair_problem: PairCheck, note: str = ""):
        """`hearth_reason`: why the Hearth engine cannot run the model here (None: it can);
        `pair_problem`: why a Hearth K/V pair cannot; `note`: why Best fit chose its engine."""
        self._hearth_reason = hearth_reason
        self._pair_problem = pair_problem
        tip = (
            f"Not available: {hearth_reason}" if hearth_reason
            else "Hearth's own engine on its Triton kernels; the whole model on one GPU"
        )  # fmt: skip
        _set_enabled(self.engine, 1, hearth_reason is None, tip)
        self.note.setText(note)
        self.note.setVisible(bool(note))
        if hearth_reason and self.current_engine() == HEARTH:
            _select(self.engine, LLAMA)
        self._fill_types(self.current_engine())

    # -- values ----------------------------------------------------------------------------------

    def current_engine(self) -> str:
        return self.engine.currentData() or LLAMA

    def values(self) -> tuple[str, str, str]:
        """(engine, K type, V type)"""
        return self.current_engine(), self.k_type.currentData(), self.v_type.currentData()

    def set_values(self, engine: str, type_k: str, type_v: str | None) -> None:
        if engine == HEARTH and self._hearth_reason:
            engine, type_k, type_v = LLAMA, "f16", None  # a choice this machine cannot run
        self._filling = True
        try:
            _select(self.engine, engine)
            self._fill_types(self.current_engine())
            _select(self.k_type, type_k)
            self._fill_v(self.current_engine())
            _select(self.v_type, type_v or type_k)
        finally:
            self._filling = False

    # -- filling the lists ---------------------------------------------------------------------

    def _fill_types(self, engine: str) -> None:
        keep = self.k_type.currentData(), self.v_type.currentData()
        filling, self._filling = self._filling, True
        try:
            self._fill(self.k_type, K_FORMATS if engine == HEARTH else KV_TYPES, engine, "K")
            _select(self.k_type, keep[0])
            if self.k_type.currentIndex() < 0 or not self._usable(self.k_type):
                self.k_type.setCurrentIndex(0)
            self._fill_v(engine)
            _select(self.v_type, keep[1])
            if engine == LLAMA or not self._usable(self.v_type):
                _select(self.v_type, self.k_type.currentData())
        finally:
            self._filling = filling

    def _fill_v(self, engine: str) -> None:
        self._fill(self.v_type, V_FORMATS if engine == HEARTH else KV_TYPES, engine, "V")
        llama = engine == LLAMA
        self.v_type.setEnabled(not llama)
        if not llama:
            tip = "The value cache's type (independent of K on the Hearth engine)"
        elif self.has_gpu:
            tip = "llama.cpp's GPU flash attention runs matching K and V types only: V follows K"
        else:
            tip = "On llama.cpp Hearth keeps K and V of one type: V follows K"
        self.v_type.setToolTip(tip)

    def _fill(self, combo: QComboBox, types: Sequence[str], engine: str, role: str) -> None:
        combo.clear()
        for index, fmt in enumerate(types):
            combo.addItem(fmt, fmt)
            problem = None
            if engine == HEARTH:
                k = fmt if role == "K" else (self.k_type.currentData() or "f16")
                v = fmt if role == "V" else "f16"
                problem = self._pair_problem(k, v)
            tip = f"Not available: {problem}" if problem else _TIPS.get(fmt, "")
            _set_enabled(combo, index, problem is None, tip)

    def _usable(self, combo: QComboBox) -> bool:
        item = combo.model().item(combo.currentIndex())
        return item is not None and bool(item.flags() & Qt.ItemFlag.ItemIsEnabled)

    # -- reactions -------------------------------------------------------------------------------

    def _engine_changed(self) -> None:
        if self._filling:
            return
        self._fill_types(self.current_engine())
        self._emit()

    def _k_changed(self) -> None:
        if self._filling:
            return
        engine = self.current_engine()
        if engine == LLAMA:
            _select(self.v_type, self.k_type.currentData())
        else:
            keep = self.v_type.currentData()
            self._filling = True
            self._fill_v(engine)
            _select(self.v_type, keep)
            self._filling = False
        self._emit()

    def _emit(self, *_args) -> None:
        if not self._filling:
            self.changed.emit()
