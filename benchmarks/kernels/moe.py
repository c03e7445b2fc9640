"""Expert GEMV (kernels/moe_gemv.py) at Qwen3-30B-A3B's and gpt-oss-20b's shapes, beside torch.

    python -m benchmarks.kernels.moe [--tokens 1,4,16] [--sweep] [--json PATH]

Rows in benchmarks/kernels/gemv.py's schema (format, n_out, n_in, rows = tokens, us, gb_s,
of_copy), plus the case, the experts read and torch's time. Bytes are those a step actually
reads: the distinct experts its routing picked (each once: tokens that share an expert share
its read) times the bytes of one expert's matrix (of each matrix: gate and up are two), plus x
and the output; of_copy sets that rate beside the device-to-device copy rate measured in the
same run (bytes read + written), as every kernel benchmark here does.

Each timed call cycles through 8 random routings over 2+ copies of the weights (so a repeat
finds its experts in HBM, not in the 50 MB L2), as CUDA-graph replays; x arrives in 8 bits
(as from the RMSNorm that writes it, or one quantization shared by gate and up), h in float
(the down rounds it to 8 bits in its own programs, as the engine runs it), and the
routing is grouped once a step (timed alone in its own row: the gate/up and down launches
share it). torch: the selected experts dequantized to f16 (kernels' one-pass Q4_K/Q6_K
dequantizer, kernels/dequant.py for the others, a torch MXFP4 decode here) and
multiplied with torch.matmul, the pairs gathered per expert on the host: what an engine
without an expert kernel does.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import sys
from dataclasses import dataclass

import numpy as np
import torch
import triton

from benchmarks.kernels.timing import L2_DEFEAT_BYTES, copy_bandwidth, time_calls
from engine.hearth.routing import select_experts
from kernels import moe_down_dp4a
from kernels.act_quant import quantize_activation
from kernels.moe_gemv import (
    DOWN,
    GATE_UP,
    ROWS,
    SILU,
    SWIGLU_OAI,
    ExpertWeight,
    MoeGemvConfig,
    default_config,
    expert_down,
    expert_gate_up,
    expert_rows,
    one_token_config,
    takes_one_token,
)
from kernels.moe_reference import random_expert_bytes
from kernels.moe_routing import route_experts, select_and_route
from kernels.packed_weight import PackedWeight

ROUTINGS = 8
DEVICE = "cuda"  # the tests run the rows' code on the CPU through the interpreter


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # "gate_up", "down" or "rows"
    fmt: str
    n_expert: int
    n_out: int
    n_in: int
    top_k: int
    bias: bool = False


QWEN3_GATE = (128, 768, 2048)
CASES = [
    Case("qwen3-30b-a3b gate+up", "gate_up", "Q4_K", *QWEN3_GATE, 8),
    Case("qwen3-30b-a3b down", "down", "Q6_K", 128, 2048, 768, 8),
    Case("gpt-oss-20b gate+up", "gate_up", "MXFP4", 32, 2880, 2880, 4, bias=True),
    Case("gpt-oss-20b down", "down", "MXFP4", 32, 2880, 2880, 4, bias=True),
    *(Case(f"qwen3 gate shape, {f}", "rows", f, *QWEN3_GATE, 8) for f in ("Q5_K", "Q8_0")),
]


def _weights(case: Case, seed: int) -> ExpertWeight:
    shape = (case.n_expert, case.n_out, case.n_in)
    raw = random_expert_bytes(case.fmt, *shape, seed=seed)
    bias = np.random.default_rng(seed).standard_normal(shape[:2]) * 0.1 if case.bias else None
    return ExpertWeight.from_gguf(raw, case.fmt, shape, device=DEVICE, bias=bias)


def _routings(case: Case, tokens: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        np.stack([rng.choice(case.n_expert, case.top_k, replace=False) for _ in range(tokens)])
        for _ in range(ROUTINGS)
    ]


# --sweep: launch shapes around the defaults: rows a program (block_n), runs of 16 weights a
# split (max_runs: below the row's runs K is split, and gate/up sums its partials through the
# tickets as the down does; 256 takes gpt-oss's 180-run rows whole, 76 runs masked), warps, and
# whether it is a dependent launch. What they trade (sm_90 SASS, `python -m
# benchmarks.kernels.moe_sass --sweep`): a program's fixed instructions (routing, addresses,
# x, the cross-thread sums, the ticket; for the down, h's rounding: once a program for all its
# rows) against the registers that its tile takes (programs an SM, bytes in flight). At one
# token a Qwen3-30B-A3B gate+up launch of 4 rows is 192 tiles x 8 groups = 1,536 programs of
# 9.2 KB of Q4_K (gate and up), the down of 16 rows 128 x 8 = 1,024 of 10 KB of Q6_K.
SWEEP = [
    MoeGemvConfig(4, 128, 2, False),
    *(MoeGemvConfig(rows, 128, warps) for rows, warps in
      ((2, 1), (2, 2), (2, 4), (4, 1), (4, 2), (4, 4), (8, 2), (8, 4), (8, 8), (16, 4), (16, 8),
       (32, 8))),
    *(MoeGemvConfig(rows, runs, warps) for rows, runs, warps in
      ((4, 256, 2), (8, 256, 4), (4, 64, 2), (16, 64, 4), (8, 32, 4))),
]  # fmt: skip
# the shape every mode had before the down took 16 rows (gate/up's default still): 4 rows,
# whole rows, 4 warps for Q4_K gate+up, else 2
FOUR_ROWS = {
    "gate_up": lambda fmt: MoeGemvConfig(num_warps=4 if fmt == "Q4_K" else 2),
    "down": lambda fmt: MoeGemvConfig(num_warps=2),
    "rows": lambda fmt: MoeGemvConfig(num_warps=2),
}


# --sweep: SWEEP's shapes that the sm_90 SASS (moe_sass --sweep) gives a chance at one token,
# a case (fewer issued instructions, or more programs an SM; the default first): a device
# call compiles each anew, a few seconds a shape
SHORTLIST = {
    "qwen3-30b-a3b gate+up": [(4, 128, 4), (2, 128, 1), (2, 128, 2), (8, 128, 8), (16, 128, 8),
                              (4, 64, 2)],
    "qwen3-30b-a3b down": [(16, 128, 4), (4, 128, 2), (4, 128, 1), (8, 128, 2), (16, 128, 8),
                           (32, 128, 8)],
    "gpt-oss-20b gate+up": [(4, 128, 2), (2, 128, 1), (4, 128, 1), (8, 128, 2), (16, 128, 4),
                            (4, 256, 2)],
    "gpt-oss-20b down": [(16, 128, 4), (4, 128, 2), (8, 128, 2), (16, 128, 8), (32, 128, 8),
                         (4, 256, 2)],
}  # fmt: skip


# --one-token: each case at one token, the kernel reading the grouping at its default shape
# against (label, rows, warps):
#   "slots": the down's one-token kernel (moe_one_token.py; the wide shapes hold one program an
#            SM with all of its bytes in flight, the narrow ones several), where a row fits one
#            split;
#   "ids":   moe_gemv's kernel reading each slot's expert from the routing's ids (ONE_TOKEN: 70
#            registers for Qwen3's gate/up at 4 rows x 4 warps where the grouping's reads take
#            95, 72 for its down at 16 x 4 against 122);
#   "slots-8", "ids-8": the same downs reading h in 8 bits, quantized before the timed calls
#            (what a down costs when it no longer rounds h itself);
#   "dense": moe_down_dp4a.py's down (expert_down's default for Q4_K and Q6_K: one integer
#            GEMV over the k experts' rows, h rounded by its own launch, which is timed).
ONE_TOKEN_SHAPES = {
    "down": [("slots", 16, 8), ("slots", 16, 16), ("slots", 8, 8), ("ids", 16, 4), ("ids", 8, 2),
             ("ids", 4, 2), ("slots-8", 16, 8), ("ids-8", 8, 2), ("dense", 4, 4),
             ("dense", 2, 2), ("dense", 8, 4)],
    "gate_up": [("ids", 4, 4), ("ids", 4, 2), ("ids", 2, 2), ("ids", 2, 1)],
}  # fmt: skip


def _one_token_sweep(cases: list[Case], copy_bw: float) -> list[dict]:
    """At one token, each gate/up and down: ONE_TOKEN_SHAPES against the kernel reading the
    grouping (its default shape), us and share of the copy rate."""
    rows = []
    for case in cases:
        shapes = ONE_TOKEN_SHAPES.get(case.kind, [])
        if case.kind == "down" and not takes_one_token(1, case.top_k, case.n_in):
            shapes = [shape for shape in shapes if not shape[0].startswith("slots")]
        if case.kind == "down" and not moe_down_dp4a.takes(case.fmt, case.n_in):
            shapes = [shape for shape in shapes if shape[0] != "dense"]
        if not shapes:  # the rows cases: no one-token shapes to compare
            continue
        variants = [("grouped", _default(case))]  # the shape a step of several tokens takes
        variants += [(label, MoeGemvConfig(r, num_warps=w)) for label, r, w in shapes]
        for label, config in variants:
            try:
                row = measure(case, 1, copy_bw, config, baseline=False,
                              one_token=label != "grouped",
                              slots_kernel=label.startswith(("slots", "dense")),
                              h_in_8_bits=label.endswith("-8"),
                              dense=label == "dense")  # fmt: skip
            except Exception as error:  # a shape that fails to compile or run: go on
                print(f"{case.name}, {config}: failed: {error!r}"[:300], flush=True)
                continue
            print(f"  ONE-TOKEN {case.name:24} {label:7} {config.block_n:2} rows "
                  f"{config.num_warps} warps {row['us']:7.2f} us {row['of_copy']:6.1%}",
                  flush=True)  # fmt: skip
            row["kernel"] = label
            rows.append(row)
    return rows


def _default(case: Case, tokens: int = 16) -> MoeGemvConfig:
    """The launch shape a step of `tokens` takes for this case: at one token the down whose
    row fits one split takes the one-token down's."""
    if case.kind == "down" and takes_one_token(tokens, case.top_k, case.n_in):
        return one_token_config()
    mode = {"gate_up": GATE_UP, "down": DOWN, "rows": ROWS}[case.kind]
    return default_config(case.fmt, mode, tokens == 1)


def best_configs(swept: list[dict]) -> dict[tuple[str, int], dict]:
    """The fastest launch shape of each case and token count."""
    best: dict[tuple[str, int], dict] = {}
    for row in swept:
        key = (row["case"], row["rows"])
        if key not in best or row["us"] < best[key]["us"]:
            best[key] = row
    return best


@functools.cache
def _copies(case: Case) -> list[list[ExpertWeight]]:
    """Enough copies of the case's matrices (gate and up: two) to spread over L2_DEFEAT_BYTES."""
    matrices = 2 if case.kind == "gate_up" else 1
    first = [_weights(case, m) for m in range(matrices)]
    one_copy = sum(w.packed.nbytes for w in first)
    n_copies = max(2, math.ceil(L2_DEFEAT_BYTES / one_copy))
    rest = [[_weights(case, 2 * c + m) for m in range(matrices)] for c in range(1, n_copies)]
    return [first, *rest]


def measure(case: Case, tokens: int, copy_bw: float, config: MoeGemvConfig | None = None,
            baseline: bool = True, one_token: bool = True, slots_kernel: bool = True,
            h_in_8_bits: bool = False, dense: bool = True) -> dict:  # fmt: skip
    matrices = 2 if case.kind == "gate_up" else 1
    copies = _copies(case)
    n_copies = len(copies)
    picks = _routings(case, tokens, seed=tokens)
    weights = torch.rand(tokens, case.top_k, device=DEVICE)
    routings = [
        route_experts(torch.from_numpy(p).to(DEVICE), weights, case.n_expert) for p in picks
    ]
    n_x = tokens * case.top_k if case.kind == "down" else tokens
    x = torch.randn(n_x, case.n_in, dtype=torch.float16, device=DEVICE) * 0.1
    xq = quantize_activation(x)
    h = x.reshape(tokens, case.top_k, case.n_in) if case.kind == "down" else x
    hq = xq if h_in_8_bits else None  # x is h's rows: its 8-bit form is h's

    def call(i: int) -> None:
        w = copies[i % n_copies]
        if case.kind == "gate_up":
            act = SWIGLU_OAI if case.fmt == "MXFP4" else SILU
            expert_gate_up(
                x, w[0], w[1], routings[i], act, quantized=xq, config=config, one_token=one_token
            )
        elif case.kind == "down":  # as the engine runs it: h in float, rounded inside
            expert_down(h, w[0], routings[i], quantized=hq, config=config, one_token=one_token,
                        slots_kernel=slots_kernel, dense=dense)  # fmt: skip
        else:
            expert_rows(x, w[0], routings[i], quantized=xq, config=config, one_token=one_token)

    def run() -> None:
        for i in range(ROUTINGS):
            call(i)

    seconds = time_calls(run) / ROUTINGS
    experts_read = float(np.mean([len(np.unique(p)) for p in picks]))
    n_out_rows = tokens if case.kind == "down" else tokens * case.top_k
    moved = (
        experts_read * copies[0][0].expert_nbytes * matrices
        + x.numel() * 2
        + n_out_rows * case.n_out * 2
    )
    torch_s = _torch_seconds(case, copies, picks, weights, x) if baseline else float("nan")
    return {
        "case": case.name, "format": case.fmt, "n_out": case.n_out, "n_in": case.n_in,
        "rows": tokens, "n_expert": case.n_expert, "top_k": case.top_k,
        "experts_read": experts_read, "us": seconds * 1e6, "gb_s": moved / seconds / 1e9,
        "of_copy": moved / seconds / copy_bw, "torch_us": torch_s * 1e6,
        "bits_per_weight": copies[0][0].packed.fmt.bits_per_weight,
        "config": dataclasses.asdict(config or _default(case, tokens)),
    }  # fmt: skip


def route_us(tokens: int, top_k: int, n_expert: int, method: str | None = None) -> float:
    """route_experts alone (one launch a layer and step), 20 calls a graph replay."""
    ids = torch.randint(0, n_expert, (tokens, top_k), device=DEVICE)

    def run() -> None:
        for _ in range(20):
            route_experts(ids, None, n_expert, method=method)

    return time_calls(run) / 20 * 1e6


def selection_us(tokens: int, top_k: int, n_expert: int) -> dict[str, float]:
    """Picking the experts from router logits and grouping them, 20 calls a graph replay: the
    torch ops (softmax, top-k, renormalize: engine/hearth/routing.select_experts) then
    route_experts, against select_and_route's one launch."""
    logits = torch.randn(tokens, n_expert, device=DEVICE)

    def in_torch() -> None:
        for _ in range(20):
            ids, weights = select_experts(logits, top_k, gating="softmax", normalize=True)
            route_experts(ids, weights, n_expert)

    def fused() -> None:
        for _ in range(20):
            select_and_route(logits, top_k, softmax_all=True, normalize=True)

    return {"torch + route_experts": time_calls(in_torch) / 20 * 1e6,
            "select_and_route": time_calls(fused) / 20 * 1e6}  # fmt: skip


def quantize_us(rows: int, k: int) -> float:
    """quantize_activation alone (x before gate/up: 1 row; h before down: k rows), 20 a replay."""
    x = torch.randn(rows, k, dtype=torch.float16, device=DEVICE)

    def run() -> None:
        for _ in range(20):
            quantize_activation(x)

    return time_calls(run) / 20 * 1e6


def empty_launch_us() -> float:
    """A Triton kernel that does nothing, one program: the floor of a launch in a graph."""
    out = torch.empty(1, dtype=torch.int32, device=DEVICE)

    def run() -> None:
        for _ in range(20):
            _empty_kernel[(1,)](out)

    return time_calls(run) / 20 * 1e6


@triton.jit
def _empty_kernel(out_ptr):
    pass


def step_us(tokens: int, config: MoeGemvConfig | None) -> float:
    """One Qwen3-30B-A3B layer's MoE part as the engine runs it from the router's logits:
    select_and_route, x in 8 bits, expert_gate_up, expert_down (h quantized inside); 8 steps a
    replay over the weight copies."""
    gate_case, down_case = CASES[0], CASES[1]
    gate_up, down = _copies(gate_case), _copies(down_case)
    logits = [torch.randn(tokens, gate_case.n_expert, device=DEVICE) for _ in range(ROUTINGS)]
    x = torch.randn(tokens, gate_case.n_in, dtype=torch.float16, device=DEVICE) * 0.1
    pdl = (config or MoeGemvConfig()).pdl  # x's quantization lets gate/up start early

    def run() -> None:
        for i in range(ROUTINGS):
            routing = select_and_route(logits[i], gate_case.top_k, softmax_all=True, normalize=True)
            xq = quantize_activation(x, let_next_start=pdl)
            gu = gate_up[i % len(gate_up)]
            h = expert_gate_up(x, gu[0], gu[1], routing, quantized=xq, config=config)
            expert_down(h, down[i % len(down)][0], routing, config=config)

    return time_calls(run) / ROUTINGS * 1e6


_MXFP4_VALUES = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)


@functools.cache
def _mxfp4_table(device: torch.device) -> torch.Tensor:  # made before any graph capture
    return torch.tensor(_MXFP4_VALUES, dtype=torch.float32, device=device)


def _expert_f16(w: ExpertWeight, e: int) -> torch.Tensor:
    """Expert e's matrix dequantized to f16 on the GPU, [n_out, n_in]."""
    rows = slice(e * w.n_out, (e + 1) * w.n_out)
    planes = {name: plane[rows] for name, plane in w.packed.planes.items()}
    if w.fmt == "MXFP4":
        scale = torch.exp2(planes["e"].float() - 128.0)  # [n_out, blocks]
        qs = planes["qs"].reshape(w.n_out, -1, 16).long()
        table = _mxfp4_table(qs.device)
        values = torch.cat([table[qs & 15], table[qs >> 4]], dim=-1) * scale[..., None]
        return values.reshape(w.n_out, w.n_in).half()
    from kernels.dequant import dequantize

    expert = PackedWeight(w.packed.fmt, w.n_out, w.n_in, planes)
    return dequantize(expert, torch.float16)


def pairs_by_expert(picked: np.ndarray, device) -> list[tuple[int, torch.Tensor]]:
    """(expert, the indices of the pairs that picked it) for each expert picked [T, k]."""
    flat = picked.reshape(-1)
    return [(int(e), torch.from_numpy(np.flatnonzero(flat == e)).to(device))
            for e in np.unique(flat)]  # fmt: skip


def torch_way(case: Case, ws: list[ExpertWeight], plan, weights: torch.Tensor,
              x: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """The step the torch way (module docstring): for each expert picked, its matrix in f16
    times the rows of the pairs that picked it; bias, activation and routing weights as the
    kernel applies them. plan: pairs_by_expert's."""
    tokens, top_k = weights.shape
    out = torch.empty(tokens * top_k, case.n_out, dtype=torch.float16, device=x.device)
    for e, pairs in plan:
        rows = x[pairs] if case.kind == "down" else x[pairs // top_k]
        y = (rows @ _expert_f16(ws[0], e).T).float()
        if ws[0].bias is not None:
            y += ws[0].bias[e]
        if case.kind == "gate_up":
            u = (rows @ _expert_f16(ws[1], e).T).float()
            if ws[1].bias is not None:
                u += ws[1].bias[e]
            y = (SWIGLU_OAI if case.fmt == "MXFP4" else SILU).apply(y, u)
        out[pairs] = y.half()
    if case.kind == "down":
        return (out.reshape(tokens, top_k, -1).float() * weights[..., None]).sum(1).half()
    return out.reshape(tokens, top_k, -1)


def _torch_seconds(case: Case, copies, picks, weights, x: torch.Tensor) -> float:
    """torch_way over the same routings and weight copies (the pairs grouped on the host, out
    of the timing)."""
    plans = [pairs_by_expert(p, x.device) for p in picks]

    def run() -> None:
        for i, plan in enumerate(plans):
            torch_way(case, copies[i % len(copies)], plan, weights, x)

    try:
        return time_calls(run) / len(picks)
    except RuntimeError as error:  # a step torch cannot capture in a graph: timed as launched
        print(f"{case.name}: torch timed without a CUDA graph ({error!r})"[:200], flush=True)
        return time_calls(run, graph=False) / len(picks)


def _table(rows: list[dict]) -> None:
    print(f"{'case':26} {'format':6} {'shape':>16} {'tokens':>6} {'experts':>7} {'us':>8} "
          f"{'GB/s':>7} {'of copy':>8} {'torch us':>9} {'x torch':>8}")  # fmt: skip
    for r in rows:
        shape = f"{r['n_expert']}x{r['n_out']}x{r['n_in']}"
        print(f"{r['case']:26} {r['format']:6} {shape:>16} {r['rows']:>6} "
              f"{r['experts_read']:7.1f} {r['us']:8.1f} {r['gb_s']:7.0f} {r['of_copy']:8.1%} "
              f"{r['torch_us']:9.1f} {r['torch_us'] / r['us']:7.2f}x")  # fmt: skip


def _sweep(cases: list[Case], tokens: list[int], sweep_tokens: list[int], copy_bw: float,
           defaults: list[dict], every_shape: bool) -> list[dict]:  # fmt: skip
    """At sweep_tokens the case's SHORTLIST (every_shape: all of SWEEP), at the other token
    counts the 4-row shape (FOUR_ROWS) where it is not the default; then a table a case and
    token count: the default's time (`defaults`: measure's rows), the 4-row shape's, and the
    fastest shape's (the default among them), with GB/s and the share of the copy rate: the
    defaults to set."""
    swept = []
    for case in cases:
        four = FOUR_ROWS[case.kind](case.fmt)
        for t in tokens:
            if t not in sweep_tokens:
                configs = [four] if four != _default(case) else []
            elif every_shape:
                configs = SWEEP
            else:
                configs = [MoeGemvConfig(*shape) for shape in SHORTLIST.get(case.name, [])]
            for config in configs:
                if config == _default(case):  # timed in `defaults`
                    continue
                try:
                    row = measure(case, t, copy_bw, config, baseline=False)
                except Exception as error:  # a shape that fails to compile or run: go on
                    print(f"{case.name}, {t} tokens, {config}: failed: {error!r}"[:300], flush=True)
                    continue
                swept.append(row)
                print(f"  {case.name:26} {t:>2} tokens  {_shape(row['config'])}  "
                      f"{row['us']:8.1f} us {row['gb_s']:6.0f} GB/s {row['of_copy']:6.1%}",
                      flush=True)  # fmt: skip
    by_default = {(r["case"], r["rows"]): r for r in defaults}
    print("\nDefault-config table (us; GB/s and share of the copy rate of the fastest):")
    print(f"  {'case':26} {'tokens':>6} {'default':>8} {'4 rows':>8} {'best':>8} "
          f"{'GB/s':>6} {'of copy':>7}  best shape")  # fmt: skip
    names = [c.name for c in cases]
    candidates = swept + [r for r in defaults if r["case"] in names]
    best = best_configs(candidates)
    for name, t in sorted(best, key=lambda key: (names.index(key[0]), key[1])):
        r = best[(name, t)]
        four = dataclasses.asdict(FOUR_ROWS[next(c.kind for c in cases if c.name == name)](
            r["format"]))  # fmt: skip
        four_us = next((x["us"] for x in candidates if (x["case"], x["rows"]) == (name, t)
                        and x["config"] == four), float("nan"))  # fmt: skip
        default_us = by_default.get((name, t), {}).get("us", float("nan"))
        print(f"  BEST {name:26} {t:>2} {default_us:8.1f} {four_us:8.1f} {r['us']:8.1f} "
              f"{r['gb_s']:6.0f} {r['of_copy']:7.1%}  {_shape(r['config'])}")  # fmt: skip
    return swept


def _shape(c: dict) -> str:
    return (f"block_n={c['block_n']} max_runs={c['max_runs']} num_warps={c['num_warps']} "
            f"pdl={c['pdl']}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernels.moe")
    parser.add_argument("--tokens", default="1,4,16", help="tokens a step, e.g. 1,16")
    parser.add_argument("--cases", help="case names to run, comma-separated (default: all)")
    parser.add_argument("--sweep", action="store_true", help="also the SHORTLIST's shapes")
    parser.add_argument("--sweep-all", action="store_true", help="--sweep with all of SWEEP")
    parser.add_argument("--sweep-tokens", default="1", help="token counts SWEEP runs at (else "
                        "the 4-row shape alone)")  # fmt: skip
    parser.add_argument(
        "--kernels-only",
        action="store_true",
        help="the expert GEMV rows only: no routing, launch or step timings",
    )
    parser.add_argument("--one-token", action="store_true",
                        help="at one token, gate/up and down from the routing's ids and the "
                        "one-token down (ONE_TOKEN_SHAPES) against the grouping "
                        "read")  # fmt: skip
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name(0)
    copy_bw = copy_bandwidth()
    print(f"device: {device}; device-to-device copy: {copy_bw / 1e9:.0f} GB/s (read + write)")
    wanted = set(args.cases.split(",")) if args.cases else None
    cases = [c for c in CASES if not wanted or c.name in wanted]
    tokens = [int(t) for t in args.tokens.split(",")]
    rows = []
    for case in cases:
        for t in tokens:
            try:
                rows.append(measure(case, t, copy_bw, baseline=not args.kernels_only))
            except Exception as error:  # report it and go on to the next figure
                print(f"{case.name}, {t} tokens: failed: {error!r}"[:300], flush=True)
    print("\nExpert GEMV, default launch shapes (bytes of the experts picked + x + output over "
          "time; x in 8 bits, the down's h in float)")  # fmt: skip
    _table(rows)
    swept = []
    if args.sweep or args.sweep_all:
        print("\nLaunch shapes; torch not timed", flush=True)
        sweep_tokens = [int(t) for t in args.sweep_tokens.split(",")]
        main_cases = [c for c in cases if c.name in SHORTLIST]
        swept = _sweep(main_cases, tokens, sweep_tokens, copy_bw, rows, args.sweep_all)
    extras: dict = {}
    if args.one_token:
        print("\nOne token: the grouped down against the one-token down's shapes", flush=True)
        extras["one_token"] = _one_token_sweep(cases, copy_bw)
    if not args.kernels_only:
        extras |= _launch_timings(tokens, args.sweep)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "copy_gb_s": copy_bw / 1e9, "moe": rows,
                       "moe_sweep": swept, **extras}, f, indent=1)  # fmt: skip
    return 0


def _launch_timings(tokens: list[int], sweep: bool) -> dict:
    """route_experts, the selection, the small launches alone, and the Qwen3 MoE step."""
    shapes = ((1, 8, 128), (4, 8, 128), (16, 8, 128), (1, 4, 32))
    routes = {f"{t}x{k} of {e}": route_us(t, k, e) for t, k, e in shapes}
    print("route_experts alone: " + ", ".join(f"{k}: {us:.1f} us" for k, us in routes.items()))
    if sweep:
        for method in ("compare", "sort"):
            timed = {f"{t}x{k} of {e}": route_us(t, k, e, method) for t, k, e in shapes}
            print(f"route_experts by {method}: "
                  + ", ".join(f"{k}: {us:.1f} us" for k, us in timed.items()))  # fmt: skip
            routes[method] = timed
    selections = {f"{t}x{k} of {e}": selection_us(t, k, e) for t, k, e in shapes}
    for shape, timed in selections.items():
        print(f"experts picked and grouped, {shape}: "
              + ", ".join(f"{k} {us:.1f} us" for k, us in timed.items()))  # fmt: skip
    launches = {"empty Triton kernel": empty_launch_us(),
                "quantize x 1x2048": quantize_us(1, 2048),
                "quantize h 8x768": quantize_us(8, 768),
                "quantize h 128x768": quantize_us(128, 768)}  # fmt: skip
    print("launches alone: " + ", ".join(f"{k}: {us:.1f} us" for k, us in launches.items()))
    steps = {}
    step_configs = [None, *(SWEEP[:1] if sweep else [])]  # and without pdl
    for t in tokens:
        for config in step_configs:
            label = f"{t} tokens, {'default' if config is None else config}"
            try:
                steps[label] = step_us(t, config)
            except Exception as error:
                print(f"step {label}: failed: {error!r}"[:300], flush=True)
    print("\nQwen3-30B-A3B MoE step (select and route + quantize x + gate/up + down, h quantized "
          "inside):")  # fmt: skip
    for label, us in steps.items():
        print(f"  {label}: {us:.1f} us")
    return {"route_us": routes, "selection_us": selections, "launch_us": launches,
            "step_us": steps}  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
