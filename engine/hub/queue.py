"""The download queue: one download at a time, pause, resume, cancel, kept across restarts.

    queue = DownloadQueue(models_dir, on_change=print)
    queue.restore()            # jobs from the last run; those in flight then are queued again
    queue.start()              # a worker thread takes queued jobs in order
    job = queue.add(model)     # a ModelFile from HubClient.repo_files (a split set is one job)
    queue.pause(job.id); queue.resume(job.id); queue.cancel(job.id)
    queue.shutdown()           # pauses the job in flight; it resumes at the next start

`on_change(job)` is called on the worker thread after every change and progress report (at
most ten a second); the GUI forwards it through a queued signal. The state file holds the jobs,
never progress: the `.part` files on disk are the truth about how far a download got.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.files import write_json_atomic
from engine.hub.catalog import ModelFile
from engine.hub.control import CANCEL, PAUSE, StopFlag
from engine.hub.download import Downloader, RetryPolicy, part_path
from engine.hub.library import Library
from engine.hub.paths import library_path
from engine.hub.records import DownloadError, DownloadStopped, Progress, RemoteFile

QUEUED = "queued"
DOWNLOADING = "downloading"
PAUSED = "paused"
FAILED = "failed"
DONE = "done"
CANCELLED = "cancelled"
STATE_VERSION = 1


@dataclass
class Job:
    id: str
    repo_id: str
    name: str
    quant: str
    files: tuple[RemoteFile, ...]
    dests: tuple[Path, ...]
    state: str = QUEUED
    message: str | None = None  # why it failed, or what happened
    progress: Progress | None = field(default=None, compare=False)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def path(self) -> Path:
        return self.dests[0]

    @property
    def verified(self) -> bool:
        """True when every file has a sha256 from the Hub, which the download was checked
        against; False when some file could only be checked by its size and GGUF structure."""
        return all(f.sha256 for f in self.files)

    def received_bytes(self) -> int:
        """Bytes on disk so far (a paused job's progress bar after a restart)."""
        total = 0
        for file, dest in zip(self.files, self.dests, strict=True):
            if dest.exists():
                total += file.size
            elif part_path(dest).exists():
                total += min(file.size, part_path(dest).stat().st_size)
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "repo_id": self.repo_id,
            "name": self.name,
            "quant": self.quant,
            "files": [dataclasses.asdict(f) for f in self.files],
            "dests": [str(d) for d in self.dests],
            "state": self.state,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        return cls(
            id=str(data["id"]),
            repo_id=str(data["repo_id"]),
            name=str(data["name"]),
            quant=str(data["quant"]),
            files=tuple(RemoteFile(**f) for f in data["files"]),
            dests=tuple(Path(d) for d in data["dests"]),
            state=str(data["state"]),
            message=data.get("message"),
        )


class DownloadQueue:
    def __init__(
        self,
        models_dir: Path,
        *,
        state_path: Path | None = None,
        endpoint: str | None = None,
        token: str | bool | None = None,
        policy: RetryPolicy | None = None,
        on_change: Callable[[Job], None] | None = None,
        on_done: Callable[[Job], None] | None = None,
        downloader_options: dict[str, Any] | None = None,
    ) -> None:
        self.models_dir = Path(models_dir)
        self.state_path = state_path or self.models_dir / ".downloads.json"
        self.quarantine_dir = self.models_dir / ".quarantine"
        self._endpoint = endpoint
        self._token = token
        self._policy = policy
        self._on_change = on_change
        self._on_done = on_done
        self._options = downloader_options or {}
        self._jobs: list[Job] = []
        self._lock = threading.Condition()
        self._current: tuple[Job, StopFlag] | None = None
        self._thread: threading.Thread | None = None
        self._closing = False

    # -- the jobs -------------------------------------------------------------------------------

    def jobs(self) -> list[Job]:
        with self._lock:
            return list(self._jobs)

    def job(self, job_id: str) -> Job:
        with self._lock:
            for job in self._jobs:
                if job.id == job_id:
                    return job
        raise KeyError(f"no download with id {job_id!r}")

    def add(self, model: ModelFile) -> Job:
        """Queue a model; raises UnsafePath for a name that would leave the models folder and
        ValueError for an incomplete split set or one already queued."""
        if not model.complete:
            raise ValueError(f"{model.name}: parts of the set are missing on the Hub.")
        dests = tuple(library_path(self.models_dir, f.repo_id, f.filename) for f in model.files)
        with self._lock:
            for job in self._jobs:
                if job.dests == dests and job.state not in (DONE, CANCELLED):
                    raise ValueError(f"{model.name} is already in the download list.")
            job = Job(uuid.uuid4().hex[:12], model.first.repo_id, model.name, model.quant,
                      model.files, dests)  # fmt: skip
            self._jobs.append(job)
            self._save()
            self._lock.notify_all()
        self._changed(job)
        return job

    def pause(self, job_id: str) -> None:
        self._stop(job_id, PAUSE)

    def cancel(self, job_id: str) -> None:
        self._stop(job_id, CANCEL)

    def resume(self, job_id: str) -> None:
        """Queue a paused or failed job again; it continues from its `.part` files."""
        with self._lock:
            job = self.job(job_id)
            if job.state not in (PAUSED, FAILED):
                return
            job.state, job.message = QUEUED, None
            self._save()
            self._lock.notify_all()
        self._changed(job)

    def remove_finished(self) -> None:
        with self._lock:
            self._jobs = [j for j in self._jobs if j.state not in (DONE, CANCELLED)]
            self._save()

    def _stop(self, job_id: str, reason: str) -> None:
        with self._lock:
            job = self.job(job_id)
            if self._current is not None and self._current[0] is job:
                self._current[1].request(reason)  # the worker finishes the change
                return
            if job.state in (DONE, CANCELLED):
                return
            if reason == CANCEL:
                for dest in job.dests:
                    part_path(dest).unlink(missing_ok=True)
                job.state, job.message = CANCELLED, None
            elif job.state == QUEUED:
                job.state = PAUSED
            self._save()
        self._changed(job)

    # -- persistence ----------------------------------------------------------------------------

    def _save(self) -> None:
        jobs = [j.to_dict() for j in self._jobs if j.state not in (DONE, CANCELLED)]
        for data in jobs:
            if data["state"] == DOWNLOADING:  # resumes at the next start
                data["state"] = QUEUED
        write_json_atomic(self.state_path, {"version": STATE_VERSION, "jobs": jobs})

    def restore(self) -> list[Job]:
        """The jobs left by the last run (an unreadable state file is set aside, not fatal)."""
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
            restored = [Job.from_dict(j) for j in data["jobs"]]
            for job in restored:  # a hand-edited file must not write outside the folder
                for file, dest in zip(job.files, job.dests, strict=True):
                    if library_path(self.models_dir, file.repo_id, file.filename) != dest:
                        raise ValueError(f"{dest} is not where {file.filename} belongs")
        except FileNotFoundError:
            return []
        except Exception:
            self.state_path.replace(self.state_path.with_suffix(".broken"))
            return []
        with self._lock:
            known = {j.id for j in self._jobs}
            self._jobs.extend(j for j in restored if j.id not in known)
            self._lock.notify_all()
        return restored

    # -- the worker -----------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._closing = False
            self._thread = threading.Thread(target=self._run, name="hearth-downloads", daemon=True)
            self._thread.start()

    def shutdown(self, timeout: float = 10.0) -> None:
        with self._lock:
            self._closing = True
            if self._current is not None:
                self._current[1].request(PAUSE)
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _next(self) -> tuple[Job, StopFlag] | None:
        with self._lock:
            while not self._closing:
                job = next((j for j in self._jobs if j.state == QUEUED), None)
                if job is not None:
                    job.state, job.message = DOWNLOADING, None
                    self._current = (job, StopFlag())
                    return self._current
                self._lock.wait()
        return None

    def _run(self) -> None:
        while (current := self._next()) is not None:
            job, stop = current
            self._changed(job)
            state, message = self._download(job, stop)
            with self._lock:
                self._current = None
                if self._closing and state == PAUSED:
                    state = QUEUED  # stopped by the app closing: continue at the next start
                job.state, job.message = state, message
                self._save()
            self._changed(job)
            if state == DONE and self._on_done is not None:
                self._on_done(job)

    def _download(self, job: Job, stop: StopFlag) -> tuple[str, str | None]:
        def report(progress: Progress) -> None:
            job.progress = progress
            self._changed(job)

        downloader = Downloader(endpoint=self._endpoint, token=self._token, policy=self._policy,
                                stop=stop, on_progress=report, **self._options)  # fmt: skip
        try:
            downloader.download(job.files, job.dests, self.quarantine_dir)
        except DownloadStopped as stopped:
            return (CANCELLED if stopped.reason == CANCEL else PAUSED), None
        except DownloadError as exc:
            return FAILED, exc.message
        except Exception as exc:  # a defect must not kill the queue's thread
            return FAILED, f"Unexpected error: {type(exc).__name__}: {exc}. Try again."
        # Recorded here, not only by the GUI, so that no file enters the library unmarked.
        Library(self.models_dir).record_download(job.path, job.repo_id, job.files[0].sha256,
                                                 verified=job.verified)  # fmt: skip
        if not job.verified:
            return DONE, (
                "Not verified: the Hub lists no sha256 for it, so only its size and GGUF "
                "structure were checked. Prefer a repository that stores its files in LFS."
            )
        return DONE, None

    def _changed(self, job: Job) -> None:
        if self._on_change is not None:
            self._on_change(job)
