"""The KV write with a step's queries (kernels/kv_write.py): Q's and K's heads biased, RMS-normed
and rotated, V biased, K and V stored in every format, one launch, against the numpy reference
of the launches it replaces (tests/kernels/test_rope.py's _prologue_reference, then
kv_formats' round trip)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels.errors import UnsupportedTensor
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec, reference_roundtrip
from kernels.rope import QKNorms
from kernels.rope_tables import Rope
from tests.kernels.test_rope import _prologue_reference

N_Q, N_KV, D = 4, 2, 32


def _inputs(seed: int, n: int, with_bias: bool):
    """q, k, v [n, heads, D] as strided views of one Q|K|V product (as the engine's), their
    biases and norm weights."""
    gen = torch.Generator().manual_seed(seed)
    h = N_Q + 2 * N_KV
    wide = torch.randn(n, h * D + 8, generator=gen) * 2.0
    heads = wide[:, : h * D].view(n, h, D)
    bias = torch.randn(h * D, generator=gen) if with_bias else None
    norms = (torch.rand(D, generator=gen) + 0.5, torch.rand(D, generator=gen) + 0.5)
    return heads, bias, norms


@pytest.mark.parametrize(
    ("k_format", "v_format", "layout", "n_rot", "with_bias", "with_norm"),
    [
        ("f16", "f16", "neox", 32, False, True),  # Qwen3: Q and K normed per head
        ("q8", "rot4", "normal", 32, True, False),  # gpt-oss, Qwen2: Q, K and V biased
        ("rot4", "q8", "neox", 16, True, True),  # partial rotary: dims past n_rot pass through
        ("kivi4", "rot4", "neox", 32, False, True),  # kivi4: the chunk's scratch, the open page
    ],
)
def test_queries_and_keys_rotated_and_stored_as_the_separate_launches_give_them(
    k_format, v_format, layout, n_rot, with_bias, with_norm, device
):
    """A 3-row chunk then a one-row step (positions on the device, as a captured step):
    the returned queries and the stored K and V against the reference."""
    rope = Rope.from_gguf_params(D, n_rot, 10000.0, layout=layout)
    spec = KVCacheSpec(1, N_KV, D, k_format, v_format, page_size=16, max_tokens=64)
    cache = PagedKVCache(spec, device=device)
    seq = cache.new_sequence()
    heads, bias, (qw, kw) = _inputs(len(k_format) + n_rot, 4, with_bias)
    norms = QKNorms(qw.to(device), kw.to(device), N_Q, 1e-6) if with_norm else None
    biases = (None, None, None)
    if bias is not None:
        biases = tuple(b.to(device) for b in bias.split([N_Q * D, N_KV * D, N_KV * D]))
    positions = torch.tensor([7, 8, 9, 10])
    cache.grow(seq, 11)
    got_q = []
    for rows in (slice(0, 3), slice(3, 4)):
        part = heads[rows].to(device)
        q, k, v = part[:, :N_Q], part[:, N_Q : N_Q + N_KV], part[:, N_Q + N_KV :]
        at = positions[rows].to(device)
        got = cache.write(0, seq, at, k, v, rope, q=q, biases=biases, norms=norms)
        got_q.append(got.float().cpu())
    expected = _prologue_reference(
        heads.numpy(), positions.numpy(), rope, None if bias is None else bias.numpy(),
        qw.numpy() if with_norm else None, kw.numpy(), N_Q, N_Q + N_KV, 1e-6,
    )  # fmt: skip
    np.testing.assert_allclose(torch.cat(got_q).numpy(), expected[:, :N_Q], atol=3e-3, rtol=1e-3)
    k_back, v_back = cache.read_rows(0, seq)
    # K and V reach the formats as f16 rows (kv_write.py); kivi4's open page (every row here)
    # holds K and V as written
    k_want, v_want = (x.astype(np.float16).astype(np.float32) for x in np.split(
        expected[:, N_Q:], 2, axis=1))  # fmt: skip
    k_ref, v_ref = k_want, v_want
    if k_format != "kivi4":
        k_ref, v_ref = reference_roundtrip(k_format, k_want), reference_roundtrip(v_format, v_want)
    for got, want in ((k_back[7:], k_ref), (v_back[7:], v_ref)):
        # a code may flip at a tie (the rotations' rounding): rarely, by one step
        assert np.mean(np.abs(got - want) > 1e-3 * np.abs(want).max()) < 0.02


def test_queries_need_a_rope_and_biases_must_be_float32_of_the_heads(device):
    spec = KVCacheSpec(1, N_KV, D, "f16", "f16", page_size=16, max_tokens=32)
    cache = PagedKVCache(spec, device=device)
    seq = cache.new_sequence()
    cache.grow(seq, 1)
    rope = Rope.from_gguf_params(D, layout="neox")
    k = v = torch.zeros(1, N_KV, D, device=device)
    q = torch.zeros(1, N_Q, D, device=device)
    with pytest.raises(UnsupportedTensor, match="and a rope"):
        cache.write(0, seq, 0, k, v, q=q)
    half = torch.zeros(N_Q * D, dtype=torch.float16, device=device)
    with pytest.raises(UnsupportedTensor, match="need float32"):
        cache.write(0, seq, 0, k, v, rope, q=q, biases=(half, None, None))


@pytest.mark.parametrize(("k_format", "v_format"), [("q8", "rot4"), ("kivi4", "f16")])
def test_one_launch_stores_the_codes_of_rope_s_launch_then_the_write(k_format, v_format, device):
    """Biases and head norms on: the queries and every stored code as apply_rope's launch and
    a plain write give them (the same bits in the interpreter, so a step and a speculative
    check, or a cache without this write, agree); a GPU's compiled reductions may
    round the norms apart by an ulp."""
    from kernels.rope import apply_rope

    rope = Rope.from_gguf_params(D, D, 10000.0, layout="neox")
    heads, bias, (qw, kw) = _inputs(11, 3, True)
    heads, bias = heads.to(device), bias.to(device)
    norms = QKNorms(qw.to(device), kw.to(device), N_Q, 1e-6)
    positions = torch.tensor([4, 5, 6], device=device)
    spec = KVCacheSpec(1, N_KV, D, k_format, v_format, page_size=16, max_tokens=32)
    caches, queries = [], []
    for fused in (False, True):
        cache = PagedKVCache(spec, device=device)
        seq = cache.new_sequence()
        cache.grow(seq, 7)
        if fused:
            biases = tuple(bias.split([N_Q * D, N_KV * D, N_KV * D]))
            q = cache.write(0, seq, positions, heads[:, N_Q : N_Q + N_KV],
                            heads[:, N_Q + N_KV :], rope, q=heads[:, :N_Q], biases=biases,
                            norms=norms)  # fmt: skip
        else:
            qkv = apply_rope(heads, positions, rope, bias=bias, norms=norms, n_rotated=N_Q + N_KV)
            q = qkv[:, :N_Q]
            k, v = qkv[:, N_Q : N_Q + N_KV], qkv[:, N_Q + N_KV :]
            cache.write(0, seq, positions, k.half(), v.half())
        caches.append(cache.read_rows(0, seq))
        queries.append(q.float().cpu())
    exact = device == "cpu"
    torch.testing.assert_close(queries[1], queries[0], rtol=0 if exact else 1e-3, atol=0)
    for got, want in zip(caches[1], caches[0], strict=True):
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            assert np.mean(got != want) < 0.01
