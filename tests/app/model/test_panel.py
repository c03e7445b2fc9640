"""The model settings panel: sliders re-plan and repaint the memory bars within 50 ms, over-budget
choices turn red and say what would happen, Best fit, Apply reloads, settings remembered."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.common.theme import apply_theme
from app.model.panel import CANCEL, LOAD_AND_REMEMBER, LOAD_ONCE, SettingsPanel
from engine.hardware import Detection, Device
from engine.hardware.records import CPU, GPU
from engine.session import MachineSnapshot, RememberedSettings
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
from tests.app.conftest import client_of, cpu_only_detection

GIB = 1024**3
SCREENSHOT = Path(__file__).resolve().parents[3] / "docs" / "screenshots" / "settings.png"
RTX = Device(
    "cuda:0", "nvidia", "RTX 4070 (12 GB)", GPU, ("cuda",), "nvml", 12 * GIB, int(11.4 * GIB)
)
HOST = Device("cpu", "other", "CPU", CPU, ("cpu",), "psutil", 32 * GIB, 24 * GIB)
GAMING_PC = MachineSnapshot(Detection(devices=(RTX, HOST)), gpu_offload=True)


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    return {
        "dense": write_sparse_gguf(
            folder / "Llama-3-8B-Q4_K_M.gguf", SHAPES["llama3-8b"], "Q4_K_M"
        ),
        "moe": write_sparse_gguf(
            folder / "Qwen3-30B-A3B-Q4_K_M.gguf", SHAPES["qwen3-30b-a3b"], "Q4_K_M"
        ),
    }


class Answers:
    """What the person answers when Apply asks about an over-budget plan (and what was asked)."""

    def __init__(self):
        self.answer = CANCEL
        self.asked: list[str] = []

    def __call__(self, warning: str) -> str:
        self.asked.append(warning)
        return self.answer


@pytest.fixture
def answers():
    return Answers()


def _panel(qtbot, bridge, tmp_path, machine, answers=None):
    view = SettingsPanel(
        bridge,
        machine,
        remembered=RememberedSettings(tmp_path / "model-settings.json"),
        confirm_over_budget=answers,
    )
    qtbot.addWidget(view)
    return view


@pytest.fixture
def panel(qtbot, bridge, model_files, tmp_path, answers):
    view = _panel(qtbot, bridge, tmp_path, GAMING_PC, answers)
    view.resize(820, 520)
    view.show()
    view.set_model(model_files["dense"])
    return view


def test_a_new_model_starts_from_the_best_fit(panel):
    assert panel.plan is not None and panel.plan.fits
    assert [r.name.text() for r in panel.rows] == ["RTX 4070 (12 GB)", "system RAM"]
    assert panel.status.text().startswith("Fits:")


def test_every_slider_move_updates_the_bars_within_50_ms(panel):
    gpu_bar = panel.rows[0].bar
    times = []
    for step in range(panel.context.maximum() + 1):
        panel.context.setValue(step)
        times.append(panel.last_update_seconds)
        assert gpu_bar.usage.kv_bytes == panel.plan.devices[0].kv_bytes
    for value in range(panel.vram.maximum(), 0, -3):
        panel.vram.setValue(value)
        times.append(panel.last_update_seconds)
    assert max(times) < 0.050, max(times)


def test_more_context_means_a_bigger_kv_segment(panel):
    panel.auto_layers.setChecked(False)
    panel.layers.setValue(panel.layers.maximum())
    panel.context.setValue(0)
    small = panel.rows[0].bar.usage.kv_bytes
    panel.context.setValue(panel.context.maximum())
    assert panel.rows[0].bar.usage.kv_bytes > 4 * small


def test_over_budget_turns_red_and_says_what_happens(panel):
    panel.auto_layers.setChecked(False)
    panel.layers.setValue(panel.layers.maximum())
    panel.vram.setValue(8)  # 2 GiB for a 4.6 GiB model
    assert panel.rows[0].bar.over_budget
    assert "Over budget" in panel.status.text() and "run out of GPU memory" in panel.status.text()
    assert "color" in panel.status.styleSheet()
    panel.best_fit_button.click()
    assert panel.plan.fits and not panel.rows[0].bar.over_budget


def test_a_smaller_kv_type_and_auto_layers(panel):
    panel.set_values({"n_ctx": 8192, "kv_type": "f16", "n_gpu_layers": None})
    f16 = panel.plan.devices[0].kv_bytes
    panel.kv_type.setCurrentText("q8_0")
    assert panel.plan.devices[0].kv_bytes < 0.6 * f16
    panel.vram.setValue(12)  # 3 GiB: auto offloads only part of the model
    assert panel.plan.fits and 0 < panel.plan.config.n_gpu_layers < 33


def test_moe_experts_on_cpu_move_weights_to_ram(qtbot, panel, model_files):
    panel.set_model(model_files["moe"])
    assert panel.experts.isEnabled()
    panel.set_values({"n_ctx": 4096, "n_gpu_layers": 49, "n_cpu_expert_layers": 0})
    gpu_before = panel.plan.devices[0].weights_bytes
    panel.experts.setValue(24)
    assert panel.plan.devices[0].weights_bytes < gpu_before
    assert panel.plan.settings.tensor_buft_overrides  # the experts' regex goes to the engine


def test_experts_in_ram_are_said_beside_the_memory_bar(qtbot, panel, bridge, model_files):
    """llama.cpp's --n-cpu-moe split, then the Hearth engine's experts in RAM with its GPU
    cache of experts: the line beside the bars, and Apply's load parameters."""
    bridge.start()
    panel.set_model(model_files["moe"])
    panel.set_values({"n_ctx": 4096, "n_gpu_layers": 49, "n_cpu_expert_layers": 0})
    assert panel.experts_in_ram.isHidden()
    panel.experts.setValue(24)
    assert panel.experts_in_ram.text() == "experts in RAM: 24 of 48 layers"
    assert panel.experts_in_ram.isVisible()
    panel.set_values({"engine": "hearth", "kv_type": "f16", "n_cpu_expert_layers": 30})
    assert panel.experts.isEnabled() and panel.plan.fits
    assert panel.plan.settings.expert_cache_slots == 0  # read in place: predicted faster
    assert panel.experts_in_ram.text() == (
        "experts in RAM: 30 of 48 layers, read by the GPU over PCIe"
    )
    panel.apply_button.click()
    (name, params) = client_of(bridge).commands[-1]
    assert name == "load" and params.engine == "hearth"
    assert (params.hearth_ram_expert_layers, params.hearth_expert_cache_slots) == (30, 0)


def test_apply_reloads_with_the_plan_and_remembers_per_model(panel, bridge, model_files, tmp_path):
    bridge.start()
    panel.set_values({"n_ctx": 4096, "kv_type": "q8_0", "n_gpu_layers": None})
    panel.apply_button.click()
    (name, params) = client_of(bridge).commands[-1]
    assert name == "load"
    assert (params.n_ctx, params.type_k, params.type_v) == (4096, "q8_0", "q8_0")
    assert params.n_gpu_layers == panel.plan.config.n_gpu_layers
    saved = json.loads((tmp_path / "model-settings.json").read_text())
    assert next(iter(saved.values()))["n_ctx"] == 4096

    panel.set_model(model_files["moe"])
    panel.set_model(model_files["dense"])  # back: the remembered choices, not the best fit
    assert panel.values()["n_ctx"] == 4096 and panel.values()["kv_type"] == "q8_0"


def test_settings_screenshot(qtbot, panel, model_files, tmp_path):
    from PySide6.QtWidgets import QApplication

    apply_theme(QApplication.instance())
    panel.set_model(model_files["moe"])
    panel.set_values(
        {"n_ctx": 32768, "kv_type": "q8_0", "n_gpu_layers": None, "n_cpu_expert_layers": 30}
    )
    panel.resize(860, 540)
    qtbot.wait(50)
    target = SCREENSHOT if os.environ.get("HEARTH_SCREENSHOTS") == "1" else tmp_path / "s.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    assert panel.grab().save(str(target))


def test_apply_over_budget_asks_first_and_remembers_only_if_asked(panel, bridge, answers, tmp_path):
    bridge.start()
    settings = tmp_path / "model-settings.json"
    panel.auto_layers.setChecked(False)
    panel.layers.setValue(panel.layers.maximum())
    panel.vram.setValue(8)  # 2 GiB for a 4.6 GiB model: red
    assert not panel.plan.fits
    loads = client_of(bridge).loads

    answers.answer = CANCEL
    panel.apply_button.click()
    assert len(answers.asked) == 1 and "out-of-memory" in answers.asked[0]
    assert loads() == [] and not settings.exists()

    answers.answer = LOAD_ONCE
    panel.apply_button.click()
    assert len(loads()) == 1 and not settings.exists()  # loaded, not remembered

    answers.answer = LOAD_AND_REMEMBER
    panel.apply_button.click()
    assert len(loads()) == 2
    saved = next(iter(json.loads(settings.read_text()).values()))
    assert saved["vram_budget_bytes"] == 2 * GIB and saved["n_gpu_layers"] == 33


def test_apply_within_budget_does_not_ask(panel, bridge, answers):
    bridge.start()
    panel.apply_button.click()
    assert answers.asked == [] and len(client_of(bridge).loads()) == 1


def test_without_a_usable_gpu_there_are_no_gpu_controls(qtbot, bridge, tmp_path, model_files):
    laptop = MachineSnapshot(cpu_only_detection(free_gib=3.0))
    view = _panel(qtbot, bridge, tmp_path, laptop)
    view.show()
    view.set_model(model_files["dense"])
    assert view.no_gpu_note.isVisible()
    assert not view.vram.isVisible() and not view.layers.isVisible()
    assert view.form.isRowVisible(view.context.parentWidget())
    view.set_values({"n_ctx": 131072, "kv_type": "f16"})  # far over 3 GiB of RAM
    status = view.status.text()
    assert "Over budget" in status and "GPU" not in status  # never "set fewer GPU layers" at 0
    assert [r.name.text() for r in view.rows] == ["system RAM"]


def test_a_gpu_the_engine_cannot_use_is_no_gpu(qtbot, bridge, tmp_path, model_files):
    cpu_build = MachineSnapshot(Detection(devices=(RTX, HOST)), gpu_offload=False)
    view = _panel(qtbot, bridge, tmp_path, cpu_build)
    view.show()
    view.set_model(model_files["dense"])
    assert view.no_gpu_note.isVisible() and not view.vram.isVisible()
    assert view.plan.config.n_gpu_layers == 0


def _screenshot_target(name: str, tmp_path) -> Path:
    on = os.environ.get("HEARTH_SCREENSHOTS") == "1"
    return SCREENSHOT.parent / name if on else tmp_path / name


def test_no_gpu_screenshot(qtbot, bridge, tmp_path, model_files):
    from PySide6.QtWidgets import QApplication

    apply_theme(QApplication.instance())
    laptop = MachineSnapshot(cpu_only_detection(free_gib=12.0))
    view = _panel(qtbot, bridge, tmp_path, laptop)
    view.resize(860, 480)
    view.show()
    view.set_model(model_files["dense"])
    qtbot.wait(50)
    assert view.grab().save(str(_screenshot_target("settings-no-gpu.png", tmp_path)))


def test_the_over_budget_question_as_the_person_sees_it(qtbot, bridge, tmp_path, model_files):
    """The real dialog of the Model page: its text, its three answers; Cancel loads nothing."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.common.machine_state import MachineState
    from app.model.page import ModelSettingsPage

    apply_theme(QApplication.instance())
    page = ModelSettingsPage(
        bridge,
        MachineState(detect_fn=lambda: GAMING_PC.detection),
        remembered=RememberedSettings(tmp_path / "s.json"),
    )
    qtbot.addWidget(page)
    page.resize(860, 560)
    page.show()
    qtbot.waitUntil(lambda: page.panel is not None, timeout=5000)
    page.panel.set_model(model_files["dense"])
    page.show_decision(page.panel.decision)
    page.panel.auto_layers.setChecked(False)
    page.panel.layers.setValue(page.panel.layers.maximum())
    page.panel.vram.setValue(8)  # 2 GiB
    seen = {}

    def answer():
        box = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox))
        seen["text"] = box.informativeText()
        seen["buttons"] = [b.text() for b in box.buttons()]
        box.adjustSize()
        box.grab().save(str(_screenshot_target("apply-over-budget.png", tmp_path)))
        box.button(QMessageBox.StandardButton.Cancel).click()

    bridge.start()
    QTimer.singleShot(200, answer)
    page.panel.apply_button.click()
    assert "out-of-memory" in seen["text"] and "will not remember" in seen["text"]
    assert seen["buttons"][:2] == ["Load once", "Load and remember"]
    assert client_of(bridge).loads() == []


def test_the_hearth_engine_plans_its_own_memory_and_applies_with_its_formats(panel, bridge):
    bridge.start()
    assert panel.engine_controls.values()[0] == "llama"  # Best fit: not measured yet
    assert "not been measured" in panel.engine_controls.note.text()
    panel.set_values({"engine": "hearth", "n_ctx": 8192, "kv_type": "q8", "type_v": "rot4"})
    assert panel.plan.settings.engine == "hearth" and panel.plan.fits
    assert not panel.flash_attn.isEnabled() and not panel.layers.isEnabled()
    gpu = panel.plan.devices[0]
    assert 4.5 * GIB < gpu.weights_bytes < 4.7 * GIB  # the embedding table included
    target = SCREENSHOT.with_name("settings-hearth.png")
    if os.environ.get("HEARTH_SCREENSHOTS") == "1":
        assert panel.grab().save(str(target))
    panel.apply_button.click()
    (name, params) = client_of(bridge).commands[-1]
    assert name == "load" and params.engine == "hearth"
    assert (params.n_ctx, params.type_k, params.type_v) == (8192, "q8", "rot4")
    assert panel.values()["engine"] == "hearth" and panel.values()["type_v"] == "rot4"


def test_without_a_gpu_the_hearth_engine_is_offered_disabled(qtbot, bridge, model_files, tmp_path):
    view = _panel(qtbot, bridge, tmp_path, MachineSnapshot(cpu_only_detection()))
    view.set_model(model_files["dense"])
    model = view.engine_controls.engine.model()
    assert not model.item(1).isEnabled() and "no GPU" in model.item(1).toolTip()


def test_a_model_placed_on_a_helper_machine_has_a_bar_row_for_its_device(
    qtbot, bridge, tmp_path, model_files
):
    from engine.hardware.remote import RemoteDevice, RemoteHost, RemoteLink

    address = "10.0.0.2:50052"
    card = RemoteDevice(address, 0, "CUDA0", "RTX 3090", "cuda", 23 * GIB, 24 * GIB, None, 936.0)
    helper = RemoteHost(address, (7, 0, 0), (card,), RemoteLink(0.0002, 1.1e9))
    small_card = Device("cuda:0", "nvidia", "RTX 3050", GPU, ("cuda",), "nvml", 4 * GIB, 4 * GIB)
    machine = MachineSnapshot(
        Detection(devices=(small_card, HOST)), gpu_offload=True, helpers=(helper,)
    )
    view = _panel(qtbot, bridge, tmp_path, machine)
    view.show()
    view.set_model(model_files["dense"])  # 4.6 GiB: fits the helper, not the 4 GiB card
    assert view.decision.params.rpc_servers == (address,)
    assert [r.name.text() for r in view.rows] == [
        f"CUDA0 on {address}",
        "RTX 3050",
        "system RAM",
    ]
    assert view.plan.settings.rpc_servers == (address,)


def test_a_vision_models_projector_is_in_the_bars_and_in_the_load(qtbot, bridge, tmp_path, answers):
    from testkit.tiny_vision import write_tiny_projector

    folder = tmp_path / "vlm"
    folder.mkdir()
    model = write_sparse_gguf(folder / "Llama-3-8B-Q4_K_M.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    projector = write_tiny_projector(folder / "mmproj-F16.gguf", text_embd=4096)
    view = _panel(qtbot, bridge, tmp_path, GAMING_PC, answers)
    view.set_model(model)
    gpu_bar = view.rows[0].bar
    assert gpu_bar.parts()[-1] == view.decision.projector.total_bytes > 0
    view.set_values({"n_ctx": 4096, "kv_type": "q8_0", "n_gpu_layers": None})  # a slider moved
    assert view.plan.devices[0].projector_bytes == view.decision.projector.total_bytes
    bridge.start()
    view.apply_button.click()
    (name, params) = client_of(bridge).commands[-1]
    assert name == "load" and params.mmproj_path == str(projector)
