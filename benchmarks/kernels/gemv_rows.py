"""A batch's decode rows (1-16) through the integer GEMV, old against new, beside the
dequantizing MMA, at Llama-3-8B's four shapes in Q4_K and Q6_K:

    per-row GEMV   kernels.gemv.quant_matmul, integer_config without rows_in_program: a
                   program per weight tile and input row (the kernel before gemv_dp4a_rows)
    rows GEMV      2-4 rows (gemv_dp4a_rows.MAX_ROWS) in one program at default_rows_config's
                   tile (kernels/gemv_dp4a_rows.py; the engine takes it for the shapes
                   takes_shape names, a program a row for the others); with --sweep also
                   the tiles in SWEEP ("rows GEMV bn8 w2 k16" and the like)
    dequant MMA    kernels.dequant_mma.dequant_mma, default_config (x in f16), from 2 rows

    python -m benchmarks.kernels.gemv_rows [--rows 1,2,4,8,16] [--sweep] [--json PATH]

x is given in 8 bits to both GEMVs (as the engine's norm or SwiGLU writes it). Each figure is a
CUDA-graph replay over enough copies of the weight that the L2 cannot hold them, divided by the
copies. GB/s: the weight's stored bytes over the time; "copy": that over the device's copy rate
(timing.copy_bandwidth, read and written bytes counted); "x1": the time over the per-row
GEMV's at one row (1.00: the rows cost nothing past one). max_diff: the largest difference from
the per-row GEMV's output over its largest value (the two GEMVs compute the same products).
Closing lines: per row count, a Llama-3-8B Q4_K_M layer's seven matrices (q, o, k, v, gate,
up in Q4_K, down in Q6_K) by each path, and per format the rows at which the rows GEMV beats
the dequant MMA on every shape (what DP4A_MAX_ROWS and dequant_mma.ROWS_WON should say).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch

from benchmarks.kernels.gemv import _weights
from benchmarks.kernels.timing import copy_bandwidth, cuda_banner, time_calls
from kernels import gemv, gemv_dp4a_rows
from kernels.act_quant import quantize_activation
from kernels.dequant_mma import dequant_mma
from kernels.gemv_dp4a_rows import RowsConfig

DEVICE = "cuda"
SHAPES = [  # (name, n_out, n_in)
    ("attn_q/o 4096x4096", 4096, 4096),
    ("attn_k/v 1024x4096", 1024, 4096),
    ("ffn_gate/up 14336x4096", 14336, 4096),
    ("ffn_down 4096x14336", 4096, 14336),
]
PER_ROW, ROWS_GEMV, DMMA = "per-row GEMV", "rows GEMV", "dequant MMA"
# a Llama-3-8B Q4_K_M layer as this table counts it: (shape, format, matrices)
LAYER = [("attn_q/o", "Q4_K", 2), ("attn_k/v", "Q4_K", 2), ("ffn_gate/up", "Q4_K", 2),
         ("ffn_down", "Q6_K", 1)]  # fmt: skip
# rows GEMV tiles beside default_rows_config's: weight rows, warps, super-blocks a step. The
# sm_90 SASS (gemv_rows_sass) has fewer instructions a weight for more weights a thread (one
# warp, or 8-16 rows on two) at more registers (225-255: fewer programs an SM); which way
# wins is what this sweep says
SWEEP = [
    RowsConfig(block_n=bn, num_warps=nw, blocks_per_step=k)
    for bn, nw, k in ((8, 2, 8), (4, 2, 16), (4, 1, 16), (8, 1, 8), (16, 2, 8), (16, 4, 8))
]


def _name(cfg: RowsConfig) -> str:
    return f"bn{cfg.block_n} w{cfg.num_warps} k{cfg.blocks_per_step}"


def _rows_gemv(cfg: RowsConfig):
    """The rows kernel with tile cfg, x given in 8 bits."""

    def run(x, w, xq):
        out = torch.empty(x.shape[0], w.n_out, dtype=x.dtype, device=x.device)
        counters = gemv._COUNTERS.get(x.device, -(-w.n_out // cfg.block_n))
        gemv_dp4a_rows.launch(w, x, xq, out, counters, cfg, True)
        return out

    return run


def measure(name, fmt, n_out, n_in, row_counts, copy_rate, sweep) -> list[dict]:
    weights = _weights(fmt, n_out, n_in)
    w = weights[0]
    gen = torch.Generator(device=DEVICE).manual_seed(n_out + n_in)
    new = gemv.integer_config(fmt)
    old = dataclasses.replace(new, rows_in_program=False)
    found, one_row = [], None
    for m in row_counts:
        x = torch.randn(m, n_in, generator=gen, device=DEVICE).half()
        xq = quantize_activation(x)
        paths = [(PER_ROW, lambda x, w, xq: gemv.quant_matmul(x, w, old, quantized=xq), "")]
        if 1 < m <= gemv_dp4a_rows.MAX_ROWS:
            default = gemv_dp4a_rows.default_rows_config(fmt, m, n_out, n_in)
            paths.append((ROWS_GEMV, _rows_gemv(default), _name(default)))
            for cfg in sweep:
                if cfg != default:
                    paths.append((f"{ROWS_GEMV} {_name(cfg)}", _rows_gemv(cfg), _name(cfg)))
        if m > 1:
            paths.append((DMMA, lambda x, w, xq: dequant_mma(x, w), ""))
        base = None
        for path, fn, config in paths:
            try:
                out = fn(x, w, xq).float()
                seconds = time_calls(lambda fn=fn, x=x, xq=xq: [fn(x, wi, xq) for wi in weights])
            except Exception as exc:  # a tile that does not compile here: say so, go on
                print(f"{name} {fmt} M={m} {path}: {type(exc).__name__}: {str(exc)[:160]}",
                      file=sys.stderr)  # fmt: skip
                continue
            base = out if base is None else base
            seconds /= len(weights)
            one_row = seconds if m == 1 and path == PER_ROW else one_row
            gb_s = w.nbytes / seconds / 1e9
            row = {"shape": name, "fmt": fmt, "rows": m, "path": path, "config": config,
                   "us": seconds * 1e6, "gb_s": gb_s, "copy": gb_s * 1e9 / copy_rate,
                   "x1": seconds / one_row if one_row else float("nan"),
                   "max_diff": ((out - base).abs().max() / base.abs().max().clamp_min(1e-30)
                                ).item()}  # fmt: skip
            print(
                f"{name:<24} {fmt:<5} {m:>3} {path:<28} {row['us']:8.1f} {gb_s:6.0f} "
                f"{row['copy']:5.2f} {row['x1']:5.2f} {row['max_diff']:9.2e}",
                flush=True,
            )
            found.append(row)
    return found


def summary(rows: list[dict]) -> None:
    """The layer by each path per row count, and where the rows GEMV beats the MMA."""

    def best(shape, fmt, m, kind):
        times = [r["us"] for r in rows if r["shape"].startswith(shape) and r["fmt"] == fmt
                 and r["rows"] == m and r["path"].startswith(kind)]  # fmt: skip
        return min(times, default=float("nan"))

    counts = sorted({r["rows"] for r in rows})
    print("\na Llama-3-8B layer (q, o, k, v, gate, up Q4_K; down Q6_K), us and x one row "
          "(each path's best tile)")  # fmt: skip
    one = sum(n * best(s, f, 1, PER_ROW) for s, f, n in LAYER)
    for m in counts:
        per = {k: sum(n * best(s, f, m, k) for s, f, n in LAYER) for k in (PER_ROW, ROWS_GEMV,
                                                                          DMMA)}  # fmt: skip
        print(
            f"  M={m:<3} " + "   ".join(f"{k} {v:7.1f} ({v / one:4.2f}x)" for k, v in per.items())
        )
    print(
        "\nper format: rows at which the rows GEMV (best tile) beats the dequant MMA on every shape"
    )
    for fmt in sorted({r["fmt"] for r in rows}):
        won = [m for m in counts if m > 1 and all(
            best(s, fmt, m, ROWS_GEMV) < best(s, fmt, m, DMMA) for s, _, _ in SHAPES)]  # fmt: skip
        print(f"  {fmt}: {won}")
    if any(r["path"] != ROWS_GEMV and r["path"].startswith(ROWS_GEMV) for r in rows):
        print("\nrows GEMV: the fastest tile per (shape, format, rows)")
        for s, _, _ in SHAPES:
            for fmt in sorted({r["fmt"] for r in rows}):
                for m in counts:
                    mine = [r for r in rows if r["shape"] == s and r["fmt"] == fmt
                            and r["rows"] == m and r["path"].startswith(ROWS_GEMV)]  # fmt: skip
                    if mine:
                        top = min(mine, key=lambda r: r["us"])
                        print(f"  {s:<24} {fmt} M={m:<3} {top['config']:<14} {top['us']:7.1f} us"
                              f" (default {mine[0]['us']:7.1f})")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1,2,4,8,16")
    parser.add_argument("--formats", default="Q4_K,Q6_K")
    parser.add_argument("--sweep", action="store_true", help="also the rows GEMV's SWEEP tiles")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    if not cuda_banner():
        return 2
    copy_rate = copy_bandwidth()
    print(f"copy rate {copy_rate / 1e9:.0f} GB/s (read + written)")
    print(f"{'shape':<24} {'fmt':<5} {'M':>3} {'path':<28} {'us':>8} {'GB/s':>6} {'copy':>5} "
          f"{'x1':>5} {'max_diff':>9}")  # fmt: skip
    row_counts = [int(m) for m in args.rows.split(",")]
    rows: list[dict] = []
    for fmt in args.formats.split(","):
        for name, n_out, n_in in SHAPES:
            rows += measure(name, fmt, n_out, n_in, row_counts, copy_rate,
                            SWEEP if args.sweep else ())  # fmt: skip
            torch.cuda.empty_cache()
            if args.json:  # what finished so far, in case a timeout cuts the run
                Path(args.json).write_text(json.dumps(rows, indent=1))
    summary(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
