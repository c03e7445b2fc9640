"""The CPU through psutil (cores, RAM, available RAM) and its instruction sets.

llama.cpp's CPU kernels are chosen by instruction set (AVX2, AVX-512, NEON dot product, ...), and
layers that do not fit on the GPU run here, so these are part of the plan. Instruction sets come
from /proc/cpuinfo on Linux and from sysctl on macOS; elsewhere the engine's own CPU backend
reports them (see reconcile).
"""

from __future__ import annotations

import os

from engine.hardware.host import Deadline, Host
from engine.hardware.records import CPU, OK, CpuDetails, Device, ProbeResult
from engine.hardware.sysctl import read_sysctl

# /proc/cpuinfo flag -> the name people know, in the order worth showing.
X86_FLAGS = {
    "avx": "AVX",
    "avx2": "AVX2",
    "fma": "FMA",
    "f16c": "F16C",
    "avx_vnni": "AVX-VNNI",
    "avx512f": "AVX-512",
    "avx512_vnni": "AVX-512 VNNI",
    "avx512_bf16": "AVX-512 BF16",
    "amx_tile": "AMX",
}
ARM_FEATURES = {
    "asimd": "NEON",
    "asimdhp": "FP16",
    "asimddp": "DOTPROD",
    "i8mm": "I8MM",
    "bf16": "BF16",
    "sve": "SVE",
    "sve2": "SVE2",
}
MACOS_FEATURES = {
    "hw.optional.neon": "NEON",
    "hw.optional.arm.FEAT_FP16": "FP16",
    "hw.optional.arm.FEAT_DotProd": "DOTPROD",
    "hw.optional.arm.FEAT_I8MM": "I8MM",
    "hw.optional.arm.FEAT_BF16": "BF16",
    "hw.optional.avx1_0": "AVX",
    "hw.optional.avx2_0": "AVX2",
    "hw.optional.fma": "FMA",
    "hw.optional.avx512f": "AVX-512",
}
VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd", "Apple": "apple"}


def parse_cpuinfo(text: str) -> tuple[str | None, str | None, tuple[str, ...]]:
    """(model name, vendor, instruction sets) from Linux's /proc/cpuinfo (first processor)."""
    model = vendor = None
    flags: set[str] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "model name" and model is None:
            model = value
        elif key == "vendor_id" and vendor is None:
            vendor = VENDORS.get(value, value.lower() or None)
        elif key == "cpu implementer" and vendor is None:
            vendor = "apple" if value.lower() == "0x61" else "arm"
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    table = ARM_FEATURES if "asimd" in flags else X86_FLAGS
    return model, vendor, tuple(label for flag, label in table.items() if flag in flags)


def probe(host: Host, deadline: Deadline) -> ProbeResult:
    notes: list[str] = []
    model, vendor, instruction_sets = _identify(host, deadline, notes)
    total = available = physical = logical = None
    try:
        psutil = host.load_psutil()
        memory = psutil.virtual_memory()
        total, available = int(memory.total), int(memory.available)
        physical = psutil.cpu_count(logical=False)
        logical = psutil.cpu_count(logical=True)
    except Exception as exc:  # psutil is a dependency, but a broken one must not stop detection
        notes.append(f"memory and cores: psutil failed ({exc})")
    device = Device(
        id="cpu",
        vendor=vendor or "other",
        name=model or f"{host.machine or 'unknown'} CPU",
        kind=CPU,
        backends=("cpu",),
        source="psutil",
        total_bytes=total,
        free_bytes=available,
        used_bytes=total - available if total is not None and available is not None else None,
        unified_memory=False,
        cpu=CpuDetails(physical, logical, instruction_sets),
        locator="cpu",
        notes=tuple(notes),
    )
    return ProbeResult(devices=(device,), status=OK, message=device.name)


def _identify(
    host: Host, deadline: Deadline, notes: list[str]
) -> tuple[str | None, str | None, tuple[str, ...]]:
    if host.system == "Linux":
        try:
            return parse_cpuinfo(host.read(host.path("/proc/cpuinfo")))
        except OSError as exc:
            notes.append(f"instruction sets: /proc/cpuinfo unreadable ({exc.strerror})")
            return None, None, ()
    if host.system == "Darwin":
        names = ["machdep.cpu.brand_string", "machdep.cpu.vendor", *MACOS_FEATURES]
        values, problem = read_sysctl(host, deadline, names)
        if problem:
            notes.append(f"instruction sets: sysctl {problem}")
        found = tuple(label for key, label in MACOS_FEATURES.items() if values.get(key) == "1")
        model = values.get("machdep.cpu.brand_string")
        vendor = VENDORS.get(values.get("machdep.cpu.vendor", ""))
        if vendor is None and model and model.startswith("Apple"):
            vendor = "apple"
        return model, vendor, found
    notes.append(
        f"instruction sets: not read on {host.system}; the engine's CPU backend lists them"
    )
    return None, None, ()


def physical_cores() -> int:
    """The CPU's physical cores (hyperthreads add little to memory-bound work), what CPU thread
    counts are sized from (engine_threads for llama.cpp); the logical count where psutil cannot
    tell."""
    try:
        import psutil

        return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)
    except ImportError:
        return max(1, os.cpu_count() or 1)


def engine_threads() -> int:
    """The CPU threads llama.cpp computes a step of one token with (a reply's decode) unless
    told otherwise: the physical cores but one, which is left to the window and whatever else
    the computer runs. A prompt's batches still take every physical core.

    ggml's threads wait for each other after every operation of a step (about 900 a token for
    the starter model) by spinning, not sleeping: when another thread takes one of their cores,
    all of them wait at each operation until it is scheduled back. A step of one token is
    little work between those waits, so with every core in the pool one other busy program (or
    the window drawing the reply) is enough to stall it: on 2 cores beside one busy process,
    the starter model decoded 2.4-4.1 tok/s on 2 threads and 27-40 on 1. A prompt's batch of
    512 tokens does enough work between the waits to gain from the last core
    (docs/decisions/2026-11-29-engine-threads.md)."""
    return max(1, physical_cores() - 1)


def llama_threads(requested: int = 0) -> tuple[int, int]:
    """llama.cpp's (n_threads, n_threads_batch): `requested` for both where the person set a
    count (Preferences, --threads), else engine_threads() for a step of one token and every
    physical core for a batch of tokens."""
    return (requested, requested) if requested else (engine_threads(), physical_cores())
