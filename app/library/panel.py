"""The Library page: search the Hub, see each GGUF's fit before downloading, follow downloads,
and load, import or delete local models.

Every Hub call, header read, plan, scan and import runs on the thread pool (TaskRunner); the
download queue has its own thread and reports through QueueBridge's queued signals. Nothing
here blocks the GUI thread on the network or the disk.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, QTimer
from PySide6.QtGui import QBrush, QColor, QDragEnterEvent, QDropEvent, QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.common import banner as b
from app.common.accessibility import named
from app.common.background import QueueBridge, TaskRunner
from app.common.file_text import show_plain
from app.library.local import LocalModelsView, button
from app.library.suggestions import SuggestedModels
from app.library.widgets import DownloadRow, size_text
from engine.hub.catalog import ModelFile, by_quant, projector_for
from engine.hub.client import (
    SEARCH_TIMEOUT_S,
    HubClient,
    RepoFiles,
    RepoSummary,
    no_connection_message,
)
from engine.hub.fit import DOES_NOT_FIT, FITS, FITS_WITH_OFFLOAD, FitBadge, fit_badge
from engine.hub.library import Library
from engine.hub.paths import UnsafePath, library_path
from engine.hub.queue import DownloadQueue, Job
from engine.hub.settings import HubSettings
from engine.hub.suggestions import CatalogueEntry, Suggestion, load_catalogue
from engine.planner import PlanRequest

DATA = Qt.ItemDataRole.UserRole
BADGE_COLOURS = {FITS: "#2e7d32", FITS_WITH_OFFLOAD: "#b26a00", DOES_NOT_FIT: "#c62828"}
SORT_LABELS = {"Most downloaded": "downloads", "Most liked": "likes", "Recently updated": "recent"}
# The client gives up after SEARCH_TIMEOUT_S per step; this is the backstop should a step
# (a name lookup) not honour it.
SEARCH_DEADLINE_MS = int((SEARCH_TIMEOUT_S + 4) * 1000)


def split_sentence(text: str) -> tuple[str, str]:
    """ "What happened. What to do." -> ("What happened", "What to do."): a banner's title and
    text."""
    head, dot, rest = text.partition(". ")
    return (head, rest) if dot and rest else (text.rstrip("."), "")


def _unselect(tree: QTreeWidget) -> None:
    tree.setCurrentIndex(QModelIndex())
    tree.clearSelection()


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    font = label.font()
    font.setBold(True)
    label.setFont(font)
    return label


class LibraryPanel(QWidget):
    def __init__(
        self,
        *,
        settings: HubSettings,
        library: Library,
        queue: DownloadQueue,
        bridge: QueueBridge,
        client_factory: Callable[[], HubClient],
        plan_request: Callable[[], PlanRequest],
        load_model: Callable[[Path], Any],
        runner: TaskRunner | None = None,
        catalogue: Callable[[], Sequence[CatalogueEntry]] = load_catalogue,
        known_machine: Callable[[], PlanRequest | None] | None = None,
    ) -> None:
        super().__init__()
        self.setObjectName("libraryPanel")
        self.setAcceptDrops(True)
        self.settings = settings
        self.library = library
        self.queue = queue
        self.client_factory = client_factory
        self.load_model = load_model
        self.runner = runner or TaskRunner(self)
        self.rows: dict[str, DownloadRow] = {}
        self._plan_request = plan_request
        self._known_machine = known_machine  # the window's snapshot, for Your models' fits
        self._request: PlanRequest | None = None
        self._request_lock = threading.Lock()
        self._listing_generation = 0
        self._listing_projector: ModelFile | None = None  # the open listing's vision projector
        self._search_generation = 0  # a cancelled or late search's answer is dropped
        self._search_deadline = QTimer(self)
        self._search_deadline.setSingleShot(True)
        self._search_deadline.timeout.connect(self._on_search_deadline)
        self._catalogue = catalogue
        self._build()
        bridge.job_changed.connect(self._on_job_changed)
        bridge.job_done.connect(self._on_job_done)
        for job in queue.jobs():
            self._on_job_changed(job)
        self.set_offline(settings.offline)
        self.refresh_local()

    # -- layout ---------------------------------------------------------------------------------

    def _build(self) -> None:
        self.search_box = named(QLineEdit(), "Search the Hugging Face Hub")
        self.search_box.setObjectName("searchBox")
        self.search_box.setPlaceholderText("Search the Hugging Face Hub for GGUF models")
        self.search_box.returnPressed.connect(self.search)
        self.sort_box = named(QComboBox(), "Sort results by")
        self.sort_box.setObjectName("sortBox")
        self.sort_box.addItems(list(SORT_LABELS))
        self.search_button = button("Search", "searchButton", self.search)
        self.cancel_search_button = button("Cancel", "cancelSearchButton", self.cancel_search)
        self.cancel_search_button.hide()
        self.error_banner = b.Banner()
        self.error_banner.setObjectName("libraryError")
        self.status_label = QLabel()
        self.status_label.setObjectName("libraryStatus")
        self.status_label.setWordWrap(True)
        search_row = QHBoxLayout()
        search_row.addWidget(self.search_box, 1)
        search_row.addWidget(self.sort_box)
        search_row.addWidget(self.search_button)
        search_row.addWidget(self.cancel_search_button)

        self.suggestions = SuggestedModels(
            runner=self.runner,
            client_factory=self.client_factory,
            plan_request=self.plan_request,
            catalogue=self._catalogue,
            download=self._download_suggestion,
        )
        # Download takes what was chosen last: a suggestion or a file of the listing.
        self.suggestions.tree.itemClicked.connect(lambda *_: _unselect(self.files))
        self.results = named(QListWidget(), "Search results")
        self.results.setObjectName("resultsList")
        self.results.currentItemChanged.connect(self._on_result_selected)
        self.files = named(QTreeWidget(), "Files of the chosen model")
        self.files.setObjectName("filesTree")
        self.files.setHeaderLabels(["Model file", "Size", "Fit"])
        self.files.setColumnWidth(0, 320)
        self.files.itemDoubleClicked.connect(lambda *_: self.download_selected())
        self.files.itemClicked.connect(lambda *_: _unselect(self.suggestions.tree))
        self.repo_label = QLabel()
        self.repo_label.setObjectName("repoLabel")
        self.download_button = button("Download", "downloadButton", self.download_selected)
        files_box = QWidget()
        files_layout = QVBoxLayout(files_box)
        files_layout.setContentsMargins(0, 0, 0, 0)
        files_layout.addWidget(self.repo_label)
        files_layout.addWidget(self.files, 1)
        files_layout.addWidget(self.download_button, 0, Qt.AlignmentFlag.AlignRight)
        hub_split = QSplitter()
        hub_split.addWidget(self.results)
        hub_split.addWidget(files_box)
        hub_split.setStretchFactor(1, 2)

        self.downloads = QVBoxLayout()
        self.downloads.setSpacing(2)
        downloads_box = QWidget()
        downloads_box.setObjectName("downloadsBox")
        downloads_box.setLayout(self.downloads)

        self.local_view = LocalModelsView(
            settings=self.settings,
            library=self.library,
            runner=self.runner,
            load_model=self.load_model,
            plan_request=self._known_machine,
            show_status=self.show_status,
        )
        self.local = self.local_view.tree

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        outer.addWidget(self.error_banner)
        layout = QVBoxLayout()
        outer.addLayout(layout, 1)
        layout.setContentsMargins(24, 20, 24, 20)
        layout.addWidget(_heading("Find models on the Hub"))
        layout.addLayout(search_row)
        layout.addWidget(self.status_label)
        layout.addWidget(self.suggestions)
        layout.addWidget(hub_split, 3)
        layout.addWidget(_heading("Downloads"))
        layout.addWidget(downloads_box)
        layout.addWidget(_heading("Your models"))
        layout.addWidget(self.local_view, 2)

    def show_status(
        self,
        text: str,
        error: bool = False,
        actions: list[tuple[str, Callable[[], Any]]] | None = None,
    ) -> None:
        """A line under the search box; an error goes in the red banner above the page (its
        first sentence as the title) and stays until the next status replaces it."""
        if error:
            title, rest = split_sentence(text)
            self.error_banner.show_message(b.ERROR, title, rest, actions=actions or ())
            self.status_label.clear()
        else:
            self.error_banner.hide()
            show_plain(self.status_label, text)  # it quotes Hub and file names

    def set_offline(self, offline: bool) -> None:
        self.offline = offline
        for widget in (self.search_box, self.search_button, self.sort_box, self.download_button):
            widget.setEnabled(not offline)
        self.suggestions.setVisible(not offline)
        if offline:
            self.show_status("Offline: showing your local models only.")

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self.offline:
            self.suggestions.ask_once()  # the first visit: a handful of models that fit

    # -- the Hub --------------------------------------------------------------------------------

    def search(self) -> None:
        if self.offline:
            return
        text = self.search_box.text()
        sort = SORT_LABELS[self.sort_box.currentText()]
        self._search_generation += 1
        generation = self._search_generation
        self.show_status(f"Searching for “{text}”…" if text else "Searching…")
        self.search_button.setEnabled(False)
        self.cancel_search_button.show()
        self._search_deadline.start(SEARCH_DEADLINE_MS)
        self.runner.run(
            lambda: self.client_factory().search(text, sort=sort),
            lambda result: self._on_results(result, generation),
        )

    def searching(self) -> bool:
        return not self.cancel_search_button.isHidden()

    def cancel_search(self) -> None:
        """Stop waiting for the search (its answer, should it still come, is dropped)."""
        self._end_search()
        self.show_status("Search cancelled.")

    def _end_search(self) -> None:
        self._search_generation += 1
        self._search_deadline.stop()
        self.cancel_search_button.hide()
        self.search_button.setEnabled(not self.offline)

    def _on_search_deadline(self) -> None:
        self._end_search()
        endpoint = self.client_factory().endpoint
        self.show_status(
            no_connection_message(endpoint), error=True, actions=[("Search again", self.search)]
        )

    def _on_results(self, result: list[RepoSummary] | Exception, generation: int = 0) -> None:
        if generation != self._search_generation:
            return  # cancelled, timed out, or replaced by a newer search
        self._end_search()
        if isinstance(result, Exception):
            message = getattr(result, "message", str(result))
            return self.show_status(message, error=True, actions=[("Search again", self.search)])
        self.results.clear()
        for repo in result:
            license_text = f" · {repo.license}" if repo.license else ""
            gated = " · gated" if repo.gated else ""
            item = QListWidgetItem(
                f"{repo.repo_id}\n{repo.downloads:,} downloads · {repo.likes:,} likes"
                f"{license_text}{gated}"
            )
            item.setData(DATA, repo.repo_id)
            self.results.addItem(item)
        self.show_status(f"{len(result)} repositories." if result else "No GGUF repositories.")

    def _on_result_selected(self, item: QListWidgetItem | None, _previous=None) -> None:
        if item is not None:
            self.open_repo(item.data(DATA))

    def open_repo(self, repo_id: str) -> None:
        self._listing_generation += 1
        generation = self._listing_generation
        self.files.clear()
        self.repo_label.setText(f"{repo_id}: listing files…")
        self.runner.run(
            lambda: self.client_factory().repo_files(repo_id),
            lambda result: self._on_listing(result, generation),
        )

    def _on_listing(self, result: RepoFiles | Exception, generation: int) -> None:
        if generation != self._listing_generation:
            return  # another repository was chosen meanwhile
        if isinstance(result, Exception):
            self.repo_label.clear()
            return self.show_status(getattr(result, "message", str(result)), error=True)
        self._listing_projector = projector_for(result.models)
        license_text = result.license or "no license given"
        show_plain(self.repo_label, f"{result.repo_id} · license: {license_text}")
        for quant, models in by_quant(result.models).items():
            group = QTreeWidgetItem([quant, "", ""])
            group.setFlags(group.flags() & ~Qt.ItemFlag.ItemIsSelectable)
            self.files.addTopLevelItem(group)
            for model in models:
                item = QTreeWidgetItem([model.name, size_text(model.size), "…"])
                item.setData(0, DATA, model)
                group.addChild(item)
                if model.projector:
                    item.setText(2, "vision projector")
                else:
                    self._schedule_fit(model, item, generation)
            group.setExpanded(True)
        if not result.models:
            self.show_status(f"{result.repo_id} has no .gguf files.")

    def _schedule_fit(self, model: ModelFile, item: QTreeWidgetItem, generation: int) -> None:
        endpoint = self.client_factory().endpoint

        def work() -> FitBadge:
            return fit_badge(model, self.plan_request(), endpoint=endpoint)

        def done(badge: FitBadge | Exception) -> None:
            if generation != self._listing_generation:
                return
            if isinstance(badge, Exception):
                item.setText(2, "unknown")
                item.setToolTip(2, str(badge))
                return
            item.setText(2, badge.text)
            item.setData(2, DATA, badge.verdict)
            if badge.verdict in BADGE_COLOURS:
                item.setForeground(2, QBrush(QColor(BADGE_COLOURS[badge.verdict])))
            item.setToolTip(2, badge.detail)

        self.runner.run(work, done)

    def plan_request(self) -> PlanRequest:
        """The devices' plan request, built once (detection probes the drivers) on a pool
        thread."""
        with self._request_lock:
            if self._request is None:
                self._request = self._plan_request()
            return self._request

    def file_items(self) -> list[QTreeWidgetItem]:
        group_items = (self.files.topLevelItem(i) for i in range(self.files.topLevelItemCount()))
        return [g.child(j) for g in group_items for j in range(g.childCount())]

    def download_selected(self) -> None:
        item = self.files.currentItem()
        model = item.data(0, DATA) if item is not None else None
        suggestion = self.suggestions.selected()
        if not isinstance(model, ModelFile) and suggestion is not None:
            model = suggestion.model
        if not isinstance(model, ModelFile):
            return self.show_status("Choose a model file to download.")
        self._queue_download(model)

    def _download_suggestion(self, suggestion: Suggestion) -> None:
        self._queue_download(suggestion.model)

    def _queue_download(self, model: ModelFile) -> None:
        try:
            self.queue.add(model)
        except (UnsafePath, ValueError) as exc:
            return self.show_status(str(exc), error=True)
        projector = self._projector_to_fetch(model)
        if projector is not None:
            try:
                self.queue.add(projector)
            except (UnsafePath, ValueError):
                projector = None  # already queued or on its way: the model's download stands
        also = f" with its vision projector {projector.name}" if projector else ""
        self.show_status(f"Downloading {model.name}{also} into {self.settings.models_dir}.")

    def _projector_to_fetch(self, model: ModelFile) -> ModelFile | None:
        """The listing's vision projector, for a model of the same repository (the Library
        pairs them by folder, engine/hub/library.py); None when it is already on disk."""
        projector = self._listing_projector
        if projector is None or model.projector or projector.first.repo_id != model.first.repo_id:
            return None
        dest = library_path(self.settings.models_dir, projector.first.repo_id,
                            projector.first.filename)  # fmt: skip
        return None if dest.exists() else projector

    # -- downloads ------------------------------------------------------------------------------

    def _on_job_changed(self, job: Job) -> None:
        row = self.rows.get(job.id)
        if row is None:
            row = DownloadRow(
                job, pause=self.queue.pause, resume=self.queue.resume, cancel=self.queue.cancel
            )
            self.rows[job.id] = row
            self.downloads.addWidget(row)
        row.update_job(job)

    def _on_job_done(self, job: Job) -> None:
        self.library.record_download(
            job.path, job.repo_id, job.files[0].sha256, verified=job.verified
        )
        self.refresh_local()

    # -- local models ---------------------------------------------------------------------------

    def refresh_local(self) -> None:
        self.local_view.refresh()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [Path(u.toLocalFile()) for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            self.local_view.import_paths(paths)
            event.acceptProposedAction()
