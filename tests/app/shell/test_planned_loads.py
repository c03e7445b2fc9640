"""Every load in the window follows the plan: the first one after start-up waits for the machine,
the window and the CLI plan the same file on the same machine alike, and a model that fits
nowhere is not loaded."""

from __future__ import annotations

import argparse
import io
import os
import threading
from pathlib import Path

import pytest

from app.common.machine_state import MachineState
from app.shell.gui_main import create_window
from engine.cli.planning import add_load_arguments, plan_from_command_line
from engine.session import RememberedChoice, RememberedSettings
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
from tests.app.conftest import WAIT_MS, client_of, cpu_only_detection, make_window

SCREENSHOTS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"


def _shot(widget, name: str, tmp_path: Path) -> None:
    from PySide6.QtWidgets import QApplication

    from app.common.theme import apply_theme

    apply_theme(QApplication.instance())
    widget.repaint()
    target = SCREENSHOTS / name if os.environ.get("HEARTH_SCREENSHOTS") == "1" else tmp_path / name
    target.parent.mkdir(parents=True, exist_ok=True)
    assert widget.grab().save(str(target))


def test_the_first_load_after_start_up_waits_for_the_machine(
    qtbot, bridge, starter_model, monkeypatch, tmp_path
):
    """Detection is slow here (held until the test lets it go): no load is sent before it ends,
    and the load sent after it is the planned one, not llama.cpp's defaults."""
    gate = threading.Event()

    def slow_detection():
        gate.wait(10)
        return cpu_only_detection(free_gib=16)

    monkeypatch.setattr(
        "app.shell.main_window.MachineState",
        lambda parent=None: MachineState(slow_detection, parent),
    )
    monkeypatch.setattr("app.shell.gui_main.starter_model_path", lambda: Path(starter_model))
    window = create_window(bridge, None)
    qtbot.addWidget(window)
    qtbot.wait(300)  # the worker is up (the fake says Ready at once); detection is not
    assert client_of(bridge).loads() == []
    assert "Looking at your hardware" in window.model_label.text()
    gate.set()
    qtbot.waitUntil(lambda: bool(client_of(bridge).loads()), timeout=WAIT_MS)
    (sent,) = client_of(bridge).loads()
    assert sent.n_ctx == 8192 and sent.n_gpu_layers == 0  # planned: the CPU machine, 8k tokens
    assert sent.flash_attn == "on" and sent.swa_full is False


def test_the_window_and_the_cli_plan_a_file_alike(qtbot, bridge, starter_model, tmp_path):
    remembered = RememberedSettings(tmp_path / "model-settings.json")
    remembered.put(starter_model, RememberedChoice(n_ctx=2048, kv_type="q8_0"))
    window = make_window(qtbot, bridge, tmp_path)
    bridge.start()
    window.open_model_file(starter_model)
    qtbot.waitUntil(lambda: bool(client_of(bridge).loads()), timeout=WAIT_MS)
    from_window = client_of(bridge).loads()[-1]

    parser = argparse.ArgumentParser()
    add_load_arguments(parser)
    cli = plan_from_command_line(
        starter_model, parser.parse_args([]), window.machine.snapshot, err=io.StringIO(),
        remembered=remembered,
    )  # fmt: skip
    assert cli.params == from_window
    assert (from_window.n_ctx, from_window.type_k) == (2048, "q8_0")  # the remembered choice


@pytest.fixture(scope="module")
def too_big(tmp_path_factory) -> Path:
    """A header-only Mixtral-8x7B Q4_K_M: 26 GiB of weights, on a machine with 16 GiB free."""
    folder = tmp_path_factory.mktemp("big")
    return write_sparse_gguf(folder / "Mixtral-8x7B-Q4_K_M.gguf", SHAPES["mixtral-8x7b"], "Q4_K_M")


def test_a_model_that_fits_nowhere_is_not_loaded(qtbot, bridge, too_big, tmp_path):
    window = make_window(qtbot, bridge, tmp_path)
    window.resize(1000, 640)
    window.show()
    bridge.start()
    assert window.open_model_file(too_big)
    qtbot.waitUntil(window.file_banner.isVisible, timeout=WAIT_MS)
    assert client_of(bridge).loads() == []
    assert window.file_banner.title() == f"{too_big.name} does not fit on this computer"
    text = window.file_banner.text()
    assert "more on system RAM" in text and "all on the CPU, 512 tokens" in text
    assert window.model_label.text() == "No model loaded"
    page = window.page("Model")
    qtbot.waitUntil(
        lambda: page.panel is not None and page.panel.decision is not None, timeout=WAIT_MS
    )
    assert not page.panel.plan.fits and "does not fit" in page.panel.status.text()
    _shot(window, "nothing-fits.png", tmp_path)


def test_nothing_fits_offers_a_smaller_file_of_the_same_model(qtbot, bridge, tmp_path):
    folder = tmp_path / "repo"
    folder.mkdir()
    big = write_sparse_gguf(folder / "Llama-3-8B-Q8_0.gguf", SHAPES["llama3-8b"], "Q8_0")
    small = write_sparse_gguf(folder / "Llama-3-8B-Q3_K_M.gguf", SHAPES["llama3-8b"], "Q3_K_M")
    window = make_window(qtbot, bridge, tmp_path, detection=cpu_only_detection(free_gib=5.5))
    window.show()
    bridge.start()
    window.open_model_file(big)
    qtbot.waitUntil(window.file_banner.isVisible, timeout=WAIT_MS)
    buttons = window.file_banner.action_buttons()
    assert buttons[0].text() == f"Load {small.name}"
    buttons[0].click()
    qtbot.waitUntil(lambda: bool(client_of(bridge).loads()), timeout=WAIT_MS)
    assert client_of(bridge).loads()[-1].path == str(small)
