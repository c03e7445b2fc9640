"""The Model page shows the truth: the model that is loaded (not a refused file), Best fit's
longest context, the over-budget part of a bar in its own colour with a legend entry, and no
GPU reason where there is no GPU."""

from __future__ import annotations

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel

from app.model.memory_bar import OVER_BUDGET, OVER_COLOR, Legend, MemoryBar
from engine.planner import DeviceUsage
from engine.session import MachineSnapshot
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
from tests.app.conftest import WAIT_MS, client_of, cpu_only_detection, make_window, open_in_window
from tests.app.model.test_panel import GAMING_PC, _panel


def test_a_refused_file_leaves_the_page_on_the_loaded_model(qtbot, bridge, tmp_path, starter_model):
    too_big = write_sparse_gguf(tmp_path / "Mixtral.gguf", SHAPES["mixtral-8x7b"], "Q4_K_M")
    window = make_window(qtbot, bridge, tmp_path)
    bridge.start()
    open_in_window(qtbot, window, starter_model)
    page = window.page("Model")
    qtbot.waitUntil(lambda: page.panel is not None and page.panel.decision is not None,
                    timeout=WAIT_MS)  # fmt: skip
    window.open_model_file(too_big)
    qtbot.waitUntil(lambda: not window.file_banner.isHidden(), timeout=WAIT_MS)
    assert page.panel.decision.path == starter_model
    assert page.panel.title.text() == starter_model.name
    assert len(client_of(bridge).loads()) == 1


def test_best_fit_takes_the_longest_context_that_fits(qtbot, bridge, tmp_path):
    model = write_sparse_gguf(tmp_path / "Llama-3-8B-Q4_K_M.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    panel = _panel(qtbot, bridge, tmp_path, GAMING_PC)
    panel.set_model(model)
    panel.context.setValue(0)
    assert panel.chosen().n_ctx < 8192
    panel.best_fit_button.click()
    assert panel.chosen().n_ctx == 8192  # the training context: it fits on the 12 GB card


def test_the_part_over_budget_is_red_and_in_the_legend(qtbot):
    bar = MemoryBar()
    qtbot.addWidget(bar)
    bar.resize(200, 22)
    gib = 1024**3
    bar.set_usage(DeviceUsage("gpu", "GPU", gib, 0, 2 * gib, 0, 0))  # 1 GiB over its budget
    image = bar.grab().toImage()
    over = [QColor(image.pixel(x, y)) for x in range(150, 195) for y in range(5, 17)]
    red = [c for c in over if c.red() > 180 and c.green() < 90 and c.blue() < 90]
    assert len(red) > len(over) / 2  # red, not the KV cache's purple under a tint
    legend = Legend()
    qtbot.addWidget(legend)
    assert OVER_BUDGET in [label.text() for label in legend.findChildren(QLabel)]
    assert OVER_COLOR.red() > 200


def test_without_a_gpu_no_reason_names_one(qtbot, bridge, tmp_path):
    model = write_sparse_gguf(tmp_path / "Llama-3-8B-Q4_K_M.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    panel = _panel(qtbot, bridge, tmp_path, MachineSnapshot(cpu_only_detection(2)))
    panel.set_model(model)
    assert "GPU" not in panel.kv_type_v.toolTip()
    assert "GPU" not in panel.status.text()


def test_the_engine_explanation_is_there_for_a_remembered_choice(qtbot, bridge, tmp_path):
    """After a restart a remembered choice loads without a search: its reason is still shown."""
    from engine.session import RememberedChoice, plan_load

    model = write_sparse_gguf(tmp_path / "Llama-3-8B-Q4_K_M.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    decision = plan_load(model, GAMING_PC, RememberedChoice(n_ctx=4096))
    assert decision.best is None  # loaded as remembered
    panel = _panel(qtbot, bridge, tmp_path, GAMING_PC)
    panel.show_decision(decision)
    assert panel.engine_controls.note.text().startswith("Best fit: ")
