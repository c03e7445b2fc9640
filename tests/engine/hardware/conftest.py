"""Test doubles for the hardware probes: an NVML double, recorded command output, a fake psutil,
and fake machines built from the recorded sysfs trees under fixtures/."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.hardware.host import CommandOutput, Host

FIXTURES = Path(__file__).parent / "fixtures"
GIB = 1024**3

# NVML return codes (nvml.h) and the messages nvmlErrorString gives for them.
NVML_ERRORS = {
    "NVML_ERROR_NOT_SUPPORTED": (3, "Not Supported"),
    "NVML_ERROR_NO_PERMISSION": (4, "Insufficient Permissions"),
    "NVML_ERROR_DRIVER_NOT_LOADED": (9, "Driver Not Loaded"),
    "NVML_ERROR_LIBRARY_NOT_FOUND": (12, "NVML Shared Library Not Found"),
    "NVML_ERROR_GPU_IS_LOST": (15, "GPU is lost"),
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": (18, "RM has detected an NVML/RM version mismatch."),
    "NVML_ERROR_UNKNOWN": (999, "Unknown Error"),
}
CODES = {name: code for name, (code, _) in NVML_ERRORS.items()}


class FakeNVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return next((msg for code, msg in NVML_ERRORS.values() if code == self.value), "?")


@dataclass
class FakeGpu:
    name: str = "NVIDIA GeForce RTX 4090"
    total: int = 24 * GIB
    used: int = 2 * GIB
    bus_id: str = "00000000:01:00.0"
    capability: tuple[int, int] = (8, 9)
    memory_clock_mhz: int = 10501
    bus_width: int = 384
    pcie: tuple[int, int, int, int] = (4, 16, 4, 16)  # gen, width, max gen, max width
    utilization: int = 37
    errors: dict[str, str] = field(default_factory=dict)  # method -> NVML_ERROR_* name


class FakeNvml:
    """The subset of pynvml the probes use, answering from FakeGpu records."""

    NVMLError = FakeNVMLError
    NVML_CLOCK_MEM = 2

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        *,
        init_error: str | None = None,
        count_error: str | None = None,
        driver: str = "550.54.14",
        init_gate: threading.Event | None = None,
    ):
        for name, code in CODES.items():
            setattr(self, name, code)
        self.gpus = list(gpus or [])
        self.init_error = init_error
        self.count_error = count_error
        self.driver = driver
        self.init_gate = init_gate
        self.inits = 0
        self.shutdowns = 0

    def _raise(self, error: str | None) -> None:
        if error:
            raise FakeNVMLError(CODES[error])

    def _gpu(self, handle: FakeGpu, method: str) -> FakeGpu:
        self._raise(handle.errors.get(method))
        return handle

    def nvmlInit(self) -> None:
        if self.init_gate is not None:
            self.init_gate.wait(30)
        self._raise(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        self._raise(self.count_error)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> FakeGpu:
        wanted = bus_id.lower().split(":", 1)[1]
        for gpu in self.gpus:
            if gpu.bus_id.lower().split(":", 1)[1] == wanted:
                return gpu
        raise FakeNVMLError(CODES["NVML_ERROR_UNKNOWN"])

    def nvmlDeviceGetName(self, h: FakeGpu) -> str:
        return self._gpu(h, "nvmlDeviceGetName").name

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu) -> SimpleNamespace:
        gpu = self._gpu(h, "nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(total=gpu.total, used=gpu.used, free=gpu.total - gpu.used)

    def nvmlDeviceGetCudaComputeCapability(self, h: FakeGpu) -> tuple[int, int]:
        return self._gpu(h, "nvmlDeviceGetCudaComputeCapability").capability

    def nvmlDeviceGetPciInfo(self, h: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(busId=self._gpu(h, "nvmlDeviceGetPciInfo").bus_id)

    def nvmlDeviceGetMaxClockInfo(self, h: FakeGpu, clock: int) -> int:
        assert clock == self.NVML_CLOCK_MEM
        return self._gpu(h, "nvmlDeviceGetMaxClockInfo").memory_clock_mhz

    def nvmlDeviceGetMemoryBusWidth(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetMemoryBusWidth").bus_width

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkGeneration").pcie[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkWidth").pcie[1]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkGeneration").pcie[2]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: FakeGpu) -> int:
        return self._gpu(h, "nvmlDeviceGetMaxPcieLinkWidth").pcie[3]

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._gpu(h, "nvmlDeviceGetUtilizationRates").utilization)


NVML_METHODS_USED = [name for name in vars(FakeNvml) if name.startswith("nvml")]


class FakePsutil:
    def __init__(self, total: int = 32 * GIB, available: int = 20 * GIB, cores=(8, 16)):
        self.total, self.available, self.cores = total, available, cores
        self.cpu_percent_value = 12.5

    def virtual_memory(self) -> SimpleNamespace:
        return SimpleNamespace(total=self.total, available=self.available)

    def cpu_count(self, logical: bool = True) -> int:
        return self.cores[1] if logical else self.cores[0]

    def cpu_percent(self, interval: float | None = None) -> float:
        return self.cpu_percent_value


class FakeCommands:
    """Recorded command output by program name; anything else is "not installed"."""

    def __init__(self, outputs: dict[str, CommandOutput | Callable[[float], CommandOutput]]):
        self.outputs = outputs
        self.calls: list[tuple[list[str], float]] = []

    def __call__(self, argv: list[str], timeout_s: float) -> CommandOutput:
        self.calls.append((argv, timeout_s))
        answer = self.outputs.get(argv[0])
        if answer is None:
            return CommandOutput(None, problem=f"{argv[0]} is not installed")
        return answer(timeout_s) if callable(answer) else answer


def recorded(relative: str, returncode: int = 0, stderr: str = "") -> CommandOutput:
    return CommandOutput(returncode, (FIXTURES / relative).read_text(), stderr)


def _no_module(name: str) -> Callable[[], Any]:
    def load() -> Any:
        raise ImportError(f"No module named {name!r}")

    return load


@pytest.fixture
def make_host(tmp_path: Path) -> Callable[..., Host]:
    """A fake machine: a copy of a recorded sysfs tree as its root, plus doubles for the rest."""

    def build(
        tree: str | None = None,
        *,
        system: str = "Linux",
        machine: str = "x86_64",
        cpuinfo: str | None = "ryzen_7950x.txt",
        commands: dict[str, Any] | None = None,
        nvml: Any = None,
        amdsmi: Any = None,
        psutil: Any = None,
        read: Callable[[Path], str] | None = None,
    ) -> Host:
        root = tmp_path / "root"
        if tree is not None:
            shutil.copytree(FIXTURES / "sysfs" / tree, root, symlinks=True)
        root.mkdir(exist_ok=True)
        if cpuinfo is not None:
            (root / "proc").mkdir(exist_ok=True)
            shutil.copy(FIXTURES / "cpuinfo" / cpuinfo, root / "proc" / "cpuinfo")
        nvml = nvml if nvml is not None else FakeNvml(init_error="NVML_ERROR_LIBRARY_NOT_FOUND")
        psutil = psutil if psutil is not None else FakePsutil()
        extra = {"read": read} if read is not None else {}
        return Host(
            root=root,
            system=system,
            machine=machine,
            kernel="6.8.0-test",
            run=FakeCommands(commands or {}),
            load_nvml=lambda: nvml,
            load_amdsmi=(lambda: amdsmi) if amdsmi is not None else _no_module("amdsmi"),
            load_psutil=lambda: psutil,
            **extra,
        )

    return build
