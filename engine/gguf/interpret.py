"""Turn a parsed header into a ModelInfo: typed fields, llama.cpp's defaults, weight totals.

Key names and defaults follow src/llama-arch.cpp (LLM_KV_NAMES) and llama_model_base's
load_hparams() in src/llama-model.cpp: `head_count_kv` defaults to `head_count`, key and value
lengths to `embedding_length / head_count`, and per-layer keys may be one number or an array
with one entry per block. A value of the wrong type or an array of the wrong length is an error
here, as it is when llama.cpp loads the model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from engine.gguf.arch import sliding_window
from engine.gguf.errors import GGUFError
from engine.gguf.ggml_types import GGML_TYPES, file_type_name
from engine.gguf.header import RawHeader, quote
from engine.gguf.model_info import MLADims, ModelInfo, PerLayer, RecurrentDims
from engine.gguf.values import INTEGER_TYPES, GGUFArray, MetadataEntry, ValueType

MAX_LAYERS = 512  # src/llama-hparams.h: LLAMA_MAX_LAYERS
TOKEN_TEXT_LIMIT = 256  # bytes of a BOS/EOS token's text kept for display

TokenLookup = Callable[[str, int], str | None]


class _Metadata:
    """Typed reads of metadata values; a wrong type names the key and its offset."""

    def __init__(self, entries: dict[str, MetadataEntry]) -> None:
        self.entries = entries

    def fail(self, entry: MetadataEntry, detail: str) -> GGUFError:
        return GGUFError(f"metadata {quote(entry.key)}", entry.offset, detail)

    def string(self, key: str) -> str | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        if entry.value_type != ValueType.STRING:
            raise self.fail(entry, f"must be a string, not {entry.value_type.name}")
        assert isinstance(entry.value, str)
        return entry.value

    def uint(self, key: str) -> int | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        if entry.value_type not in INTEGER_TYPES:
            raise self.fail(entry, f"must be an integer, not {entry.value_type.name}")
        assert isinstance(entry.value, int)
        if entry.value < 0:
            raise self.fail(entry, f"{entry.value} is negative")
        return entry.value

    def uint_array(self, key: str, *, allow_bool: bool = False) -> tuple[int, ...] | None:
        entry = self.entries.get(key)
        if entry is None or not isinstance(entry.value, GGUFArray):
            return None
        array = entry.value
        ok_types = INTEGER_TYPES | ({ValueType.BOOL} if allow_bool else set())
        if array.element_type not in ok_types:
            raise self.fail(entry, f"must be an integer array, not {array.element_type.name}")
        if array.values is None:
            raise self.fail(entry, f"{array.length} elements is more than a layer count")
        values = tuple(int(v) for v in array.values)
        if any(v < 0 for v in values):
            raise self.fail(entry, "has a negative element")
        return values

    def per_layer(self, key: str, n_layer: int | None) -> PerLayer | None:
        """One number for all layers, or an array with one per layer (llama.cpp's
        get_key_or_arr)."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        if entry.value_type != ValueType.ARRAY:
            return self.uint(key)
        values = self.uint_array(key)
        assert values is not None
        if n_layer is not None and len(values) != n_layer:
            raise self.fail(
                entry, f"has {len(values)} elements, but the model has {n_layer} blocks"
            )
        return values

    def pattern(self, key: str) -> int | tuple[int, ...] | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        if entry.value_type == ValueType.ARRAY:
            return self.uint_array(key, allow_bool=True)
        return self.uint(key)


def _first_nonzero(value: PerLayer | None) -> int:
    if isinstance(value, tuple):
        return next((v for v in value if v), 0)
    return value or 0


def _layer_values(value: PerLayer | None, n_layer: int) -> tuple[int, ...]:
    if isinstance(value, tuple):
        return value
    return (value or 0,) * n_layer


def build_model_info(raw: RawHeader, source: str, token_text: TokenLookup) -> ModelInfo:
    meta = _Metadata(raw.metadata)
    arch = meta.string("general.architecture")
    prefix = f"{arch}." if arch else "\0"  # no architecture: no architecture keys

    block_count = meta.uint(prefix + "block_count")
    if block_count is not None and block_count > MAX_LAYERS:
        entry = raw.metadata[prefix + "block_count"]
        raise meta.fail(entry, f"{block_count} blocks is more than llama.cpp's {MAX_LAYERS}")
    embedding_length = meta.uint(prefix + "embedding_length")
    head_count = meta.per_layer(prefix + "attention.head_count", block_count)
    head_count_kv = meta.per_layer(prefix + "attention.head_count_kv", block_count)
    if head_count_kv is None:
        head_count_kv = head_count
    first_heads = _first_nonzero(head_count)
    default_head_dim = embedding_length // first_heads if embedding_length and first_heads else None
    key_length = meta.uint(prefix + "attention.key_length") or default_head_dim
    value_length = meta.uint(prefix + "attention.value_length") or default_head_dim

    layer_weight_bytes, nonlayer_weight_bytes = _weight_bytes(raw, block_count, arch)
    n_layer = block_count if block_count is not None else len(layer_weight_bytes)
    recurrent = _recurrent(meta, prefix)
    window = sliding_window(
        arch,
        n_layer,
        meta.uint(prefix + "attention.sliding_window"),
        meta.pattern(prefix + "attention.sliding_window_pattern"),
        _layer_values(head_count_kv, n_layer),
    )

    tokens = raw.metadata.get("tokenizer.ggml.tokens")
    if tokens is not None and isinstance(tokens.value, GGUFArray):
        vocab_size: int | None = tokens.value.length
    else:
        vocab_size = meta.uint(prefix + "vocab_size")
    bos_id = meta.uint("tokenizer.ggml.bos_token_id")
    eos_id = meta.uint("tokenizer.ggml.eos_token_id")

    file_type = meta.uint("general.file_type")
    return ModelInfo(
        source=source,
        version=raw.version,
        byte_order=raw.byte_order,
        alignment=raw.alignment,
        header_bytes=raw.header_end,
        data_offset=raw.data_offset,
        file_size=raw.file_size,
        metadata={key: entry.value for key, entry in raw.metadata.items()},
        architecture=arch,
        name=meta.string("general.name"),
        size_label=meta.string("general.size_label"),
        file_type=file_type,
        quant_name=file_type_name(file_type) if file_type is not None else _guess_quant(raw),
        parameter_count=sum(t.n_elements for t in raw.tensors),
        context_length=meta.uint(prefix + "context_length"),
        block_count=block_count,
        embedding_length=embedding_length,
        feed_forward_length=meta.per_layer(prefix + "feed_forward_length", block_count),
        head_count=head_count,
        head_count_kv=head_count_kv,
        key_length=key_length,
        value_length=value_length,
        key_length_swa=meta.uint(prefix + "attention.key_length_swa") or key_length,
        value_length_swa=meta.uint(prefix + "attention.value_length_swa") or value_length,
        sliding_window=window,
        expert_count=meta.uint(prefix + "expert_count"),
        expert_used_count=meta.per_layer(prefix + "expert_used_count", block_count),
        expert_shared_count=meta.uint(prefix + "expert_shared_count"),
        mla=_mla(meta, prefix),
        recurrent=recurrent,
        vocab_size=vocab_size,
        tokenizer_model=meta.string("tokenizer.ggml.model"),
        tokenizer_pre=meta.string("tokenizer.ggml.pre"),
        chat_template=meta.string("tokenizer.chat_template"),
        chat_templates=_named_templates(meta),
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        bos_token=_token(token_text, bos_id),
        eos_token=_token(token_text, eos_id),
        split_count=meta.uint("split.count"),
        split_no=meta.uint("split.no"),
        split_tensors_count=meta.uint("split.tensors.count"),
        tensors=raw.tensors,
        layer_weight_bytes=layer_weight_bytes,
        nonlayer_weight_bytes=nonlayer_weight_bytes,
    )


def _weight_bytes(
    raw: RawHeader, block_count: int | None, arch: str | None
) -> tuple[tuple[int, ...], int]:
    per_layer = [0] * (block_count or 0)
    nonlayer = 0
    for info in raw.tensors:
        layer = info.layer
        if layer is None:
            nonlayer += info.n_bytes
            continue
        if layer >= len(per_layer):
            where = f"tensor {quote(info.name)}"
            if block_count is not None:
                detail = f"belongs to block {layer}, but {arch}.block_count is {block_count}"
                raise GGUFError(where, info.header_offset, detail)
            if layer >= MAX_LAYERS:
                detail = f"belongs to block {layer}; llama.cpp supports at most {MAX_LAYERS}"
                raise GGUFError(where, info.header_offset, detail)
            per_layer.extend([0] * (layer + 1 - len(per_layer)))
        per_layer[layer] += info.n_bytes
    return tuple(per_layer), nonlayer


def _guess_quant(raw: RawHeader) -> str | None:
    """Like llama.cpp when general.file_type is missing: the type holding the most weights."""
    weights: Counter[int] = Counter()
    for info in raw.tensors:
        if len(info.shape) >= 2:
            weights[info.ggml_type] += info.n_bytes
    if not weights:
        return None
    return f"{GGML_TYPES[weights.most_common(1)[0][0]].name} (guessed)"


def _mla(meta: _Metadata, prefix: str) -> MLADims | None:
    kv_lora_rank = meta.uint(prefix + "attention.kv_lora_rank")
    if not kv_lora_rank:
        return None
    return MLADims(
        kv_lora_rank=kv_lora_rank,
        q_lora_rank=meta.uint(prefix + "attention.q_lora_rank"),
        key_length_mla=meta.uint(prefix + "attention.key_length_mla"),
        value_length_mla=meta.uint(prefix + "attention.value_length_mla"),
    )


def _recurrent(meta: _Metadata, prefix: str) -> RecurrentDims | None:
    dims = RecurrentDims(
        ssm_conv_kernel=meta.uint(prefix + "ssm.conv_kernel"),
        ssm_inner_size=meta.uint(prefix + "ssm.inner_size"),
        ssm_state_size=meta.uint(prefix + "ssm.state_size"),
        ssm_time_step_rank=meta.uint(prefix + "ssm.time_step_rank"),
        ssm_group_count=meta.uint(prefix + "ssm.group_count"),
        wkv_head_size=meta.uint(prefix + "wkv.head_size"),
        shortconv_l_cache=meta.uint(prefix + "shortconv.l_cache"),
    )
    return dims if dims != RecurrentDims() else None


def _named_templates(meta: _Metadata) -> dict[str, str]:
    named = {}
    for key in meta.entries:
        if key.startswith("tokenizer.chat_template."):
            template = meta.string(key)
            if template is not None:
                named[key.removeprefix("tokenizer.chat_template.")] = template
    return named


def _token(token_text: TokenLookup, token_id: int | None) -> str | None:
    if token_id is None:
        return None
    text = token_text("tokenizer.ggml.tokens", token_id)
    return text[:TOKEN_TEXT_LIMIT] if text is not None else None
