"""The integer MMA GEMM (kernels/quant_mma.py) beside the two paths KernelsOps.matmul has for a
batch's decode rows, at Llama-3-8B's shapes and 8 to 64 rows:

    dequant + torch   kernels.dequant.dequantize to f16, then torch's GEMM (past 8 rows today:
                      2 bytes a weight written and read again every call)
    integer GEMV      kernels.gemv.quant_matmul with its dp4a config (up to 8 rows today: a
                      program per weight tile and input row), x quantized in the call
    integer GEMV x8   the same with x given in 8 bits (as the engine's norm or SwiGLU writes it)
    quant MMA         kernels.quant_mma.quant_mma, default_config, x quantized in the call
    quant MMA x8      the same with x given in 8 bits

    python -m benchmarks.kernels.quant_mma [--rows 8,16,32,64] [--sweep] [--json PATH]

Each figure is a CUDA-graph replay over enough copies of the weight that the L2 cannot hold
them (timing.L2_DEFEAT_BYTES), divided by the copies. GB/s: the weight's stored bytes over the
time (the floor of every path here; the dequantize path moves more); max_diff: the largest
difference from the "dequant + torch" output over its largest value (8-bit x: a few 1e-3).
--sweep: the MMA's launch shapes in SWEEP (x given in 8 bits) at every case. The closing lines
give the MMA's time over the other paths' and each case's best launch shape.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import torch
import triton

from benchmarks.kernels.batch_rows import DEQUANT, SHAPES, dequant_gemm
from benchmarks.kernels.gemv import _weights
from benchmarks.kernels.timing import cuda_banner, time_calls
from kernels.act_quant import quantize_activation
from kernels.gemv import integer_config, quant_matmul
from kernels.quant_mma import MmaConfig, default_config, quant_mma, resolved

DEVICE = "cuda"

GEMV, GEMV_X8, MMA, MMA_X8 = "integer GEMV", "integer GEMV x8", "quant MMA", "quant MMA x8"
# launch shapes (block_m 0: default_config's for the rows; split_k 0: its rule, one wave)
SWEEP = [
    MmaConfig(block_n=bn, step=step, num_warps=nw, num_stages=ns)
    for bn, step, nw, ns in (
        (64, 1, 4, 3), (64, 1, 4, 4), (64, 1, 4, 6), (64, 2, 4, 4), (64, 1, 8, 5),
        (128, 1, 4, 5), (128, 1, 8, 5), (128, 2, 8, 4), (32, 1, 4, 5), (32, 2, 4, 6),
    )
] + [
    MmaConfig(block_m=16), MmaConfig(block_m=32), MmaConfig(prefetch=False),
    MmaConfig(split_k=1), MmaConfig(split_k=4), MmaConfig(split_k=8),
    MmaConfig(num_warps=8, split_k=1), MmaConfig(block_n=128, num_warps=8, split_k=1),
]  # fmt: skip


def _n_sm() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def _shape(cfg: MmaConfig) -> str:
    return (f"bm{cfg.block_m} bn{cfg.block_n} st{cfg.step} w{cfg.num_warps} "
            f"s{cfg.num_stages} k{cfg.split_k}{'' if cfg.prefetch else ' nopf'}")  # fmt: skip


def measure(name: str, fmt: str, n_out: int, n_in: int, row_counts, sweep=()) -> list[dict]:
    weights = _weights(fmt, n_out, n_in)
    w = weights[0]
    gen = torch.Generator(device=DEVICE).manual_seed(n_out + n_in)
    dp4a = integer_config(fmt)
    rows = []
    for m in row_counts:
        x = torch.randn(m, n_in, generator=gen, device=DEVICE).half()
        xq = quantize_activation(x)
        base = dequant_gemm(x, w).float()
        scale = max(base.abs().max().item(), 1e-30)
        default = default_config(m, n_out, n_in, _n_sm())
        paths = [
            (DEQUANT, dequant_gemm),
            (GEMV, lambda x, w: quant_matmul(x, w, dp4a)),
            (GEMV_X8, lambda x, w, xq=xq: quant_matmul(x, w, dp4a, quantized=xq)),
            (MMA, quant_mma),
            (MMA_X8, lambda x, w, xq=xq: quant_mma(x, w, quantized=xq)),
        ]
        for c in sweep:
            c = resolved(c, m, n_out, n_in, _n_sm())
            # no block of rows mostly empty; the default launch is timed above
            if c.block_m <= max(16, triton.next_power_of_2(m)) and c != default:
                sweep_fn = functools.partial(quant_mma, config=c, quantized=xq)
                paths.append((f"  sweep {_shape(c)}", sweep_fn))
        for path, fn in paths:
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
                "gb_s": w.nbytes / seconds / 1e9,
                "max_diff": (out - base).abs().max().item() / scale,
                "config": _shape(default) if path.startswith("quant MMA") else "",
            })  # fmt: skip
    return rows


def _table(rows: list[dict], header: bool = True) -> None:
    if header:
        print(f"{'shape':<24} {'fmt':<5} {'M':>3} {'path':<40} {'us':>8} {'GB/s':>6} "
              f"{'max_diff':>9}  config")  # fmt: skip
    for r in rows:
        print(f"{r['shape']:<24} {r['fmt']:<5} {r['rows']:>3} {r['path']:<40} {r['us']:8.1f} "
              f"{r['gb_s']:6.0f} {r['max_diff']:9.2e}  {r['config']}")  # fmt: skip


def _verdicts(rows: list[dict]) -> None:
    """Per (shape, rows): the MMA's time (x given in 8 bits) over each other path's, and the
    best launch shape of the sweep."""
    times = {(r["shape"], r["rows"], r["path"]): r["us"] for r in rows}
    print(f"\n{MMA_X8} time / other path's (below 1: the MMA wins)")
    for shape, m in sorted({(r["shape"], r["rows"]) for r in rows}, key=lambda k: (k[1], k[0])):
        mma = times.get((shape, m, MMA_X8))
        if mma is None:
            continue
        ratios = [
            f"vs {other}: {mma / times[(shape, m, other)]:5.2f}"
            for other in (DEQUANT, GEMV_X8)
            if (shape, m, other) in times
        ]
        print(f"  {shape:<24} M={m:<3} {mma:7.1f} us   " + "   ".join(ratios))
    sweeps = [r for r in rows if r["path"].startswith("  sweep")]
    for shape, m in sorted({(r["shape"], r["rows"]) for r in sweeps}, key=lambda k: (k[1], k[0])):
        best = min((r for r in sweeps if (r["shape"], r["rows"]) == (shape, m)),
                   key=lambda r: r["us"])  # fmt: skip
        print(
            f"best launch shape {shape:<24} M={m:<3} {best['path'].strip():<38} "
            f"{best['us']:7.1f} us (default {times.get((shape, m, MMA_X8), 0):7.1f})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="8,16,32,64", help="comma-separated row counts")
    parser.add_argument("--sweep", action="store_true", help="also the launch shapes in SWEEP")
    parser.add_argument("--shapes", help="only shapes whose name contains one of these, e.g. "
                        "attn_q,ffn_down")  # fmt: skip
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    if not cuda_banner():
        return 2
    row_counts = [int(m) for m in args.rows.split(",")]
    wanted = args.shapes.split(",") if args.shapes else None
    rows: list[dict] = []
    for name, fmt, n_out, n_in in SHAPES:  # each shape's rows printed as they come (a timeout
        # cuts the run short: what finished is on the page)
        if wanted and not any(part in name for part in wanted):
            continue
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
