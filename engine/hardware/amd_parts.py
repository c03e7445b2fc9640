"""AMD GPUs by PCI device id: a name, the gfx target and whether it is an APU.

sysfs gives only numeric ids. The marketing name comes from libdrm's `amdgpu.ids` (the file Mesa
and radeontop read) when the system has it; this small table covers common parts otherwise, and
gives the gfx target when the ROCm kernel driver (KFD) does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.hardware.host import Host

AMDGPU_IDS_PATHS = ("/usr/share/libdrm/amdgpu.ids", "/usr/local/share/libdrm/amdgpu.ids")


@dataclass(frozen=True)
class AmdPart:
    name: str
    gfx_target: str | None
    is_apu: bool = False


# fmt: off
KNOWN_PARTS: dict[int, AmdPart] = {
    0x7550: AmdPart("Radeon RX 9070 series (Navi 48)", "gfx1201"),
    0x7590: AmdPart("Radeon RX 9060 series (Navi 44)", "gfx1200"),
    0x744C: AmdPart("Radeon RX 7900 series (Navi 31)", "gfx1100"),
    0x7448: AmdPart("Radeon Pro W7900 (Navi 31)", "gfx1100"),
    0x747E: AmdPart("Radeon RX 7700/7800 series (Navi 32)", "gfx1101"),
    0x7480: AmdPart("Radeon RX 7600 series (Navi 33)", "gfx1102"),
    0x73BF: AmdPart("Radeon RX 6800/6900 series (Navi 21)", "gfx1030"),
    0x73A5: AmdPart("Radeon RX 6950 XT (Navi 21)", "gfx1030"),
    0x73DF: AmdPart("Radeon RX 6700 series (Navi 22)", "gfx1031"),
    0x73FF: AmdPart("Radeon RX 6600 series (Navi 23)", "gfx1032"),
    0x743F: AmdPart("Radeon RX 6400/6500 series (Navi 24)", "gfx1034"),
    0x66AF: AmdPart("Radeon VII (Vega 20)", "gfx906"),
    0x740F: AmdPart("Instinct MI210 (Aldebaran)", "gfx90a"),
    0x740C: AmdPart("Instinct MI250X (Aldebaran)", "gfx90a"),
    0x74A1: AmdPart("Instinct MI300X", "gfx942"),
    # APUs: the GPU shares system memory (a small VRAM carve-out plus GTT)
    0x1586: AmdPart("Radeon 8060S (Strix Halo)", "gfx1151", is_apu=True),
    0x150E: AmdPart("Radeon 880M/890M (Strix Point)", "gfx1150", is_apu=True),
    0x15BF: AmdPart("Radeon 760M/780M (Phoenix)", "gfx1103", is_apu=True),
    0x15C8: AmdPart("Radeon 740M (Phoenix 2)", "gfx1103", is_apu=True),
    0x1900: AmdPart("Radeon 760M/780M (Hawk Point)", "gfx1103", is_apu=True),
    0x1681: AmdPart("Radeon 660M/680M (Rembrandt)", "gfx1035", is_apu=True),
    0x164E: AmdPart("Radeon Graphics (Raphael)", "gfx1036", is_apu=True),
    0x163F: AmdPart("Radeon Graphics (Van Gogh)", "gfx1033", is_apu=True),
    0x1638: AmdPart("Radeon Graphics (Cezanne)", "gfx90c", is_apu=True),
    0x164C: AmdPart("Radeon Graphics (Lucienne)", "gfx90c", is_apu=True),
    0x15D8: AmdPart("Radeon Vega Graphics (Picasso)", "gfx902", is_apu=True),
    0x15DD: AmdPart("Radeon Vega Graphics (Raven)", "gfx902", is_apu=True),
}
# fmt: on


def lookup(device_id: int | None) -> AmdPart | None:
    return KNOWN_PARTS.get(device_id) if device_id is not None else None


def marketing_name(host: Host, device_id: int, revision: int | None) -> str | None:
    """The product name from libdrm's amdgpu.ids, or None when the file or the entry is absent."""
    for candidate in AMDGPU_IDS_PATHS:
        try:
            content = host.read(host.path(candidate))
        except OSError:
            continue
        return _find_in_ids(content, device_id, revision)
    return None


def _find_in_ids(content: str, device_id: int, revision: int | None) -> str | None:
    # Lines: "744C,\tC8,\tAMD Radeon RX 7900 XTX"; the first entry for the id is a fallback when
    # the revision has no entry of its own.
    first: str | None = None
    for line in content.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in line.split(",", 2)]
        if len(fields) != 3:
            continue
        try:
            did, rev = int(fields[0], 16), int(fields[1], 16)
        except ValueError:
            continue
        if did != device_id:
            continue
        if revision is not None and rev == revision:
            return fields[2]
        first = first or fields[2]
    return first


def gfx_from_kfd_version(version: int) -> str | None:
    """KFD's gfx_target_version (110000, 90010, 110501) -> "gfx1100", "gfx90a", "gfx1151"."""
    if version <= 0:
        return None
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    if minor > 15 or step > 15:
        return None
    return f"gfx{major}{minor:x}{step:x}"
