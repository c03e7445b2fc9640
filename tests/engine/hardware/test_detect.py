import os
import stat
import statistics
import threading
import time

import pytest

from engine.hardware import detect_devices
from engine.hardware.detection import PROBES, detect
from engine.hardware.host import Host, run_command
from engine.hardware.records import CPU, FAILED, OK, TIMED_OUT, ProbeResult
from tests.engine.hardware.conftest import FakeGpu, FakeNvml, recorded


def by_name(detection):
    return {report.name: report for report in detection.probes}


def test_an_nvidia_and_an_amd_card_with_the_cpu_last(make_host):
    host = make_host(
        "rdna3",
        nvml=FakeNvml([FakeGpu()]),
        commands={"vulkaninfo": recorded("vulkaninfo/amd_radv_7900xtx.txt")},
    )
    detection = detect(host=host, timeout_s=2.0)
    names = [d.name for d in detection.devices]
    # Vulkan's view of the AMD card is dropped: the AMD probe already described it.
    assert names == [
        "NVIDIA GeForce RTX 4090",
        "AMD Radeon RX 7900 XTX",
        "AMD Ryzen 9 7950X 16-Core Processor",
    ]
    assert detection.devices[-1].kind == CPU
    assert {r.status for r in detection.probes} == {OK, "unavailable"}
    assert by_name(detection)["nvml"].device_count == 1


def test_intel_gpus_come_from_vulkan_and_stand_for_their_pci_entries(make_host):
    host = make_host(
        "pci_only",
        nvml=FakeNvml(init_error="NVML_ERROR_DRIVER_NOT_LOADED"),
        commands={"vulkaninfo": recorded("vulkaninfo/intel_arc_a770.txt")},
    )
    detection = detect(host=host, timeout_s=2.0)
    gpus = detection.gpus
    # The NVIDIA card has no driver: a PCI record that says so. The Intel iGPU on the PCI bus is
    # the Vulkan record's physical device, so it is not listed twice.
    assert [d.source for d in gpus] == ["pci", "vulkaninfo", "vulkaninfo"]
    nvidia = gpus[0]
    assert nvidia.vendor == "nvidia" and nvidia.pci_bus_id == "0000:01:00.0"
    assert nvidia.name == "NVIDIA GPU (PCI 10de:2684)"
    assert nvidia.backends == ("cuda", "vulkan")
    assert nvidia.total_bytes is None
    assert "nvml probe unavailable: NVML: Driver Not Loaded" in nvidia.notes[0]
    assert "install the NVIDIA driver" in nvidia.notes[1]


def test_gpus_seen_only_on_the_pci_bus_when_no_probe_answers(make_host):
    detection = detect(host=make_host("pci_only"), timeout_s=2.0)
    nvidia, intel = detection.gpus
    assert nvidia.kind == "gpu" and intel.kind == "igpu"
    assert "vulkaninfo is not installed" in intel.notes[0]
    assert "vulkan-tools" in intel.notes[1]


def test_a_hanging_probe_times_out_and_leaves_a_record(make_host):
    gate = threading.Event()
    try:
        host = make_host("pci_only", nvml=FakeNvml([FakeGpu()], init_gate=gate))
        began = time.perf_counter()
        detection = detect(host=host, timeout_s=0.3)
        took = time.perf_counter() - began
    finally:
        gate.set()  # let the abandoned probe thread finish
    assert took < 1.5
    assert by_name(detection)["nvml"].status == TIMED_OUT
    nvidia = detection.gpus[0]
    assert nvidia.source == "pci"
    assert "nvml probe timed_out: did not answer within 0.3 s" in nvidia.notes[0]
    assert any("nvml probe did not answer" in note for note in detection.notes)
    assert detection.devices[-1].kind == CPU  # the other probes were not held up


def test_a_probe_that_raises_is_reported_and_the_rest_go_on(make_host):
    def explode(host, deadline):
        raise RuntimeError("driver said no")

    probes = {**PROBES, "nvml": explode}
    detection = detect(host=make_host("rdna3"), probes=probes, timeout_s=2.0)
    report = by_name(detection)["nvml"]
    assert report.status == FAILED and report.message == "RuntimeError: driver said no"
    assert [d.vendor for d in detection.devices] == ["amd", "amd"]  # the GPU, then the CPU


def test_a_cpu_record_exists_even_when_the_cpu_probe_hangs(make_host):
    gate = threading.Event()

    def stuck(host, deadline):
        gate.wait(30)
        return ProbeResult()

    try:
        detection = detect(host=make_host(), probes={"cpu": stuck}, timeout_s=0.2)
    finally:
        gate.set()
    (cpu,) = detection.devices
    # the memory still comes from psutil (the fake's 32 GiB, 20 free), so RAM can be planned
    assert cpu.kind == CPU and (cpu.total_bytes, cpu.free_bytes) == (32 * 1024**3, 20 * 1024**3)
    assert cpu.notes[0].startswith("Instruction sets unknown: cpu probe timed_out")
    assert cpu.cpu.logical_cores == os.cpu_count()


def test_a_real_subprocess_that_hangs_is_killed_at_its_time_limit(tmp_path, monkeypatch):
    fake = tmp_path / "vulkaninfo"
    fake.write_text("#!/bin/sh\nsleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    began = time.perf_counter()
    output = run_command(["vulkaninfo", "--summary"], 0.3)
    assert time.perf_counter() - began < 2.0
    assert output.returncode is None and "did not answer within 0.3 s" in output.problem


def test_run_command_reports_a_missing_program():
    output = run_command(["hearth-no-such-program-xyz"], 1.0)
    assert output.returncode is None and "not installed" in output.problem


def test_detection_on_this_machine_is_fast():
    """The issue's bound: under 500 ms on a machine without GPUs. The median of three runs keeps
    a busy shared CI machine from failing it by chance; the figure is printed for the record."""
    Host()  # warm imports are part of the app's start-up, not detection
    times = []
    for _ in range(3):
        began = time.perf_counter()
        devices = detect_devices(timeout_s=4.0)
        times.append(time.perf_counter() - began)
        assert devices and devices[-1].kind == CPU
    median = statistics.median(times)
    print(f"\ndetection took {', '.join(f'{t * 1000:.0f}' for t in times)} ms")
    if any(d.is_gpu for d in devices):
        pytest.skip("this machine has a GPU; the 500 ms bound is for machines without one")
    assert median < 0.5
