"""Weights dequantized with torch where they live (the GPU), for prefill's GEMM and MoE experts.

A prefill chunk of many tokens is a matrix product, which torch's GEMM (cuBLAS on the tensor
cores) does far faster than a GEMV kernel run once per 16 rows. So a chunk dequantizes each
weight matrix into a transient f16 matrix, multiplies, and drops it: the model stays quantized.
`PackedWeight.dequantize()` goes through the host (gguf's numpy dequantizers; for checks), far
too slow for that, hence these torch versions of ggml's dequantize_row_* over PackedWeight's
planes (one plane per block field, [n_out, blocks * field elements]; kernels/ggml_formats.py).

    w16 = dequantize(packed, torch.float16)     # [n_out, n_in]
    w = dequantize_mxfp4(raw, n_in)             # MXFP4 blocks as stored: [..., n_in] float32

MXFP4 (ggml type 39, gpt-oss's experts) has no PackedWeight format here; `dequantize_mxfp4`
reads its blocks as the file stores them: 17 bytes per 32 weights, one E8M0 exponent byte e
and 16 bytes of E2M1 codes, weight j (j < 16) in the low nibble of byte j and weight j + 16 in
its high nibble; w = kvalues_mxfp4[code] * 2^(e - 128), where ggml's table holds twice the
E2M1 values (0, 1, 2, 3, 4, 6, 8, 12 and their negatives) and the scale is halved to match
(ggml_e8m0_to_fp32_half; dequantize_row_mxfp4 in ggml-quants.c).

On a GPU, Q4_K and Q6_K (what a Q4_K_M file is made of) go through kernels/dequant.py's one-pass
kernel instead: these torch versions make about eight full-size float32 passes per weight,
200 ms of a 512-token prefill of an 8B model on an H100. The block math is ggml's
(ggml-quants.c, dequantize_row_q4_K etc.); the tests check every format against gguf's numpy
dequantizers. A format whose planes are not the ones expected here
(kernels/ may change its re-layout) raises `UnsupportedTensor`, and the caller falls back to
the slow host path rather than computing garbage.
"""

from __future__ import annotations

import torch

from kernels.errors import UnsupportedTensor

# The planes each format is expected to have (kernels/ggml_formats.py, as of this module).
_PLANES = {
    "F32": {"w"},
    "F16": {"w"},
    "BF16": {"w"},
    "Q4_0": {"d", "qs"},
    "Q4_1": {"d", "m", "qs"},
    "Q5_0": {"d", "qh", "qs"},
    "Q5_1": {"d", "m", "qh", "qs"},
    "Q8_0": {"d", "qs"},
    "Q4_K": {"d", "dmin", "scales", "qs"},
    "Q5_K": {"d", "dmin", "scales", "qh", "qs"},
    "Q6_K": {"d", "scales", "ql", "qh"},
}


def dequantize(w, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """[n_out, n_in] in `dtype` on the weight's device (see the module docstring)."""
    name = w.fmt.name
    planes = w.planes
    if set(planes) != _PLANES.get(name, ()):
        raise UnsupportedTensor(f"{name} planes {sorted(planes)}: no device dequantizer")
    if name in ("F32", "F16", "BF16"):
        return planes["w"].reshape(w.n_out, w.n_in).to(dtype)
    if w.device.type == "cuda" and name in ("Q4_K", "Q6_K"):
        from kernels.dequant import dequantize_k_quant

        return dequantize_k_quant(w, dtype)
    n, blocks = w.n_out, w.n_in // w.fmt.block_size
    if name in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"):
        values = _small_block_values(name, planes, n, blocks)
    elif name in ("Q4_K", "Q5_K"):
        values = _q4_k_q5_k_values(planes, n, blocks)
    else:
        values = _q6_k_values(planes, n, blocks)
    return values.reshape(n, w.n_in).to(dtype)


MXFP4_TYPE = 39  # ggml's GGML_TYPE_MXFP4
MXFP4_BLOCK = 32  # weights per block
MXFP4_BLOCK_BYTES = 17
# twice the E2M1 values, indexed by the 4-bit code (ggml's kvalues_mxfp4)
MXFP4_VALUES = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)


def dequantize_mxfp4(raw: torch.Tensor, n_in: int) -> torch.Tensor:
    """MXFP4 blocks as stored (uint8 [..., n_in / 32 * 17]) as float32 [..., n_in], on raw's
    device (see the module docstring)."""
    if n_in % MXFP4_BLOCK:
        raise UnsupportedTensor(f"MXFP4 rows of {n_in} weights are not whole blocks of 32")
    lead = raw.shape[:-1]
    blocks = raw.reshape(*lead, n_in // MXFP4_BLOCK, MXFP4_BLOCK_BYTES)
    # 2^(e - 128) by building the float's bits: exponent field e - 1 for e >= 2; e = 0 and 1
    # are the subnormals 2^-128 and 2^-127 (bit 21 or 22 of the mantissa)
    e = blocks[..., 0].to(torch.int32)
    bits = torch.where(e < 2, torch.full_like(e, 0x00200000) << e, (e - 1) << 23)
    scale = bits.view(torch.float32).unsqueeze(-1)
    codes = blocks[..., 1:].to(torch.int32)
    codes = torch.cat((codes & 15, codes >> 4), dim=-1)  # weights j, then j + 16
    table = torch.tensor(MXFP4_VALUES, dtype=torch.float32, device=raw.device)
    return (table[codes] * scale).reshape(*lead, n_in)


def _nibbles(qs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    q = qs.to(torch.int32)
    return q & 15, q >> 4


def _small_block_values(name: str, p: dict, n: int, blocks: int) -> torch.Tensor:
    """Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 as float32 [n, blocks, 32]."""
    d = p["d"].float().view(n, blocks, 1)
    if name == "Q8_0":
        return p["qs"].view(n, blocks, 32).float() * d
    low, high = _nibbles(p["qs"].view(n, blocks, 16))  # weights j and j + 16
    codes = torch.cat((low, high), dim=-1)
    if name in ("Q5_0", "Q5_1"):  # bit j of qh is the fifth bit of weight j
        bits = torch.arange(32, device=codes.device, dtype=torch.int32)
        qh = p["qh"].view(n, blocks, 1)
        codes = codes | (((qh >> bits) & 1) << 4)
    if name in ("Q4_0", "Q5_0"):
        offset = 8 if name == "Q4_0" else 16
        return (codes - offset).float() * d
    return codes.float() * d + p["m"].float().view(n, blocks, 1)


def _k_scales_mins(scales: torch.Tensor, n: int, blocks: int):
    """The eight 6-bit (scale, min) pairs of each super-block (ggml's get_scale_min_k4):
    float32 [n, blocks, 8] each."""
    q = scales.view(n, blocks, 12).to(torch.int32)
    low_sc, low_m = q[..., 0:4] & 63, q[..., 4:8] & 63
    high_sc = (q[..., 8:12] & 15) | ((q[..., 0:4] >> 6) << 4)
    high_m = (q[..., 8:12] >> 4) | ((q[..., 4:8] >> 6) << 4)
    return torch.cat((low_sc, high_sc), -1).float(), torch.cat((low_m, high_m), -1).float()


def _q4_k_q5_k_values(p: dict, n: int, blocks: int) -> torch.Tensor:
    """Q4_K/Q5_K as float32 [n, blocks, 256]: chunk c of 64 weights is sub-blocks 2c (low
    nibbles of qs[32c:32c+32]) and 2c+1 (high nibbles); Q5_K's fifth bits are bits 2c and
    2c+1 of qh[l]."""
    sc, m = _k_scales_mins(p["scales"], n, blocks)
    d = p["d"].float().view(n, blocks, 1)
    dmin = p["dmin"].float().view(n, blocks, 1)
    low, high = _nibbles(p["qs"].view(n, blocks, 4, 32))
    codes = torch.stack((low, high), dim=3)  # [n, blocks, chunk, 2, 32] = sub-block 2c + h
    if "qh" in p:
        qh = p["qh"].view(n, blocks, 1, 1, 32).to(torch.int32)
        shift = torch.arange(8, device=qh.device, dtype=torch.int32).view(1, 1, 4, 2, 1)
        codes = codes | (((qh >> shift) & 1) << 4)
    codes = codes.reshape(n, blocks, 8, 32).float()
    values = codes * (d * sc).unsqueeze(-1) - (dmin * m).unsqueeze(-1)
    return values.reshape(n, blocks, 256)


def _q6_k_values(p: dict, n: int, blocks: int) -> torch.Tensor:
    """Q6_K as float32 [n, blocks, 256]: per half h (128 weights) and l < 32, four weights
    l, l+32, l+64, l+96 from ql[64h + l] / ql[64h + 32 + l] nibbles and the 2-bit fields of
    qh[32h + l]; one int8 scale per 16 weights."""
    ql = p["ql"].view(n, blocks, 2, 2, 32).to(torch.int32)  # [.., half, which 32, l]
    qh = p["qh"].view(n, blocks, 2, 1, 32).to(torch.int32)
    low = torch.stack((ql & 15, ql >> 4), dim=3)  # [.., half, nibble, which 32, l]
    shift = (2 * torch.arange(4, device=ql.device, dtype=torch.int32)).view(1, 1, 1, 2, 2, 1)
    high = (qh.unsqueeze(3) >> shift) & 3  # quarter q = 2 * nibble + which: shift 2q
    codes = (low | (high << 4)) - 32  # [n, blocks, half, 4 quarters, 32]
    scales = p["scales"].view(n, blocks, 2, 4, 2, 1).float()  # 16-weight runs per quarter
    d = p["d"].float().view(n, blocks, 1, 1, 1, 1)
    values = codes.view(n, blocks, 2, 4, 2, 16).float() * scales * d
    return values.reshape(n, blocks, 256)
