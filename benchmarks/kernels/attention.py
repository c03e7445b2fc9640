"""Decode attention over the paged cache at Llama-3-8B's shape (32 query heads, 8 KV heads of
128) and 4k / 32k / 128k positions, per K/V format; one layer's attention per figure."""

from __future__ import annotations

import math

import torch

from benchmarks.kernels.timing import L2_DEFEAT_BYTES, time_calls
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec

HEADS, KV_HEADS, HEAD_DIM, LAYERS = 32, 8, 128, 32
FORMAT_PAIRS = [("f16", "f16"), ("q8", "q8"), ("rot4", "rot4"), ("q8", "rot4"), ("rot2", "rot4")]
CHUNK = 8192


def measure(k_format: str, v_format: str, context: int, copy_bw: float) -> dict:
    torch.cuda.empty_cache()  # the last measurement's cache is garbage by now
    probe = KVCacheSpec(1, KV_HEADS, HEAD_DIM, k_format, v_format, max_tokens=context)
    layer_bytes = probe.bytes_per_token * context
    layers = max(1, min(16, math.ceil(L2_DEFEAT_BYTES / layer_bytes)))
    spec = KVCacheSpec(layers, KV_HEADS, HEAD_DIM, k_format, v_format, max_tokens=context)
    cache = PagedKVCache(spec, device="cuda")
    seq = cache.new_sequence()
    cache.grow(seq, context)
    for layer in range(layers):
        for start in range(0, context, CHUNK):
            n = min(CHUNK, context - start)
            k = torch.randn(n, KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
            v = torch.randn(n, KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
            cache.write(layer, seq, start, k, v)
    q = torch.randn(1, HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")

    def run() -> None:
        for layer in range(layers):
            cache.attend(layer, q, [seq])

    seconds = time_calls(run) / layers
    return {
        "k": k_format, "v": v_format, "context": context, "us_per_layer": seconds * 1e6,
        "ms_per_token_32_layers": seconds * LAYERS * 1e3,
        "gb_s": layer_bytes / seconds / 1e9, "of_copy": layer_bytes / seconds / copy_bw,
        "bytes_per_token_layer": probe.bytes_per_token,
    }  # fmt: skip


def measure_write(k_format: str, v_format: str) -> dict:
    """One decode step's write (1 position, all KV heads) and a 4096-token prefill write."""
    spec = KVCacheSpec(1, KV_HEADS, HEAD_DIM, k_format, v_format, max_tokens=8192)
    cache = PagedKVCache(spec, device="cuda")
    seq = cache.new_sequence()
    cache.grow(seq, 8192)
    one = torch.randn(1, KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
    many = torch.randn(4096, KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
    step = time_calls(lambda: cache.write(0, seq, 100, one, one))
    prefill = time_calls(lambda: cache.write(0, seq, 0, many, many))
    return {"k": k_format, "v": v_format, "us_one_token": step * 1e6, "us_4096": prefill * 1e6}
