"""The machine as every page sees it: one snapshot, detected off the GUI thread at start-up and
again when a page asks for a refresh (engine.session.MachineSnapshot).

`when_ready(fn)` runs `fn(snapshot)` once the first detection has finished (at once if it has):
the first model load waits for it instead of racing it with an unplanned load.

Helper machines (`hearth host`, remembered by the Hardware page) are asked in the same
background task; `drop_helpers` takes out one that went away, so the next plan is made without it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.common.background import TaskRunner
from engine.hardware import Detection, detect
from engine.session import MachineSnapshot, snapshot_machine
from engine.session.machine import probe_helpers


class MachineState(QObject):
    changed = Signal(object)  # MachineSnapshot

    def __init__(
        self, detect_fn: Callable[[], Detection] = detect, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self._detect_fn = detect_fn
        self._snapshot: MachineSnapshot | None = None
        self._waiting: list[Callable[[MachineSnapshot], None]] = []
        self._tasks = TaskRunner(self)
        self._gpu_offload: bool | None = None

    @property
    def snapshot(self) -> MachineSnapshot | None:
        return self._snapshot

    @property
    def detecting(self) -> bool:
        return self._tasks.busy

    def refresh(self) -> None:
        """Detect again (off the GUI thread); `changed` follows."""
        if self._tasks.busy:
            return
        offload = self._gpu_offload
        earlier = self._snapshot.helpers if self._snapshot is not None else ()

        def take() -> MachineSnapshot:
            helpers, problems = probe_helpers(previous=earlier)
            return snapshot_machine(
                self._detect_fn, gpu_offload=offload, helpers=helpers, helper_problems=problems
            )

        self._tasks.run(take, self._done)

    def when_ready(self, fn: Callable[[MachineSnapshot], None]) -> None:
        if self._snapshot is not None:
            fn(self._snapshot)
            return
        self._waiting.append(fn)
        self.refresh()

    def set_gpu_offload(self, supported: bool) -> None:
        """What the engine said it can do (the worker's Ready event)."""
        self._gpu_offload = supported
        if self._snapshot is not None and self._snapshot.gpu_offload != supported:
            self._snapshot = self._snapshot.with_gpu_offload(supported)
            self.changed.emit(self._snapshot)

    def drop_helpers(self, addresses) -> None:
        """Plan without the helpers at `addresses` from now on (they went away)."""
        if self._snapshot is not None and addresses:
            self._snapshot = self._snapshot.without_helpers(addresses)
            self.changed.emit(self._snapshot)

    def _done(self, result) -> None:
        if isinstance(result, Exception):  # snapshot_machine does not raise; belt and braces
            result = snapshot_machine(lambda: Detection(devices=()), gpu_offload=self._gpu_offload)
        if self._gpu_offload is not None:
            result = result.with_gpu_offload(self._gpu_offload)
        self._snapshot = result
        self.changed.emit(result)
        waiting, self._waiting = self._waiting, []
        for fn in waiting:
            fn(result)
