"""The main window against a fake engine: pages, opening and dropping models, crash reports."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QLabel

from app.shell.main_window import MainWindow
from app.shell.pages import PageSpec, default_pages
from engine.enums import EngineState
from engine.runtime import protocol as p
from engine.starter_model import STARTER_LABEL, STARTER_NOTE
from tests.app.conftest import (
    WAIT_MS,
    client_of,
    load_fake_model,
    make_window,
    open_in_window,
    show_at,
)
from tests.app.fake_engine import FakeEngineClient


@pytest.fixture
def window(qtbot, bridge, tmp_path) -> MainWindow:
    return show_at(qtbot, make_window(qtbot, bridge, tmp_path), 900, 600)


@pytest.fixture
def starter_loaded(qtbot, bridge, window, starter_model) -> FakeEngineClient:
    bridge.start()
    return open_in_window(qtbot, window, starter_model)


def planned(window: MainWindow, path) -> p.ModelParams:
    """What the load policy loads `path` with on the window's machine."""
    from engine.session import plan_load

    return plan_load(path, window.machine.snapshot).params


def wait_for_load(qtbot, bridge) -> p.ModelParams:
    qtbot.waitUntil(lambda: bool(client_of(bridge).loads()), timeout=WAIT_MS)
    return client_of(bridge).loads()[-1]


def _drag_enter(point: QPointF, actions, mime: QMimeData) -> QDragEnterEvent:
    args = (actions, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    try:
        return QDragEnterEvent(point, *args)  # PySide6 6.12 on
    except TypeError:
        return QDragEnterEvent(point.toPoint(), *args)  # before 6.12: a QPoint only


def _drop(window: MainWindow, *paths: Path) -> QDropEvent:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)) for path in paths])
    point = QPointF(window.width() / 2, window.height() / 2)
    actions = Qt.DropAction.CopyAction
    enter = _drag_enter(point, actions, mime)
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted(), "the window refused the drag"
    drop = QDropEvent(
        point, actions, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(window, drop)
    return drop


def test_navigation_has_chat_model_library_hardware_and_server(qtbot, window):
    assert window.page_names() == ["Chat", "Model", "Library", "Hardware", "Server"]
    assert window.current_page_name() == "Chat"
    window.navigation.setCurrentRow(3)
    assert window.current_page_name() == "Hardware"
    window.show_page("Library")
    assert window.pages.currentWidget() is window.page("Library")


def test_pages_plug_in_by_name(qtbot, bridge):
    pages = [*default_pages(), PageSpec("Settings", lambda _win: QLabel("settings here"))]
    win = MainWindow(bridge, pages=pages)
    qtbot.addWidget(win)
    assert win.page_names()[-1] == "Settings"
    win.show_page("Settings")
    assert win.pages.currentWidget().text() == "settings here"
    with pytest.raises(ValueError, match="already"):
        win.add_page("Chat", QLabel())


def test_a_page_that_fails_to_build_becomes_a_placeholder(qtbot, bridge):
    def broken(_win):
        raise RuntimeError("no NVML")

    win = MainWindow(bridge, pages=[*default_pages()[:2], PageSpec("Hardware", broken)])
    qtbot.addWidget(win)
    texts = [label.text() for label in win.page("Hardware").findChildren(QLabel)]
    assert any("no NVML" in text for text in texts)


def test_the_starter_model_is_labelled_as_a_tiny_demo(qtbot, window, starter_loaded):
    assert STARTER_LABEL in window.model_label.text()
    assert "Library" in window.model_label.text()
    assert window.chat_view.notice.isVisible()
    assert window.chat_view.notice.text() == STARTER_NOTE
    assert window.context_label.text() == "Context 8,192 tokens · KV f16"  # the planned context
    assert window.state_label.text() == "Ready"
    window.chat_view.notice.action_buttons()[0].click()
    assert window.current_page_name() == "Library"


def test_dropping_a_text_file_named_gguf_keeps_the_model(qtbot, window, starter_loaded, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_text("this is not a model\n" * 10)
    starter_loaded.commands.clear()
    _drop(window, bad)
    assert window.file_banner.isVisible()
    message = window.file_banner.text()
    assert "bad.gguf" in window.file_banner.title()
    assert "not a readable GGUF file" in message
    assert f"{STARTER_LABEL} stays loaded" in message
    assert starter_loaded.commands == []  # the engine was never touched
    assert window.bridge.state == EngineState.IDLE
    assert window.bridge.model is not None


def test_dropping_a_random_file_explains_what_hearth_opens(qtbot, window, starter_loaded, tmp_path):
    noise = tmp_path / "noise.bin"
    noise.write_bytes(os.urandom(4096))
    starter_loaded.commands.clear()
    _drop(window, noise)
    assert "is not a GGUF model file" in window.file_banner.text()
    assert starter_loaded.commands == []


def test_dropping_random_bytes_named_gguf_is_refused(qtbot, window, starter_loaded, tmp_path):
    noise = tmp_path / "noise.gguf"
    noise.write_bytes(b"\x00\xff" + os.urandom(4094))
    starter_loaded.commands.clear()
    _drop(window, noise)
    assert "not a readable GGUF file" in window.file_banner.text()
    assert starter_loaded.commands == []


def test_dropping_a_gguf_replaces_the_loaded_model(qtbot, window, bridge, tmp_path, starter_model):
    client = load_fake_model(qtbot, bridge, tmp_path / "other.gguf")
    client.commands.clear()
    window.file_banner.show_message("error", "stale")
    _drop(window, starter_model)
    assert not window.file_banner.isVisible()
    wait_for_load(qtbot, bridge)
    assert client.names() == ["unload", "load"]
    assert client.commands[-1][1] == planned(window, starter_model)
    assert bridge.state == EngineState.LOADING
    assert "Loading" in window.model_label.text()
    client.emit_loaded(str(starter_model))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    assert STARTER_LABEL in window.model_label.text()


def test_a_drop_onto_the_message_box_opens_the_model(qtbot, window, bridge, starter_model):
    """The message box must not swallow a model file as pasted text."""
    bridge.start()
    target = window.chat_view.input.viewport()
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(starter_model))])
    point = QPointF(target.rect().center())
    args = (Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
            Qt.KeyboardModifier.NoModifier)  # fmt: skip
    QApplication.sendEvent(target, _drag_enter(point, *args[:2]))
    QApplication.sendEvent(target, QDropEvent(point, *args))
    assert window.chat_view.input.toPlainText() == ""
    assert wait_for_load(qtbot, bridge) == planned(window, starter_model)
    assert client_of(bridge).names() == ["load"]


def test_a_load_failure_offers_the_previous_model(
    qtbot, window, bridge, starter_loaded, starter_model, tmp_path
):
    other = tmp_path / "other.gguf"
    bridge.load(p.ModelParams(path=str(other)))
    starter_loaded.emit(p.LoadFailed(path=str(other), message="unknown architecture 'foo'"))
    qtbot.waitUntil(window.engine_banner.isVisible, timeout=WAIT_MS)
    assert "unknown architecture 'foo'" in window.engine_banner.text()
    buttons = window.engine_banner.action_buttons()
    assert buttons[0].text() == f"Load {STARTER_LABEL} again"
    starter_loaded.commands.clear()
    buttons[0].click()  # through the load policy again: memory may have changed since
    assert wait_for_load(qtbot, bridge) == planned(window, starter_model)
    assert starter_loaded.names() == ["load"]


def test_a_crash_shows_the_last_lines_and_reload_brings_the_model_back(
    qtbot, window, bridge, starter_loaded, starter_model
):
    starter_loaded.crash(lines=("ggml_cuda_compute_forward: out of memory", "Aborted"))
    qtbot.waitUntil(window.engine_banner.isVisible, timeout=WAIT_MS)
    banner = window.engine_banner
    assert banner.title() == "The engine stopped unexpectedly"
    assert "SIGABRT" in banner.text()
    assert banner.details() == "ggml_cuda_compute_forward: out of memory\nAborted"
    assert window.state_label.text() == "Engine crashed"
    assert bridge.state == EngineState.CRASHED
    assert not window.chat_view.send_button.isEnabled()

    reload_button = banner.action_buttons()[0]
    assert reload_button.text() == "Reload model"
    reload_button.click()
    assert not banner.isVisible()
    new_client = client_of(bridge)
    assert new_client is not starter_loaded and new_client.alive
    assert wait_for_load(qtbot, bridge) == planned(window, starter_model)
    assert new_client.names() == ["load"]
    new_client.emit_loaded(str(starter_model))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    assert window.chat_view.send_button.isEnabled()


def test_a_helper_gone_mid_reply_reloads_at_once_without_it(
    qtbot, window, bridge, starter_loaded, starter_model
):
    from dataclasses import replace

    from engine.hardware.remote import RemoteDevice, RemoteHost
    from engine.runtime.client import EngineCrashed

    address = "10.0.0.2:50052"
    gone = RemoteHost(address, (7, 0, 0), (RemoteDevice(address, 0, "CUDA0", "", "cuda", 1, 1),))
    qtbot.waitUntil(lambda: window.machine.snapshot is not None, timeout=WAIT_MS)
    window.machine._snapshot = replace(window.machine.snapshot, helpers=(gone,))
    starter_loaded.alive = False
    starter_loaded.emit(EngineCrashed(-6, ("Remote RPC server crashed",), (), (address,)))
    qtbot.waitUntil(window.engine_banner.isVisible, timeout=WAIT_MS)
    assert window.engine_banner.title() == "A helper machine went away"
    assert address in window.engine_banner.text()
    assert window.machine.snapshot.helpers == ()
    new_client = client_of(bridge)
    assert new_client is not starter_loaded and new_client.alive
    assert wait_for_load(qtbot, bridge).rpc_servers == ()


def test_closing_the_window_stops_the_engine(qtbot, window, bridge, starter_loaded):
    window.close()
    assert ("close", None) in starter_loaded.commands


def test_the_status_bar_says_where_the_model_runs():
    from dataclasses import replace

    from app.shell.main_window import placement_text
    from tests.app.fake_engine import model_loaded

    on_gpu = replace(
        model_loaded("/m/x.gguf"),
        runs_on=("CUDA0: NVIDIA GeForce RTX 4090", "CPU"),
        n_gpu_layers=30,
        n_layers=32,
        flash_attn="on",
    )
    assert (
        placement_text(on_gpu)
        == "CUDA0 + CPU · 30/32 layers on the GPU · flash attention on · llama.cpp"
    )
    cpu_only = replace(on_gpu, runs_on=("CPU",), n_gpu_layers=0, flash_attn="off")
    assert placement_text(cpu_only) == "CPU · flash attention off · llama.cpp"
    hearth = replace(on_gpu, runs_on=("CUDA0: NVIDIA H100",), n_gpu_layers=33, n_layers=32,
                     flash_attn="off", engine="hearth")  # fmt: skip
    assert placement_text(hearth) == "Hearth engine"
    fell_back = replace(on_gpu, engine_note="no CUDA or ROCm GPU visible to PyTorch")
    assert placement_text(fell_back).endswith("· llama.cpp (Hearth engine unavailable)")


def test_an_opened_model_shows_on_the_model_page_as_it_was_loaded(qtbot, window, starter_model):
    """The Model page shows the decision the window loaded by; it plans nothing itself."""
    from app.model.page import ModelSettingsPage

    page = window.page("Model")
    assert isinstance(page, ModelSettingsPage)
    window.bridge.start()
    sent = open_in_window(qtbot, window, starter_model).loads()[-1]
    qtbot.waitUntil(lambda: page.panel is not None and page.panel.plan is not None, timeout=WAIT_MS)
    assert page.panel.plan.settings.model_params() == sent
    assert page.panel.chosen().n_ctx == sent.n_ctx
