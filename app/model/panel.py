"""The model settings panel: VRAM budget, context, KV cache type, flash attention, GPU layers and
MoE experts on the CPU, with a live memory bar per device from the planner.

The panel shows the load policy's decision (engine.session.LoadDecision) for the model the window
opened: it never reads the header or plans a load itself. Every control change re-plans
(engine.planner.manual: a few table look-ups) and repaints the bars at once;
`last_update_seconds` keeps the cost visible (tests hold it under 50 ms). "Best fit" asks the
planner to choose for the budget; Apply loads the model through the bridge with the plan's
ModelParams and remembers the choice for that file. Apply with a plan over budget asks first, and
is remembered only if the person says so. Without a usable GPU the VRAM and GPU-layer controls
are hidden: they could not apply.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from app.common.accessibility import named
from app.common.file_text import show_plain
from app.model.engine_row import EngineControls
from app.model.memory_bar import OVER_COLOR, DeviceMemoryRow, Legend, gib
from app.model.speculative_choice import SpeculativeChoice
from engine.enums import KV_TYPES, EngineState
from engine.planner import Planner, PlanRequest, safety_margin
from engine.planner.hearth_plan import hearth_profile, hearth_unavailable, pair_problem
from engine.planner.manual import ManualPlan, plan_manual
from engine.planner.records import experts_in_ram_text
from engine.planner.vision import ProjectorCost, reserve_projector, with_projector
from engine.runtime.protocol import ModelParams
from engine.session import (
    LoadDecision,
    MachineSnapshot,
    RememberedChoice,
    RememberedSettings,
    best_fit,
    choice_from,
    plan_load,
)

MIB = 1024 * 1024
# What Apply does with a plan over budget: the person's answer to confirm_over_budget.
LOAD_ONCE, LOAD_AND_REMEMBER, CANCEL = "once", "remember", "cancel"
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
        machine: MachineSnapshot,
        *,
        remembered: RememberedSettings | None = None,
        confirm_over_budget: Callable[[str], str] | None = None,
        prepare_load: Callable[[ModelParams], ModelParams] | None = None,
        confirm_stop_reply: Callable[[], bool] | None = None,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self.setObjectName("settingsPanel")
        # The app's engine preferences (threads) added to what this panel loads.
        self._prepare_load = prepare_load or (lambda params: params)
        # Asked before a reload would cut a reply short (True: go ahead).
        self._confirm_stop_reply = confirm_stop_reply or (lambda: False)
        self._bridge = bridge
        self._machine = machine
        self._gpus = gpus_from_devices(machine.usable_gpus)
        self._store = remembered
        self._confirm = confirm_over_budget or (lambda _text: CANCEL)
        self.decision: LoadDecision | None = None
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
        named(self.vram, "VRAM budget")
        self.vram_label = QLabel()
        self.context = _slider(0, len(CONTEXT_STEPS) - 1)
        named(self.context, "Context length")
        self.context_label = QLabel()
        self.engine_controls = EngineControls()
        self.kv_type = self.engine_controls.k_type  # K (V follows it on llama.cpp)
        self.kv_type_v = self.engine_controls.v_type
        self.engine_controls.has_gpu = bool(self._gpus)
        self.flash_attn = QCheckBox("Flash attention")
        self.flash_attn.setChecked(True)
        self.auto_layers = QCheckBox("Auto")
        self.auto_layers.setChecked(True)
        self.layers = _slider(0, 1)
        named(self.layers, "GPU layers")
        self.layers_label = QLabel()
        self.experts = _slider(0, 0)
        named(self.experts, "MoE expert layers on the CPU")
        self.experts_label = QLabel()
        # beside the memory bars: how many layers' experts stay in RAM (and the GPU cache)
        self.experts_in_ram = QLabel()
        self.experts_in_ram.setObjectName("expertsInRam")
        self.experts_in_ram.setWordWrap(True)
        self.speculative = SpeculativeChoice(parent=self)
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

        self.form = form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("VRAM budget", self._with_label(self.vram, self.vram_label))
        form.addRow("Context", self._with_label(self.context, self.context_label))
        form.addRow("Engine", self.engine_controls)
        form.addRow("KV cache K / V", self._row(self.kv_type, self.kv_type_v, self.flash_attn))
        layers_row = self._row(self.auto_layers, self.layers, self.layers_label)
        form.addRow("GPU layers", layers_row)
        form.addRow("MoE experts on CPU", self._with_label(self.experts, self.experts_label))
        form.addRow("Speculative decoding", self.speculative)
        self.no_gpu_note = QLabel(
            "No GPU that this engine can use: the model runs on the CPU, in system RAM."
        )
        self.no_gpu_note.setObjectName("noGpuNote")
        self.no_gpu_note.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.best_fit_button)
        buttons.addWidget(self.apply_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 20)
        layout.setSpacing(12)
        layout.addWidget(self.title)
        layout.addWidget(self.no_gpu_note)
        layout.addLayout(form)
        memory_heading = QLabel("Memory after loading")
        memory_heading.setObjectName("sectionHeading")
        bold = memory_heading.font()
        bold.setBold(True)
        memory_heading.setFont(bold)
        layout.addWidget(memory_heading)
        layout.addLayout(self.bars_box)
        layout.addWidget(self.experts_in_ram)
        layout.addWidget(Legend())
        layout.addWidget(self.status)
        layout.addLayout(buttons)
        layout.addStretch(1)

        for slider in (self.vram, self.context, self.layers, self.experts):
            slider.valueChanged.connect(self.update_plan)
        self.engine_controls.changed.connect(self.update_plan)
        self.flash_attn.toggled.connect(self.update_plan)
        self.auto_layers.toggled.connect(self.update_plan)
        self.speculative.changed.connect(self.update_plan)
        self.best_fit_button.clicked.connect(self.best_fit)
        self.apply_button.clicked.connect(self.apply)
        self._set_enabled(False)
        self._show_gpu_controls()

    def _show_gpu_controls(self) -> None:
        has_gpu = bool(self._gpus)
        self.form.setRowVisible(self.vram.parentWidget(), has_gpu)
        self.form.setRowVisible(self.layers.parentWidget(), has_gpu)
        self.form.setRowVisible(self.experts.parentWidget(), has_gpu)  # all on the CPU anyway
        self.no_gpu_note.setVisible(not has_gpu)

    def set_machine(self, machine: MachineSnapshot) -> None:
        """A new snapshot of the machine (a refresh): the same choices, planned against it."""
        self._machine = machine
        self._gpus = gpus_from_devices(machine.usable_gpus)
        biggest = max((g.total_bytes for g in self._gpus), default=0)
        self.engine_controls.has_gpu = bool(self._gpus)
        self._updating = True
        self.vram.setRange(0, max(1, biggest // (256 * MIB)))
        self._updating = False
        self._show_gpu_controls()
        self.update_plan()

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
                  self.layers, self.experts, self.best_fit_button, self.apply_button,
                  self.speculative):  # fmt: skip
            w.setEnabled(enabled)
        self.engine_controls.setEnabled(enabled)

    # -- the model ------------------------------------------------------------------------------

    def set_model(self, path: str | Path) -> None:
        """Show `path` as the load policy would load it now (its remembered choice if it fits,
        else the best fit)."""
        remembered = self._store.get(path) if self._store else None
        self.show_decision(plan_load(path, self._machine, remembered))

    def show_decision(self, decision: LoadDecision) -> None:
        """Show the model the window opened, with the settings the load policy chose for it."""
        self.decision = decision
        self._model_path = decision.path
        self._planner = Planner(decision.info)
        profile = self._planner.profiles[0]
        self._n_ctx_train = profile.n_ctx_train or 4096
        show_plain(self.title, self._model_path.name)
        self._show_engine_support(decision)
        self._updating = True
        steps = self._context_steps()
        self.context.setRange(0, len(steps) - 1)
        self.layers.setRange(0, profile.n_layer + 1)
        self.experts.setRange(0, profile.n_layer if profile.is_moe else 0)
        self._updating = False
        self._set_enabled(True)
        self.experts.setEnabled(profile.is_moe)
        self.speculative.set_model(decision.info)
        choice = decision.choice or RememberedChoice(
            n_ctx=steps[0],
            kv_type=KV_TYPES[-1],
            n_gpu_layers=0,  # the leanest, shown red
        )
        self.set_values(choice)
        if not decision.fits:
            self.status.setText(
                f"{decision.name} does not fit on this computer. {decision.refusal()}"
            )

    def _show_engine_support(self, decision: LoadDecision) -> None:
        """Which engines and K/V pairs this model can use here, and why Best fit chose its
        engine (the planner's note)."""
        info = decision.info
        reason = hearth_unavailable(info, self.request())
        if reason is None:
            profile = hearth_profile(info)

            def check(k: str, v: str) -> str | None:
                return pair_problem(profile, k, v, gpu=bool(self._gpus))
        else:

            def check(k: str, v: str) -> str | None:
                return None

        best = decision.best
        if best is None and self._planner is not None:
            # A remembered choice loads without a search: the search runs here for its reason,
            # so the explanation is there after a restart too.
            best = best_fit(self._planner, self.request())
        notes = best.notes if best is not None else ()
        note = next((n for n in notes if n.startswith("Engine:")), "")
        note = "Best fit: " + note.removeprefix("Engine: ") if note else ""
        self.engine_controls.set_support(reason, check, note)

    @property
    def model_path(self) -> Path | None:
        return self._model_path

    def _context_steps(self) -> list[int]:
        return [s for s in CONTEXT_STEPS if s <= self._n_ctx_train] or [self._n_ctx_train]

    def default_vram_budget(self) -> int:
        """The biggest GPU's free memory less the safety margin: what the planner assumes."""
        return max(0, max((g.free_bytes - safety_margin(g.total_bytes) for g in self._gpus),
                          default=0))  # fmt: skip

    def chosen(self) -> RememberedChoice:
        """The controls as a choice (what Apply remembers)."""
        budget = self.vram.value() * 256 * MIB if self._gpus else None
        default = self.default_vram_budget() // (256 * MIB) * 256 * MIB
        engine, type_k, type_v = self.engine_controls.values()
        return RememberedChoice(
            n_ctx=self._context_steps()[self.context.value()],
            kv_type=type_k,
            type_v=None if type_v == type_k else type_v,
            engine=engine,
            flash_attn=self.flash_attn.isChecked(),
            n_gpu_layers=None if self.auto_layers.isChecked() else self.layers.value(),
            n_cpu_expert_layers=self.experts.value(),
            vram_budget_bytes=None if budget == default else budget,
        )

    def values(self) -> dict[str, Any]:
        return self.chosen().to_dict()

    def set_values(self, choice: RememberedChoice | dict[str, Any]) -> None:
        if isinstance(choice, dict):
            choice = RememberedChoice.from_dict({**self.chosen().to_dict(), **choice})
            if choice is None:
                return
        self._updating = True
        try:
            budget = choice.vram_budget_bytes
            budget = self.default_vram_budget() if budget is None else budget
            self.vram.setValue(budget // (256 * MIB))
            steps = self._context_steps()
            n_ctx = choice.n_ctx
            self.context.setValue(min(range(len(steps)), key=lambda i: abs(steps[i] - n_ctx)))
            self.engine_controls.set_values(choice.engine, choice.kv_type, choice.type_v)
            self.flash_attn.setChecked(choice.flash_attn)
            self.auto_layers.setChecked(choice.n_gpu_layers is None)
            if choice.n_gpu_layers is not None:
                self.layers.setValue(choice.n_gpu_layers)
            self.experts.setValue(choice.n_cpu_expert_layers)
        finally:
            self._updating = False
        self.update_plan()

    # -- planning -------------------------------------------------------------------------------

    def request(self) -> PlanRequest:
        """The machine's budgets, less what speculative decoding takes beside the model. A model
        the load policy placed partly on helper machines is planned, and its memory bar drawn,
        with their devices (a row each)."""
        chosen = self.chosen()
        params = self.decision.params if self.decision is not None else None
        request = self._machine.plan_request(
            vram_budget_bytes=chosen.vram_budget_bytes,
            helpers=bool(params is not None and params.rpc_servers),
        )
        on_gpu = bool(self._gpus) and (chosen.n_gpu_layers is None or chosen.n_gpu_layers > 0)
        projector = self._projector(on_gpu)
        if projector is not None:  # a vision model's projector: beside it, as the load policy
            request = reserve_projector(request, projector)
        return self.speculative.reserve(request, n_ctx=chosen.n_ctx, kv_type=chosen.kv_type,
                                        flash_attn=chosen.flash_attn, on_gpu=on_gpu)  # fmt: skip

    def _projector(self, on_gpu: bool) -> ProjectorCost | None:
        cost = self.decision.projector if self.decision is not None else None
        return replace(cost, on_gpu=on_gpu) if cost is not None else None

    def update_plan(self, *_args) -> None:
        if self._updating or self._planner is None:
            return
        started = time.perf_counter()
        self.plan = plan_manual(self._planner, self.request(), self.chosen().manual_choice)
        chosen = self.chosen()
        projector = self._projector(
            bool(self._gpus) and (chosen.n_gpu_layers is None or chosen.n_gpu_layers > 0)
        )
        if projector is not None:
            self.plan = replace(self.plan, devices=with_projector(self.plan.devices, projector))
        self._show(self.plan)
        self.last_update_seconds = time.perf_counter() - started

    def _show(self, plan: ManualPlan) -> None:
        self.vram_label.setText(gib(self.vram.value() * 256 * MIB))
        self.context_label.setText(f"{self.chosen().n_ctx:,} tokens")
        llama = plan.settings.engine != "hearth"
        for w in (self.flash_attn, self.auto_layers, self.layers):
            w.setEnabled(llama)
            w.setToolTip("" if llama else "The Hearth engine keeps every layer on one GPU and "
                         "has its own attention")  # fmt: skip
        # both engines keep the last layers' experts in RAM (the Hearth engine with a GPU cache)
        self.experts.setEnabled(bool(self.experts.maximum()))
        self.layers.setEnabled(llama and not self.auto_layers.isChecked())
        self._updating = True
        self.layers.setValue(plan.config.n_gpu_layers)
        self._updating = False
        self.layers_label.setText(f"{plan.config.n_gpu_layers} / {plan.n_layers + 1}")
        self.experts_label.setText(
            f"{plan.config.n_cpu_expert_layers} layers" if self.experts.maximum() else "not MoE"
        )
        n_expert = self._planner.profiles[0].n_expert if self._planner is not None else 0
        in_ram = experts_in_ram_text(
            plan.config.n_cpu_expert_layers,
            plan.n_layers,
            plan.settings.expert_cache_slots,
            n_expert,
            hearth=not llama,
        )
        self.experts_in_ram.setText(in_ram)
        self.experts_in_ram.setVisible(bool(in_ram))
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
        if self._gpus:
            on_gpu = f"{plan.config.n_gpu_layers} of {plan.n_layers + 1} layers on the GPU"
        else:
            on_gpu = "all layers on the CPU"
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
        advice = ["shorten the context"]
        if plan.config.type_k not in (KV_TYPES[-1], "rot4", "rot2"):
            advice.append("pick a smaller KV cache type")
        gpu_over = any(name != "system RAM" for name, _ in plan.over_budget)
        if gpu_over and plan.config.n_gpu_layers > 0:
            advice.append("set fewer GPU layers")
        if any(name == "system RAM" for name, _ in plan.over_budget) and self._gpus:
            advice.append("put more layers on the GPU")
        return (
            "Over budget — " + "; ".join(problems) + ". To fit: " + ", ".join(advice)
            + ", or press Best fit."
        )  # fmt: skip

    def best_fit(self) -> None:
        """Let the planner pick everything for the budget, aiming at the model's training
        context: the longest that fits, as the button's tooltip says."""
        if self._planner is None:
            return
        result = best_fit(self._planner, self.request(), self._n_ctx_train)
        if result.choice is None:
            self.update_plan()
            self.status.setText(
                "Nothing fits this budget: " + " ".join(result.reasons or ("raise the budget.",))
            )
            return
        budget = self.chosen().vram_budget_bytes
        self.set_values(replace(choice_from(result.choice), vram_budget_bytes=budget))

    def apply(self) -> None:
        """Reload the engine with these settings, and remember them for this file. A plan over
        budget asks first (what would likely happen), and is remembered only if asked to."""
        if self.plan is None or self._model_path is None:
            return
        if self._bridge.state == EngineState.GENERATING and not self._confirm_stop_reply():
            return
        remember = True
        if not self.plan.fits:
            answer = self._confirm(self.over_budget_warning())
            if answer == CANCEL:
                return
            remember = answer == LOAD_AND_REMEMBER
        params = replace(
            self.plan.settings.model_params(),
            speculative=self.speculative.params(),
            mmproj_path=self.decision.params.mmproj_path
            if self.decision is not None and self.decision.params is not None
            else "",
        )
        if remember and self._store is not None:
            self._store.put(self._model_path, self.chosen())
        params = self._prepare_load(params)
        self._bridge.load(params)
        self.applied.emit(params)

    def over_budget_warning(self) -> str:
        assert self.plan is not None
        lines = []
        for name, over in self.plan.over_budget:
            if name == "system RAM":
                lines.append(
                    f"It needs {gib(over)} more than the free system RAM: the computer will "
                    "likely swap and slow to a crawl, or the load will fail."
                )
            else:
                lines.append(
                    f"It needs {gib(over)} more than the budget on {name}: the load will likely "
                    "fail with out-of-memory, or other programs will lose their GPU memory."
                )
        return " ".join(lines)
