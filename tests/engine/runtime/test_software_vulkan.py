"""The worker samples on the CPU when llama.cpp's Vulkan backend runs on a software rasteriser
(lavapipe crashed inside its driver with the sampler chain in the graph: docs/backends.md)."""

import pytest

from engine.hardware.engine_view import EngineDevice
from engine.runtime.device_facts import software_vulkan


def device(name, description, backend, kind="gpu"):
    return EngineDevice(name, description, kind, backend, 1 << 30, 1 << 30)


CPU = device("CPU", "AMD EPYC", "CPU", "cpu")


@pytest.mark.parametrize(
    ("devices", "software"),
    [
        ([device("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "Vulkan"), CPU], True),
        ([device("Vulkan0", "SwiftShader Device (Subzero)", "Vulkan"), CPU], True),
        ([device("Vulkan0", "AMD Radeon RX 7900 XTX (RADV NAVI31)", "Vulkan"), CPU], False),
        ([device("Vulkan0", "NVIDIA GeForce RTX 4090", "Vulkan"), CPU], False),
        ([device("CUDA0", "NVIDIA H200", "CUDA"), CPU], False),
        ([device("CPU", "llvmpipe-named CPU, not Vulkan", "CPU", "cpu")], False),
        ([], False),
    ],
)
def test_a_software_vulkan_device_is_recognised(devices, software):
    assert software_vulkan(devices) is software
