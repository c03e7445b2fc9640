"""The compute buffer: llama.cpp's scratch memory for one forward pass, per device.

llama_context::sched_reserve() (src/llama-context.cpp) builds the worst-case graphs, a prompt
batch of n_tokens = min(n_ctx, n_ubatch) tokens with min(n_tokens, n_outputs_max) outputs and
the full KV cache in view, then a one-token graph, and ggml-alloc sizes each backend's buffer to
the high-water mark of the tensors alive at once. The model below takes that peak as the
largest of a few stages, each the sum of the tensors alive in it:

  attention   masks + act_attn + (flash attention: the f16 copies of a quantized K/V that the
              CUDA prompt kernels need, sized into the FLASH_ATTN_EXT node by
              ggml_cuda_flash_attn_ext_get_alloc_size; without flash attention: the scores,
              n_kv x T x n_head x 4 bytes, src/llama-graph.cpp build_attn_mha, kq)
  feed-forward masks + T x 4 x (3 n_embd + 3 n_ff) dense, or the router and the selected
              experts' activations for MoE
  output      n_outputs x 4 x (n_vocab + 2 n_embd): the logits and the final norm
  masks       one per cache (full, sliding window): n_kv x T x (2 bytes with flash attention,
              4 without), alive from the first layer to the last
  act_attn    T x 4 x (3.5 n_embd + 2 q_dim) (5.1 n_embd for architectures with extra norms)

The coefficients (engine/planner/backends.py, ComputeConstants) were fitted to llama.cpp's own
reserve; the attention and output terms reproduce its figures for Llama-3-8B, Gemma-3-12B and
Qwen3-30B-A3B within 8 MiB from 512 to 131072 tokens
(tests/engine/planner/test_compute_vs_llama.py).

Partial offload adds copies. With op_offload (the default), ggml_backend_sched runs a prompt
batch's operations on weights in host memory on the first GPU when the batch has at least 32
tokens (ggml-cuda.cu, ggml_backend_cuda_device_offload_op), copying the weight into that GPU's
compute buffer one split at a time (ggml-backend.cpp, "by starting a new split, the memory of
the previously offloaded weights can be reused"). So the first GPU's buffer also holds: the
largest weight of a CPU layer, that layer's K and V (its cache lives in host memory but its
attention runs on the GPU), the largest expert tensor kept in host memory (a MUL_MAT_ID copy is
allocated whole, though only the used experts are transferred), and the output matrix when the
output layer stays on the CPU. These copy terms come from the source, not from a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from engine.planner.backends import COMPUTE, BackendProfile
from engine.planner.kv_cache import row_bytes
from engine.planner.profile import ModelProfile

OP_OFFLOAD_MIN_BATCH = 32  # ggml-cuda: GGML_OP_OFFLOAD_MIN_BATCH default
PIPELINE_COPIES = 4  # ggml-backend.cpp: GGML_SCHED_MAX_COPIES, used with pipeline parallelism


@dataclass(frozen=True)
class Stages:
    """Stage sizes for one context and settings, shared by every device's estimate."""

    tokens: int
    masks: int  # all masks (both caches)
    attn_full: int  # one full-attention layer's attention stage, without masks
    attn_swa: int  # one sliding-window layer's attention stage, without masks
    kv_copy_full: int  # K+V of one full-attention layer as stored (copied when run remotely)
    kv_copy_swa: int
    ffn: int
    output: int


def stages(
    profile: ModelProfile,
    n_cells: tuple[int, int],
    n_ubatch: int,
    flash_attn: bool,
    type_k: str,
    type_v: str,
    n_outputs_max: int,
    backend: BackendProfile,
) -> Stages:
    key = ("stages", n_cells, n_ubatch, flash_attn, type_k, type_v, n_outputs_max, backend.name)
    cached = profile._cache.get(key)
    if cached is None:
        cached = _stages(
            profile, n_cells, n_ubatch, flash_attn, type_k, type_v, n_outputs_max, backend
        )
        profile._cache[key] = cached
    return cached


def _stages(profile, n_cells, n_ubatch, flash_attn, type_k, type_v, n_outputs_max, backend):
    p, c = profile, COMPUTE
    t = min(n_ubatch, n_cells[0])
    f32 = 4 * t
    has_full, has_swa = p.has_full_attention, p.has_swa_attention
    mask_bytes = 2 if flash_attn else 4
    masks = t * mask_bytes * ((n_cells[0] if has_full else 0) + (n_cells[1] if has_swa else 0))

    embd_coeff = c.attn_embd_norm_heavy if p.norm_heavy else c.attn_embd
    act_attn = int(f32 * (embd_coeff * p.n_embd + c.attn_q * p.q_dim))
    k_width, v_width = p.k_width_max, p.v_width_max

    def attention(n_kv: int) -> int:
        if not flash_attn:
            return act_attn + n_kv * t * p.n_head * 4
        extra = 0
        if backend.fa_needs_f16_copy_in_prefill and t > 2:
            if type_k != "f16":
                extra += k_width * n_kv * 2
            if type_v != "f16":
                extra += v_width * n_kv * 2
        return act_attn + extra

    def kv_copy(n_kv: int) -> int:
        return (row_bytes(type_k, k_width) + row_bytes(type_v, v_width)) * n_kv

    if p.is_moe:
        k = max(1, p.n_expert_used)
        ffn = f32 * (
            c.moe_router * p.n_expert + c.moe_ff_exp * k * p.n_ff_exp + (k + c.moe_embd) * p.n_embd
        )
        if p.n_ff:  # dense leading layers, or a shared expert
            ffn = max(ffn, f32 * (c.ffn_embd * p.n_embd + c.ffn_ff * p.n_ff))
    else:
        ffn = f32 * (c.ffn_embd * p.n_embd + c.ffn_ff * p.n_ff)
    n_out = min(t, n_outputs_max) if n_outputs_max > 0 else t
    out_coeff = c.output_embd
    if p.norm_heavy and not flash_attn:
        out_coeff = c.output_embd_norm_heavy_no_fa
    output = 4 * n_out * (p.n_vocab + int(out_coeff * p.n_embd))
    return Stages(
        tokens=t,
        masks=masks,
        attn_full=attention(n_cells[0]) if has_full else 0,
        attn_swa=attention(n_cells[1]) if has_swa else 0,
        kv_copy_full=kv_copy(n_cells[0]) if has_full else 0,
        kv_copy_swa=kv_copy(n_cells[1]) if has_swa else 0,
        ffn=int(ffn),
        output=output,
    )


class DeviceWork(NamedTuple):
    """What one device computes during a prompt batch (a NamedTuple: built per costing)."""

    has_layers: bool  # runs at least one layer's attention and feed-forward
    has_swa: bool  # among them a sliding-window layer
    has_full: bool  # among them a full-attention layer
    runs_output: bool
    remote_layer_weight: int = 0  # largest weight copied in for a host layer run here
    remote_kv_full: bool = False  # runs a host layer's full-attention (copies its K/V)
    remote_kv_swa: bool = False
    remote_expert_weight: int = 0  # largest host expert tensor copied in
    remote_output_weight: int = 0  # the output matrix copied in
    pipeline_copies: bool = False


def device_compute(s: Stages, work: DeviceWork, n_embd: int) -> int:
    """Peak compute-buffer bytes on one device, from the stages it runs."""
    peaks = [0]
    remote_layers = work.remote_kv_full or work.remote_kv_swa or work.remote_layer_weight
    if work.has_layers or remote_layers or work.remote_expert_weight:
        if work.has_full or work.remote_kv_full:
            kv = s.kv_copy_full if work.remote_kv_full else 0
            peaks.append(s.masks + s.attn_full + kv + work.remote_layer_weight)
        if work.has_swa or work.remote_kv_swa:
            kv = s.kv_copy_swa if work.remote_kv_swa else 0
            peaks.append(s.masks + s.attn_swa + kv + work.remote_layer_weight)
        copied = max(work.remote_layer_weight, work.remote_expert_weight)
        peaks.append(s.masks + s.ffn + copied)
    if work.runs_output:
        peaks.append(s.output + work.remote_output_weight)
    peak = max(peaks)
    if work.pipeline_copies and peak:
        peak += (PIPELINE_COPIES - 1) * (s.masks + 4 * s.tokens * n_embd)
    return peak


def host_compute(s: Stages, n_embd: int, host_runs_everything: bool, work: DeviceWork) -> int:
    """The host's compute buffer: with GPUs, the graph inputs (masks, embeddings) it prepares;
    without, the whole graph."""
    if host_runs_everything:
        return device_compute(s, work, n_embd)
    return s.masks + 2 * 4 * s.tokens * n_embd
