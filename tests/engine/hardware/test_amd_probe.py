from pathlib import Path

import pytest

from engine.hardware import amd_parts, amd_probe, amd_sysfs
from engine.hardware.host import Deadline
from engine.hardware.records import GIB, GPU, IGPU, OK, UNAVAILABLE, PcieLink

MIB = 1024**2


def run(host):
    return amd_probe.probe(host, Deadline.after(host, 2.0))


def test_rdna3_discrete_card_from_sysfs(make_host):
    result = run(make_host("rdna3"))
    assert result.status == OK
    assert result.message.startswith("sysfs: ")
    (gpu,) = result.devices  # card0-DP-1 and renderD128 are not cards
    assert gpu.name == "AMD Radeon RX 7900 XTX"  # from libdrm's amdgpu.ids, revision c8
    assert gpu.vendor == "amd" and gpu.kind == GPU and not gpu.unified_memory
    assert gpu.backends == ("rocm", "vulkan")
    assert gpu.source == "sysfs"
    assert gpu.total_bytes == 25753026560
    assert gpu.used_bytes == GIB
    assert gpu.free_bytes == 25753026560 - GIB
    assert gpu.shared_total_bytes == 33554432000  # GTT is read for discrete cards too
    assert gpu.gfx_target == "gfx1100"  # from KFD's topology, matched by render minor
    assert gpu.memory_bandwidth_gbps == 960 and gpu.bandwidth_source == "table"
    assert gpu.pcie == PcieLink(4, 16, 4, 16)
    assert gpu.pci_bus_id == "0000:03:00.0"
    assert gpu.driver_version == "amdgpu (Linux 6.8.0-test)"
    assert gpu.notes == ()


def test_apu_reports_its_carve_out_and_gtt_as_unified_memory(make_host):
    (gpu,) = run(make_host("apu")).devices
    assert gpu.kind == IGPU and gpu.unified_memory
    assert gpu.name == "AMD Radeon 760M/780M (Phoenix)"  # no amdgpu.ids: the built-in table
    assert gpu.total_bytes == 512 * MIB
    assert gpu.shared_total_bytes == 16634609664
    assert gpu.memory_for_models_bytes == 512 * MIB + 16634609664
    assert gpu.gfx_target == "gfx1103"
    assert gpu.pcie is None  # an on-die GPU has no PCIe link worth showing
    assert gpu.memory_bandwidth_gbps is None
    assert "memory bandwidth: not a known part" in gpu.notes


def test_odd_sysfs_entries_cost_only_their_own_values(make_host):
    result = run(make_host("odd"))
    assert result.status == OK
    (gpu,) = result.devices  # card2 has no vendor file: skipped, not a crash
    assert gpu.name == "AMD Radeon RX 6800/6900 series (Navi 21)"
    assert gpu.total_bytes is None and gpu.used_bytes is None and gpu.free_bytes is None
    assert gpu.shared_used_bytes is None
    assert gpu.gfx_target == "gfx1030"  # no KFD: the table's answer
    notes = "\n".join(gpu.notes)
    assert "mem_info_vram_total: unexpected content 'garbage'" in notes
    assert "mem_info_vram_used: unreadable" in notes  # a folder where a file should be
    assert "mem_info_gtt_used: negative value -5" in notes
    assert gpu.pcie == PcieLink(None, 16, None, None)  # "Unknown speed" is no generation
    assert gpu.pci_bus_id is None  # uevent without PCI_SLOT_NAME
    assert gpu.id == "amd:card0"


def test_permission_denied_is_a_note(make_host):
    def read(path: Path) -> str:
        if path.name in ("mem_info_vram_used", "revision"):
            raise PermissionError(13, "Permission denied", str(path))
        return path.read_text()

    (gpu,) = run(make_host("rdna3", read=read)).devices
    assert "mem_info_vram_used: permission denied" in gpu.notes
    assert gpu.total_bytes == 25753026560 and gpu.used_bytes is None and gpu.free_bytes is None
    # Without the revision the name falls back to the first amdgpu.ids entry for the id.
    assert gpu.name == "AMD Radeon RX 7900 XTX"


def test_no_drm_folder_is_unavailable(make_host):
    result = run(make_host(None))
    assert result.status == UNAVAILABLE
    assert result.devices == ()


def test_sysfs_is_not_looked_for_off_linux(make_host):
    result = amd_sysfs.probe(make_host("rdna3", system="Windows"), None)
    assert result.status == UNAVAILABLE


@pytest.mark.parametrize(
    ("version", "gfx"),
    [(110000, "gfx1100"), (90010, "gfx90a"), (110501, "gfx1151"), (90400, "gfx940"), (0, None)],
)
def test_gfx_target_from_kfd_version(version, gfx):
    assert amd_parts.gfx_from_kfd_version(version) == gfx


def test_amdgpu_ids_lookup_prefers_the_exact_revision():
    ids = (
        "# comment\n1.0.0\n744C,\tC8,\tAMD Radeon RX 7900 XTX\n744C,\tCC,\tAMD Radeon RX 7900 XT\n"
    )
    assert amd_parts._find_in_ids(ids, 0x744C, 0xCC) == "AMD Radeon RX 7900 XT"
    assert amd_parts._find_in_ids(ids, 0x744C, 0x01) == "AMD Radeon RX 7900 XTX"
    assert amd_parts._find_in_ids(ids, 0x1234, None) is None


# -- amdsmi ---------------------------------------------------------------------------------------


class FakeAmdSmi:
    def __init__(self, fail_init: bool = False, vram_error: bool = False):
        self.fail_init = fail_init
        self.vram_error = vram_error
        self.shut_down = False

    def amdsmi_init(self):
        if self.fail_init:
            raise RuntimeError("AMDSMI_STATUS_DRIVER_NOT_LOADED")

    def amdsmi_shut_down(self):
        self.shut_down = True

    def amdsmi_get_processor_handles(self):
        return ["h0"]

    def amdsmi_get_gpu_asic_info(self, h):
        return {"market_name": "AMD Radeon RX 7900 XTX", "device_id": "0x744c", "rev_id": "0xc8"}

    def amdsmi_get_gpu_device_bdf(self, h):
        return "0000:03:00.0"

    def amdsmi_get_gpu_vram_usage(self, h):
        if self.vram_error:
            raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")
        return {"vram_total": 24560, "vram_used": 1024}

    def amdsmi_get_gpu_vram_info(self, h):
        return {"vram_type": "GDDR6", "vram_bit_width": 384, "vram_max_bandwidth": "N/A"}

    def amdsmi_get_gpu_driver_info(self, h):
        return {"driver_name": "amdgpu", "driver_version": "6.8.5"}

    def amdsmi_get_pcie_info(self, h):
        return {
            "pcie_static": {"max_pcie_width": 16, "max_pcie_speed": 16000},
            "pcie_metric": {"pcie_width": 16, "pcie_speed": 2500},
        }


def test_amdsmi_is_used_when_importable_and_sysfs_adds_gtt_and_gfx(make_host):
    smi = FakeAmdSmi()
    result = run(make_host("rdna3", amdsmi=smi))
    assert result.status == OK and "amdsmi" in result.message
    (gpu,) = result.devices
    assert gpu.source == "amdsmi"
    assert gpu.name == "AMD Radeon RX 7900 XTX"
    assert gpu.total_bytes == 24560 * MIB and gpu.used_bytes == 1024 * MIB
    assert gpu.driver_version == "amdgpu 6.8.5"
    assert gpu.pcie == PcieLink(1, 16, 4, 16)  # idle link at Gen1, capable of Gen4
    assert gpu.shared_total_bytes == 33554432000  # from /sys/bus/pci/devices/0000:03:00.0
    assert gpu.gfx_target == "gfx1100"
    assert gpu.memory_bandwidth_gbps == 960 and gpu.bandwidth_source == "table"
    assert smi.shut_down


def test_amdsmi_query_failure_is_a_note(make_host):
    (gpu,) = run(make_host("rdna3", amdsmi=FakeAmdSmi(vram_error=True))).devices
    assert gpu.total_bytes is None
    assert any(n.startswith("VRAM usage: AMDSMI_STATUS_NOT_SUPPORTED") for n in gpu.notes)


def test_amdsmi_init_failure_falls_back_to_sysfs(make_host):
    result = run(make_host("rdna3", amdsmi=FakeAmdSmi(fail_init=True)))
    (gpu,) = result.devices
    assert gpu.source == "sysfs"
    assert "amdsmi_init failed" in result.message
