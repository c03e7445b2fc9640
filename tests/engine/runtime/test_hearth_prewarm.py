"""The Hearth engine's imports made ahead of a load: when they are, and how a load waits."""

from __future__ import annotations

import itertools
import threading

import pytest

from engine.runtime import hearth_prewarm
from engine.runtime.engine_output import is_cause_line
from engine.runtime.hearth_prewarm import Prewarm, reason_not_to_warm


@pytest.fixture(autouse=True)
def _no_warm_up_left_behind(monkeypatch):
    monkeypatch.setattr(hearth_prewarm, "_current", None)
    monkeypatch.delenv(hearth_prewarm.ENV, raising=False)
    monkeypatch.delenv(hearth_prewarm.DEVICE_ENV, raising=False)


def test_nothing_is_warmed_without_an_nvidia_gpu():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    assert reason_not_to_warm(lambda: 0) == "no NVIDIA GPU visible to NVML"
    assert reason_not_to_warm(lambda: 1) is None


def test_a_forced_device_warms_without_asking_nvml(monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    monkeypatch.setenv(hearth_prewarm.DEVICE_ENV, "cpu")

    def nvml_not_asked() -> int:
        raise AssertionError("NVML asked although the device is forced")

    assert reason_not_to_warm(nvml_not_asked) is None


def test_it_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(hearth_prewarm.ENV, "0")
    assert reason_not_to_warm(lambda: 1) == f"turned off ({hearth_prewarm.ENV}=0)"


def test_without_torch_nothing_is_warmed(monkeypatch):
    monkeypatch.setattr(hearth_prewarm, "torch_missing_reason", lambda: "PyTorch is not installed")
    assert reason_not_to_warm(lambda: 1) == "PyTorch is not installed"


def test_where_the_engine_cannot_run_nothing_is_imported_and_the_line_says_why():
    lines, called = [], []
    got = hearth_prewarm.start(lines.append, warm=lambda: called.append(1), reason=lambda: "no GPU")
    hearth_prewarm.wait()
    assert got.skipped == "no GPU" and called == [] and got.seconds is None
    assert lines == ["hearth worker: Hearth engine not imported ahead: no GPU"]


def test_a_failed_warm_up_is_one_line_and_a_load_still_goes_ahead():
    lines = []

    def broken() -> None:
        raise RuntimeError("torch cannot be imported after this llama.cpp build")

    warm = hearth_prewarm.start(lines.append, warm=broken, reason=lambda: None)
    hearth_prewarm.wait()
    assert warm.error == "RuntimeError: torch cannot be imported after this llama.cpp build"
    assert lines[0] == (
        "hearth worker: the Hearth engine was not imported ahead (a Hearth load tries again and "
        "says why it cannot run): RuntimeError: torch cannot be imported after this llama.cpp build"
    )
    assert not is_cause_line(lines[0])  # a crash later is not blamed on it


def test_a_load_that_arrives_while_warming_waits_for_it():
    """The warm-up holds until the load has begun to wait: the clock's second reading is the
    one `wait` takes before it blocks, and it lets the warm-up finish."""
    lines, warmed = [], []
    entered, release = threading.Event(), threading.Event()
    readings = itertools.count()
    lock = threading.Lock()

    def clock() -> float:
        with lock:
            n = next(readings)
        if n == 1:
            release.set()
        return float(n)

    def warm() -> None:
        entered.set()
        release.wait()
        warmed.append("imports")

    prewarm = Prewarm(warm, lines.append, clock=clock).start()
    entered.wait()
    prewarm.wait()
    assert warmed == ["imports"] and prewarm.error is None
    assert any(line.startswith("hearth worker: the load waited") for line in lines)
    assert any("imported ahead of a load in" in line for line in lines)
    assert prewarm.wait() == 0.0  # once done, a later load does not wait


def test_the_warm_up_imports_what_a_load_imports(monkeypatch):
    """Each module named, in order, after the torch-beside-llama.cpp check; the check's
    problem stops it before any import."""
    imported = []
    monkeypatch.setattr(hearth_prewarm, "torch_import_problem", lambda: None)
    monkeypatch.setenv(hearth_prewarm.DEVICE_ENV, "cpu")  # no cuInit here
    hearth_prewarm.import_engine(("torch", "kernels.gemv"), imported.append)
    assert imported == ["torch", "kernels.gemv"]
    imported.clear()
    monkeypatch.setattr(hearth_prewarm, "torch_import_problem", lambda: "static C++ runtime")
    with pytest.raises(RuntimeError, match="static C\\+\\+ runtime"):
        hearth_prewarm.import_engine(("torch",), imported.append)
    assert imported == []


def test_every_module_named_exists():
    """The list follows the engine: a module renamed or removed must be renamed here too."""
    import importlib.util

    missing = [name for name in hearth_prewarm.MODULES if importlib.util.find_spec(name) is None]
    assert missing == []


def test_a_paused_warm_up_starts_no_import_until_resumed(monkeypatch):
    """pause (a llama.cpp model loaded) holds the warm-up between modules: the module being
    imported finishes, the next waits; resume lets it go on, and so does a Hearth load's wait."""
    monkeypatch.setattr(hearth_prewarm, "torch_import_problem", lambda: None)
    monkeypatch.setenv(hearth_prewarm.DEVICE_ENV, "cpu")  # no cuInit here
    imported, first_in, first_go = [], threading.Event(), threading.Event()
    at_gate, gates = threading.Event(), []
    gate = hearth_prewarm._while_paused

    def counted_gate() -> None:  # the check before each module; the second is "second"'s
        gates.append(1)
        if len(gates) == 2:
            at_gate.set()
        gate()

    monkeypatch.setattr(hearth_prewarm, "_while_paused", counted_gate)

    def importer(name: str) -> None:
        if name == "first":
            first_in.set()
            first_go.wait()  # a load arrives while this module is being imported
        imported.append(name)

    prewarm = hearth_prewarm.start(
        lambda line: None,
        warm=lambda: hearth_prewarm.import_engine(("first", "second", "third"), importer),
        reason=lambda: None,
    )
    first_in.wait()
    hearth_prewarm.pause()
    first_go.set()
    # "first" finishes; "second" waits at its gate for the resume (a Hearth load's wait)
    at_gate.wait()
    assert imported == ["first"] and not prewarm._go.is_set() and not prewarm._done.is_set()
    hearth_prewarm.wait()
    assert imported == ["first", "second", "third"] and prewarm.error is None


def test_the_worker_pauses_the_warm_up_for_a_load_and_resumes_it_when_no_model_is_left(
    monkeypatch, tmp_path
):
    """WorkerEngine.load pauses the warm-up (llama.cpp's work must not share the GIL with the
    imports), a failed load and an unload resume it."""
    pytest.importorskip("llama_cpp")
    from engine.runtime import protocol as p
    from engine.runtime.engine_state import WorkerEngine
    from engine.runtime.worker import FaultInjection

    calls = []
    monkeypatch.setattr(hearth_prewarm, "pause", lambda: calls.append("pause"))
    monkeypatch.setattr(hearth_prewarm, "resume", lambda: calls.append("resume"))
    sent = []
    engine = WorkerEngine(sent.append, flush=lambda: None, faults=FaultInjection(""))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all")
    engine.load(p.ModelParams(path=str(bad)))
    assert isinstance(sent[-1], p.LoadFailed)
    assert calls == ["pause", "resume"]
    engine.unload()
    assert calls == ["pause", "resume", "resume"]
