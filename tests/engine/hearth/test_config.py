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
        for arch in ("llama", "qwen2", "qwen3", "gemma3")
    }


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
        (dict(expert_count=8), "mixture-of-experts"),
        (dict(head_count=(6, 6, 4)), "differs between layers"),
        (dict(value_length=16), "keys and values of different lengths"),
        (dict(split_count=2), "split GGUF"),
    ],
)
def test_unsupported_models_say_why(infos, change, message):
    with pytest.raises(UnsupportedModel, match=message):
        model_config(dataclasses.replace(infos["llama"], **change))


def test_yarn_is_refused(infos):
    meta = dict(infos["qwen2"].metadata)
    meta["qwen2.rope.scaling.type"] = "yarn"
    with pytest.raises(UnsupportedModel, match="RoPE scaling 'yarn'"):
        model_config(dataclasses.replace(infos["qwen2"], metadata=meta))
