"""Small pieces of the Library page: sizes and rates as text, and one download's row."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from app.common.file_text import show_plain
from engine.hub.queue import CANCELLED, DONE, FAILED, PAUSED, QUEUED, Job


def size_text(n: int | float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 90:
        return f"{seconds:.0f} s left"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min left"
    return f"{seconds / 3600:.1f} h left"


def job_status_text(job: Job) -> str:
    progress = job.progress
    if job.state == FAILED:
        return job.message or "Failed."
    if job.state == DONE:
        if not job.verified:  # the queue's message says why ("Not verified: ...")
            return f"Done · {size_text(job.size)} · {job.message or 'not verified'}"
        return f"Done · {size_text(job.size)} · sha256 verified"
    if job.state == CANCELLED:
        return "Cancelled"
    received = progress.done_bytes if progress is not None else job.received_bytes()
    text = f"{size_text(received)} of {size_text(job.size)}"
    if job.state == PAUSED:
        return f"Paused · {text}"
    if job.state == QUEUED:
        return f"Waiting · {text}"
    if progress is not None and progress.phase == "verifying":
        return "Checking the sha256…"
    if progress is not None and progress.rate_bps:
        text += f" · {size_text(progress.rate_bps)}/s · {eta_text(progress.eta_s)}"
    return text


class DownloadRow(QWidget):
    """A download: its name, a progress bar, its status, and pause/resume and cancel."""

    def __init__(
        self,
        job: Job,
        *,
        pause: Callable[[str], None],
        resume: Callable[[str], None],
        cancel: Callable[[str], None],
    ) -> None:
        super().__init__()
        self.setObjectName("downloadRow")
        self.job_id = job.id
        self._pause, self._resume = pause, resume
        self.title = QLabel()
        show_plain(self.title, f"{job.repo_id} · {job.name}")  # a name from the Hub
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.status = QLabel()
        self.status.setObjectName("downloadStatus")
        self.status.setWordWrap(True)
        self.pause_button = QPushButton("Pause")
        self.pause_button.setObjectName("pauseButton")
        self.pause_button.clicked.connect(self._toggle)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelButton")
        self.cancel_button.clicked.connect(lambda: cancel(self.job_id))
        text = QVBoxLayout()
        text.addWidget(self.title)
        text.addWidget(self.bar)
        text.addWidget(self.status)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(text, 1)
        layout.addWidget(self.pause_button)
        layout.addWidget(self.cancel_button)
        self.state = job.state
        self.update_job(job)

    def _toggle(self) -> None:
        if self.state in (PAUSED, FAILED):
            self._resume(self.job_id)
        else:
            self._pause(self.job_id)

    def update_job(self, job: Job) -> None:
        self.state = job.state
        received = job.progress.done_bytes if job.progress is not None else None
        if received is None or job.state in (PAUSED, QUEUED, FAILED):
            received = job.received_bytes() if job.state != DONE else job.size
        self.bar.setValue(int(1000 * received / job.size) if job.size else 1000)
        show_plain(self.status, job_status_text(job))
        self.status.setProperty("failed", job.state == FAILED)
        finished = job.state in (DONE, CANCELLED)
        self.pause_button.setText("Resume" if job.state in (PAUSED, FAILED) else "Pause")
        self.pause_button.setVisible(not finished)
        self.cancel_button.setVisible(not finished)
        kept = job.received_bytes() if job.state == FAILED else 0
        # After a full disk the kept .part holds that space: cancelling deletes it.
        self.cancel_button.setText(f"Delete {size_text(kept)} received" if kept else "Cancel")
