"""Machines and model files for the load-policy tests: header-only GGUFs of real shapes, and
detections of made-up machines (no probe runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.hardware import Detection, Device
from engine.hardware.records import CPU, GPU
from engine.session import MachineSnapshot
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

GIB = 1024**3


def cpu(free_gib: float, total_gib: float | None = None) -> Device:
    total = total_gib if total_gib is not None else free_gib + 1
    return Device(
        id="cpu", vendor="other", name="Test CPU", kind=CPU, backends=("cpu",),
        source="psutil", total_bytes=int(total * GIB), free_bytes=int(free_gib * GIB),
        memory_bandwidth_gbps=60.0,
    )  # fmt: skip


def nvidia(free_gib: float, total_gib: float, cc: str = "8.9") -> Device:
    return Device(
        id="nvidia:0000:01:00.0", vendor="nvidia", name="Test RTX", kind=GPU,
        backends=("cuda", "vulkan"), source="nvml", total_bytes=int(total_gib * GIB),
        free_bytes=int(free_gib * GIB), memory_bandwidth_gbps=1000.0, compute_capability=cc,
    )  # fmt: skip


def machine(*devices: Device, gpu_offload: bool | None = True) -> MachineSnapshot:
    return MachineSnapshot(Detection(devices=tuple(devices)), gpu_offload=gpu_offload)


@pytest.fixture(scope="session")
def model_file(tmp_path_factory: pytest.TempPathFactory):
    """model_file("llama3-8b", "Q4_K_M", folder="a") -> a header-only GGUF of that shape."""
    root = tmp_path_factory.mktemp("models")
    made: dict[tuple[str, str, str], Path] = {}

    def make(shape: str, quant: str, folder: str = "models") -> Path:
        key = (shape, quant, folder)
        if key not in made:
            (root / folder).mkdir(exist_ok=True)
            path = root / folder / f"{shape}-{quant}.gguf"
            made[key] = write_sparse_gguf(path, SHAPES[shape], quant)
        return made[key]

    return make
