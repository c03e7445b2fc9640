"""The MoE prefill grouped GEMM (kernels/moe_grouped_gemm.py) against kernels/moe_reference.py
(gguf's dequantizer, float64): the chunk's pairs aligned to expert blocks (several routing
chunks, unused experts, one expert taking most pairs), gate+up in one launch for every expert
format and for two formats, gpt-oss's clamped SwiGLU with biases, the down projection's
routing-weighted sum, and the whole feed-forward."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import moe_reference as ref
from kernels.errors import UnsupportedTensor
from kernels.moe_gemv import SILU, SWIGLU_OAI
from kernels.moe_grouped_gemm import (
    GroupedConfig,
    align_pairs,
    default_config,
    grouped_down,
    grouped_gate_up,
    grouped_moe,
    max_blocks,
)
from tests.kernels.conftest import relative_error
from tests.kernels.test_moe_gemv import N_EXPERT, _experts, _x

# x and the weights in f16 before the tensor cores' products: about 1e-3 of a dot product
TOLERANCE = 4e-3
SMALL = GroupedConfig(block_m=16, block_n=32, ng=4, num_warps=4)
N_OUT = 40  # not whole tiles of rows
N_IN = {"Q4_K": 256, "Q5_K": 256, "Q6_K": 256, "Q8_0": 352, "MXFP4": 352, "Q5_0": 352}


def _ids(tokens: int, top_k: int, n_expert: int, seed: int, skew: bool = False):
    """Distinct experts per token; skew: expert 0 in every token and the top expert in none."""
    rng = np.random.default_rng(seed)
    if skew:
        pool = np.arange(1, n_expert - 1)
        rest = [rng.choice(pool, top_k - 1, replace=False) for _ in range(tokens)]
        return np.stack([np.concatenate([[0], r]) for r in rest])
    return np.stack([rng.choice(n_expert, top_k, replace=False) for _ in range(tokens)])


def _weights(ids: np.ndarray, seed: int) -> np.ndarray:
    w = np.random.default_rng(seed).random(ids.shape) + 0.1
    return (w / w.sum(axis=1, keepdims=True)).astype(np.float32)


def _unit_scale(dense: np.ndarray, size: float = 4.0) -> float:
    """x's scale that makes a product with these weights about `size` (random blocks' scales
    vary by format; h is stored in f16)."""
    return size / (np.sqrt(dense.shape[-1]) * np.sqrt(np.mean(dense**2)))


@pytest.mark.parametrize(
    ("tokens", "top_k", "n_expert", "block_m", "skew"),
    [(37, 3, 8, 16, False), (50, 4, 6, 16, True), (5, 2, 40, 32, False), (1, 1, 3, 16, False)],
)
def test_pairs_aligned_to_expert_blocks(tokens, top_k, n_expert, block_m, skew, device):
    ids = _ids(tokens, top_k, n_expert, seed=tokens, skew=skew)
    aligned = align_pairs(torch.from_numpy(ids).to(device), None, n_expert, block_m)
    count, block_end, slots = ref.aligned_pairs(ids, n_expert, block_m)
    np.testing.assert_array_equal(aligned.count.cpu().numpy(), count)
    np.testing.assert_array_equal(aligned.block_end.cpu().numpy(), block_end)
    assert block_end[-1] <= aligned.max_blocks == max_blocks(ids.size, n_expert, block_m)
    got = aligned.sorted_pairs.cpu().numpy()
    at = np.array(sorted(slots))
    np.testing.assert_array_equal(got[at], [slots[s] for s in at])


def test_long_chunks_route_in_wider_routing_chunks(device, monkeypatch):
    """At most MAX_CHUNKS routing programs (made 2 here): 300 pairs in 2 chunks of 256."""
    import kernels.moe_grouped_gemm

    monkeypatch.setattr(kernels.moe_grouped_gemm, "MAX_CHUNKS", 2)
    ids = _ids(100, 3, 8, seed=5, skew=True)
    aligned = align_pairs(torch.from_numpy(ids).to(device), None, 8, 16)
    _, block_end, slots = ref.aligned_pairs(ids, 8, 16)
    np.testing.assert_array_equal(aligned.block_end.cpu().numpy(), block_end)
    at = np.array(sorted(slots))
    np.testing.assert_array_equal(aligned.sorted_pairs.cpu().numpy()[at], [slots[s] for s in at])


@pytest.mark.parametrize("fmt", ["Q4_K", "Q6_K", "MXFP4", "Q8_0", "Q5_K", "Q5_0"])
def test_gate_up_silu_every_format(fmt, device, tokens=9, top_k=2):
    n_in = N_IN[fmt]
    gate, dg, _ = _experts(fmt, N_OUT, n_in, 1, device)
    up, du, _ = _experts(fmt, N_OUT, n_in, 2, device)
    ids = _ids(tokens, top_k, N_EXPERT, seed=3)
    x = _x(tokens, n_in, 4, scale=_unit_scale(dg))
    aligned = align_pairs(torch.from_numpy(ids).to(device), None, N_EXPERT, SMALL.block_m)
    h = grouped_gate_up(x.to(device), gate, up, aligned, SILU, config=SMALL)
    expected = ref.gate_up(x.numpy(), dg, du, ids).reshape(tokens * top_k, N_OUT)
    assert h.dtype == torch.float16
    assert relative_error(h.float().cpu().numpy(), expected) < TOLERANCE


def test_gate_up_of_two_formats_in_one_launch(device, tokens=6, top_k=2):
    gate, dg, _ = _experts("Q4_K", N_OUT, 256, 5, device)
    up, du, _ = _experts("Q6_K", N_OUT, 256, 6, device)
    ids = _ids(tokens, top_k, N_EXPERT, seed=7)
    x = _x(tokens, 256, 8, scale=min(_unit_scale(dg), _unit_scale(du)))
    aligned = align_pairs(torch.from_numpy(ids).to(device), None, N_EXPERT, SMALL.block_m)
    h = grouped_gate_up(x.to(device, torch.float16), gate, up, aligned, SILU, config=SMALL)
    expected = ref.gate_up(x.numpy(), dg, du, ids).reshape(tokens * top_k, N_OUT)
    assert relative_error(h.float().cpu().numpy(), expected) < TOLERANCE


def test_gate_up_gpt_oss_clamped_swiglu_with_biases(device, tokens=7, top_k=3):
    gate, dg, bg = _experts("MXFP4", N_OUT, 352, 9, device, bias=True)
    up, du, bu = _experts("MXFP4", N_OUT, 352, 10, device, bias=True)
    ids = _ids(tokens, top_k, N_EXPERT, seed=11)
    x = _x(tokens, 352, 12, scale=30.0)  # past the clamp's limit on both sides
    aligned = align_pairs(torch.from_numpy(ids).to(device), None, N_EXPERT, SMALL.block_m)
    h = grouped_gate_up(x.to(device), gate, up, aligned, SWIGLU_OAI, config=SMALL)
    expected = ref.gate_up(x.numpy(), dg, du, ids, "swiglu_oai", bg, bu)
    assert np.abs(ref.expert_rows(x.numpy(), dg, ids, bg)).max() > 2 * ref.OAI_LIMIT
    assert relative_error(h.float().cpu().numpy(), expected.reshape(-1, N_OUT)) < TOLERANCE


@pytest.mark.parametrize(("fmt", "bias"), [("Q6_K", False), ("Q4_K", False), ("MXFP4", True)])
def test_down_sums_the_slots_with_their_weights(fmt, bias, device, tokens=8, top_k=3):
    n_ff = N_IN[fmt]
    w, dw, b = _experts(fmt, N_OUT, n_ff, 13, device, bias=bias)
    ids = _ids(tokens, top_k, N_EXPERT, seed=14, skew=True)
    weights = _weights(ids, 15)
    h = _x(tokens * top_k, n_ff, 16)
    aligned = align_pairs(
        torch.from_numpy(ids).to(device), torch.from_numpy(weights).to(device), N_EXPERT,
        SMALL.block_m,
    )  # fmt: skip
    out = grouped_down(h.to(device), w, aligned, config=SMALL)
    expected = ref.down(h.numpy().reshape(tokens, top_k, n_ff), dw, ids, weights, b)
    assert out.shape == (tokens, N_OUT) and out.dtype == torch.float32
    assert relative_error(out.cpu().numpy(), expected) < TOLERANCE


def test_whole_feed_forward(device, tokens=11, top_k=2):
    gate, dg, _ = _experts("Q4_K", 256, 256, 17, device)  # n_ff 256: whole K-quant rows of down
    up, du, _ = _experts("Q4_K", 256, 256, 18, device)
    down, dd, _ = _experts("Q6_K", 256, 256, 19, device)
    ids = _ids(tokens, top_k, N_EXPERT, seed=20)
    weights = _weights(ids, 21)
    x = _x(tokens, 256, 22, scale=_unit_scale(dg))
    cfg = GroupedConfig(block_m=16, block_n=64, ng=8, num_warps=4)
    out = grouped_moe(
        x.to(device), gate, up, down, SILU, torch.from_numpy(ids).to(device),
        torch.from_numpy(weights).to(device), config=cfg,
    )  # fmt: skip
    expected = ref.moe(x.numpy(), dg, du, dd, ids, weights)
    assert out.dtype == torch.float32
    assert relative_error(out.cpu().numpy(), expected) < TOLERANCE


def test_default_block_follows_the_pairs_per_expert():
    assert default_config(512 * 4, 32).block_m == 128  # gpt-oss-20b, 512 tokens: 64 an expert
    assert default_config(512 * 8, 128).block_m == 64  # Qwen3-30B-A3B, 512 tokens: 32
    assert default_config(256 * 8, 128).block_m == 32  # 16 an expert
    assert default_config(64 * 8, 128).block_m == 16


def test_refusals_say_what_to_do(device):
    gate, _, _ = _experts("Q4_K", N_OUT, 256, 1, device)
    ids = torch.zeros(3, 2, dtype=torch.int64, device=device)
    with pytest.raises(UnsupportedTensor, match="pass integers \\[tokens, top_k\\]"):
        align_pairs(ids.reshape(-1), None, N_EXPERT, 16)
    with pytest.raises(UnsupportedTensor, match="for ids"):
        align_pairs(ids, torch.ones(3, 3, device=device), N_EXPERT, 16)
    aligned = align_pairs(ids, None, N_EXPERT, 16)
    with pytest.raises(UnsupportedTensor, match="expected \\(3, 256\\)"):
        grouped_gate_up(torch.zeros(3, 128, device=device), gate, gate, aligned, SILU)
    with pytest.raises(UnsupportedTensor, match="needs the routing weights"):
        grouped_down(torch.zeros(6, 256, device=device), gate, aligned)
    with pytest.raises(UnsupportedTensor, match="blocks of 16 for a launch of 32"):
        grouped_gate_up(
            torch.zeros(3, 256, device=device), gate, gate, aligned, SILU,
            config=GroupedConfig(block_m=32),
        )  # fmt: skip
