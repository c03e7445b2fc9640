"""Builds the Library page for the main window: settings, library, download queue, Hub client.

The queue's thread lives as long as the application; on quit the download in flight is paused
(its `.part` kept) and resumes at the next start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QApplication, QWidget

from app.common.background import QueueBridge
from app.library.panel import LibraryPanel
from engine.hub.client import HubClient
from engine.hub.library import Library
from engine.hub.queue import DownloadQueue
from engine.hub.settings import HubSettings, load_settings
from engine.planner import PlanRequest
from engine.session import snapshot_machine
from engine.starter_model import starter_model_path

if TYPE_CHECKING:
    from app.common.page_host import PageHost


def machine_plan_request(window: PageHost) -> PlanRequest:
    """The window's shared snapshot of the machine, the same one the Model page plans from
    (detected here, on the pool thread that asks, only if the window has none yet)."""
    snapshot = window.machine.snapshot
    return (snapshot or snapshot_machine()).plan_request()


def known_plan_request(window: PageHost) -> PlanRequest | None:
    """The window's snapshot of the machine, or None while it is being detected."""
    snapshot = window.machine.snapshot
    return snapshot.plan_request() if snapshot is not None else None


def is_offline(settings: HubSettings) -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return settings.offline or flag in ("1", "true", "yes", "on")


def create_library_panel(window: PageHost, settings: HubSettings | None = None) -> QWidget:
    settings = settings or load_settings()
    offline = is_offline(settings)
    if offline != settings.offline:
        settings = HubSettings(settings.models_dir, offline, settings.scan_hf_cache)
    bridge = QueueBridge()
    queue = DownloadQueue(
        settings.models_dir, on_change=bridge.job_changed.emit, on_done=bridge.job_done.emit
    )
    queue.restore()
    starter = starter_model_path()
    library = Library(
        settings.models_dir,
        scan_hf_cache=settings.scan_hf_cache,
        bundled=(starter,) if starter is not None else (),
    )

    def load(path: Path) -> None:
        window.open_model_file(path)  # the window's checks and the load policy

    panel = LibraryPanel(
        settings=settings,
        library=library,
        queue=queue,
        bridge=bridge,
        client_factory=HubClient,
        plan_request=lambda: machine_plan_request(window),
        load_model=load,
        known_machine=lambda: known_plan_request(window),
    )
    bridge.setParent(panel)
    # a bound slot of the view: Qt drops the connection when the page is deleted
    window.bridge.model_loaded.connect(panel.local_view.remember_loaded)
    window.machine.changed.connect(panel.local_view.refresh_fits)
    if not offline:
        queue.start()
    app = QApplication.instance()
    if app is not None:
        app.aboutToQuit.connect(lambda: queue.shutdown(timeout=5.0))
    panel.destroyed.connect(lambda *_: queue.shutdown(timeout=0.5))
    return panel
