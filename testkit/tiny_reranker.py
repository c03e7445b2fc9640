"""A reranker GGUF small enough to write in a test: llama.cpp's BERT architecture with pooling
type "rank" (a classification head, `cls` and `cls.output`), one layer of width 8, a word-piece
vocabulary of a few words, random weights; and its score computed here in numpy, to check the
engine's against.

The layer is chosen so that its score can be written down: the query and key weights are zero,
so attention is uniform over the input (every position's output is the mean of the values), and
the feed-forward down projection is zero, so the block adds only its bias. What is left is
layer norms, two matrix products and the head:

    x_j   = LN_embd(token_embd[t_j] + token_types[0] + position_embd[j])
    h     = LN_out(LN_attn(x_0 + W_o mean_j(W_v x_j + b_v) + b_o) + b_down)
    score = w_out . tanh(W_cls h + b_cls) + b_out

which depends on every token (through the mean) and is read at the first one ([CLS]), as
llama.cpp's rank pooling does. Inputs are built as llama-server builds a pair:
[CLS] query [SEP] document [SEP].
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, PoolingType

WORDS = ("the", "a", "cat", "dog", "sat", "ran", "on", "mat", "fast", "paris", "is", "big")
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD, UNK, CLS, SEP = 0, 1, 2, 3
N_EMBD, N_HEAD, N_FF, N_CTX = 8, 2, 16, 64
EPS = 1e-12


@dataclass(frozen=True)
class TinyReranker:
    path: Path
    weights: dict[str, np.ndarray]
    rerank_template: str = ""  # the GGUF's tokenizer.chat_template.rerank, if any

    def tokens(self, query: str, document: str) -> list[int]:
        if not self.rerank_template:
            return [CLS, *_word_ids(query), SEP, *_word_ids(document), SEP]
        text = self.rerank_template.replace("{query}", query).replace("{document}", document)
        return [SPECIAL.index(w) if w in SPECIAL else _word_ids(w)[0] for w in text.split()]

    def score(self, query: str, document: str) -> float:
        w = self.weights
        ids = self.tokens(query, document)
        x = w["token_embd.weight"][ids] + w["token_types.weight"][0]
        x = x + w["position_embd.weight"][: len(ids)]
        x = _norm(x, w["token_embd_norm.weight"], w["token_embd_norm.bias"])
        values = x @ w["blk.0.attn_v.weight"].T + w["blk.0.attn_v.bias"]
        attended = w["blk.0.attn_output.weight"] @ values.mean(axis=0) + w["blk.0.attn_output.bias"]
        h = _norm(x[0] + attended, w["blk.0.attn_output_norm.weight"],
                  w["blk.0.attn_output_norm.bias"])  # fmt: skip
        h = _norm(h + w["blk.0.ffn_down.bias"], w["blk.0.layer_output_norm.weight"],
                  w["blk.0.layer_output_norm.bias"])  # fmt: skip
        head = np.tanh(w["cls.weight"] @ h + w["cls.bias"])
        return float(w["cls.output.weight"][0] @ head + w["cls.output.bias"][0])


def write_tiny_reranker(path: Path, seed: int = 0, rerank_template: str = "") -> TinyReranker:
    """`rerank_template`: words and special tokens separated by spaces, with {query} and
    {document} (Qwen3-Reranker's GGUF carries such a template)."""
    rng = np.random.default_rng(seed)
    n_vocab = len(SPECIAL) + len(WORDS)

    def rand(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def zeros(*shape):
        return np.zeros(shape, np.float32)

    # numpy shapes are (out, in): llama.cpp's {in, out}.
    weights = {
        "token_embd.weight": rand(n_vocab, N_EMBD),
        "token_types.weight": rand(2, N_EMBD),
        "position_embd.weight": rand(N_CTX, N_EMBD, scale=0.5),
        "token_embd_norm.weight": 1 + rand(N_EMBD, scale=0.1),
        "token_embd_norm.bias": rand(N_EMBD, scale=0.1),
        "blk.0.attn_q.weight": zeros(N_EMBD, N_EMBD),
        "blk.0.attn_q.bias": zeros(N_EMBD),
        "blk.0.attn_k.weight": zeros(N_EMBD, N_EMBD),
        "blk.0.attn_k.bias": zeros(N_EMBD),
        "blk.0.attn_v.weight": rand(N_EMBD, N_EMBD, scale=0.5),
        "blk.0.attn_v.bias": rand(N_EMBD, scale=0.1),
        "blk.0.attn_output.weight": rand(N_EMBD, N_EMBD, scale=0.5),
        "blk.0.attn_output.bias": rand(N_EMBD, scale=0.1),
        "blk.0.attn_output_norm.weight": 1 + rand(N_EMBD, scale=0.1),
        "blk.0.attn_output_norm.bias": rand(N_EMBD, scale=0.1),
        "blk.0.ffn_up.weight": rand(N_FF, N_EMBD, scale=0.5),
        "blk.0.ffn_up.bias": rand(N_FF, scale=0.1),
        "blk.0.ffn_down.weight": zeros(N_EMBD, N_FF),
        "blk.0.ffn_down.bias": rand(N_EMBD, scale=0.1),
        "blk.0.layer_output_norm.weight": 1 + rand(N_EMBD, scale=0.1),
        "blk.0.layer_output_norm.bias": rand(N_EMBD, scale=0.1),
        "cls.weight": rand(N_EMBD, N_EMBD, scale=0.7),
        "cls.bias": rand(N_EMBD, scale=0.1),
        "cls.output.weight": rand(1, N_EMBD),
        "cls.output.bias": rand(1, scale=0.1),
    }
    writer = GGUFWriter(str(path), "bert")
    writer.add_name("tiny-reranker")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_feed_forward_length(N_FF)
    writer.add_block_count(1)
    writer.add_head_count(N_HEAD)
    writer.add_layer_norm_eps(EPS)
    writer.add_causal_attention(False)
    writer.add_pooling_type(PoolingType.RANK)
    writer.add_tokenizer_model("bert")
    writer.add_token_list([*SPECIAL, *("\u2581" + w for w in WORDS)])
    writer.add_token_types([3] * len(SPECIAL) + [1] * len(WORDS))  # control, normal
    writer.add_token_type_count(2)
    writer.add_bos_token_id(CLS)
    writer.add_eos_token_id(SEP)
    writer.add_sep_token_id(SEP)
    writer.add_pad_token_id(PAD)
    writer.add_unk_token_id(UNK)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    writer.add_add_sep_token(False)
    if rerank_template:
        writer.add_chat_template([{"name": "rerank", "template": rerank_template}])
    for name, array in weights.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return TinyReranker(path, weights, rerank_template)


def _word_ids(text: str) -> list[int]:
    return [len(SPECIAL) + WORDS.index(w) if w in WORDS else UNK for w in text.lower().split()]


def _norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * gamma + beta
