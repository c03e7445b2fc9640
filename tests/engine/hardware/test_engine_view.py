"""The engine's own view: the real llama.cpp build installed here (a CPU build on CI), and the
failure paths of the child-process probe."""

import json
import stat
import subprocess
import sys
import time

import psutil
import pytest

from engine.hardware.engine_view import EngineView, parse_probe_output, probe_engine_devices

llama_cpp = pytest.importorskip("llama_cpp")


def fake_python(tmp_path, body: str) -> str:
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_probe_in_a_child_process_lists_the_cpu_with_system_memory():
    view = probe_engine_devices(timeout_s=60)
    assert view.ok, view.error
    assert "CPU" in view.backends
    cpu = [d for d in view.devices if d.type == "cpu"]
    assert len(cpu) == 1 and cpu[0].backend == "CPU" and cpu[0].name == "CPU"
    assert cpu[0].total_bytes == pytest.approx(psutil.virtual_memory().total, rel=0.01)
    assert view.llama_cpp_version == llama_cpp.__version__
    assert "CPU :" in view.system_info  # a GPU build lists its GPU backend first
    assert view.features.get("CPU"), "the CPU backend reports its build features"
    # a GPU of this machine, not llama_supports_gpu_offload(), which counts the RPC backend
    assert view.gpu_offload == any(d.is_gpu for d in view.devices)
    # A GPU build's devices are GPUs of a backend other than CPU; a CPU build has none.
    for device in view.devices:
        assert device.is_gpu == (device.backend not in ("CPU", "BLAS"))


def test_the_probe_module_prints_one_json_line_on_stdout():
    done = subprocess.run(
        [sys.executable, "-m", "engine.llama.probe"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout.strip().splitlines()[-1])
    assert data["error"] is None
    assert EngineView.from_dict(data).devices


IN_PROCESS = """
import json
from engine.llama.devices import list_backends, list_engine_devices
print(json.dumps({
    "devices": [[d.name, d.backend, d.type, d.total_bytes] for d in list_engine_devices()],
    "backends": list_backends(),
}))
"""


def test_in_process_listing_matches_the_probe():
    # list_engine_devices is what the engine worker calls with llama.cpp loaded; it runs in a
    # fresh interpreter here so that this test process never loads llama.cpp (a GPU build's CUDA
    # libraries and torch's do not always mix in one process).
    done = subprocess.run(
        [sys.executable, "-c", IN_PROCESS], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    here = json.loads(done.stdout.strip().splitlines()[-1])
    there = probe_engine_devices(timeout_s=60)
    assert [d[:3] for d in here["devices"]] == [[d.name, d.backend, d.type] for d in there.devices]
    assert here["backends"] == list(there.backends)
    assert all(d[3] > 0 for d in here["devices"])


def test_a_hanging_engine_probe_is_cut_off(tmp_path):
    python = fake_python(tmp_path, "sleep 30")
    began = time.perf_counter()
    view = probe_engine_devices(timeout_s=0.5, python=python)
    assert time.perf_counter() - began < 5
    assert not view.ok and "did not list its devices within" in view.error


def test_a_crashing_engine_probe_is_data(tmp_path):
    python = fake_python(tmp_path, "echo 'ggml_cuda_init: failed to initialize CUDA' >&2; exit 3")
    view = probe_engine_devices(timeout_s=10, python=python)
    assert not view.ok
    assert "exited with status 3" in view.error
    assert "failed to initialize CUDA" in view.error


def test_an_engine_probe_killed_by_a_signal(tmp_path):
    view = probe_engine_devices(timeout_s=10, python=fake_python(tmp_path, "kill -SEGV $$"))
    assert not view.ok and "killed by signal 11" in view.error


def test_engine_not_installed_is_reported_by_the_probe_itself():
    data = {"error": "The engine (llama_cpp) is not installed: No module named 'llama_cpp'"}
    view = parse_probe_output(1, json.dumps(data) + "\n", "", 0.1)
    assert not view.ok and "not installed" in view.error


def test_garbage_output_is_an_error():
    view = parse_probe_output(0, "{not json\n", "", 0.1)
    assert not view.ok and "unreadable output" in view.error


def test_a_python_that_cannot_start(tmp_path):
    view = probe_engine_devices(python=str(tmp_path / "missing-python"))
    assert not view.ok and "Could not start" in view.error
