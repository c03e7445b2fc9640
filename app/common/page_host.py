"""What a page may ask of the window that shows it.

Pages receive this rather than the main window's class, so that no page imports the shell above
it: the shell builds pages, pages never build (or import) the shell.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from app.common.engine_bridge import EngineBridge
    from app.common.machine_state import MachineState
    from app.common.model_opener import ModelOpener
    from engine.session.preferences import Preferences


class PageHost(Protocol):
    bridge: EngineBridge
    machine: MachineState  # the one snapshot of the machine every page plans from
    opener: ModelOpener  # every way of opening a model goes through it
    preferences: Preferences  # the app's (engine.session.preferences)

    def open_model_file(self, path: str | Path) -> bool:
        """Check a GGUF file and load it by the load policy's plan; False (and a banner) if it
        is not a usable GGUF (a model that fits nowhere is refused later, with a banner)."""
        ...

    def open_model_dialog(self) -> None: ...
