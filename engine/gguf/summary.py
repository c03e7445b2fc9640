"""ModelInfo for people (`summary_lines`) and for tools (`to_dict`, JSON-ready)."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from typing import TYPE_CHECKING, Any

from engine.gguf.values import GGUFArray
from engine.units import format_bytes

if TYPE_CHECKING:
    from engine.gguf.model_info import ModelInfo, PerLayer


def human_count(n: int) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.2f}{suffix}"
    return str(n)


def _per_layer(value: PerLayer | None) -> str:
    if value is None:
        return "?"
    if isinstance(value, tuple):
        low, high = min(value, default=0), max(value, default=0)
        return str(low) if low == high else f"{low}-{high} (varies by layer)"
    return str(value)


def summary_lines(info: ModelInfo) -> list[str]:
    title = info.name or "(unnamed model)"
    extra = ", ".join(x for x in (info.architecture, info.size_label) if x)
    lines = [f"{title} ({extra})" if extra else title]

    def add(label: str, text: str) -> None:
        lines.append(f"  {label + ':':<16}{text}")

    order = "little-endian" if info.byte_order == "little" else "big-endian"
    add("file", f"{info.source} (GGUF v{info.version}, {order}, {format_bytes(info.file_size)})")
    if info.is_split:
        add("split", f"part {(info.split_no or 0) + 1} of {info.split_count}")
    quant = info.quant_name or "unknown"
    if info.file_type is not None:
        quant += f" (file type {info.file_type})"
    add("quantization", quant)
    add("parameters", human_count(info.parameter_count))
    in_layers = format_bytes(sum(info.layer_weight_bytes))
    outside = format_bytes(info.nonlayer_weight_bytes)
    n_layers = len(info.layer_weight_bytes)
    add(
        "weights",
        f"{format_bytes(info.weight_bytes)} ({in_layers} in {n_layers} layers, {outside} outside)",
    )
    if info.context_length:
        add("context", f"{info.context_length} tokens")
    if info.block_count is not None:
        add(
            "blocks",
            f"{info.block_count}, embedding {info.embedding_length or '?'}, "
            f"feed-forward {_per_layer(info.feed_forward_length)}",
        )
    if info.head_count is not None:
        add(
            "attention",
            f"{_per_layer(info.head_count)} heads, {_per_layer(info.head_count_kv)} KV heads, "
            f"key/value length {info.key_length or '?'}/{info.value_length or '?'}",
        )
    window = info.sliding_window
    if window is not None:
        add(
            "sliding window",
            f"{window.size} tokens ({window.kind}) on {window.n_swa_layers} of "
            f"{len(window.layers)} layers; {window.rule}",
        )
    if info.expert_count:
        add("experts", f"{info.expert_count}, {_per_layer(info.expert_used_count)} used per token")
    if info.mla is not None:
        add("latent attn", f"KV rank {info.mla.kv_lora_rank}, Q rank {info.mla.q_lora_rank}")
    if info.recurrent is not None:
        fields = dataclasses.asdict(info.recurrent)
        add("recurrent", ", ".join(f"{k} {v}" for k, v in fields.items() if v is not None))
    if info.vocab_size is not None:
        tokenizer = " / ".join(x for x in (info.tokenizer_model, info.tokenizer_pre) if x)
        add("vocabulary", f"{info.vocab_size} tokens" + (f" ({tokenizer})" if tokenizer else ""))
    if info.bos_token_id is not None or info.eos_token_id is not None:
        add(
            "BOS / EOS",
            f"{_token(info.bos_token_id, info.bos_token)} / "
            f"{_token(info.eos_token_id, info.eos_token)}",
        )
    templates = "yes" if info.chat_template else "none in the file"
    if info.chat_templates:
        templates += f"; named: {', '.join(sorted(info.chat_templates))}"
    add("chat template", templates)
    counts = Counter(t.type_name for t in info.tensors)
    kinds = ", ".join(f"{name} x{n}" for name, n in counts.most_common())
    add("tensors", f"{len(info.tensors)}" + (f" ({kinds})" if kinds else ""))
    return lines


def _token(token_id: int | None, text: str | None) -> str:
    if token_id is None:
        return "-"
    return f"{token_id} {text!r}" if text is not None else str(token_id)


def _jsonable(value: Any) -> Any:
    if isinstance(value, GGUFArray):
        out: dict[str, Any] = {"type": value.element_type.name.lower(), "length": value.length}
        if value.values is not None:
            out["values"] = list(value.values)
        return out
    if isinstance(value, float) and not math.isfinite(value):  # not representable in JSON
        return None
    return value


def to_dict(info: ModelInfo, *, tensors: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(info):
        value = getattr(info, f.name)
        if f.name == "tensors":
            out["tensor_count"] = len(value)
            if tensors:
                out["tensors"] = [dataclasses.asdict(t) for t in value]
        elif f.name == "metadata":
            out["metadata"] = {k: _jsonable(v) for k, v in value.items()}
        elif dataclasses.is_dataclass(value):
            out[f.name] = dataclasses.asdict(value)
        elif isinstance(value, tuple):
            out[f.name] = list(value)
        else:
            out[f.name] = dict(value) if f.name == "chat_templates" else value
    out["weight_bytes"] = info.weight_bytes
    return out
