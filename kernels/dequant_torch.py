"""ggml's dequantize_row_* for every format PackedWeight packs, in torch over its planes (one
plane per block field, [n_out, blocks * field elements]; kernels/ggml_formats.py): the device
path of `kernels.dequant.dequantize` where the one-pass kernel has no format (and the CPU).

These make several full-size float32 passes per weight, so the K-quants that a Q4_K_M file is
made of take kernels/dequant.py's kernel on a GPU instead. The block math is ggml's
(ggml-quants.c, dequantize_row_q4_K etc.); the tests check every format against gguf's numpy
dequantizers.

MXFP4 (ggml type 39, gpt-oss's experts): `block_values` over PackedWeight's planes (e, qs),
and `dequantize_mxfp4` over the blocks as the file stores them: 17 bytes per 32 weights, one
E8M0 exponent byte e and 16 bytes of E2M1 codes, weight j (j < 16) in the low nibble of byte j
and weight j + 16 in its high nibble; w = kvalues_mxfp4[code] * 2^(e - 128), where ggml's
table holds twice the E2M1 values (0, 1, 2, 3, 4, 6, 8, 12 and their negatives) and the scale
is halved to match (ggml_e8m0_to_fp32_half; dequantize_row_mxfp4 in ggml-quants.c).

    w = dequantize_mxfp4(raw, n_in)             # MXFP4 blocks as stored: [..., n_in] float32
"""

from __future__ import annotations

import torch

from kernels.errors import UnsupportedTensor

# The planes each format has (kernels/ggml_formats.py): a re-layout there that this module does
# not know raises UnsupportedTensor rather than computing garbage
PLANES = {
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
    "MXFP4": {"e", "qs"},
}


def block_values(name: str, planes: dict, n: int, blocks: int) -> torch.Tensor:
    """A block format's weights as float32 [n, blocks, block size]."""
    if name in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"):
        return _small_block_values(name, planes, n, blocks)
    if name in ("Q4_K", "Q5_K"):
        return _q4_k_q5_k_values(planes, n, blocks)
    if name == "MXFP4":
        e = planes["e"].reshape(n, blocks, 1)
        codes = planes["qs"].reshape(n, blocks, 16)
        return _mxfp4_values(e, codes)
    return _q6_k_values(planes, n, blocks)


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
    return _mxfp4_values(blocks[..., :1], blocks[..., 1:]).reshape(*lead, n_in)


def _mxfp4_values(e: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Exponent bytes [..., 1] and code bytes [..., 16] -> float32 [..., 32]."""
    # 2^(e - 128) by building the float's bits: exponent field e - 1 for e >= 2; e = 0 and 1
    # are the subnormals 2^-128 and 2^-127 (bit 21 or 22 of the mantissa)
    e = e.to(torch.int32)
    bits = torch.where(e < 2, torch.full_like(e, 0x00200000) << e, (e - 1) << 23)
    scale = bits.view(torch.float32)
    codes = codes.to(torch.int32)
    codes = torch.cat((codes & 15, codes >> 4), dim=-1)  # weights j, then j + 16
    table = torch.tensor(MXFP4_VALUES, dtype=torch.float32, device=codes.device)
    return table[codes] * scale


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
