"""Session 8's batch-1 GEMV sweep (docs/kernels.md): candidates beside the default, one call.

    python -m benchmarks.kernels.gemv_sweep [--json PATH] [--formats Q4_K,Q6_K] [--shapes 0,3]
        [--passes N] [--warm PROCESSES]

For each shape (the issue's four Llama-3-8B matrices and the joined ones the engine runs) and
format: the default first, every candidate that applies, the default again (the two default
figures give the spread of that shape's timings), each printed as measured, so a call cut by
its time limit keeps what it measured. x arrives in 8 bits (quantized once, outside the timed
calls), as the engine gives it: the GEMV's own time. Figures are GGUF weight bytes + x + y
over the time, as a share of the device-to-device copy rate measured at the start.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import multiprocessing
import sys
import time

import torch

from benchmarks.kernels.gemv import _copies, measure_each
from benchmarks.kernels.timing import copy_bandwidth
from kernels.act_quant import quantize_activation
from kernels.gemv import GemvConfig, default_config, quant_matmul
from kernels.gemv_mixed import MixedWeight, mixed_matmul
from kernels.packed_weight import PackedWeight
from kernels.reference import random_weight_bytes

# (name, n_out, n_in). The engine (engine/hearth/forward.py) joins the matrices that read the
# same x and share a block type: in a Llama-3-8B Q4_K_M file (llama.cpp gives attn_v and
# ffn_down Q6_K in 16 of the 32 layers) Q+K+V 6144x4096 (Q4_K, 16 layers) or Q+K 5120x4096
# (Q4_K) and V 1024x4096 (Q6_K, 16 layers); gate+up 28672x4096 (Q4_K); attn_output 4096x4096
# (Q4_K); ffn_down 4096x14336 (Q4_K or Q6_K). A Q6_K file: every matrix Q6_K, joined the same.
SHAPES = [
    ("attn_q/o", 4096, 4096),
    ("ffn_down", 4096, 14336),
    ("attn_k/v", 1024, 4096),
    ("engine q+k+v", 6144, 4096),
    ("engine gate+up", 28672, 4096),
    ("ffn_gate/up", 14336, 4096),
    ("engine q+k", 5120, 4096),
]

ONE = GemvConfig(4, 16, 1, num_stages=3, path="dp4a", prequantize=True, pipelined=True,
                 early_next=True, one_step=True)  # fmt: skip
LOOP_PDL = GemvConfig(4, 8, 1, num_stages=3, path="dp4a", prequantize=True, pipelined=True,
                      early_next=True, prefetch=False)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Candidate:
    name: str
    config: GemvConfig
    formats: tuple[str, ...] = ("Q4_K", "Q6_K")
    long_rows_only: bool = False  # only rows longer than 4096 (ffn_down's 14336)


# "RxB wN": R weight rows x B super-blocks a step, N warps; "rM": at most M registers a thread
# (more programs resident per SM); "rit": a thread holds several rows of a group and x's
# words once for them (GemvConfig.rows_in_thread: fewer registers, so more programs resident);
# "splitS": rows longer than a step cut into S parts, each one step with its tail masked;
# "loop": a K loop, programmatic dependent launch, no prefetch. All one step a program where
# the row allows (else `whole_steps`), PDL, the early next launch. Registers (sm_90, Triton
# 3.6, compiled here; benchmarks/kernels/gemv_sass.py --session8) in the comments.
RIT = dataclasses.replace(ONE, rows_in_thread=True)
CANDIDATES = [
    # session 6's defaults (the defaults until session 8), to time beside the new ones
    Candidate("s6 default", dataclasses.replace(ONE, one_step=False), ("Q4_K",)),
    Candidate("s6 default w2", dataclasses.replace(ONE, num_warps=2), ("Q6_K",)),
    Candidate("4x16 w4 r48", dataclasses.replace(ONE, max_registers=48), ("Q4_K",)),  # 8 spilled
    Candidate("rit 4x16 w4", RIT),  # Q4_K 48 (its default: 64), Q6_K 64 (its default: 104)
    Candidate("rit 4x16 w8", dataclasses.replace(RIT, num_warps=8)),  # Q4_K 32, Q6_K 47
    Candidate("rit 4x16 w2", dataclasses.replace(RIT, num_warps=2)),  # Q4_K 80, Q6_K 96
    # Q4_K none spilled; Q6_K 10 words
    Candidate("rit 4x16 w2 r72", dataclasses.replace(RIT, num_warps=2, max_registers=72)),
    # "se": Q4_K's scales decoded before the PDL wait (GemvConfig.scales_early): 56 and 72
    # registers (3 spilled); after the wait 247 and 382 instructions are left, not 295 and 471
    Candidate("rit 4x16 w4 se", dataclasses.replace(RIT, scales_early=True), ("Q4_K",)),
    Candidate(
        "rit 4x16 w2 r72 se",
        dataclasses.replace(RIT, num_warps=2, max_registers=72, scales_early=True),
        ("Q4_K",),
    ),
    Candidate("4x16 w2 r80", dataclasses.replace(ONE, num_warps=2, max_registers=80), ("Q6_K",)),
    Candidate(
        "rit 4x16 w2 r80", dataclasses.replace(RIT, num_warps=2, max_registers=80), ("Q6_K",)
    ),
    Candidate("rit 8x16 w4", dataclasses.replace(RIT, block_n=8), ("Q4_K",)),  # 80
    Candidate("rit 2x16 w2", dataclasses.replace(RIT, block_n=2, num_warps=2)),  # 48, 64
    Candidate("split4 4x16 w4", dataclasses.replace(ONE, splits=4), long_rows_only=True),
    Candidate("rit split4 4x16 w4", dataclasses.replace(RIT, splits=4), long_rows_only=True),
    Candidate(
        "rit split4 4x16 w2", dataclasses.replace(RIT, splits=4, num_warps=2), long_rows_only=True
    ),
    Candidate(
        "rit split4 4x16 w2 r80",
        dataclasses.replace(RIT, splits=4, num_warps=2, max_registers=80),
        ("Q6_K",),
        long_rows_only=True,
    ),  # 1 spilled
    Candidate("loop 4x8 pdl", LOOP_PDL, long_rows_only=True),
    Candidate(
        "rit loop 4x8 pdl", dataclasses.replace(LOOP_PDL, rows_in_thread=True), long_rows_only=True
    ),
    Candidate(
        "loop 4x16 pdl", dataclasses.replace(LOOP_PDL, blocks_per_tile=16), long_rows_only=True
    ),
]


def _l2(fmt: str, ahead: int) -> GemvConfig:
    """The format's default (session 8's winners), its long-rows loop too, with L2 prefetch of
    `ahead` tiles a program (GemvConfig.l2_ahead)."""
    base = default_config(fmt, 1)
    return dataclasses.replace(
        base, l2_ahead=ahead, long_rows=dataclasses.replace(base.long_rows, l2_ahead=ahead)
    )


# Session 9: the defaults with L2 prefetch under the programmatic dependent launch ("l2xA q4"
# for Q4_K's default, "q6" Q6_K's:
# program p asks L2 for tiles A p .. A p + A - 1 before its wait; registers unchanged, sm_90
# Triton 3.6: Q4_K 80, Q6_K 102, the long-rows loops 56 and 80; benchmarks/kernels/gemv_sass.py
# --session9)
CANDIDATES += [
    Candidate(f"default l2x{ahead} {fmt[:2].lower()}", _l2(fmt, ahead), (fmt,))
    for ahead in (2, 4)
    for fmt in ("Q4_K", "Q6_K")
]
# after session 9's first call (l2x2 and l2x4 lost everywhere, 2 to 26 points): the program's
# own tile only ("l2x1": the instruction's cost, nothing ahead), and 2 tiles asked line by line
# through the load/store unit ("lines": prefetch.global.L2, not the bulk copy engine)
CANDIDATES += [
    Candidate(f"default l2x1 {fmt[:2].lower()}", _l2(fmt, 1), (fmt,)) for fmt in ("Q4_K", "Q6_K")
]
CANDIDATES += [
    Candidate(
        f"default lines l2x2 {fmt[:2].lower()}",
        dataclasses.replace(
            _l2(fmt, 2),
            l2_lines=True,
            long_rows=dataclasses.replace(_l2(fmt, 2).long_rows, l2_lines=True),
        ),
        (fmt,),
    )
    for fmt in ("Q4_K", "Q6_K")
]
# and Q6_K's default at 2 rows a program (not timed in session 8; in the mixed launch its
# Q6_K part at 2 rows kept the kernel at 72 registers)
CANDIDATES.append(
    Candidate(
        "default 2x16 q6", dataclasses.replace(default_config("Q6_K", 1), block_n=2), ("Q6_K",)
    )
)
# Session 10: Q4_K 8 rows x 16 super-blocks a program, rows in the thread, 2 warps: 128
# registers (sm_90, Triton 3.6, none spilled), so 8 programs an SM (kernels/occupancy.py: 4 warps
# a sub-partition), 1,056 slots for a 4096x4096 matrix's 512 programs: the next matrix's
# programs all fit beside this one's and stream their weights while it computes (at 4 rows, 12
# an SM hold 1,584 of two matrices' 2,048). Rows longer than a step keep the default's loop.
CANDIDATES += [
    Candidate("rit 8x16 w2", dataclasses.replace(default_config("Q4_K", 1), block_n=8), ("Q4_K",))
]
SESSION9 = [c.name for c in CANDIDATES if "l2x" in c.name or c.name == "default 2x16 q6"]


def applies(c: Candidate, fmt: str, n_in: int) -> bool:
    """Long rows: more than 16 super-blocks (4096 inputs), one step of the default."""
    return fmt in c.formats and (not c.long_rows_only or n_in // 256 > 16)


def sweep_shape(fmt: str, n_out: int, n_in: int, copy_bw: float, names=None) -> list[dict]:
    """The default, each candidate that applies, the default again, on one weight's copies."""
    w = PackedWeight.from_gguf(random_weight_bytes(fmt, n_out, n_in), fmt, (n_out, n_in))
    runs = [("default", None)]
    runs += [(c.name, c.config) for c in CANDIDATES
             if applies(c, fmt, n_in) and (not names or c.name in names)]  # fmt: skip
    runs.append(("default again", None))
    # one input row, x shared (given in 8 bits, as the engine does)
    return measure_each(fmt, n_out, n_in, copy_bw, _copies(w), [(*r, 1, True) for r in runs])


# Session 9: Q+K (Q4_K) and V (Q6_K) of a Q4_K_M layer in one launch (kernels/gemv_mixed.py),
# beside the engine's two launches on the same weights and x: (name, B's rows a program, B's
# rows in the thread); registers (sm_90, Triton 3.6): 80, 72, 72
MIXED = [("mixed b4 rit", 4, True), ("mixed b2 rit", 2, True), ("mixed b2", 2, False)]


def sweep_mixed(copy_bw: float, n_a: int = 5120, n_b: int = 1024, n_in: int = 4096) -> list[dict]:
    """Two launches (the engine today: Q+K's Q4_K GEMV, then V's Q6_K GEMV, one quantized x),
    each mixed launch, the two launches again, on the same weight copies (L2 cannot hold
    them), x given in 8 bits. Bytes: both matrices + x + y."""
    from benchmarks.kernels.timing import time_calls

    a = PackedWeight.from_gguf(random_weight_bytes("Q4_K", n_a, n_in), "Q4_K", (n_a, n_in))
    b = PackedWeight.from_gguf(random_weight_bytes("Q6_K", n_b, n_in, seed=1), "Q6_K",
                               (n_b, n_in))  # fmt: skip
    copies = [MixedWeight(wa, wb) for wa, wb in zip(_copies(a), _copies(b), strict=False)]
    x = torch.randn(1, n_in, dtype=torch.float16, device="cuda")
    xq = quantize_activation(x)

    def two_launches() -> None:
        for w in copies:
            quant_matmul(x, w.a, quantized=xq)
            quant_matmul(x, w.b, quantized=xq)

    runs = [("default", two_launches)]
    for name, b_rows, b_rit in MIXED:

        def mixed(b_rows=b_rows, b_rit=b_rit) -> None:
            for w in copies:
                mixed_matmul(x, w, quantized=xq, b_rows=b_rows, b_rows_in_thread=b_rit)

        runs.append((name, mixed))
    runs.append(("default again", two_launches))
    moved = a.nbytes + b.nbytes + n_in * 2 + (n_a + n_b) * 2
    results = []
    for name, run in runs:
        try:
            seconds = time_calls(run) / len(copies)
        except Exception as error:  # report it and go on
            print(f"  mixed {name}: failed: {error!r}"[:300], flush=True)
            continue
        r = {"format": "Q4_K+Q6_K", "n_out": n_a + n_b, "n_in": n_in, "rows": 1,
             "us": seconds * 1e6, "gb_s": moved / seconds / 1e9,
             "of_copy": moved / seconds / copy_bw, "variant": name}  # fmt: skip
        print(f"{'Q4+Q6':6} {name:24} {n_a}+{n_b}x{n_in:<5} {r['us']:8.2f} {r['gb_s']:7.0f} "
              f"{r['of_copy']:8.1%}", flush=True)  # fmt: skip
        results.append(r)
    return results


# one shape of each kernel specialization the sweep and the GPU tests launch (the others
# differ only in row counts, which Triton specializes the same way)
WARM_SHAPES = [(4096, 4096), (4096, 14336)]


@functools.lru_cache(maxsize=1)
def _warm_weight(fmt: str, n_out: int, n_in: int):
    w = PackedWeight.from_gguf(random_weight_bytes(fmt, n_out, n_in), fmt, (n_out, n_in))
    x = torch.randn(1, n_in, dtype=torch.float16, device="cuda")
    return w, x


def _warm_one(job: tuple) -> str:
    fmt, n_out, n_in, name = job
    config = {c.name: c.config for c in CANDIDATES}.get(name)
    start = time.monotonic()
    try:
        w, x = _warm_weight(fmt, n_out, n_in)
        quant_matmul(x, w, config, quantized=quantize_activation(x))  # the sweep's launch
        quant_matmul(x, w, config)  # the tests' (x quantized by quant_matmul)
        torch.cuda.synchronize()
    except Exception as error:  # the sweep and the tests will report it too
        return f"failed {fmt} {n_out}x{n_in} {name}: {error!r}"[:300]
    return f"warm {fmt} {n_out}x{n_in} {name}: {time.monotonic() - start:.1f} s"


def warm(formats: list[str], workers: int, names: list[str] | None = None) -> None:
    """Compile every kernel that the GPU tests and the sweep launch, in `workers` processes
    at once: Triton compiles a kernel at its first launch, one at a time, and its disk cache
    then serves the tests and the timings (about a second a kernel otherwise, in series)."""
    jobs = []
    for n_out, n_in in WARM_SHAPES:
        for fmt in formats:
            chosen = [c.name for c in CANDIDATES
                      if applies(c, fmt, n_in) and (not names or c.name in names)]  # fmt: skip
            jobs += [(fmt, n_out, n_in, name) for name in ["default", *chosen]]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for line in pool.imap_unordered(_warm_one, jobs):
            print(line, flush=True)


def print_report(path: str, spread: bool = False) -> None:
    """A sweep's json as markdown tables, one per format: the median over passes of each
    variant's share of the copy rate (its µs); spread: also the lowest and highest figure
    (the default's: first and last of each shape, every pass)."""
    import statistics

    with open(path) as f:
        data = json.load(f)
    results = data["results"]
    shapes = [(n_out, n_in) for _label, n_out, n_in in SHAPES]
    shapes = [s for s in shapes if any((r["n_out"], r["n_in"]) == s for r in results)]
    print(f"{data['device']}, copy rate {data['copy_gb_s']:.0f} GB/s, passes: "
          f"{max(r.get('pass', 1) for r in results)}")  # fmt: skip
    for fmt in dict.fromkeys(r["format"] for r in results):
        mine = [r for r in results if r["format"] == fmt]
        names = list(dict.fromkeys("default" if r["variant"] == "default again" else r["variant"]
                                   for r in mine))  # fmt: skip
        print(f"\n| {fmt} | " + " | ".join(f"{o}x{i}" for o, i in shapes) + " |")
        print("| --- |" + " --- |" * len(shapes))
        for name in names:
            cells = []
            for shape in shapes:
                runs = [r for r in mine if (r["n_out"], r["n_in"]) == shape
                        and r["variant"] in ((name, "default again") if name == "default"
                                             else (name,))]  # fmt: skip
                if not runs:
                    cells.append("")
                    continue
                share = statistics.median(r["of_copy"] for r in runs)
                us = statistics.median(r["us"] for r in runs)
                cell = f"{share:.1%} ({us:.2f})"
                if spread:
                    low, high = min(r["of_copy"] for r in runs), max(r["of_copy"] for r in runs)
                    cell += f" [{low:.1%}-{high:.1%}]"
                cells.append(cell)
            print(f"| {name} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernels.gemv_sweep")
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument("--formats", default="Q4_K,Q6_K")
    parser.add_argument("--shapes", help="indices into SHAPES, comma-separated (default: all)")
    parser.add_argument("--names", help="only these candidates, comma-separated")
    parser.add_argument("--passes", type=int, default=1, help="the whole sweep this many times")
    parser.add_argument("--session9", action="store_true", help="only session 9's candidates "
                        "(L2 prefetch) and the mixed Q4_K + Q6_K launch")  # fmt: skip
    parser.add_argument("--no-mixed", action="store_true", help="skip the mixed launch")
    parser.add_argument("--warm", type=int, help="only compile every kernel, in this many "
                        "processes at once (before the tests and the timings)")  # fmt: skip
    parser.add_argument("--report", help="print a sweep's json as tables (no GPU needed)")
    parser.add_argument("--spread", action="store_true", help="with --report: lowest-highest")
    args = parser.parse_args(argv)
    if args.report:
        print_report(args.report, args.spread)
        return 0
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.warm:
        warm(args.formats.split(","), args.warm, SESSION9 if args.session9 else None)
        return 0
    start = time.monotonic()
    device = torch.cuda.get_device_name(0)
    copy_bw = copy_bandwidth()
    print(f"device: {device}; device-to-device copy: {copy_bw / 1e9:.0f} GB/s (read + write)")
    print(f"{'format':6} {'variant':22} {'shape':>13} {'us':>7} {'GB/s':>7} {'of copy':>8}")
    shapes = SHAPES
    if args.shapes:
        shapes = [SHAPES[int(i)] for i in args.shapes.split(",")]
    names = args.names.split(",") if args.names else None
    if args.session9:
        names = SESSION9
    report = {"device": device, "copy_gb_s": copy_bw / 1e9, "results": []}
    for n_pass in range(1, args.passes + 1):
        print(f"pass {n_pass}", flush=True)
        if not args.no_mixed:
            rows = sweep_mixed(copy_bw)
            for r in rows:
                r["shape_name"] = "engine q+k, v mixed"
                r["pass"] = n_pass
            report["results"] += rows
        for label, n_out, n_in in shapes:
            for fmt in args.formats.split(","):
                rows = sweep_shape(fmt, n_out, n_in, copy_bw, names)
                for r in rows:
                    r["shape_name"] = label
                    r["pass"] = n_pass
                report["results"] += rows
                if args.json:  # rewritten after each shape: a cut call keeps what it measured
                    with open(args.json, "w") as f:
                        json.dump(report, f, indent=1)
            print(f"  ({time.monotonic() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
