"""The expert GEMV at the real models' shapes, on the GPU (compiled, inline assembly on), against
kernels/moe_reference.py: Qwen3-30B-A3B (2048 wide, experts of 768, 128 experts, top-8) and
gpt-oss-20b (2880, experts of 2880, 32 experts, top-4, MXFP4 with biases and the clamped
SwiGLU), 1 and 16 tokens. Only the experts a case picks are dequantized for the reference."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from kernels import moe_reference as ref
from kernels.moe_gemv import SWIGLU_OAI, ExpertWeight, expert_down, expert_gate_up, expert_rows
from kernels.moe_routing import route_experts
from kernels.reference import quantize_activation as reference_quantize
from tests.kernels.conftest import relative_error

pytestmark = pytest.mark.gpu

# as tests/kernels/test_moe_gemv.py, plus f16 rounding of the outputs
TOLERANCE = 5e-4 + 2e-3
QWEN3 = {"n_embd": 2048, "n_ff": 768, "n_expert": 128, "top_k": 8}
GPT_OSS = {"n_embd": 2880, "n_ff": 2880, "n_expert": 32, "top_k": 4}


@pytest.fixture(autouse=True)
def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


@functools.lru_cache(maxsize=8)
def _raw(fmt: str, shape: tuple[int, int, int], seed: int) -> np.ndarray:
    return ref.random_expert_bytes(fmt, *shape, seed=seed)


def _weight(fmt, shape, seed, bias=False):
    raw = _raw(fmt, shape, seed)
    b = np.random.default_rng(seed).standard_normal(shape[:2]) * 0.1 if bias else None
    return ExpertWeight.from_gguf(raw, fmt, shape, device="cuda", bias=b), raw, b


def _routing(tokens, model, seed):
    rng = np.random.default_rng(seed)
    ids = np.stack([rng.choice(model["n_expert"], model["top_k"], replace=False)
                    for _ in range(tokens)])  # fmt: skip
    weights = rng.random(ids.shape).astype(np.float32)
    weights /= weights.sum(axis=1, keepdims=True)
    routing = route_experts(
        torch.from_numpy(ids).cuda(), torch.from_numpy(weights).cuda(), model["n_expert"]
    )
    return routing, ids, weights


def _x8(x: torch.Tensor) -> np.ndarray:
    return reference_quantize(x.float().cpu().numpy())


@pytest.mark.parametrize("tokens", [1, 16])
@pytest.mark.parametrize("fmt", ["Q4_K", "Q5_K", "Q6_K", "Q8_0"])
def test_rows_at_qwen3_gate_shape(fmt, tokens):
    shape = (QWEN3["n_expert"], QWEN3["n_ff"], QWEN3["n_embd"])
    w, raw, _ = _weight(fmt, shape, seed=1)
    routing, ids, _ = _routing(tokens, QWEN3, seed=tokens)
    x = torch.randn(tokens, shape[2], dtype=torch.float16, device="cuda")
    y = expert_rows(x, w, routing)
    dense = ref.dequantize_experts(raw, fmt, shape, ids)
    assert relative_error(y.float().cpu(), ref.expert_rows(_x8(x), dense, ids)) < TOLERANCE


@pytest.mark.parametrize("tokens", [1, 16])
def test_qwen3_moe_ffn(tokens):
    """Q4_K_M's experts: gate and up Q4_K (one launch, silu), down Q6_K with the slots' sum."""
    gate_shape = (QWEN3["n_expert"], QWEN3["n_ff"], QWEN3["n_embd"])
    down_shape = (QWEN3["n_expert"], QWEN3["n_embd"], QWEN3["n_ff"])
    gate, gate_raw, _ = _weight("Q4_K", gate_shape, seed=2)
    up, up_raw, _ = _weight("Q4_K", gate_shape, seed=3)
    down, down_raw, _ = _weight("Q6_K", down_shape, seed=4)
    routing, ids, weights = _routing(tokens, QWEN3, seed=10 + tokens)
    x = torch.randn(tokens, QWEN3["n_embd"], dtype=torch.float16, device="cuda") * 0.05
    h = expert_gate_up(x, gate, up, routing)
    dense_gate = ref.dequantize_experts(gate_raw, "Q4_K", gate_shape, ids)
    dense_up = ref.dequantize_experts(up_raw, "Q4_K", gate_shape, ids)
    expected_h = ref.gate_up(_x8(x), dense_gate, dense_up, ids)
    assert relative_error(h.float().cpu(), expected_h) < TOLERANCE
    out = expert_down(h, down, routing)
    dense_down = ref.dequantize_experts(down_raw, "Q6_K", down_shape, ids)
    h8 = _x8(h.reshape(-1, QWEN3["n_ff"])).reshape(tokens, QWEN3["top_k"], -1)
    expected = ref.down(h8, dense_down, ids, weights)
    assert relative_error(out.float().cpu(), expected) < TOLERANCE


@pytest.mark.parametrize("tokens", [1, 16])
def test_gpt_oss_moe_ffn(tokens):
    """MXFP4 experts with biases: gate/up with the clamped SwiGLU in one launch (K = 2880: three
    splits of 960 weights), down with the slots' sum."""
    shape = (GPT_OSS["n_expert"], GPT_OSS["n_ff"], GPT_OSS["n_embd"])
    gate, gate_raw, gate_b = _weight("MXFP4", shape, seed=5, bias=True)
    up, up_raw, up_b = _weight("MXFP4", shape, seed=6, bias=True)
    down, down_raw, down_b = _weight("MXFP4", shape, seed=7, bias=True)
    routing, ids, weights = _routing(tokens, GPT_OSS, seed=20 + tokens)
    x = torch.randn(tokens, GPT_OSS["n_embd"], dtype=torch.float16, device="cuda") * 0.5
    h = expert_gate_up(x, gate, up, routing, SWIGLU_OAI)
    dense_gate = ref.dequantize_experts(gate_raw, "MXFP4", shape, ids)
    dense_up = ref.dequantize_experts(up_raw, "MXFP4", shape, ids)
    expected_h = ref.gate_up(_x8(x), dense_gate, dense_up, ids, "swiglu_oai", gate_b, up_b)
    assert relative_error(h.float().cpu(), expected_h) < TOLERANCE
    out = expert_down(h, down, routing)
    dense_down = ref.dequantize_experts(down_raw, "MXFP4", shape, ids)
    h8 = _x8(h.reshape(-1, GPT_OSS["n_ff"])).reshape(tokens, GPT_OSS["top_k"], -1)
    expected = ref.down(h8, dense_down, ids, weights, down_b)
    assert relative_error(out.float().cpu(), expected) < TOLERANCE


def test_a_captured_graph_replays_a_new_routing():
    """The routing is data: a decode step captured once replays with other experts picked."""
    shape = (QWEN3["n_expert"], QWEN3["n_ff"], QWEN3["n_embd"])
    w, raw, _ = _weight("Q4_K", shape, seed=1)
    ids = torch.zeros(1, QWEN3["top_k"], dtype=torch.int64, device="cuda")
    x = torch.randn(1, shape[2], dtype=torch.float16, device="cuda")

    def step():
        return expert_rows(x, w, route_experts(ids, None, QWEN3["n_expert"]))

    ids.copy_(torch.arange(8).reshape(1, 8))
    step()  # compiled outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = step()
    picked = np.array([[120, 3, 77, 5, 64, 9, 31, 100]])
    ids.copy_(torch.from_numpy(picked))
    graph.replay()
    torch.cuda.synchronize()
    dense = ref.dequantize_experts(raw, "Q4_K", shape, picked)
    assert relative_error(y.float().cpu(), ref.expert_rows(_x8(x), dense, picked)) < TOLERANCE


@pytest.mark.parametrize("tokens", [1, 16])
@pytest.mark.parametrize(("fmt", "model"), [("Q6_K", QWEN3), ("Q4_K", QWEN3), ("MXFP4", GPT_OSS)])
def test_the_down_rounds_h_as_quantize_activation_does(fmt, model, tokens):
    """Compiled: the down's own rounding of h gives the bits of h quantized by its launch."""
    from kernels.act_quant import quantize_activation

    shape = (model["n_expert"], model["n_embd"], model["n_ff"])
    down, _, _ = _weight(fmt, shape, seed=8, bias=fmt == "MXFP4")
    routing, _, _ = _routing(tokens, model, seed=30 + tokens)
    h = torch.randn(tokens, model["top_k"], model["n_ff"], dtype=torch.float16, device="cuda")
    fused = expert_down(h, down, routing)
    apart = expert_down(h, down, routing, quantized=quantize_activation(h.reshape(-1, shape[2])))
    assert torch.equal(fused, apart)


@pytest.mark.parametrize("selection", ["rank", "argmax"])
@pytest.mark.parametrize("tokens", [1, 16])
@pytest.mark.parametrize("model", [QWEN3, GPT_OSS])
def test_route_from_router_at_the_real_routers(model, tokens, selection):
    """Compiled, F32 routers of the real shapes: the float GEMV's logits and, from them,
    select_and_route's picks and groups (by either selection, the same as the other's), in one
    launch; replayed by a CUDA graph."""
    from kernels.gemv import quant_matmul
    from kernels.moe_router import route_from_router
    from kernels.moe_routing import select_and_route
    from kernels.packed_weight import PackedWeight

    n_expert, n_embd, k = model["n_expert"], model["n_embd"], model["top_k"]
    gen = torch.Generator().manual_seed(tokens)
    w = torch.randn(n_expert, n_embd, generator=gen) / n_embd**0.5
    router = PackedWeight.from_gguf(w.numpy().view(np.uint8).reshape(-1), "F32",
                                    (n_expert, n_embd), device="cuda")  # fmt: skip
    x = (torch.randn(tokens, n_embd, generator=gen) * 3).half().cuda()
    gpt_oss = model is GPT_OSS
    bias = torch.randn(n_expert, generator=gen).cuda() if gpt_oss else None
    kwargs = dict(softmax_all=not gpt_oss, normalize=not gpt_oss, bias=bias, selection=selection)
    routing, logits = route_from_router(x, router, k, **kwargs)
    gemv = quant_matmul(x.float(), router)
    torch.testing.assert_close(logits, gemv, rtol=1e-5, atol=1e-4)
    apart = select_and_route(gemv, k, **kwargs)
    assert torch.equal(routing.ids, apart.ids) and torch.equal(routing.order, apart.order)
    n = int(apart.n_groups)
    assert torch.equal(routing.group_expert[:n], apart.group_expert[:n])
    other = "argmax" if selection == "rank" else "rank"
    by_other = select_and_route(gemv, k, **dict(kwargs, selection=other))
    assert torch.equal(by_other.ids, apart.ids) and torch.equal(by_other.order, apart.order)
    torch.testing.assert_close(by_other.weights, apart.weights, rtol=1e-6, atol=1e-7)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured, _ = route_from_router(x, router, k, **kwargs)
    for _ in range(3):  # the ticket counter is left at zero for each replay
        graph.replay()
        assert torch.equal(captured.ids, apart.ids)
