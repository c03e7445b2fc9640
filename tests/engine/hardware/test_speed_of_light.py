"""The speed-of-light bound: bytes a decode step reads, over the bandwidth (tables)."""

from __future__ import annotations

import functools

import pytest

from engine.gguf import read_model_info
from engine.hardware.speed_of_light import (
    bound_tokens_per_second,
    decode_bytes_per_token,
    gauge_text,
    kv_bytes_per_token,
    reply_depth,
    weight_bytes_per_token,
)
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf


@pytest.fixture(scope="module")
def header(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sol")

    @functools.cache
    def make(shape: str):
        return read_model_info(write_sparse_gguf(folder / f"{shape}.gguf", SHAPES[shape], "Q4_K_M"))

    return make


def test_a_dense_model_reads_every_matrix_but_the_embedding_once(header):
    info = header("llama3-8b")
    everything = sum(t.n_bytes for t in info.tensors)
    assert weight_bytes_per_token(info) == everything - info.tensor("token_embd.weight").n_bytes


def test_a_mixture_of_experts_reads_only_the_selected_experts(header):
    info = header("qwen3-30b-a3b")
    experts = sum(t.n_bytes for t in info.tensors if "_exps." in t.name)
    others = sum(t.n_bytes for t in info.tensors if "_exps." not in t.name)
    others -= info.tensor("token_embd.weight").n_bytes
    k, n = info.n_expert_used(0), info.expert_count
    assert (k, n) == (8, 128)
    assert weight_bytes_per_token(info) == pytest.approx(others + experts * k / n, abs=2)
    assert weight_bytes_per_token(info) < 0.2 * (others + experts)  # ~3B of 30B active


@pytest.mark.parametrize(
    ("type_k", "type_v", "bytes_per_value"),
    [
        ("f16", "f16", 2.0),
        ("q8_0", "q8_0", 34 / 32),
        ("q4_0", "q4_0", 18 / 32),
        ("q8", "q8", (128 + 2) / 128),  # the Hearth engine's q8: a scale per row
        ("rot4", "rot4", (64 + 16) / 128),  # 4 bits, an f16 scale and minimum per 32: 5 bits
    ],
)
def test_kv_read_is_every_attended_position_in_the_cache_format(
    header, type_k, type_v, bytes_per_value
):
    info = header("llama3-8b")  # 32 layers, 8 KV heads of 128
    expected = 1000 * 32 * 8 * 128 * 2 * bytes_per_value
    assert kv_bytes_per_token(info, 1000, type_k, type_v) == pytest.approx(expected, abs=1)


def test_a_sliding_window_layer_reads_at_most_its_window(header):
    info = header("gemma3-12b")
    window = info.sliding_window.size
    far, near = (
        kv_bytes_per_token(info, 8 * window, "f16", "f16"),
        kv_bytes_per_token(info, window, "f16", "f16"),
    )
    global_layers = info.n_layer - info.sliding_window.n_swa_layers
    per_position_global = far - near  # only the global layers read past the window
    assert per_position_global == pytest.approx(
        7 * window * global_layers * info.n_head_kv(0) * 2 * info.key_length * 2, rel=1e-6
    )


def test_an_unknown_cache_type_is_refused(header):
    with pytest.raises(ValueError, match="unknown KV cache type"):
        kv_bytes_per_token(header("llama3-8b"), 10, "q3_weird", "f16")


@pytest.mark.parametrize(
    ("bytes_per_token", "gbps", "bound"),
    [(10**9, 1000.0, 1000.0), (4 * 10**9, 3000.0, 750.0), (0, 1000.0, 0.0), (10**9, 0.0, 0.0)],
)
def test_the_bound_is_bandwidth_over_bytes(bytes_per_token, gbps, bound):
    assert bound_tokens_per_second(bytes_per_token, gbps) == pytest.approx(bound)


def test_the_bound_falls_as_the_context_fills(header):
    info = header("llama3-8b")
    short = bound_tokens_per_second(decode_bytes_per_token(info, 100, "f16", "f16"), 1000)
    deep = bound_tokens_per_second(decode_bytes_per_token(info, 32768, "f16", "f16"), 1000)
    assert deep < short


@pytest.mark.parametrize(
    ("n_prompt", "n_generated", "depth"), [(20, 1, 20), (20, 43, 41), (0, 0, 0), (100, 2, 100)]
)
def test_a_replys_depth_is_the_prompt_and_half_the_reply(n_prompt, n_generated, depth):
    assert reply_depth(n_prompt, n_generated) == depth


@pytest.mark.parametrize(
    ("tok_s", "bound", "text"),
    [
        (42.0, 168.0, "25% of the 168 tok/s bound"),
        (383.0, 640.0, "60% of the 640 tok/s bound"),
        (3.0, 4.5, "67% of the 4.5 tok/s bound"),
        (1500.0, 12_000.0, "12% of the 12,000 tok/s bound"),
        (42.0, 0.0, ""),  # no bound known
        (0.0, 168.0, ""),  # no decode step measured (a one-token reply)
    ],
)
def test_gauge_text(tok_s, bound, text):
    assert gauge_text(tok_s, bound) == text
