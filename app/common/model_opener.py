"""Every way of opening a model in the window ends here, and goes through the engine's one load
policy (engine.session.plan_load): start-up, --model, File › Open, drag-and-drop, the Library's
Load, "Load … again" and Reload after a crash.

The header is read at once (a bad file is refused before anything else happens); the plan waits
for the machine snapshot (the first load waits for detection instead of racing it), then the
model is loaded with what the planner checked, or not at all: a model that fits nowhere is
refused with what it would need and the nearest options that fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.common.engine_bridge import EngineBridge
from app.common.machine_state import MachineState
from engine.enums import EngineState
from engine.session import (
    LoadDecision,
    MachineSnapshot,
    RememberedSettings,
    UnusableModelFile,
    check_model_file,
    plan_load,
    sibling_files,
)
from engine.session.preferences import Preferences


class ModelOpener(QObject):
    decided = Signal(object)  # LoadDecision: loading (fits) or refused (does not)
    unusable = Signal(object, str)  # (path, message): not a model file

    def __init__(
        self,
        bridge: EngineBridge,
        machine: MachineState,
        remembered: RememberedSettings,
        parent: QObject | None = None,
        preferences: Callable[[], Preferences] = Preferences,
    ) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.machine = machine
        self.remembered = remembered
        self.preferences = preferences  # the app's, read at each plan (they may change)
        self.last_decision: LoadDecision | None = None
        self._engine_ready = bridge.state not in (EngineState.STOPPED, EngineState.STARTING)
        self._waiting: list[Callable[[], None]] = []
        bridge.ready.connect(self._on_engine_ready)
        bridge.engine_crashed.connect(lambda _crash: self._on_engine_ready(None))

    def open(self, path: str | Path) -> bool:
        """Check `path` now; plan and load it once the machine (and the engine's abilities) are
        known. False, with `unusable` emitted, for a file that is not a usable GGUF."""
        path = Path(path)
        try:
            info = check_model_file(path)
        except UnusableModelFile as exc:
            self.unusable.emit(path, str(exc))
            return False
        self._after_start(
            lambda: self.machine.when_ready(lambda snap: self._plan(path, info, snap))
        )
        return True

    def load(self, decision: LoadDecision) -> None:
        """Load a decision that fits (one of a refusal's options, say)."""
        if decision.params is None:
            raise ValueError(f"{decision.name} does not fit; there is nothing to load")
        self.last_decision = decision
        self.bridge.load(self.preferences().with_preferences(decision.params))

    def _plan(self, path: Path, info, snapshot: MachineSnapshot) -> None:
        preferences = self.preferences()
        try:
            decision = plan_load(
                path, snapshot, self.remembered.get(path), info=info, siblings=sibling_files(path),
                target_ctx=preferences.target_context, fill_gpu=preferences.fill_gpu,
            )  # fmt: skip
        except UnusableModelFile as exc:  # moved or changed since the check
            self.unusable.emit(path, str(exc))
            return
        if decision.params is not None:
            decision = replace(decision, params=preferences.with_preferences(decision.params))
        self.last_decision = decision
        if decision.fits:
            self.bridge.load(decision.params)
        self.decided.emit(decision)

    # The engine says at start whether it can offload to a GPU at all (a CPU-only build on a
    # machine with a GPU must plan for the CPU), so the first plan waits for that too.
    def _after_start(self, fn: Callable[[], None]) -> None:
        if self._engine_ready:
            fn()
        else:
            self._waiting.append(fn)
            self.bridge.start()

    def _on_engine_ready(self, ready) -> None:
        if ready is not None:
            self.machine.set_gpu_offload(ready.gpu_offload_supported)
        self._engine_ready = True
        waiting, self._waiting = self._waiting, []
        for fn in waiting:
            fn()
