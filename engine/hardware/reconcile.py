"""Put the drivers' view and the engine's view side by side.

A GPU that the drivers report but the installed llama.cpp build cannot drive (a CPU build on a
machine with an NVIDIA card, a CUDA build on an AMD card) is marked with the build to install,
using the same names and CMake flags as installers/detect_backend.py, which `make run` follows:
`HEARTH_BACKEND=cuda make run` rebuilds the engine for CUDA.

Engine devices are matched to detected devices by PCI address, then by name, then by order among
the devices of a compatible backend. A GPU that only the engine sees is added with what the
engine knows about it.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.hardware.bandwidth import normalize_name
from engine.hardware.engine_view import EngineDevice, EngineView
from engine.hardware.records import CPU, GPU, IGPU, Device

# ggml backend registry name -> the GPU vendors it can drive (None: any vendor)
BACKEND_VENDORS: dict[str, frozenset[str] | None] = {
    "CUDA": frozenset({"nvidia"}),
    "ROCm": frozenset({"amd"}),
    "MTL": frozenset({"apple"}),
    "SYCL": frozenset({"intel"}),
    "Vulkan": None,
}
# ggml backend registry name -> Hearth's backend name (installers/detect_backend.py BACKENDS)
BACKEND_NAMES = {"CUDA": "cuda", "ROCm": "rocm", "MTL": "metal", "Vulkan": "vulkan", "CPU": "cpu"}
# gfx targets that ROCm builds llama.cpp for; other AMD GPUs are better served by Vulkan.
ROCM_TARGETS = frozenset(
    {"gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1101", "gfx1102"}
    | {"gfx1150", "gfx1151", "gfx1200", "gfx1201"}
)


@dataclass(frozen=True)
class BuildHint:
    """The engine build that would drive a device, and how to get it."""

    backend: str  # cuda, rocm, vulkan, metal
    cmake_args: tuple[str, ...]
    needs: str  # what must be installed to build it

    @property
    def label(self) -> str:
        """The backend as people write it: CUDA, ROCm, Vulkan, Metal."""
        return {"cuda": "CUDA", "rocm": "ROCm", "vulkan": "Vulkan", "metal": "Metal"}.get(
            self.backend, self.backend
        )

    @property
    def command(self) -> str:
        return f"HEARTH_BACKEND={self.backend} make run"

    @property
    def cmake_env(self) -> str:
        return f'CMAKE_ARGS="{" ".join(self.cmake_args)}"'

    def to_dict(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "cmake_args": list(self.cmake_args),
            "needs": self.needs,
            "command": self.command,
        }


@dataclass(frozen=True)
class DeviceStatus:
    device: Device
    engine_device: EngineDevice | None
    usable: bool | None  # None: the engine could not be asked
    hint: BuildHint | None  # a build that would drive it (better), or None
    message: str  # the whole story, with the command to run when there is a hint
    reason: str = ""  # why a hint is given, without the command (for a GUI that shows it apart)

    @property
    def total_bytes(self) -> int | None:
        if self.device.total_bytes is not None:
            return self.device.total_bytes
        return self.engine_device.total_bytes if self.engine_device else None

    @property
    def free_bytes(self) -> int | None:
        if self.device.free_bytes is not None:
            return self.device.free_bytes
        return self.engine_device.free_bytes if self.engine_device else None

    def to_dict(self) -> dict[str, object]:
        engine = self.engine_device
        return {
            "device_id": self.device.id,
            "engine_device": None if engine is None else engine.__dict__.copy(),
            "usable": self.usable,
            "hint": None if self.hint is None else self.hint.to_dict(),
            "message": self.message,
            "reason": self.reason,
        }


def build_for(device: Device) -> BuildHint:
    """The engine build to install for this device (the fastest one llama.cpp has for it)."""
    if device.vendor == "nvidia":
        args = ["-DGGML_CUDA=on"]
        if device.compute_capability:
            args.append(f"-DCMAKE_CUDA_ARCHITECTURES={device.compute_capability.replace('.', '')}")
        return BuildHint("cuda", tuple(args), "the CUDA toolkit (nvcc)")
    if device.vendor == "amd" and device.gfx_target in ROCM_TARGETS:
        args = ("-DGGML_HIP=on", f"-DAMDGPU_TARGETS={device.gfx_target}")
        return BuildHint("rocm", args, "ROCm (hipcc); or use the Vulkan build, which needs less")
    if device.vendor == "apple":
        return BuildHint("metal", ("-DGGML_METAL=on",), "Xcode's command line tools")
    return BuildHint(
        "vulkan", ("-DGGML_VULKAN=on",), "glslc and the Vulkan headers (libvulkan-dev)"
    )


def _can_drive(engine: EngineDevice, device: Device) -> bool:
    if device.kind == CPU:
        return engine.type == "cpu"
    if not engine.is_gpu:
        return False
    vendors = BACKEND_VENDORS.get(engine.backend, frozenset())
    return vendors is None or device.vendor in vendors


def _names_match(engine: EngineDevice, device: Device) -> bool:
    ours, theirs = normalize_name(device.name), normalize_name(engine.description)
    return bool(ours and theirs) and (ours in theirs or theirs in ours)


def _preference(engine: EngineDevice, device: Device) -> int:
    backend = BACKEND_NAMES.get(engine.backend, "")
    return device.backends.index(backend) if backend in device.backends else len(device.backends)


def _match(devices: list[Device], engine: tuple[EngineDevice, ...]) -> dict[str, EngineDevice]:
    """device id -> the engine device driving it, preferring the device's best backend."""
    matched: dict[str, EngineDevice] = {}
    taken: set[int] = set()
    tests = (
        lambda e, d: bool(e.pci_bus_id) and e.pci_bus_id == d.pci_bus_id,
        _names_match,
        # By order among compatible devices, where the description does not name another vendor.
        lambda e, d: vendor_of(e.description) in (d.vendor, "other"),
    )
    for same in tests:
        for device in devices:
            if device.id in matched:
                continue
            candidates = [
                (i, e)
                for i, e in enumerate(engine)
                if i not in taken and _can_drive(e, device) and same(e, device)
            ]
            if not candidates:
                continue
            index, chosen = min(candidates, key=lambda pair: _preference(pair[1], device))
            matched[device.id] = chosen
            # Every engine device for the same physical GPU is taken (CUDA0 and Vulkan0 alike).
            taken.add(index)
            taken.update(
                i
                for i, e in candidates
                if (e.pci_bus_id and e.pci_bus_id == chosen.pci_bus_id) or _names_match(e, device)
            )
    return matched


def reconcile(devices: list[Device], engine_view: EngineView) -> list[DeviceStatus]:
    """One status per device (and per GPU only the engine sees), in the devices' order."""
    if not engine_view.ok:
        why = f"Unknown whether the engine can use it: {engine_view.error}"
        return [DeviceStatus(d, None, None, None, why) for d in devices]
    matched = _match(devices, engine_view.devices)
    statuses = [_status(d, matched.get(d.id), engine_view) for d in devices]
    used = {id(e) for e in matched.values()}
    for engine in engine_view.devices:
        if engine.is_gpu and id(engine) not in used and not _same_gpu_as_matched(engine, matched):
            device = _device_from_engine(engine)
            statuses.append(
                DeviceStatus(device, engine, True, None, f"Used by the engine as {engine.name}.")
            )
    return statuses


def _same_gpu_as_matched(engine: EngineDevice, matched: dict[str, EngineDevice]) -> bool:
    return any(
        (engine.pci_bus_id and engine.pci_bus_id == m.pci_bus_id)
        or normalize_name(engine.description) == normalize_name(m.description)
        for m in matched.values()
    )


def _status(device: Device, engine: EngineDevice | None, view: EngineView) -> DeviceStatus:
    built = ", ".join(view.backends) or "no"
    if device.kind == CPU:
        if engine is None:
            return DeviceStatus(device, None, False, None, "The engine reports no CPU device.")
        what = (
            "Runs the layers that stay off the GPU."
            if view.gpu_offload
            else "Runs the whole model: the engine uses no GPU here."
        )
        return DeviceStatus(device, engine, True, None, what)
    best = build_for(device)
    if engine is None and best.backend in {BACKEND_NAMES.get(b) for b in view.backends}:
        # The right backend is there and still does not list this GPU: another build won't help.
        message = (
            f"The installed engine has the {best.label} backend but does not list this GPU: its "
            "driver may be missing, or the backend leaves it out (llama.cpp's Vulkan backend "
            "skips integrated GPUs when a discrete one is present)."
        )
        return DeviceStatus(device, None, False, None, message)
    if engine is None:
        reason = f"The installed engine ({built} build) cannot use this GPU."
        message = f"{reason} Install the {best.label} build: {best.command} (needs {best.needs})."
        return DeviceStatus(device, None, False, best, message, reason)
    in_use = BACKEND_NAMES.get(engine.backend, engine.backend.lower())
    message = f"Used by the engine's {engine.backend} backend as {engine.name}."
    if in_use != best.backend and best.backend in device.backends[:1]:
        reason = f"{message} The {best.label} build is usually faster."
        return DeviceStatus(device, engine, True, best, f"{reason} {best.command}.", reason)
    return DeviceStatus(device, engine, True, None, message)


def vendor_of(description: str) -> str:
    """The GPU vendor a device description names ("AMD Radeon ...", "Radeon RX ..."), or other."""
    text = description.lower().replace("radeon", "amd radeon")
    return next((v for v in ("nvidia", "amd", "intel", "apple") if v in text), "other")


def _device_from_engine(engine: EngineDevice) -> Device:
    vendor = vendor_of(engine.description)
    return Device(
        id=f"engine:{engine.name}",
        vendor=vendor,
        name=engine.description or engine.name,
        kind=IGPU if engine.type == "igpu" else GPU,
        backends=(BACKEND_NAMES.get(engine.backend, engine.backend.lower()),),
        source="engine",
        total_bytes=engine.total_bytes,
        free_bytes=engine.free_bytes,
        used_bytes=engine.total_bytes - engine.free_bytes,
        unified_memory=engine.type == "igpu",
        pci_bus_id=engine.pci_bus_id,
        notes=("Found only by the engine; the drivers' probes did not report it.",),
    )
