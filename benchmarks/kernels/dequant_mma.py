"""The dequantizing MMA GEMM (kernels/dequant_mma.py) beside every path a batch's decode rows
can take, at Llama-3-8B's shapes and 2 to 64 rows; prints the winner per (shape, rows), the
ROWS_WON table those figures give KernelsOps._matmul_path, and what a step of 2-8 rows costs
against one row:

    dequant + torch   kernels.dequant.dequantize to f16, then torch's GEMM (the engine's path
                      past 8 rows without the MMA; not timed at 8 rows or fewer)
    integer GEMV x8   kernels.gemv.quant_matmul, dp4a config, x given in 8 bits (the engine's
                      path at 1-8 rows); also timed at one row, the figure 2-8 rows are held to
    dequant MMA       kernels.dequant_mma.dequant_mma, default_config (x in f16; a 16-row
                      tile at 16 rows or fewer: the weights are read once whatever the rows)

    python -m benchmarks.kernels.dequant_mma [--rows 2,4,8,9,16,32,64] [--sweep] [--mma-only]
        [--shapes attn_q,ffn_down] [--json PATH]

Each figure is a CUDA-graph replay over enough copies of the weight that the L2 cannot hold
them (timing.L2_DEFEAT_BYTES), divided by the copies. GB/s: the weight's stored bytes over the
time (the floor of every path; the copy rate is about 4,000 on an H200); max_diff: the largest
difference from the "dequant + torch" output over its largest value. --sweep adds the dequant
MMA's launch shapes in SWEEP (and "plain", without the inline assembly); the winner then counts
the best of them (its shape printed), and default_config should take the shapes that win.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton

from benchmarks.kernels.batch_rows import DEQUANT, SHAPES, dequant_gemm
from benchmarks.kernels.gemv import _weights
from benchmarks.kernels.timing import cuda_banner, time_calls
from kernels.act_quant import quantize_activation
from kernels.dequant_mma import DequantMmaConfig, dequant_mma, resolved
from kernels.dequant_mma import default_config as dmma_default
from kernels.gemv import DP4A_MAX_ROWS, integer_config, quant_matmul

DEVICE = "cuda"
GEMV_X8, DMMA, DMMA_PLAIN = "integer GEMV x8", "dequant MMA", "plain"
SWEEP_PREFIX = "dequant MMA "
PLAIN = DequantMmaConfig(asm=False)
# matrices of each shape in a Llama-3-8B layer: q and o, k and v, gate and up, down
PER_LAYER = {"attn_q/o": 2, "attn_k/v": 2, "ffn_gate/up": 2, "ffn_down": 1}
# launch shapes beside the default (block_m 0: the rows' power of two; split_k 0: K split
# for two programs an SM): prefetch depth (stages 2, 4, 5: a stage is BLOCK_N x 144 bytes of
# Q4_K codes and scales and BLOCK_M x 512 of x), weight tiles of 128 rows on one warpgroup or
# two, K in 2 or 8 parts
SWEEP = [
    DequantMmaConfig(block_n=bn, num_warps=nw, num_stages=ns, split_k=sk)
    for bn, nw, ns, sk in (
        (64, 4, 2, 0), (64, 4, 4, 0), (64, 4, 5, 0), (128, 4, 3, 0), (128, 8, 3, 0),
        (128, 8, 2, 0), (64, 4, 3, 2), (64, 4, 3, 8),
    )
]  # fmt: skip


def _n_sm() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def _shape(cfg: DequantMmaConfig) -> str:
    return (f"bm{cfg.block_m} bn{cfg.block_n} w{cfg.num_warps} s{cfg.num_stages} "
            f"k{cfg.split_k}{'' if cfg.asm else ' plain'}")  # fmt: skip


def measure(name: str, fmt: str, n_out: int, n_in: int, row_counts, sweep=(),
            others: bool = True) -> list[dict]:  # fmt: skip
    """The paths' rows for one shape; others=False: the dequant MMA's launch shapes alone."""
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
        default = dmma_default(m, n_out, n_in, _n_sm())
        paths = []
        if others and m > DP4A_MAX_ROWS:
            paths.append((DEQUANT, dequant_gemm, ""))
        if others:
            paths.append((GEMV_X8, lambda x, w, xq=xq: quant_matmul(x, w, dp4a, quantized=xq), ""))
        if m > 1:
            paths.append((DMMA, dequant_mma, _shape(default)))
        if m > 1 and sweep:
            paths.append((DMMA_PLAIN, lambda x, w: dequant_mma(x, w, PLAIN),
                          _shape(default) + " plain"))  # fmt: skip
        for c in sweep if m > 1 else ():
            c = resolved(c, m, n_out, n_in, _n_sm())
            if c.block_m <= max(16, triton.next_power_of_2(m)) and c != default:
                fn = lambda x, w, c=c: dequant_mma(x, w, c)  # noqa: E731
                paths.append((SWEEP_PREFIX + _shape(c), fn, _shape(c)))
        for path, fn, config in paths:
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
                "max_diff": (out - base).abs().max().item() / scale, "config": config,
            })  # fmt: skip
    return rows


def _table(rows: list[dict], header: bool = True) -> None:
    if header:
        print(f"{'shape':<24} {'fmt':<5} {'M':>3} {'path':<44} {'us':>8} {'GB/s':>6} "
              f"{'max_diff':>9}")  # fmt: skip
    for r in rows:
        print(f"{r['shape']:<24} {r['fmt']:<5} {r['rows']:>3} {r['path']:<44} {r['us']:8.1f} "
              f"{r['gb_s']:6.0f} {r['max_diff']:9.2e}")  # fmt: skip


def winners(rows: list[dict]) -> dict[tuple[str, int], dict]:
    """Per (shape, rows): the fastest row of each kind (the dequant MMA's default, plain and
    swept shapes count as one kind, "dequant MMA"), and the overall winner, printed."""
    best: dict[tuple[str, int], dict[str, dict]] = {}
    for r in rows:
        if r["rows"] == 1:  # the one-row reference of rows_2_to_8
            continue
        ours = r["path"] in (DMMA, DMMA_PLAIN) or r["path"].startswith(SWEEP_PREFIX)
        kind = DMMA if ours else r["path"]
        per = best.setdefault((r["shape"], r["rows"]), {})
        if kind not in per or r["us"] < per[kind]["us"]:
            per[kind] = r
    print("\nwinner per (shape, rows); time of each path's best over the winner's")
    found = {}
    for (shape, m), per in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        win_kind, win = min(per.items(), key=lambda kv: kv[1]["us"])
        others = "   ".join(
            f"{k}: {r['us'] / win['us']:4.2f}" for k, r in per.items() if k != win_kind
        )
        print(f"  {shape:<24} M={m:<3} {win_kind:<16} {win['us']:7.1f} us {win['gb_s']:5.0f} GB/s"
              f"  ({win['config'] or '-'})   {others}")  # fmt: skip
        found[(shape, m)] = {"kind": win_kind, **win}
    return found


def rows_won(found: dict[tuple[str, int], dict]) -> dict[str, tuple[int, int]]:
    """kernels.dequant_mma.ROWS_WON from the winners: per format, the longest run of measured
    row counts (in order) at which the dequant MMA won on every shape of the format."""
    table = {}
    for fmt in sorted({r["fmt"] for r in found.values()}):
        counts = sorted({m for (_, m), r in found.items() if r["fmt"] == fmt})
        won = [all(r["kind"] == DMMA for (_, mm), r in found.items() if mm == m and r["fmt"] == fmt)
               for m in counts]  # fmt: skip
        best: list[int] = []
        run: list[int] = []
        for m, w in zip(counts, won, strict=True):
            run = [*run, m] if w else []
            if len(run) > len(best):
                best = run
        if best:
            table[fmt] = (best[0], best[-1])
    print(f"\nkernels.dequant_mma.ROWS_WON from these figures: {table}")
    return table


def rows_2_to_8(rows: list[dict], found: dict[tuple[str, int], dict]) -> None:
    """What a decode step of 2-8 rows costs against one row: per row count, the winner's time
    and each path's over the integer GEMV's at one row, per shape and for a Llama-3-8B layer's
    seven matrices (PER_LAYER); the verdict names the path to take there."""
    one = {r["shape"]: r["us"] for r in rows if r["rows"] == 1 and r["path"] == GEMV_X8}
    few = sorted({m for (_, m) in found if 2 <= m <= DP4A_MAX_ROWS})
    if not one or not few:
        return
    print("\nrows 2-8: time over the integer GEMV's at one row (1.00: a row costs nothing)")
    for m in few:
        layer = {GEMV_X8: 0.0, DMMA: 0.0, "best": 0.0}
        layer_one = 0.0
        for (shape, mm), win in sorted(found.items()):
            if mm != m or shape not in one:
                continue
            count = PER_LAYER.get(shape.split()[0], 1)
            per = {r["path"]: r["us"] for r in rows if r["shape"] == shape and r["rows"] == m}
            mma = min((us for path, us in per.items() if path in (DMMA, DMMA_PLAIN)
                       or path.startswith(SWEEP_PREFIX)), default=float("nan"))  # fmt: skip
            gemv = per.get(GEMV_X8, float("nan"))
            print(f"  {shape:<24} M={m}  integer GEMV {gemv:6.1f} us ({gemv / one[shape]:4.2f}x)"
                  f"  dequant MMA {mma:6.1f} us ({mma / one[shape]:4.2f}x)   one row "
                  f"{one[shape]:5.1f} us")  # fmt: skip
            layer[GEMV_X8] += count * gemv
            layer[DMMA] += count * mma
            layer["best"] += count * win["us"]
            layer_one += count * one[shape]
        pick = min((GEMV_X8, DMMA), key=lambda k: layer[k])
        print(f"  layer M={m}: integer GEMV {layer[GEMV_X8]:6.1f} us "
              f"({layer[GEMV_X8] / layer_one:4.2f}x), dequant MMA {layer[DMMA]:6.1f} us "
              f"({layer[DMMA] / layer_one:4.2f}x), best per matrix {layer['best']:6.1f} us "
              f"({layer['best'] / layer_one:4.2f}x), one row {layer_one:6.1f} us "
              f"-> verdict: {pick}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="2,4,8,9,16,32,64",
                        help="comma-separated rows (1 is added where any is 8 or fewer: the "
                        "integer GEMV's one-row figure)")  # fmt: skip
    parser.add_argument("--sweep", action="store_true", help="also the launch shapes in SWEEP")
    parser.add_argument("--shapes", help="only shapes whose name contains one of these, e.g. "
                        "attn_q,ffn_down")  # fmt: skip
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--mma-only", action="store_true", help="the dequant MMA's launch "
                        "shapes alone (with --sweep: which shape wins, no ROWS_WON)")  # fmt: skip
    args = parser.parse_args(argv)
    if not cuda_banner():
        return 2
    row_counts = [int(m) for m in args.rows.split(",")]
    if min(row_counts) <= DP4A_MAX_ROWS and 1 not in row_counts and not args.mma_only:
        row_counts = [1, *row_counts]
    wanted = args.shapes.split(",") if args.shapes else None
    rows: list[dict] = []
    for name, fmt, n_out, n_in in SHAPES:  # each shape's rows printed as they come (a timeout
        # cuts the run short: what finished is on the page)
        if wanted and not any(part in name for part in wanted):
            continue
        mine = measure(name, fmt, n_out, n_in, row_counts, SWEEP if args.sweep else (),
                       others=not args.mma_only)  # fmt: skip
        _table(mine, header=not rows)
        rows += mine
        torch.cuda.empty_cache()
        if args.json:  # what finished so far, in case a timeout cuts the run
            Path(args.json).write_text(json.dumps(rows, indent=1))
    found = winners(rows)
    if not args.mma_only:
        rows_won(found)
        rows_2_to_8(rows, found)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
