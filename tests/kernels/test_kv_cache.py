"""The paged KV cache: what the write kernel stores, and decode attention over it, against
kv_formats' numpy reference, for every K/V format pair, odd lengths, GQA and several sequences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import reference
from kernels.decode_launch import AttentionTuning
from kernels.errors import UnsupportedTensor
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec, reference_roundtrip
from kernels.rope_tables import Rope
from tests.kernels.conftest import relative_error

FORMAT_PAIRS = [
    ("f16", "f16"),
    ("q8", "q8"),
    ("rot4", "rot4"),
    ("q8", "rot4"),
    ("rot4", "q8"),
    ("rot2", "rot4"),
    ("f16", "rot4"),
]
# Attention in the kernel multiplies f16 tiles (q rounded to f16, p rounded to f16), against
# float64 over the same dequantized rows.
ATTENTION_TOLERANCE = 3e-3


def _cache(k_format, v_format, device, heads=2, dim=64, page=16, tokens=256):
    spec = KVCacheSpec(
        n_layers=2, n_kv_heads=heads, head_dim=dim, k_format=k_format, v_format=v_format,
        page_size=page, max_tokens=tokens,
    )  # fmt: skip
    return PagedKVCache(spec, device=device)


@pytest.mark.parametrize(("k_format", "v_format"), FORMAT_PAIRS)
def test_write_then_attend_matches_reference(k_format, v_format, device):
    gen = torch.Generator().manual_seed(len(k_format) * 7 + len(v_format))
    cache = _cache(k_format, v_format, device)
    seq, other = cache.new_sequence(), cache.new_sequence()
    k = torch.randn(37, 2, 64, generator=gen)
    v = torch.randn(37, 2, 64, generator=gen)
    # two writes, interleaved with another sequence, so pages are not contiguous
    cache.grow(other, 5)
    cache.write(1, seq, cache.grow(seq, 20), k[:20].to(device), v[:20].to(device))
    cache.grow(other, 20)
    cache.write(1, seq, cache.grow(seq, 17), k[20:].to(device), v[20:].to(device))

    k_ref = reference_roundtrip(k_format, k.numpy())
    v_ref = reference_roundtrip(v_format, v.numpy())
    k_back, v_back = cache.read_rows(1, seq)
    # Rounding of the rotation in f32 may flip a code at a tie: at most one step, rarely.
    for got, want in ((k_back, k_ref), (v_back, v_ref)):
        assert np.mean(np.abs(got - want) > 1e-3) < 0.01

    q = torch.randn(1, 8, 64, generator=gen)  # 8 query heads over 2 KV heads
    out = cache.attend(1, q.to(device), [seq])
    expected = reference.decode_attention(q[0].numpy(), k_ref, v_ref, 1 / 8)
    assert out.shape == q.shape
    assert relative_error(out[0].cpu(), expected) < ATTENTION_TOLERANCE


def test_several_sequences_of_different_lengths(device):
    cache = _cache("rot4", "rot4", device, heads=1, dim=32, page=16)
    gen = torch.Generator().manual_seed(45)
    rows = {}
    for n in (1, 16, 45):
        seq = cache.new_sequence()
        k, v = torch.randn(n, 1, 32, generator=gen), torch.randn(n, 1, 32, generator=gen)
        cache.write(0, seq, cache.grow(seq, n), k.to(device), v.to(device))
        rows[seq] = (k, v)
    seqs = list(rows)
    q = torch.randn(len(seqs), 3, 32, generator=gen)
    out = cache.attend(0, q.to(device), seqs)
    for i, seq in enumerate(seqs):
        k, v = rows[seq]
        expected = reference.decode_attention(
            q[i].numpy(), reference_roundtrip("rot4", k.numpy()),
            reference_roundtrip("rot4", v.numpy()), 32**-0.5,
        )  # fmt: skip
        assert relative_error(out[i].cpu(), expected) < ATTENTION_TOLERANCE


@pytest.mark.parametrize(("v_format", "sinks"), [("f16", False), ("rot4", True)])
def test_the_reduce_writes_the_output_in_8_bits_as_quantize_activation_does(
    v_format, sinks, device
):
    """The attention output's 8-bit copy from the reduce (for wo's integer GEMV) has the bits
    the quantization launch would give the stored output: every sequence's row, every head."""
    from kernels.act_quant import empty_quantized, quantize_activation

    gen = torch.Generator().manual_seed(5)
    cache = _cache("q8", v_format, device, heads=2, dim=64)
    seqs = [cache.new_sequence() for _ in range(2)]
    for n, seq in zip((21, 40), seqs, strict=True):
        k, v = torch.randn(n, 2, 64, generator=gen), torch.randn(n, 2, 64, generator=gen)
        cache.write(0, seq, cache.grow(seq, n), k.to(device), v.to(device))
    q = torch.randn(2, 4, 64, generator=gen).to(device)
    logits = torch.randn(4, generator=gen).to(device) if sinks else None
    buffers = empty_quantized(2, 4 * 64, q.device)
    out = cache.attend(0, q, seqs, sinks=logits, quantized=buffers)
    expected = quantize_activation(out.reshape(2, -1))
    assert torch.equal(out, cache.attend(0, q, seqs, sinks=logits))
    for name in ("words", "scales", "sums"):
        assert torch.equal(getattr(buffers, name), getattr(expected, name)), name


@pytest.mark.parametrize("layout", ["normal", "neox"])
def test_rope_fused_into_the_write(layout, device):
    rope = Rope.from_gguf_params(64, 64, base=10000.0, layout=layout)
    cache = _cache("f16", "f16", device)
    seq = cache.new_sequence()
    cache.grow(seq, 3)
    gen = torch.Generator().manual_seed(5)
    k, v = torch.randn(5, 2, 64, generator=gen), torch.randn(5, 2, 64, generator=gen)
    cache.write(0, seq, cache.grow(seq, 5), k.to(device), v.to(device), rope=rope)
    k_back, _ = cache.read_rows(0, seq)
    rotated = reference.rope(k.numpy(), np.arange(3, 8), rope.inv_freq, 64, rope.neox)
    np.testing.assert_allclose(k_back[3:], rotated, atol=2e-3)


def test_rot4_keeps_attention_closer_than_plain_error_bound(device):
    """Rotation's point: a channel 30x larger than the rest (as real keys have) must not
    wreck the 4-bit groups. Against the unquantized rows, rot4 stays near its Gaussian error."""
    gen = torch.Generator().manual_seed(11)
    k = torch.randn(64, 2, 64, generator=gen)
    k[:, :, 5] *= 30.0
    rot = reference_roundtrip("rot4", k.numpy())
    assert relative_error(rot, k.numpy()) < 0.12


def test_errors_name_the_problem(device):
    with pytest.raises(UnsupportedTensor, match="'rot2' is for K only"):
        KVCacheSpec(1, 1, 64, k_format="f16", v_format="rot2")
    with pytest.raises(UnsupportedTensor, match="'q3'"):
        KVCacheSpec(1, 1, 64, k_format="q3")
    with pytest.raises(UnsupportedTensor, match="head size 80"):
        KVCacheSpec(1, 1, 80)
    cache = _cache("f16", "f16", device, tokens=32)
    seq = cache.new_sequence()
    with pytest.raises(UnsupportedTensor, match="KV cache is full"):
        cache.grow(seq, 33)
    with pytest.raises(UnsupportedTensor, match="grow it first"):
        cache.write(0, seq, 0, torch.zeros(1, 2, 64), torch.zeros(1, 2, 64))


def _llama3_8b_cache(k_format, v_format, n_rows):
    """A GPU cache at Llama-3-8B's attention shape (8 KV heads of 128, 32 query heads) holding
    n_rows random K/V rows; a query on the GPU, and its reference attention over the rows as
    the formats store them. Skips without a CUDA GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    spec = KVCacheSpec(1, 8, 128, k_format, v_format, page_size=64, max_tokens=4096)
    cache = PagedKVCache(spec, device="cuda")
    seq = cache.new_sequence()
    gen = torch.Generator().manual_seed(n_rows)
    k = torch.randn(n_rows, 8, 128, dtype=torch.float16, generator=gen)
    v = torch.randn(n_rows, 8, 128, dtype=torch.float16, generator=gen)
    cache.write(0, seq, cache.grow(seq, n_rows), k.cuda(), v.cuda())
    q = torch.randn(1, 32, 128, dtype=torch.float16, generator=gen)
    expected = reference.decode_attention(
        q[0].float().numpy(), reference_roundtrip(k_format, k.float().numpy()),
        reference_roundtrip(v_format, v.float().numpy()), 128**-0.5,
    )  # fmt: skip
    return cache, seq, q.cuda(), expected


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("k_format", "v_format"),
    [("f16", "f16"), ("q8", "q8"), ("rot4", "rot4"), ("q8", "rot4"), ("rot4", "q8")],
)
def test_llama3_8b_shape_at_4k(k_format, v_format):
    """The inline-assembly unpacking (kernels/nibbles.py) in the real kernel layout: K's codes
    unpacked in the dot's layout, V's where they were loaded, V's rot4 tile built 2-D."""
    cache, seq, q, expected = _llama3_8b_cache(k_format, v_format, 4000)
    out = cache.attend(0, q, [seq])
    assert relative_error(out[0].float().cpu(), expected) < 5e-3


def test_many_splits_are_reduced_in_chunks(device, monkeypatch):
    """More splits than the reduce kernel reads in one step (16 here, 128 in use): the steps
    merged by the online softmax's rescaling, the last one partial."""
    from kernels import decode_launch, kv_cache

    monkeypatch.setattr(kv_cache, "_sm_count", lambda _device: 64)
    monkeypatch.setattr(decode_launch, "REDUCE_MAX_CHUNK", 16)
    cache = _cache("f16", "f16", device, heads=1, dim=32, page=16, tokens=544)
    seq = cache.new_sequence()
    gen = torch.Generator().manual_seed(530)
    k, v = torch.randn(530, 1, 32, generator=gen), torch.randn(530, 1, 32, generator=gen)
    cache.write(0, seq, cache.grow(seq, 530), k.to(device), v.to(device))
    q = torch.randn(1, 2, 32, generator=gen)
    out = cache.attend(0, q.to(device), [seq])  # 34 pages, one split each
    expected = reference.decode_attention(q[0].numpy(), k.numpy(), v.numpy(), 32**-0.5)
    assert relative_error(out[0].cpu(), expected) < ATTENTION_TOLERANCE


@pytest.mark.parametrize(
    ("k_format", "v_format", "tuning"),
    [
        ("f16", "f16", AttentionTuning()),
        ("q8", "rot4", AttentionTuning()),
        ("rot4", "rot4", AttentionTuning(mask_tail=True)),
    ],
)
def test_several_query_tokens_see_up_to_their_own_position(k_format, v_format, tuning, device):
    """Draft verification: the last T positions' queries, each causal up to itself. With 33
    positions in pages of 16, the last page (one split) holds a position only token 4 sees
    (with mask_tail, the only page masked)."""
    cache = _cache(k_format, v_format, device, heads=2, dim=32, page=16)
    cache.tuning = tuning
    seq = cache.new_sequence()
    gen = torch.Generator().manual_seed(33)
    k, v = torch.randn(33, 2, 32, generator=gen), torch.randn(33, 2, 32, generator=gen)
    cache.write(0, seq, cache.grow(seq, 33), k.to(device), v.to(device))
    q = torch.randn(1, 5, 6, 32, generator=gen)  # 5 tokens x 3 query heads per KV head
    out = cache.attend(0, q.to(device), [seq])
    assert out.shape == q.shape
    k_ref = reference_roundtrip(k_format, k.numpy())
    v_ref = reference_roundtrip(v_format, v.numpy())
    for t in range(5):
        visible = 33 - 5 + t + 1
        expected = reference.decode_attention(
            q[0, t].numpy(), k_ref[:visible], v_ref[:visible], 32**-0.5
        )
        assert relative_error(out[0, t].cpu(), expected) < ATTENTION_TOLERANCE


@pytest.mark.parametrize(("k_format", "v_format"), [("f16", "f16"), ("q8", "rot4")])
def test_one_sequence_given_per_query_with_splits_as_one_gives_each_lone_step_s_bits(
    k_format, v_format, device
):
    """A speculative check's rows (engine/hearth/verify.py): the sequence once per query, each
    at its own position, equal to decode steps attending one query at a time, bit for bit."""
    gen = torch.Generator().manual_seed(11)
    cache = _cache(k_format, v_format, device, tokens=64)
    seq = cache.new_sequence()
    k, v = torch.randn(40, 2, 64, generator=gen), torch.randn(40, 2, 64, generator=gen)
    cache.write(0, seq, cache.grow(seq, 40), k.to(device), v.to(device))
    # the queries as the engine has them: 8 heads of each row of a wider RoPE output (Q|K|V)
    qkv = torch.randn(3, 12, 64, generator=gen).to(device=device, dtype=torch.float16)
    q = qkv[:, :8]
    positions = torch.tensor([37, 38, 39], device=device)
    rows = cache.attend(0, q, [seq] * 3, positions=positions, splits_as_one=True)
    for t in range(3):
        alone = cache.attend(0, q[t : t + 1].clone(), [seq], positions=positions[t : t + 1])
        assert torch.equal(rows[t : t + 1], alone)


def test_rows_of_a_wider_product_are_written_as_their_copies(device):
    """K and V as views into the joined Q|K|V output at several rows (a speculative check)
    are stored as their contiguous copies are: the write reads rows by their stride."""
    gen = torch.Generator().manual_seed(12)
    qkv = torch.randn(5, 6, 64, generator=gen).to(device=device, dtype=torch.float16)
    k, v = qkv[:, 2:4], qkv[:, 4:6]
    stored = []
    for rows in ((k, v), (k.contiguous(), v.contiguous())):
        cache = _cache("q8", "rot4", device, tokens=64)
        seq = cache.new_sequence()
        cache.write(0, seq, cache.grow(seq, 5), *rows)
        stored.append(cache.gather(0, seq, 5))
    for got, expected in zip(stored[0], stored[1], strict=True):
        assert torch.equal(got, expected)


@pytest.mark.parametrize("fmt", ["f16", "rot4"])
def test_a_view_reads_and_writes_the_sequence_it_shows(fmt, device):
    """A view's table is one tensor whichever sequence it shows: gathered through it, the
    shown sequence's rows and zeros past its pages (even where the pages left by another
    sequence hold values); written through it, rows land in the shown sequence's pages and
    those past them are dropped."""
    gen = torch.Generator().manual_seed(3)
    cache = _cache(fmt, fmt, device, heads=2, dim=32, page=16, tokens=128)
    first, seq = cache.new_sequence(), cache.new_sequence()
    for s, n in ((first, 40), (seq, 20)):
        k, v = torch.randn(n, 2, 32, generator=gen), torch.randn(n, 2, 32, generator=gen)
        cache.write(0, s, cache.grow(s, n), k.to(device), v.to(device))
    view = cache.new_view()
    table = cache.block_table(view)
    cache.show(view, first)
    cache.show(view, seq)
    assert cache.block_table(view).data_ptr() == table.data_ptr()
    k_seq, v_seq = cache.gather(0, seq, 20)
    k_view, v_view = cache.gather(0, view, 64)  # 2 pages shown, 2 not
    assert torch.equal(k_view[:20], k_seq) and torch.equal(v_view[:20], v_seq)
    assert not k_view[32:].any() and not v_view[32:].any()

    k_first, v_first = cache.gather(0, first, 40)
    k, v = torch.randn(24, 2, 32, generator=gen), torch.randn(24, 2, 32, generator=gen)
    positions = torch.arange(20, 44, device=device)  # 12 inside seq's second page, 12 past it
    cache.write(0, view, positions, k.to(device), v.to(device))
    k_after, _ = cache.gather(0, seq, 32)
    assert torch.equal(k_after[:20], k_seq)
    want = reference_roundtrip(fmt, k[:12].numpy())
    assert relative_error(k_after[20:32].float().cpu(), want) < 1e-2
    # the dropped rows went to no one's page
    assert all(map(torch.equal, cache.gather(0, first, 40), (k_first, v_first)))
    assert not cache.gather(0, view, 64)[0][32:].any()

    with pytest.raises(UnsupportedTensor, match="kivi4"):
        _cache("kivi4", "f16", device).new_view()
