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


def takes_8_bit_x(fmt: str, rows: int) -> bool:
    """Whether the engine hands this GEMV its x already in 8 bits (the integer path of
    default_config): measure(share_x=True) is then the engine's figure."""
    return default_config(fmt, rows).path == "dp4a"


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


# The batch-1 variants of the integer path (docs/kernels.md): (name, config, input rows, x
# quantized outside the timed calls). "xs" (x shared): x arrives in 8 bits, as the engine
# gives it (the RMSNorm writes it, or one quantize_activation serves q/k/v): the GEMV's own
# time. Without it, each call also quantizes x in a launch of its own. The measured default of
# the last session (4x16), the engine's pipelined variant, and the new persistent ones.
_PREQ = GemvConfig(4, 16, 1, num_stages=3, path="dp4a", prequantize=True)
_PIPE = dataclasses.replace(_PREQ, pipelined=True)
_EARLY = dataclasses.replace(_PIPE, early_next=True)
_ONE_STEP = dataclasses.replace(_EARLY, one_step=True)
VARIANTS = [
    ("preq 4x16", _PREQ, 1, False),
    ("pipe 4x16", _PIPE, 1, False),
    ("preq 4x16 xs", _PREQ, 1, True),
    ("pipe 4x16 xs", _PIPE, 1, True),
    ("pipe early 4x16 xs", _EARLY, 1, True),
    ("pipe early 2x16 w2 xs", dataclasses.replace(_EARLY, block_n=2, num_warps=2), 1, True),
    ("onestep early 4x16", _ONE_STEP, 1, False),
    ("onestep early 4x16 xs", _ONE_STEP, 1, True),
    ("onestep early 4x8 xs", dataclasses.replace(_ONE_STEP, blocks_per_tile=8), 1, True),
    ("onestep early 4x16 w2 xs", dataclasses.replace(_ONE_STEP, num_warps=2), 1, True),
    ("onestep early 8x16 xs", dataclasses.replace(_ONE_STEP, block_n=8), 1, True),
    ("onestep early 8x16 w8 xs", dataclasses.replace(_ONE_STEP, block_n=8, num_warps=8), 1,
     True),
    ("persist4 4x16 xs", dataclasses.replace(_EARLY, programs_per_sm=4), 1, True),
    ("persist6 4x16 xs", dataclasses.replace(_EARLY, programs_per_sm=6), 1, True),
    ("persist2 8x16 w8 xs",
     dataclasses.replace(_EARLY, block_n=8, num_warps=8, programs_per_sm=2), 1, True),
    ("persist4 4x8 xs", dataclasses.replace(_EARLY, blocks_per_tile=8, programs_per_sm=4), 1,
     True),
]  # fmt: skip


def variants(fmt: str, n_out: int, n_in: int, copy_bw: float, names=None) -> list[dict]:
    """Each of VARIANTS (or those named) on one weight (and its copies), printed as measured
    (a run cut by its time limit keeps what it measured)."""
    w = PackedWeight.from_gguf(random_weight_bytes(fmt, n_out, n_in), fmt, (n_out, n_in))
    runs = [v for v in VARIANTS if not names or v[0] in names]
    return measure_each(fmt, n_out, n_in, copy_bw, _copies(w), runs)


def measure_each(fmt: str, n_out: int, n_in: int, copy_bw: float, weights, runs) -> list[dict]:
    """Each run (name, config, input rows, x shared) on the same weight copies, printed as
    measured; one that fails is reported and the next one goes on."""
    results = []
    for name, cfg, rows, share_x in runs:
        try:
            r = measure(fmt, n_out, n_in, rows, copy_bw, cfg, weights, share_x)
        except Exception as error:  # report it and go on to the next variant
            print(f"  {fmt} {n_out}x{n_in} {name}: failed: {error!r}"[:300], flush=True)
            continue
        r["variant"] = name
        print(f"{fmt:6} {name:24} {n_out}x{n_in:<7} {r['us']:8.1f} {r['gb_s']:7.0f} "
              f"{r['of_copy']:8.1%}", flush=True)  # fmt: skip
        results.append(r)
    return results


def activation_quantize_us(n_in: int) -> float:
    """quantize_activation alone (the prequantized variants' extra launch), one row."""
    x = torch.randn(1, n_in, dtype=torch.float16, device="cuda")

    def run() -> None:  # 20 calls a graph replay: one alone would time the replay's latency
        for _ in range(20):
            quantize_activation(x)

    return time_calls(run) / 20 * 1e6
