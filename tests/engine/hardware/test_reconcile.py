import pytest

from engine.hardware.engine_view import EngineDevice, EngineView
from engine.hardware.reconcile import build_for, reconcile
from engine.hardware.records import CPU, GIB, GPU, IGPU, Device


def gpu(name="NVIDIA GeForce RTX 4090", vendor="nvidia", bus="0000:01:00.0", **kw) -> Device:
    backends = {"nvidia": ("cuda", "vulkan"), "amd": ("rocm", "vulkan"), "apple": ("metal",)}
    defaults = dict(
        id=f"{vendor}:{bus or name}",
        vendor=vendor,
        name=name,
        kind=GPU,
        backends=backends.get(vendor, ("vulkan",)),
        source="test",
        total_bytes=24 * GIB,
        pci_bus_id=bus,
        compute_capability="8.9" if vendor == "nvidia" else None,
    )
    return Device(**{**defaults, **kw})


CPU_DEVICE = Device("cpu", "amd", "Ryzen", CPU, ("cpu",), "psutil", total_bytes=64 * GIB)
ENGINE_CPU = EngineDevice("CPU", "Ryzen", "cpu", "CPU", 60 * GIB, 64 * GIB)


def engine(*devices: EngineDevice, backends=None) -> EngineView:
    names = backends or tuple(dict.fromkeys(d.backend for d in devices))
    return EngineView(backends=names, devices=(*devices, ENGINE_CPU), gpu_offload=len(names) > 1)


def cuda(index=0, name="NVIDIA GeForce RTX 4090", bus="0000:01:00.0", total=24 * GIB):
    return EngineDevice(f"CUDA{index}", name, "gpu", "CUDA", total - GIB, total, bus)


def test_cpu_build_on_an_nvidia_machine_says_which_build_to_install():
    statuses = reconcile([gpu(), CPU_DEVICE], engine(backends=("CPU",)))
    nvidia, cpu = statuses
    assert nvidia.usable is False and nvidia.engine_device is None
    assert nvidia.hint.backend == "cuda"
    assert nvidia.hint.cmake_args == ("-DGGML_CUDA=on", "-DCMAKE_CUDA_ARCHITECTURES=89")
    assert nvidia.hint.command == "HEARTH_BACKEND=cuda make run"
    assert "HEARTH_BACKEND=cuda make run" in nvidia.message
    assert "(CPU build)" in nvidia.message
    assert cpu.usable is True and cpu.engine_device == ENGINE_CPU


def test_cuda_build_matches_by_pci_address_even_when_order_differs():
    # Two identical cards: only the PCI address tells them apart.
    a = gpu(bus="0000:01:00.0")
    b = gpu(bus="0000:02:00.0")
    view = engine(cuda(0, bus="0000:02:00.0"), cuda(1, bus="0000:01:00.0"))
    first, second, _ = reconcile([a, b, CPU_DEVICE], view)
    assert first.engine_device.name == "CUDA1" and second.engine_device.name == "CUDA0"
    assert first.usable and second.usable and first.hint is None


def test_match_by_name_when_the_engine_gives_no_address():
    view = engine(cuda(0, bus=None))
    (status, _) = reconcile([gpu(), CPU_DEVICE], view)
    assert status.engine_device.name == "CUDA0"


def test_one_build_with_two_backends_counts_each_gpu_once():
    vk = EngineDevice("Vulkan0", "NVIDIA GeForce RTX 4090", "gpu", "Vulkan", 22 * GIB, 24 * GIB)
    statuses = reconcile([gpu(), CPU_DEVICE], engine(vk, cuda(0)))
    assert len(statuses) == 2  # no extra "seen only by the engine" entry for Vulkan0
    assert statuses[0].engine_device.backend == "CUDA"  # the GPU's preferred backend


def test_vulkan_build_on_nvidia_works_but_points_at_cuda():
    vk = EngineDevice("Vulkan0", "NVIDIA GeForce RTX 4090", "gpu", "Vulkan", 22 * GIB, 24 * GIB)
    (status, _) = reconcile([gpu(), CPU_DEVICE], engine(vk))
    assert status.usable is True
    assert status.hint.backend == "cuda"
    assert "usually faster" in status.message


def test_cuda_build_cannot_drive_an_amd_card():
    amd = gpu("AMD Radeon RX 7900 XTX", "amd", "0000:03:00.0", gfx_target="gfx1100")
    # A CUDA build on a machine without NVIDIA GPUs: the registry has CUDA but no CUDA devices.
    (status, _) = reconcile([amd, CPU_DEVICE], engine(backends=("CUDA", "CPU")))
    assert status.usable is False
    assert "(CUDA, CPU build)" in status.message
    assert status.hint.backend == "rocm"
    assert status.hint.cmake_args == ("-DGGML_HIP=on", "-DAMDGPU_TARGETS=gfx1100")


@pytest.mark.parametrize(
    ("device", "backend", "flag"),
    [
        (gpu("AMD Radeon RX 6600", "amd", gfx_target="gfx1032"), "vulkan", "-DGGML_VULKAN=on"),
        (gpu("AMD Radeon 780M", "amd", gfx_target=None, kind=IGPU), "vulkan", "-DGGML_VULKAN=on"),
        (gpu("Apple M2 Max GPU", "apple", bus=None, kind=IGPU), "metal", "-DGGML_METAL=on"),
        (gpu("Intel(R) Arc(tm) A770 Graphics", "intel", bus=None), "vulkan", "-DGGML_VULKAN=on"),
        (gpu(compute_capability=None), "cuda", "-DGGML_CUDA=on"),
    ],
)
def test_build_for_each_kind_of_gpu(device, backend, flag):
    hint = build_for(device)
    assert hint.backend == backend
    assert hint.cmake_args[0] == flag
    assert hint.cmake_env.startswith(f'CMAKE_ARGS="{flag}')


def test_a_gpu_only_the_engine_sees_is_added_with_its_memory():
    arc = EngineDevice("Vulkan0", "Intel(R) Arc(tm) A770 Graphics", "gpu", "Vulkan", 15, 16)
    statuses = reconcile([CPU_DEVICE], engine(arc))
    assert len(statuses) == 2
    extra = statuses[1]
    assert extra.device.source == "engine" and extra.device.vendor == "intel"
    assert extra.device.total_bytes == 16 and extra.usable is True


def test_memory_the_drivers_lack_comes_from_the_engine():
    arc = gpu("Intel(R) Arc(tm) A770 Graphics (DG2)", "intel", bus=None, total_bytes=None)
    vk = EngineDevice("Vulkan0", "Intel(R) Arc(tm) A770 Graphics (DG2)", "gpu", "Vulkan", 15, 16)
    (status, _) = reconcile([arc, CPU_DEVICE], engine(vk))
    assert status.engine_device is vk
    assert status.total_bytes == 16 and status.free_bytes == 15


def test_an_engine_that_could_not_be_asked_leaves_usability_unknown():
    view = EngineView.failed("The engine probe exited with status 1 without an answer.")
    statuses = reconcile([gpu(), CPU_DEVICE], view)
    assert [s.usable for s in statuses] == [None, None]
    assert all("exited with status 1" in s.message for s in statuses)
    assert all(s.hint is None for s in statuses)


def test_status_to_dict_is_json_ready():
    import json

    (status, _) = reconcile([gpu(), CPU_DEVICE], engine(backends=("CPU",)))
    data = json.loads(json.dumps(status.to_dict()))
    assert data["hint"]["command"] == "HEARTH_BACKEND=cuda make run"
    assert data["usable"] is False


def test_a_gpu_the_right_backend_leaves_out_gets_no_rebuild_advice():
    arc = gpu("Intel(R) Arc(tm) A770 Graphics", "intel", bus=None)
    igpu = gpu("Intel(R) Graphics (RPL-S)", "intel", bus=None, kind=IGPU)
    vk = EngineDevice("Vulkan0", "Intel(R) Arc(tm) A770 Graphics", "gpu", "Vulkan", 15, 16)
    arc_status, igpu_status, _ = reconcile([arc, igpu, CPU_DEVICE], engine(vk))
    assert arc_status.usable and arc_status.engine_device is vk
    assert igpu_status.usable is False and igpu_status.hint is None
    assert "has the Vulkan backend but does not list this GPU" in igpu_status.message


def test_order_matching_never_pairs_a_gpu_with_another_vendors_device():
    # A Vulkan build that sees only the Intel iGPU must not be credited to the NVIDIA card.
    nvidia = gpu(bus=None)
    vk = EngineDevice("Vulkan0", "Intel(R) Graphics (RPL-S)", "igpu", "Vulkan", 7, 8)
    nvidia_status, _, extra = reconcile([nvidia, CPU_DEVICE], engine(vk))
    assert nvidia_status.engine_device is None and nvidia_status.usable is False
    assert extra.device.vendor == "intel" and extra.engine_device is vk
