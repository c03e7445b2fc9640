"""Routing chosen before the FFN norm (kernels/router_beside_wo.py, kernels/moe_picks.py): the
folded rows against float64, the scores and picks against the router's logits on the norm's
output, the projection's own output unchanged, and the picks and the norm's routing weights
against select_and_route's."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernels import gemv, reference
from kernels.act_quant import quantize_activation
from kernels.errors import UnsupportedTensor
from kernels.moe_one_token_rule import folded_bytes
from kernels.moe_picks import pick_top_k
from kernels.moe_routing import select_and_route
from kernels.norms import RouteWeights, rms_norm_quantized
from kernels.packed_weight import PackedWeight
from kernels.router_beside_wo import fold_router, router_scores, wo_and_scores

EPS = 1e-6


def _case(fmt: str, n_embd: int, n_in: int, n_expert: int, seed: int, device: str, bias: bool):
    gen = torch.Generator().manual_seed(seed)
    raw = reference.random_weight_bytes(fmt, n_embd, n_in, seed=seed)
    wo = PackedWeight.from_gguf(raw, fmt, (n_embd, n_in), device=device)
    wo_dense = torch.from_numpy(reference.dequantize_weight(raw, fmt, (n_embd, n_in))).double()
    router = torch.randn(n_expert, n_embd, generator=gen) / n_embd**0.5
    norm_w = torch.rand(n_embd, generator=gen) + 0.5
    bo = torch.randn(n_embd, generator=gen) if bias else None
    a = torch.randn(1, n_in, generator=gen)
    residual = torch.randn(1, n_embd, generator=gen) * 4
    return wo, wo_dense, router, norm_w, bo, a, residual


@pytest.mark.parametrize("bias", [False, True])
def test_the_folded_rows_are_the_router_times_the_norm_and_the_projection(bias):
    _, wo_dense, router, norm_w, bo, _, _ = _case("Q4_K", 256, 512, 8, 1, "cpu", bias)
    folded = fold_router(router, norm_w, wo_dense.float(), bo, chunk=192)  # chunks not whole
    scaled = router.double() * norm_w.double()
    expected = torch.cat([scaled, scaled @ wo_dense], dim=1)
    assert folded.rows.dtype == torch.float16 and folded.rows.shape == (8, 256 + 512)
    torch.testing.assert_close(folded.rows.double(), expected, rtol=1e-3, atol=1e-7)
    offset = scaled @ bo.double() if bias else torch.zeros(8, dtype=torch.float64)
    torch.testing.assert_close(folded.offset.double(), offset, rtol=1e-6, atol=1e-6)
    assert folded.nbytes == sum(folded_bytes(8, 256, 512)) == 8 * 768 * 2 + 8 * 4


def test_a_fold_past_float16_is_refused():
    router = torch.full((4, 256), 300.0)
    with pytest.raises(UnsupportedTensor, match="float16"):
        fold_router(router, torch.ones(256), torch.ones(256, 256))


@pytest.mark.parametrize(("fmt", "bias"), [("Q4_K", False), ("Q6_K", True)])
def test_scores_are_the_routers_logits_up_to_the_norm(fmt, bias, device):
    """router_scores' parts, then wo_and_scores: the projection's output is the integer
    GEMV's, bit for bit; the scores are the offset plus the parts; times the norm's 1/rms they
    are the router's logits on the norm's output (float64, from the projection's own output),
    within the float16 folding's rounding; the picks are the top k, in order."""
    n_embd, n_in, n_expert, k = 256, 2048 + 512, 16, 4  # a's groups in 3 splits, the last short
    wo, _, router, norm_w, bo, a, residual = _case(fmt, n_embd, n_in, n_expert, 3, device, bias)
    wo_dense = wo.dequantize().to(device, torch.float32)
    folded = fold_router(router.to(device), norm_w.to(device), wo_dense,
                         None if bo is None else bo.to(device))  # fmt: skip
    config = gemv.default_config(fmt, 1)
    q = quantize_activation(a.to(device))
    parts = router_scores(q, folded, residual.to(device))
    assert parts.shape == (1 + 3, n_expert)
    out, picked = wo_and_scores(a.to(device), wo, q, parts, folded.offset, k, config)
    assert torch.equal(out, gemv.quant_matmul(a.to(device), wo, config, quantized=q))
    z = picked.scores.cpu().double()
    expected_z = folded.offset.cpu().double() + parts.cpu().double().sum(0)
    torch.testing.assert_close(z, expected_z, rtol=1e-6, atol=1e-5)
    h = residual.double() + out.cpu().double() + (0 if bo is None else bo.double())
    inv_rms = 1 / torch.sqrt((h * h).mean() + EPS)
    logits = (router.double() @ (h * inv_rms * norm_w.double()).T).reshape(-1)
    assert ((z * inv_rms) - logits).abs().max() < 2e-3 * logits.abs().max()
    top = logits.argsort(descending=True)
    margin = logits[top[k - 1]] - logits[top[k]]
    assert margin > 1e-2 * logits.abs().max(), "pick another seed: a near-tie at the k-th"
    assert picked.ids.cpu().reshape(-1).tolist() == top[:k].tolist()  # in slot order
    assert torch.equal(picked.top.cpu(), picked.scores.cpu()[picked.ids.cpu().long()])


def test_scores_take_one_row_of_the_integer_path(device):
    wo, wo_dense, router, norm_w, _, a, residual = _case("Q4_K", 256, 512, 8, 5, device, False)
    folded = fold_router(router.to(device), norm_w.to(device), wo_dense.float().to(device))
    q = quantize_activation(a.to(device))
    parts = router_scores(q, folded, residual.to(device))
    with pytest.raises(UnsupportedTensor, match="one row"):
        wo_and_scores(a.repeat(2, 1).to(device), wo, None, parts, folded.offset, 2,
                      gemv.default_config("Q4_K", 2))  # fmt: skip
    with pytest.raises(UnsupportedTensor, match="residual of 128"):
        router_scores(q, folded, residual[:, :128].to(device))
    with pytest.raises(UnsupportedTensor, match="top-9"):
        wo_and_scores(a.to(device), wo, q, parts, folded.offset, 9, gemv.default_config("Q4_K", 1))


@triton.jit
def _pick_kernel(z_ptr, ids_ptr, top_ptr, n_expert, K: tl.constexpr, E_PAD: tl.constexpr):
    e = tl.arange(0, E_PAD)
    z = tl.load(z_ptr + e, mask=e < n_expert, other=0.0)
    pick_top_k(z, ids_ptr, top_ptr, n_expert, K, E_PAD)


@pytest.mark.parametrize(
    ("k", "softmax_all", "normalize", "ties"),
    [(8, True, True, False), (6, True, False, True), (2, False, False, True)],
)
def test_picks_and_weights_are_select_and_routes(k, softmax_all, normalize, ties, device):
    """pick_top_k on z (ties across the k-th place, a NaN) picks select_and_route's ids on the
    logits inv_rms z, in its slot order; the norm's weights of those picks are its weights."""
    n_expert = 13  # not a power of two: padding past it is never picked
    gen = torch.Generator().manual_seed(11 + k)
    z = torch.randn(n_expert, generator=gen) * 3
    if ties:
        order = z.argsort(descending=True)
        z[order[k - 1 : k + 2]] = z[order[k - 1]].item()
        z[order[0]] = float("nan")  # ranks as -inf
    z = z.to(device)
    ids = torch.empty(1, k, dtype=torch.int32, device=device)
    top = torch.empty(1, k, dtype=torch.float32, device=device)
    _pick_kernel[(1,)](z, ids, top, n_expert, K=k, E_PAD=16)
    z_or_inf = torch.where(z.isnan(), float("-inf"), z)
    assert torch.equal(top.cpu(), z_or_inf.cpu()[ids.cpu().long()])
    gen_x = torch.Generator().manual_seed(3)
    x, r = (torch.randn(1, 64, generator=gen_x).to(device) for _ in "xr")
    weights = torch.empty(1, k, dtype=torch.float32, device=device)
    route = RouteWeights(z, top, weights, softmax_all=softmax_all, normalize=normalize)
    _, h, _ = rms_norm_quantized(x, torch.ones(64, device=device), EPS, r, route=route)
    inv_rms = (1 / torch.sqrt((h.double() ** 2).mean() + EPS)).float()
    logits = (z * inv_rms).reshape(1, -1)
    routing = select_and_route(logits, k, softmax_all=softmax_all, normalize=normalize)
    assert torch.equal(ids.cpu(), routing.ids.cpu().to(torch.int32))
    torch.testing.assert_close(weights.cpu(), routing.weights.cpu(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("seed", range(6))
def test_picks_on_scores_full_of_ties(seed, device):
    """Scores of a few distinct values (most of them tied, -0.0 beside 0.0, a NaN or two):
    pick_top_k takes the larger first and the lower id first on a tie, as a stable sort of
    the scores (a NaN as -inf) does."""
    gen = torch.Generator().manual_seed(seed)
    n_expert, k = 128, 8
    z = torch.randint(-2, 3, (n_expert,), generator=gen).float() * 0.5
    z[torch.randint(0, n_expert, (3,), generator=gen)] = -0.0
    z[torch.randint(0, n_expert, (seed % 3,), generator=gen)] = float("nan")
    ids = torch.empty(1, k, dtype=torch.int32, device=device)
    top = torch.empty(1, k, dtype=torch.float32, device=device)
    _pick_kernel[(1,)](z.to(device), ids, top, n_expert, K=k, E_PAD=n_expert)
    ranked = torch.where(z.isnan(), float("-inf"), z)
    expected = torch.sort(-ranked, stable=True).indices[:k]
    assert ids.cpu().reshape(-1).tolist() == expected.tolist()
    assert torch.equal(top.cpu().reshape(-1), ranked[expected])
