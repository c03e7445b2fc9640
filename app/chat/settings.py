"""The conversation's settings, beside the transcript: system prompt, sampling with presets, the
reply length, and what to do when the conversation outgrows the model's context.

Values are kept as a plain dict (`values()` / `set_values()`), which is what the store keeps per
conversation and per message.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.common.accessibility import named
from engine.enums import Overflow
from engine.runtime import protocol as p

RANDOM_SEED = -1
OVERFLOW_STOP = Overflow.STOP
OVERFLOW_DROP_OLDEST = Overflow.DROP_OLDEST

# Presets set the sampler; the names say what they are for.
PRESETS: dict[str, dict[str, Any]] = {
    "Balanced": dict(temperature=0.7, top_p=0.95, top_k=40, min_p=0.05, repeat_penalty=1.0),
    "Precise": dict(temperature=0.2, top_p=0.9, top_k=20, min_p=0.1, repeat_penalty=1.05),
    "Creative": dict(temperature=1.0, top_p=0.98, top_k=100, min_p=0.02, repeat_penalty=1.0),
    "Deterministic": dict(temperature=0.0, top_p=1.0, top_k=1, min_p=0.0, repeat_penalty=1.0),
}
CUSTOM = "Custom"
DEFAULTS: dict[str, Any] = {
    "system_prompt": "",
    "preset": "Balanced",
    **PRESETS["Balanced"],
    "seed": RANDOM_SEED,
    "max_tokens": 1024,
    "overflow": OVERFLOW_STOP,
}


def new_chat_settings(model_defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a new chat starts with: Hearth's defaults, then the sampling the loaded model's
    authors recommend (engine/chat/sampling_defaults.py), named after the preset they match."""
    values = {**DEFAULTS, **(model_defaults or {})}
    matching = (name for name, preset in PRESETS.items() if _matches(values, preset))
    values["preset"] = next(matching, CUSTOM)
    return values


def sampling_from(values: dict[str, Any]) -> p.SamplingParams:
    v = {**DEFAULTS, **values}
    seed = int(v["seed"])
    return p.SamplingParams(
        temperature=float(v["temperature"]),
        top_p=float(v["top_p"]),
        top_k=int(v["top_k"]),
        min_p=float(v["min_p"]),
        repeat_penalty=float(v["repeat_penalty"]),
        seed=0xFFFFFFFF if seed == RANDOM_SEED else seed,
    )


def _matches(values: dict[str, Any], preset: dict[str, Any]) -> bool:
    return all(abs(values[k] - v) < 1e-6 for k, v in preset.items())


def _double(lo: float, hi: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setDecimals(decimals)
    return box


def _int(lo: int, hi: int) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    return box


class ChatSettingsPanel(QWidget):
    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("chatSettings")
        self.setFixedWidth(260)
        self._loading = False

        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setObjectName("systemPrompt")
        named(self.system_prompt, "System prompt")
        self.system_prompt.setPlaceholderText("e.g. You are a concise assistant.")
        self.system_prompt.setFixedHeight(96)
        self.preset = named(QComboBox(), "Preset")
        self.preset.addItems([*PRESETS, CUSTOM])
        self.temperature = _double(0.0, 2.0, 0.05)
        self.top_p = _double(0.0, 1.0, 0.01)
        self.top_k = _int(0, 1000)
        self.min_p = _double(0.0, 1.0, 0.01)
        self.repeat_penalty = _double(0.5, 2.0, 0.01)
        self.seed = _int(RANDOM_SEED, 2**31 - 1)
        self.seed.setSpecialValueText("Random")
        self.max_tokens = _int(1, 131072)
        self.max_tokens.setSingleStep(128)
        self.overflow = named(QComboBox(), "When the context is full")
        self.overflow.addItem("Stop and tell me", OVERFLOW_STOP)
        self.overflow.addItem("Drop the oldest turns", OVERFLOW_DROP_OLDEST)

        heading = QLabel("Chat settings")
        heading.setObjectName("panelHeading")
        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Preset", self.preset)
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        form.addRow("Top-k", self.top_k)
        form.addRow("Min-p", self.min_p)
        form.addRow("Repeat penalty", self.repeat_penalty)
        form.addRow("Seed", self.seed)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow("Context full", self.overflow)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 12, 12, 12)
        layout.setSpacing(8)
        layout.addWidget(heading)
        layout.addWidget(QLabel("System prompt"))
        layout.addWidget(self.system_prompt)
        layout.addLayout(form)
        layout.addStretch(1)

        self.preset.currentTextChanged.connect(self._apply_preset)
        self.system_prompt.textChanged.connect(self._emit_changed)
        for box in self._sampler_boxes():
            box.valueChanged.connect(self._sampler_edited)
        for box in (self.seed, self.max_tokens):
            box.valueChanged.connect(self._emit_changed)
        self.overflow.currentIndexChanged.connect(self._emit_changed)
        self.set_values(DEFAULTS)

    def _sampler_boxes(self):
        return (self.temperature, self.top_p, self.top_k, self.min_p, self.repeat_penalty)

    def values(self) -> dict[str, Any]:
        return {
            "system_prompt": self.system_prompt.toPlainText().strip(),
            "preset": self.preset.currentText(),
            "temperature": round(self.temperature.value(), 4),
            "top_p": round(self.top_p.value(), 4),
            "top_k": self.top_k.value(),
            "min_p": round(self.min_p.value(), 4),
            "repeat_penalty": round(self.repeat_penalty.value(), 4),
            "seed": self.seed.value(),
            "max_tokens": self.max_tokens.value(),
            "overflow": self.overflow.currentData(),
        }

    def set_values(self, values: dict[str, Any]) -> None:
        v = {**DEFAULTS, **values}
        self._loading = True
        try:
            self.system_prompt.setPlainText(v["system_prompt"])
            self.preset.setCurrentText(v["preset"] if v["preset"] in PRESETS else CUSTOM)
            self.temperature.setValue(float(v["temperature"]))
            self.top_p.setValue(float(v["top_p"]))
            self.top_k.setValue(int(v["top_k"]))
            self.min_p.setValue(float(v["min_p"]))
            self.repeat_penalty.setValue(float(v["repeat_penalty"]))
            self.seed.setValue(int(v["seed"]))
            self.max_tokens.setValue(int(v["max_tokens"]))
            self.overflow.setCurrentIndex(max(0, self.overflow.findData(v["overflow"])))
        finally:
            self._loading = False

    def _apply_preset(self, name: str) -> None:
        if name not in PRESETS or self._loading:
            return
        self._loading = True
        try:
            preset = PRESETS[name]
            self.temperature.setValue(preset["temperature"])
            self.top_p.setValue(preset["top_p"])
            self.top_k.setValue(preset["top_k"])
            self.min_p.setValue(preset["min_p"])
            self.repeat_penalty.setValue(preset["repeat_penalty"])
        finally:
            self._loading = False
        self.changed.emit()

    def _sampler_edited(self, *_args) -> None:
        if self._loading:
            return
        # A hand-edited value no longer matches the preset's name.
        values = self.values()
        matching = next(
            (
                name
                for name, preset in PRESETS.items()
                if all(values[k] == v for k, v in preset.items())
            ),
            CUSTOM,
        )
        self._loading = True
        self.preset.setCurrentText(matching)
        self._loading = False
        self.changed.emit()

    def _emit_changed(self, *_args) -> None:
        if not self._loading:
            self.changed.emit()
