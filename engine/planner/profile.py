"""What the planner needs to know about one model file, computed once from its ModelInfo.

The search evaluates thousands of placements, so everything that does not depend on the
placement is worked out here: each layer's weight bytes as a given backend stores them, which of
them are MoE expert tensors, the widest tensor of each layer (copied to the GPU when llama.cpp
runs a CPU layer's prompt batch there), the KV width of each layer, and the dimensions the
compute-buffer model uses.

How llama.cpp places tensors (src/llama-model.cpp, llama_model_base::load_tensors, and
src/llama-arch.cpp, LLM_TENSOR_INFOS):
- `token_embd` (and other LLM_TENSOR_LAYER_INPUT tensors) always stay on the CPU: "there is very
  little benefit to offloading the input layer";
- `output`, `output_norm` (LLM_TENSOR_LAYER_OUTPUT) go where the output layer goes;
- a model without `output.weight` uses `token_embd` as its output too, created a second time
  with TENSOR_DUPLICATED, so the embedding is stored twice when the output layer is offloaded;
- `blk.N.*` go where layer N goes; tensors matching a buffer-type override go to the CPU.
Sizes: a backend buffer holds sum(pad(alloc_size(t), alignment)) over its tensors
(ggml-alloc.c, ggml_backend_alloc_ctx_tensors_from_buft_impl), where alloc_size adds the CUDA
row padding (see engine/planner/backends.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from engine.gguf import ModelInfo, TensorInfo
from engine.gguf.ggml_types import GGML_TYPES
from engine.planner.backends import BackendProfile

# llama.cpp's own pattern for MoE expert tensors (common/fit.cpp), with the layer left open.
EXPERT_TENSOR = re.compile(r"^blk\.(\d+)\.ffn_(up|down|gate_up|gate)_(ch|)exps")
INPUT_TENSORS = ("token_embd.", "pos_embd.", "token_types.", "per_layer_token_embd.")
# non-layer tensors that llama.cpp treats as part of the first layer (LLM_TENSOR_LAYER_REPEATING)
FIRST_LAYER_TENSORS = (
    "token_embd_norm.",
    "rope_freqs.",
    "rope_factors_long.",
    "rope_factors_short.",
)
_NOT_QUANTIZED = {"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64"}
# Architectures whose graphs the compute model was fitted to or follows closely (standard
# attention + dense or MoE feed-forward). Others get a low-confidence, padded estimate.
KNOWN_ARCHITECTURES = frozenset(
    {
        "llama", "mistral", "mistral3", "qwen2", "qwen3", "qwen3moe", "qwen2moe", "gemma",
        "gemma2", "gemma3", "phi3", "granite", "granitemoe", "olmo", "olmo2", "stablelm",
        "starcoder2", "internlm2", "exaone", "cohere2", "command-r", "smollm3", "glm4",
        "ernie4_5", "ernie4_5-moe", "gpt-oss", "llama4", "mixtral", "deepseek", "minicpm",
    }
)  # fmt: skip
NORM_HEAVY_ARCHITECTURES = frozenset({"gemma", "gemma2", "gemma3", "gemma3n", "cohere2", "olmo2"})


def is_quantized(type_name: str) -> bool:
    return type_name not in _NOT_QUANTIZED


def alloc_bytes(tensor: TensorInfo, backend: BackendProfile) -> int:
    """Bytes `tensor` takes in a buffer of `backend`, padding and alignment included."""
    size = tensor.n_bytes
    ne0 = tensor.shape[0] if tensor.shape else 1
    if backend.row_padding and is_quantized(tensor.type_name) and ne0 % backend.row_padding:
        gtype = GGML_TYPES[tensor.ggml_type]
        size += gtype.row_bytes(backend.row_padding - ne0 % backend.row_padding)
    return -(-size // backend.alignment) * backend.alignment


@dataclass(frozen=True)
class LayerWeights:
    """One layer's weights as one backend stores them."""

    dense: int  # everything but the MoE expert tensors
    experts: int  # ffn_*_exps tensors
    largest_dense: int  # the largest single non-expert tensor
    largest_expert: int


@dataclass(frozen=True)
class KVLayer:
    has_kv: bool
    swa: bool
    k_width: int  # values per token (key length x KV heads; the latent for MLA)
    v_width: int  # 0 for MLA, where V is read from the K latent
    state_bytes: int = 0  # recurrent state (f32), per sequence


@dataclass(frozen=True)
class ModelProfile:
    info: ModelInfo
    kv_layers: tuple[KVLayer, ...]
    n_embd: int
    n_vocab: int
    q_dim: int
    n_head: int
    n_ff: int
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    head_dim_k: int
    head_dim_v: int
    swa_window: int
    known_architecture: bool
    norm_heavy: bool
    notes: tuple[str, ...] = ()
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    # -- identity ------------------------------------------------------------------------------

    @property
    def n_layer(self) -> int:
        return len(self.kv_layers)

    @property
    def source(self) -> str:
        return self.info.source

    @property
    def quant(self) -> str:
        return self.info.quant_name or "?"

    @property
    def n_ctx_train(self) -> int:
        return self.info.context_length or 4096

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 0

    @cached_property
    def bits_per_weight(self) -> float:
        params = max(1, self.info.parameter_count)
        return 8.0 * self.info.weight_bytes / params

    @cached_property
    def has_full_attention(self) -> bool:
        return any(layer.has_kv and not layer.swa for layer in self.kv_layers)

    @cached_property
    def has_swa_attention(self) -> bool:
        return any(layer.has_kv and layer.swa for layer in self.kv_layers)

    @cached_property
    def k_width_max(self) -> int:
        return max((layer.k_width for layer in self.kv_layers), default=0)

    @cached_property
    def v_width_max(self) -> int:
        return max((layer.v_width for layer in self.kv_layers), default=0)

    @cached_property
    def widest_row(self) -> int:
        return max(self.n_embd, self.n_ff, self.q_dim, self.n_ff_exp)

    @cached_property
    def classified(self) -> tuple[tuple[TensorInfo, int, str], ...]:
        """(tensor, layer or -1, kind) with kind one of input, first, output, dense, expert."""
        out = []
        for t in self.info.tensors:
            layer = t.layer
            if layer is not None:
                kind = "expert" if EXPERT_TENSOR.match(t.name) else "dense"
                out.append((t, layer, kind))
            elif t.name.startswith(INPUT_TENSORS):
                out.append((t, -1, "input"))
            elif t.name.startswith(FIRST_LAYER_TENSORS):
                out.append((t, -1, "first"))
            else:
                out.append((t, -1, "output"))
        return tuple(out)

    @cached_property
    def tied_embeddings(self) -> bool:
        names = {t.name for t in self.info.tensors}
        return "output.weight" not in names and "token_embd.weight" in names

    # -- weights per backend -------------------------------------------------------------------

    def layer_weights(self, backend: BackendProfile) -> tuple[LayerWeights, ...]:
        key = ("layers", backend.alignment, backend.row_padding)
        if key not in self._cache:
            self._cache[key] = _layer_weights(self.classified, self.n_layer, backend)
        return self._cache[key]

    def input_bytes(self, backend: BackendProfile) -> int:
        """Input-layer tensors (token embeddings): always in host memory."""
        return self._sum(backend, "input")

    def first_layer_extra_bytes(self, backend: BackendProfile) -> int:
        return self._sum(backend, "first")

    def output_bytes(self, backend: BackendProfile) -> int:
        """Output-layer tensors on the output layer's device, with the duplicated embedding
        of a tied model."""
        key = ("output", backend.alignment, backend.row_padding)
        if key not in self._cache:
            total = self._sum(backend, "output")
            if self.tied_embeddings:
                embd = self.info.tensor("token_embd.weight")
                assert embd is not None
                total += alloc_bytes(embd, backend)
            self._cache[key] = total
        return self._cache[key]

    def output_matrix_bytes(self, backend: BackendProfile) -> int:
        """The vocabulary projection alone (what a prompt batch copies when it runs the CPU's
        output layer on the GPU, and what each decoded token reads)."""
        key = ("output-matrix", backend.alignment, backend.row_padding)
        if key not in self._cache:
            name = "token_embd.weight" if self.tied_embeddings else "output.weight"
            tensor = self.info.tensor(name)
            self._cache[key] = alloc_bytes(tensor, backend) if tensor is not None else 0
        return self._cache[key]

    def _sum(self, backend: BackendProfile, kind: str) -> int:
        key = (kind, backend.alignment, backend.row_padding)
        if key not in self._cache:
            self._cache[key] = sum(
                alloc_bytes(t, backend) for t, _, k in self.classified if k == kind
            )
        return self._cache[key]


def _layer_weights(classified, n_layer: int, backend: BackendProfile):
    dense = [0] * n_layer
    experts = [0] * n_layer
    largest_dense = [0] * n_layer
    largest_expert = [0] * n_layer
    for t, il, kind in classified:
        if il < 0 or il >= n_layer:
            continue
        size = alloc_bytes(t, backend)
        if kind == "expert":
            experts[il] += size
            largest_expert[il] = max(largest_expert[il], size)
        else:
            dense[il] += size
            largest_dense[il] = max(largest_dense[il], size)
    return tuple(
        LayerWeights(dense[i], experts[i], largest_dense[i], largest_expert[i])
        for i in range(n_layer)
    )
