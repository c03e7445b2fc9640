"""A prefill chunk's mask made once and shared by its layers (PagedKVCache.attend_prefill's
`masks`), against the boolean mask each layer made for itself before: the same attention bit
for bit, one mask made per window, over plain, windowed and kivi4 (own pages exact) caches."""

from __future__ import annotations

import pytest
import torch

import kernels.prefill_masks as prefill_masks
from kernels.errors import UnsupportedTensor
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec
from tests.kernels.test_grouped_attention import boolean_mask_attention

PAGE = 16


@pytest.fixture
def masks_made(monkeypatch):
    """Every prefill_mask the cache makes, counted."""
    made, make = [], prefill_masks.prefill_mask

    def counting(*args):
        made.append(args)
        return make(*args)

    monkeypatch.setattr(prefill_masks, "prefill_mask", counting)
    return made


def _history_written(k_format, v_format, device, history, chunk):
    """Two layers holding `history` positions, grown for a chunk after them; the chunk's
    positions (one tensor, as the forward pass hands every layer) and a writer of its rows at
    a layer (the forward pass writes a layer's chunk, then attends it)."""
    spec = KVCacheSpec(2, 2, 32, k_format, v_format, page_size=PAGE, max_tokens=96)
    cache = PagedKVCache(spec, device=device)
    seq = cache.new_sequence()
    gen = torch.Generator().manual_seed(history)
    cache.grow(seq, history + chunk)
    past = torch.arange(0, history, device=device)
    for layer in (0, 1):
        k, v = torch.randn(2, history, 2, 32, generator=gen)
        cache.write(layer, seq, past, k.to(device), v.to(device))
    positions = torch.arange(history, history + chunk, device=device)

    def write(layer, start=positions):
        k, v = torch.randn(2, chunk, 2, 32, generator=gen)
        cache.write(layer, seq, start, k.to(device), v.to(device))

    return cache, seq, positions, write


def boolean_seen(positions, n_keys, window, kivi_scratch_rows=0):
    """What each query sees, as the per-layer path built it: slot j from position p when
    j <= p (and p - j < window); kivi4: its own page's stored slots hidden and the scratch's
    rows (its own page's keys as written, from that page's start) after them."""
    p = positions.cpu()[:, None]
    slots = torch.arange(n_keys)[None, :]
    seen = (slots <= p) & ((p - slots < window) if window else True)
    if not kivi_scratch_rows:
        return seen
    exact = p.min() // PAGE * PAGE + torch.arange(kivi_scratch_rows)[None, :]
    exact_seen = (exact <= p) & (exact // PAGE == p // PAGE) & (exact < n_keys)
    exact_seen &= (p - exact < window) if window else True
    return torch.cat([seen & (slots // PAGE != p // PAGE), exact_seen], dim=1)


@pytest.mark.parametrize(
    ("k_format", "v_format", "windows"),
    [
        ("rot4", "q8", (0,)),
        ("f16", "f16", (0, 5)),
        ("kivi4", "rot4", (0,)),
        ("kivi4", "q8", (9, 0)),
    ],
    ids=["no-window", "windows", "kivi4", "kivi4-windows"],
)
def test_layers_share_one_mask_a_window_and_attend_as_before(
    k_format, v_format, windows, device, masks_made
):
    """A 13-token chunk at positions 27..39 (its pages 1 and 2 of 16) over 40 positions."""
    cache, seq, positions, write = _history_written(k_format, v_format, device, 27, 13)
    q = torch.randn(13, 4, 32, generator=torch.Generator().manual_seed(3))
    masks: dict = {}
    for layer in (0, 1):
        write(layer)
        for window in windows:
            got = cache.attend_prefill(layer, q.to(device), seq, positions, 40, window=window,
                                       masks=masks)  # fmt: skip
            k, v = cache.gather(layer, seq, 40)
            scratch_rows = 0
            if k_format == "kivi4":
                scratch = cache._open_pages.layer_scratch(layer)[0]
                k, v = torch.cat([k, scratch[0]]), torch.cat([v, scratch[1]])
                scratch_rows = scratch.shape[1]
            seen = boolean_seen(positions, 40, window, scratch_rows)
            dtype = torch.float16 if torch.device(device).type == "cuda" else torch.float32
            before = boolean_mask_attention(
                q.to(device, dtype), k.transpose(0, 1).to(dtype), v.transpose(0, 1).to(dtype),
                seen.to(device), None,
            )  # fmt: skip
            assert torch.equal(got, before.to(got.dtype)), (layer, window)
    assert len(masks_made) == len(windows)  # at the first layer, then taken by the second


def test_a_kivi4_layer_whose_scratch_starts_elsewhere_makes_its_own(device, masks_made):
    """The second layer's chunk written from positions given as ints: the kept mask (made for
    the first layer's positions tensor) is not taken on trust, and both layers attend as a
    mask made for each alone has them attend."""
    cache, seq, positions, write = _history_written("kivi4", "rot4", device, 27, 13)
    q = torch.randn(13, 4, 32, generator=torch.Generator().manual_seed(5)).to(device)
    masks: dict = {}
    for layer, start in ((0, positions), (1, 27)):
        write(layer, start)
        shared = cache.attend_prefill(layer, q, seq, positions, 40, masks=masks)
        alone = cache.attend_prefill(layer, q, seq, positions, 40)
        assert torch.equal(shared, alone), layer
    assert len(masks_made) == 4  # each layer's for the chunk, and again for each alone


def test_kivi4_keeps_one_chunks_rows_for_the_cache(device):
    """The exact rows of the last chunk written, whichever layer: the next layer's chunk
    replaces them (the earlier layer then refuses to attend its chunk rather than attend its
    own pages as stored), a one-row write at another layer leaves them, one at their own
    layer drops them."""
    cache, seq, positions, write = _history_written("kivi4", "rot4", device, 27, 13)
    q = torch.randn(13, 4, 32, generator=torch.Generator().manual_seed(7)).to(device)
    write(0)
    write(1)
    assert cache._open_pages.scratch[0] == 1 and cache._open_pages.layer_scratch(1) is not None
    with pytest.raises(UnsupportedTensor, match="layer 0's chunk"):
        cache.attend_prefill(0, q, seq, positions, 40)
    cache.attend_prefill(1, q, seq, positions, 40)
    row = torch.randn(2, 1, 2, 32).to(device)
    cache.grow(seq, 41)
    cache.write(0, seq, 40, row[0], row[1])  # layer 0's own write: it may attend again
    kept = cache._open_pages
    assert kept.layer_scratch(1) is not None and kept.layer_scratch(0) is None
    cache.write(1, seq, 40, row[0], row[1])
    assert cache._open_pages.scratch is None
