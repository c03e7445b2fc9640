"""Per-backend facts and the planner's calibration constants, in one table.

Two kinds of numbers live here:

- facts read from llama.cpp's source (vendored in llama-cpp-python 0.3.36): buffer alignment,
  the CUDA row padding of quantized tensors, which K/V type pairs the flash-attention kernels
  were compiled for;
- estimates that only a measurement on the device can settle: the backend's fixed overhead
  (driver context, library workspaces, scratch pools) and the decode efficiency of the
  bandwidth model. They carry `calibrated=False` until benchmarks/planner_accuracy.py has
  measured them on that backend; plans that depend on an uncalibrated figure say so.

Sources for the facts:
- ggml-cuda/ggml-cuda.cu, ggml_backend_cuda_buffer_type_get_alignment (128) and
  ggml_backend_cuda_buffer_type_get_alloc_size: a quantized tensor whose row length ne0 is not
  a multiple of MATRIX_ROW_PADDING (512, ggml-cuda/common.cuh) gets one padded row extra.
  ROCm builds compile the same file (HIP).
- ggml/CMakeLists.txt, GGML_CUDA_FA_QUANTS default "q4_0-q4_0;q8_0-q8_0;f16-f16;bf16-bf16":
  other K/V pairs have no vector kernel and ggml-cuda/fattn.cu converts K and V to f16 on every
  step (slow), so the planner never chooses them.
- ggml-cpu: buffers aligned to TENSOR_ALIGNMENT (32 in ggml-impl.h; 64 is used here to cover
  AVX-512 builds). Metal and Vulkan have their own alignments, small against tensor sizes.

Flash-attention head sizes and K/V pairs for Vulkan, Metal and ROCm are taken to be CUDA's (a
subset of what they run), which can only make the planner choose flash attention less often.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from engine.enums import KV_TYPES

MIB = 1024 * 1024
GIB = 1024 * MIB


_MATCHING_PAIRS = frozenset((kv, kv) for kv in KV_TYPES)
_ALL_PAIRS = frozenset((k, v) for k in KV_TYPES for v in KV_TYPES)
# ggml-cuda/fattn.cu, ggml_cuda_get_best_fattn_kernel: head sizes with a kernel (K == V).
_CUDA_FA_DIMS = frozenset({40, 64, 72, 80, 96, 112, 128, 256})


@dataclass(frozen=True)
class BackendProfile:
    name: str
    alignment: int  # bytes every tensor is aligned to in this backend's buffers
    context_bytes: int  # driver context, library handles and workspaces, once per device
    decode_efficiency: float  # achieved / nominal memory bandwidth while decoding
    pool_bytes_per_token_row: float = 0.0  # scratch pool: x (ubatch tokens x widest row x 4 B)
    row_padding: int = 0  # elements: quantized rows padded to a multiple of this (0: none)
    # MoE scratch pool: x (ubatch tokens x experts used x (n_embd + expert width) x 4 bytes),
    # the sorted and gathered activations of MUL_MAT_ID on prompt batches
    moe_pool_bytes_per_token_row: float = 0.0
    fa_pairs: frozenset[tuple[str, str]] = _MATCHING_PAIRS  # K/V pairs flash attention runs
    fa_head_dims: frozenset[int] = _CUDA_FA_DIMS  # head sizes with a flash-attention kernel
    fa_needs_f16_copy_in_prefill: bool = False  # quantized K/V converted to f16 for prompts
    calibrated: bool = False
    # Whether ggml_backend_sched may run host-weight operations of prompt batches here
    # (op_offload). llama.cpp's RPC devices do not (ggml-rpc.cpp: offload_op = NULL).
    offloads_ops: bool = True


# Calibrated on an NVIDIA H200 (driver 580.159.04, CUDA build for sm_90) by
# benchmarks/planner_accuracy.py matrix, 126 cells (docs/planner-accuracy.md): the memory
# in use beyond llama.cpp's logged buffers was 595-607 MiB after the load (CUDA context,
# cuBLAS, CUDA graphs) and 608-619 MiB after a 512-token prefill of a dense model, 707-715
# MiB of Qwen3-30B-A3B; decode reached 0.45-0.76 of the bandwidth bound, median 0.55.
# A consumer card's CUDA context is likely smaller (not measured): these would then err safe.
_CUDA = BackendProfile(
    name="cuda",
    alignment=128,
    row_padding=512,
    context_bytes=600 * MIB,
    pool_bytes_per_token_row=0.5,
    moe_pool_bytes_per_token_row=2.5,
    fa_needs_f16_copy_in_prefill=True,
    decode_efficiency=0.55,
    calibrated=True,
)

BACKENDS: dict[str, BackendProfile] = {
    "cuda": _CUDA,
    # ROCm builds compile ggml-cuda (HIP): CUDA's facts, their own estimates.
    "rocm": dataclasses.replace(
        _CUDA,
        name="rocm",
        context_bytes=400 * MIB,
        pool_bytes_per_token_row=2.0,
        decode_efficiency=0.65,
        calibrated=False,
    ),
    "vulkan": BackendProfile(
        name="vulkan",
        alignment=256,
        context_bytes=200 * MIB,
        pool_bytes_per_token_row=1.0,
        moe_pool_bytes_per_token_row=2.5,
        decode_efficiency=0.6,
    ),
    "metal": BackendProfile(
        name="metal",
        alignment=32,
        context_bytes=64 * MIB,
        decode_efficiency=0.7,
    ),
    "cpu": BackendProfile(
        name="cpu",
        alignment=64,
        context_bytes=0,
        fa_pairs=_ALL_PAIRS,
        fa_head_dims=frozenset(range(1, 1025)),
        decode_efficiency=0.5,
    ),
}


def backend(name: str) -> BackendProfile:
    """The profile for a backend name; unknown names get CUDA's (the most conservative)."""
    return BACKENDS.get(name, BACKENDS["cuda"])


@dataclass(frozen=True)
class ComputeConstants:
    """Coefficients of the compute-buffer model (engine/planner/compute.py), per float of
    activation width per token. Fitted to llama.cpp's own reserve on the CPU backend
    (tests/engine/planner/fixtures/llama_cpu_measurements.json): Llama-3-8B, Gemma-3-12B and
    Qwen3-30B-A3B at contexts 512-131072, flash attention on and off, ubatch 128-2048."""

    # attention stage, besides the scores and masks: live activations of widths n_embd, q_dim
    attn_embd: float = 3.5
    attn_q: float = 2.0
    # architectures with extra norms around attention (gemma: q/k norms, post-norms, scaling)
    attn_embd_norm_heavy: float = 5.1
    # dense feed-forward stage: residual stream copies and gate/up/activation tensors
    ffn_embd: float = 4.0
    ffn_ff: float = 3.0
    # MoE stage: router logits/probabilities and the per-token expert activations
    moe_router: float = 3.0
    moe_ff_exp: float = 3.0
    moe_embd: float = 2.0
    # output stage: logits plus two n_embd-wide tensors (final norm and its input); one more
    # for norm-heavy architectures without flash attention (the allocator's layout differs)
    output_embd: float = 2.0
    output_embd_norm_heavy_no_fa: float = 3.0
    # unknown architectures: compute estimate x this, and a flat reserve
    unknown_factor: float = 1.5
    unknown_reserve_bytes: int = 256 * MIB


COMPUTE = ComputeConstants()

# Host memory the engine process takes besides buffers (Python, llama.cpp code, threads).
HOST_PROCESS_BYTES = 600 * MIB
# Speed model: fixed cost per decoded token (graph launch, sampling, synchronisation).
DECODE_OVERHEAD_S = 0.002
# Used when the CPU's memory bandwidth is unknown: dual-channel DDR4-3200 (51.2 GB/s).
DEFAULT_CPU_BANDWIDTH_GBPS = 51.2
