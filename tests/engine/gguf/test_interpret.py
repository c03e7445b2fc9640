"""Metadata to ModelInfo: per-layer arrays, MoE, MLA and recurrent dimensions, llama.cpp's
defaults, and typed errors for values a model loader would refuse."""

from __future__ import annotations

import pytest

from engine.gguf import BytesSource, GGUFError, ModelInfo, read_model_info
from engine.gguf.summary import summary_lines
from engine.gguf.values import ValueType
from tests.engine.gguf.craft import Builder, padded, tensor_bytes

U32, I32, STR, F32 = ValueType.UINT32, ValueType.INT32, ValueType.STRING, ValueType.FLOAT32


def model(kvs: list[tuple], tensors: list[tuple[str, tuple[int, ...], str]] = ()) -> Builder:
    """A file with these (key, type, value[, label]) pairs; list values become arrays."""
    b = Builder().header(len(tensors), len(kvs))
    for key, vtype, value, *label in kvs:
        if isinstance(value, list):
            b.kv_array(key, vtype, value, *label)
        else:
            b.kv(key, vtype, value, *label)
    offset = 0
    for i, (name, shape, type_name) in enumerate(tensors):
        b.tensor(name, shape, type_name, offset, f"t{i}")
        offset += padded(tensor_bytes(shape, type_name))
    b.pad().data(offset)
    return b


def read(b: Builder) -> ModelInfo:
    return read_model_info(BytesSource(b.bytes()))


def test_defaults_follow_llama_cpp() -> None:
    info = read(
        model(
            [
                ("general.architecture", STR, "llama"),
                ("llama.block_count", U32, 2),
                ("llama.embedding_length", U32, 512),
                ("llama.attention.head_count", U32, 8),
            ]
        )
    )
    assert info.head_count_kv == 8  # defaults to head_count
    assert (info.key_length, info.value_length) == (64, 64)  # embedding / heads
    assert (info.key_length_swa, info.value_length_swa) == (64, 64)
    assert info.n_head_kv(1) == 8 and info.is_swa_layer(0) is False
    assert info.quant_name is None and info.parameter_count == 0


def test_hybrid_moe_with_per_layer_arrays() -> None:
    info = read(
        model(
            [
                ("general.architecture", STR, "lfm2"),
                ("lfm2.block_count", U32, 4),
                ("lfm2.embedding_length", U32, 256),
                ("lfm2.attention.head_count", U32, [8, 8, 8, 8]),
                ("lfm2.attention.head_count_kv", I32, [0, 2, 0, 2]),
                ("lfm2.feed_forward_length", U32, [512, 512, 1024, 1024]),
                ("lfm2.attention.sliding_window", U32, 128),
                ("lfm2.shortconv.l_cache", U32, 3),
                ("lfm2.expert_count", U32, 32),
                ("lfm2.expert_used_count", U32, 4),
            ]
        )
    )
    assert [info.n_head_kv(i) for i in range(4)] == [0, 2, 0, 2]
    assert [info.n_ff(i) for i in range(4)] == [512, 512, 1024, 1024]
    assert info.recurrent is not None and info.recurrent.shortconv_l_cache == 3
    assert [info.is_recurrent_layer(i) for i in range(4)] == [True, False, True, False]
    assert [info.is_swa_layer(i) for i in range(4)] == [False, True, False, True]
    assert (info.expert_count, info.n_expert_used(0)) == (32, 4)
    assert any("varies by layer" in line for line in summary_lines(info))


def test_mla_and_ssm_dimensions() -> None:
    info = read(
        model(
            [
                ("general.architecture", STR, "deepseek2"),
                ("deepseek2.attention.kv_lora_rank", U32, 512),
                ("deepseek2.attention.q_lora_rank", U32, 1536),
                ("deepseek2.attention.key_length_mla", U32, 192),
                ("deepseek2.attention.value_length_mla", U32, 128),
                ("deepseek2.ssm.state_size", U32, 16),
            ]
        )
    )
    assert info.mla is not None
    assert (info.mla.kv_lora_rank, info.mla.q_lora_rank) == (512, 1536)
    assert (info.mla.key_length_mla, info.mla.value_length_mla) == (192, 128)
    assert info.recurrent is not None and info.recurrent.ssm_state_size == 16


def test_gemma4_style_swa_key_lengths_and_pattern_array() -> None:
    info = read(
        model(
            [
                ("general.architecture", STR, "gemma4"),
                ("gemma4.block_count", U32, 3),
                ("gemma4.attention.head_count", U32, 8),
                ("gemma4.attention.key_length", U32, 512),
                ("gemma4.attention.key_length_swa", U32, 256),
                ("gemma4.attention.sliding_window", U32, 1024),
                ("gemma4.attention.sliding_window_pattern", ValueType.BOOL, [True, True, False]),
            ]
        )
    )
    assert [info.is_swa_layer(i) for i in range(3)] == [True, True, False]
    assert [info.key_length_at(i) for i in range(3)] == [256, 256, 512]


def test_file_type_guessed_from_the_tensors() -> None:
    info = read(
        model(
            [("general.architecture", STR, "llama")],
            [("a", (256, 8), "Q4_K"), ("b", (32, 2), "Q8_0"), ("n", (64,), "F32")],
        )
    )
    assert info.file_type is None and info.quant_name == "Q4_K (guessed)"


@pytest.mark.parametrize(
    ("kvs", "field", "word"),
    [
        ([("general.architecture", U32, 5, "k")], "metadata 'general.architecture'", "string"),
        (
            [("general.architecture", STR, "llama"), ("llama.block_count", F32, 2.0, "k")],
            "metadata 'llama.block_count'",
            "integer",
        ),
        (
            [("general.architecture", STR, "llama"), ("llama.block_count", I32, -2, "k")],
            "metadata 'llama.block_count'",
            "negative",
        ),
        (
            [("general.architecture", STR, "llama"), ("llama.block_count", U32, 100_000, "k")],
            "metadata 'llama.block_count'",
            "512",
        ),
        (
            [
                ("general.architecture", STR, "llama"),
                ("llama.block_count", U32, 3),
                ("llama.attention.head_count_kv", U32, [1, 2], "k"),
            ],
            "metadata 'llama.attention.head_count_kv'",
            "3 blocks",
        ),
        (
            [
                ("general.architecture", STR, "llama"),
                ("llama.attention.head_count", STR, ["8"], "k"),
            ],
            "metadata 'llama.attention.head_count'",
            "integer array",
        ),
    ],
)
def test_values_a_loader_would_refuse(kvs, field: str, word: str) -> None:
    b = model(kvs)
    with pytest.raises(GGUFError) as caught:
        read(b)
    assert (caught.value.field, caught.value.offset) == (field, b.marks["k"])
    assert word in caught.value.detail


def test_tensor_in_a_block_past_block_count() -> None:
    b = model(
        [("general.architecture", STR, "llama"), ("llama.block_count", U32, 2)],
        [("blk.0.w", (32,), "F32"), ("blk.2.w", (32,), "F32")],
    )
    with pytest.raises(GGUFError) as caught:
        read(b)
    assert (caught.value.field, caught.value.offset) == ("tensor 'blk.2.w'", b.marks["t1"])
    assert "block_count is 2" in caught.value.detail


def test_blocks_counted_from_tensor_names_without_block_count() -> None:
    info = read(model([], [("blk.0.w", (32,), "F32"), ("blk.3.w", (64,), "F32")]))
    assert info.block_count is None
    assert info.layer_weight_bytes == (128, 0, 0, 256)
    assert info.n_layer == 4
