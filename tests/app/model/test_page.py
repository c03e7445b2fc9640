"""The settings page: hardware detected off the GUI thread, the loaded model's settings shown."""

from __future__ import annotations

from app.model.page import ModelSettingsPage
from app.model.settings_store import ModelSettingsStore
from benchmarks.synthetic_gguf import SHAPES, write_sparse_gguf
from engine.hardware.records import CPU, GPU, Device
from tests.app.conftest import load_fake_model

GIB = 1024**3
DEVICES = [
    Device("nvidia:0", "nvidia", "RTX 4070", GPU, ("cuda",), "nvml", 12 * GIB, 11 * GIB),
    Device("cpu", "other", "CPU", CPU, ("cpu",), "psutil", 32 * GIB, 24 * GIB),
]


def _page(qtbot, bridge, tmp_path, detect):
    page = ModelSettingsPage(
        bridge, detect=detect, settings_store=ModelSettingsStore(tmp_path / "s.json")
    )
    qtbot.addWidget(page)
    page.show()
    return page


def test_the_loaded_model_is_shown_once_the_hardware_is_known(qtbot, bridge, tmp_path):
    model = write_sparse_gguf(tmp_path / "llama.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    page = _page(qtbot, bridge, tmp_path, lambda: DEVICES)
    load_fake_model(qtbot, bridge, model)  # may come before detection ends
    qtbot.waitUntil(lambda: page.panel is not None and page.panel.plan is not None, timeout=5000)
    assert page.panel.isVisible() and not page.message.isVisible()
    assert [r.name.text() for r in page.panel.rows] == ["RTX 4070", "system RAM"]
    assert page.panel.plan.fits


def test_a_failing_probe_still_gives_a_cpu_only_page(qtbot, bridge, tmp_path):
    def broken():
        raise RuntimeError("driver fell over")

    page = _page(qtbot, bridge, tmp_path, broken)
    qtbot.waitUntil(lambda: page.panel is not None, timeout=5000)
    assert "Load a model" in page.message.text()


def test_a_file_the_planner_cannot_read_is_explained(qtbot, bridge, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 20)
    page = _page(qtbot, bridge, tmp_path, lambda: DEVICES)
    qtbot.waitUntil(lambda: page.panel is not None, timeout=5000)
    page.show_model(str(bad))
    assert "Can't plan for bad.gguf" in page.message.text() and page.message.isVisible()
