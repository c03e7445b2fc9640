"""quant_matmul, quantize_activation and the prefill dequantizer at Llama-3-8B's shapes, as rows
of the one results schema (results.py). Bytes moved: the GGUF weight bytes (unchanged by the
planes) plus x and y."""

from __future__ import annotations

import dataclasses
import math

import torch

from benchmarks.kernels.results import Row, timed_rows
from benchmarks.kernels.timing import L2_DEFEAT_BYTES, time_calls
from kernels.act_quant import quantize_activation
from kernels.dequant import dequantize
from kernels.gemv import default_config, quant_matmul
from kernels.packed_weight import PackedWeight
from kernels.reference import random_weight_bytes


def _copies(w: PackedWeight) -> list[PackedWeight]:
    """w and enough copies of its planes that the L2 cannot hold them all."""
    n = max(2, math.ceil(L2_DEFEAT_BYTES / w.nbytes))
    planes = [{k: p.clone() for k, p in w.planes.items()} for _ in range(n - 1)]
    return [w, *(dataclasses.replace(w, planes=p) for p in planes)]


def _weights(fmt: str, n_out: int, n_in: int) -> list[PackedWeight]:
    w = PackedWeight.from_gguf(random_weight_bytes(fmt, n_out, n_in), fmt, (n_out, n_in))
    return _copies(w)


def takes_8_bit_x(fmt: str, rows: int) -> bool:
    """Whether the engine hands this GEMV its x already in 8 bits (the integer path of
    default_config): the x-shared figure is then the engine's."""
    return default_config(fmt, rows).path == "dp4a"


def quant_matmul_rows(fmt: str, n_out: int, n_in: int, rows: int, copy_bw: float) -> list[Row]:
    """Provider "hearth": each call quantizes its own x where it takes the integer path;
    "hearth x8": x given in 8 bits (quantized once outside the timed calls, as the engine's
    norm or SwiGLU writes it), the GEMV as the engine runs it."""
    weights = _weights(fmt, n_out, n_in)
    x = torch.randn(rows, n_in, dtype=torch.float16, device="cuda")
    moved = weights[0].nbytes + x.numel() * 2 + rows * n_out * 2
    shape = f"{n_out}x{n_in} rows={rows}"
    out = []
    providers = [("hearth", None)]
    if takes_8_bit_x(fmt, rows):
        providers.append(("hearth x8", quantize_activation(x)))
    for provider, quantized in providers:

        def run(quantized=quantized) -> None:
            for wi in weights:
                quant_matmul(x, wi, quantized=quantized)

        seconds = time_calls(run) / len(weights)
        out += timed_rows("quant_matmul", shape, fmt, provider, seconds, moved, copy_bw)
    return out


def cublas_rows(n_out: int, n_in: int, rows: int, copy_bw: float) -> list[Row]:
    """torch's own f16 matmul (cuBLAS), the baseline for F16 weights."""
    n = max(2, math.ceil(L2_DEFEAT_BYTES / (n_out * n_in * 2)))
    weights = [torch.randn(n_out, n_in, dtype=torch.float16, device="cuda") for _ in range(n)]
    x = torch.randn(rows, n_in, dtype=torch.float16, device="cuda")

    def run() -> None:
        for wi in weights:
            torch.matmul(x, wi.t())

    seconds = time_calls(run) / n
    moved = n_out * n_in * 2 + x.numel() * 2 + rows * n_out * 2
    shape = f"{n_out}x{n_in} rows={rows}"
    return timed_rows("quant_matmul", shape, "F16", "cublas", seconds, moved, copy_bw)


def quantize_activation_rows(n_in: int, copy_bw: float) -> list[Row]:
    """One row of x to 8 bits: 20 calls a graph replay (one alone times the replay's latency)."""
    x = torch.randn(1, n_in, dtype=torch.float16, device="cuda")

    def run() -> None:
        for _ in range(20):
            quantize_activation(x)

    seconds = time_calls(run) / 20
    moved = n_in * 2 + n_in + n_in // 32 * 4 + n_in // 16 * 4  # x, words, scales, sums
    return timed_rows("quantize_activation", f"1x{n_in}", "f16", "hearth", seconds, moved, copy_bw)


def dequantize_rows(fmt: str, n_out: int, n_in: int, copy_bw: float) -> list[Row]:
    """A matrix to f16 on the device, as a prefill chunk's GEMM gets it."""
    weights = _weights(fmt, n_out, n_in)

    def run() -> None:
        for wi in weights:
            dequantize(wi, torch.float16)

    seconds = time_calls(run) / len(weights)
    moved = weights[0].nbytes + n_out * n_in * 2
    return timed_rows("dequantize", f"{n_out}x{n_in}", fmt, "hearth", seconds, moved, copy_bw)
