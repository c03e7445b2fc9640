"""The settings page: the shared machine snapshot (detected off the GUI thread), and the load
policy's decision for the model the window opened."""

from __future__ import annotations

from app.common.machine_state import MachineState
from app.model.page import ModelSettingsPage
from engine.hardware import Detection
from engine.hardware.records import CPU, GPU, Device
from engine.session import MachineSnapshot, RememberedSettings, plan_load
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

GIB = 1024**3
DEVICES = (
    Device("nvidia:0", "nvidia", "RTX 4070", GPU, ("cuda",), "nvml", 12 * GIB, 11 * GIB),
    Device("cpu", "other", "CPU", CPU, ("cpu",), "psutil", 32 * GIB, 24 * GIB),
)


def _page(qtbot, bridge, tmp_path, detect):
    page = ModelSettingsPage(
        bridge,
        MachineState(detect_fn=detect),
        remembered=RememberedSettings(tmp_path / "s.json"),
    )
    qtbot.addWidget(page)
    page.show()
    return page


def test_a_decision_is_shown_once_the_hardware_is_known(qtbot, bridge, tmp_path):
    model = write_sparse_gguf(tmp_path / "llama.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    page = _page(qtbot, bridge, tmp_path, lambda: Detection(devices=DEVICES))
    machine = MachineSnapshot(Detection(devices=DEVICES))
    page.show_decision(plan_load(model, machine))  # may come before detection ends
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
    assert page.panel.no_gpu_note.text().startswith("No GPU")


def test_after_a_load_the_page_sets_the_plans_memory_beside_the_measured(qtbot, bridge, tmp_path):
    from dataclasses import replace

    from engine.runtime import protocol as p
    from tests.app.conftest import client_of
    from tests.app.fake_engine import model_loaded

    model = write_sparse_gguf(tmp_path / "llama.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    page = _page(qtbot, bridge, tmp_path, lambda: Detection(devices=DEVICES))
    decision = plan_load(model, MachineSnapshot(Detection(devices=DEVICES)))
    page.show_decision(decision)
    qtbot.waitUntil(lambda: page.panel is not None and page.panel.plan is not None, timeout=5000)
    assert not page.memory_check.isVisible()
    predicted = page.panel.plan.devices[0].total_bytes
    bridge.load(decision.params)
    measured = p.DeviceDelta(device="CUDA0", used_bytes=predicted - 64 * 1024**2)
    loaded = replace(model_loaded(str(model)), device_used_delta=(measured,))
    client_of(bridge).emit(loaded)
    qtbot.waitUntil(page.memory_check.isVisible, timeout=5000)
    text = page.memory_check.text()
    assert text.startswith("After loading: GPU memory: predicted ")
    assert "within the plan's tolerance" in text


def test_the_loaded_models_kv_check_is_shown_from_its_kept_figures(qtbot, bridge, tmp_path):
    from engine.session.kv_quality import KvResult, store
    from tests.app.conftest import load_fake_model

    model = write_sparse_gguf(tmp_path / "llama.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    store(model, {("llama", "f16", "f16"): KvResult(0.0, 1.0, 384, 3.0),
                  ("llama", "q4_0", "q4_0"): KvResult(0.09, 0.8, 384, 3.0)})  # fmt: skip
    page = _page(qtbot, bridge, tmp_path, lambda: Detection(devices=DEVICES))
    load_fake_model(qtbot, bridge, model)
    qtbot.waitUntil(page.kv_quality.isVisible, timeout=5000)
    assert "q4_0 0.0900 (hurts this model: Best fit leaves it out)" in page.kv_quality.text()
    assert not page.kv_check.running  # kept figures: no process started


def test_the_kv_check_runs_in_a_child_and_says_why_it_failed(qtbot, tmp_path, monkeypatch):
    from app.model.kv_check import KvCheckRunner

    monkeypatch.setenv("HEARTH_KV_CHECK", "1")
    not_a_model = tmp_path / "broken.gguf"
    not_a_model.write_bytes(b"not a gguf at all")
    runner = KvCheckRunner()
    with qtbot.waitSignal(runner.finished, timeout=60_000) as said:
        runner.check(str(not_a_model))
        assert runner.running
    assert said.args[0].startswith("The KV check could not run on broken.gguf")
    assert not runner.running
