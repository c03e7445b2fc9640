"""What a GGUF header says about a model, typed: `ModelInfo` and its `TensorInfo`s.

Built by engine.gguf.interpret from a parsed header. Fields are None where the file does not
say (and llama.cpp has no default). Per-layer quantities (head counts, feed-forward length,
experts used) are an int when the file stores one value for every layer and a tuple when it
stores one per layer; use the accessors (`n_head_kv(layer)`, ...) to not care which.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.gguf.values import MetadataValue

_LAYER_NAME = re.compile(r"blk\.(\d{1,9})\.")

PerLayer = int | tuple[int, ...]


def _at(value: PerLayer | None, layer: int, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, tuple):
        return value[layer]
    return value


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    ggml_type: int
    type_name: str
    shape: tuple[int, ...]  # ggml order: shape[0] is the row length
    n_elements: int
    n_bytes: int
    offset: int  # from the start of the tensor data section
    header_offset: int  # where this tensor's info starts in the file

    @property
    def layer(self) -> int | None:
        """The block (layer) index for `blk.N.*` tensors, None for the others."""
        match = _LAYER_NAME.match(self.name)
        return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class SlidingWindow:
    """Sliding-window attention: which layers attend only to the last `size` tokens."""

    kind: str  # "standard", "chunked" (llama4) or "symmetric" (encoders)
    size: int  # tokens
    layers: tuple[bool, ...]  # per layer: True where the layer uses the window
    rule: str  # how the layers were decided, for people reading `hearth info`

    @property
    def n_swa_layers(self) -> int:
        return sum(self.layers)


@dataclass(frozen=True, slots=True)
class MLADims:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi, ...): the KV cache holds a latent."""

    kv_lora_rank: int
    q_lora_rank: int | None
    key_length_mla: int | None
    value_length_mla: int | None


@dataclass(frozen=True, slots=True)
class RecurrentDims:
    """State sizes of recurrent layers (Mamba SSM, RWKV, LFM2 short convolutions)."""

    ssm_conv_kernel: int | None = None
    ssm_inner_size: int | None = None
    ssm_state_size: int | None = None
    ssm_time_step_rank: int | None = None
    ssm_group_count: int | None = None
    wkv_head_size: int | None = None
    shortconv_l_cache: int | None = None


@dataclass(frozen=True, slots=True)
class ModelInfo:
    source: str
    version: int
    byte_order: str
    alignment: int
    header_bytes: int  # bytes a reader needs to fetch to see the whole header
    data_offset: int
    file_size: int
    metadata: Mapping[str, MetadataValue]  # long arrays kept as GGUFArray without values

    architecture: str | None = None
    name: str | None = None
    size_label: str | None = None
    file_type: int | None = None
    quant_name: str | None = None
    parameter_count: int = 0

    context_length: int | None = None
    block_count: int | None = None
    embedding_length: int | None = None
    feed_forward_length: PerLayer | None = None
    head_count: PerLayer | None = None
    head_count_kv: PerLayer | None = None
    key_length: int | None = None
    value_length: int | None = None
    key_length_swa: int | None = None
    value_length_swa: int | None = None
    sliding_window: SlidingWindow | None = None
    expert_count: int | None = None
    expert_used_count: PerLayer | None = None
    expert_shared_count: int | None = None
    mla: MLADims | None = None
    recurrent: RecurrentDims | None = None

    vocab_size: int | None = None
    tokenizer_model: str | None = None
    tokenizer_pre: str | None = None
    chat_template: str | None = None
    chat_templates: Mapping[str, str] = field(default_factory=dict)  # named extra templates
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    bos_token: str | None = None
    eos_token: str | None = None

    split_count: int | None = None
    split_no: int | None = None
    split_tensors_count: int | None = None

    tensors: tuple[TensorInfo, ...] = ()
    layer_weight_bytes: tuple[int, ...] = ()
    nonlayer_weight_bytes: int = 0

    # -- per-layer accessors ----------------------------------------------------------------

    @property
    def n_layer(self) -> int:
        return self.block_count or len(self.layer_weight_bytes)

    def n_head(self, layer: int = 0) -> int:
        return _at(self.head_count, layer)

    def n_head_kv(self, layer: int = 0) -> int:
        return _at(self.head_count_kv, layer)

    def n_ff(self, layer: int = 0) -> int:
        return _at(self.feed_forward_length, layer)

    def n_expert_used(self, layer: int = 0) -> int:
        return _at(self.expert_used_count, layer)

    def is_swa_layer(self, layer: int) -> bool:
        window = self.sliding_window
        return window is not None and 0 <= layer < len(window.layers) and window.layers[layer]

    def is_recurrent_layer(self, layer: int) -> bool:
        """A layer with no KV heads in a model that has recurrent state (hybrids, RWKV, Mamba)."""
        return self.recurrent is not None and self.n_head_kv(layer) == 0

    def key_length_at(self, layer: int) -> int | None:
        return self.key_length_swa if self.is_swa_layer(layer) else self.key_length

    def value_length_at(self, layer: int) -> int | None:
        return self.value_length_swa if self.is_swa_layer(layer) else self.value_length

    # -- weights ----------------------------------------------------------------------------

    @property
    def weight_bytes(self) -> int:
        return sum(self.layer_weight_bytes) + self.nonlayer_weight_bytes

    def tensor(self, name: str) -> TensorInfo | None:
        for info in self.tensors:
            if info.name == name:
                return info
        return None

    @property
    def is_split(self) -> bool:
        return (self.split_count or 0) > 1
