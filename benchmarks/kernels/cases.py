"""Every public kernel op the benchmark times, with its reference and its tests: a plain list,
no torch, so that `python -m benchmarks.kernels --list` runs on any machine.

Shapes are Llama-3-8B's (4096 wide, 32 query heads and 8 KV heads of 128, 14336 FFN).
"""

from __future__ import annotations

from dataclasses import dataclass

# (name, n_out, n_in) of one Llama-3-8B layer's matrices
LLAMA3_8B = [
    ("attn_q/o", 4096, 4096),
    ("attn_k/v", 1024, 4096),
    ("ffn_gate/up", 14336, 4096),
    ("ffn_down", 4096, 14336),
]
GEMV_FORMATS = ["Q4_K", "Q6_K", "Q5_K", "Q8_0", "Q4_0", "Q4_1", "F16"]
DEQUANT_FORMATS = ["Q4_K", "Q6_K"]
KV_PAIRS = [
    ("f16", "f16"), ("q8", "q8"), ("rot4", "rot4"), ("q8", "rot4"), ("rot2", "rot4"),
    ("kivi4", "rot4"),
]  # fmt: skip
CONTEXTS = [4096, 32768, 131072]
HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM = 4096, 14336, 32, 8, 128


@dataclass(frozen=True)
class Op:
    """A public op: where it lives, its reference (kernels/reference.py or the format's own
    module) and its tests, and what the benchmark times of it."""

    name: str
    kernel: str
    reference: str
    tests: str
    timed: str


OPS = [
    Op("quant_matmul", "kernels.gemv.quant_matmul", "kernels.reference.gemv",
       "tests/kernels/test_gemv.py, tests/kernels/test_gemv_dp4a.py",
       f"each of {', '.join(GEMV_FORMATS)} at the four matrices, 1 and 16 rows; cuBLAS f16 beside"),
    Op("quantize_activation", "kernels.act_quant.quantize_activation",
       "kernels.reference.quantize_activation", "tests/kernels/test_gemv_dp4a.py",
       "one row of 4096 and of 14336"),
    Op("dequantize", "kernels.dequant.dequantize", "kernels.reference.dequantize_weight",
       "tests/kernels/test_dequant.py",
       f"{', '.join(DEQUANT_FORMATS)} at the four matrices to f16"),
    Op("rms_norm", "kernels.norms.rms_norm", "kernels.reference.rms_norm",
       "tests/kernels/test_norms_and_activations.py",
       "1 and 512 rows of 4096, with the residual add; torch beside"),
    Op("rms_norm_quantized", "kernels.norms.rms_norm_quantized", "kernels.reference.rms_norm",
       "tests/kernels/test_norms_and_activations.py", "1 and 512 rows of 4096"),
    Op("swiglu", "kernels.activations.swiglu", "kernels.reference.swiglu",
       "tests/kernels/test_norms_and_activations.py", "1 and 512 rows of 14336; torch beside"),
    Op("swiglu_quantized", "kernels.activations.swiglu_quantized", "kernels.reference.swiglu",
       "tests/kernels/test_norms_and_activations.py", "1 and 512 rows of 14336"),
    Op("apply_rope", "kernels.rope.apply_rope", "kernels.reference.rope",
       "tests/kernels/test_rope.py", "32 heads of 128, 1 and 512 tokens; torch beside"),
    Op("kv_write", "kernels.kv_cache.PagedKVCache.write", "kernels.kv_formats.reference_roundtrip",
       "tests/kernels/test_kv_cache.py, tests/kernels/test_kv_kivi.py",
       "each K/V pair, 1 and 4096 positions"),
    Op("kv_write_rope", "kernels.kv_cache.PagedKVCache.write (q=, rope=)",
       "kernels.reference.rope", "tests/kernels/test_kv_write_rope.py",
       "each K/V pair, 1 and 4096 positions of 32 Q + 8 K/V heads, head norms on; RoPE's own "
       "launch then the write beside"),
    Op("decode_attention", "kernels.kv_cache.PagedKVCache.attend",
       "kernels.reference.decode_attention",
       "tests/kernels/test_kv_cache.py, test_kv_cache_positions.py, test_kv_kivi.py, "
       "test_kv_page_step.py", f"each K/V pair at {', '.join(map(str, CONTEXTS))} positions"),
    Op("kv_gather", "kernels.kv_cache.PagedKVCache.gather",
       "kernels.kv_formats.reference_roundtrip",
       "tests/kernels/test_kv_cache.py", "each K/V pair, 4096 positions to f16"),
]  # fmt: skip


def listing() -> str:
    """The ops as `python -m benchmarks.kernels --list` prints them."""
    lines = []
    for op in OPS:
        lines += [
            f"{op.name}: {op.kernel}",
            f"    reference  {op.reference}",
            f"    tests      {op.tests}",
            f"    timed      {op.timed}",
        ]
    return "\n".join(lines)
