"""A model that fits nowhere is refused the same way whichever way it is opened, once the machine
is known (the decision is then made at once), and the status bar never claims a load that is not
happening."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.enums import EngineState
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
from tests.app.conftest import WAIT_MS, client_of, make_window, open_in_window


@pytest.fixture(scope="module")
def too_big(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("big")
    return write_sparse_gguf(folder / "Mixtral-8x7B-Q4_K_M.gguf", SHAPES["mixtral-8x7b"], "Q4_K_M")


def _open_with_the_dialog(window, path, monkeypatch):
    monkeypatch.setattr(window, "ask_for_model_file", lambda: str(path))
    window.open_action.trigger()


def _open_from_the_library(window, path, monkeypatch):
    window.page("Library").local_view.load_model(path)


@pytest.mark.parametrize("open_it", [_open_with_the_dialog, _open_from_the_library])
def test_every_way_of_opening_shows_the_refusal(
    qtbot, bridge, tmp_path, starter_model, too_big, open_it, monkeypatch
):
    window = make_window(qtbot, bridge, tmp_path)
    window.show()
    bridge.start()
    open_in_window(qtbot, window, starter_model)  # the machine is known, the engine ready
    loads = len(client_of(bridge).loads())
    open_it(window, too_big, monkeypatch)
    assert window.file_banner.isVisible()  # decided at once: nothing may hide it afterwards
    assert window.file_banner.title() == f"{too_big.name} does not fit on this computer"
    assert "more on system RAM" in window.file_banner.text()
    assert "stays loaded" in window.file_banner.text()
    assert "Loading" not in window.model_label.text()
    assert bridge.state == EngineState.IDLE and len(client_of(bridge).loads()) == loads
    qtbot.wait(50)
    assert window.file_banner.isVisible()


def test_a_refusal_while_another_model_loads_shows_that_load(
    qtbot, bridge, tmp_path, starter_model, too_big
):
    window = make_window(qtbot, bridge, tmp_path)
    bridge.start()
    window.open_model_file(starter_model)
    qtbot.waitUntil(lambda: bool(client_of(bridge).loads()), timeout=WAIT_MS)
    window.open_model_file(too_big)
    qtbot.waitUntil(lambda: not window.file_banner.isHidden(), timeout=WAIT_MS)
    assert too_big.name not in window.model_label.text()
    assert "Loading" in window.model_label.text()  # the starter's load goes on


@pytest.fixture
def start_window(qtbot, bridge, starter_model, monkeypatch):
    """`hearth --model PATH` on a CPU machine with 16 GiB free, over the fake engine."""
    from app.common.machine_state import MachineState
    from app.shell.gui_main import create_window
    from tests.app.conftest import cpu_only_detection

    monkeypatch.setattr(
        "app.shell.main_window.MachineState",
        lambda parent=None: MachineState(lambda: cpu_only_detection(16), parent),
    )
    monkeypatch.setattr("app.shell.gui_main.starter_model_path", lambda: Path(starter_model))

    def start(model):
        window = create_window(bridge, str(model))
        qtbot.addWidget(window)
        return window

    return start


@pytest.mark.parametrize("which", ["too_big", "missing"])
def test_a_refused_command_line_model_leaves_the_starter_loaded_and_says_why(
    qtbot, bridge, start_window, starter_model, too_big, tmp_path, which
):
    model = too_big if which == "too_big" else tmp_path / "missing.gguf"
    window = start_window(model)
    qtbot.waitUntil(lambda: bool(client_of(bridge).loads()), timeout=WAIT_MS)
    (sent,) = client_of(bridge).loads()
    assert sent.path == str(starter_model)
    client_of(bridge).emit_loaded(str(starter_model), sent.n_ctx)
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    banner = window.file_banner
    assert not banner.isHidden()
    assert model.name in banner.title()
    assert banner.text().endswith("is loaded instead.")


def test_after_a_crash_no_banner_says_a_model_stays_loaded(
    qtbot, bridge, tmp_path, starter_model, too_big
):
    window = make_window(qtbot, bridge, tmp_path)
    bridge.start()
    client = open_in_window(qtbot, window, starter_model)
    window.open_model_file(too_big)
    assert "stays loaded" in window.file_banner.text()
    client.crash()
    qtbot.waitUntil(lambda: bridge.state == EngineState.CRASHED, timeout=WAIT_MS)
    assert window.file_banner.isHidden() and not window.engine_banner.isHidden()
    assert "GPU" not in window.engine_banner.text()  # the machine has none


def test_the_open_dialog_never_starts_among_pythons_packages(
    qtbot, bridge, tmp_path, starter_model, too_big
):
    window = make_window(qtbot, bridge, tmp_path)
    bridge.start()
    open_in_window(qtbot, window, starter_model)  # it lives inside site-packages
    assert window._last_folder == str(Path.home())
    window.open_model_file(too_big)  # a model of the person's own: its folder is remembered
    assert window._last_folder == str(too_big.parent)
