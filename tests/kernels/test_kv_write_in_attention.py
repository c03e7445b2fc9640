"""A decode step's own K/V row written by the attention's launch (PagedKVCache.attend with
step_row; decode_attention.py's WRITE) against the two launches it replaces (the KV write with
the step's queries, kernels/kv_write.py, then the attention): the same output and the same
stored rows, bit for bit, so that a decode step and a speculative check (which writes through
the KV write) agree."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels.act_quant import empty_quantized
from kernels.errors import UnsupportedTensor
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec
from kernels.kv_write import StepRow
from kernels.rope_tables import Rope

N_Q, N_KV, D, PAGE = 4, 2, 32, 16


def _heads(gen, n: int) -> torch.Tensor:
    """Q|K|V rows [n, N_Q + 2 N_KV, D] as strided views of one wider product (the engine's)."""
    h = N_Q + 2 * N_KV
    wide = torch.randn(n, h * D + 8, generator=gen) * 2.0
    return wide[:, : h * D].view(n, h, D)


def _two_caches(spec, prefix, device):
    """Two caches holding the same `prefix` rows [n, N_KV, D] at positions 0..n-1."""
    caches = []
    for _ in range(2):
        cache = PagedKVCache(spec, device=device)
        cache.tuning.programs_per_sm = 2  # several splits over 4 pages
        seq = cache.new_sequence()
        cache.grow(seq, spec.max_tokens)
        cache.write(0, seq, 0, prefix[0].to(device), prefix[1].to(device))
        caches.append((cache, seq))
    return caches


@pytest.mark.parametrize(
    ("k_format", "v_format", "layout", "n_rot", "with_bias", "window"),
    [
        ("f16", "f16", "normal", 32, False, 0),  # Llama
        ("q8", "rot4", "normal", 32, True, 0),  # gpt-oss, Qwen2: biases
        ("rot4", "rot4", "neox", 16, True, 20),  # partial rotary, a sliding window
        ("kivi4", "rot4", "normal", 32, False, 0),  # the open page, sealed at 31, opened at 32
    ],
)
def test_the_step_written_by_the_attention_gives_the_two_launches_bits(
    k_format, v_format, layout, n_rot, with_bias, window, device
):
    """Steps at positions 29..33 (the newest row opening page 2 at 32) after 29 stored rows:
    each step's output (and its 8-bit copy) and every stored row equal the KV write's then
    the attention's."""
    gen = torch.Generator().manual_seed(len(k_format) * 7 + n_rot)
    spec = KVCacheSpec(1, N_KV, D, k_format, v_format, page_size=PAGE, max_tokens=4 * PAGE)
    rope = Rope.from_gguf_params(D, n_rot, 10000.0, layout=layout)
    bias = torch.randn((N_Q + 2 * N_KV) * D, generator=gen) if with_bias else None
    biases = None
    if bias is not None:
        biases = tuple(b.to(device) for b in bias.split([N_Q * D, N_KV * D, N_KV * D]))
    prefix = torch.randn(2, 29, N_KV, D, generator=gen).half()
    (two, seq_two), (one, seq_one) = _two_caches(spec, prefix, device)
    steps = _heads(gen, 5).to(device)
    for i, position in enumerate(range(29, 34)):
        heads = steps[i : i + 1]
        q, k, v = heads[:, :N_Q], heads[:, N_Q : N_Q + N_KV], heads[:, N_Q + N_KV :]
        at = torch.tensor([position], device=device)
        outs = []
        for cache, seq, fused in ((two, seq_two, False), (one, seq_one, True)):
            quantized = empty_quantized(1, N_Q * D, device)
            if fused:
                row = StepRow(k, v, rope, biases=biases)
                out = cache.attend(0, q, [seq], positions=at, window=window, step_row=row,
                                   quantized=quantized)  # fmt: skip
            else:
                rotated = cache.write(0, seq, at, k, v, rope, q=q, biases=biases)
                out = cache.attend(0, rotated, [seq], positions=at, window=window,
                                   quantized=quantized)  # fmt: skip
            outs.append((out.float().cpu(), quantized.words.cpu(), quantized.scales.cpu()))
        for apart, together in zip(outs[0], outs[1], strict=True):
            torch.testing.assert_close(together, apart, rtol=0, atol=0)
    for apart, together in zip(two.read_rows(0, seq_two), one.read_rows(0, seq_one), strict=True):
        np.testing.assert_array_equal(together, apart)


def test_a_step_row_needs_one_query_at_device_positions(device):
    rope = Rope.from_gguf_params(D, layout="neox")
    row = StepRow(torch.zeros(1, N_KV, D), torch.zeros(1, N_KV, D), rope)
    spec = KVCacheSpec(1, N_KV, D, "f16", "f16", page_size=PAGE, max_tokens=PAGE)
    cache = PagedKVCache(spec, device=device)
    seq = cache.new_sequence()
    cache.grow(seq, 2)
    with pytest.raises(UnsupportedTensor, match="device positions"):
        cache.attend(0, torch.zeros(1, N_Q, D).to(device), [seq], step_row=row)
    with pytest.raises(UnsupportedTensor, match="one query"):
        cache.attend(0, torch.zeros(1, 2, N_Q, D).to(device), [seq],
                     positions=torch.tensor([0, 1], device=device), step_row=row)  # fmt: skip


def test_a_kivi4_step_row_is_for_the_sequence_s_own_table_and_open_page(device):
    """The page is sealed after the attention from the sequence's own open page: a table or
    slots of a graph's copies would write one page and seal another."""
    rope = Rope.from_gguf_params(D, layout="neox")
    row = StepRow(torch.zeros(1, N_KV, D).to(device), torch.zeros(1, N_KV, D).to(device), rope)
    spec = KVCacheSpec(1, N_KV, D, "kivi4", "rot4", page_size=PAGE, max_tokens=PAGE)
    cache = PagedKVCache(spec, device=device)
    seq = cache.new_sequence()
    cache.grow(seq, 1)
    slots = torch.zeros(1, dtype=torch.int32, device=device)
    with pytest.raises(UnsupportedTensor, match="neither tables nor slots"):
        cache.attend(0, torch.zeros(1, N_Q, D).to(device), [seq],
                     positions=torch.tensor([0], device=device), step_row=row,
                     slots=slots)  # fmt: skip
