"""GEMV at Llama-3-8B's shapes, each GGUF format, 1 / 4 / 16 input rows."""

from __future__ import annotations

import dataclasses
import math

import torch

from benchmarks.kernels.timing import L2_DEFEAT_BYTES, time_calls
from kernels.act_quant import quantize_activation
from kernels.gemv import GemvConfig, default_config, quant_matmul
from kernels.packed_weight import PackedWeight
from kernels.reference import random_weight_bytes

# (name, n_out, n_in) of one Llama-3-8B layer
LLAMA3_8B = [
    ("attn_q/o 4096x4096", 4096, 4096),
    ("attn_k/v 1024x4096", 1024, 4096),
    ("ffn_gate/up 14336x4096", 14336, 4096),
    ("ffn_down 4096x14336", 4096, 14336),
]
FORMATS = ["Q4_K", "Q6_K", "Q5_K", "Q8_0", "Q4_0", "Q4_1", "F16"]


def _copies(w: PackedWeight) -> list[PackedWeight]:
    n = max(2, math.ceil(L2_DEFEAT_BYTES / w.nbytes))
    planes = [{k: p.clone() for k, p in w.planes.items()} for _ in range(n - 1)]
    return [w, *(dataclasses.replace(w, planes=p) for p in planes)]


def measure(fmt: str, n_out: int, n_in: int, rows: int, copy_bw: float,
            config: GemvConfig | None = None, weights: list[PackedWeight] | None = None,
            share_x: bool = False) -> dict:  # fmt: skip
    """share_x: x quantized once outside the timed calls (quant_matmul(quantized=)), as an
    engine does for the projections that read one x: the GEMV's own time."""
    if weights is None:
        w = PackedWeight.from_gguf(random_weight_bytes(fmt, n_out, n_in), fmt, (n_out, n_in))
        weights = _copies(w)
    w = weights[0]
    x = torch.randn(rows, n_in, dtype=torch.float16, device="cuda")
    quantized = quantize_activation(x) if share_x else None

    def run() -> None:
        for wi in weights:
            quant_matmul(x, wi, config, quantized=quantized)

    seconds = time_calls(run) / len(weights)
    moved = w.nbytes + x.numel() * 2 + rows * n_out * 2
    return {
        "format": fmt, "n_out": n_out, "n_in": n_in, "rows": rows,
        "us": seconds * 1e6, "gb_s": moved / seconds / 1e9, "of_copy": moved / seconds / copy_bw,
        "bits_per_weight": w.fmt.bits_per_weight,
    }  # fmt: skip


def cublas_f16(n_out: int, n_in: int, rows: int, copy_bw: float) -> dict:
    """torch's own f16 matmul (cuBLAS), the baseline for F16 weights."""
    n = max(2, math.ceil(L2_DEFEAT_BYTES / (n_out * n_in * 2)))
    weights = [torch.randn(n_out, n_in, dtype=torch.float16, device="cuda") for _ in range(n)]
    x = torch.randn(rows, n_in, dtype=torch.float16, device="cuda")

    def run() -> None:
        for wi in weights:
            torch.matmul(x, wi.t())

    seconds = time_calls(run) / n
    moved = n_out * n_in * 2 + x.numel() * 2 + rows * n_out * 2
    return {
        "format": "F16 (torch/cuBLAS)", "n_out": n_out, "n_in": n_in, "rows": rows,
        "us": seconds * 1e6, "gb_s": moved / seconds / 1e9, "of_copy": moved / seconds / copy_bw,
        "bits_per_weight": 16.0,
    }  # fmt: skip


def sweep(fmt: str, n_out: int, n_in: int, copy_bw: float) -> list[dict]:
    """Batch-1 tile shapes around the default, best first."""
    base = default_config(fmt, 1)
    results = []
    for block_n in (4, 8, 16):
        for scale in (1, 2):
            for warps in (4, 8):
                tile = max(1, int(base.blocks_per_tile * scale))
                cfg = GemvConfig(block_n, tile, 1, num_warps=warps, num_stages=base.num_stages)
                try:
                    r = measure(fmt, n_out, n_in, 1, copy_bw, cfg)
                except Exception as error:  # a shape Triton cannot compile: note it, go on
                    print(f"  {cfg}: failed ({type(error).__name__})")
                    continue
                r["config"] = dataclasses.asdict(cfg)
                results.append(r)
    return sorted(results, key=lambda r: r["us"])


# The batch-1 variants of the integer path beside the float path it replaces (docs/kernels.md):
# the float kernel, the two first tries, the measured best (the default, 4x16), and untried
# neighbours of it (fewer threads per program or more rows: fewer instructions per weight in
# their SASS, more registers; benchmarks/kernels/gemv_sass.py) and the pipelined kernels, to
# settle on the next run.
VARIANTS = {
    "float 8x4": GemvConfig(8, 4, 1),
    "dp4a fused 16x2": GemvConfig(16, 2, 1, num_stages=3, path="dp4a"),
    "dp4a preq 16x2": GemvConfig(16, 2, 1, num_stages=3, path="dp4a", prequantize=True),
    "dp4a preq 4x16": GemvConfig(4, 16, 1, num_stages=3, path="dp4a", prequantize=True),
    "dp4a preq 8x8": GemvConfig(8, 8, 1, num_stages=3, path="dp4a", prequantize=True),
    "dp4a preq 4x16 w2": GemvConfig(4, 16, 1, 2, num_stages=3, path="dp4a", prequantize=True),
    "dp4a preq 2x16 w2": GemvConfig(2, 16, 1, 2, num_stages=3, path="dp4a", prequantize=True),
    "dp4a preq 8x16": GemvConfig(8, 16, 1, num_stages=3, path="dp4a", prequantize=True),
    # gemv_dp4a_pipelined.py: weights before x (programmatic dependent launch), prefetch
    "dp4a pipe 4x16": GemvConfig(
        4, 16, 1, num_stages=3, path="dp4a", prequantize=True, pipelined=True
    ),
    "dp4a pipe 8x8": GemvConfig(
        8, 8, 1, num_stages=3, path="dp4a", prequantize=True, pipelined=True
    ),
}


# (name, config, input rows, x quantized outside the timing): the default with x shared, and
# 4 / 16 rows on the float path (tl.dot) beside the integer path, one program per input row.
EXTRA_VARIANTS = [
    ("dp4a preq 4x16 x shared", VARIANTS["dp4a preq 4x16"], 1, True),
    ("float tl.dot, 4 rows", None, 4, False),
    ("dp4a preq 4x16, 4 rows", VARIANTS["dp4a preq 4x16"], 4, False),
    ("float tl.dot, 16 rows", None, 16, False),
    ("dp4a preq 4x16, 16 rows", VARIANTS["dp4a preq 4x16"], 16, False),
]


def variants(fmt: str, n_out: int, n_in: int, copy_bw: float) -> list[dict]:
    """Each of VARIANTS (1 input row) and EXTRA_VARIANTS on one weight (and its copies)."""
    w = PackedWeight.from_gguf(random_weight_bytes(fmt, n_out, n_in), fmt, (n_out, n_in))
    weights = _copies(w)
    cases = [(name, cfg, 1, False) for name, cfg in VARIANTS.items()] + EXTRA_VARIANTS
    results = []
    for name, cfg, rows, share_x in cases:
        try:
            r = measure(fmt, n_out, n_in, rows, copy_bw, cfg, weights, share_x)
        except Exception as error:  # report it and go on to the next variant
            print(f"  {fmt} {n_out}x{n_in} {name}: failed: {error!r}"[:300])
            continue
        r["variant"] = name
        results.append(r)
    return results


def activation_quantize_us(n_in: int) -> float:
    """quantize_activation alone (the prequantized variants' extra launch), one row."""
    x = torch.randn(1, n_in, dtype=torch.float16, device="cuda")

    def run() -> None:  # 20 calls a graph replay: one alone would time the replay's latency
        for _ in range(20):
            quantize_activation(x)

    return time_calls(run) / 20 * 1e6
