"""The installed engine's own view of the hardware, asked for from a short-lived child process.

The GUI process never loads llama.cpp (a driver fault there would take the window down), so
`probe_engine_devices` runs `python -m engine.llama.probe`, which loads llama.cpp,
lists its backends and devices and prints them as JSON. Any failure (no llama_cpp, a crash, a
hang, unreadable output) comes back as an `EngineView` whose `error` says what happened.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from engine.child_process import module_command

ENGINE_PROBE_MODULE = "engine.llama.probe"
DEFAULT_PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class EngineDevice:
    """One device as llama.cpp's ggml backend registry reports it."""

    name: str  # "CUDA0", "Vulkan0", "MTL0", "CPU"
    description: str  # "NVIDIA GeForce RTX 4090"
    type: str  # gpu, igpu, cpu, accel, meta
    backend: str  # the backend registry's name: CUDA, ROCm, Vulkan, MTL, CPU, BLAS
    free_bytes: int
    total_bytes: int
    pci_bus_id: str | None = None

    @property
    def is_gpu(self) -> bool:
        return self.type in ("gpu", "igpu")


@dataclass(frozen=True)
class EngineView:
    backends: tuple[str, ...] = ()  # registry names the build contains, in registry order
    devices: tuple[EngineDevice, ...] = ()
    gpu_offload: bool = False  # a GPU of this machine (engine.llama.devices.local_gpu_offload)
    # Build features per backend, as ggml_backend_get_features reports them:
    # {"CPU": ("AVX2", "AVX512", ...), "CUDA": ("ARCHS=890", ...)}
    features: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    system_info: str = ""  # llama_print_system_info()
    llama_cpp_version: str = ""
    elapsed_s: float = 0.0
    error: str | None = None  # set when the engine could not be asked; the rest is then empty

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineView:
        devices = tuple(
            EngineDevice(**{f.name: d.get(f.name) for f in dataclasses.fields(EngineDevice)})
            for d in data.get("devices", ())
        )
        return cls(
            backends=tuple(data.get("backends", ())),
            devices=devices,
            gpu_offload=bool(data.get("gpu_offload", False)),
            features={str(k): tuple(v) for k, v in (data.get("features") or {}).items()},
            system_info=str(data.get("system_info", "")),
            llama_cpp_version=str(data.get("llama_cpp_version", "")),
            elapsed_s=float(data.get("elapsed_s", 0.0)),
            error=data.get("error"),
        )

    @classmethod
    def failed(cls, error: str, elapsed_s: float = 0.0) -> EngineView:
        return cls(error=error, elapsed_s=elapsed_s)


def probe_engine_devices(
    timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
    *,
    python: str | None = None,
    env: dict[str, str] | None = None,
) -> EngineView:
    """Ask the installed llama.cpp, in a child process, what it was built with and what it sees.

    Never raises: a failure is an EngineView with `error` set.
    """
    began = time.perf_counter()
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        done = subprocess.run(
            module_command(ENGINE_PROBE_MODULE, python=python),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            env=child_env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return EngineView.failed(
            f"The engine did not list its devices within {timeout_s:.0f} s (a GPU driver may be "
            "stuck); the devices above come from the drivers alone.",
            time.perf_counter() - began,
        )
    except OSError as exc:
        return EngineView.failed(f"Could not start the engine probe: {exc}")
    elapsed = time.perf_counter() - began
    return parse_probe_output(done.returncode, done.stdout, done.stderr, elapsed)


def parse_probe_output(returncode: int, stdout: str, stderr: str, elapsed_s: float) -> EngineView:
    last_json = next((line for line in reversed(stdout.splitlines()) if line.startswith("{")), None)
    if last_json is not None:
        try:
            view = EngineView.from_dict(json.loads(last_json))
        except (ValueError, TypeError) as exc:
            return EngineView.failed(f"The engine probe printed unreadable output: {exc}")
        return dataclasses.replace(view, elapsed_s=elapsed_s)
    tail = " | ".join(line.strip() for line in stderr.strip().splitlines()[-3:])
    if returncode < 0:
        how = f"was killed by signal {-returncode}"
    else:
        how = f"exited with status {returncode}"
    return EngineView.failed(
        f"The engine probe {how} without an answer" + (f": {tail}" if tail else "."), elapsed_s
    )
