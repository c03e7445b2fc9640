"""The paged KV cache's ops at Llama-3-8B's shape (32 query heads, 8 KV heads of 128), as rows of
the one results schema (results.py): decode attention per K/V pair and depth (one layer's
attention per figure), the write of one and of 4096 positions, and the gather to f16. A sweep
of launch shapes (AttentionTuning: programs per SM, warps, stages, the overlapped reduce) at
one depth, and a sliding window (Gemma 3's local layers read only the last `window` positions
whatever the depth)."""

from __future__ import annotations

import dataclasses
import math

import torch

from benchmarks.kernels.cases import HEAD_DIM, HEADS, KV_HEADS
from benchmarks.kernels.results import Row, timed_rows
from benchmarks.kernels.timing import L2_DEFEAT_BYTES, time_calls
from kernels.decode_launch import AttentionTuning
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec

CHUNK = 8192  # positions a fill writes at once


def filled_cache(
    k_format: str, v_format: str, context: int, page_size: int = 64
) -> tuple[PagedKVCache, int, int]:
    """A cache of `context` random positions in as many layers as the L2 cannot hold."""
    torch.cuda.empty_cache()  # the last measurement's cache is garbage by now
    probe = KVCacheSpec(1, KV_HEADS, HEAD_DIM, k_format, v_format, max_tokens=context)
    layers = max(1, min(16, math.ceil(L2_DEFEAT_BYTES / (probe.bytes_per_token * context))))
    spec = KVCacheSpec(
        layers, KV_HEADS, HEAD_DIM, k_format, v_format, page_size=page_size, max_tokens=context
    )
    cache = PagedKVCache(spec, device="cuda")
    seq = cache.new_sequence()
    cache.grow(seq, context)
    for layer in range(layers):
        for start in range(0, context, CHUNK):
            n = min(CHUNK, context - start)
            k = torch.randn(n, KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
            v = torch.randn(n, KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
            cache.write(layer, seq, start, k, v)
    return cache, seq, layers


def launch_label(tuning: AttentionTuning) -> str:
    """programs per SM (fit: as many as fit) / warps / stages, and whether the reduce overlaps:
    the provider of a swept row."""
    per_sm = tuning.programs_per_sm or "fit"
    warps = tuning.num_warps or "auto"
    label = f"hearth {per_sm}/{warps}/{tuning.num_stages}"
    return label + ("" if tuning.overlap_reduce else " serial")


def attention_rows(k_format: str, v_format: str, context: int, copy_bw: float,
                   tunings: tuple = (None,), window: int = 0,
                   page_size: int = 64) -> list[Row]:  # fmt: skip
    """One layer's decode attention, one set of rows per tuning (None: the cache's default,
    provider "hearth"; an AttentionTuning: provider its launch label), all over one cache."""
    cache, seq, layers = filled_cache(k_format, v_format, context, page_size)
    layer_bytes = cache.spec.bytes_per_token * min(context, window or context)
    q = torch.randn(1, HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")

    def run() -> None:
        for layer in range(layers):
            cache.attend(layer, q, [seq], window=window)

    depth = f"{context // 1024}k" if context % 1024 == 0 else str(context)
    shape = f"{depth} positions" + (f" window {window}" if window else "")
    if page_size != 64:
        shape += f" pages of {page_size}"
    rows = []
    default = cache.tuning
    for tuning in tunings:
        cache.tuning = tuning or default
        provider = "hearth" if tuning is None else launch_label(tuning)
        try:
            seconds = time_calls(run) / layers
        except Exception as error:  # one launch shape failing must not hide the others
            print(f"decode_attention {k_format}/{v_format} {provider}: failed: {error!r}"[:300])
            continue
        fmt = f"{k_format}/{v_format}"
        rows += timed_rows("decode_attention", shape, fmt, provider, seconds, layer_bytes, copy_bw)
    return rows


def sweep_tunings() -> list[AttentionTuning]:
    """The default first (warps by format pair); 4 warps with the default's other settings;
    and one change at a time from the second (programs per SM 0: as many as fit)."""
    four = AttentionTuning(num_warps=4)
    return [
        AttentionTuning(),
        four,
        dataclasses.replace(four, overlap_reduce=False),
        dataclasses.replace(four, num_stages=3),
        dataclasses.replace(four, num_stages=7),
        dataclasses.replace(four, num_warps=2),
        dataclasses.replace(four, num_warps=2, num_stages=7),
        dataclasses.replace(four, programs_per_sm=4),
    ]


def write_rows(k_format: str, v_format: str, copy_bw: float) -> list[Row]:
    """One decode step's write (1 position, all KV heads) and a 4096-token prefill write."""
    spec = KVCacheSpec(1, KV_HEADS, HEAD_DIM, k_format, v_format, max_tokens=8192)
    cache = PagedKVCache(spec, device="cuda")
    seq = cache.new_sequence()
    cache.grow(seq, 8192)
    fmt = f"{k_format}/{v_format}"
    rows = []
    for n, start in ((1, 100), (4096, 0)):
        kv = torch.randn(n, KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
        seconds = time_calls(lambda kv=kv, start=start: cache.write(0, seq, start, kv, kv))
        moved = 2 * kv.numel() * 2 + n * spec.bytes_per_token
        shape = f"{n} position" + ("s" if n > 1 else "")
        rows += timed_rows("kv_write", shape, fmt, "hearth", seconds, moved, copy_bw)
        rows += _rope_write_rows(cache, seq, n, start, fmt, copy_bw)
    return rows


def _rope_write_rows(cache, seq, n, start, fmt, copy_bw) -> list[Row]:
    """A step's Q, K and V (Qwen3's head norms on) rotated and written: in the write's one
    launch (provider "hearth", what the engine runs) and as RoPE's launch then the write
    ("apart", what the engine runs where a cache has no write with RoPE)."""
    from kernels.rope import QKNorms, apply_rope
    from kernels.rope_tables import Rope

    rope = Rope.from_gguf_params(HEAD_DIM, HEAD_DIM, 1000000.0, layout="neox")
    ones = torch.ones(HEAD_DIM, device="cuda")
    norms = QKNorms(ones, ones, HEADS, 1e-6)
    qkv = torch.randn(n, HEADS + 2 * KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
    q, k, v = qkv.split([HEADS, KV_HEADS, KV_HEADS], dim=1)
    positions = torch.arange(start, start + n, device="cuda")

    def fused():
        cache.write(0, seq, positions, k, v, rope, q=q, norms=norms)

    def apart():
        rotated = apply_rope(qkv, positions, rope, norms=norms, n_rotated=HEADS + KV_HEADS)
        cache.write(0, seq, positions, rotated[:, HEADS : HEADS + KV_HEADS], v)

    moved = 2 * qkv.numel() + 2 * q.numel() + n * cache.spec.bytes_per_token
    shape = f"{n} position" + ("s" if n > 1 else "") + f", Q {HEADS} heads"
    rows = []
    for provider, fn in (("hearth", fused), ("apart", apart)):
        seconds = time_calls(fn)
        rows += timed_rows("kv_write_rope", shape, fmt, provider, seconds, moved, copy_bw)
    return rows


def gather_rows(k_format: str, v_format: str, copy_bw: float, n: int = 4096) -> list[Row]:
    """n stored positions of one layer back to f16 K and V (a prefill chunk's attention)."""
    cache, seq, _layers = filled_cache(k_format, v_format, n)
    seconds = time_calls(lambda: cache.gather(0, seq, n))
    moved = n * cache.spec.bytes_per_token + 2 * n * KV_HEADS * HEAD_DIM * 2
    fmt = f"{k_format}/{v_format}"
    return timed_rows("kv_gather", f"{n} positions", fmt, "hearth", seconds, moved, copy_bw)
