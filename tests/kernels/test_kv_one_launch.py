"""Session 8's decode attention changes: the reduce fused into the split kernel's launch
(AttentionTuning.fused_reduce: the last program of each KV head merges the partials, an atomic
ticket counter per head reset for the next launch), and queries prepared by the RoPE kernel
(apply_rope(..., prepare=cache.query_preparation()), attend(..., prepared=True)); each against
the float64 reference and against the two-launch path."""

from __future__ import annotations

import pytest
import torch

from kernels import decode_launch, kv_cache, reference
from kernels.decode_launch import AttentionTuning, split_counters
from kernels.errors import UnsupportedTensor
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec, reference_roundtrip
from kernels.rope import apply_rope
from kernels.rope_tables import Rope
from tests.kernels.conftest import relative_error

ATTENTION_TOLERANCE = 3e-3  # as test_kv_cache.py: f16 tiles against float64
THREE_PAIRS = [("f16", "f16"), ("rot4", "rot4"), ("q8", "rot4")]


def _filled(k_format, v_format, device, n, heads=2, dim=32, page=16, tokens=256, seed=0):
    spec = KVCacheSpec(
        n_layers=1, n_kv_heads=heads, head_dim=dim, k_format=k_format, v_format=v_format,
        page_size=page, max_tokens=tokens,
    )  # fmt: skip
    cache = PagedKVCache(spec, device=device)
    gen = torch.Generator().manual_seed(seed)
    seq = cache.new_sequence()
    k, v = torch.randn(n, heads, dim, generator=gen), torch.randn(n, heads, dim, generator=gen)
    cache.write(0, seq, cache.grow(seq, n), k.to(device), v.to(device))
    rows = (reference_roundtrip(k_format, k.numpy()), reference_roundtrip(v_format, v.numpy()))
    return cache, seq, rows


def _splits_of(monkeypatch, n_splits: int, n_kv_heads: int) -> None:
    """Make attend use n_splits splits a KV head (one sequence, one program an SM)."""
    monkeypatch.setattr(kv_cache, "_sm_count", lambda _device: n_splits * n_kv_heads)


@pytest.mark.gpu
@pytest.mark.parametrize(("k_format", "v_format"), THREE_PAIRS)
def test_fused_reduce_at_the_llama3_8b_shape(k_format, v_format):
    """Llama-3-8B's shape on the GPU: 3,000 positions, the split count from the compiled
    kernel, fused against two launches, and with q prepared (rot4 K)."""
    from tests.kernels.test_kv_cache import _llama3_8b_cache

    cache, seq, q, expected = _llama3_8b_cache(k_format, v_format, 3000)
    cache.tuning = AttentionTuning()
    two_launch = cache.attend(0, q, [seq]).float().cpu()
    for warps in (0, 4):
        cache.tuning = AttentionTuning(num_warps=warps, fused_reduce=True)
        out = cache.attend(0, q, [seq]).float().cpu()
        assert relative_error(out[0], expected) < 5e-3, cache.tuning
        assert relative_error(out, two_launch) < 1e-4, cache.tuning
        if k_format == "rot4":  # q prepared as the RoPE kernel leaves it (no RoPE here)
            prep = cache.query_preparation()
            ready = decode_launch.prepare_queries(q, prep.signs, prep.qk_scale, True, False)
            prepared = cache.attend(0, ready, [seq], prepared=True)
            assert relative_error(prepared.float().cpu(), two_launch) < 1e-3, cache.tuning
    assert int(split_counters(torch.device("cuda"), 8).count_nonzero()) == 0


@pytest.mark.parametrize(("n_splits", "tile_registers"), [(1, 4), (5, 4), (16, 4), (16, 2)])
@pytest.mark.parametrize(("k_format", "v_format"), THREE_PAIRS)
def test_fused_reduce_at_several_split_counts(
    k_format, v_format, n_splits, tile_registers, device, monkeypatch
):
    """201 positions on 13 pages of 16: one split (the merge of a single partial), 5 (each
    with 3 pages, the last with one), 16 (three splits see no page: m = -inf, weight 0).
    MERGE_TILE_REGISTERS cut to 4: groups of 4 splits (5: a group of 4 and one of 1; 16: four
    groups), each group and the groups merged in one step; cut to 2: groups of 2, and the 8
    groups of 16 splits merged in two passes of 4 steps."""
    _splits_of(monkeypatch, n_splits, 2)
    monkeypatch.setattr(decode_launch, "MERGE_TILE_REGISTERS", tile_registers)
    consts = decode_launch.fused_reduce_consts(AttentionTuning(fused_reduce=True), 4, 32, 4)
    assert consts["MERGE_CHUNK"] == tile_registers
    cache, seq, (k_ref, v_ref) = _filled(k_format, v_format, device, 201)
    q = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(1))
    outs = {}
    for fused in (False, True):
        cache.tuning = AttentionTuning(programs_per_sm=1, fused_reduce=fused)
        outs[fused] = cache.attend(0, q.to(device), [seq]).float().cpu()
    expected = reference.decode_attention(q[0].numpy(), k_ref, v_ref, 32**-0.5)
    assert relative_error(outs[True][0], expected) < ATTENTION_TOLERANCE
    assert relative_error(outs[True], outs[False]) < 1e-4
    assert int(split_counters(torch.device(device), 2).count_nonzero()) == 0


def test_fused_reduce_twice_in_a_row_and_several_sequences(device, monkeypatch):
    """The counters are left at zero by each launch, so the next launch (another step, with
    other queries; two sequences of different lengths and 3 query tokens each, 12 rows a KV
    head) merges right again. One split a group (MERGE_TILE_REGISTERS cut to 4), so the
    three groups' partials are merged by the head's last one."""
    _splits_of(monkeypatch, 3, 2 * 2)
    monkeypatch.setattr(decode_launch, "MERGE_TILE_REGISTERS", 4)
    spec = KVCacheSpec(1, 2, 32, "rot4", "q8", page_size=16, max_tokens=256)
    cache = PagedKVCache(spec, device=device)
    cache.tuning = AttentionTuning(programs_per_sm=1, fused_reduce=True)
    gen = torch.Generator().manual_seed(2)
    rows = {}
    for n in (70, 33):
        seq = cache.new_sequence()
        k, v = torch.randn(n, 2, 32, generator=gen), torch.randn(n, 2, 32, generator=gen)
        cache.write(0, seq, cache.grow(seq, n), k.to(device), v.to(device))
        rows[seq] = (reference_roundtrip("rot4", k.numpy()), reference_roundtrip("q8", v.numpy()))
    for _step in range(2):
        q = torch.randn(2, 3, 8, 32, generator=gen)
        out = cache.attend(0, q.to(device), list(rows)).float().cpu()
        for i, (k_ref, v_ref) in enumerate(rows.values()):
            for t in range(3):
                visible = len(k_ref) - 3 + t + 1
                expected = reference.decode_attention(
                    q[i, t].numpy(), k_ref[:visible], v_ref[:visible], 32**-0.5
                )
                assert relative_error(out[i, t], expected) < ATTENTION_TOLERANCE
        assert int(split_counters(torch.device(device), 4).count_nonzero()) == 0


def test_fused_reduce_with_positions_and_a_window(device):
    """Device positions (what a CUDA graph replays) and a sliding window, kivi4 keys (the
    open page read after the loop by the split that holds it)."""
    cache, seq, _rows = _filled("kivi4", "rot4", device, 150, page=32)
    cache.tuning = AttentionTuning(fused_reduce=True)
    q = torch.randn(1, 6, 32, generator=torch.Generator().manual_seed(4))
    two_launch = AttentionTuning()
    for position, window in ((37, 0), (149, 20)):
        where = torch.tensor([position], device=device)
        out = cache.attend(0, q.to(device), [seq], positions=where, window=window)
        cache.tuning, fused_tuning = two_launch, cache.tuning
        before = cache.attend(0, q.to(device), [seq], positions=where, window=window)
        cache.tuning = fused_tuning
        assert relative_error(out.float().cpu(), before.float().cpu()) < 1e-4


@pytest.mark.parametrize(("k_format", "v_format"), [("rot4", "rot4"), ("rot2", "rot4")])
@pytest.mark.parametrize("fused", [False, True])
def test_queries_prepared_in_rope_give_the_same_attention(k_format, v_format, fused, device):
    """q through the RoPE kernel with the cache's query preparation, then attend(prepared=True),
    against RoPE then attend on the raw rows: same output (the preparation is the rotation the
    attention would do, in the same float32 arithmetic), and the reference."""
    cache, seq, (k_ref, v_ref) = _filled(k_format, v_format, device, 75, dim=64)
    cache.tuning = AttentionTuning(fused_reduce=fused)
    rope = Rope.from_gguf_params(64, 64, 10000.0, layout="neox")
    q = torch.randn(1, 8, 64, generator=torch.Generator().manual_seed(6))
    position = torch.tensor([74], device=device)
    roped = apply_rope(q.to(device), position, rope)
    raw = cache.attend(0, roped.to(torch.float16), [seq], scale=0.1).float().cpu()
    prepared_q = apply_rope(q.to(device), position, rope, prepare=cache.query_preparation(0.1))
    assert prepared_q.dtype == torch.float16
    out = cache.attend(0, prepared_q, [seq], scale=0.1, prepared=True)
    assert out.dtype == torch.float16
    assert relative_error(out.float().cpu(), raw) < 1e-3
    expected = reference.decode_attention(roped[0].float().cpu().numpy(), k_ref, v_ref, 0.1)
    assert relative_error(out[0].float().cpu(), expected) < ATTENTION_TOLERANCE


def test_prepared_queries_are_refused_where_keys_are_not_rotated(device):
    cache, seq, _rows = _filled("q8", "rot4", device, 20)
    with pytest.raises(UnsupportedTensor, match="not stored rotated"):
        cache.query_preparation()
    q = torch.randn(1, 8, 32, dtype=torch.float16, device=device)
    with pytest.raises(UnsupportedTensor, match="prepared queries"):
        cache.attend(0, q, [seq], prepared=True)


@pytest.mark.parametrize("unpack", ["words", "bytes"])
@pytest.mark.parametrize(
    ("k_format", "v_format"), [("rot4", "rot4"), ("q8", "rot4"), ("f16", "rot4"), ("kivi4", "rot4")]
)
def test_the_flat_v_tile_gives_the_same_attention(k_format, v_format, unpack, device):
    """AttentionTuning.flat_v: rot4 V's f16 tile built 2-D (the scale and min broadcast over
    their 16 bytes) is the same tile as the one reshaped from [P, D/32, 16]: the same output
    as without it, and the reference (kivi4 K: against the two-launch output only)."""
    cache, seq, (k_ref, v_ref) = _filled(k_format, v_format, device, 75, dim=64, page=32)
    q = torch.randn(1, 8, 64, generator=torch.Generator().manual_seed(8))
    outs = []
    for flat in (False, True):
        cache.tuning = AttentionTuning(code_unpack=unpack, flat_v=flat)
        outs.append(cache.attend(0, q.to(device), [seq]).float().cpu())
    assert relative_error(outs[1], outs[0]) < 1e-4
    if k_format != "kivi4":  # kivi4's open page is read exact, not as the reference stores it
        expected = reference.decode_attention(q[0].numpy(), k_ref, v_ref, 64**-0.5)
        assert relative_error(outs[1][0], expected) < ATTENTION_TOLERANCE


@pytest.mark.gpu
@pytest.mark.parametrize(("k_format", "v_format"), [("rot4", "rot4"), ("q8", "rot4")])
def test_the_flat_v_tile_at_the_llama3_8b_shape(k_format, v_format):
    """The same on the GPU at Llama-3-8B's shape, with the inline assembly (and the fused
    reduce on or off)."""
    from tests.kernels.test_kv_cache import _llama3_8b_cache

    cache, seq, q, expected = _llama3_8b_cache(k_format, v_format, 3000)
    cache.tuning = AttentionTuning(flat_v=False)
    before = cache.attend(0, q, [seq]).float().cpu()
    for fused in (False, True):
        cache.tuning = AttentionTuning(flat_v=True, fused_reduce=fused)
        out = cache.attend(0, q, [seq]).float().cpu()
        assert relative_error(out[0], expected) < 5e-3, cache.tuning
        assert relative_error(out, before) < 1e-4, cache.tuning
