"""The llama.cpp boundary's own parameter types: what the binding needs to load a model, make a
context and build a sampler chain, in llama.cpp's terms.

The worker protocol is translated into these at the runtime's edge (engine/runtime/to_llama.py),
so a change of the wire format never reaches the binding, and a bump of llama-cpp-python touches
engine/llama/ only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSettings:
    """llama_model_params."""

    path: str
    n_gpu_layers: int = -1  # -1: every layer
    use_mmap: bool = True
    tensor_split: tuple[float, ...] = ()  # share of the layers per GPU; empty: llama.cpp's split
    cpu_tensors: tuple[str, ...] = ()  # regexes of tensors kept in host memory (MoE experts)
    vocab_only: bool = False  # the vocabulary and metadata only (the Hearth engine's tokenizer)
    # helper machines ("host:port" of `hearth host`), whose devices come first in tensor_split
    rpc_servers: tuple[str, ...] = ()
    load_mtp: bool = False  # also load the MTP (NextN) layers, for MTP drafting


@dataclass(frozen=True)
class ContextSettings:
    """llama_context_params."""

    n_ctx: int = 4096
    n_batch: int = 2048
    n_ubatch: int = 512
    n_threads: int = 0  # 0: a prompt on the physical cores, a decode on all but one
    flash_attn: str = "auto"  # "on", "off", "auto"
    type_k: str = "f16"
    type_v: str = "f16"
    swa_full: bool = True
    backend_sampling: bool = True  # sample in the graph; only the token comes back
    n_parallel: int = 1  # sequences in one unified KV cache of n_ctx cells (n_seq_max)
    embeddings: bool = False  # pooled sequence embeddings instead of logits (/v1/embeddings)
    # Rows of logits one llama_decode may return: a speculative step checks every drafted
    # token at once and needs each one's logits (n_outputs_max; 1 for plain decoding).
    n_outputs: int = 1


@dataclass(frozen=True)
class SamplerSettings:
    """llama.cpp's sampler chain, in its order: penalties, top-k, top-p, min-p, temperature."""

    temperature: float = 0.7  # <= 0: greedy
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    seed: int = 0xFFFFFFFF
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    grammar: str = ""  # GBNF; the reply must follow it (empty: free text)
    # The most one token's grammar check may take before the generation is ended (sampler.py).
    grammar_seconds: float = 20.0
