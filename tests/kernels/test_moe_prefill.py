"""kernels.moe_prefill (a prefill chunk's experts, dequantized a slice at a time, on tensor
cores) against the float64 reference of the whole feed-forward (kernels/moe_reference.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import moe_reference as ref
from kernels.moe_gemv import SILU, SWIGLU_OAI, ExpertWeight
from kernels.moe_prefill import _expert_bytes, experts_per_slice, moe_prefill
from tests.kernels.conftest import relative_error

N_EXPERT = 6


def _weight(fmt: str, n_out: int, n_in: int, seed: int, device: str, bias: bool):
    raw = ref.random_expert_bytes(fmt, N_EXPERT, n_out, n_in, seed)
    dense = ref.dequantize_experts(raw, fmt, (N_EXPERT, n_out, n_in))
    b = np.random.default_rng(seed + 3).standard_normal((N_EXPERT, n_out)) if bias else None
    return (
        ExpertWeight.from_gguf(raw, fmt, (N_EXPERT, n_out, n_in), device=device, bias=b),
        dense,
        b,
    )


@pytest.mark.parametrize(
    ("formats", "activation", "bias", "picks", "budget"),
    [
        (("Q4_K", "Q4_K", "Q6_K"), SILU, False, "random", None),  # Qwen3's Q4_K_M experts
        (("Q4_K", "Q4_K", "Q6_K"), SILU, False, "random", 1),  # one expert a slice
        (("MXFP4",) * 3, SWIGLU_OAI, True, "random", None),  # gpt-oss, biases
        (("Q8_0",) * 3, SILU, False, "same", 1),  # every token the same experts: padding none
    ],
)
def test_prefill_experts_match_the_reference(formats, activation, bias, picks, budget, device):
    n_embd, n_ff, tokens, top_k = 256, 256, 9, 3  # K-quants: rows of whole 256-blocks
    if "MXFP4" in formats or "Q8_0" in formats:
        n_embd, n_ff = 64, 96
    gate, dense_gate, bg = _weight(formats[0], n_ff, n_embd, 1, device, bias)
    up, dense_up, bu = _weight(formats[1], n_ff, n_embd, 2, device, bias)
    down, dense_down, bd = _weight(formats[2], n_embd, n_ff, 3, device, bias)
    rng = np.random.default_rng(4)
    if picks == "same":
        ids = np.tile(np.array([[4, 0, 2]]), (tokens, 1))
    else:
        ids = np.stack([rng.choice(N_EXPERT, top_k, replace=False) for _ in range(tokens)])
    weights = rng.random((tokens, top_k)).astype(np.float32) + 0.1
    x = rng.standard_normal((tokens, n_embd)).astype(np.float32) * 0.5
    extra = {} if budget is None else {"budget": budget}
    got = moe_prefill(
        torch.from_numpy(x).to(device), gate, up, down, torch.from_numpy(ids).to(device),
        torch.from_numpy(weights).to(device), activation, dtype=torch.float32, **extra,
    )  # fmt: skip
    h = ref.gate_up(x, dense_gate, dense_up, ids, activation.kind, bg, bu)
    expected = ref.down(h, dense_down, ids, weights, bd)
    assert got.shape == (tokens, n_embd)
    assert relative_error(got.cpu().numpy(), expected) < 1e-4


def test_slices_shrink_as_the_busiest_expert_grows(device):
    """The budget holds the slice's weights and its padded rows: more rows a slice, fewer
    experts in it, never fewer than one."""
    gate, _, _ = _weight("Q4_K", 256, 256, 1, device, False)
    down, _, _ = _weight("Q6_K", 256, 256, 3, device, False)
    budget = 3 * _expert_bytes(gate, down, 10)
    assert experts_per_slice(gate, down, 10, budget) == 3
    assert experts_per_slice(gate, down, 40, budget) < 3
    assert experts_per_slice(gate, down, 10_000, budget) == 1
    assert experts_per_slice(gate, down, 1, 1 << 40) == N_EXPERT
