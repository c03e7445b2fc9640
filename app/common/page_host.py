"""What a page may ask of the window that shows it.

Pages receive this rather than the main window's class, so that no page imports the shell above
it: the shell builds pages, pages never build (or import) the shell.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from app.common.engine_bridge import EngineBridge


class PageHost(Protocol):
    bridge: EngineBridge

    def open_model_file(self, path: str | Path) -> bool:
        """Check a GGUF file and load it by its plan; False (and a banner) if it is unusable."""
        ...

    def open_model_dialog(self) -> None: ...
