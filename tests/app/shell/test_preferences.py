"""Edit › Preferences: what it shows and stores, threads and context reaching the next load, the
server starting with the app, and the version and guides in the window."""

from __future__ import annotations

import socket

from app.shell.preferences import PreferencesDialog, about_text, doc_links
from engine.session.preferences import Preferences, load_preferences
from tests.app.conftest import WAIT_MS, client_of, cpu_only_detection


def _window(qtbot, bridge, tmp_path, preferences: Preferences | None = None):
    from app.common.machine_state import MachineState
    from app.shell.main_window import MainWindow
    from engine.session import RememberedSettings
    from engine.session.preferences import save_preferences

    path = tmp_path / "preferences.json"
    if preferences is not None:
        save_preferences(preferences, path)
    window = MainWindow(
        bridge,
        machine=MachineState(detect_fn=lambda: cpu_only_detection()),
        remembered=RememberedSettings(tmp_path / "model-settings.json"),
        preferences_file=path,
    )
    qtbot.addWidget(window)
    return window


def test_the_dialog_shows_and_returns_the_preferences(qtbot):
    chosen = Preferences(theme="dark", text_size=12, n_threads=6, default_context=16384,
                         start_server=True, fill_gpu=True)  # fmt: skip
    dialog = PreferencesDialog(chosen)
    qtbot.addWidget(dialog)
    assert dialog.preferences() == chosen
    assert dialog.fill_box.isChecked() and dialog.fill_box.text() == "Use all of my GPU"
    # the margin is stated where the setting is
    assert "safety margin free (4% of the card, at least 384 MiB" in dialog.fill_note.text()
    dialog.fill_box.setChecked(False)
    assert not dialog.preferences().fill_gpu
    dialog.threads_box.setValue(0)
    assert dialog.threads_box.text() == "Automatic"
    assert dialog.preferences().n_threads == 0


def test_threads_and_context_reach_the_next_load(qtbot, bridge, tmp_path, starter_model):
    window = _window(qtbot, bridge, tmp_path)
    window.apply_preferences(Preferences(n_threads=3, default_context=2048))
    assert load_preferences(tmp_path / "preferences.json").n_threads == 3  # stored
    bridge.start()
    window.open_model_file(starter_model)
    qtbot.waitUntil(lambda: bool(client_of(bridge).loads()), timeout=WAIT_MS)
    sent = client_of(bridge).loads()[-1]
    assert (sent.n_threads, sent.n_ctx) == (3, 2048)


def test_the_server_starts_with_the_app_when_asked(qtbot, bridge, tmp_path, starter_model):
    window = _window(qtbot, bridge, tmp_path, Preferences(start_server=True))
    page = window.page("Server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        page.port_box.setValue(s.getsockname()[1])
    bridge.start()
    window.open_model_file(starter_model)
    qtbot.waitUntil(lambda: bool(client_of(bridge).loads()), timeout=WAIT_MS)
    client_of(bridge).emit_loaded(str(starter_model), client_of(bridge).loads()[-1].n_ctx)
    try:
        qtbot.waitUntil(lambda: page.running, timeout=WAIT_MS)
    finally:
        page.stop()


def test_the_version_and_the_guides_are_in_the_window(qtbot, bridge, tmp_path):
    window = _window(qtbot, bridge, tmp_path)
    assert window.version_label.text().startswith("Version ")
    menus = {a.text(): a.menu() for a in window.menuBar().actions()}
    help_titles = [a.text() for a in menus["&Help"].actions() if a.text()]
    assert "&About Hearth" in help_titles
    assert [title for title, _ in doc_links()] == help_titles[:-1]
    assert "Getting started (README)" in help_titles  # this is a clone: the guides are here
    assert "Hearth " in about_text() and "README.md" in about_text()
    assert window.preferences_action.shortcut().toString() != ""
