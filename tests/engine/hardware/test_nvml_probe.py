import dataclasses
import sys

import pynvml
import pytest

from engine.hardware import nvml_probe
from engine.hardware.host import Deadline, Host
from engine.hardware.records import FAILED, GIB, OK, UNAVAILABLE, PcieLink
from tests.engine.hardware.conftest import CODES, NVML_METHODS_USED, FakeGpu, FakeNvml


def run(host: Host):
    return nvml_probe.probe(host, Deadline.after(host, 2.0))


def test_the_double_only_offers_what_the_real_bindings_have():
    # The double stands in for pynvml; every call and error code it offers must exist there.
    for name in NVML_METHODS_USED:
        assert hasattr(pynvml, name), name
    for name, code in CODES.items():
        assert getattr(pynvml, name) == code, name
    assert pynvml.NVML_CLOCK_MEM == FakeNvml.NVML_CLOCK_MEM


def test_one_gpu_is_described_fully(make_host):
    nvml = FakeNvml([FakeGpu()])
    result = run(make_host(nvml=nvml))
    assert result.status == OK
    (gpu,) = result.devices
    assert gpu.name == "NVIDIA GeForce RTX 4090"
    assert gpu.vendor == "nvidia" and gpu.kind == "gpu"
    assert gpu.backends == ("cuda", "vulkan")
    assert (gpu.total_bytes, gpu.used_bytes, gpu.free_bytes) == (24 * GIB, 2 * GIB, 22 * GIB)
    assert gpu.compute_capability == "8.9"
    assert gpu.memory_bandwidth_gbps == pytest.approx(1008.1)
    assert gpu.bandwidth_source == "driver"
    assert gpu.pcie == PcieLink(4, 16, 4, 16)
    assert gpu.pci_bus_id == "0000:01:00.0"
    assert gpu.id == "nvidia:0000:01:00.0"
    assert gpu.driver_version == "550.54.14"
    assert gpu.notes == ()
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


def test_two_gpus_keep_their_own_figures(make_host):
    gpus = [
        FakeGpu(),
        FakeGpu(
            name="NVIDIA GeForce RTX 3060",
            total=12 * GIB,
            used=GIB,
            bus_id="00000000:02:00.0",
            capability=(8, 6),
            memory_clock_mhz=7501,
            bus_width=192,
        ),
    ]
    result = run(make_host(nvml=FakeNvml(gpus)))
    first, second = result.devices
    assert first.pci_bus_id != second.pci_bus_id
    assert second.name == "NVIDIA GeForce RTX 3060"
    assert second.total_bytes == 12 * GIB
    assert second.compute_capability == "8.6"
    assert second.memory_bandwidth_gbps == pytest.approx(360.0, abs=0.1)
    assert result.message == "2 NVIDIA GPU(s)"


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ("NVML_ERROR_LIBRARY_NOT_FOUND", UNAVAILABLE),  # no NVIDIA driver: the ordinary case
        ("NVML_ERROR_DRIVER_NOT_LOADED", UNAVAILABLE),
        ("NVML_ERROR_NO_PERMISSION", FAILED),
        ("NVML_ERROR_LIB_RM_VERSION_MISMATCH", FAILED),
    ],
)
def test_init_errors_are_reported_not_raised(make_host, error, status):
    result = run(make_host(nvml=FakeNvml([FakeGpu()], init_error=error)))
    assert result.status == status
    assert result.devices == ()
    assert result.message.startswith("NVML: ")


def test_permission_and_version_mismatch_messages_say_what_to_do(make_host):
    denied = run(make_host(nvml=FakeNvml(init_error="NVML_ERROR_NO_PERMISSION")))
    assert "group that owns /dev/nvidia" in denied.message
    mismatch = run(make_host(nvml=FakeNvml(init_error="NVML_ERROR_LIB_RM_VERSION_MISMATCH")))
    assert "restart" in mismatch.message


def test_an_unsupported_query_costs_only_its_own_value(make_host):
    gpu = FakeGpu(
        errors={
            "nvmlDeviceGetMemoryBusWidth": "NVML_ERROR_NOT_SUPPORTED",
            "nvmlDeviceGetCurrPcieLinkGeneration": "NVML_ERROR_NOT_SUPPORTED",
        }
    )
    (device,) = run(make_host(nvml=FakeNvml([gpu]))).devices
    assert device.total_bytes == 24 * GIB  # the rest is still there
    assert device.memory_bandwidth_gbps == 1008.0  # from the table instead
    assert device.bandwidth_source == "table"
    assert device.pcie == PcieLink(None, 16, 4, 16)
    assert "memory bus width: Not Supported" in device.notes
    assert "PCIe generation: Not Supported" in device.notes


def test_a_lost_gpu_keeps_a_record_that_says_so(make_host):
    lost = FakeGpu(
        errors={
            name: "NVML_ERROR_GPU_IS_LOST"
            for name in NVML_METHODS_USED
            if name.startswith("nvmlDeviceGet") and name != "nvmlDeviceGetHandleByIndex"
        }
    )
    result = run(make_host(nvml=FakeNvml([FakeGpu(), lost])))
    assert result.status == OK
    healthy, broken = result.devices
    assert healthy.total_bytes == 24 * GIB
    assert broken.name == "NVIDIA GPU 1"
    assert broken.total_bytes is None
    assert "memory: GPU is lost" in broken.notes
    assert broken.pci_bus_id is None and broken.locator == "index:1"


def test_device_count_failure_is_a_failed_probe(make_host):
    result = run(make_host(nvml=FakeNvml([FakeGpu()], count_error="NVML_ERROR_UNKNOWN")))
    assert result.status == FAILED
    assert "Unknown Error" in result.message


def test_missing_bindings_are_unavailable(make_host):
    def no_pynvml():
        raise ImportError("No module named 'pynvml'")

    host = make_host()
    host = dataclasses.replace(host, load_nvml=no_pynvml)
    result = run(host)
    assert result.status == UNAVAILABLE
    assert "pynvml" in result.message


def test_the_import_seam_picks_up_a_double_in_sys_modules(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([FakeGpu(name="NVIDIA L4")]))
    host = Host(system="Linux")  # the default loader: `import pynvml`
    (device,) = run(host).devices
    assert device.name == "NVIDIA L4"


def test_open_handle_finds_the_gpu_by_its_locator():
    gpus = [FakeGpu(), FakeGpu(name="second", bus_id="00000000:02:00.0")]
    nvml = FakeNvml(gpus)
    assert nvml_probe.open_handle(nvml, "pci:0000:02:00.0").name == "second"
    assert nvml_probe.open_handle(nvml, "index:0").name == "NVIDIA GeForce RTX 4090"
