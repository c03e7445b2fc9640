"""The pages of the main window's left navigation, by name.

A panel plugs in by adding a PageSpec to `default_pages()` (or by `MainWindow.add_page` at run
time). Factories are called with the window as a PageHost, so a page can reach the bridge and the
window's actions without globals and without importing the window above it. Panels are imported
lazily: the window still opens, with a placeholder, when one of them fails to import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

if TYPE_CHECKING:
    from app.common.page_host import PageHost

CHAT = "Chat"
MODEL = "Model"
LIBRARY = "Library"
HARDWARE = "Hardware"
SERVER = "Server"


@dataclass(frozen=True)
class PageSpec:
    name: str
    create: Callable[[PageHost], QWidget]


def placeholder_page(title: str, text: str, action: tuple[str, Callable[[], None]] | None = None):
    page = QWidget()
    heading = QLabel(title)
    font = heading.font()
    font.setPointSizeF(font.pointSizeF() * 1.5)
    font.setBold(True)
    heading.setFont(font)
    body = QLabel(text)
    body.setWordWrap(True)
    body.setObjectName("placeholderText")
    layout = QVBoxLayout(page)
    layout.setContentsMargins(32, 28, 32, 28)
    layout.setSpacing(10)
    layout.addWidget(heading)
    layout.addWidget(body)
    if action is not None:
        button = QPushButton(action[0])
        button.clicked.connect(action[1])
        layout.addWidget(button, 0, Qt.AlignmentFlag.AlignLeft)
    layout.addStretch(1)
    return page


def _chat_page(window: PageHost) -> QWidget:
    from app.chat.session import open_app_store
    from app.chat.view import ChatView

    store, problem = open_app_store()  # None and why: the chat then keeps chats in memory
    view = ChatView(window.bridge, store=store, store_error=problem, host=window)
    _connect_model_picker(window, view)
    return view


def _connect_model_picker(window: PageHost, view) -> None:
    """The chat header's picker: the library's models with their fits on the window's machine;
    a pick opens the model as File › Open does (the load policy decides)."""
    from engine.hub.library import Library
    from engine.hub.settings import load_settings
    from engine.starter_model import starter_model_path

    settings = load_settings()
    starter = starter_model_path()
    library = Library(settings.models_dir, scan_hf_cache=settings.scan_hf_cache,
                      bundled=(starter,) if starter is not None else ())  # fmt: skip
    picker = view.header.model_picker
    picker.chosen.connect(window.open_model_file)
    machine = window.machine
    picker.list_from(
        library.scan,
        lambda: machine.snapshot.plan_request() if machine.snapshot is not None else None,
    )
    # Bound methods of the picker: Qt drops these when the page goes.
    machine.changed.connect(picker.refresh)
    window.bridge.model_loaded.connect(picker.refresh)  # one opened elsewhere joins the list
    window.bridge.model_loaded.connect(picker.show_loaded_model)


def _model_page(window: PageHost) -> QWidget:
    from app.model.page import ModelSettingsPage

    return ModelSettingsPage(window.bridge, window.machine, opener=window.opener)


def _library_page(window: PageHost) -> QWidget:
    try:
        from app.library.page import create_library_panel
    except ImportError:
        return _library_placeholder(window)
    return create_library_panel(window)


def _library_placeholder(window: PageHost) -> QWidget:
    return placeholder_page(
        LIBRARY,
        "Your models, and models to download from the Hugging Face Hub, will be listed here. "
        "For now, open a .gguf file with File › Open model… or drag one onto the window.",
        ("Open model…", window.open_model_dialog),
    )


def _hardware_page(window: PageHost) -> QWidget:
    try:
        from app.hardware.panel import HardwarePanel
    except ImportError:
        return placeholder_page(HARDWARE, "The hardware panel is not available in this build.")
    return HardwarePanel(machine=window.machine)


def _server_page(window: PageHost) -> QWidget:
    try:
        from app.server.page import ServerPage
    except ImportError:  # the server's packages (fastapi, uvicorn) are missing from this build
        return placeholder_page(SERVER, "The API server is not available in this build.")
    page = ServerPage(window.bridge, window.machine)
    page.start_when_loaded = window.preferences.start_server  # Preferences: with the app
    return page


def default_pages() -> list[PageSpec]:
    return [
        PageSpec(CHAT, _chat_page),
        PageSpec(MODEL, _model_page),
        PageSpec(LIBRARY, _library_page),
        PageSpec(HARDWARE, _hardware_page),
        PageSpec(SERVER, _server_page),
    ]
