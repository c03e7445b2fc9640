"""MoE prefill: the grouped GEMM (kernels/moe_grouped_gemm.py) against the expert GEMV in slices
of MAX_PAIRS pairs (kernels/moe_gemv.py, what KernelsMoeOps ran a chunk through before), for a
chunk of tokens at Qwen3-30B-A3B's and gpt-oss-20b's shapes.

    python -m benchmarks.kernels.moe_prefill [--tokens 512,64] [--sweep | --only-sweep]
        [--json PATH]

A row is one layer's routed experts for the chunk: routing (the pairs aligned to expert
blocks; for the GEMV, each slice's grouping), gate+up with the activation, down with the
routing-weighted sum, as CUDA-graph replays; the router's top-k is not timed (both take the
same ids). TFLOP/s counts the pairs' products only, 2 P (2 n_ff n_embd + n_ff n_embd) (the
padding of expert blocks is not work done); GB/s the stored blocks of the experts the chunk
picks, each read once (the least any path reads); `max_diff` is the largest difference of
the two paths' outputs over their largest value (the GEMV reads x in 8 bits, the GEMM in f16).
The experts' routing is random (router logits from a normal distribution), so every expert is
picked about equally often. The grouped GEMM at its default_config, gate+up and down also
timed apart. --sweep: _grouped_kernel's launch shapes in SWEEP at each case (--only-sweep:
those rows alone).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

import numpy as np
import torch
import triton

from benchmarks.kernels.timing import time_calls
from engine.hearth.routing import select_experts
from kernels import moe_grouped_gemm as gg
from kernels.moe_gemv import SILU, SWIGLU_OAI, ExpertWeight, expert_down, expert_gate_up
from kernels.moe_reference import dequantize_experts, random_expert_bytes
from kernels.moe_routing import MAX_PAIRS, route_experts

DEVICE = "cuda"


@dataclass(frozen=True)
class Case:
    name: str
    gate_fmt: str
    down_fmt: str
    n_expert: int
    n_ff: int
    n_embd: int
    top_k: int
    gating: str
    oai: bool = False  # gpt-oss: clamped SwiGLU, biases


CASES = [
    Case("qwen3-30b-a3b Q4_K_M", "Q4_K", "Q6_K", 128, 768, 2048, 8, "softmax"),
    Case("gpt-oss-20b MXFP4", "MXFP4", "MXFP4", 32, 2880, 2880, 4, "topk_softmax", oai=True),
]
# _grouped_kernel's launch shapes: (block_m, block_n, ng, num_warps, num_stages)
_SWEEP_SHAPES = (
    (64, 128, 4, 8, 3), (64, 128, 2, 8, 3), (64, 128, 4, 8, 4), (32, 128, 4, 8, 3),
    (64, 64, 2, 4, 3), (128, 128, 2, 8, 3), (128, 64, 4, 4, 3), (128, 128, 4, 8, 3),
)  # fmt: skip
SWEEP = [
    gg.GroupedConfig(block_m=bm, block_n=bn, ng=ng, num_warps=nw, num_stages=st)
    for bm, bn, ng, nw, st in _SWEEP_SHAPES
]


def _expert(fmt: str, n_expert: int, n_out: int, n_in: int, seed: int, bias: bool):
    """The ExpertWeight of random blocks, and the rms of its expert 0's weights."""
    raw = random_expert_bytes(fmt, n_expert, n_out, n_in, seed=seed)
    rms = float(
        np.sqrt(np.mean(dequantize_experts(raw, fmt, (n_expert, n_out, n_in), [0])[0] ** 2))
    )
    b = (
        torch.randn(n_expert, n_out, generator=torch.Generator().manual_seed(seed))
        if bias
        else None
    )
    return ExpertWeight.from_gguf(raw, fmt, (n_expert, n_out, n_in), device=DEVICE, bias=b), rms


def _setup(case: Case, tokens: int):
    gate, rms = _expert(case.gate_fmt, case.n_expert, case.n_ff, case.n_embd, 1, case.oai)
    up, _ = _expert(case.gate_fmt, case.n_expert, case.n_ff, case.n_embd, 2, case.oai)
    down, _ = _expert(case.down_fmt, case.n_expert, case.n_embd, case.n_ff, 3, case.oai)
    gen = torch.Generator(device=DEVICE).manual_seed(4)
    logits = torch.randn(tokens, case.n_expert, generator=gen, device=DEVICE)
    ids, weights = select_experts(logits, case.top_k, gating=case.gating, normalize=True)
    # x scaled so that gate and up come to a few units on the random blocks' scales (h is f16)
    x = torch.randn(tokens, case.n_embd, generator=gen, device=DEVICE)
    x = x * (2.0 / (np.sqrt(case.n_embd) * rms))
    return gate, up, down, ids, weights, x.half()


def _sliced_gemv(x, gate, up, down, act, ids, weights):
    step = max(1, MAX_PAIRS // ids.shape[1])
    parts = []
    for start in range(0, x.shape[0], step):
        rows = slice(start, start + step)
        routing = route_experts(ids[rows], weights[rows], gate.n_expert)
        h = expert_gate_up(x[rows], gate, up, routing, act)
        parts.append(expert_down(h, down, routing))
    return torch.cat(parts)


def _bytes_per_expert(w: ExpertWeight) -> int:
    return sum(t.numel() * t.element_size() for t in w.packed.planes.values()) // w.n_expert


def measure(case: Case, tokens: int, configs=None, defaults: bool = True) -> list[dict]:
    """The case's rows: the sliced GEMV and the grouped GEMM at its default_config (defaults),
    then the grouped GEMM at each of `configs`."""
    gate, up, down, ids, weights, x = _setup(case, tokens)
    act = SWIGLU_OAI if case.oai else SILU
    pairs = ids.numel()
    flops = 2 * pairs * 3 * case.n_ff * case.n_embd
    picked = torch.unique(ids).numel()
    gate_up_bytes = picked * (_bytes_per_expert(gate) + _bytes_per_expert(up))
    down_bytes = picked * _bytes_per_expert(down)
    rows = []

    def row(path: str, seconds: float, part_flops: int, part_bytes: int = 0, **extra) -> None:
        rows.append({
            "case": case.name, "tokens": tokens, "path": path, "us": seconds * 1e6,
            "tflop_s": part_flops / seconds / 1e12, "gb_s": part_bytes / seconds / 1e9, **extra,
        })  # fmt: skip
        _print_row(rows[-1])

    # down's input for the sweep: h of a few units, as gate+up makes it
    h = torch.randn(pairs, case.n_ff, device=DEVICE).half()
    if defaults:
        gemv_out = _sliced_gemv(x, gate, up, down, act, ids, weights)
        row("sliced GEMV", time_calls(lambda: _sliced_gemv(x, gate, up, down, act, ids, weights)),
            flops)  # fmt: skip
        scale = gemv_out.float().abs().max().item()
    if defaults:
        cfg = gg.default_config(pairs, case.n_expert)
        out = gg.grouped_moe(x, gate, up, down, act, ids, weights, config=cfg)
        diff = (out.float() - gemv_out.float()).abs().max().item() / max(scale, 1e-30)
        t = time_calls(lambda: gg.grouped_moe(x, gate, up, down, act, ids, weights, config=cfg))
        row("grouped GEMM", t, flops, gate_up_bytes + down_bytes, max_diff=diff,
            block_m=cfg.block_m)  # fmt: skip
        aligned = gg.align_pairs(ids, weights, case.n_expert, cfg.block_m)
        h = gg.grouped_gate_up(x, gate, up, aligned, act, config=cfg)
        row("  align", time_calls(lambda: gg.align_pairs(ids, weights, case.n_expert,
                                                         cfg.block_m)), 0)  # fmt: skip
        row("  gate+up", time_calls(lambda: gg.grouped_gate_up(x, gate, up, aligned, act,
                                                               config=cfg)),
            2 * flops // 3, gate_up_bytes)  # fmt: skip
        row("  down", time_calls(lambda h=h: gg.grouped_down(h, down, aligned, config=cfg)),
            flops // 3, down_bytes)  # fmt: skip
    for c in configs or []:
        try:
            al = gg.align_pairs(ids, weights, case.n_expert, c.block_m)
            t_gu = time_calls(lambda c=c, al=al: gg.grouped_gate_up(x, gate, up, al, act, config=c))
            t_d = time_calls(lambda c=c, al=al: gg.grouped_down(h, down, al, config=c))
        except Exception as exc:  # a shape that does not compile here: say so, go on
            print(f"  {c}: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
            continue
        shape = f"bm{c.block_m} bn{c.block_n} ng{c.ng} w{c.num_warps} s{c.num_stages}"
        row(f"  sweep gate+up {shape}", t_gu, 2 * flops // 3, gate_up_bytes)
        row(f"  sweep down {shape}", t_d, flops // 3, down_bytes)
    return rows


HEADER = f"{'case':<22} {'tokens':>6} {'path':<44} {'us':>9} {'TFLOP/s':>8} {'GB/s':>7}  notes"
_GEMV_US: dict[tuple[str, int], float] = {}  # (case, tokens): the sliced GEMV's time


def _print_row(r: dict) -> None:
    """One row as it is measured (a run cut short by its time limit keeps what it printed)."""
    key = (r["case"], r["tokens"])
    if r["path"] == "sliced GEMV":
        _GEMV_US[key] = r["us"]
    notes = ""
    if r["path"] == "grouped GEMM":
        notes = (f"{_GEMV_US[key] / r['us']:.2f}x the GEMV, max_diff {r['max_diff']:.2e}, "
                 f"block_m {r['block_m']}")  # fmt: skip
    tf = f"{r['tflop_s']:8.1f}" if r["tflop_s"] else " " * 8
    gb = f"{r['gb_s']:7.0f}" if r["gb_s"] else " " * 7
    print(f"{r['case']:<22} {r['tokens']:>6} {r['path']:<44} {r['us']:9.1f} {tf} {gb}  {notes}",
          flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="512,64", help="comma-separated chunk lengths")
    parser.add_argument("--sweep", action="store_true", help="also the launch shapes in SWEEP")
    parser.add_argument("--only-sweep", action="store_true", help="SWEEP's rows alone")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark times GPU kernels", file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}, "
          f"triton {triton.__version__}")  # fmt: skip
    print(HEADER, flush=True)
    rows = []
    for tokens in (int(t) for t in args.tokens.split(",")):
        for case in CASES:
            sweep = SWEEP if args.sweep or args.only_sweep else None
            rows += measure(case, tokens, sweep, defaults=not args.only_sweep)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
