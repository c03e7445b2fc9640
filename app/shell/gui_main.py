"""Start the GUI: `hearth [--model PATH]`.

With no model given, Hearth loads the starter model (a tiny demo) so that a first launch can chat
offline. The engine runs in its own process, started here and shut down when the window closes.
"""

from __future__ import annotations

import argparse
import sys

from PySide6.QtCore import QSize
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from app.common.engine_bridge import EngineBridge
from app.common.theme import apply_theme
from app.shell.main_window import MainWindow
from engine.session.preferences import load_preferences
from engine.starter_model import starter_model_path


def parse_args(args: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hearth", description="Chat with a local GGUF model.")
    parser.add_argument("--model", "-m", metavar="PATH", help="the .gguf model to open")
    return parser.parse_args(args)


def window_size(window: MainWindow) -> QSize:
    """1100 x 760, or less on a small (or scaled up) screen: never larger than nine tenths of
    it, nor smaller than the window's minimum."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    wanted = QSize(1100, 760)
    if screen is not None:
        room = screen.availableGeometry().size() * 0.9
        wanted = wanted.boundedTo(room)
    return wanted.expandedTo(window.minimumSize())


def create_window(bridge: EngineBridge, model: str | None) -> MainWindow:
    """The main window with the engine started and the first model on its way."""
    window = MainWindow(bridge)
    window.resize(window_size(window))
    window.machine.refresh()  # detection and the worker's start run side by side
    bridge.start()
    # A model given on the command line gets the same checks as a dropped one; if it is
    # unusable or fits nowhere, the message stays on screen and the starter model is loaded
    # instead.
    starter = starter_model_path()
    if model is not None:
        window.open_model_file(model, fallback=starter)
    elif starter is not None:
        window.load_model(starter)
    else:
        window.explain_no_model()
    return window


def run_gui(args: list[str]) -> int:
    options = parse_args(args)
    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("Hearth")
    app.setApplicationDisplayName("Hearth")
    app.setOrganizationName("Hearth")
    preferences = load_preferences()
    apply_theme(app, preferences.theme, preferences.text_size)
    bridge = EngineBridge()
    window = create_window(bridge, options.model)
    window.show()
    try:
        return app.exec()
    finally:
        bridge.shutdown()
