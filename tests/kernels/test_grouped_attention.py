"""grouped_prefill_attention against the plain formula, and the reason for it: without
`enable_gqa` SDPA never builds the whole score matrix (the math path's float32 scores)."""

import pytest

torch = pytest.importorskip("torch")

from kernels.grouped_attention import grouped_prefill_attention  # noqa: E402


def plain_attention(q, k, v, seen, scale):
    """Each query head against its KV head (h // G), written out."""
    n_heads = q.shape[1]
    group = n_heads // k.shape[0]
    out = torch.empty_like(q)
    for h in range(n_heads):
        scores = (q[:, h] @ k[h // group].T) * scale
        scores = scores.masked_fill(~seen, float("-inf"))
        out[:, h] = torch.softmax(scores, dim=-1) @ v[h // group]
    return out


@pytest.mark.parametrize(
    ("n_heads", "n_kv", "n_tokens", "start", "window"),
    [(8, 2, 5, 0, 0), (6, 3, 7, 11, 0), (4, 4, 3, 9, 0), (8, 1, 6, 20, 5), (12, 4, 1, 3, 2)],
)
def test_it_is_the_plain_formula(n_heads, n_kv, n_tokens, start, window):
    gen = torch.Generator().manual_seed(n_heads * 100 + start)
    head_dim, n_keys = 16, start + n_tokens
    q = torch.randn(n_tokens, n_heads, head_dim, generator=gen)
    k = torch.randn(n_kv, n_keys, head_dim, generator=gen)
    v = torch.randn(n_kv, n_keys, head_dim, generator=gen)
    positions = torch.arange(start, start + n_tokens)
    behind = positions[:, None] - torch.arange(n_keys)[None, :]
    seen = behind >= 0
    if window:
        seen &= behind < window
    got = grouped_prefill_attention(q, k, v, seen, 0.25)
    want = plain_attention(q, k, v, seen, 0.25)
    assert got.shape == (n_tokens, n_heads, head_dim)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)


def test_heads_that_do_not_share_evenly_are_refused():
    q = torch.zeros(2, 6, 8)
    k = v = torch.zeros(4, 2, 8)
    with pytest.raises(ValueError, match="6 query heads do not share 4 KV heads"):
        grouped_prefill_attention(q, k, v, torch.ones(2, 2, dtype=torch.bool))


@pytest.mark.gpu
def test_a_long_prefill_chunk_builds_no_score_matrix_on_the_gpu():
    """512 queries of Llama-3-8B (32 heads on 8 KV heads) over 32k positions: the math path's
    float32 scores alone would be 2 GiB; the memory-efficient kernel needs a few MiB beside
    the inputs and the mask."""
    device = "cuda"
    n_tokens, n_keys, head_dim = 512, 32768, 128
    q = torch.randn(n_tokens, 32, head_dim, device=device, dtype=torch.float16)
    k = torch.randn(8, n_keys, head_dim, device=device, dtype=torch.float16)
    v = torch.randn(8, n_keys, head_dim, device=device, dtype=torch.float16)
    positions = torch.arange(n_keys - n_tokens, n_keys, device=device)
    seen = positions[:, None] >= torch.arange(n_keys, device=device)[None, :]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = grouped_prefill_attention(q, k, v, seen, head_dim**-0.5)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before
    assert out.shape == q.shape and torch.isfinite(out).all()
    assert extra < 512 * 2**20, f"{extra / 2**20:.0f} MiB beside the inputs"
