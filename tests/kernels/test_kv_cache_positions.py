"""What the Hearth engine needs of the paged cache (issue 17): positions read on the device,
a sliding window, dropping a sequence's tail, a grid that does not follow the length (CUDA
graphs), and prefill attention over the stored pages, against kv_formats' numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import reference
from kernels.decode_launch import AttentionTuning
from kernels.errors import UnsupportedTensor
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec, reference_roundtrip
from tests.kernels.conftest import relative_error
from tests.kernels.test_kv_cache import ATTENTION_TOLERANCE

PAIRS = [("f16", "f16"), ("q8", "rot4"), ("rot4", "rot4")]


def _filled(k_format, v_format, device, n, *, heads=2, dim=32, page=16, tokens=160, seed=0):
    spec = KVCacheSpec(1, heads, dim, k_format, v_format, page_size=page, max_tokens=tokens)
    cache = PagedKVCache(spec, device=device)
    seq = cache.new_sequence()
    gen = torch.Generator().manual_seed(seed)
    k, v = torch.randn(n, heads, dim, generator=gen), torch.randn(n, heads, dim, generator=gen)
    cache.write(0, seq, cache.grow(seq, n), k.to(device), v.to(device))
    k_ref = reference_roundtrip(k_format, k.numpy(), page)
    v_ref = reference_roundtrip(v_format, v.numpy())
    if k_format == "kivi4":  # the open page's values are read as written (kv_kivi.py)
        open_start = (n - 1) // page * page
        v_ref[open_start:] = v.numpy()[open_start:].astype(np.float16)
    return cache, seq, (k_ref, v_ref)


def _expected(q, rows, position, window=0):
    k_ref, v_ref = rows
    first = max(0, position - window + 1) if window else 0
    scale = q.shape[-1] ** -0.5
    return reference.decode_attention(
        q, k_ref[first : position + 1], v_ref[first : position + 1], scale
    )


@pytest.mark.parametrize(("k_format", "v_format"), PAIRS)
@pytest.mark.parametrize("window", [1, 20, 48])
def test_sliding_window_sees_only_the_last_positions(k_format, v_format, window, device):
    cache, seq, rows = _filled(k_format, v_format, device, 83)
    q = torch.randn(1, 6, 32)
    out = cache.attend(0, q.to(device), [seq], window=window)
    assert relative_error(out[0].cpu(), _expected(q[0].numpy(), rows, 82, window)) < (
        ATTENTION_TOLERANCE
    )


def test_sliding_window_for_several_query_tokens(device):
    """Each of the T tokens has its own window: token t at position 77 + t sees 77+t-9..77+t."""
    cache, seq, rows = _filled("q8", "rot4", device, 82)
    q = torch.randn(1, 5, 4, 32)
    out = cache.attend(0, q.to(device), [seq], window=10)
    for t in range(5):
        expected = _expected(q[0, t].numpy(), rows, 77 + t, window=10)
        assert relative_error(out[0, t].cpu(), expected) < ATTENTION_TOLERANCE


@pytest.mark.parametrize(("k_format", "v_format"), PAIRS)
def test_positions_on_the_device_replace_the_length(k_format, v_format, device):
    """The query's position comes from a tensor: positions past it are not seen, although
    the sequence holds them (what a fixed-shape decode step does)."""
    cache, seq, rows = _filled(k_format, v_format, device, 150)
    q = torch.randn(1, 4, 32)
    for position in (0, 37, 149):
        where = torch.tensor([position], device=device)
        out = cache.attend(0, q.to(device), [seq], positions=where)
        expected = _expected(q[0].numpy(), rows, position)
        assert relative_error(out[0].cpu(), expected) < ATTENTION_TOLERANCE


def test_write_at_device_positions(device):
    """Rows written at positions given as a tensor land where the int start would put them;
    a position past the grown pages is dropped, not written into another page."""
    cache, seq, _ = _filled("rot4", "q8", device, 40)
    other = cache.new_sequence()
    cache.grow(other, 16)
    k, v = torch.randn(3, 2, 32), torch.randn(3, 2, 32)
    before = cache.read_rows(0, other)
    where = torch.tensor([5, 39, 48], device=device)  # 48: page 4, not grown for seq
    cache.write(0, seq, where, k.to(device), v.to(device))
    k_back, v_back = cache.read_rows(0, seq)
    np.testing.assert_allclose(
        k_back[[5, 39]], reference_roundtrip("rot4", k[:2].numpy()), atol=1e-3
    )
    np.testing.assert_allclose(v_back[[5, 39]], reference_roundtrip("q8", v[:2].numpy()), atol=1e-3)
    for got, was in zip(cache.read_rows(0, other), before, strict=True):
        np.testing.assert_array_equal(got, was)


def test_truncate_drops_the_tail_and_writing_continues(device):
    cache, seq, rows = _filled("q8", "rot4", device, 70)
    free = len(cache._free)
    cache.truncate(seq, 20)
    assert cache.length(seq) == 20
    assert len(cache._free) == free + 3  # pages of 16: 70 positions held 5, 20 hold 2
    gen = torch.Generator().manual_seed(5)
    k, v = torch.randn(10, 2, 32, generator=gen), torch.randn(10, 2, 32, generator=gen)
    cache.write(0, seq, cache.grow(seq, 10), k.to(device), v.to(device))
    q = torch.randn(1, 4, 32)
    out = cache.attend(0, q.to(device), [seq])
    k_ref = np.concatenate([rows[0][:20], reference_roundtrip("q8", k.numpy())])
    v_ref = np.concatenate([rows[1][:20], reference_roundtrip("rot4", v.numpy())])
    assert relative_error(out[0].cpu(), _expected(q[0].numpy(), (k_ref, v_ref), 29)) < (
        ATTENTION_TOLERANCE
    )
    with pytest.raises(UnsupportedTensor, match="keep between 0 and its length"):
        cache.truncate(seq, 31)


def test_split_count_follows_the_capacity_not_the_length(device):
    cache, seq, _ = _filled("f16", "f16", device, 3, tokens=1024)
    counts = {cache._split_count(1, 1, 0)}
    cache.write(0, seq, cache.grow(seq, 900), torch.zeros(900, 2, 32).to(device),
                torch.zeros(900, 2, 32).to(device))  # fmt: skip
    counts.add(cache._split_count(1, 1, 0))
    assert len(counts) == 1
    assert cache._split_count(1, 1, 20) <= 3  # a window of 20 spans at most 3 pages of 16


@pytest.mark.parametrize(("k_format", "v_format"), PAIRS)
def test_gather_returns_the_stored_rows(k_format, v_format, device):
    cache, seq, (k_ref, v_ref) = _filled(k_format, v_format, device, 45)
    k, v = cache.gather(0, seq, 45)
    assert k.shape == v.shape == (45, 2, 32) and k.dtype == torch.float16
    np.testing.assert_allclose(k.float().cpu().numpy(), k_ref, atol=3e-3, rtol=3e-3)
    np.testing.assert_allclose(v.float().cpu().numpy(), v_ref, atol=3e-3, rtol=3e-3)


@pytest.mark.parametrize("window", [0, 7])
def test_prefill_attention_over_the_stored_pages(window, device):
    """A chunk of 6 new tokens (positions 30..35) over the 36 stored positions, causal."""
    cache, seq, rows = _filled("rot4", "rot4", device, 36)
    q = torch.randn(6, 4, 32)
    positions = torch.arange(30, 36, device=device)
    out = cache.attend_prefill(0, q.to(device), seq, positions, 36, window=window)
    assert out.shape == q.shape
    for t in range(6):
        expected = _expected(q[t].numpy(), rows, 30 + t, window)
        assert relative_error(out[t].cpu(), expected) < ATTENTION_TOLERANCE


def test_rotated_keys_with_device_positions_and_a_window(device):
    """rot4 K with the positions a CUDA graph replays (read on the device) and a sliding
    window, 3 query heads a KV head."""
    cache, seq, rows = _filled("rot4", "rot4", device, 150)
    q = torch.randn(1, 6, 32)
    for position, window in ((37, 0), (149, 20)):
        where = torch.tensor([position], device=device)
        out = cache.attend(0, q.to(device), [seq], positions=where, window=window)
        expected = _expected(q[0].numpy(), rows, position, window)
        assert relative_error(out[0].cpu(), expected) < ATTENTION_TOLERANCE


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("k_format", "v_format", "chained"),
    [("f16", "f16", False), ("rot4", "rot4", False), ("f16", "f16", True), ("rot4", "rot4", True)],
    ids=["f16", "rot4", "f16-chained", "rot4-chained"],
)
def test_decode_step_captured_once_replays_at_every_position(k_format, v_format, chained):
    """Write + attend captured in one CUDA graph; the position tensor is the only input that
    changes between replays, at positions across several pages (200 replays in a row).
    chained (AttentionTuning.chain_launches): the split kernel a dependent of the write before
    it, which must wait for the row it reads; the reduce lets the next replay's write start."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    spec = KVCacheSpec(1, 8, 128, k_format, v_format, page_size=64, max_tokens=4096)
    cache = PagedKVCache(spec, device="cuda")
    cache.tuning = AttentionTuning(chain_launches=chained)
    seq = cache.new_sequence()
    cache.grow(seq, 4096)
    gen = torch.Generator().manual_seed(3)
    k_all = torch.randn(300, 8, 128, generator=gen, dtype=torch.float16)
    v_all = torch.randn(300, 8, 128, generator=gen, dtype=torch.float16)
    cache.write(0, seq, 0, k_all[:100].cuda(), v_all[:100].cuda())
    position = torch.zeros(1, dtype=torch.int64, device="cuda")
    k_in = torch.zeros(1, 8, 128, dtype=torch.float16, device="cuda")
    v_in, q_in = torch.zeros_like(k_in), torch.zeros(1, 32, 128, dtype=torch.float16, device="cuda")

    def step():
        cache.write(0, seq, position, k_in, v_in)
        return cache.attend(0, q_in, [seq], positions=position, window=64)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm-up compiles outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    k_ref = reference_roundtrip(k_format, k_all.float().numpy())
    v_ref = reference_roundtrip(v_format, v_all.float().numpy())
    for p in range(100, 300):
        q = torch.randn(1, 32, 128, generator=gen, dtype=torch.float16)
        position.fill_(p)
        k_in.copy_(k_all[p : p + 1])
        v_in.copy_(v_all[p : p + 1])
        q_in.copy_(q)
        graph.replay()
        if p % 37 == 0 or p == 299:
            expected = _expected(q[0].float().numpy(), (k_ref, v_ref), p, window=64)
            assert relative_error(out[0].float().cpu(), expected) < 5e-3


SWEPT = [
    AttentionTuning(),
    AttentionTuning(num_warps=4),
    AttentionTuning(num_warps=4, overlap_reduce=False),
    AttentionTuning(num_warps=4, num_stages=3),
    AttentionTuning(num_warps=4, num_stages=7),
    AttentionTuning(num_warps=2),
    AttentionTuning(num_warps=2, num_stages=7),
    AttentionTuning(num_warps=4, programs_per_sm=4),
]


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("k_format", "v_format"), [("rot4", "rot4"), ("q8", "rot4"), ("q8", "q8"), ("kivi4", "rot4")]
)
def test_every_swept_launch_shape_gives_the_same_attention(k_format, v_format):
    """The launch shapes the benchmark sweeps (warps, stages, programs per SM, the serial
    reduce); a shape may become the default only if it computes the same function (Triton lays
    tiles out per warp count, and one such layout was once wrong on an H100)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")

    cache, seq, rows = _filled(
        k_format, v_format, "cuda", 3000, heads=8, dim=128, page=64, tokens=4096
    )
    q = torch.randn(1, 32, 128, dtype=torch.float16)
    expected = _expected(q[0].float().numpy(), rows, 2999)
    for tuning in SWEPT:
        cache.tuning = tuning
        out = cache.attend(0, q.cuda(), [seq])
        assert relative_error(out[0].float().cpu(), expected) < 5e-3, tuning
