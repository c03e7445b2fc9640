"""Weights brought into L2 ahead of the kernel that reads them, by a kernel that runs before it.

A decode step's kernels each read their weights from DRAM once they start, and several of them
leave DRAM idle for part of their run: the expert gate/up of a one-token MoE step reads 14 MB
(Qwen3-30B-A3B) in 2.9 waves of programs at half the copy rate, and the expert down that
follows it starts only as the gate/up's programs leave the SMs, then waits for its own 7-10
MB. A kernel given the next kernel's byte spans issues `cp.async.bulk.prefetch.L2` over them
(sm_90+: the copy engine of each SM fetches the span into L2, the issuing thread goes on at
once); the next kernel's loads then hit L2. The hint changes no value: whether it arrives in
time, and whether it crowds out the issuing kernel's own reads, only a device run can say.

Each program of the issuing grid takes one share of a span (the caller cuts it with
share_bytes, so that the grid covers it once), and its first thread issues one instruction
for it: spans and shares are multiples of 16 bytes, as the instruction asks of its address
and size. Triton's interpreter runs no assembly: there
the prefetch is skipped (ASM False), which changes nothing a test could see.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

ALIGN = 16  # what cp.async.bulk.prefetch asks of its address and size


SPANS = 4  # the spans a launch takes: its kernel's four (pointer, bytes, share) arguments


@dataclass(frozen=True)
class L2Spans:
    """Up to SPANS fixed byte spans (weights) for a launch of n_programs programs to bring into
    L2: each a uint8 view of a tensor, its bytes (a multiple of 16) and one program's share
    of them (share_bytes); unused spans have 0 bytes. Kernel arguments, not a table in device
    memory: a program starts its prefetches without first loading where they point."""

    views: tuple[torch.Tensor, ...]
    nbytes: tuple[int, ...]
    chunks: tuple[int, ...]
    n_programs: int

    def args(self) -> tuple:
        """The kernel's 3 SPANS arguments: the views, then the byte counts, then the shares."""
        return (*self.views, *self.nbytes, *self.chunks)


def no_spans(anything: torch.Tensor) -> tuple:
    """The kernel arguments of no span (any tensor for the pointers)."""
    return (anything,) * SPANS + (0,) * (2 * SPANS)


def l2_spans(tensors: list[torch.Tensor], n_programs: int) -> L2Spans | None:
    """The SPANS largest of the tensors (contiguous, on a CUDA device, 16-byte aligned: any
    whole allocation of torch's), their bytes trimmed to whole 16-byte words, each cut into
    n_programs shares; None where none is left."""
    usable = [t for t in tensors if t.is_contiguous() and t.device.type == "cuda"
              and t.data_ptr() % ALIGN == 0]  # fmt: skip
    usable.sort(key=lambda t: -t.numel() * t.element_size())
    usable = usable[:SPANS]
    nbytes = [t.numel() * t.element_size() // ALIGN * ALIGN for t in usable]
    if not any(nbytes):
        return None
    views = [t.view(torch.uint8) if t.dim() else t for t in usable]
    views += views[:1] * (SPANS - len(views))
    nbytes += [0] * (SPANS - len(nbytes))
    chunks = tuple(share_bytes(n, n_programs) for n in nbytes)
    return L2Spans(tuple(views), tuple(nbytes), chunks, n_programs)


def share_bytes(nbytes: int, n_shares: int) -> int:
    """The bytes of each share (the last may hold fewer) when a span of nbytes, a multiple of
    16, is cut into n_shares 16-byte-aligned shares: the `chunk` prefetch_share takes."""
    if nbytes % ALIGN:
        raise ValueError(f"a span of {nbytes} bytes: the prefetch takes multiples of {ALIGN}")
    each = -(-nbytes // n_shares)
    return -(-each // ALIGN) * ALIGN


def share_bounds(nbytes: int, chunk: int, share: int) -> tuple[int, int]:
    """(first byte, byte count) of share `share`: prefetch_share's arithmetic."""
    start = share * chunk
    return start, max(0, min(chunk, nbytes - start))


@triton.jit
def _bulk_prefetch(at, size):
    """cp.async.bulk.prefetch.L2 of `size` bytes at `at` by the program's first thread, where
    size > 0; the int32 zero it returns is unused."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        "setp.ne.and.s32 p, $2, 0, p; @p cp.async.bulk.prefetch.L2.global [$1], $2; "
        "mov.u32 $0, 0; }",
        "=r,l,r",
        [at, size],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def prefetch_share(base, nbytes, chunk, share, ASM: tl.constexpr):
    """Share `share` of the nbytes at base (a uint8 pointer; base, nbytes and chunk multiples
    of 16; chunk from share_bytes) into L2. ASM False (the interpreter): nothing."""
    if ASM:
        start = share * chunk
        size = tl.maximum(tl.minimum(chunk, nbytes - start), 0)
        _bulk_prefetch(base + start, size)


@triton.jit
def prefetch_spans(f0, f1, f2, f3, n0, n1, n2, n3, c0, c1, c2, c3, share, ASM: tl.constexpr):
    """Share `share` of each span of an L2Spans' arguments into L2 (prefetch_share's)."""
    prefetch_share(f0, n0, c0, share, ASM)
    prefetch_share(f1, n1, c1, share, ASM)
    prefetch_share(f2, n2, c2, share, ASM)
    prefetch_share(f3, n3, c3, share, ASM)
