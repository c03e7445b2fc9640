"""The engine and K/V controls: only what the chosen engine holds, disabled with a reason where
the model or the machine cannot run it."""

from __future__ import annotations

import pytest

from app.model.engine_row import EngineControls
from engine.enums import KV_TYPES
from engine.hearth.capabilities import K_FORMATS, V_FORMATS


def items(combo) -> list[tuple[str, bool, str]]:
    model = combo.model()
    return [
        (combo.itemData(i), model.item(i).isEnabled(), model.item(i).toolTip())
        for i in range(combo.count())
    ]


@pytest.fixture
def controls(qtbot):
    widget = EngineControls()
    qtbot.addWidget(widget)
    widget.set_support(None, lambda k, v: None)
    return widget


def test_llama_cpp_holds_its_types_with_v_following_k(controls, qtbot):
    assert [d for d, _, _ in items(controls.k_type)] == list(KV_TYPES)
    assert not controls.v_type.isEnabled() and "matching" in controls.v_type.toolTip()
    with qtbot.waitSignal(controls.changed):
        controls.k_type.setCurrentIndex(controls.k_type.findData("q4_0"))
    assert controls.values() == ("llama", "q4_0", "q4_0")


def test_the_hearth_engine_holds_k_and_v_independently(controls, qtbot):
    with qtbot.waitSignal(controls.changed):
        controls.engine.setCurrentIndex(controls.engine.findData("hearth"))
    assert [d for d, _, _ in items(controls.k_type)] == list(K_FORMATS)
    assert [d for d, _, _ in items(controls.v_type)] == list(V_FORMATS)  # no rot2 for V
    assert controls.v_type.isEnabled()
    controls.k_type.setCurrentIndex(controls.k_type.findData("q8"))
    controls.v_type.setCurrentIndex(controls.v_type.findData("rot4"))
    assert controls.values() == ("hearth", "q8", "rot4")
    # back to llama.cpp: a type it holds, V following K again
    controls.engine.setCurrentIndex(controls.engine.findData("llama"))
    engine, k, v = controls.values()
    assert engine == "llama" and k in KV_TYPES and v == k


def test_an_engine_that_cannot_run_is_disabled_with_its_reason(controls):
    controls.set_values("hearth", "rot4", None)
    controls.set_support("no GPU: the Hearth engine runs on NVIDIA and AMD GPUs", lambda k, v: None)
    hearth = items(controls.engine)[1]
    assert hearth[0] == "hearth" and not hearth[1] and "Not available: no GPU" in hearth[2]
    assert controls.values()[0] == "llama"  # it moved off the engine that cannot run
    controls.set_values("hearth", "q8", "rot4")  # a remembered choice: not on this machine
    assert controls.values() == ("llama", "f16", "f16")


def test_formats_the_model_cannot_hold_are_disabled_with_the_reason(controls):
    def sliding_window(k: str, v: str) -> str | None:
        quantized = {k, v} - {"f16"}
        return "quantized caches do not do sliding-window attention yet" if quantized else None

    controls.set_support(None, sliding_window, "Engine: llama.cpp, because it is not measured.")
    controls.set_values("hearth", "f16", "f16")
    assert [(d, ok) for d, ok, _ in items(controls.k_type)] == [
        ("f16", True), ("q8", False), ("kivi4", False), ("rot4", False), ("rot2", False)
    ]  # fmt: skip
    assert "sliding-window" in items(controls.v_type)[2][2]
    assert controls.note.text().startswith("Engine: llama.cpp")
