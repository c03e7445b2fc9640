"""What the worker reads about the machine around a load: the GPUs' memory in use, where
llama.cpp put the weights and the KV cache, how many layers really run on a GPU, whether the
Vulkan device is a software rasteriser, the process's resident memory. Each is a nicety that
never fails a load: without an answer it says nothing (or the engine's default)."""

from __future__ import annotations

from engine.llama import driver as llama
from engine.llama.log import BufferAllocation


def layers_on_gpu(asked: int, n_layers: int) -> int:
    if not llama.supports_gpu_offload():
        return 0  # a CPU build takes the request and runs everything on the CPU
    return n_layers if asked < 0 else min(asked, n_layers)


def devices_holding(allocations: tuple[BufferAllocation, ...]) -> tuple[str, ...]:
    """The devices that hold weights or KV cache, GPUs first, each with its description."""
    names: list[str] = []
    for a in allocations:
        if a.kind in ("model", "KV") and a.bytes > 0:
            # "CPU_Mapped", "CUDA_Host", "CPU_REPACK": host memory, all of it the CPU's.
            name = "CPU" if a.device.startswith("CPU") or a.device.endswith("_Host") else a.device
            if name not in names:
                names.append(name)
    try:
        from engine.llama.devices import list_engine_devices

        described = {d.name: d.description for d in list_engine_devices()}
    except Exception:
        described = {}
    gpus = [n for n in names if n != "CPU"]
    return tuple(
        [f"{n}: {described[n]}" if described.get(n) else n for n in gpus]
        + (["CPU"] if "CPU" in names else [])
    )


def software_vulkan(devices) -> bool:
    """Whether llama.cpp's Vulkan backend has a software rasteriser among its devices (Mesa's
    llvmpipe/lavapipe, SwiftShader): only there when GGML_VK_VISIBLE_DEVICES names one."""
    markers = ("llvmpipe", "lavapipe", "swiftshader")
    return any(
        d.backend.lower() == "vulkan" and any(m in d.description.lower() for m in markers)
        for d in devices
    )


def software_vulkan_device() -> bool:
    try:
        from engine.llama.devices import list_engine_devices

        return software_vulkan(list_engine_devices())
    except Exception:  # no device list: keep the engine's default
        return False


def device_used() -> dict[str, int]:
    """Memory in use per GPU now, as the driver reports it (the CPU device is left out: its
    "memory" is the host's, moved by everything else running)."""
    try:
        from engine.llama.devices import list_engine_devices

        return {
            d.name: d.total_bytes - d.free_bytes
            for d in list_engine_devices()
            if d.type != "cpu" and d.total_bytes > 0
        }
    except Exception as exc:  # a nicety: the load must not fail for want of it
        print(f"hearth worker: device memory unavailable: {exc}", flush=True)
        return {}


def rss_bytes() -> int:
    try:
        import psutil

        return psutil.Process().memory_info().rss
    except Exception:
        return 0
