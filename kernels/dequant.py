"""K-quant weights (Q4_K, Q6_K) dequantized to f16 in one pass, for prefill's GEMM.

A prefill chunk multiplies many tokens by each weight matrix: torch's GEMM on the tensor cores
does that far faster than a GEMV per 16 rows, but it needs the matrix in f16. The engine
dequantizes one matrix at a time into a transient buffer (kernels/dequant_torch.py); done with
torch's elementwise ops that took ~8 full-size float32 passes per weight (200 ms of a 512-token
prefill of an 8B Q4_K_M on an H100). Here each weight is read once (its 4.5 or 6.6 bits) and
written once (16 bits).

PackedWeight's planes (kernels/ggml_formats.py) are row-major over super-blocks, and so is the
output, so super-block s = row * blocks + block is the same flat index in every plane: a
program takes SB super-blocks and writes their 256 values each.

    Q4_K  value i of a super-block: chunk c = i // 64, half h = (i // 32) % 2, lane l = i % 32;
          code = nibble h of qs[32c + l]; sub-block j = 2c + h with ggml's 6-bit (scale, min)
          pair j (get_scale_min_k4); w = d * sc_j * code - dmin * m_j
    Q6_K  half h = i // 128, quarter q = (i // 32) % 4, lane l = i % 32:
          code = (nibble q // 2 of ql[64h + 32(q % 2) + l]) | (2 bits 2q.. of qh[32h + l]) << 4
          w = d * scales[8h + 2q + l // 16] * (code - 32)

The math is ggml's (dequantize_row_q4_K, dequantize_row_q6_K); the oracle is
gguf.quants.dequantize (tests/kernels/test_dequant.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.availability import require
from kernels.errors import UnsupportedTensor

_SB = 8  # super-blocks per program: 2,048 values


@triton.jit
def _q4_k_kernel(d_ptr, dmin_ptr, scales_ptr, qs_ptr, out_ptr, S, SB: tl.constexpr):
    s = tl.program_id(0) * SB + tl.arange(0, SB)
    i = tl.arange(0, 256)
    mask = (s < S)[:, None]
    c = i // 64
    h = (i // 32) % 2
    lane = i % 32
    q = tl.load(qs_ptr + s[:, None] * 128 + (c * 32 + lane)[None, :], mask=mask, other=0)
    code = tl.where(h[None, :] == 0, q & 15, q >> 4).to(tl.float32)
    j = (2 * c + h)[None, :]
    base = scales_ptr + s[:, None] * 12
    low = j < 4
    b_j = tl.load(base + j, mask=mask, other=0)
    b_j4 = tl.load(base + j + 4, mask=mask, other=0)  # j + 4 < 12 for every j < 8
    b_jm4 = tl.load(base + tl.where(low, 0, j - 4), mask=mask, other=0)
    sc = tl.where(low, b_j & 63, (b_j4 & 15) | ((b_jm4 >> 6) << 4)).to(tl.float32)
    mn = tl.where(low, b_j4 & 63, (b_j4 >> 4) | ((b_j >> 6) << 4)).to(tl.float32)
    d = tl.load(d_ptr + s, mask=s < S, other=0.0).to(tl.float32)[:, None]
    dmin = tl.load(dmin_ptr + s, mask=s < S, other=0.0).to(tl.float32)[:, None]
    w = d * sc * code - dmin * mn
    tl.store(out_ptr + s[:, None] * 256 + i[None, :], w.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _q6_k_kernel(ql_ptr, qh_ptr, scales_ptr, d_ptr, out_ptr, S, SB: tl.constexpr):
    s = tl.program_id(0) * SB + tl.arange(0, SB)
    i = tl.arange(0, 256)
    mask = (s < S)[:, None]
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
    d = tl.load(d_ptr + s, mask=s < S, other=0.0).to(tl.float32)[:, None]
    w = d * sc * code
    tl.store(out_ptr + s[:, None] * 256 + i[None, :], w.to(out_ptr.dtype.element_ty), mask=mask)


FORMATS = ("Q4_K", "Q6_K")


def dequantize_k_quant(w, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """A Q4_K or Q6_K PackedWeight as [n_out, n_in] in `dtype`, on its device."""
    require()
    name = w.fmt.name
    if name not in FORMATS:
        raise UnsupportedTensor(f"{name}: only {', '.join(FORMATS)} have a dequantize kernel")
    p = w.planes
    n_super = w.n_out * (w.n_in // 256)
    out = torch.empty(w.n_out, w.n_in, dtype=dtype, device=w.device)
    grid = (triton.cdiv(n_super, _SB),)
    if name == "Q4_K":
        _q4_k_kernel[grid](p["d"], p["dmin"], p["scales"], p["qs"], out, n_super, SB=_SB)
    else:
        _q6_k_kernel[grid](p["ql"], p["qh"], p["scales"], p["d"], out, n_super, SB=_SB)
    return out
