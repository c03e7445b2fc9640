"""How many programs of a compiled Triton kernel an SM holds at once, from the registers and
shared memory the compiler gave it.

Flash-decoding splits a sequence over programs so that one wave fills the GPU: each program
walks its pages one after the other, so a program that does not fit beside the others runs in
a second wave and doubles the time (kivi4's decode kernel took 167 registers a thread, so an
H100 SM held 3 programs of 4 warps, not the 4 the split count assumed: docs/kernels.md). The
count here is what the launch sizes its splits from.

    registers: a warp takes ceil(regs * 32 / 256) * 256 registers, from the register file of
               one of the SM's 4 sub-partitions (16,384 each; a warp runs on one scheduler):
               an SM holds 4 * floor(16,384 / that) warps, not 65,536 / that
    shared:    a program takes its shared memory + 1 KiB the driver reserves, of the SM's 228 KiB
    warps:     at most 64 an SM (2,048 threads)
"""

from __future__ import annotations

from dataclasses import dataclass

# CUDA's per-program reservation of shared memory (cudaDevAttrReservedSharedMemoryPerBlock),
# the same on every GPU from Ampere to Hopper
RESERVED_SHARED = 1024
REGISTER_GRANULE = 256  # registers are given to a warp in multiples of this
# an SM's schedulers, each with its quarter of the register file: CUDA's occupancy calculator
# (cuda_occupancy.h, cudaOccSubPartitionsPerMultiprocessor: 4 from Volta to Blackwell) counts
# the warps that registers allow per sub-partition. Counted over the whole file instead, 2-warp
# programs of 200 registers came to 5 an SM where 4 fit (10 warps of 6,400 registers: 3 on a
# sub-partition need 19,200 of its 16,384), so the splits sized to one wave took two
# (docs/decisions/0005-register-caps.md)
SUB_PARTITIONS = 4


@dataclass(frozen=True)
class SmLimits:
    registers: int = 65536
    shared_bytes: int = 233472  # 228 KiB: an H100's or A100's SM
    max_warps: int = 64
    max_programs: int = 32


def programs_per_sm(n_regs: int, num_warps: int, shared_bytes: int, limits: SmLimits) -> int:
    """Programs of num_warps warps, n_regs registers a thread and shared_bytes of shared memory
    that one SM runs at once (at least 1: a kernel that launched at all fits once)."""
    warp_regs = -(-max(n_regs, 1) * 32 // REGISTER_GRANULE) * REGISTER_GRANULE
    warps_by_regs = limits.registers // SUB_PARTITIONS // warp_regs * SUB_PARTITIONS
    by_regs = warps_by_regs // num_warps
    by_shared = limits.shared_bytes // (shared_bytes + RESERVED_SHARED)
    by_warps = limits.max_warps // num_warps
    return max(1, min(by_regs, by_shared, by_warps, limits.max_programs))


def sm_limits(device) -> SmLimits:
    """The limits of device's SMs as torch reports them (older torch: an H100's)."""
    import torch

    props = torch.cuda.get_device_properties(device)
    default = SmLimits()
    threads = getattr(props, "max_threads_per_multi_processor", default.max_warps * 32)
    return SmLimits(
        registers=getattr(props, "regs_per_multiprocessor", default.registers),
        shared_bytes=getattr(props, "shared_memory_per_multiprocessor", default.shared_bytes),
        max_warps=threads // 32,
    )


def compiled_programs_per_sm(kernel, limits: SmLimits) -> int:
    """programs_per_sm of a Triton CompiledKernel (from `jit_fn.warmup(...)`): its register
    count is known only once its binary is loaded, which warmup does not do by itself."""
    kernel._init_handles()
    return programs_per_sm(kernel.n_regs, kernel.metadata.num_warps, kernel.metadata.shared, limits)
