"""The Library page's list of local models: load, delete, import (picker or drop), and the
models folder. Scans and imports read GGUF headers, so they run on the pool."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.common.accessibility import named
from app.common.background import TaskRunner, side_pool
from app.common.file_text import plain_tooltip
from app.library.widgets import size_text
from engine.gguf.summary import summary_lines
from engine.hub.fit import FitBadge, local_fit_badge
from engine.hub.library import BUNDLED, IMPORTED, Library, LocalModel
from engine.hub.settings import HubSettings, save_settings
from engine.planner import PlanRequest
from engine.untrusted_text import printable_line

DATA = Qt.ItemDataRole.UserRole
REMEMBERED = ("n_ctx", "n_gpu_layers", "flash_attn")  # what a load settled, shown again later
WHERE = {IMPORTED: "opened from its folder", BUNDLED: "comes with Hearth (demo)"}


def button(text: str, name: str, slot: Callable[[], Any]) -> QPushButton:
    widget = QPushButton(text)
    widget.setObjectName(name)
    widget.clicked.connect(slot)
    return widget


UNVERIFIED_NOTE = (
    "Not verified: the Hub listed no sha256 for this file, so only its size and GGUF structure "
    "were checked when it was downloaded (see docs/library.md)."
)


class LocalModelsView(QWidget):
    def __init__(
        self,
        *,
        settings: HubSettings,
        library: Library,
        runner: TaskRunner,
        load_model: Callable[[Path], Any],
        plan_request: Callable[[], PlanRequest | None] | None = None,
        show_status: Callable[..., None],
    ) -> None:
        super().__init__()
        self.settings = settings
        self.library = library
        self.runner = runner
        self.load_model = load_model
        # For the Fits column: the machine as the window knows it, None until it does (the
        # column fills when it is known: refresh_fits), never a detection of its own.
        self.plan_request = plan_request
        self._fits_runner = TaskRunner(self, side_pool())  # never ahead of a scan
        self.show_status = show_status
        self.confirm: Callable[[str], bool] = self._ask
        self.models: list[LocalModel] = []
        # Scans run on a pool of threads and may finish out of order: only the latest is shown.
        self._scan_generation = 0

        self.tree = named(QTreeWidget(), "Your models")
        self.tree.setObjectName("localTree")
        self.tree.setHeaderLabels(["Model", "Quant", "Size", "Where", "Last used", "Fits here"])
        self.tree.setColumnWidth(0, 300)
        self.tree.setRootIsDecorated(False)
        self.tree.itemDoubleClicked.connect(lambda *_: self.load_selected())
        self.folder_label = QLabel(f"Models folder: {settings.models_dir}")
        self.folder_label.setObjectName("folderLabel")
        buttons = QHBoxLayout()
        buttons.addWidget(button("Load", "loadButton", self.load_selected))
        buttons.addWidget(button("Delete", "deleteButton", self.delete_selected))
        buttons.addWidget(button("Import…", "importButton", self.import_dialog))
        buttons.addWidget(button("Refresh", "refreshButton", self.refresh))
        buttons.addStretch(1)
        buttons.addWidget(self.folder_label)
        buttons.addWidget(button("Change…", "folderButton", self.choose_folder))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tree, 1)
        layout.addLayout(buttons)

    def refresh(self) -> None:
        self._scan_generation += 1
        generation = self._scan_generation
        self.runner.run(self.library.scan, lambda result: self._on_scanned(result, generation))

    def _find_fits(self, models: list[LocalModel], generation: int) -> None:
        """Fill the Fits column after the list is shown (the machine may still be detected):
        each model's fit on this machine, the Hub list's badge (what the load policy would do)."""
        plan_request = self.plan_request
        if plan_request is None:
            return

        request = plan_request()  # here, on the GUI thread: the pool never touches Qt objects
        if request is None:
            return

        def fits() -> dict[Path, FitBadge]:
            return {m.path: local_fit_badge(m.info, request) for m in models if m.info}

        self._fits_runner.run(fits, lambda result: self._show_fits(result, generation))

    def refresh_fits(self, *_args) -> None:
        """The Fits column again (the machine is known now, or changed)."""
        self._find_fits(self.models, self._scan_generation)

    def _show_fits(self, fits: dict[Path, FitBadge] | Exception, generation: int) -> None:
        if generation != self._scan_generation or isinstance(fits, Exception):
            return  # a newer list is shown; or no fits (the list itself is what matters)
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            badge = fits.get(item.data(0, DATA).path)
            if badge is not None:
                item.setText(5, badge.text)
                item.setToolTip(5, plain_tooltip(badge.detail))

    def _on_scanned(self, result: list[LocalModel] | Exception, generation: int = 0) -> None:
        if generation != self._scan_generation:
            return  # an older scan that finished late: a newer one is on its way
        if isinstance(result, Exception):
            return self.show_status(f"Could not list your models: {result}", error=True)
        self.models = result
        self.tree.clear()
        for model in result:
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(model.last_used or 0))
            where = model.repo_id or WHERE.get(model.source, model.source)
            if model.unverified:
                where += " · unverified"
            quant = f"{model.quant} + vision" if model.projector else model.quant
            item = QTreeWidgetItem(
                [
                    printable_line(model.name),
                    quant,
                    size_text(model.size),
                    where,
                    used if model.last_used else "never",
                    "",  # Fits here: _find_fits
                ]
            )
            item.setData(0, DATA, model)
            summary = summary_lines(model.info)[:8] if model.info is not None else []
            remembered = ", ".join(f"{k} {v}" for k, v in sorted(model.settings.items()))
            if remembered:
                summary.append(f"Last loaded with {remembered}")
            if model.projector is not None:
                summary.append(f"Vision projector: {model.projector.name}")
            lines = [model.error] if model.error else [str(model.path), *summary]
            if model.unverified:
                lines.insert(0, UNVERIFIED_NOTE)
            item.setToolTip(0, plain_tooltip(*lines))  # the file's own text, shown as written
            if model.unverified:
                item.setToolTip(3, plain_tooltip(UNVERIFIED_NOTE))
            self.tree.addTopLevelItem(item)
        self._find_fits(result, generation)

    def remember_loaded(self, loaded: Any) -> None:
        """Connected to the bridge's model_loaded (a ModelLoaded): every model that loads, from
        wherever it was opened (File › Open, a drop, --model, this list), is listed from now
        on, with when and with what settings it was loaded."""
        settings = {key: getattr(loaded, key) for key in REMEMBERED}
        path = Path(loaded.path).resolve()
        if any(model.path.resolve() == path for model in self.models):
            self.library.mark_used(path, settings)
        else:
            self.library.remember_opened(path, settings)
        self.refresh()

    def selected(self) -> LocalModel | None:
        item = self.tree.currentItem()
        return item.data(0, DATA) if item is not None else None

    def load_selected(self) -> None:
        model = self.selected()
        if model is None:
            return self.show_status("Choose one of your models to load.")
        if model.error:
            return self.show_status(f"Can't load {model.name}: {model.error}", error=True)
        # "Last used" is set when it has loaded (remember_loaded): a refused model was not used.
        self.load_model(model.path)
        self.refresh()

    def delete_selected(self) -> None:
        model = self.selected()
        if model is None:
            return
        if model.source == BUNDLED:
            return self.show_status(f"{model.name} comes with Hearth; it cannot be deleted.")
        if not model.deletable and model.source != IMPORTED:
            return self.show_status(
                f"{model.name} is in the Hugging Face cache, shared with other programs. "
                "Remove it with `hf cache delete`.",
                error=True,
            )
        action = "Delete" if model.deletable else "Forget"
        if not self.confirm(f"{action} {model.name} ({size_text(model.size)})?"):
            return
        try:
            self.library.delete(model)
        except Exception as exc:
            return self.show_status(getattr(exc, "message", str(exc)), error=True)
        self.refresh()

    def _ask(self, text: str) -> bool:
        answer = QMessageBox.question(self, "Library", text)
        return answer == QMessageBox.StandardButton.Yes

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Import model", str(Path.home()), "GGUF models (*.gguf)"
        )
        if path:
            self.import_paths([Path(path)])

    def import_paths(self, paths: Iterable[Path]) -> None:
        paths = list(paths)

        def work() -> list[str]:
            errors = []
            for path in paths:
                try:
                    self.library.import_file(path)
                except Exception as exc:
                    errors.append(getattr(exc, "message", str(exc)))
            return errors

        def done(errors: list[str] | Exception) -> None:
            if isinstance(errors, Exception):
                errors = [str(errors)]
            if errors:
                self.show_status(" ".join(errors), error=True)
            else:
                self.show_status(f"Imported {len(paths)} model file(s).")
            self.refresh()

        self.runner.run(work, done)

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(
            self, "Models folder", str(self.settings.models_dir)
        )
        if folder:
            self.set_models_folder(Path(folder))

    def set_models_folder(self, folder: Path) -> None:
        """Saved now; used from the next start, so downloads in flight finish where they began."""
        save_settings(self.settings.with_models_dir(folder))
        self.folder_label.setText(f"Models folder: {folder} (from the next start)")
        self.show_status(f"New downloads will go to {folder} after Hearth restarts.")
