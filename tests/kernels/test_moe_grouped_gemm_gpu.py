"""The MoE prefill grouped GEMM at the real models' shapes, on the GPU (compiled), with its default
launch shapes: Qwen3-30B-A3B (Q4_K gate/up, Q6_K down; 2048 wide, experts of 768, 128 experts,
top-8) and gpt-oss-20b (MXFP4 with biases and the clamped SwiGLU; 2880, 2880, 32 experts,
top-4), a 512-token chunk and a short one. The first tokens against kernels/moe_reference.py
(only their experts dequantized), every token against the expert GEMV (8-bit x: about 1%)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.hearth.routing import select_experts
from kernels import moe_reference as ref
from kernels.moe_gemv import SILU, SWIGLU_OAI, ExpertWeight, expert_down, expert_gate_up
from kernels.moe_grouped_gemm import grouped_moe
from kernels.moe_routing import MAX_PAIRS, route_experts
from tests.kernels.conftest import relative_error

pytestmark = pytest.mark.gpu

CASES = {
    "qwen3": dict(gate="Q4_K", down="Q6_K", n_embd=2048, n_ff=768, n_expert=128, top_k=8),
    "gpt-oss": dict(gate="MXFP4", down="MXFP4", n_embd=2880, n_ff=2880, n_expert=32, top_k=4),
}
CHECKED = 6  # tokens against the float64 reference


@pytest.fixture(autouse=True)
def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


def _weight(fmt, shape, seed, bias):
    raw = ref.random_expert_bytes(fmt, *shape, seed=seed)
    b = np.random.default_rng(seed).standard_normal(shape[:2]) if bias else None
    return raw, b, ExpertWeight.from_gguf(raw, fmt, shape, device="cuda", bias=b)


@pytest.mark.parametrize("tokens", [512, 40])
@pytest.mark.parametrize("name", list(CASES))
def test_chunk_against_the_reference_and_the_gemv(name, tokens):
    c = CASES[name]
    oai = name == "gpt-oss"
    act = SWIGLU_OAI if oai else SILU
    e, f, d = c["n_expert"], c["n_ff"], c["n_embd"]
    gr, gb, gate = _weight(c["gate"], (e, f, d), 1, oai)
    ur, ub, up = _weight(c["gate"], (e, f, d), 2, oai)
    dr, db, down = _weight(c["down"], (e, d, f), 3, oai)
    gen = torch.Generator(device="cuda").manual_seed(tokens)
    logits = torch.randn(tokens, e, generator=gen, device="cuda")
    ids, weights = select_experts(
        logits, c["top_k"], gating="topk_softmax" if oai else "softmax", normalize=True
    )
    first = ids[:CHECKED].cpu().numpy()
    dg = ref.dequantize_experts(gr, c["gate"], (e, f, d), first)
    du = ref.dequantize_experts(ur, c["gate"], (e, f, d), first)
    dd = ref.dequantize_experts(dr, c["down"], (e, d, f), first)
    # x scaled so that gate and up come to a few units (h is stored in f16)
    rms = np.sqrt(np.mean(next(iter(dg.values())) ** 2))
    x = torch.randn(tokens, d, generator=gen, device="cuda") * float(2.0 / (np.sqrt(d) * rms))
    x = x.half()
    got = grouped_moe(x, gate, up, down, act, ids, weights)
    assert got.shape == (tokens, d) and got.dtype == torch.float16
    expected = ref.moe(
        x[:CHECKED].float().cpu().numpy(), dg, du, dd, first, weights[:CHECKED].cpu().numpy(),
        "swiglu_oai" if oai else "silu", (gb, ub, db),
    )  # fmt: skip
    assert relative_error(got[:CHECKED].float().cpu().numpy(), expected) < 5e-3
    step = MAX_PAIRS // c["top_k"]
    parts = []
    for start in range(0, tokens, step):
        rows = slice(start, start + step)
        routing = route_experts(ids[rows], weights[rows], e)
        parts.append(expert_down(expert_gate_up(x[rows], gate, up, routing, act), down, routing))
    gemv = torch.cat(parts).float().cpu().numpy()
    assert relative_error(got.float().cpu().numpy(), gemv) < 2e-2
