"""ModelConfig from GGUF headers: each architecture's conventions, and what is refused."""

from __future__ import annotations

import dataclasses
import math

import pytest

from engine.gguf import read_model_info
from engine.hearth.config import UnsupportedModel, model_config
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf


@pytest.fixture(scope="module")
def infos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cfg")
    return {
        arch: read_model_info(write_tiny_gguf(folder / f"{arch}.gguf", tiny_spec(arch)))
        for arch in ("llama", "qwen2", "qwen3", "gemma3", *MOE_ARCHS)
    }


MOE_ARCHS = ("qwen3moe", "qwen2moe", "gpt-oss", "llama-moe")


@pytest.mark.parametrize(
    ("arch", "layout", "activation", "qk_norm", "post_norms", "embed_scale"),
    [
        ("llama", "normal", "silu", False, False, 1.0),
        ("qwen2", "neox", "silu", False, False, 1.0),
        ("qwen3", "neox", "silu", True, False, 1.0),
        ("gemma3", "neox", "gelu_tanh", True, True, math.sqrt(256)),
    ],
)
def test_architecture_conventions(
    infos, arch, layout, activation, qk_norm, post_norms, embed_scale
):
    config = model_config(infos[arch])
    assert config.rope.layout == layout
    assert config.activation == activation
    assert config.qk_norm == qk_norm
    assert config.post_norms == post_norms
    assert config.embed_scale == pytest.approx(embed_scale)
    assert config.attn_scale == pytest.approx(1 / math.sqrt(config.head_dim))


def test_gemma3_sliding_window_layers_and_their_rope_base(infos):
    config = model_config(infos["gemma3"])
    assert config.swa_window == 3
    # llama.cpp's default pattern 6: five windowed layers, then one global
    assert [config.is_swa(i) for i in range(config.n_layer)] == [True, True, True]
    assert config.rope.freq_base == 1_000_000.0
    assert config.rope.freq_base_swa == 10_000.0  # llama.cpp's default when the file is silent


def test_gemma3_27b_scales_attention_by_the_embedding_per_head(infos):
    info = dataclasses.replace(infos["gemma3"], block_count=62)
    config = model_config(info)
    assert config.attn_scale == pytest.approx(1 / math.sqrt(256 / 4))


def test_linear_rope_scaling_and_epsilon(infos):
    meta = dict(infos["llama"].metadata)
    meta["llama.rope.scaling.type"] = "linear"
    meta["llama.rope.scaling.factor"] = 4.0
    config = model_config(dataclasses.replace(infos["llama"], metadata=meta))
    assert config.rope.freq_scale == 0.25
    assert config.rms_eps == pytest.approx(1e-6)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(architecture="mamba"), "architecture 'mamba'"),
        (dict(expert_count=8, expert_used_count=2), "one tensor per expert"),
        (dict(head_count=(6, 6, 4)), "differs between layers"),
        (dict(value_length=16), "keys and values of different lengths"),
        (dict(split_count=2), "split GGUF"),
    ],
)
def test_unsupported_models_say_why(infos, change, message):
    with pytest.raises(UnsupportedModel, match=message):
        model_config(dataclasses.replace(infos["llama"], **change))


def _with_meta(info, **changes):
    meta = dict(info.metadata)
    meta.update({f"{info.architecture}.{key}": value for key, value in changes.items()})
    return dataclasses.replace(info, metadata=meta)


def test_longrope_scaling_is_refused(infos):
    info = _with_meta(infos["qwen2"], **{"rope.scaling.type": "longrope"})
    with pytest.raises(UnsupportedModel, match="RoPE scaling 'longrope'"):
        model_config(info)


def test_qwen3_long_context_yarn(infos):
    """Qwen3's long-context setting: YaRN by 4 from 32768 positions."""
    info = _with_meta(
        infos["qwen3"],
        **{
            "rope.scaling.type": "yarn",
            "rope.scaling.factor": 4.0,
            "rope.scaling.original_context_length": 32768,
        },
    )
    rope = model_config(info).rope
    assert rope.freq_scale == 0.25
    assert rope.yarn is not None and rope.yarn.n_ctx_orig == 32768
    assert (rope.yarn.beta_fast, rope.yarn.beta_slow) == (32.0, 1.0)
    assert rope.attn_factor == pytest.approx(1 + 0.1 * math.log(4))


def test_scaling_type_none_ignores_the_factor(infos):
    info = _with_meta(infos["llama"], **{"rope.scaling.type": "none", "rope.scaling.factor": 8.0})
    assert model_config(info).rope.freq_scale == 1.0


@pytest.mark.parametrize(
    ("arch", "n_expert", "gating", "normalize", "n_ff_shexp", "activation"),
    [
        ("qwen3moe", 8, "softmax", True, 0, "silu"),
        ("qwen2moe", 4, "softmax", False, 64, "silu"),
        ("gpt-oss", 4, "topk_softmax", False, 0, "swiglu_oai"),
        ("llama-moe", 4, "softmax", True, 0, "silu"),
    ],
)
def test_experts_per_architecture(infos, arch, n_expert, gating, normalize, n_ff_shexp, activation):
    config = model_config(infos[arch])
    moe = config.moe
    assert (moe.n_expert, moe.n_expert_used) == (n_expert, 2)
    assert (moe.gating, moe.normalize) == (gating, normalize)
    assert moe.n_ff_shexp == n_ff_shexp and moe.shared_gate == (arch == "qwen2moe")
    assert config.activation == activation


def test_dense_models_have_no_experts(infos):
    assert model_config(infos["llama"]).moe is None


def test_gpt_oss_conventions(infos):
    config = model_config(infos["gpt-oss"])
    assert config.attn_sinks
    assert config.ffn_norm_tensor == "post_attention_norm.weight"
    # llama.cpp's pattern 2: even layers slide, odd ones see everything
    assert config.swa_window == 3 and config.swa_layers == (True, False)
    # the windowed layers rotate as the others: same base, same YaRN scale
    assert config.rope.freq_base_swa == config.rope.freq_base
    assert config.rope.freq_scale_swa == config.rope.freq_scale == 0.25
    assert config.rope.yarn.n_ctx_orig == 4096


@pytest.mark.parametrize(
    ("arch", "change", "message"),
    [
        ("qwen3moe", dict(expert_count=0), "gives no expert_count"),
        ("qwen3moe", dict(expert_used_count=9), "9 experts used of 8"),
        ("qwen3moe", dict(expert_used_count=(2, 4)), "expert_used_count differs"),
        ("qwen3moe", dict(expert_shared_count=1), "shared experts in qwen3moe"),
        ("qwen3moe", dict(architecture="deepseek2"), "architecture 'deepseek2'"),
    ],
)
def test_unsupported_experts_say_why(infos, arch, change, message):
    with pytest.raises(UnsupportedModel, match=message):
        model_config(dataclasses.replace(infos[arch], **change))


def test_experts_without_a_gate_matrix_are_refused(infos):
    info = infos["qwen3moe"]
    tensors = tuple(t for t in info.tensors if "ffn_gate_exps" not in t.name)
    with pytest.raises(UnsupportedModel, match="without a gate matrix"):
        model_config(dataclasses.replace(info, tensors=tensors))
