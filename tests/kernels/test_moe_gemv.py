"""The expert GEMV (kernels/moe_gemv.py) against kernels/moe_reference.py (gguf's dequantizer,
float64): every expert format, odd shapes, 1 / 3 / 16 tokens, both ways a result is written
(by its own program, or summed by a row tile's last program), biases, both activations, the
down projection's routing-weighted sum; and the grouping of pairs by expert."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kernels import moe_reference as ref
from kernels.act_quant import quantize_activation
from kernels.availability import interpret_mode
from kernels.errors import UnsupportedTensor
from kernels.ggml_formats import FORMATS
from kernels.moe_blocks import mxfp4_code_words, mxfp4_words
from kernels.moe_gemv import (
    SWIGLU_OAI,
    ExpertWeight,
    GluActivation,
    MoeGemvConfig,
    expert_down,
    expert_gate_up,
    expert_rows,
)
from kernels.moe_router import route_from_router
from kernels.moe_routing import route_experts
from kernels.packed_weight import PackedWeight
from kernels.reference import quantize_activation as reference_quantize
from tests.kernels.conftest import relative_error

# x rounded to 8 bits per 32 values, as the kernel reads it: against that, exact up to float32
# sums (the dense integer GEMV's TOLERANCE_INT8)
TOLERANCE = 5e-4
# few, wide programs in Triton's interpreter (it pays per program and per operation, not per
# value); on the GPU, tiles of a size that compiles to registers
_ROWS = 64 if interpret_mode() else 8
WIDE = MoeGemvConfig(block_n=_ROWS, max_runs=64, num_warps=4)
# rows of 256 weights in 2 splits: the partial sums and the last program's finish
SPLIT = MoeGemvConfig(block_n=_ROWS, max_runs=8, num_warps=4)
N_EXPERT = 8
# whole blocks, an odd count of 32-blocks (Q8_0, MXFP4: 11 blocks, a split half masked)
N_IN = {"Q4_K": 512, "Q5_K": 512, "Q6_K": 256, "Q8_0": 352, "MXFP4": 352}
N_IN |= dict.fromkeys(("Q4_0", "Q4_1", "Q5_0", "Q5_1"), 352)
N_OUT = 70  # not whole tiles of rows


def _routing(tokens: int, top_k: int, seed: int, device: str, n_expert: int = N_EXPERT):
    """Distinct experts per token (as top-k picks them), weights summing to 1."""
    rng = np.random.default_rng(seed)
    ids = np.stack([rng.choice(n_expert, top_k, replace=False) for _ in range(tokens)])
    weights = rng.random((tokens, top_k)) + 0.1
    weights /= weights.sum(axis=1, keepdims=True)
    ids_t = torch.from_numpy(ids).to(device)
    weights_t = torch.from_numpy(weights.astype(np.float32)).to(device)
    return route_experts(ids_t, weights_t, n_expert), ids, weights.astype(np.float32)


@functools.cache
def _experts(fmt: str, n_out: int, n_in: int, seed: int, device: str, bias: bool = False):
    raw = ref.random_expert_bytes(fmt, N_EXPERT, n_out, n_in, seed)
    dense = ref.dequantize_experts(raw, fmt, (N_EXPERT, n_out, n_in))
    b = np.random.default_rng(seed + 7).standard_normal((N_EXPERT, n_out)) if bias else None
    w = ExpertWeight.from_gguf(raw, fmt, (N_EXPERT, n_out, n_in), device=device, bias=b)
    return w, dense, b


def _x(rows: int, n_in: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(rows, n_in, generator=torch.Generator().manual_seed(seed)) * scale


def _x8(x: torch.Tensor) -> np.ndarray:
    """x as the kernel reads it: rounded to 8 bits per 32 values."""
    return reference_quantize(x.float().numpy())


@pytest.mark.parametrize(
    ("ids", "n_expert"),
    [
        ([[3, 1]], 8),
        ([[5, 2], [2, 7], [5, 2]], 8),
        ([[0, 1, 2, 3]] * 4, 4),  # every token the same experts
        ([[6], [6], [1], [6], [0]], 7),
        (np.random.default_rng(0).integers(0, 128, size=(16, 8)).tolist(), 128),
    ],
)
@pytest.mark.parametrize("method", ["compare", "sort"])
def test_pairs_grouped_by_expert(ids, n_expert, method, device):
    ids = np.asarray(ids)
    routing = route_experts(torch.from_numpy(ids).to(device), None, n_expert, method=method)
    flat = ids.reshape(-1)
    experts, counts = np.unique(flat, return_counts=True)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    n = len(experts)
    assert routing.n_groups.item() == n
    assert routing.order.cpu().tolist() == np.argsort(flat, kind="stable").tolist()
    assert routing.group_expert[:n].cpu().tolist() == experts.tolist()
    assert routing.group_start[:n].cpu().tolist() == starts.tolist()
    assert routing.group_count[:n].cpu().tolist() == counts.tolist()
    assert routing.max_groups == min(n_expert, flat.size)


@pytest.mark.parametrize(
    ("tokens", "n_expert", "top_k", "gating", "normalize", "bias"),
    [
        (1, 128, 8, "softmax", True, False),  # qwen3moe decode: pairs grouped by comparison
        (5, 128, 8, "softmax", True, False),  # a prefill slice: sorted
        (2, 32, 4, "topk_softmax", False, True),  # gpt-oss, its router bias
        (3, 60, 6, "softmax", False, False),  # qwen2moe-like: k not a power of two
    ],
)
@pytest.mark.parametrize("selection", ["rank", "argmax"])
def test_experts_selected_and_grouped_in_one_launch(
    tokens, n_expert, top_k, gating, normalize, bias, selection, device
):
    """select_and_route picks what engine/hearth/routing.select_experts picks (ids in the same
    order, weights to float32 rounding) and groups them as route_experts does, by either
    selection."""
    from engine.hearth.routing import select_experts
    from kernels.moe_routing import select_and_route

    gen = torch.Generator().manual_seed(tokens + n_expert)
    logits = torch.randn(tokens, n_expert, generator=gen) * 3
    b = torch.randn(n_expert, generator=gen) if bias else None
    ids, weights = select_experts(
        logits + (b if bias else 0), top_k, gating=gating, normalize=normalize
    )
    routing = select_and_route(
        logits.to(device), top_k, softmax_all=gating == "softmax", normalize=normalize,
        bias=None if b is None else b.to(device), selection=selection,
    )  # fmt: skip
    assert routing.ids.cpu().tolist() == ids.tolist()
    torch.testing.assert_close(routing.weights.cpu(), weights, rtol=1e-5, atol=1e-6)
    expected = route_experts(ids.to(device), weights.to(device), n_expert)
    n = expected.n_groups.item()
    assert routing.n_groups.item() == n
    for name in ("order",):
        assert getattr(routing, name).cpu().tolist() == getattr(expected, name).cpu().tolist()
    for name in ("group_expert", "group_start", "group_count"):
        got, want = getattr(routing, name)[:n], getattr(expected, name)[:n]
        assert got.cpu().tolist() == want.cpu().tolist(), name


@pytest.mark.parametrize(("tokens", "n_expert", "top_k"), [(1, 128, 8), (3, 32, 4)])
def test_rank_and_argmax_selections_agree_on_ties(tokens, n_expert, top_k, device):
    """Scores with many ties (a few distinct values): both selections take the lower id on a
    tie, so picks, slots, weights and groups are the same; the rank takes a NaN score last."""
    from kernels.moe_routing import select_and_route

    gen = torch.Generator().manual_seed(tokens)
    logits = torch.randint(0, 3, (tokens, n_expert), generator=gen).float()
    logits[0, 1:4] = 5.0  # a tie among the largest
    kwargs = dict(softmax_all=False, normalize=True)
    rank = select_and_route(logits.to(device), top_k, selection="rank", **kwargs)
    argmax = select_and_route(logits.to(device), top_k, selection="argmax", **kwargs)
    assert rank.ids[0, :3].cpu().tolist() == [1, 2, 3]
    for name in ("ids", "order", "n_groups"):
        assert torch.equal(getattr(rank, name), getattr(argmax, name)), name
    n = int(rank.n_groups)
    for name in ("group_expert", "group_start", "group_count"):
        assert torch.equal(getattr(rank, name)[:n], getattr(argmax, name)[:n]), name
    torch.testing.assert_close(rank.weights, argmax.weights, rtol=1e-6, atol=0)
    logits[0, 1] = float("nan")
    with_nan = select_and_route(logits.to(device), top_k, selection="rank", **kwargs)
    assert with_nan.ids[0, :2].cpu().tolist() == [2, 3] and 1 not in with_nan.ids[0].tolist()


def test_mxfp4_block_layout_is_ggml_s():
    import gguf

    assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.MXFP4] == (32, 17)
    assert FORMATS["MXFP4"].ggml_type == int(gguf.GGMLQuantizationType.MXFP4)
    raw = ref.random_expert_bytes("MXFP4", 2, 3, 64, seed=1)
    w = PackedWeight.from_gguf(raw, "MXFP4", (6, 64), device="cpu")
    assert np.array_equal(w.to_gguf_bytes(), raw)
    values = ref.dequantize_experts(raw, "MXFP4", (2, 3, 64))
    assert np.isfinite(values).all() and np.abs(values).max() > 0


@pytest.mark.parametrize(
    ("fmt", "tokens", "n_expert", "n_embd", "top_k", "gating", "normalize", "bias"),
    [
        ("F32", 1, 128, 2048, 8, "softmax", True, False),  # qwen3moe decode
        ("F32", 3, 32, 2880, 4, "topk_softmax", False, True),  # gpt-oss: bias, a split cut
        ("F16", 5, 60, 512, 6, "softmax", False, False),  # 30 pairs: sorted
        ("BF16", 2, 16, 256, 2, "softmax", True, False),
    ],
)
@pytest.mark.parametrize("selection", ["rank", "argmax"])
def test_router_gemv_and_selection_in_one_launch(
    fmt, tokens, n_expert, n_embd, top_k, gating, normalize, bias, selection, device
):
    """route_from_router: the float GEMV's logits (within float32 sums in another order)
    and, from them, the routing select_and_route gives for the GEMV's logits; a token's
    logits the same bits alone as among others."""
    from kernels.gemv import quant_matmul
    from kernels.moe_router import _TICKETS
    from kernels.moe_routing import select_and_route

    gen = torch.Generator().manual_seed(tokens + n_expert)
    dtype = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[fmt]
    w = (torch.randn(n_expert, n_embd, generator=gen) / n_embd**0.5).to(dtype)
    raw = w.view(torch.uint8).numpy() if fmt != "F32" else w.numpy().view(np.uint8)
    router = PackedWeight.from_gguf(raw.reshape(-1), fmt, (n_expert, n_embd), device=device)
    x = (torch.randn(tokens, n_embd, generator=gen) * 3).to(device)
    b = torch.randn(n_expert, generator=gen).to(device) if bias else None
    kwargs = dict(softmax_all=gating == "softmax", normalize=normalize, bias=b,
                  selection=selection)  # fmt: skip
    routing, logits = route_from_router(x, router, top_k, **kwargs)
    gemv = quant_matmul(x, router).float()
    torch.testing.assert_close(logits, gemv, rtol=1e-5, atol=1e-4)
    apart = select_and_route(gemv, top_k, **kwargs)
    for name in ("ids", "order", "n_groups"):
        assert torch.equal(getattr(routing, name), getattr(apart, name)), name
    n = int(apart.n_groups)  # the entries past n_groups are left unwritten
    for name in ("group_expert", "group_start", "group_count"):
        assert torch.equal(getattr(routing, name)[:n], getattr(apart, name)[:n]), name
    torch.testing.assert_close(routing.weights, apart.weights, rtol=1e-5, atol=1e-6)
    _, alone = route_from_router(x[-1:], router, top_k, **kwargs)
    assert torch.equal(alone[0], logits[-1])
    assert not _TICKETS.get(torch.device(device), 1).any()  # left at zero for the next launch


@pytest.mark.parametrize(("tokens", "n_expert", "top_k"), [(1, 128, 8), (2, 32, 4)])
def test_router_ranks_ties_and_nan_from_registers(tokens, n_expert, top_k, device):
    """route_from_router's rank from registers on tied logits (equal router rows give equal
    logits: the lower id first) and a NaN one (ranked last): the picks, slots and groups
    select_and_route's rank (reading the scores from memory) gives for the same logits."""
    from kernels.moe_routing import select_and_route

    n_embd = 256
    gen = torch.Generator().manual_seed(tokens)
    w = torch.randn(n_expert, n_embd, generator=gen) / n_embd**0.5
    w[5:9] = w[2]  # experts 2 and 5-8 tie
    w[3] = float("nan")
    router = PackedWeight.from_gguf(w.numpy().view(np.uint8).reshape(-1), "F32",
                                    (n_expert, n_embd), device=device)  # fmt: skip
    x = torch.zeros(tokens, n_embd)
    x[:, : n_embd // 2] = (w[2, : n_embd // 2] * 8).sign()  # expert 2's logit the largest
    kwargs = dict(softmax_all=True, normalize=True, selection="rank")
    routing, logits = route_from_router(x.to(device), router, top_k, **kwargs)
    assert routing.ids[0, :4].cpu().tolist() == [2, 5, 6, 7] and 3 not in routing.ids
    apart = select_and_route(logits, top_k, **kwargs)
    for name in ("ids", "order", "n_groups"):
        assert torch.equal(getattr(routing, name), getattr(apart, name)), name
    n = int(apart.n_groups)
    for name in ("group_expert", "group_start", "group_count"):
        assert torch.equal(getattr(routing, name)[:n], getattr(apart, name)[:n]), name
    torch.testing.assert_close(routing.weights, apart.weights, rtol=1e-6, atol=0)


@pytest.mark.parametrize("fmt", list(N_IN))
def test_expert_rows_every_format(fmt, device, tokens=3):  # 1 token: the down and f16 tests
    w, dense, _ = _experts(fmt, N_OUT, N_IN[fmt], 1, device)
    routing, ids, _ = _routing(tokens, 2, seed=tokens, device=device)
    x = _x(tokens, N_IN[fmt], seed=2)
    y = expert_rows(x.to(device), w, routing, config=WIDE)
    assert y.shape == (tokens, 2, N_OUT) and y.dtype == torch.float32
    assert relative_error(y.cpu(), ref.expert_rows(_x8(x), dense, ids)) < TOLERANCE


def test_split_rows_with_bias_summed_by_the_last_program(device):
    from kernels.moe_gemv import _COUNTERS

    w, dense, bias = _experts("Q4_K", N_OUT, 256, 2, device, bias=True)
    routing, ids, _ = _routing(4, 2, seed=5, device=device)
    assert routing.group_count.max().item() > 1  # experts shared by tokens
    x = _x(4, 256, seed=3)
    y = expert_rows(x.to(device), w, routing, config=SPLIT)
    assert relative_error(y.cpu(), ref.expert_rows(_x8(x), dense, ids, bias)) < TOLERANCE
    assert not _COUNTERS.get(torch.device(device), 4).any()  # left at zero for the next launch


# x scaled so that gate and up are a few units: silu's curve, not its asymptotes
@pytest.mark.parametrize(("fmt", "config", "scale"), [("Q4_K", WIDE, 0.2), ("Q6_K", SPLIT, 0.03)])
def test_gate_up_silu_in_one_launch(fmt, config, scale, device):
    gate, dense_gate, _ = _experts(fmt, N_OUT, 256, 3, device)
    up, dense_up, _ = _experts(fmt, N_OUT, 256, 4, device)
    routing, ids, _ = _routing(3, 2, seed=6, device=device)
    x = _x(3, 256, seed=4, scale=scale)
    h = expert_gate_up(x.to(device), gate, up, routing, config=config)
    expected = ref.gate_up(_x8(x), dense_gate, dense_up, ids)
    assert h.shape == (3, 2, N_OUT)
    assert relative_error(h.cpu(), expected) < TOLERANCE


def test_gate_up_gpt_oss_clamped_swiglu_with_biases(device, config=SPLIT):
    n_in = 256
    gate, dense_gate, bias_gate = _experts("MXFP4", N_OUT, n_in, 5, device, bias=True)
    up, dense_up, bias_up = _experts("MXFP4", N_OUT, n_in, 6, device, bias=True)
    routing, ids, _ = _routing(3, 4, seed=7, device=device)
    x = _x(3, n_in, seed=5, scale=2.0)  # gate and up well past the clamp at 7
    h = expert_gate_up(x.to(device), gate, up, routing, SWIGLU_OAI, config=config)
    g = ref.expert_rows(_x8(x), dense_gate, ids, bias_gate)
    assert (g > SWIGLU_OAI.limit).any()  # the clamp is exercised
    expected = ref.gate_up(_x8(x), dense_gate, dense_up, ids, "swiglu_oai", bias_gate, bias_up)
    assert relative_error(h.cpu(), expected) < TOLERANCE


def test_gate_up_of_two_formats_takes_two_launches(device):
    gate, dense_gate, _ = _experts("Q4_K", N_OUT, 256, 8, device)
    up, dense_up, _ = _experts("Q6_K", N_OUT, 256, 9, device)
    routing, ids, _ = _routing(3, 2, seed=8, device=device)
    x = _x(3, 256, seed=6, scale=0.1)
    h = expert_gate_up(x.to(device), gate, up, routing, config=WIDE)
    expected = ref.gate_up(_x8(x), dense_gate, dense_up, ids)
    assert relative_error(h.cpu(), expected) < TOLERANCE


@pytest.mark.parametrize(
    ("fmt", "tokens", "top_k", "bias"),
    [("Q6_K", 1, 2, False), ("Q4_K", 16, 2, False), ("MXFP4", 3, 4, True), ("Q8_0", 3, 2, False)],
)
def test_down_sums_the_slots_with_their_weights(fmt, tokens, top_k, bias, device):
    n_in = min(N_IN[fmt], 256)
    w, dense, b = _experts(fmt, N_OUT, n_in, 10, device, bias=bias)
    routing, ids, weights = _routing(tokens, top_k, seed=9 + tokens, device=device)
    h = _x(tokens * top_k, n_in, seed=7)
    out = expert_down(h.reshape(tokens, top_k, -1).to(device), w, routing, config=WIDE)
    assert out.shape == (tokens, N_OUT)
    expected = ref.down(_x8(h).reshape(tokens, top_k, -1), dense, ids, weights, b)
    assert relative_error(out.cpu(), expected) < TOLERANCE


# a step of one token: each slot's expert read from the routing's ids (ONE_TOKEN) against the
# grouping read as several tokens do: gate/up (Q4_K whole rows; MXFP4 split, biased, clamped),
# rows, and downs that take this kernel at one token (experts read in place from host memory;
# rows wider than one split, as gpt-oss's)
_ONE_TOKEN = [
    ("gate_up", "Q4_K", 512, WIDE, 8, False),
    ("gate_up", "MXFP4", 256, SPLIT, 4, True),
    ("rows", "Q8_0", 352, SPLIT, 2, False),
    ("down_in_host_memory", "Q6_K", 768, WIDE, 8, False),
    ("down", "MXFP4", 352, SPLIT, 4, True),
]


@pytest.mark.parametrize(("kind", "fmt", "n_in", "config", "top_k", "bias"), _ONE_TOKEN)
def test_one_token_reads_its_experts_from_the_ids_with_the_same_bits(
    kind, fmt, n_in, config, top_k, bias, device
):
    a, dense_a, bias_a = _experts(fmt, N_OUT, n_in, 20, device, bias=bias)
    routing, ids, weights = _routing(1, top_k, seed=21, device=device)
    x = _x(top_k if kind.startswith("down") else 1, n_in, seed=22, scale=0.2)
    if kind == "gate_up":
        b, dense_b, bias_b = _experts(fmt, N_OUT, n_in, 23, device, bias=bias)
        act = SWIGLU_OAI if fmt == "MXFP4" else GluActivation()
        run = functools.partial(expert_gate_up, x.to(device), a, b, routing, act, config=config)
        expected = ref.gate_up(_x8(x), dense_a, dense_b, ids, act.kind, bias_a, bias_b)
    elif kind == "rows":
        run = functools.partial(expert_rows, x.to(device), a, routing, config=config)
        expected = ref.expert_rows(_x8(x), dense_a, ids, bias_a)
    else:
        if kind == "down_in_host_memory":
            a = dataclasses.replace(a, in_host_memory=True)
        h = x.reshape(1, top_k, n_in).to(device)
        run = functools.partial(expert_down, h, a, routing, config=config)
        expected = ref.down(_x8(x).reshape(1, top_k, -1), dense_a, ids, weights, bias_a)
    from_ids, grouped = run(), run(one_token=False)
    assert torch.equal(from_ids, grouped)
    assert relative_error(from_ids.cpu(), expected) < TOLERANCE


# Qwen3-30B-A3B's down rows (768: three K-quant super-blocks, one split of 64 runs with 16
# masked), blocks of 32 in several splits (352: 11 blocks), a K-quant super-block split; and
# gpt-oss's (2880: three splits of 64 runs, the last partly masked), with biases and top-4
_FUSED_DOWN = [(fmt, 768, WIDE, 1, 8, False) for fmt in ("Q4_K", "Q5_K", "Q6_K")]
_FUSED_DOWN += [(fmt, 352, SPLIT, 3, 2, False) for fmt in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")]
_FUSED_DOWN += [("Q6_K", 256, SPLIT, 2, 2, True)]  # a super-block in two splits of 4 groups
_FUSED_DOWN += [("MXFP4", 2880, MoeGemvConfig(block_n=8, num_warps=4), 2, 4, True)]


@pytest.mark.parametrize(("fmt", "n_in", "config", "tokens", "top_k", "bias"), _FUSED_DOWN)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_down_rounds_h_to_8_bits_itself_as_quantize_activation_does(
    fmt, n_in, config, tokens, top_k, bias, dtype, device
):
    """h in float, rounded by the down's own programs: the same bits as h quantized by its own
    launch and read in 8 bits (every format the down reads, f32 and f16 h)."""
    n_out = 12
    w, _, _ = _experts(fmt, n_out, n_in, 14, device, bias=bias)
    routing, _, _ = _routing(tokens, top_k, seed=15, device=device, n_expert=N_EXPERT)
    h = (_x(tokens * top_k, n_in, seed=16) * torch.linspace(0.01, 3, n_in)).to(dtype)
    h = h.reshape(tokens, top_k, n_in).to(device)
    fused = expert_down(h, w, routing, config=config)
    hq = quantize_activation(h.reshape(-1, n_in))
    apart = expert_down(h, w, routing, quantized=hq, config=config)
    assert fused.dtype == dtype and torch.equal(fused, apart)
    assert fused.abs().max() > 0


def test_default_config_and_half_inputs(device):
    """The launch the engine gets (4 rows a program), f16 in and out."""
    w, dense, _ = _experts("Q4_K", 8, 256, 11, device)
    routing, ids, weights = _routing(1, 2, seed=12, device=device)
    x = _x(1, 256, seed=8).half()
    y = expert_rows(x.to(device), w, routing)
    assert y.dtype == torch.float16
    assert relative_error(y.cpu(), ref.expert_rows(_x8(x), dense, ids)) < TOLERANCE + 1e-3
    h = _x(2, 256, seed=9).half()
    out = expert_down(h.reshape(1, 2, 256).to(device), w, routing)
    assert out.dtype == torch.float16
    expected = ref.down(_x8(h).reshape(1, 2, 256), dense, ids, weights)
    assert relative_error(out.cpu(), expected) < TOLERANCE + 1e-3


def test_the_8_bit_activation_is_close_to_float_x(device):
    """Against float x (no rounding), the error is the dense integer path's (under 1%)."""
    w, dense, _ = _experts("Q5_K", N_OUT, 512, 12, device)
    routing, ids, _ = _routing(3, 2, seed=13, device=device)
    x = _x(3, 512, seed=9)
    y = expert_rows(x.to(device), w, routing, config=WIDE)
    assert relative_error(y.cpu(), ref.expert_rows(x.double().numpy(), dense, ids)) < 1e-2


def test_refusals_say_what_to_do(device):
    w, _, _ = _experts("Q8_0", N_OUT, 352, 1, device)
    routing, _, _ = _routing(1, 2, seed=1, device=device)
    with pytest.raises(UnsupportedTensor, match="expected"):
        expert_rows(torch.zeros(1, 320, device=device), w, routing)
    with pytest.raises(UnsupportedTensor, match="supported"):
        ExpertWeight.from_gguf(np.zeros(2 * 4 * 64, np.uint8), "F16", (2, 4, 32), device=device)
    with pytest.raises(UnsupportedTensor, match="routing weights"):
        expert_down(torch.zeros(1, 2, 352, device=device), w, route_experts(
            torch.zeros(1, 2, dtype=torch.int64, device=device), None, N_EXPERT))  # fmt: skip
    with pytest.raises(UnsupportedTensor, match="smaller chunks"):
        route_experts(torch.zeros(64, 8, dtype=torch.int64, device=device), None, 128)
    with pytest.raises(UnsupportedTensor, match="differ in shape"):
        small, _, _ = _experts("Q8_0", N_OUT - 6, 352, 2, device)
        expert_gate_up(torch.zeros(1, 352, device=device), w, small, routing)
    with pytest.raises(UnsupportedTensor, match="take the GEMV and select_and_route"):
        route_from_router(torch.zeros(1, 352, device=device), w.packed, 2, softmax_all=True,
                          normalize=True)  # fmt: skip
    assert GluActivation().kind == "silu"


@pytest.mark.parametrize(
    ("n_runs", "max_runs", "expected"),
    [
        (128, 128, 128),  # Qwen3-30B-A3B gate/up: 2048 inputs, one split
        (48, 128, 64),  # its down: 768 inputs, one split of 64 (16 masked)
        (180, 128, 64),  # gpt-oss: 2880 inputs, three splits of 64, not two of 128
        (896, 128, 128),  # Mixtral's down: 14336 inputs, seven whole splits
        (22, 8, 8),  # a tie in masked runs: the wider split
        (2, 128, 2),  # one block of 32
    ],
)
def test_runs_per_split(n_runs, max_runs, expected):
    from kernels.moe_gemv import _runs_per_split

    assert _runs_per_split(n_runs, max_runs) == expected


@triton.jit
def _decode_mxfp4(src, dst, N: tl.constexpr):
    i = tl.program_id(0) * N + tl.arange(0, N)
    decoded = mxfp4_words(tl.load(src + i))
    tl.store(dst + i, decoded)


def test_mxfp4_words_decode_every_code(device):
    """Every nibble in every byte of a word against ggml's table (gguf's MXFP4.kvalues)."""
    import gguf

    codes = np.arange(16**4)
    nibbles = np.stack([(codes >> (4 * b)) & 15 for b in range(4)], axis=1)  # [n, byte]
    words = (nibbles << (8 * np.arange(4))).sum(axis=1).astype(np.uint32).view(np.int32)
    out = torch.empty(len(words), dtype=torch.int32, device=device)
    _decode_mxfp4[(len(words) // 4096,)](torch.from_numpy(words).to(device), out, N=4096)
    got = out.cpu().numpy().view(np.uint32)
    got_bytes = np.stack([(got >> (8 * b)) & 0xFF for b in range(4)], axis=1)
    expected = np.asarray(gguf.quants.MXFP4.kvalues)[nibbles] + 12
    assert np.array_equal(got_bytes, expected)


@triton.jit
def _decode_mxfp4_bytes(src, lo, hi, N: tl.constexpr, PRMT: tl.constexpr):
    i = tl.program_id(0) * N + tl.arange(0, N)
    low, high = mxfp4_code_words(tl.load(src + i), PRMT)
    tl.store(lo + i, low)
    tl.store(hi + i, high)


def test_mxfp4_code_words_decode_both_nibbles_of_every_byte(device):
    """mxfp4_code_words as the expert GEMV runs it (compiled: the byte-permute table) against
    ggml's table: every byte value in every place of a word, and random words."""
    import gguf

    values = np.arange(256 * 4)
    bytes_ = np.random.default_rng(3).integers(0, 256, size=(len(values), 4))
    bytes_[np.arange(len(values)), values // 256] = values % 256  # byte v at place p
    random = np.random.default_rng(4).integers(0, 256, size=(4096 - len(values), 4))
    bytes_ = np.concatenate([bytes_, random])
    words = (bytes_ << (8 * np.arange(4))).sum(axis=1).astype(np.uint32).view(np.int32)
    lo = torch.empty(len(words), dtype=torch.int32, device=device)
    hi = torch.empty_like(lo)
    src = torch.from_numpy(words).to(device)
    _decode_mxfp4_bytes[(len(words) // 1024,)](src, lo, hi, N=1024, PRMT=not interpret_mode())
    table = np.asarray(gguf.quants.MXFP4.kvalues) + 12
    for got, nibbles in ((lo, bytes_ & 15), (hi, bytes_ >> 4)):
        got = got.cpu().numpy().view(np.uint32)
        got_bytes = np.stack([(got >> (8 * b)) & 0xFF for b in range(4)], axis=1)
        assert np.array_equal(got_bytes, table[nibbles])


@pytest.mark.parametrize(
    ("tokens", "n_expert", "n_embd", "top_k", "attn_bias"),
    [(1, 128, 2048, 8, False), (2, 32, 2880, 4, True)],  # qwen3moe; gpt-oss (both biases)
)
def test_norm_and_route_is_the_norm_then_the_router(tokens, n_expert, n_embd, top_k, attn_bias,
                                                    device):  # fmt: skip
    """norm_and_route: rms_norm_quantized's y, h and 8-bit y (its statistic summed in another
    order: y within an f16 rounding, the codes within one) and route_from_router's routing
    and logits on that y, from one launch."""
    from kernels.moe_router import norm_and_route
    from kernels.norms import rms_norm_quantized

    gen = torch.Generator().manual_seed(n_embd)
    w = torch.randn(n_expert, n_embd, generator=gen) / n_embd**0.5
    router = PackedWeight.from_gguf(w.numpy().view(np.uint8).reshape(-1), "F32",
                                    (n_expert, n_embd), device=device)  # fmt: skip
    a, residual = (torch.randn(tokens, n_embd, generator=gen).half().to(device) for _ in "ar")
    norm_w = (torch.rand(n_embd, generator=gen) + 0.5).to(device)
    ab = torch.randn(n_embd, generator=gen).to(device) if attn_bias else None
    rb = torch.randn(n_expert, generator=gen).to(device) if attn_bias else None
    kwargs = dict(softmax_all=not attn_bias, normalize=not attn_bias, bias=rb)
    fused = norm_and_route(a, residual, norm_w, 1e-6, router, top_k, attn_bias=ab, **kwargs)
    y, h, q = rms_norm_quantized(a, norm_w, 1e-6, residual, bias=ab)
    routing, logits = route_from_router(y, router, top_k, **kwargs)
    assert torch.equal(fused.h, h)
    # (on a GPU the statistic's float32 sum may move a value of y by an f16 rounding step: its
    # group's scale by as much, the logits by a weight times it)
    torch.testing.assert_close(fused.y, y, rtol=1e-3, atol=0)
    assert (fused.quantized.words.view(torch.int8) - q.words.view(torch.int8)).abs().max() <= 1
    torch.testing.assert_close(fused.quantized.scales, q.scales, rtol=1e-3, atol=0)
    torch.testing.assert_close(fused.logits, logits, rtol=1e-5, atol=1e-4)
    for name in ("ids", "order", "n_groups"):
        assert torch.equal(getattr(fused.routing, name), getattr(routing, name)), name
    torch.testing.assert_close(fused.routing.weights, routing.weights, rtol=1e-5, atol=1e-6)
