"""The dense quantized GEMM (kernels/packed_gemm.py) beside the two paths KernelsOps.matmul had
for more than 16 rows, at Llama-3-8B's shapes and 16 to 512 rows:

    GEMV x16         kernels.gemv.quant_matmul in slices of 16 rows (a batch's decode step:
                     every weight read once per slice)
    dequant + torch  kernels.dequant.dequantize to f16, then torch's GEMM (a prefill chunk:
                     2 bytes a weight written and read again)
    quant GEMM       kernels.packed_gemm.quant_gemm, default_config (the blocks as stored,
                     decoded into f16 tiles for tl.dot)

    python -m benchmarks.kernels.quant_gemm [--rows 16,32,64,128,512] [--sweep] [--json PATH]

Each figure is a CUDA-graph replay over enough copies of the weight that the L2 cannot hold
them (timing.L2_DEFEAT_BYTES), divided by the copies. GB/s: the weight's stored bytes over the
time (the GEMV's and the GEMM's floor; the dequantize path moves more); TFLOP/s: 2 M N K over
the time; max_diff: the largest difference from the "dequant + torch" output over its largest
value. The closing lines say which path wins each (shape, rows) and where the thresholds of
engine/hearth/ops.py KernelsOps (QUANT_GEMM_MIN_ROWS, QUANT_GEMM_MAX_PREFILL_ROWS) would go
on these figures. --sweep: the GEMM's launch shapes in SWEEP at every case.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch
import triton

from benchmarks.kernels.gemv import _weights
from benchmarks.kernels.timing import cuda_banner, time_calls
from kernels.dequant import dequantize
from kernels.gemv import default_config as gemv_config
from kernels.gemv import quant_matmul
from kernels.packed_gemm import GemmConfig, default_config, quant_gemm, with_split

DEVICE = "cuda"

SHAPES = [  # (name, format, n_out, n_in)
    ("attn_q/o 4096x4096", "Q4_K", 4096, 4096),
    ("attn_k/v 1024x4096", "Q4_K", 1024, 4096),
    ("ffn_gate/up 14336x4096", "Q4_K", 14336, 4096),
    ("ffn_down 4096x14336", "Q6_K", 4096, 14336),
]
GEMV, DEQUANT, GEMM = "GEMV x16", "dequant + torch", "quant GEMM"
SWEEP = [
    GemmConfig(block_m=bm, block_n=bn, ng=ng, num_warps=nw)
    for bm, bn, ng, nw in (
        (32, 64, 2, 4), (128, 64, 2, 4), (64, 128, 2, 8), (128, 64, 2, 8), (128, 128, 2, 8),
        (64, 32, 4, 4),
    )
]  # fmt: skip


def gemv_slices(x: torch.Tensor, w) -> torch.Tensor:
    """What KernelsOps.matmul's "gemv_slices" path does: the GEMV on 16 rows at a time."""
    return torch.cat([
        quant_matmul(x[i : i + 16], w, gemv_config(w.fmt.name, min(16, x.shape[0] - i)))
        for i in range(0, x.shape[0], 16)
    ])  # fmt: skip


def dequant_gemm(x: torch.Tensor, w) -> torch.Tensor:
    """KernelsOps.matmul's "dequant" path: the matrix in f16 for torch's GEMM."""
    return x @ dequantize(w, torch.float16).T


def measure(name: str, fmt: str, n_out: int, n_in: int, row_counts, sweep=()) -> list[dict]:
    weights = _weights(fmt, n_out, n_in)
    w = weights[0]
    gen = torch.Generator(device=DEVICE).manual_seed(n_out + n_in)
    rows = []
    for m in row_counts:
        x = torch.randn(m, n_in, generator=gen, device=DEVICE).half()
        base = dequant_gemm(x, w).float()
        scale = max(base.abs().max().item(), 1e-30)
        paths = [
            (GEMV, gemv_slices, {}),
            (DEQUANT, dequant_gemm, {}),
            (GEMM, quant_gemm, {}),
        ]
        n_sm = 132  # off a GPU (the tests): an H100's
        if torch.cuda.is_available():
            n_sm = torch.cuda.get_device_properties(0).multi_processor_count
        configs = [with_split(c, m, n_out, n_in, n_sm) for c in sweep]
        if sweep:  # the default launch without its split of K: what the split is worth
            configs.append(dataclasses.replace(default_config(m, n_out, n_in, n_sm), split_k=1))
        for c in configs:
            if c.block_m <= max(16, triton.next_power_of_2(m)):
                shape = f"bm{c.block_m} bn{c.block_n} ng{c.ng} w{c.num_warps} k{c.split_k}"
                paths.append((f"  sweep {shape}", lambda x, w, c=c: quant_gemm(x, w, c), {}))
        for path, fn, extra in paths:
            try:
                out = fn(x, w).float()
                seconds = time_calls(lambda fn=fn, x=x: [fn(x, wi) for wi in weights])
            except Exception as exc:  # a launch shape that does not compile here: say so, go on
                print(f"{name} M={m} {path}: {type(exc).__name__}: {str(exc)[:160]}",
                      file=sys.stderr)  # fmt: skip
                continue
            seconds /= len(weights)
            rows.append({
                "shape": name, "fmt": fmt, "rows": m, "path": path, "us": seconds * 1e6,
                "gb_s": w.nbytes / seconds / 1e9, "tflop_s": 2 * m * n_out * n_in / seconds / 1e12,
                "max_diff": (out - base).abs().max().item() / scale, **extra,
            })  # fmt: skip
    return rows


def _table(rows: list[dict], header: bool = True) -> None:
    if header:
        print(f"{'shape':<24} {'fmt':<5} {'M':>4} {'path':<30} {'us':>9} {'GB/s':>7} "
              f"{'TFLOP/s':>8} {'max_diff':>9}")  # fmt: skip
    for r in rows:
        print(f"{r['shape']:<24} {r['fmt']:<5} {r['rows']:>4} {r['path']:<30} {r['us']:9.1f} "
              f"{r['gb_s']:7.0f} {r['tflop_s']:8.1f} {r['max_diff']:9.2e}")  # fmt: skip


def _verdicts(rows: list[dict]) -> None:
    """Per (shape, rows): the GEMM's time over each of the other two paths', and the row
    thresholds these figures give (every shape must agree)."""
    times = {(r["shape"], r["rows"], r["path"]): r["us"] for r in rows}
    print("\nquant GEMM time / other path's (below 1: the GEMM wins)")
    decode_wins: dict[int, bool] = {}
    prefill_wins: dict[int, bool] = {}
    for shape, m in sorted({(r["shape"], r["rows"]) for r in rows}, key=lambda k: (k[1], k[0])):
        gemm = times.get((shape, m, GEMM))
        gemv, deq = times.get((shape, m, GEMV)), times.get((shape, m, DEQUANT))
        if gemm is None or gemv is None or deq is None:
            continue
        print(f"  {shape:<24} M={m:<4} vs {GEMV}: {gemm / gemv:5.2f}   vs {DEQUANT}: "
              f"{gemm / deq:5.2f}")  # fmt: skip
        decode_wins[m] = decode_wins.get(m, True) and gemm < gemv
        prefill_wins[m] = prefill_wins.get(m, True) and gemm < deq
    first_decode = next((m for m in sorted(decode_wins) if m > 16 and decode_wins[m]), None)
    prefill = [m for m in sorted(prefill_wins) if prefill_wins[m]]
    print(
        f"decode steps: the GEMM beats the GEMV x16 on every shape from M = {first_decode} "
        "(KernelsOps.QUANT_GEMM_MIN_ROWS)"
    )
    print(
        f"prefill: the GEMM beats dequant + torch on every shape at M in {prefill} "
        "(KernelsOps.QUANT_GEMM_MAX_PREFILL_ROWS: the largest of a run from the smallest)"
    )
    sweeps = [r for r in rows if r["path"].startswith("  sweep")]
    for shape, m in sorted({(r["shape"], r["rows"]) for r in sweeps}, key=lambda k: (k[1], k[0])):
        best = min((r for r in sweeps if (r["shape"], r["rows"]) == (shape, m)),
                   key=lambda r: r["us"])  # fmt: skip
        print(
            f"best launch shape {shape:<24} M={m:<4} {best['path'].strip():<28} "
            f"{best['us']:8.1f} us (default {times.get((shape, m, GEMM), 0):8.1f})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="16,32,64,128,512", help="comma-separated row counts")
    parser.add_argument("--sweep", action="store_true", help="also the launch shapes in SWEEP")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    if not cuda_banner():
        return 2
    row_counts = [int(m) for m in args.rows.split(",")]
    rows = []
    for name, fmt, n_out, n_in in SHAPES:  # each shape's rows printed as they come (a timeout
        # cuts the run short: what finished is on the page)
        mine = measure(name, fmt, n_out, n_in, row_counts, SWEEP if args.sweep else ())
        _table(mine, header=not rows)
        rows += mine
        torch.cuda.empty_cache()
    _verdicts(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
