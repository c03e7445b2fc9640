"""kivi4 keys in the paged cache (kernels/kv_kivi.py): pages sealed per channel once full, the
open page read exact, over writes of one row and of chunks, device positions, truncation,
the gather, prefill and decode attention, against kv_formats' numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import reference
from kernels.errors import UnsupportedTensor
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import (
    KVCacheSpec,
    bytes_per_row,
    kivi_channel_order,
    reference_kivi_pages,
    reference_quantize,
    reference_roundtrip,
)
from tests.kernels.conftest import relative_error
from tests.kernels.test_kv_cache import ATTENTION_TOLERANCE


def _cache(device, *, v_format="rot4", heads=2, dim=32, page=16, tokens=160, open_pages=8):
    spec = KVCacheSpec(2, heads, dim, "kivi4", v_format, page_size=page, max_tokens=tokens)
    return PagedKVCache(spec, device=device, open_pages=open_pages)


def _rows(n, heads=2, dim=32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    # a few channels far from zero at every position, as keys have (KIVI's observation, and
    # what per-channel scales are for)
    offset = 8.0 * (torch.arange(dim) % 11 == 0) * torch.randn(heads, dim, generator=gen).sign()
    k = torch.randn(n, heads, dim, generator=gen) + offset
    return k, torch.randn(n, heads, dim, generator=gen)


def _values(v, fmt, page, n_stored=None):
    """V of a kivi4 cache: stored in its format, the open page (that of the last position, or
    of n_stored - 1) as written."""
    n_stored = len(v) if n_stored is None else n_stored
    out = reference_roundtrip(fmt, v.numpy())
    open_start = (n_stored - 1) // page * page
    out[open_start:] = v.numpy()[open_start:].astype(np.float16)
    return out


def _expected(q, k_ref, v_ref, position, window=0):
    first = max(0, position - window + 1) if window else 0
    return reference.decode_attention(
        q, k_ref[first : position + 1], v_ref[first : position + 1], q.shape[-1] ** -0.5
    )


def _write_in_pieces(cache, layer, seq, k, v, pieces, device):
    start = 0
    for n in pieces:
        cache.write(layer, seq, cache.grow(seq, n), k[start : start + n].to(device),
                    v[start : start + n].to(device))  # fmt: skip
        start += n


def test_a_sealed_pages_scales_are_stored_even_channels_first(device):
    """The seal's scale and min rows hold the even channels, then the odd ones (the order the
    attention's key halves take them in): channel c of group g at stored_channel(c)."""
    cache = _cache(device, dim=32, page=16)
    seq = cache.new_sequence()
    k, v = _rows(20, dim=32, seed=4)  # page 0 sealed, page 1 open
    cache.write(0, seq, cache.grow(seq, 20), k.to(device), v.to(device))
    page = cache._pages[seq][0]
    order = kivi_channel_order(32)
    assert list(order[:3]) == [0, 2, 4] and list(order[16:19]) == [1, 3, 5]
    fields = reference_quantize("kivi4", k[:16].numpy())  # one group of 16 positions
    for name in ("scale", "min"):
        stored = cache._k[0][name][page].float().cpu().numpy()  # [heads, groups, D]
        np.testing.assert_array_equal(stored[:, 0], fields[name][0].astype(np.float32)[:, order])


@pytest.mark.parametrize(
    ("pieces", "page", "dim", "v_format"),
    [
        ((37,), 16, 32, "rot4"),  # one chunk: two pages sealed, the third open
        ((5, 1, 1, 9, 1, 20), 16, 32, "rot4"),  # single rows through page ends, chunks across
        ((1,) * 33, 16, 64, "q8"),  # decode only
        ((64, 3), 32, 32, "f16"),  # a chunk that ends exactly at a page end
        ((70, 1, 40), 64, 32, "rot4"),  # groups of 32 positions in pages of 64
    ],
)
def test_stored_rows_and_attention_match_the_reference(pieces, page, dim, v_format, device):
    n = sum(pieces)
    cache = _cache(device, v_format=v_format, dim=dim, page=page)
    seq, other = cache.new_sequence(), cache.new_sequence()
    cache.grow(other, 20)  # another sequence's pages in between
    k, v = _rows(n, dim=dim, seed=n)
    _write_in_pieces(cache, 1, seq, k, v, pieces, device)
    k_ref = reference_roundtrip("kivi4", k.numpy(), page)
    v_ref = _values(v, v_format, page)
    k_back, v_back = cache.read_rows(1, seq)
    # codes may differ by one step at a rounding tie (f32 division on either side)
    assert np.mean(np.abs(k_back - k_ref) > 1e-2) < 0.01
    assert np.mean(np.abs(v_back - v_ref) > 1e-2) < 0.01
    q = torch.randn(1, 6, dim)
    out = cache.attend(1, q.to(device), [seq])
    assert relative_error(out[0].cpu(), _expected(q[0].numpy(), k_ref, v_ref, n - 1)) < (
        ATTENTION_TOLERANCE
    )


def test_per_channel_pages_beat_per_token_rot4_on_outlier_channels(device):
    """What the format is for: keys with a few large channels lose less than with rot4."""
    k, _ = _rows(64, seed=4)
    k = k.numpy()
    kivi_error = np.linalg.norm(reference_kivi_pages(k, 16, n_sealed=4) - k)
    rot4_error = np.linalg.norm(reference_roundtrip("rot4", k) - k)
    assert kivi_error < 0.7 * rot4_error


def test_positions_on_the_device_and_a_window(device):
    cache = _cache(device)
    seq = cache.new_sequence()
    cache.grow(seq, 100)
    k, v = _rows(83)
    for start, n in ((0, 30), (30, 1), (31, 1), (32, 51)):
        where = torch.arange(start, start + n, device=device)
        cache.write(0, seq, where, k[start : start + n].to(device), v[start : start + n].to(device))
    k_ref = reference_kivi_pages(k.numpy(), 16, n_sealed=82 // 16)
    v_ref = _values(v, "rot4", 16)
    q = torch.randn(1, 4, 32)
    for window in (0, 1, 20):
        out = cache.attend(0, q.to(device), [seq], positions=torch.tensor([82], device=device),
                           window=window)  # fmt: skip
        expected = _expected(q[0].numpy(), k_ref, v_ref, 82, window)
        assert relative_error(out[0].cpu(), expected) < ATTENTION_TOLERANCE


def test_truncating_into_a_sealed_page_reopens_it(device):
    """Positions 0..49 written (pages of 16: 0-2 sealed, 3 open), 40 kept: page 2 becomes the open
    one, from its sealed rows; writing on seals it again from those and the new rows."""
    cache = _cache(device)
    seq = cache.new_sequence()
    k, v = _rows(50)
    _write_in_pieces(cache, 0, seq, k, v, (50,), device)
    cache.truncate(seq, 40)
    k2, v2 = _rows(12, seed=9)
    _write_in_pieces(cache, 0, seq, k2, v2, (3, 1, 8), device)
    kept = reference_kivi_pages(k.numpy()[:48], 16, n_sealed=3)[:40]  # as sealed before
    k_all = np.concatenate([kept, k2.numpy()])
    k_ref = reference_kivi_pages(k_all, 16, n_sealed=3)  # page 2 sealed again, 3 open
    v_all = torch.cat([v[:40], v2])
    v_ref = _values(v_all, "rot4", 16)
    v_ref[32:40] = reference_roundtrip("rot4", v.numpy()[32:40])  # reopened: as stored
    k_back, _ = cache.read_rows(0, seq)
    assert np.mean(np.abs(k_back - k_ref) > 1e-2) < 0.01
    q = torch.randn(1, 4, 32)
    out = cache.attend(0, q.to(device), [seq])
    assert relative_error(out[0].cpu(), _expected(q[0].numpy(), k_ref, v_ref, 51)) < (
        ATTENTION_TOLERANCE
    )


def test_truncating_within_the_open_page_keeps_its_rows_exact(device):
    cache = _cache(device)
    seq = cache.new_sequence()
    k, v = _rows(45)
    _write_in_pieces(cache, 0, seq, k, v, (45,), device)
    cache.truncate(seq, 35)
    k_back, _ = cache.read_rows(0, seq)
    np.testing.assert_allclose(k_back[32:35], k.numpy()[32:35], atol=2e-3, rtol=1e-3)


def test_gather_and_prefill_see_their_own_page_exact(device):
    """A chunk at positions 20..52 (pages 1-3 of 16): the gather returns what the cache
    holds (pages 0-2 sealed, 3 open); prefill attention lets each query see its own page's
    keys as written, as decode does through the open page."""
    cache = _cache(device)
    seq = cache.new_sequence()
    k, v = _rows(53)
    _write_in_pieces(cache, 0, seq, k, v, (20, 33), device)
    k_held, v_held = cache.gather(0, seq, 53)
    k_ref = reference_roundtrip("kivi4", k.numpy(), 16)
    v_ref = _values(v, "rot4", 16)
    np.testing.assert_allclose(k_held.float().cpu().numpy(), k_ref, atol=3e-3, rtol=3e-3)
    np.testing.assert_allclose(v_held.float().cpu().numpy(), v_ref, atol=3e-3, rtol=3e-3)
    q = torch.randn(33, 4, 32)
    out = cache.attend_prefill(0, q.to(device), seq, torch.arange(20, 53, device=device), 53)
    exact = k.numpy().astype(np.float16).astype(np.float32)
    exact_v = v.numpy().astype(np.float16).astype(np.float32)
    stored_v = reference_roundtrip("rot4", v.numpy())
    for t, position in enumerate(range(20, 53)):
        own = position // 16 * 16
        keys = np.concatenate([reference_kivi_pages(k.numpy(), 16, 4)[:own], exact[own:]])
        values = np.concatenate([stored_v[:own], exact_v[own:]])
        expected = _expected(q[t].numpy(), keys, values, position)
        assert relative_error(out[t].cpu(), expected) < ATTENTION_TOLERANCE


def test_several_sequences_each_with_its_open_page(device):
    cache = _cache(device, heads=1)
    expected, seqs, q = [], [], torch.randn(3, 2, 32)
    for i, n in enumerate((1, 16, 45)):
        seq = cache.new_sequence()
        k, v = _rows(n, heads=1, seed=n)
        _write_in_pieces(cache, 0, seq, k, v, (n,), device)
        k_ref = reference_roundtrip("kivi4", k.numpy(), 16)
        v_ref = _values(v, "rot4", 16)
        expected.append(_expected(q[i].numpy(), k_ref, v_ref, n - 1))
        seqs.append(seq)
    out = cache.attend(0, q.to(device), seqs)
    for i in range(3):
        assert relative_error(out[i].cpu(), expected[i]) < ATTENTION_TOLERANCE


def test_open_pages_run_out_with_a_clear_error(device):
    cache = _cache(device, open_pages=1)
    seq = cache.new_sequence()
    with pytest.raises(UnsupportedTensor, match="open pages of the kivi4 K cache"):
        cache.new_sequence()
    cache.free_sequence(seq)
    cache.new_sequence()  # the slot came back


def test_kivi4_is_for_keys_only_and_its_size():
    with pytest.raises(UnsupportedTensor, match="for K only"):
        KVCacheSpec(1, 2, 32, "rot4", "kivi4")
    # codes 4 bits, scale and min f16 per channel shared by a group's 32 positions
    assert bytes_per_row("kivi4", 128, 64) == 64 + 16
    assert bytes_per_row("kivi4", 128, 16) == 64 + 32  # pages of 16: groups of 16
    spec = KVCacheSpec(1, 8, 128, "kivi4", "rot4", page_size=64)
    assert spec.bytes_per_token == 8 * (80 + 80)


@pytest.mark.gpu
def test_llama3_8b_shape_at_4k_and_a_graph_replay():
    """The full shape, then a decode step (write + attend) captured once and replayed across
    page ends, where the seal kernel runs."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    spec = KVCacheSpec(1, 8, 128, "kivi4", "rot4", page_size=64, max_tokens=4096)
    cache = PagedKVCache(spec, device="cuda")
    seq = cache.new_sequence()
    cache.grow(seq, 4096)
    gen = torch.Generator().manual_seed(3)
    k_all, v_all = (t.half() for t in _rows(4000, heads=8, dim=128, seed=3))
    cache.write(0, seq, 0, k_all[:3800].cuda(), v_all[:3800].cuda())
    position = torch.zeros(1, dtype=torch.int64, device="cuda")
    k_in = torch.zeros(1, 8, 128, dtype=torch.float16, device="cuda")
    v_in, q_in = torch.zeros_like(k_in), torch.zeros(1, 32, 128, dtype=torch.float16, device="cuda")

    def step():
        cache.write(0, seq, position, k_in, v_in)
        return cache.attend(0, q_in, [seq], positions=position)

    position.fill_(3800)
    k_in.copy_(k_all[3800:3801])
    v_in.copy_(v_all[3800:3801])
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # compiles outside the capture (rewrites position 3800 with the same row)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    for p in range(3800, 4000):
        q = torch.randn(1, 32, 128, generator=gen, dtype=torch.float16)
        position.fill_(p)
        k_in.copy_(k_all[p : p + 1])
        v_in.copy_(v_all[p : p + 1])
        q_in.copy_(q)
        graph.replay()
        if p % 23 == 0 or p in (3839, 3840, 3999):
            k_ref = reference_kivi_pages(k_all[: p + 1].float().numpy(), 64, p // 64)
            v_ref = _values(v_all[: p + 1].float(), "rot4", 64)
            expected = _expected(q[0].float().numpy(), k_ref, v_ref, p)
            assert relative_error(out[0].float().cpu(), expected) < 5e-3


def test_a_batch_s_rows_written_together_equal_each_written_alone(device):
    """PagedKVCache.write_rows on kivi4 keys (a batch's decode step: every row in its own
    sequence's open page, then the pages those rows filled sealed): three sequences of 14, 15
    and 31 positions (the next row of the second and third fills a page) stepped four times
    together hold what they hold stepped one at a time with `write`, in their pages and open
    pages; attention over them agrees; a row past its sequence's pages is dropped; a slot a
    freed sequence leaves holds none of the next sequence's pages."""
    lengths, steps = (14, 15, 31), 4
    caches = [_cache(device, tokens=320), _cache(device, tokens=320)]
    seqs = [[c.new_sequence() for _ in lengths] for c in caches]
    data = [_rows(n + steps, seed=i) for i, n in enumerate(lengths)]
    for cache, own in zip(caches, seqs, strict=True):
        for seq, n, (k, v) in zip(own, lengths, data, strict=True):
            cache.write(0, seq, cache.grow(seq, n), k[:n].to(device), v[:n].to(device))
    alone, together = caches
    for step in range(steps):
        positions = [n + step for n in lengths]
        for seq, pos, (k, v) in zip(seqs[0], positions, data, strict=True):
            alone.write(0, seq, alone.grow(seq, 1), k[pos : pos + 1].to(device),
                        v[pos : pos + 1].to(device))  # fmt: skip
        for seq in seqs[1]:
            together.grow(seq, 1)
        k = torch.stack([k[pos] for pos, (k, _) in zip(positions, data, strict=True)])
        v = torch.stack([v[pos] for pos, (_, v) in zip(positions, data, strict=True)])
        together.write_rows(0, seqs[1], torch.tensor(positions, device=device), k.to(device),
                            v.to(device))  # fmt: skip
    q = torch.randn(3, 4, 32, generator=torch.Generator().manual_seed(9))
    for s_alone, s_together, n in zip(seqs[0], seqs[1], lengths, strict=True):
        want = alone.gather(0, s_alone, n + steps)
        got = together.gather(0, s_together, n + steps)
        assert all(map(torch.equal, got, want))
    torch.testing.assert_close(
        together.attend(0, q.to(device), seqs[1]), alone.attend(0, q.to(device), seqs[0]),
        rtol=0, atol=1e-6,
    )  # fmt: skip

    before = together.gather(0, seqs[1][0], 18)
    k, v = _rows(1, seed=7)
    together.write_rows(0, seqs[1][:1], torch.tensor([40], device=device), k.to(device),
                        v.to(device))  # fmt: skip
    assert all(map(torch.equal, together.gather(0, seqs[1][0], 18), before))

    # a sequence whose open page was page 0 leaves its slot; the next one takes that slot and
    # the pages of the third (its first sealed), then reopens page 0: dequantized, not the
    # slot's old rows
    short = together.new_sequence()
    k, v = _rows(10, seed=8)
    together.write(0, short, together.grow(short, 10), k.to(device), v.to(device))
    together.free_sequence(short)
    fresh = together.new_sequence()
    third = seqs[1][2]
    together.assign(fresh, together.block_table(third)[:2].tolist(), 16)
    together.reopen(fresh, 16)
    k, v = data[2]
    expected = _expected(q[0].numpy(), reference_kivi_pages(k.numpy()[:16], 16, n_sealed=1),
                         reference_roundtrip("rot4", v.numpy()[:16]), 15)  # fmt: skip
    got = together.attend(0, q[:1].to(device), [fresh], positions=torch.tensor([15], device=device))
    assert relative_error(got[0].cpu(), expected) < ATTENTION_TOLERANCE
