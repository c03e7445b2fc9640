"""The kernels report themselves unavailable, with a reason, instead of crashing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from kernels import availability


def test_import_and_reason_without_torch_or_triton():
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['triton'] = None\n"
        "import kernels\n"
        "ok, why = kernels.available()\n"
        "assert not ok and 'PyTorch is not installed' in why, why\n"
        "try:\n"
        "    kernels.PackedWeight\n"
        "except kernels.KernelsUnavailable as error:\n"
        "    print('unavailable:', error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "unavailable: PyTorch is not installed" in done.stdout


@pytest.fixture
def real_gpu_check(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    availability.available.cache_clear()
    yield
    availability.available.cache_clear()


def test_old_nvidia_gpu_is_refused_with_its_name(monkeypatch, real_gpu_check):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _=0: "Tesla T4")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda _=0: (7, 5))
    monkeypatch.setattr(torch.version, "hip", None)
    ok, why = availability.available()
    assert not ok
    assert "Tesla T4 has compute capability 7.5" in why
    with pytest.raises(availability.KernelsUnavailable, match=r"8\.0 or newer"):
        availability.require()


def test_amd_gpu_is_refused_with_the_reason(monkeypatch, real_gpu_check):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _=0: "AMD Instinct MI300X")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda _=0: (9, 4))
    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    ok, why = availability.available()
    assert not ok
    assert why.startswith("AMD Instinct MI300X (ROCm)")
    assert "NVIDIA inline assembly" in why and "llama.cpp" in why


def test_no_gpu_is_refused(monkeypatch, real_gpu_check):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ok, why = availability.available()
    assert not ok
    assert "Vulkan-only GPUs have no Triton backend" in why


def test_interpreter_is_available_on_the_cpu():
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("running on a GPU")
    ok, why = availability.available()
    assert ok
    assert "interpreter" in why
