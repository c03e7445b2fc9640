"""A PackedWeight dequantized where it lives: the whole matrix for prefill's GEMM, or a few
rows of it (the decode step's embedding lookup).

    w16 = dequantize(packed, torch.float16)     # [n_out, n_in], on the weight's device
    x = gather_rows(packed, ids)                # rows ids of it: float32 [T, n_in], one launch

A prefill chunk multiplies many tokens by each weight matrix: torch's GEMM on the tensor cores
does that far faster than a GEMV per 16 rows, but it needs the matrix in f16. The engine
dequantizes one matrix at a time into a transient buffer and keeps nothing. On a GPU, the block
formats go through this module's one-pass kernel: each weight read once (its 4.5 or 6.6 bits)
and written once (16 bits); in torch's elementwise ops (dequant_torch.py, MXFP4 and the CPU)
that took ~8 full-size float32 passes per weight (200 ms of a 512-token prefill of an 8B Q4_K_M
on an H100). A decode step's token embedding is the same kernel over the selected rows only:
one launch where an index_select per plane and the torch formulas took ~25.

PackedWeight's planes (kernels/ggml_formats.py) are row-major over blocks, and so is the
output, so block s = row * blocks + block is the same flat index in every plane: a program
takes SB blocks and writes their values (256 for the K-quants, 32 for the others). Gathering,
output block s reads the source block ids[s // blocks] * blocks + s % blocks.

    Q4_K  value i of a super-block: chunk c = i // 64, half h = (i // 32) % 2, lane l = i % 32;
          code = nibble h of qs[32c + l] (Q5_K: | bit 2c + h of qh[l] << 4); sub-block j = 2c + h
          with ggml's 6-bit (scale, min) pair j (gemv_kquants.scale_min_k4);
          w = d * sc_j * code - dmin * m_j
    Q6_K  half h = i // 128, quarter q = (i // 32) % 4, lane l = i % 32:
          code = (nibble q // 2 of ql[64h + 32(q % 2) + l]) | (2 bits 2q.. of qh[32h + l]) << 4
          w = d * scales[8h + 2q + l // 16] * (code - 32)
    Q4_0 / Q4_1 / Q5_0 / Q5_1  code i = nibble i // 16 of qs[i % 16] (Q5: | bit i of qh << 4);
          w = d * (code - 8 or 16), or d * code + m
    Q8_0  w = d * qs[i]

The math is ggml's (dequantize_row_q4_K etc.); the oracle is gguf.quants.dequantize
(tests/kernels/test_dequant.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.availability import require
from kernels.dequant_torch import PLANES, block_values
from kernels.errors import UnsupportedTensor
from kernels.gemv_kquants import scale_min_k4

_VALUES_PER_PROGRAM = 2048
# the formats the kernel decodes, and their planes in the order it takes them
_KERNEL_PLANES = {
    "Q4_0": ("d", "qs"),
    "Q4_1": ("d", "m", "qs"),
    "Q5_0": ("d", "qh", "qs"),
    "Q5_1": ("d", "m", "qh", "qs"),
    "Q8_0": ("d", "qs"),
    "Q4_K": ("d", "dmin", "scales", "qs"),
    "Q5_K": ("d", "dmin", "scales", "qs", "qh"),
    "Q6_K": ("d", "scales", "ql", "qh"),
}
FORMATS = tuple(_KERNEL_PLANES)
_FLOATS = ("F32", "F16", "BF16")


@triton.jit
def _q4_k_q5_k_values(d_ptr, dmin_ptr, scales_ptr, qs_ptr, qh_ptr, s, mask, HAS_QH: tl.constexpr):
    i = tl.arange(0, 256)
    c = i // 64
    h = (i // 32) % 2
    lane = i % 32
    q = tl.load(qs_ptr + s[:, None] * 128 + (c * 32 + lane)[None, :], mask=mask, other=0)
    code = tl.where(h[None, :] == 0, q & 15, q >> 4).to(tl.int32)
    if HAS_QH:
        qh = tl.load(qh_ptr + s[:, None] * 32 + lane[None, :], mask=mask, other=0).to(tl.int32)
        code = code | (((qh >> (2 * c + h)[None, :]) & 1) << 4)
    sc, mn = scale_min_k4(scales_ptr + s[:, None] * 12, (2 * c + h)[None, :], mask)
    d = tl.load(d_ptr + s[:, None], mask=mask, other=0.0).to(tl.float32)
    dmin = tl.load(dmin_ptr + s[:, None], mask=mask, other=0.0).to(tl.float32)
    return d * sc * code.to(tl.float32) - dmin * mn


@triton.jit
def _q6_k_values(d_ptr, scales_ptr, ql_ptr, qh_ptr, s, mask):
    i = tl.arange(0, 256)
    h = i // 128
    quarter = (i // 32) % 4
    lane = i % 32
    ql = tl.load(
        ql_ptr + s[:, None] * 128 + (64 * h + 32 * (quarter % 2) + lane)[None, :],
        mask=mask,
        other=0,
    ).to(tl.int32)
    qh = tl.load(qh_ptr + s[:, None] * 64 + (32 * h + lane)[None, :], mask=mask, other=0)
    low = tl.where((quarter // 2)[None, :] == 0, ql & 15, ql >> 4)
    high = (qh.to(tl.int32) >> (2 * quarter)[None, :]) & 3
    code = ((low | (high << 4)) - 32).to(tl.float32)
    scale_idx = (8 * h + 2 * quarter + lane // 16)[None, :]
    sc = tl.load(scales_ptr + s[:, None] * 16 + scale_idx, mask=mask, other=0).to(tl.float32)
    d = tl.load(d_ptr + s[:, None], mask=mask, other=0.0).to(tl.float32)
    return d * sc * code


@triton.jit
def _block32_values(
    d_ptr, m_ptr, qh_ptr, qs_ptr, s, mask,
    Q8: tl.constexpr, HAS_MIN: tl.constexpr, HAS_QH: tl.constexpr,
):  # fmt: skip
    i = tl.arange(0, 32)
    d = tl.load(d_ptr + s[:, None], mask=mask, other=0.0).to(tl.float32)
    if Q8:
        q = tl.load(qs_ptr + s[:, None] * 32 + i[None, :], mask=mask, other=0)
        return d * q.to(tl.float32)
    byte = tl.load(qs_ptr + s[:, None] * 16 + (i % 16)[None, :], mask=mask, other=0)
    code = tl.where((i < 16)[None, :], byte & 15, byte >> 4).to(tl.int32)
    if HAS_QH:
        qh = tl.load(qh_ptr + s[:, None], mask=mask, other=0)
        code = code | (((qh >> i[None, :]) & 1) << 4)
    if HAS_MIN:
        return d * code.to(tl.float32) + tl.load(m_ptr + s[:, None], mask=mask, other=0.0).to(
            tl.float32
        )
    return d * (code - (16 if HAS_QH else 8)).to(tl.float32)


@triton.jit
def _blocks_kernel(
    p0, p1, p2, p3, p4, ids_ptr, out_ptr, S, blocks,
    FMT: tl.constexpr, GATHER: tl.constexpr, SB: tl.constexpr, BS: tl.constexpr,
):  # fmt: skip
    """Output blocks s of SB at a time; p0.. are the format's planes in _KERNEL_PLANES' order."""
    s = tl.program_id(0) * SB + tl.arange(0, SB)
    valid = s < S
    if GATHER:
        src = tl.load(ids_ptr + s // blocks, mask=valid, other=0).to(tl.int64) * blocks + (
            s % blocks
        )
    else:
        src = s.to(tl.int64)
    mask = valid[:, None]
    if FMT == "Q4_K":
        w = _q4_k_q5_k_values(p0, p1, p2, p3, p3, src, mask, False)
    elif FMT == "Q5_K":
        w = _q4_k_q5_k_values(p0, p1, p2, p3, p4, src, mask, True)
    elif FMT == "Q6_K":
        w = _q6_k_values(p0, p1, p2, p3, src, mask)
    elif FMT == "Q8_0":
        w = _block32_values(p0, p0, p0, p1, src, mask, True, False, False)
    elif FMT == "Q4_0":
        w = _block32_values(p0, p0, p0, p1, src, mask, False, False, False)
    elif FMT == "Q4_1":
        w = _block32_values(p0, p1, p0, p2, src, mask, False, True, False)
    elif FMT == "Q5_0":
        w = _block32_values(p0, p0, p1, p2, src, mask, False, False, True)
    else:  # Q5_1
        w = _block32_values(p0, p1, p2, p3, src, mask, False, True, True)
    i = tl.arange(0, BS)
    tl.store(out_ptr + s[:, None].to(tl.int64) * BS + i[None, :],
             w.to(out_ptr.dtype.element_ty), mask=mask)  # fmt: skip


def _launch(w, ids: torch.Tensor | None, n_rows: int, dtype: torch.dtype) -> torch.Tensor:
    name = w.fmt.name
    if name not in _KERNEL_PLANES:
        raise UnsupportedTensor(f"{name}: only {', '.join(FORMATS)} have a dequantize kernel")
    require()
    planes = [w.planes[p] for p in _KERNEL_PLANES[name]]
    planes += [planes[0]] * (5 - len(planes))
    bs = w.fmt.block_size
    blocks = w.n_in // bs
    n_blocks = n_rows * blocks
    sb = _VALUES_PER_PROGRAM // bs
    out = torch.empty(n_rows, w.n_in, dtype=dtype, device=w.device)
    grid = (triton.cdiv(n_blocks, sb),)
    _blocks_kernel[grid](
        *planes, ids if ids is not None else planes[0], out, n_blocks, blocks,
        FMT=name, GATHER=ids is not None, SB=sb, BS=bs,
    )  # fmt: skip
    return out


def dequantize_blocks(w, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """A PackedWeight of one of FORMATS as [n_out, n_in] in `dtype`, on its device (the kernel)."""
    return _launch(w, None, w.n_out, dtype)


def gather_rows(w, ids: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Rows `ids` (int, on the weight's device) of a PackedWeight as [len(ids), n_in] in `dtype`:
    one launch for FORMATS (the kernel reads only those rows' blocks), an index_select for the
    float formats, the torch formulas over the selected planes for the rest (MXFP4)."""
    ids = ids.reshape(-1)
    name = w.fmt.name
    if name in _KERNEL_PLANES and set(w.planes) == PLANES[name]:
        return _launch(w, ids, ids.numel(), dtype)
    planes = {p: plane.index_select(0, ids) for p, plane in w.planes.items()}
    return dequantize(type(w)(w.fmt, ids.numel(), w.n_in, planes), dtype)


def dequantize(w, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """Any PackedWeight as [n_out, n_in] in `dtype` on its device (the module docstring); planes
    other than the format's known ones raise UnsupportedTensor (the caller's slow host path,
    `PackedWeight.dequantize()`, still works)."""
    name = w.fmt.name
    planes = w.planes
    if set(planes) != PLANES.get(name, ()):
        raise UnsupportedTensor(f"{name} planes {sorted(planes)}: no device dequantizer")
    if name in _FLOATS:
        return planes["w"].reshape(w.n_out, w.n_in).to(dtype)
    if w.device.type == "cuda" and name in _KERNEL_PLANES:
        return dequantize_blocks(w, dtype)
    n, blocks = w.n_out, w.n_in // w.fmt.block_size
    return block_values(name, planes, n, blocks).reshape(n, w.n_in).to(dtype)
