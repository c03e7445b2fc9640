import time

from engine.hardware.detection import detect
from engine.hardware.monitor import UsageSampler
from engine.hardware.records import GIB
from tests.engine.hardware.conftest import FakeGpu, FakeNvml, FakePsutil, recorded


def sampler_for(host, min_interval_s=0.0):
    devices = detect(host=host, timeout_s=2.0).devices
    return devices, UsageSampler(devices, host=host, min_interval_s=min_interval_s)


def test_nvidia_amd_and_cpu_each_report_from_their_own_source(make_host):
    nvml = FakeNvml([FakeGpu(used=5 * GIB, utilization=81)])
    host = make_host("rdna3", nvml=nvml, psutil=FakePsutil(32 * GIB, 20 * GIB))
    devices, sampler = sampler_for(host)
    nvidia, amd, cpu = sampler.sample()
    assert nvidia.device_id == devices[0].id
    assert (nvidia.used_bytes, nvidia.free_bytes, nvidia.total_bytes) == (
        5 * GIB,
        19 * GIB,
        24 * GIB,
    )
    assert nvidia.utilization_percent == 81.0
    assert amd.used_bytes == GIB and amd.utilization_percent == 37.0  # gpu_busy_percent
    assert amd.shared_used_bytes == 52428800
    assert cpu.used_bytes == 12 * GIB and cpu.utilization_percent == 12.5
    sampler.close()
    assert nvml.shutdowns >= 1


def test_samples_follow_the_driver(make_host):
    fake = FakeGpu(used=GIB)
    host = make_host(nvml=FakeNvml([fake]))
    _, sampler = sampler_for(host)
    assert sampler.sample()[0].used_bytes == GIB
    fake.used = 7 * GIB
    assert sampler.sample()[0].used_bytes == 7 * GIB


def test_never_polls_the_drivers_more_than_once_per_interval(make_host):
    fake = FakeGpu(used=GIB)
    host = make_host(nvml=FakeNvml([fake]))
    _, sampler = sampler_for(host, min_interval_s=1.0)
    first = sampler.sample()
    fake.used = 3 * GIB
    assert sampler.sample() is first  # asked again at once: the previous sample
    sampler._last_at = time.monotonic() - 1.01  # as if a second had passed
    assert sampler.sample()[0].used_bytes == 3 * GIB


def test_a_failing_query_is_a_note_and_the_other_devices_still_report(make_host):
    gpus = [
        FakeGpu(errors={"nvmlDeviceGetUtilizationRates": "NVML_ERROR_NOT_SUPPORTED"}),
        FakeGpu(bus_id="00000000:02:00.0", name="NVIDIA GeForce RTX 3090"),
    ]
    nvml = FakeNvml(gpus)
    host = make_host(nvml=nvml)
    _, sampler = sampler_for(host)
    gpus[1].errors["nvmlDeviceGetMemoryInfo"] = "NVML_ERROR_GPU_IS_LOST"
    first, second, cpu = sampler.sample()
    assert first.utilization_percent is None and "Not Supported" in first.note
    assert first.used_bytes == 2 * GIB
    assert second.used_bytes is None and "GPU is lost" in second.note
    assert cpu.total_bytes is not None


def test_devices_without_live_figures_say_so(make_host):
    host = make_host(commands={"vulkaninfo": recorded("vulkaninfo/intel_arc_a770.txt")})
    devices, sampler = sampler_for(host)
    arc = sampler.sample()[0]
    assert devices[0].source == "vulkaninfo"
    assert arc.used_bytes is None and "no live figures from vulkaninfo" in arc.note


def test_nvml_that_stops_working_is_reported_once_per_sample(make_host):
    nvml = FakeNvml([FakeGpu()])
    host = make_host(nvml=nvml)
    devices, _ = sampler_for(host)
    nvml.init_error = "NVML_ERROR_DRIVER_NOT_LOADED"  # e.g. the driver was unloaded
    sample = UsageSampler(devices, host=host).sample()[0]
    assert sample.used_bytes is None and "Driver Not Loaded" in sample.note
