import json

import pytest

from engine.hardware import bandwidth
from engine.hardware.records import (
    GIB,
    GPU,
    IGPU,
    CpuDetails,
    Device,
    PcieLink,
    normalize_pci_bus_id,
)
from engine.units import format_bytes


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("00000000:01:00.0", "0000:01:00.0"),  # NVML's 8-digit domain
        ("0000:C1:00.0", "0000:c1:00.0"),  # upper case from some tools
        (b"00000000:65:00.0\x00", "0000:65:00.0"),  # raw bytes with a NUL
        ("0001:02:00.1", "0001:02:00.1"),
        ("", None),
        (None, None),
    ],
)
def test_normalize_pci_bus_id(raw, expected):
    assert normalize_pci_bus_id(raw) == expected


def test_device_round_trips_through_json():
    device = Device(
        id="nvidia:0000:01:00.0",
        vendor="nvidia",
        name="NVIDIA GeForce RTX 4090",
        kind=GPU,
        backends=("cuda", "vulkan"),
        source="nvml",
        total_bytes=24 * GIB,
        pcie=PcieLink(4, 16, 4, 16),
        cpu=None,
        notes=("memory bus width: Not Supported",),
    )
    cpu = Device(
        id="cpu",
        vendor="amd",
        name="Ryzen",
        kind="cpu",
        backends=("cpu",),
        source="psutil",
        cpu=CpuDetails(16, 32, ("AVX2", "AVX-512")),
    )
    for original in (device, cpu):
        assert Device.from_dict(json.loads(json.dumps(original.to_dict()))) == original


def test_memory_for_models_follows_the_kind_of_memory():
    discrete = Device("a", "nvidia", "x", GPU, ("cuda",), "nvml", total_bytes=24 * GIB)
    apu = Device(
        "b",
        "amd",
        "y",
        IGPU,
        ("rocm",),
        "sysfs",
        total_bytes=GIB // 2,
        unified_memory=True,
        shared_total_bytes=16 * GIB,
    )
    apple = Device(
        "c",
        "apple",
        "z",
        IGPU,
        ("metal",),
        "sysctl",
        total_bytes=64 * GIB,
        unified_memory=True,
        gpu_memory_limit_bytes=48 * GIB,
    )
    assert discrete.memory_for_models_bytes == 24 * GIB
    assert apu.memory_for_models_bytes == GIB // 2 + 16 * GIB
    assert apple.memory_for_models_bytes == 48 * GIB


def test_pcie_link_text_shows_the_maximum_only_when_it_differs():
    assert str(PcieLink(4, 16, 4, 16)) == "Gen4 x16"
    assert str(PcieLink(1, 16, 4, 16)) == "Gen1 x16 (max Gen4 x16)"
    assert str(PcieLink(None, 8, None, None)) == "Gen? x8 (max Gen? x?)"


def test_format_bytes():
    assert format_bytes(None) == "?"
    assert format_bytes(512 * 1024**2) == "512 MiB"
    assert format_bytes(24 * GIB) == "24.0 GiB"


# -- bandwidth ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("clock_mhz", "bus_bits", "gbps"),
    [
        (10501, 384, 1008.1),  # RTX 4090 (GDDR6X), published 1008 GB/s
        (2619, 5120, 3352.3),  # H100 SXM (HBM3), published 3.35 TB/s
        (1215, 5120, 1555.2),  # A100 40 GB (HBM2), published 1555 GB/s
        (0, 384, None),
        (10501, None, None),
    ],
)
def test_bandwidth_from_driver_clock_and_bus_width(clock_mhz, bus_bits, gbps):
    assert bandwidth.from_clock(clock_mhz, bus_bits) == gbps


@pytest.mark.parametrize(
    ("name", "gbps"),
    [
        ("NVIDIA GeForce RTX 4090", 1008),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", 576),  # the longer key wins
        ("NVIDIA GeForce RTX 4070 Ti SUPER", 672),
        ("NVIDIA H100 80GB HBM3", 3350),
        ("NVIDIA A100-SXM4-80GB", 2039),
        ("Tesla T4", 320),
        ("NVIDIA L40S", 864),
        ("AMD Radeon RX 7900 XTX", 960),
        ("AMD Radeon RX 7900 XTX (RADV NAVI31)", 960),
        ("AMD Radeon RX 7900 XT", 800),
        ("AMD Radeon VII", 1024),
        ("Radeon 8060S Graphics", 256),
        ("Intel(R) Arc(tm) A770 Graphics (DG2)", 560),
        ("Intel(R) Graphics (RPL-S)", None),
        ("Mystery GPU 9000", None),
    ],
)
def test_bandwidth_table(name, gbps):
    assert bandwidth.from_table(name) == gbps


def test_best_estimate_prefers_the_driver_and_says_where_the_figure_came_from():
    assert bandwidth.best_estimate("NVIDIA GeForce RTX 4090", 10501, 384) == (1008.1, "driver")
    assert bandwidth.best_estimate("NVIDIA GeForce RTX 4090", None, None) == (1008.0, "table")
    assert bandwidth.best_estimate("Unknown", None, None) == (None, None)


@pytest.mark.parametrize(
    ("chip", "cores", "gbps"),
    [
        ("Apple M1", 8, 68.25),
        ("Apple M2 Max", 12, 400),
        ("Apple M3 Max", 14, 300),
        ("Apple M3 Max", 16, 400),
        ("Apple M3 Max", None, 300),  # unknown bin: the lower figure
        ("Apple M4 Pro", 14, 273),
        ("Apple M9 Hyper", 8, None),
        ("Intel(R) Core(TM) i9", 8, None),
    ],
)
def test_apple_bandwidth(chip, cores, gbps):
    assert bandwidth.apple_bandwidth(chip, cores) == gbps
