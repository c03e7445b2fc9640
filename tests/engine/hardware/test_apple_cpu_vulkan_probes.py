import pytest

from engine.hardware import apple_probe, cpu_probe, vulkan_probe
from engine.hardware.host import CommandOutput, Deadline
from engine.hardware.records import CPU, FAILED, GIB, GPU, IGPU, OK, UNAVAILABLE
from tests.engine.hardware.conftest import FIXTURES, FakePsutil, recorded

MIB = 1024**2


def deadline(host, seconds=2.0):
    return Deadline.after(host, seconds)


# -- Apple ----------------------------------------------------------------------------------------


def mac(make_host, sysctl_file, **kwargs):
    return make_host(
        system="Darwin",
        machine="arm64",
        cpuinfo=None,
        commands={"sysctl": recorded(f"sysctl/{sysctl_file}")},
        **kwargs,
    )


def test_m2_max_uses_macos_default_working_set(make_host):
    host = mac(make_host, "m2_max_64gb.txt", psutil=FakePsutil(total=64 * GIB, available=40 * GIB))
    result = apple_probe.probe(host, deadline(host))
    (gpu,) = result.devices
    assert gpu.vendor == "apple" and gpu.kind == IGPU and gpu.unified_memory
    assert gpu.name == "Apple M2 Max GPU"
    assert gpu.backends == ("metal",)
    assert gpu.total_bytes == 64 * GIB and gpu.free_bytes == 40 * GIB
    assert gpu.gpu_memory_limit_bytes == 48 * GIB  # 3/4 above 36 GB
    assert gpu.memory_for_models_bytes == 48 * GIB
    assert gpu.memory_bandwidth_gbps == 400
    assert gpu.driver_version == "macOS 14.5"
    assert any("iogpu.wired_limit_mb" in note for note in gpu.notes)


def test_wired_limit_override_and_binned_chip(make_host):
    host = mac(make_host, "m3_max_14core_36gb_wired_limit.txt")
    (gpu,) = apple_probe.probe(host, deadline(host)).devices
    assert gpu.gpu_memory_limit_bytes == 30720 * MIB  # the administrator's setting
    assert gpu.memory_bandwidth_gbps == 300  # the 14-core M3 Max bin
    assert not any("estimated" in note for note in gpu.notes)


def test_old_macos_without_wired_limit_gets_two_thirds(make_host):
    # sysctl exits 1 for the unknown oid but prints the rest.
    output = recorded("sysctl/m1_16gb_old_macos.txt", 1, "sysctl: unknown oid 'iogpu'")
    host = make_host(system="Darwin", machine="arm64", commands={"sysctl": output})
    (gpu,) = apple_probe.probe(host, deadline(host)).devices
    assert gpu.total_bytes == 16 * GIB  # sysctl's figure, not psutil's
    assert gpu.gpu_memory_limit_bytes == int(16 * GIB * 2 / 3)
    assert gpu.memory_bandwidth_gbps == 68.25


def test_sysctl_missing_still_gives_a_record_that_says_why(make_host):
    host = make_host(system="Darwin", machine="arm64", psutil=FakePsutil(total=8 * GIB))
    result = apple_probe.probe(host, deadline(host))
    (gpu,) = result.devices
    assert gpu.name == "Apple silicon GPU"
    assert gpu.total_bytes == 8 * GIB  # psutil still knows the RAM
    assert "sysctl: sysctl is not installed" in gpu.notes
    assert "memory bandwidth: not a known chip" in gpu.notes


@pytest.mark.parametrize(("system", "machine"), [("Linux", "x86_64"), ("Darwin", "x86_64")])
def test_apple_probe_only_answers_on_apple_silicon(make_host, system, machine):
    host = make_host(system=system, machine=machine)
    assert apple_probe.probe(host, deadline(host)).status == UNAVAILABLE


# -- CPU ------------------------------------------------------------------------------------------


def test_x86_cpu_from_proc_cpuinfo_and_psutil(make_host):
    host = make_host(cpuinfo="ryzen_7950x.txt", psutil=FakePsutil(32 * GIB, 20 * GIB, (16, 32)))
    (cpu,) = cpu_probe.probe(host, deadline(host)).devices
    assert cpu.kind == CPU and cpu.id == "cpu" and cpu.backends == ("cpu",)
    assert cpu.vendor == "amd"
    assert cpu.name == "AMD Ryzen 9 7950X 16-Core Processor"
    assert (cpu.total_bytes, cpu.free_bytes, cpu.used_bytes) == (32 * GIB, 20 * GIB, 12 * GIB)
    assert cpu.cpu.physical_cores == 16 and cpu.cpu.logical_cores == 32
    assert cpu.cpu.instruction_sets == (
        "AVX",
        "AVX2",
        "FMA",
        "F16C",
        "AVX-512",
        "AVX-512 VNNI",
        "AVX-512 BF16",
    )


def test_arm_cpu_features(make_host):
    host = make_host(machine="aarch64", cpuinfo="graviton3.txt")
    (cpu,) = cpu_probe.probe(host, deadline(host)).devices
    assert cpu.vendor == "arm"
    assert cpu.cpu.instruction_sets == ("NEON", "FP16", "DOTPROD", "I8MM", "BF16", "SVE")
    assert "AVX2" not in cpu.cpu.instruction_sets


def test_macos_cpu_features_from_sysctl(make_host):
    host = mac(make_host, "m2_max_64gb.txt")
    (cpu,) = cpu_probe.probe(host, deadline(host)).devices
    assert cpu.name == "Apple M2 Max" and cpu.vendor == "apple"
    assert cpu.cpu.instruction_sets == ("NEON", "FP16", "DOTPROD", "I8MM", "BF16")


def test_windows_cpu_says_where_to_look(make_host):
    host = make_host(system="Windows", cpuinfo=None)
    (cpu,) = cpu_probe.probe(host, deadline(host)).devices
    assert cpu.cpu.instruction_sets == ()
    assert any("not read on Windows" in note for note in cpu.notes)
    assert cpu.total_bytes == 32 * GIB


def test_broken_psutil_still_gives_a_cpu_record(make_host):
    class BrokenPsutil:
        def virtual_memory(self):
            raise OSError("no /proc/meminfo")

    host = make_host(psutil=BrokenPsutil())
    (cpu,) = cpu_probe.probe(host, deadline(host)).devices
    assert cpu.total_bytes is None
    assert cpu.name == "AMD Ryzen 9 7950X 16-Core Processor"
    assert any("psutil failed" in note for note in cpu.notes)


def test_unreadable_cpuinfo_is_a_note(make_host):
    host = make_host(cpuinfo=None)
    (cpu,) = cpu_probe.probe(host, deadline(host)).devices
    assert cpu.name == "x86_64 CPU"
    assert any("/proc/cpuinfo unreadable" in note for note in cpu.notes)


# -- Vulkan ---------------------------------------------------------------------------------------


def vulkan(make_host, fixture=None, output=None):
    output = output or recorded(f"vulkaninfo/{fixture}")
    host = make_host(commands={"vulkaninfo": output})
    return vulkan_probe.probe(host, deadline(host)), host


def test_intel_arc_and_integrated_gpu_without_the_software_renderer(make_host):
    result, host = vulkan(make_host, "intel_arc_a770.txt")
    assert result.status == OK
    arc, igpu = result.devices
    assert arc.name == "Intel(R) Arc(tm) A770 Graphics (DG2)"
    assert arc.vendor == "intel" and arc.kind == GPU and arc.backends == ("vulkan",)
    assert arc.memory_bandwidth_gbps == 560
    assert arc.driver_version == "Intel open-source Mesa driver Mesa 24.0.9-0ubuntu0.1"
    assert arc.total_bytes is None
    assert any("does not report" in note for note in arc.notes)
    assert igpu.kind == IGPU and igpu.unified_memory
    assert "llvmpipe" in result.message  # named as skipped
    (argv, timeout), *_ = host.run.calls
    assert argv == ["vulkaninfo", "--summary"] and 0 < timeout <= 3.0


def test_amd_through_radv(make_host):
    result, _ = vulkan(make_host, "amd_radv_7900xtx.txt")
    (gpu,) = result.devices
    assert gpu.vendor == "amd" and gpu.backends == ("rocm", "vulkan")
    assert gpu.memory_bandwidth_gbps == 960


def test_only_llvmpipe_means_no_gpu(make_host):
    result, _ = vulkan(make_host, "llvmpipe_only.txt")
    assert result.status == OK and result.devices == ()


def test_vulkaninfo_not_installed_is_unavailable_with_a_hint(make_host):
    host = make_host()
    result = vulkan_probe.probe(host, deadline(host))
    assert result.status == UNAVAILABLE
    assert "vulkan-tools" in result.message


def test_vulkaninfo_timing_out_is_a_failure(make_host):
    output = CommandOutput(None, problem="vulkaninfo did not answer within 3.0 s")
    result, _ = vulkan(make_host, output=output)
    assert result.status == FAILED and "did not answer" in result.message


def test_vulkaninfo_error_without_devices(make_host):
    stderr = "ERROR: [Loader Message] vkCreateInstance: Found no drivers!\n"
    result, _ = vulkan(make_host, output=CommandOutput(1, "", stderr))
    assert result.status == FAILED and "Found no drivers" in result.message


def test_parse_summary_ignores_lines_before_devices():
    text = (FIXTURES / "vulkaninfo" / "intel_arc_a770.txt").read_text()
    blocks = vulkan_probe.parse_summary(text)
    assert [b["deviceID"] for b in blocks] == ["0x56a0", "0xa780", "0x0000"]
    assert "VK_EXT_debug_report" not in str(blocks)
