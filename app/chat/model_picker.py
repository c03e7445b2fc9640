"""The model picker in the chat header: the library's models, each with whether it fits this
machine, the loaded one shown; choosing one asks the window to open it (and so the load policy
decides how, or refuses it with a banner).

The list and the fits are worked out off the GUI thread (`pick_list`), by the same badge the
Library shows (engine.hub.fit.local_fit_badge), so the two never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QWidget

from app.common.accessibility import named
from app.common.background import TaskRunner, side_pool
from engine.hub.fit import local_fit_badge
from engine.hub.library import LocalModel
from engine.planner import PlanRequest

PROMPT = "Choose a model…"


@dataclass(frozen=True)
class PickItem:
    path: Path
    label: str  # "Qwen3-8B-Q4_K_M.gguf — Fits"
    detail: str  # the badge's detail, for the tooltip


def pick_list(models: Sequence[LocalModel], request: PlanRequest) -> list[PickItem]:
    """The picker's entries: each readable model with its fit on the machine of `request`."""
    items = []
    for model in models:
        if model.info is None:
            continue  # its header could not be read: the Library page says why
        badge = local_fit_badge(model.info, request)
        items.append(PickItem(model.path, f"{model.name} — {badge.text}", badge.detail))
    return items


class ModelPicker(QComboBox):
    chosen = Signal(object)  # the Path of the model picked

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        named(self, "Model")
        self.setObjectName("modelPicker")
        self.setToolTip("The model this chat talks to; choose another to load it")
        # a long file name must not widen the header (the chat list and the settings drawer
        # give way to the header's minimum): the box keeps ~8 characters, the list shows all
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(8)
        self._loaded: Path | None = None
        self._scan: Callable[[], Sequence[LocalModel]] | None = None
        self._request: Callable[[], PlanRequest | None] = lambda: None
        # Results in flight are dropped with the picker; the work waits its turn on side_pool.
        self._runner = TaskRunner(self, side_pool())
        self.activated.connect(self._on_activated)
        self.set_items([])

    def list_from(
        self, scan: Callable[[], Sequence[LocalModel]], request: Callable[[], PlanRequest | None]
    ) -> None:
        """Where the list comes from: `scan` (the library), with the fits on `request()` (the
        window's machine; None while it is detected). `refresh` then fills it."""
        self._scan, self._request = scan, request
        self.refresh()

    def refresh(self, *_args) -> None:
        """The list again, off the GUI thread (connected to the machine's and the engine's
        signals: as a bound method, Qt drops the connection when the picker goes)."""
        request, scan = self._request(), self._scan
        if request is None or scan is None:
            return
        self._runner.run(lambda: pick_list(scan(), request), self._on_listed)

    def show_loaded_model(self, loaded) -> None:
        """Connected to the bridge's model_loaded."""
        self.show_loaded(loaded.path)

    def _on_listed(self, result) -> None:
        if not isinstance(result, Exception):
            self.set_items(result)

    def set_items(self, items: Sequence[PickItem]) -> None:
        self.blockSignals(True)
        self.clear()
        self.addItem(PROMPT, None)
        for item in items:
            self.addItem(item.label, item.path)
            self.setItemData(self.count() - 1, item.detail, 3)  # Qt.ToolTipRole
        self.blockSignals(False)
        self.show_loaded(self._loaded)

    def show_loaded(self, path: Path | None) -> None:
        """Select the loaded model (the prompt when it is not in the list)."""
        self._loaded = Path(path) if path is not None else None
        index = 0
        for i in range(1, self.count()):
            if self._loaded is not None and _same(self.itemData(i), self._loaded):
                index = i
        self.blockSignals(True)
        self.setCurrentIndex(index)
        self.blockSignals(False)

    def _on_activated(self, index: int) -> None:
        path = self.itemData(index)
        if path is not None and not (self._loaded and _same(path, self._loaded)):
            self.chosen.emit(path)
        self.show_loaded(self._loaded)  # what shows is what is loaded, until it has loaded


def _same(a: Path, b: Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b
