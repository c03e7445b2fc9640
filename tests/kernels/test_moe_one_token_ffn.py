"""A one-token step's routed experts in one launch (kernels/moe_one_token_ffn.py): the bits of
moe_gemv's gate/up and moe_one_token's down launched apart, and the reference's value; several
launches on one counter; which steps take it."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kernels import moe_gemv
from kernels import moe_reference as ref
from kernels.act_quant import quantize_activation
from kernels.availability import interpret_mode
from kernels.moe_gemv import (
    SILU,
    SWIGLU_OAI,
    MoeGemvConfig,
    expert_down,
    expert_ffn,
    expert_gate_up,
)
from kernels.moe_one_token_ffn import FfnShape
from tests.kernels.conftest import relative_error
from tests.kernels.test_moe_gemv import TOLERANCE, _experts, _routing, _x, _x8

# few, wide tiles in Triton's interpreter (it pays per tile; its sums do not depend on the
# tile), the engine's shapes on the GPU: for the one launch and for the two it is compared with
SHAPE = FfnShape(block_a=128, block_b=32) if interpret_mode() else FfnShape()
APART = MoeGemvConfig(block_n=64, num_warps=4) if interpret_mode() else None

# (gate/up format, down format, n_embd, n_ff, top_k): Qwen3-30B-A3B's formats (n_ff 768: 24
# groups of 32 in a tile of 32), k not a power of two, blocks of 32, MXFP4
_CASES = [
    ("Q4_K", "Q6_K", 256, 768, 8),
    ("Q4_K", "Q4_K", 512, 256, 6),
    ("Q5_K", "Q8_0", 256, 352, 3),
    ("Q8_0", "Q4_1", 352, 352, 4),
    ("MXFP4", "MXFP4", 352, 352, 2),
]


def _ffn_case(fmt_gu, fmt_down, n_embd, n_ff, top_k, seed, device):
    gate, dense_gate, _ = _experts(fmt_gu, n_ff, n_embd, seed, device)
    up, dense_up, _ = _experts(fmt_gu, n_ff, n_embd, seed + 1, device)
    down, dense_down, _ = _experts(fmt_down, n_embd, n_ff, seed + 2, device)
    routing, ids, weights = _routing(1, top_k, seed=seed + 3, device=device)
    return (gate, up, down, routing), (dense_gate, dense_up, dense_down, ids, weights)


@pytest.mark.parametrize(("fmt_gu", "fmt_down", "n_embd", "n_ff", "top_k"), _CASES)
def test_one_launch_gives_the_two_launches_bits(fmt_gu, fmt_down, n_embd, n_ff, top_k, device):
    """The two launches' bits (where their tiles are laid out alike: a Q4_K gate/up's 4 rows
    and 4 warps on the GPU, every shape in the interpreter), and the reference's value."""
    (gate, up, down, routing), (dg, du, dd, ids, weights) = _ffn_case(
        fmt_gu, fmt_down, n_embd, n_ff, top_k, 31, device
    )
    x = _x(1, n_embd, seed=32, scale=0.2).to(device)
    xq = quantize_activation(x)
    one = expert_ffn(x, gate, up, down, routing, quantized=xq, shape=SHAPE)
    h = expert_gate_up(x, gate, up, routing, quantized=xq, config=APART)
    apart = expert_down(h, down, routing)
    assert one.shape == (1, n_embd) and one.dtype == x.dtype
    if interpret_mode() or fmt_gu == "Q4_K":
        assert torch.equal(one, apart)
    h_ref = ref.gate_up(_x8(x.cpu()), dg, du, ids)  # [1, k, n_ff]
    expected = ref.down(_x8(torch.from_numpy(h_ref.reshape(top_k, n_ff))).reshape(1, top_k, -1),
                        dd, ids, weights)  # fmt: skip
    assert relative_error(one.cpu(), expected) < TOLERANCE


def test_launches_share_a_counter_and_replay_as_they_are(device):
    """Launches of one shape count on from where the last left off (a CUDA graph replays them
    unchanged): each takes n_tiles + programs numbers and adds its gate/up tiles to `done`;
    another shape keeps a counter of its own."""
    from kernels import moe_one_token_ffn

    moe_one_token_ffn._COUNTERS.clear()
    big = _ffn_case("Q4_K", "Q6_K", 256, 768, 8, 41, device)[0]
    small = _ffn_case("Q8_0", "Q8_0", 256, 256, 2, 45, device)[0]
    x = _x(1, 256, seed=42, scale=0.2).to(device)
    first = expert_ffn(x, *big, shape=SHAPE)
    other = expert_ffn(x, *small, shape=SHAPE)
    again = expert_ffn(x, *big, shape=SHAPE)
    assert torch.equal(first, again) and not torch.equal(first, other)
    n_a = 8 * (768 // SHAPE.block_a)
    n_tiles = n_a + 256 // SHAPE.block_b
    (numbers, counter), (_, counter_small) = (
        (key[1], c) for key, c in moe_one_token_ffn._COUNTERS.items()
    )
    assert numbers > n_tiles and counter.tolist() == [2 * numbers, 2 * n_a]
    assert counter_small[1].item() == 2 * (256 // SHAPE.block_a)  # k = 2, one launch


def test_the_swiglu_of_gpt_oss_without_biases(device):
    """gpt-oss's clamped activation through the one launch (its biases keep it on two launches
    in the engine; the activation itself is the gate/up's)."""
    (gate, up, down, routing), _ = _ffn_case("MXFP4", "MXFP4", 256, 256, 4, 51, device)
    x = _x(1, 256, seed=52, scale=2.0).to(device)  # gate and up past the clamp at 7
    one = expert_ffn(x, gate, up, down, routing, SWIGLU_OAI, shape=SHAPE)
    h = expert_gate_up(x, gate, up, routing, SWIGLU_OAI, config=APART)
    apart = expert_down(h, down, routing)
    assert relative_error(one.cpu(), apart.cpu()) < TOLERANCE and one.abs().max() > 0


@pytest.mark.parametrize(
    ("change", "taken"),
    [({}, True), ({"tokens": 2}, False), ({"bias": True}, False), ({"host": True}, False),
     ({"up_fmt": "Q6_K"}, False), ({"n_ff": 2816}, False), ({"switch": False}, False),
     ({"top_k": 16}, False)],
)  # fmt: skip
def test_which_steps_take_it(change, taken, device, monkeypatch):
    """One token, at most 8 picks, gate and up of one format, no biases, every matrix in device
    memory, rows whole in one split, and the module's switch on."""
    n_ff = change.get("n_ff", 256)
    top_k = change.get("top_k", 4)
    gate, _, _ = _experts("Q4_K", n_ff, 256, 61, device, bias=change.get("bias", False))
    up, _, _ = _experts(change.get("up_fmt", "Q4_K"), n_ff, 256, 62, device)
    down, _, _ = _experts("Q6_K", 256, n_ff, 63, device)
    if change.get("host"):
        down = dataclasses.replace(down, in_host_memory=True)
    monkeypatch.setattr(moe_gemv, "ONE_LAUNCH", change.get("switch", True))
    routing, _, _ = _routing(change.get("tokens", 1), top_k, seed=64, device=device,
                             n_expert=16 if top_k > 8 else 8)  # fmt: skip
    assert moe_gemv.takes_one_launch(gate, up, down, routing, SILU) == taken
