"""A mixture-of-experts layer's GPU buffers for a chunk of rows on the Hearth engine
(ops.KernelsOps.moe_ffn): the expert GEMV's for a chunk of up to EXPERT_PAIRS_PER_LAUNCH
(token, expert) pairs, the grouped GEMM's (kernels/moe_grouped_gemm.py) for a longer one. Part
of engine/planner/hearth_memory.py's workspace; torch-free, as that module is."""

from __future__ import annotations

from engine.hearth.config import ModelConfig

# (token, expert) pairs one expert GEMV launch takes (kernels/moe_routing.py MAX_PAIRS; a test
# keeps them equal: this module stays torch-free)
EXPERT_PAIRS_PER_LAUNCH = 256
# runs of 16 weights an expert GEMV program reads of a row (kernels/moe_gemv.py MoeGemvConfig)
_EXPERT_MAX_RUNS = 128
# the grouped GEMM's largest block of pairs (kernels/moe_grouped_gemm.py default_config) and
# its counting tables' bound (MAX_CHUNKS chunks x the experts padded to a power of two, 256)
GROUPED_BLOCK_M = 128
_GROUPED_HISTOGRAM = 64 * 256


def _expert_splits(n_in: int) -> int:
    """How many splits of K the expert GEMV reads a row of n_in weights in (moe_gemv.py
    _runs_per_split: one up to 128 runs of 16, else runs of 128 or 64, whichever wastes less)."""
    runs = n_in // 16
    if runs <= _EXPERT_MAX_RUNS:
        return 1
    half = _EXPERT_MAX_RUNS // 2
    waste = {nr: -(-runs // nr) * nr - runs for nr in (_EXPERT_MAX_RUNS, half)}
    per_split = min(waste, key=lambda nr: (waste[nr], -nr))
    return -(-runs // per_split)


def moe_workspace(cfg: ModelConfig, rows: int, activation_bytes: int) -> int:
    """A mixture-of-experts layer's buffers for `rows` tokens (ops.KernelsOps.moe_ffn), 0 for
    a dense model: the router's logits, the routing (int32 ids, float32 weights, the tables
    grouping the pairs), x and h in 8 bits (about 1.4 bytes a value: codes, a scale per 32
    and a sum per 16), gate/up's float32 partials (two channels per split of K) and h, down's
    float32 partials and its output, for one launch slice of at most EXPERT_PAIRS_PER_LAUNCH
    pairs, and every slice's output until they are concatenated."""
    moe = cfg.moe
    if moe is None:
        return 0
    k, n_ff, n_embd = moe.n_expert_used, moe.n_ff_exp, cfg.n_embd
    act = activation_bytes
    if rows * k > EXPERT_PAIRS_PER_LAUNCH:
        return _grouped_moe_workspace(cfg, rows, activation_bytes)
    router = rows * moe.n_expert * act + rows * k * (4 + 4)
    tokens = min(rows, max(1, EXPERT_PAIRS_PER_LAUNCH // k))
    pairs = tokens * k
    routing = 4 * (pairs + 3 * min(moe.n_expert, pairs) + 1)
    in_8_bits = 2 * (tokens * n_embd + pairs * n_ff)
    gate_up = 2 * _expert_splits(n_embd) * pairs * n_ff * 4 + pairs * n_ff * act
    down = _expert_splits(n_ff) * pairs * n_embd * 4 + tokens * n_embd * act
    outputs = 2 * rows * n_embd * act if rows > tokens else 0
    return router + routing + in_8_bits + gate_up + down + outputs


def _grouped_moe_workspace(cfg: ModelConfig, rows: int, activation_bytes: int) -> int:
    """A chunk of more than EXPERT_PAIRS_PER_LAUNCH pairs (kernels/moe_grouped_gemm.py through
    KernelsMoeOps.moe_ffn): the router's logits with torch's selection (a float32 copy and its
    softmax, int64 ids and float32 weights), the pairs sorted into blocks (int32: every pair,
    each expert's last block padded, at most GROUPED_BLOCK_M rows, and the count tables), h in
    f16 for every pair, down's float32 row per pair, their float32 sum over the slots and the
    output."""
    moe = cfg.moe
    assert moe is not None
    k, n_ff, n_embd, n_expert = moe.n_expert_used, moe.n_ff_exp, cfg.n_embd, moe.n_expert
    act = activation_bytes
    pairs = rows * k
    router = rows * n_expert * (act + 2 * 4) + pairs * (8 + 4)
    routing = 4 * (pairs + n_expert * GROUPED_BLOCK_M + _GROUPED_HISTOGRAM + 2 * n_expert)
    return router + routing + pairs * n_ff * 2 + pairs * n_embd * 4 + rows * n_embd * (4 + act)
