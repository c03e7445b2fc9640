"""Hearth's own fused GPU kernels (PyTorch + Triton), an optional part of Hearth.

Importing `kernels` never needs torch or triton: the app installs without them (they are the
`kernels` extra in pyproject.toml). Ask first, then use:

    import kernels
    ok, why = kernels.available()   # never raises; `why` says what is missing and what to do
    kernels.require()               # raises kernels.KernelsUnavailable(why) when not ok

The API (names exported lazily from this package; each lives in the module named):

Weights (kernels/packed_weight.py, kernels/gemv.py)
    w = PackedWeight.from_gguf(raw, ggml_type, shape, device="cuda")
        raw: the tensor's bytes as stored in the GGUF file (bytes, numpy uint8 array or torch
        uint8 tensor); ggml_type: gguf.GGMLQuantizationType, its int value or name ("Q4_K");
        shape: (n_out, n_in), i.e. GGUF's ne reversed (ne[0] = n_in is the contiguous axis).
        Types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, F16, BF16 (and F32).
        The blocks are split once into planes of their fields (same bytes, same count:
        docs/kernels.md says why); anything else raises UnsupportedTensor naming the type.
    y = quant_matmul(x, w)        x: [..., n_in] f16/bf16/f32 -> y: [..., n_out], x's dtype.
        Best for a few rows (decode, draft verification); more rows work, slower per row
        than kernels.dequant and torch's GEMM (docs/decisions/0022-batch-rows-by-dequantized-
        gemm.md). Q4_K and Q6_K at up to gemv.DP4A_MAX_ROWS rows, and Q8_0 at one, round x to
        8 bits per 32 values first and use integer dot products (as llama.cpp's CUDA and CPU
        builds do):
        0.3-0.9% relative error against float x; GemvConfig(path="float") avoids it (slower).
    xq = quantize_activation(x);  y = quant_matmul(x, w, quantized=xq)
        x's 8-bit form computed once and shared by the weights that read the same x (q/k/v,
        gate/up): one launch per x instead of one per weight.
    w.dequantize() -> f32 [n_out, n_in] through the host (gguf's numpy dequantizers; checks)
    w16 = kernels.dequant.dequantize(w, torch.float16)   on w's device, for prefill's GEMM
        (Q4_K and Q6_K by a one-pass kernel on a GPU, the other formats in torch).
        kernels.dequant_torch.dequantize_mxfp4(raw, n_in): MXFP4 blocks as stored (ggml type
        39, gpt-oss's experts; no PackedWeight format) -> float32 [..., n_in].

Mixture of experts (kernels/moe_routing.py, kernels/moe_router.py, kernels/moe_gemv.py;
docs/kernels-moe.md)
    w = ExpertWeight.from_gguf(raw, ggml_type, (n_expert, n_out, n_in), device, bias=None)
        an ffn_*_exps tensor as stored (Q4_K, Q5_K, Q6_K, Q8_0, MXFP4, Q4_0, Q4_1, Q5_0, Q5_1);
        bias [n_expert, n_out] or None
    routing = route_experts(ids, weights, n_expert)     ids, weights [T, k]: the pairs grouped
        by expert, one launch, no host sync; shared by a layer's gate/up and down calls
    routing = select_and_route(logits, k, softmax_all=..., normalize=..., bias=None)
        the same from the router's logits [T, n_expert]: each token's top-k picked (and its
        weights) in the same launch
    routing, logits = route_from_router(x, router, k, softmax_all=..., normalize=..., bias=None)
        the same from x [T, n_embd] and the router (a PackedWeight, F32/F16/BF16): the
        router's GEMV in that launch too
    r = norm_and_route(a, residual, norm_w, eps, router, k, softmax_all=..., normalize=...,
                       bias=None, attn_bias=None)
        rms_norm_quantized(a, norm_w, eps, residual, bias=attn_bias) and route_from_router on
        its y in the router's launch: r.y, r.h, r.quantized, r.routing, r.logits
    h = expert_gate_up(x, gate, up, routing, SILU | SWIGLU_OAI)   x [T, n_in] -> [T, k, n_ff]
    y = expert_down(h, down, routing)          [T, k, n_ff] -> [T, n_out], slots summed with
        their routing weights; expert_rows(x, w, routing) -> [T, k, n_out] (no activation)
        x in 8 bits per 32 values (as the dense integer GEMV); quantized= shares it;
        expert_down rounds h itself unless given quantized=
    kernels.router_beside_wo (imported from there): a one-token step's routing chosen before
        the FFN norm. folded = fold_router(router, norm_w, wo_dense, bo) at load; then
        parts = router_scores(a8, folded, residual) and
        out, picked = wo_and_scores(a, wo, a8, parts, folded.offset, k, config): wo's output
        and the top-k (picked.ids) in wo's launch; rms_norm_quantized(..., route=
        RouteWeights(picked.scores, picked.top, weights)) fills their routing weights, and
        ExpertRouting.one_token(picked.ids, weights, n_expert) feeds the one-token kernels

Elementwise (kernels/norms.py, kernels/activations.py, kernels/rope.py)
    y = rms_norm(x, weight, eps)                      y = x / rms(x) * weight
    y, h = rms_norm(x, weight, eps, residual=r)       h = x + r; y = rms_norm(h) (fused)
    y = swiglu(gate, up)                              silu(gate) * up
    y, h, yq = rms_norm_quantized(x, weight, eps, residual=None, out_dtype=None)
    y, yq = swiglu_quantized(gate, up)
        the same, plus y in 8 bits from the same launch (yq as quantize_activation(y) gives
        it: pass it as quant_matmul's `quantized=`); h is None without a residual
    rope = Rope.from_gguf_params(head_dim, n_rot, base, layout="normal"|"neox",
                                  scaling="none"|"linear"|"yarn"|"llama3", factor=...,
                                  original_context=..., freq_factors=None)  (host-side table)
    y = apply_rope(x, positions, rope)                x: [T, H, D], positions: int [T]

KV cache (kernels/kv_cache.py; formats in kernels/kv_formats.py)
    spec = KVCacheSpec(n_layers, n_kv_heads, head_dim, k_format="rot4", v_format="rot4",
                       page_size=64, max_tokens=32768)
        formats: "f16"; "q8" (int8, one f16 scale per token and head); "rot4" (Walsh-Hadamard
        rotated per head, 4-bit, f16 scale+min per group of 32); "rot2" (K only, 2-bit).
        K and V formats are chosen independently (e.g. k_format="q8", v_format="rot4").
    cache = PagedKVCache(spec, device="cuda")
    seq = cache.new_sequence();  cache.free_sequence(seq)
    start = cache.grow(seq, n)           reserve n more positions (pages as needed)
    cache.truncate(seq, n)               keep the first n positions (pages past them freed)
    cache.write(layer, seq, start, k, v, rope=None)
        k, v: [n, n_kv_heads, head_dim]; with `rope`, RoPE is applied to k inside the write
        kernel (positions start..start+n-1), then rotate + quantize + store, one launch each.
        `start` may be a device tensor of n positions instead (no host sync: CUDA graphs).
    q = cache.write(layer, seq, start, k, v, rope, q=q, biases=(bq, bk, bv), norms=QKNorms)
        the same with a step's queries q [n, n_heads, head_dim]: biases (float32 or None
        each) added, Q's and K's heads RMS-normed (Qwen3) and rotated, in the same launch;
        returns the rotated q (kernels/kv_write.py)
    o = cache.attend(layer, q, seqs, scale=None, *, window=0, positions=None)
        q: [len(seqs), n_heads, head_dim], one query per sequence over all its positions
        (flash-decoding split + reduce, GQA aware) -> o: [len(seqs), n_heads, head_dim];
        or q: [len(seqs), T, n_heads, head_dim] for each sequence's last T positions (draft
        verification; token t sees positions up to its own; T * n_heads/n_kv_heads <= 128).
        positions: device tensor of the query tokens' positions, in place of the lengths;
        window > 0: a query at p sees only j with p - j < window (Gemma 3's local layers).
        The launch grid depends on the capacity (or window), never the length: a decode step
        captured once in a CUDA graph replays at every position already grown.
    o = cache.attend(layer, q, [seq], positions=pos, step_row=StepRow(k, v, rope, biases))
        a decode step's write and attention in one launch: q, k, v [1, heads, head_dim] as
        the Q/K/V GEMV made them (no head norms); the bits of `write` with q,
        then `attend`
    o = cache.attend_prefill(layer, q, seq, positions, n_keys, scale=None, *, window=0,
                             masks=None)
        a prefill chunk q [T, n_heads, head_dim] over stored positions 0..n_keys-1: the pages
        gathered to f16 on the device, then torch's SDPA with the causal (+window) mask;
        masks: a dict kept for one chunk, where the first layer leaves the chunk's additive
        mask (kernels/prefill_masks.py) and the other layers take it.
    k, v = cache.gather(layer, seq, n)   f16 [n, n_kv_heads, head_dim], dequantized on the GPU
    cache.tuning = AttentionTuning(programs_per_sm=0, num_warps=0, num_stages=5)  (0s: fit one
        wave; warps by the K/V formats)
    k, v = cache.read_rows(layer, seq)   numpy float32, dequantized and unrotated (checks)

Reference (numpy; no torch needed; the tests and benchmarks use these and nothing else)
    kernels.kv_formats.reference_roundtrip(fmt, x) -> x after quantize+dequantize (float32)
    kernels.kv_formats.reference_quantize(fmt, x) / reference_dequantize(fmt, packed)
    kernels.reference: gemv (via gguf.quants.dequantize), quantize_activation (x' as the
        integer GEMV sees x), rms_norm, swiglu, rope, decode_attention

Errors
    KernelsUnavailable   no torch / no triton / GPU without Triton support (CUDA cc < 8.0,
                         Metal, Vulkan-only) or AMD via ROCm (NVIDIA inline assembly) — with
                         the reason.
    UnsupportedTensor    a ggml type, KV format or shape a kernel does not handle (ValueError).

CPU: with TRITON_INTERPRET=1 set before import, every kernel runs on CPU tensors through
Triton's interpreter (slow; used by the tests on small shapes).
"""

from __future__ import annotations

import importlib
from typing import Any

from kernels.availability import KernelsUnavailable, available, require
from kernels.errors import UnsupportedTensor

_LAZY = {
    "PackedWeight": "kernels.packed_weight",
    "quant_matmul": "kernels.gemv",
    "quantize_activation": "kernels.act_quant",
    "empty_quantized": "kernels.act_quant",
    "rms_norm": "kernels.norms",
    "rms_norm_quantized": "kernels.norms",
    "swiglu": "kernels.activations",
    "swiglu_quantized": "kernels.activations",
    "Rope": "kernels.rope_tables",
    "apply_rope": "kernels.rope",
    "KVCacheSpec": "kernels.kv_formats",
    "PagedKVCache": "kernels.kv_cache",
    "StepRow": "kernels.kv_write",
    "AttentionTuning": "kernels.decode_launch",
    "ExpertWeight": "kernels.moe_gemv",
    "expert_rows": "kernels.moe_gemv",
    "expert_gate_up": "kernels.moe_gemv",
    "expert_down": "kernels.moe_gemv",
    "SILU": "kernels.moe_gemv",
    "SWIGLU_OAI": "kernels.moe_gemv",
    "route_experts": "kernels.moe_routing",
    "select_and_route": "kernels.moe_routing",
    "route_from_router": "kernels.moe_router",
    "norm_and_route": "kernels.moe_router",
}

__all__ = ["KernelsUnavailable", "UnsupportedTensor", "available", "require", *_LAZY]


def __getattr__(name: str) -> Any:
    # torch and triton load only when a kernel is first asked for, so `import kernels` is free.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kernels' has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as error:  # torch or triton missing: say so as the API promises
        raise KernelsUnavailable(available()[1]) from error
