"""A batch's decode step on the paged cache (issue 38): one new row per sequence written into its
own pages (PagedKVCache.write_rows) and each row's query attending over its own sequence only,
sequences of different lengths with pages interleaved in the pool, against kv_formats' numpy
reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import reference
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec, reference_roundtrip
from tests.kernels.conftest import relative_error
from tests.kernels.test_kv_cache import ATTENTION_TOLERANCE

HEADS, DIM, PAGE = 2, 32, 16


def _batch(k_format, v_format, device, lengths, seed=0):
    """Sequences grown in turns (their pages interleaved), each filled by `write`; returns the
    cache, the sequences and each one's rows as the reference stores them."""
    spec = KVCacheSpec(1, HEADS, DIM, k_format, v_format, page_size=PAGE, max_tokens=256)
    cache = PagedKVCache(spec, device=device)
    seqs = [cache.new_sequence() for _ in lengths]
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for seq, n in zip(seqs, lengths, strict=True):
        k = torch.randn(n, HEADS, DIM, generator=gen)
        v = torch.randn(n, HEADS, DIM, generator=gen)
        for start in range(0, n, 20):  # in turns: the pool's pages go round the sequences
            part = slice(start, min(n, start + 20))
            cache.write(0, seq, cache.grow(seq, part.stop - start), k[part].to(device),
                        v[part].to(device))  # fmt: skip
        rows.append([k, v])
    return cache, seqs, rows


@pytest.mark.parametrize(("k_format", "v_format"), [("f16", "f16"), ("q8", "rot4")])
def test_each_row_lands_in_its_own_sequence_and_attends_only_there(k_format, v_format, device):
    lengths = [5, 40, 17, 33]
    cache, seqs, rows = _batch(k_format, v_format, device, lengths)
    gen = torch.Generator().manual_seed(1)
    new_k = torch.randn(len(seqs), HEADS, DIM, generator=gen)
    new_v = torch.randn(len(seqs), HEADS, DIM, generator=gen)
    for seq in seqs:
        cache.grow(seq, 1)
    positions = torch.tensor(lengths, device=device)
    cache.write_rows(0, seqs, positions, new_k.to(device), new_v.to(device))
    q = torch.randn(len(seqs), 6, DIM, generator=gen)
    out = cache.attend(0, q.to(device), seqs, positions=positions).cpu()
    for i, seq in enumerate(seqs):
        k = torch.cat([rows[i][0], new_k[i : i + 1]]).numpy()
        v = torch.cat([rows[i][1], new_v[i : i + 1]]).numpy()
        k_ref = reference_roundtrip(k_format, k, PAGE)
        v_ref = reference_roundtrip(v_format, v)
        stored_k, stored_v = cache.read_rows(0, seq)
        assert stored_k.shape == (lengths[i] + 1, HEADS, DIM)
        # every sequence holds its own rows: nothing of another's was written over them
        assert relative_error(stored_k, k_ref) < 1e-3
        assert relative_error(stored_v, v_ref) < 1e-3
        expected = reference.decode_attention(q[i].numpy(), k_ref, v_ref, DIM**-0.5)
        assert relative_error(out[i], expected) < ATTENTION_TOLERANCE


def test_a_row_past_its_pages_is_dropped_not_written_elsewhere(device):
    cache, seqs, _ = _batch("f16", "f16", device, [16, 16])
    before = [cache.read_rows(0, s) for s in seqs]
    ones = torch.ones(2, HEADS, DIM, device=device)
    # sequence 0 has one page (16 positions): position 16 is past it; -1 is nowhere
    cache.write_rows(0, seqs, torch.tensor([16, -1], device=device), ones, ones)
    for seq, (k, v) in zip(seqs, before, strict=True):
        after_k, after_v = cache.read_rows(0, seq)
        np.testing.assert_array_equal(after_k, k)
        np.testing.assert_array_equal(after_v, v)


def test_given_tables_stand_in_for_the_sequences_own(device):
    """A CUDA graph's static copy of the batch's block tables: the launch reads those, the
    sequences named only size it."""
    cache, seqs, _ = _batch("f16", "f16", device, [5, 20, 9])
    tables = torch.stack([cache._tables[s] for s in seqs]).clone()
    stand_in = [seqs[0]] * len(seqs)
    positions = torch.tensor([5, 20, 9], device=device)
    for seq in seqs:
        cache.grow(seq, 1)
    gen = torch.Generator().manual_seed(2)
    rows = torch.randn(len(seqs), HEADS, DIM, generator=gen).to(device)
    cache.write_rows(0, stand_in, positions, rows, rows, tables=tables)
    q = torch.randn(len(seqs), 6, DIM, generator=gen).to(device)
    given = cache.attend(0, q, stand_in, positions=positions, tables=tables)
    own = cache.attend(0, q, seqs, positions=positions)
    np.testing.assert_array_equal(given.cpu().numpy(), own.cpu().numpy())
    for i, seq in enumerate(seqs):  # each new row landed in its own sequence
        k, _ = cache.read_rows(0, seq)
        np.testing.assert_allclose(k[-1], rows[i].cpu().numpy(), atol=2e-3)
