"""The check that torch can join a process that has loaded llama.cpp (engine/runtime/
torch_beside_llama.py): a child that dies makes the Hearth engine fall back, with the reason."""

from __future__ import annotations

import sys

import pytest

from engine.runtime import torch_beside_llama as check

DIES = "import os\nos.abort()\n"
FINE = "print('ok')\n"


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An install never checked, in a data folder of the test's own, torch not yet imported."""
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    return tmp_path


def test_a_child_that_dies_is_the_reason_and_is_remembered(fresh, monkeypatch):
    problem = check.torch_import_problem(DIES)
    assert problem.startswith("torch cannot be imported after this llama.cpp build")
    assert "status -6" in problem  # SIGABRT, as the H100 machine's child ended
    # the answer is kept for this install: no second child
    monkeypatch.setattr(check, "_run_probe", lambda probe: pytest.fail("probed again"))
    assert check.torch_import_problem(DIES) == problem


def test_a_child_that_imports_both_clears_the_engine(fresh):
    assert check.torch_import_problem(FINE) is None
    assert check.torch_import_problem(DIES) is None  # remembered: this install is fine


def test_the_real_probe_passes_with_this_machines_cpu_build(fresh):
    # llama.cpp's CPU build and torch load in either order (the abort needs the CUDA build)
    assert check.torch_import_problem() is None


def test_a_check_that_could_not_run_is_not_remembered(fresh, monkeypatch):
    monkeypatch.setattr(check, "TIMEOUT_S", 0.001)
    assert check.torch_import_problem("import time\ntime.sleep(5)\n").startswith("could not check")
    monkeypatch.setattr(check, "TIMEOUT_S", 60)
    assert check.torch_import_problem(FINE) is None


def test_torch_already_here_needs_no_check(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", object())
    assert check.torch_import_problem(DIES) is None


def test_the_hearth_load_falls_back_to_llama_cpp_saying_why(fresh, monkeypatch, starter_model):
    from engine.runtime import hearth_driver, model_open
    from engine.runtime.protocol import ModelParams

    reason = "torch cannot be imported after this llama.cpp build in one process (test)"
    monkeypatch.setattr(hearth_driver, "torch_import_problem", lambda: reason)
    model, note = model_open.open_model(ModelParams(path=str(starter_model), engine="hearth"))
    try:
        assert model.engine == "llama" and note.endswith(reason)
    finally:
        model.close()
