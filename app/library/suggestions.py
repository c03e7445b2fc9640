"""The Library's "Suggested for this machine": on the first visit with a connection, a handful
of good models from the catalogue (engine/hub/suggestions.py), each with its fit badge, ready to
download. Offline, or without a connection, it says so in one quiet line and stays out of the way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from app.common.accessibility import named
from app.common.background import TaskRunner
from app.library.widgets import size_text
from engine.hub.client import HubClient
from engine.hub.fit import DOES_NOT_FIT, FITS, FITS_WITH_OFFLOAD
from engine.hub.suggestions import CatalogueEntry, Suggestion, suggest
from engine.planner import PlanRequest

DATA = Qt.ItemDataRole.UserRole
BADGE_COLOURS = {FITS: "#2e7d32", FITS_WITH_OFFLOAD: "#b26a00", DOES_NOT_FIT: "#c62828"}
LOOKING = "Looking for models that suit this machine…"
NO_CONNECTION = "Suggestions need a connection to the Hugging Face Hub."
NONE_FIT = "None of the suggested models fits this machine; search the Hub for smaller ones."


class SuggestedModels(QWidget):
    def __init__(
        self,
        *,
        runner: TaskRunner,
        client_factory: Callable[[], HubClient],
        plan_request: Callable[[], PlanRequest],
        catalogue: Callable[[], Sequence[CatalogueEntry]],
        download: Callable[[Any], None],
    ) -> None:
        super().__init__()
        self.setObjectName("suggestedModels")
        self._runner = runner
        self._client_factory = client_factory
        self._plan_request = plan_request
        self._catalogue = catalogue
        self._download = download
        self.asked = False
        self.note = QLabel()
        self.note.setObjectName("suggestionsNote")
        self.note.setWordWrap(True)
        self.tree = named(QTreeWidget(), "Suggested models")
        self.tree.setObjectName("suggestionsTree")
        self.tree.setHeaderLabels(["Model", "Size", "Fit", "Why"])
        self.tree.setRootIsDecorated(False)
        self.tree.setColumnWidth(0, 260)
        self.tree.setColumnWidth(1, 80)
        self.tree.setColumnWidth(2, 130)
        self.tree.setMaximumHeight(150)
        self.tree.itemDoubleClicked.connect(lambda item, _col: self._download(item.data(0, DATA)))
        self.tree.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addWidget(self.tree)

    def ask_once(self) -> None:
        """Look the catalogue up (the first time only: fits do not change within a session)."""
        if self.asked:
            return
        self.asked = True
        self.note.setText(LOOKING)

        def work() -> list[Suggestion]:
            return suggest(self._client_factory(), self._plan_request(), self._catalogue())

        self._runner.run(work, self._show)

    def selected(self) -> Suggestion | None:
        item = self.tree.currentItem()
        return item.data(0, DATA) if item is not None else None

    def _show(self, result: list[Suggestion] | Exception) -> None:
        if isinstance(result, Exception):
            self.note.setText(NO_CONNECTION)
            self.note.setToolTip(getattr(result, "message", str(result)))
            return
        if not result:
            self.note.setText(NONE_FIT)
            return
        self.note.setText(
            "Suggested for this machine (double-click, or select and Download, to get one):"
        )
        self.tree.clear()
        for suggestion in result:
            badge = suggestion.badge
            item = QTreeWidgetItem(
                [
                    suggestion.entry.name,
                    size_text(suggestion.model.size),
                    badge.text,
                    suggestion.entry.why,
                ]
            )
            item.setData(0, DATA, suggestion)
            item.setToolTip(0, f"{suggestion.entry.repo_id} · {suggestion.entry.filename}")
            item.setToolTip(2, badge.detail)
            if badge.verdict in BADGE_COLOURS:
                item.setForeground(2, QBrush(QColor(BADGE_COLOURS[badge.verdict])))
            self.tree.addTopLevelItem(item)
        self.tree.show()
