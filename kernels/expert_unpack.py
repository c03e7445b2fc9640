"""Experts copied whole into device slots, laid out plane by plane for the expert GEMV.

A layer whose experts live in host memory may keep each expert's tensors side by side there, so
that the copy engine moves a picked expert in one copy (engine/hearth/staged_experts.py: one
copy of 3 MB runs at the link's rate, where twelve copies of its planes, some of 12 KB, ran at
about 60% of it: docs/decisions/2026-11-30-experts-split-between-cpu-and-bus.md, probes 7-8).
The expert GEMV reads each tensor as one array over the slots, [slots * rows, ...]. This
launch moves the bytes between the two layouts on the device:

    staged [n_slots, E] bytes: slot j's row holds tensor p at src_offsets[p] .. + sizes[p]
    planes (one buffer): tensor p's slots at dst_offsets[p], slot j at + j * sizes[p]

    table = UnpackTable.of(sizes, src_offsets, dst_offsets, device)
    unpack_slots(staged, planes, table, n_slots)

Grid (slots, tensors, splits): each program copies its share of one slot's tensor in blocks of
words (4 bytes where every size and offset allows it, else bytes). A torch loop does the same
where Triton does not run (`unpack_slots_torch`: the reference and the CPU's path).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.availability import require

SPLITS = 64  # programs a slot's tensor: a small plane's end at once, a big one's share is small


@triton.jit
def _unpack_kernel(src_ptr, dst_ptr, src_off_ptr, dst_off_ptr, size_ptr, row_words,
                   SPLITS: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    """Program (slot, tensor, split): words split * share .. of the slot's tensor (sizes and
    offsets in words), from the slot's row of src to the tensor's slot in dst."""
    slot = tl.program_id(0).to(tl.int64)
    tensor = tl.program_id(1)
    split = tl.program_id(2)
    size = tl.load(size_ptr + tensor)
    share = tl.cdiv(tl.cdiv(size, SPLITS), BLOCK) * BLOCK
    start = split * share
    end = tl.minimum(start + share, size)
    src = src_ptr + slot * row_words + tl.load(src_off_ptr + tensor)
    dst = dst_ptr + tl.load(dst_off_ptr + tensor) + slot * size
    for first in range(start, end, BLOCK):
        at = first + tl.arange(0, BLOCK)
        mask = at < end
        tl.store(dst + at, tl.load(src + at, mask=mask), mask=mask)


@dataclass(frozen=True)
class UnpackTable:
    """Each tensor's bytes an expert, and its offsets in a staged row and in the planes
    buffer (bytes, host lists), with the same in words on the device for the launch."""

    sizes: tuple[int, ...]
    src_offsets: tuple[int, ...]
    dst_offsets: tuple[int, ...]
    word: int  # bytes a word: 4 where every size and offset is a multiple of 4, else 1
    device_table: torch.Tensor  # [3, tensors] int64: src offsets, dst offsets, sizes in words

    @classmethod
    def of(cls, sizes, src_offsets, dst_offsets, device) -> UnpackTable:
        sizes, src, dst = tuple(sizes), tuple(src_offsets), tuple(dst_offsets)
        if not len(sizes) == len(src) == len(dst) or not sizes:
            raise ValueError("one size, source offset and destination offset a tensor")
        word = 4 if all(v % 4 == 0 for v in (*sizes, *src, *dst)) else 1
        rows = [[v // word for v in values] for values in (src, dst, sizes)]
        table = torch.tensor(rows, dtype=torch.int64, device=device)
        return cls(sizes, src, dst, word, table)


def unpack_slots(staged: torch.Tensor, planes: torch.Tensor, table: UnpackTable,
                 n_slots: int, splits: int = SPLITS) -> None:  # fmt: skip
    """The first n_slots rows of staged [slots, E] uint8 laid out into planes (uint8, one
    buffer holding every tensor's slots): see the module docstring. One launch, `splits`
    programs a slot's tensor."""
    require()
    _check(staged, planes, table, n_slots)
    if n_slots == 0:
        return
    dtype = torch.int32 if table.word == 4 else torch.uint8
    row_words = staged.shape[1] // table.word
    grid = (n_slots, len(table.sizes), splits)
    t = table.device_table
    _unpack_kernel[grid](
        staged.view(dtype), planes.view(dtype), t[0], t[1], t[2], row_words,
        SPLITS=splits, BLOCK=1024, num_warps=4,
    )  # fmt: skip


def unpack_slots_torch(staged: torch.Tensor, planes: torch.Tensor, table: UnpackTable,
                       n_slots: int) -> None:  # fmt: skip
    """unpack_slots by torch copies, one a tensor (the reference; the CPU's path)."""
    _check(staged, planes, table, n_slots)
    for size, src, dst in zip(table.sizes, table.src_offsets, table.dst_offsets, strict=True):
        rows = staged[:n_slots, src : src + size]
        planes[dst : dst + n_slots * size].view(n_slots, size).copy_(rows)


def _check(staged: torch.Tensor, planes: torch.Tensor, table: UnpackTable, n_slots: int) -> None:
    if staged.dtype != torch.uint8 or planes.dtype != torch.uint8 or staged.dim() != 2:
        raise ValueError("staged [slots, E] and planes [bytes], both uint8")
    if not staged.is_contiguous() or not planes.is_contiguous():
        raise ValueError("staged and planes must be contiguous")
    row = staged.shape[1]
    if not 0 <= n_slots <= staged.shape[0]:
        raise ValueError(f"{n_slots} slots of a staging area of {staged.shape[0]}")
    if row % table.word or any(
        s + n > row for s, n in zip(table.src_offsets, table.sizes, strict=True)
    ):
        raise ValueError(f"a tensor past the staged row of {row} bytes")
    if any(
        d + staged.shape[0] * n > planes.numel()
        for d, n in zip(table.dst_offsets, table.sizes, strict=True)
    ):
        raise ValueError(f"a tensor's slots past the planes buffer of {planes.numel()} bytes")
