"""The model settings panel: VRAM budget, context, KV cache type, flash attention, GPU layers and
MoE experts on the CPU, with a live memory bar per device from the planner.

Every control change re-plans (engine.planner.manual: a few table look-ups) and repaints the bars
at once; `last_update_seconds` keeps the cost visible (tests hold it under 50 ms). "Best fit" asks
the planner to choose for the budget; Apply loads the model through the bridge with the plan's
ModelParams and remembers the choices for that file.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from app.common.file_text import show_plain
from app.model.memory_bar import OVER_COLOR, DeviceMemoryRow, Legend, gib
from app.model.settings_store import ModelSettingsStore
from engine.gguf import read_model_info
from engine.planner import DeviceBudget, Planner, PlanRequest, safety_margin
from engine.planner.manual import ManualChoice, ManualPlan, plan_manual

MIB = 1024 * 1024
KV_TYPES = ("f16", "q8_0", "q4_0")
CONTEXT_STEPS = (512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
                 65536, 98304, 131072, 196608, 262144, 524288, 1048576)  # fmt: skip


@dataclass(frozen=True)
class GpuSpec:
    id: str
    name: str
    backend: str
    total_bytes: int
    free_bytes: int


def gpus_from_devices(devices: Sequence) -> list[GpuSpec]:
    """The GPUs among engine.hardware's detected devices."""
    return [
        GpuSpec(d.id, d.name, next((b for b in d.backends if b != "cpu"), "cuda"),
                d.total_bytes or 0, d.free_bytes or 0)
        for d in devices if d.is_gpu and d.total_bytes
    ]  # fmt: skip


def _slider(lo: int, hi: int) -> QSlider:
    slider = QSlider(Qt.Orientation.Horizontal)
    slider.setRange(lo, hi)
    return slider


class SettingsPanel(QWidget):
    applied = Signal(object)  # the ModelParams sent to the engine

    def __init__(
        self,
        bridge,
        gpus: Sequence[GpuSpec],
        *,
        host_budget_bytes: int | None = None,
        settings_store: ModelSettingsStore | None = None,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self.setObjectName("settingsPanel")
        self._bridge = bridge
        self._gpus = list(gpus)
        self._host_budget = host_budget_bytes
        self._store = settings_store
        self._planner: Planner | None = None
        self._model_path: Path | None = None
        self._n_ctx_train = 4096
        self._updating = False
        self.plan: ManualPlan | None = None
        self.last_update_seconds = 0.0

        self.title = QLabel("No model")
        self.title.setObjectName("panelHeading")
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.35)
        font.setBold(True)
        self.title.setFont(font)
        biggest = max((g.total_bytes for g in self._gpus), default=0)
        self.vram = _slider(0, max(1, biggest // (256 * MIB)))  # steps of 256 MiB
        self.vram_label = QLabel()
        self.context = _slider(0, len(CONTEXT_STEPS) - 1)
        self.context_label = QLabel()
        self.kv_type = QComboBox()
        self.kv_type.addItems(KV_TYPES)
        self.kv_type.setToolTip("q8_0 halves the KV cache, q4_0 quarters it, at a small cost")
        self.flash_attn = QCheckBox("Flash attention")
        self.flash_attn.setChecked(True)
        self.auto_layers = QCheckBox("Auto")
        self.auto_layers.setChecked(True)
        self.layers = _slider(0, 1)
        self.layers_label = QLabel()
        self.experts = _slider(0, 0)
        self.experts_label = QLabel()
        self.rows: list[DeviceMemoryRow] = []
        self.bars_box = QVBoxLayout()
        self.bars_box.setSpacing(4)
        self.status = QLabel()
        self.status.setObjectName("planStatus")
        self.status.setWordWrap(True)
        self.best_fit_button = QPushButton("Best fit")
        self.best_fit_button.setToolTip("Let the planner choose the longest context that fits")
        self.apply_button = QPushButton("Apply and reload")
        self.apply_button.setObjectName("applyButton")
        self.apply_button.setDefault(True)
        self.apply_button.setToolTip("Reload the model with these settings")

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("VRAM budget", self._with_label(self.vram, self.vram_label))
        form.addRow("Context", self._with_label(self.context, self.context_label))
        form.addRow("KV cache type", self._row(self.kv_type, self.flash_attn))
        layers_row = self._row(self.auto_layers, self.layers, self.layers_label)
        form.addRow("GPU layers", layers_row)
        form.addRow("MoE experts on CPU", self._with_label(self.experts, self.experts_label))
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.best_fit_button)
        buttons.addWidget(self.apply_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 20)
        layout.setSpacing(12)
        layout.addWidget(self.title)
        layout.addLayout(form)
        memory_heading = QLabel("Memory after loading")
        memory_heading.setObjectName("sectionHeading")
        bold = memory_heading.font()
        bold.setBold(True)
        memory_heading.setFont(bold)
        layout.addWidget(memory_heading)
        layout.addLayout(self.bars_box)
        layout.addWidget(Legend())
        layout.addWidget(self.status)
        layout.addLayout(buttons)
        layout.addStretch(1)

        for slider in (self.vram, self.context, self.layers, self.experts):
            slider.valueChanged.connect(self.update_plan)
        self.kv_type.currentIndexChanged.connect(self.update_plan)
        self.flash_attn.toggled.connect(self.update_plan)
        self.auto_layers.toggled.connect(self.update_plan)
        self.best_fit_button.clicked.connect(self.best_fit)
        self.apply_button.clicked.connect(self.apply)
        self._set_enabled(False)

    @staticmethod
    def _row(*widgets: QWidget) -> QWidget:
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        for w in widgets:
            layout.addWidget(w, 1 if isinstance(w, QSlider) else 0)
        return row

    def _with_label(self, slider: QSlider, label: QLabel) -> QWidget:
        label.setMinimumWidth(110)
        label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return self._row(slider, label)

    def _set_enabled(self, enabled: bool) -> None:
        for w in (self.vram, self.context, self.kv_type, self.flash_attn, self.auto_layers,
                  self.layers, self.experts, self.best_fit_button, self.apply_button):  # fmt: skip
            w.setEnabled(enabled)

    # -- the model ------------------------------------------------------------------------------

    def set_model(self, path: str | Path) -> None:
        """Read `path`'s header and show its settings: remembered ones, else the best fit."""
        self._model_path = Path(path)
        info = read_model_info(self._model_path)
        self._planner = Planner(info)
        profile = self._planner.profiles[0]
        self._n_ctx_train = profile.n_ctx_train or 4096
        show_plain(self.title, self._model_path.name)
        self._updating = True
        steps = [s for s in CONTEXT_STEPS if s <= self._n_ctx_train] or [self._n_ctx_train]
        self.context.setRange(0, len(steps) - 1)
        self.layers.setRange(0, profile.n_layer + 1)
        self.experts.setRange(0, profile.n_layer if profile.is_moe else 0)
        biggest = max((g.free_bytes - safety_margin(g.total_bytes) for g in self._gpus), default=0)
        self.vram.setValue(max(0, biggest) // (256 * MIB))
        self._updating = False
        self._set_enabled(True)
        self.experts.setEnabled(profile.is_moe)
        remembered = self._store.get(self._model_path) if self._store else None
        if remembered:
            self.set_values(remembered)
        else:
            self.context.setValue(steps.index(min(8192, steps[-1])) if 8192 in steps else 0)
            self.best_fit()

    @property
    def model_path(self) -> Path | None:
        return self._model_path

    def _context_steps(self) -> list[int]:
        return [s for s in CONTEXT_STEPS if s <= self._n_ctx_train] or [self._n_ctx_train]

    def values(self) -> dict[str, Any]:
        return {
            "vram_budget_bytes": self.vram.value() * 256 * MIB,
            "n_ctx": self._context_steps()[self.context.value()],
            "kv_type": self.kv_type.currentText(),
            "flash_attn": self.flash_attn.isChecked(),
            "n_gpu_layers": None if self.auto_layers.isChecked() else self.layers.value(),
            "n_cpu_expert_layers": self.experts.value(),
        }

    def set_values(self, values: dict[str, Any]) -> None:
        self._updating = True
        try:
            if "vram_budget_bytes" in values:
                self.vram.setValue(int(values["vram_budget_bytes"]) // (256 * MIB))
            steps = self._context_steps()
            n_ctx = int(values.get("n_ctx", 4096))
            self.context.setValue(min(range(len(steps)), key=lambda i: abs(steps[i] - n_ctx)))
            self.kv_type.setCurrentText(values.get("kv_type", "f16"))
            self.flash_attn.setChecked(bool(values.get("flash_attn", True)))
            layers = values.get("n_gpu_layers")
            self.auto_layers.setChecked(layers is None)
            if layers is not None:
                self.layers.setValue(int(layers))
            self.experts.setValue(int(values.get("n_cpu_expert_layers", 0)))
        finally:
            self._updating = False
        self.update_plan()

    # -- planning -------------------------------------------------------------------------------

    def request(self) -> PlanRequest:
        cap = self.vram.value() * 256 * MIB
        gpus = tuple(
            DeviceBudget(g.id, g.name, g.backend, max(0, min(cap, g.total_bytes)))
            for g in self._gpus
        )
        return PlanRequest(gpus=gpus, host_budget_bytes=self._host_budget)

    def update_plan(self, *_args) -> None:
        if self._updating or self._planner is None:
            return
        started = time.perf_counter()
        values = self.values()
        choice = ManualChoice(
            n_ctx=values["n_ctx"],
            kv_type=values["kv_type"],
            flash_attn=values["flash_attn"],
            n_gpu_layers=values["n_gpu_layers"],
            n_cpu_expert_layers=values["n_cpu_expert_layers"],
        )
        self.plan = plan_manual(self._planner, self.request(), choice)
        self._show(self.plan)
        self.last_update_seconds = time.perf_counter() - started

    def _show(self, plan: ManualPlan) -> None:
        v = self.values()
        self.vram_label.setText(gib(v["vram_budget_bytes"]))
        self.context_label.setText(f"{v['n_ctx']:,} tokens")
        self.layers.setEnabled(not self.auto_layers.isChecked())
        self._updating = True
        self.layers.setValue(plan.config.n_gpu_layers)
        self._updating = False
        self.layers_label.setText(f"{plan.config.n_gpu_layers} / {plan.n_layers + 1}")
        self.experts_label.setText(
            f"{plan.config.n_cpu_expert_layers} layers" if self.experts.maximum() else "not MoE"
        )
        while len(self.rows) < len(plan.devices):
            row = DeviceMemoryRow()
            self.rows.append(row)
            self.bars_box.addWidget(row)
        for row, usage in zip(self.rows, plan.devices, strict=False):
            row.set_usage(usage)
        self.status.setText(self._status_text(plan))
        colour = OVER_COLOR.name() if not plan.fits else ""
        self.status.setStyleSheet(f"color: {colour};" if colour else "")

    def _status_text(self, plan: ManualPlan) -> str:
        on_gpu = f"{plan.config.n_gpu_layers} of {plan.n_layers + 1} layers on the GPU"
        if plan.fits:
            gpu = plan.devices[0] if self._gpus else None
            where = (
                f"{gib(gpu.total_bytes)} of {gib(gpu.budget_bytes)} on {gpu.name}, " if gpu else ""
            )
            return f"Fits: {where}{on_gpu}."
        problems = []
        for name, over in plan.over_budget:
            if name == "system RAM":
                problems.append(
                    f"{gib(over)} more than the free system RAM: the system would swap heavily "
                    "or the load would fail"
                )
            else:
                problems.append(
                    f"{gib(over)} over the budget on {name}: loading would run out of GPU "
                    "memory and fail, or crowd out other programs"
                )
        return (
            "Over budget — " + "; ".join(problems) + ". Shorten the context, pick a smaller KV "
            "cache type, set fewer GPU layers, or press Best fit."
        )

    def best_fit(self) -> None:
        """Let the planner pick everything for the budget, aiming at the current context."""
        if self._planner is None:
            return
        request = self.request()
        target = self.values()["n_ctx"]

        result = self._planner.plan(replace(request, target_ctx=target, min_ctx=512))
        if result.choice is None:
            self.update_plan()
            self.status.setText(
                "Nothing fits this budget: " + " ".join(result.reasons or ("raise the budget.",))
            )
            return
        c = result.choice
        all_layers = c.n_gpu_layers >= c.n_layers + 1
        self.set_values(
            {
                "n_ctx": c.n_ctx,
                "kv_type": c.type_k,
                "flash_attn": c.flash_attn,
                "n_gpu_layers": None if all_layers else c.n_gpu_layers,
                "n_cpu_expert_layers": c.n_cpu_expert_layers,
            }
        )

    def apply(self) -> None:
        """Reload the engine with these settings, and remember them for this file."""
        if self.plan is None or self._model_path is None:
            return
        params = self.plan.settings.model_params()
        if self._store is not None:
            self._store.put(self._model_path, self.values())
        self._bridge.load(params)
        self.applied.emit(params)
