"""What the Hearth engine can run, answered from a GGUF header and a device description alone.

Pure (no torch): the planner and the Model page ask these questions in the window's process,
where importing torch to plan would cost seconds; the worker asks the same questions (and
the ones only a live torch can answer: is a GPU visible) before loading. One place for the
answers keeps the planner from offering what the driver would refuse.

    model_unsupported_reason(info, gpu=True)  -> None, or one line: why not this file
    moe_device_reason(info, config, device)   -> None, or one line: why not these experts here
    device_unsupported_reason(backend, cc)    -> None, or one line: why not this device
    kv_format_problem(k, v, swa=..., gpu=...) -> None, or one line: why not this K/V pair
"""

from __future__ import annotations

from engine.gguf import ModelInfo
from engine.hearth.cache_layout import PLAIN_FORMATS
from engine.hearth.config import ModelConfig, UnsupportedModel, model_config
from kernels.errors import UnsupportedTensor
from kernels.kv_formats import check_format

# ggml tensor types the engine reads (engine/hearth/ops.py, TorchOps.supports): the gguf
# package's dequantizers, and kernels/ packs most of them for its GEMV on a GPU; MXFP4
# (gpt-oss's experts) through kernels/dequant_torch.py.
TENSOR_TYPES = {
    0: "F32", 1: "F16", 30: "BF16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
    10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 39: "MXFP4",
}  # fmt: skip

# Mixture-of-experts models: on the CPU through TorchOps (tests/engine/hearth compares them with
# llama.cpp); on a GPU through kernels' expert GEMV (KernelsOps.moe_ffn, docs/kernels-moe.md),
# which reads these expert tensor types only (kernels/moe_gemv.py EXPERT_FORMATS; a test keeps
# the two lists equal) and fuses these two gated activations. Any other expert tensor loads
# with llama.cpp on a GPU, with the reason. MOE_ON_GPU False sends every MoE model there.
MOE_ON_GPU = True
MOE_GPU_EXPERT_TYPES = {
    12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 8: "Q8_0", 39: "MXFP4", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0",
    7: "Q5_1",
}  # fmt: skip
MOE_GPU_ACTIVATIONS = ("silu", "swiglu_oai")
MOE_GPU_REASON = "mixture-of-experts models run on the Hearth engine's CPU path only"

# KV cache formats (ModelParams.type_k / type_v; which cache holds them: cache_layout.py), K and
# V chosen independently, rot2 and kivi4 (per-channel 4-bit, the newest page exact) for K only
# (kernels/kv_formats.py). What the Model page offers (f32 is for the tests):
K_FORMATS = ("f16", "q8", "kivi4", "rot4", "rot2")
V_FORMATS = ("f16", "q8", "rot4")
# kernels' paged attention takes a sliding window (PagedKVCache.attend(..., window=)), so the
# quantized formats serve Gemma 3 too.
PAGED_SLIDING_WINDOW = True

# Triton compiles for NVIDIA compute capability 8.0 and newer (kernels/availability.py). ROCm
# builds of torch give Triton an AMD backend too, but the kernels carry NVIDIA inline assembly
# it cannot compile (kernels/availability.py refuses ROCm); Metal, Vulkan and the CPU have no
# Triton backend.
MIN_CUDA_CAPABILITY = (8, 0)
GPU_BACKENDS = ("cuda", "rocm")


def model_unsupported_reason(info: ModelInfo, gpu: bool = True) -> str | None:
    """Why the Hearth engine cannot run this file (the worker's fallback reasons for the file:
    architecture, experts it does not route, RoPE scaling, per-layer shapes, tensor types) on
    a GPU (or with gpu=False on the CPU), or None."""
    try:
        config = model_config(info)
    except UnsupportedModel as exc:
        return str(exc)
    reason = moe_device_reason(info, config, "cuda" if gpu else "cpu")
    if reason:
        return reason
    unsupported = sorted({t.type_name for t in info.tensors if t.ggml_type not in TENSOR_TYPES})
    if unsupported:
        return f"tensor types {', '.join(unsupported)} are not supported yet"
    return None


def moe_device_reason(info: ModelInfo, config: ModelConfig, device: str) -> str | None:
    """Why this model's experts do not run on `device`, or None: on a GPU, an expert tensor of
    a type the expert GEMV does not read, or another gated activation."""
    if config.moe is None or device == "cpu":
        return None
    if not MOE_ON_GPU:
        return MOE_GPU_REASON
    if config.activation not in MOE_GPU_ACTIVATIONS:
        return (
            f"experts with the {config.activation} activation run on the Hearth engine's CPU "
            "path only"
        )
    for t in info.tensors:
        if not t.name.endswith("_exps.weight"):
            continue
        if t.ggml_type not in MOE_GPU_EXPERT_TYPES:
            return (
                f"{t.type_name} experts ({t.name}) have no GPU expert kernel on the Hearth "
                f"engine (it reads {', '.join(MOE_GPU_EXPERT_TYPES.values())} experts)"
            )
    return None


def device_unsupported_reason(backend: str, compute_capability: str | None = None) -> str | None:
    """Why the Hearth engine's kernels cannot run on a GPU of this llama.cpp backend, or None.
    `compute_capability` is NVIDIA's "8.9" (None: not known, taken to be new enough)."""
    if backend == "cuda":
        if compute_capability:
            try:
                major, minor = (int(x) for x in compute_capability.split(".")[:2])
            except ValueError:
                return None
            if (major, minor) < MIN_CUDA_CAPABILITY:
                return (
                    f"compute capability {major}.{minor}; Hearth's Triton kernels need 8.0 or "
                    "newer (Ampere, Ada, Hopper, Blackwell)"
                )
        return None
    if backend == "rocm":
        return (
            "AMD GPUs (ROCm): Hearth's kernels use NVIDIA inline assembly that Triton's AMD "
            "backend does not compile"
        )
    if backend == "metal":
        return "Apple GPUs (Metal): Triton has no Metal backend"
    if backend == "vulkan":
        return "Vulkan-only GPUs: Triton has no Vulkan backend"
    return "no CUDA GPU: the Hearth engine runs on NVIDIA GPUs (CUDA, compute capability 8.0+)"


def kv_format_problem(
    type_k: str, type_v: str, *, sliding_window: bool, head_dim: int = 128, gpu: bool = True
) -> str | None:
    """Why the Hearth engine cannot hold this K/V pair for a model, or None."""
    for role, fmt, allowed in (("K", type_k, K_FORMATS), ("V", type_v, V_FORMATS)):
        if fmt not in allowed and fmt not in PLAIN_FORMATS:
            return f"the Hearth engine has no {fmt} {role} cache (it holds {', '.join(allowed)})"
    if (type_k in PLAIN_FORMATS) and (type_v in PLAIN_FORMATS):
        return None
    if not gpu:
        return f"the {type_k}/{type_v} cache runs on kernels/ on a GPU"
    if sliding_window and not PAGED_SLIDING_WINDOW:
        return "quantized caches do not do sliding-window attention yet (f16 only)"
    try:
        for role, fmt in (("K", type_k), ("V", type_v)):
            check_format(fmt, head_dim, role)
    except UnsupportedTensor as exc:
        return str(exc)
    return None
