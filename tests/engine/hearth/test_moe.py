"""The mixture-of-experts pieces on their own: routing by table, moe_ffn's two torch paths
against a plain loop, YaRN's frequencies, the clamped SwiGLU, and what the engine refuses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from engine.hearth.moe_ops import ExpertWeights, swiglu_oai
from engine.hearth.ops import TorchOps
from engine.hearth.rope import inverse_frequencies, yarn_correction_dims
from engine.hearth.routing import select_experts
from engine.hearth.weights import QuantExperts

LOGITS = torch.tensor([[1.0, 3.0, 2.0, 0.0], [0.0, -1.0, 5.0, 4.0]])


@pytest.mark.parametrize(
    ("gating", "normalize", "ids", "weights"),
    [
        # softmax over all four, top 2 kept as they are (qwen2moe)
        ("softmax", False, [[1, 2], [2, 3]], "softmax_all"),
        # the same two, renormalized to sum to 1 (qwen3moe, Mixtral)
        ("softmax", True, [[1, 2], [2, 3]], "softmax_pair"),
        # top 2 logits, softmaxed over the two (gpt-oss): the same numbers as renormalizing
        ("topk_softmax", False, [[1, 2], [2, 3]], "softmax_pair"),
    ],
)
def test_select_experts(gating, normalize, ids, weights):
    got_ids, got_weights = select_experts(LOGITS, 2, gating=gating, normalize=normalize)
    assert got_ids.tolist() == ids
    chosen = LOGITS.gather(1, torch.tensor(ids))
    if weights == "softmax_all":
        expected = torch.softmax(LOGITS, -1).gather(1, torch.tensor(ids))
    else:
        expected = torch.softmax(chosen, -1)
    torch.testing.assert_close(got_weights, expected)


def test_renormalization_never_divides_by_zero():
    _, weights = select_experts(
        torch.tensor([[0.0, -200.0, -200.0]]), 2, gating="softmax", normalize=True
    )
    assert torch.isfinite(weights).all()


def test_unknown_gating_is_an_error():
    with pytest.raises(ValueError, match="unknown expert gating 'sigmoid'"):
        select_experts(LOGITS, 2, gating="sigmoid", normalize=False)


def test_swiglu_oai_clamps_gate_above_and_up_both_ways():
    gate = torch.tensor([-2.0, 1.0, 9.0])
    up = torch.tensor([-9.0, 0.5, 9.0])
    expected = [
        -2.0 / (1 + math.exp(1.702 * 2.0)) * (-7.0 + 1),
        1.0 / (1 + math.exp(-1.702)) * 1.5,
        7.0 / (1 + math.exp(-1.702 * 7.0)) * 8.0,
    ]
    torch.testing.assert_close(swiglu_oai(gate, up), torch.tensor(expected))


def _experts(rng, n_expert=4, n_embd=32, n_ff=32, biases=True) -> ExpertWeights:
    """F32 experts (stored as floats) with biases."""

    def stack(name, rows, cols):
        data = torch.from_numpy(rng.standard_normal((n_expert, rows, cols)).astype(np.float32))
        return QuantExperts(name, 0, n_expert, rows, cols, data)

    def bias(rows):
        return torch.from_numpy(rng.standard_normal((n_expert, rows)).astype(np.float32))

    gate, up = stack("gate", n_ff, n_embd), stack("up", n_ff, n_embd)
    down = stack("down", n_embd, n_ff)
    b = (bias(n_ff), bias(n_ff), bias(n_embd)) if biases else (None, None, None)
    return TorchOps("cpu").prepare_experts(gate, up, down, "swiglu_oai", b)


def _loop(x, e: ExpertWeights, ids, weights) -> torch.Tensor:
    """The definition, one (token, expert) pair at a time, in float64."""
    out = torch.zeros(x.shape[0], e.down.rows, dtype=torch.float64)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            k = int(ids[t, j])
            g = e.gate.data[k].double() @ x[t].double() + e.gate_bias[k].double()
            u = e.up.data[k].double() @ x[t].double() + e.up_bias[k].double()
            y = e.down.data[k].double() @ swiglu_oai(g, u) + e.down_bias[k].double()
            out[t] += float(weights[t, j]) * y
    return out


@pytest.mark.parametrize("path", ["grouped", "gathered"])
def test_moe_ffn_paths_match_the_definition(path):
    rng = np.random.default_rng(0)
    experts = _experts(rng)
    x = torch.from_numpy(rng.standard_normal((5, 32)).astype(np.float32)) / 4
    ids = torch.tensor([[0, 3], [3, 1], [2, 0], [3, 2], [1, 0]])
    weights = torch.rand(5, 2, generator=torch.Generator().manual_seed(0))
    ops = TorchOps("cpu")
    run = ops._moe_grouped if path == "grouped" else ops._moe_gathered
    got = run(x, experts, ids, weights)
    np.testing.assert_allclose(got.numpy(), _loop(x, experts, ids, weights).numpy(), rtol=1e-4)


def test_gathered_experts_dequantize_the_blocks_they_gather():
    """Q8_0 experts: the gathered path reads each row's own expert's blocks."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    rng = np.random.default_rng(1)
    values = rng.standard_normal((3, 8, 64)).astype(np.float32)
    raw = quantize(values, GGMLQuantizationType.Q8_0)  # [3, 8, 68]
    stored = QuantExperts("w", 8, 3, 8, 64, torch.from_numpy(raw))
    from engine.hearth.moe_ops import _gathered_experts

    got = _gathered_experts(stored, torch.tensor([2, 0, 2]))
    dense = dequantize(raw.reshape(24, -1), GGMLQuantizationType.Q8_0).reshape(3, 8, 64)
    np.testing.assert_array_equal(got.numpy(), dense[[2, 0, 2]])


def test_yarn_correction_dims_by_hand():
    """gpt-oss's numbers: 64 rotated values, base 150000, 4096 original positions."""
    low, high = yarn_correction_dims(64, 4096, 150000.0, 32.0, 1.0)

    def turning(beta):
        return 64 * math.log(4096 / (beta * 2 * math.pi)) / (2 * math.log(150000.0))

    assert (low, high) == (math.floor(turning(32.0)), math.ceil(turning(1.0))) == (8, 18)


def test_yarn_keeps_fast_pairs_and_scales_slow_ones():
    plain = inverse_frequencies(64, 150000.0, 1.0, None)
    scaled = inverse_frequencies(64, 150000.0, 1 / 32, None)
    yarn_config = type("Yarn", (), dict(n_ctx_orig=4096, beta_fast=32.0, beta_slow=1.0))
    yarn = inverse_frequencies(64, 150000.0, 1 / 32, None, yarn_config)
    torch.testing.assert_close(yarn[:9], plain[:9])  # pairs up to low = 8: unscaled
    torch.testing.assert_close(yarn[18:], scaled[18:])  # from high = 18 on: scaled
    between = yarn[9:18]
    assert ((between < plain[9:18]) & (between > scaled[9:18])).all()


def test_an_expert_type_without_a_dequantizer_falls_back_with_its_name(tmp_path, monkeypatch):
    from engine.runtime import protocol as p
    from engine.runtime.hearth_driver import HearthModel
    from engine.runtime.hearth_load import HearthUnavailable
    from tests.engine.hearth.tiny_models import QT, tiny_spec, write_tiny_gguf

    monkeypatch.setenv("HEARTH_ENGINE_DEVICE", "cpu")
    spec = tiny_spec("qwen3moe", expert_type=QT.IQ4_NL)
    path = write_tiny_gguf(tmp_path / "iq4.gguf", spec)
    with pytest.raises(HearthUnavailable, match="tensor types IQ4_NL are not supported yet"):
        HearthModel(p.ModelParams(path=str(path), engine="hearth"))


def test_experts_run_on_a_gpu_where_the_expert_gemv_reads_them(tmp_path):
    """qwen3moe's Q4_0 and gpt-oss's MXFP4 experts go to the GPU (kernels' expert GEMV); an
    expert type it does not read (IQ4_NL) is refused on a GPU with its reason."""
    from engine.gguf import read_model_info
    from engine.hearth.capabilities import model_unsupported_reason
    from tests.engine.hearth.tiny_models import QT, tiny_spec, write_tiny_gguf

    for arch in ("qwen3moe", "gpt-oss"):
        info = read_model_info(write_tiny_gguf(tmp_path / f"{arch}.gguf", tiny_spec(arch)))
        assert model_unsupported_reason(info) is None
        assert model_unsupported_reason(info, gpu=False) is None
    spec = tiny_spec("qwen3moe", expert_type=QT.IQ4_NL)
    info = read_model_info(write_tiny_gguf(tmp_path / "iq4.gguf", spec))
    reason = model_unsupported_reason(info)
    assert reason.startswith("IQ4_NL experts (blk.0.ffn_gate_exps.weight) have no GPU expert")


def test_the_gpu_expert_types_are_the_kernels_formats():
    pytest.importorskip("triton")
    from engine.hearth.capabilities import MOE_GPU_EXPERT_TYPES
    from kernels.ggml_formats import FORMATS
    from kernels.moe_gemv import EXPERT_FORMATS

    assert sorted(MOE_GPU_EXPERT_TYPES.values()) == sorted(EXPERT_FORMATS)
    assert all(FORMATS[name].ggml_type == t for t, name in MOE_GPU_EXPERT_TYPES.items())
