"""Background work for the GUI's pages: pool tasks whose results come back as queued signals
(dropped if the page is gone by then), and the bridge that carries the download queue's
callbacks onto the GUI thread."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot


class _TaskSignals(QObject):
    finished = Signal(object)


class _Task(QRunnable):
    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__()
        self.fn = fn
        self.signals = _TaskSignals()

    def run(self) -> None:
        try:
            result = self.fn()
        except Exception as exc:  # the page shows it; a pool thread must not swallow it
            result = exc
        with contextlib.suppress(RuntimeError):  # the page went away while this ran
            self.signals.finished.emit((self, result))


_SIDE_POOL: QThreadPool | None = None


def side_pool() -> QThreadPool:
    """One thread for work nobody waits on (fit badges beside a list, the chat's model picker):
    on a 2-core machine the global pool has two threads, and this work must never hold them
    while a scan the person asked for waits."""
    global _SIDE_POOL
    if _SIDE_POOL is None:
        _SIDE_POOL = QThreadPool()
        _SIDE_POOL.setMaxThreadCount(1)
    return _SIDE_POOL


class TaskRunner(QObject):
    """Runs callables on a thread pool; `done(result_or_exception)` runs on the GUI thread.

    Results are delivered through a slot of this object, so once it (or the page owning it)
    is deleted, results still in flight are dropped instead of reaching deleted widgets."""

    def __init__(self, parent: QObject | None = None, pool: QThreadPool | None = None) -> None:
        super().__init__(parent)
        self.pool = pool or QThreadPool.globalInstance()
        self._pending: dict[_Task, Callable[[Any], None]] = {}

    def run(self, fn: Callable[[], Any], done: Callable[[Any], None]) -> None:
        task = _Task(fn)
        task.setAutoDelete(False)  # kept alive in _pending until its result is delivered
        task.signals.finished.connect(self._deliver)
        self._pending[task] = done
        self.pool.start(task)

    @Slot(object)
    def _deliver(self, payload: tuple[_Task, Any]) -> None:
        task, result = payload
        done = self._pending.pop(task, None)
        if done is not None:
            done(result)

    @property
    def busy(self) -> bool:
        return bool(self._pending)


class QueueBridge(QObject):
    """The download queue calls these from its worker thread; Qt queues them to the GUI."""

    job_changed = Signal(object)  # engine.hub.Job
    job_done = Signal(object)
