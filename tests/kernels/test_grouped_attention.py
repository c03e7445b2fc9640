"""grouped_prefill_attention against the plain formula, and the reason for it: without
`enable_gqa` SDPA never builds the whole score matrix (the math path's float32 scores); its
mask (prefill_mask) against the boolean one SDPA was given before, and the form the
memory-efficient kernel takes without a copy."""

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from kernels.grouped_attention import (  # noqa: E402
    MASK_ALIGNMENT,
    grouped_prefill_attention,
    prefill_mask,
)


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


CASES = [(8, 2, 5, 0, 0), (6, 3, 7, 11, 0), (4, 4, 3, 9, 0), (8, 1, 6, 20, 5), (12, 4, 1, 3, 2)]


def _inputs(n_heads, n_kv, n_tokens, start, window):
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
    return q, k, v, seen


@pytest.mark.parametrize(("n_heads", "n_kv", "n_tokens", "start", "window"), CASES)
def test_it_is_the_plain_formula(n_heads, n_kv, n_tokens, start, window):
    q, k, v, seen = _inputs(n_heads, n_kv, n_tokens, start, window)
    mask = prefill_mask(seen, n_heads // n_kv, torch.float32)
    got = grouped_prefill_attention(q, k, v, mask, 0.25)
    want = plain_attention(q, k, v, seen, 0.25)
    assert got.shape == q.shape
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)


def boolean_mask_attention(q, k, v, seen, scale):
    """The attention as it was before the mask was made once a chunk: the queries folded the
    same way, the boolean mask repeated for the G heads of a KV head at every call, and SDPA
    left to make its additive copy."""
    n_tokens, n_heads, head_dim = q.shape
    n_kv = k.shape[0]
    group = n_heads // n_kv
    folded = q.reshape(n_tokens, n_kv, group, head_dim).permute(1, 2, 0, 3)
    folded = folded.reshape(n_kv, group * n_tokens, head_dim)
    out = F.scaled_dot_product_attention(
        folded[None], k[None], v[None], attn_mask=seen.repeat(group, 1)[None, None], scale=scale
    )[0]
    return out.reshape(n_kv, group, n_tokens, head_dim).permute(2, 0, 1, 3).reshape(q.shape)


@pytest.mark.parametrize(("n_heads", "n_kv", "n_tokens", "start", "window"), CASES)
def test_the_additive_mask_gives_what_the_boolean_one_gave(n_heads, n_kv, n_tokens, start, window):
    """Bit for bit: -inf and 0 are what SDPA made of the boolean mask itself."""
    q, k, v, seen = _inputs(n_heads, n_kv, n_tokens, start, window)
    mask = prefill_mask(seen, n_heads // n_kv, torch.float32)
    got = grouped_prefill_attention(q, k, v, mask, 0.25)
    assert torch.equal(got, boolean_mask_attention(q, k, v, seen, 0.25))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_the_mask_is_repeated_additive_and_its_rows_aligned(dtype):
    seen = torch.rand(5, 37, generator=torch.Generator().manual_seed(1)) > 0.5
    mask = prefill_mask(seen, 3, dtype)
    assert mask.shape == (15, 37) and mask.dtype == dtype
    assert mask.stride() == (48, 1)  # rows of 37 padded to 48 = 3 x MASK_ALIGNMENT
    assert MASK_ALIGNMENT % 8 == 0  # SDPA's preprocess_mask alignment since torch 2.2
    additive = torch.where(seen, 0.0, float("-inf")).to(dtype)
    assert torch.equal(mask, additive.repeat(3, 1))  # row g*T + t is token t's
    aligned = prefill_mask(seen[:, :32], 2, dtype)
    assert aligned.stride() == (32, 1) and aligned.is_contiguous()


def test_heads_that_do_not_share_evenly_are_refused():
    q = torch.zeros(2, 6, 8)
    k = v = torch.zeros(4, 2, 8)
    with pytest.raises(ValueError, match="6 query heads do not share 4 KV heads"):
        grouped_prefill_attention(q, k, v, torch.zeros(12, 2))


@pytest.mark.parametrize(
    ("rows", "dtype"), [(4, torch.float32), (8, torch.float16)], ids=["unrepeated", "f16"]
)
def test_a_mask_not_made_for_the_call_is_refused(rows, dtype):
    """A boolean mask, one not repeated for the 2 heads of a KV head, or one of another dtype
    than the computation would have SDPA copy it (or fail): refused by name."""
    q = torch.zeros(4, 4, 8)
    k = v = torch.zeros(2, 3, 8)
    with pytest.raises(ValueError, match="make it with prefill_mask"):
        grouped_prefill_attention(q, k, v, torch.zeros(rows, 3, dtype=dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("n_keys", [32768, 32760], ids=["aligned", "unaligned"])
def test_a_long_prefill_chunk_builds_no_score_matrix_and_no_mask_copy_on_the_gpu(n_keys):
    """512 queries of Llama-3-8B (32 heads on 8 KV heads) over 32k positions, on the
    memory-efficient kernel alone (the call fails if SDPA cannot take it): the math path's
    float32 scores would be 2 GiB, SDPA's f16 copy of a boolean mask 128 MiB (and a padded copy
    of a mask whose rows are not aligned); with prefill_mask's mask the call allocates only
    the folded queries and the output, 4 MiB each."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    device = "cuda"
    n_tokens, head_dim = 512, 128
    q = torch.randn(n_tokens, 32, head_dim, device=device, dtype=torch.float16)
    k = torch.randn(8, n_keys, head_dim, device=device, dtype=torch.float16)
    v = torch.randn(8, n_keys, head_dim, device=device, dtype=torch.float16)
    positions = torch.arange(n_keys - n_tokens, n_keys, device=device)
    seen = positions[:, None] >= torch.arange(n_keys, device=device)[None, :]
    mask = prefill_mask(seen, 4, torch.float16)
    del seen
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
        out = grouped_prefill_attention(q, k, v, mask, head_dim**-0.5)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before
    assert out.shape == q.shape and torch.isfinite(out).all()
    assert extra < 32 * 2**20, f"{extra / 2**20:.0f} MiB beside the inputs and the mask"
