"""A quantized matrix's three paths at 1 to 512 rows of x, at Llama-3-8B's shapes: what
engine/hearth/ops.py KernelsOps._matmul_path chooses between for a batch's decode step or a
prefill chunk (docs/decisions/0022-batch-rows-by-dequantized-gemm.md):

    float GEMV       kernels.gemv.quant_matmul, float_config (x as it is, the blocks decoded
                     to floats in registers; 16 rows a program through tl.dot past one row)
    integer GEMV     kernels.gemv.quant_matmul, integer_config (x in 8 bits, dp4a; a program
                     per weight tile and input row: the rows after the first find the tile in
                     L2)
    dequant + torch  kernels.dequant.dequantize to f16, then torch's GEMM (2 bytes a weight
                     written and read again)

    python -m benchmarks.kernels.batch_rows [--rows 1,2,4,6,8,12,16,32,64,512] [--json PATH]

Each figure is a CUDA-graph replay over enough copies of the weight that the L2 cannot hold
them (timing.L2_DEFEAT_BYTES), divided by the copies. GB/s: the weight's stored bytes over the
time (the GEMVs' floor; the dequantize path moves more); TFLOP/s: 2 M N K over the time;
max_diff: the largest difference from the "dequant + torch" output over its largest value (the
integer GEMV's 8-bit x costs about 5e-3). The closing lines give each GEMV's time over the
dequantized GEMM's per (shape, rows) and the row counts these figures give the engine's
thresholds: kernels.gemv.DP4A_MAX_ROWS (the integer GEMV up to there) and the float GEMV's one
row (formats without the integer path).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from benchmarks.kernels.gemv import _weights
from benchmarks.kernels.timing import cuda_banner, time_calls
from kernels import gemv
from kernels.dequant import dequantize
from kernels.errors import UnsupportedTensor

DEVICE = "cuda"

SHAPES = [  # (name, format, n_out, n_in)
    ("attn_q/o 4096x4096", "Q4_K", 4096, 4096),
    ("attn_k/v 1024x4096", "Q4_K", 1024, 4096),
    ("ffn_gate/up 14336x4096", "Q4_K", 14336, 4096),
    ("ffn_down 4096x14336", "Q6_K", 4096, 14336),
]
FLOAT, INTEGER, DEQUANT = "float GEMV", "integer GEMV", "dequant + torch"


def float_gemv(x: torch.Tensor, w) -> torch.Tensor:
    return gemv.quant_matmul(x, w, gemv.float_config(w.fmt.name, x.shape[0]))


def integer_gemv(x: torch.Tensor, w) -> torch.Tensor:
    return gemv.quant_matmul(x, w, gemv.integer_config(w.fmt.name))


def dequant_gemm(x: torch.Tensor, w) -> torch.Tensor:
    """KernelsOps.matmul's "dequant" path: the matrix in f16 for torch's GEMM."""
    return x @ dequantize(w, torch.float16).T


def measure(name: str, fmt: str, n_out: int, n_in: int, row_counts) -> list[dict]:
    weights = _weights(fmt, n_out, n_in)
    w = weights[0]
    gen = torch.Generator(device=DEVICE).manual_seed(n_out + n_in)
    rows = []
    for m in row_counts:
        x = torch.randn(m, n_in, generator=gen, device=DEVICE).half()
        base = dequant_gemm(x, w).float()
        scale = max(base.abs().max().item(), 1e-30)
        for path, fn in ((FLOAT, float_gemv), (INTEGER, integer_gemv), (DEQUANT, dequant_gemm)):
            try:
                out = fn(x, w).float()
            except UnsupportedTensor:  # the integer GEMV: Q4_K and Q6_K only
                continue
            seconds = time_calls(lambda fn=fn, x=x: [fn(x, wi) for wi in weights])
            seconds /= len(weights)
            rows.append({
                "shape": name, "fmt": fmt, "rows": m, "path": path, "us": seconds * 1e6,
                "gb_s": w.nbytes / seconds / 1e9, "tflop_s": 2 * m * n_out * n_in / seconds / 1e12,
                "max_diff": (out - base).abs().max().item() / scale,
            })  # fmt: skip
    return rows


def _table(rows: list[dict], header: bool = True) -> None:
    if header:
        print(f"{'shape':<24} {'fmt':<5} {'M':>4} {'path':<16} {'us':>9} {'GB/s':>7} "
              f"{'TFLOP/s':>8} {'max_diff':>9}")  # fmt: skip
    for r in rows:
        print(f"{r['shape']:<24} {r['fmt']:<5} {r['rows']:>4} {r['path']:<16} {r['us']:9.1f} "
              f"{r['gb_s']:7.0f} {r['tflop_s']:8.1f} {r['max_diff']:9.2e}")  # fmt: skip


def most_rows_won(wins: dict[int, bool]) -> int:
    """The largest row count of the run of wins from the smallest measured one (0: the smallest
    lost); a row count between two measured ones is not known."""
    best = 0
    for m in sorted(wins):
        if not wins[m]:
            break
        best = m
    return best


def verdicts(rows: list[dict]) -> dict[str, int]:
    """Prints each GEMV's time over the dequantized GEMM's per (shape, rows), and returns the
    thresholds these figures give, each won on every shape: "DP4A_MAX_ROWS" (the integer GEMV
    beats the dequantized GEMM) and "float GEMV" (the float GEMV beats it)."""
    times = {(r["shape"], r["rows"], r["path"]): r["us"] for r in rows}
    print(f"\ntime / {DEQUANT}'s (below 1: the GEMV wins)")
    wins: dict[str, dict[int, bool]] = {FLOAT: {}, INTEGER: {}}
    for shape, m in sorted({(r["shape"], r["rows"]) for r in rows}, key=lambda k: (k[1], k[0])):
        deq = times.get((shape, m, DEQUANT))
        if deq is None:
            continue
        parts = []
        for path, won in wins.items():
            t = times.get((shape, m, path))
            if t is not None:
                parts.append(f"{path}: {t / deq:5.2f}")
                won[m] = won.get(m, True) and t < deq
        print(f"  {shape:<24} M={m:<4} " + "   ".join(parts))
    found = {"DP4A_MAX_ROWS": most_rows_won(wins[INTEGER]), FLOAT: most_rows_won(wins[FLOAT])}
    print(
        f"integer GEMV: beats {DEQUANT} on every shape up to M = {found['DP4A_MAX_ROWS']} "
        f"(kernels.gemv.DP4A_MAX_ROWS, now {gemv.DP4A_MAX_ROWS})"
    )
    print(
        f"float GEMV: beats {DEQUANT} on every shape up to M = {found[FLOAT]} "
        "(KernelsOps._matmul_path gives it one row: the formats without the integer GEMV)"
    )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", default="1,2,4,6,8,12,16,32,64,512", help="comma-separated row counts"
    )
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    if not cuda_banner():
        return 2
    row_counts = [int(m) for m in args.rows.split(",")]
    rows = []
    for name, fmt, n_out, n_in in SHAPES:  # each shape's rows printed as they come (a timeout
        # cuts the run short: what finished is on the page)
        mine = measure(name, fmt, n_out, n_in, row_counts)
        _table(mine, header=not rows)
        rows += mine
        torch.cuda.empty_cache()
    verdicts(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
