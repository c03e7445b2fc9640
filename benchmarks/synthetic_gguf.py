"""Write a GGUF with the shape of a real model, random weights and a real vocabulary.

Benchmarks of speed and memory need files of real sizes, and real weights cannot be downloaded
here. Speed and memory depend on the shapes and the quantization, not on the values, so random
weights (cut as views from one random pool, which keeps writing fast) behave like the real model's.
Quantize the F16 result with llama.cpp's `llama-quantize` to get Q4_K_M, Q8_0, ...

    python benchmarks/synthetic_gguf.py llama3-8b out-f16.gguf --vocab ggml-vocab-llama-bpe.gguf
    llama-quantize out-f16.gguf out-q4_k_m.gguf Q4_K_M

The vocabulary files ship in llama.cpp's source tree (vendor/llama.cpp/models/ in
llama-cpp-python's source distribution); they are trusted inputs, read with the gguf package.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np
from gguf import GGUFReader, GGUFWriter, LlamaFileType


@dataclass(frozen=True)
class DenseShape:
    name: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    n_ctx_train: int
    rope_base: float


SHAPES = {
    "llama3-8b": DenseShape("Llama-3-8B (synthetic)", 32, 4096, 14336, 32, 8, 8192, 500000.0),
    "llama3-tiny": DenseShape("Llama-3 tiny (synthetic)", 2, 256, 512, 4, 2, 8192, 500000.0),
}

LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
    "\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def copy_vocab(writer: GGUFWriter, vocab_path: str) -> int:
    reader = GGUFReader(vocab_path)
    fields = reader.fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    writer.add_tokenizer_model(fields["tokenizer.ggml.model"].contents())
    if "tokenizer.ggml.pre" in fields:
        writer.add_tokenizer_pre(fields["tokenizer.ggml.pre"].contents())
    writer.add_token_list(tokens)
    writer.add_token_types(fields["tokenizer.ggml.token_type"].contents())
    if "tokenizer.ggml.merges" in fields:
        writer.add_token_merges(fields["tokenizer.ggml.merges"].contents())
    writer.add_bos_token_id(fields["tokenizer.ggml.bos_token_id"].contents())
    writer.add_eos_token_id(fields["tokenizer.ggml.eos_token_id"].contents())
    return len(tokens)


def write_dense_llama(shape: DenseShape, vocab_path: str, out_path: str, seed: int = 0) -> None:
    writer = GGUFWriter(out_path, "llama")
    writer.add_name(shape.name)
    n_vocab = copy_vocab(writer, vocab_path)
    head_dim = shape.n_embd // shape.n_head
    writer.add_block_count(shape.n_layer)
    writer.add_context_length(shape.n_ctx_train)
    writer.add_embedding_length(shape.n_embd)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(shape.rope_base)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(LlamaFileType.MOSTLY_F16)
    writer.add_chat_template(LLAMA3_TEMPLATE)

    kv_dim = head_dim * shape.n_head_kv
    largest = max(n_vocab * shape.n_embd, shape.n_ff * shape.n_embd)
    rng = np.random.default_rng(seed)
    pool = (rng.standard_normal(largest + 4099, dtype=np.float32) * 0.02).astype(np.float16)
    offset = 0

    def weights(rows: int, cols: int) -> np.ndarray:
        nonlocal offset
        offset = (offset + 4093) % 4096  # a different window of the pool for each tensor
        return pool[offset : offset + rows * cols].reshape(rows, cols)

    ones = np.ones(shape.n_embd, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weights(n_vocab, shape.n_embd))
    for i in range(shape.n_layer):
        blk = f"blk.{i}."
        writer.add_tensor(blk + "attn_norm.weight", ones)
        writer.add_tensor(blk + "attn_q.weight", weights(shape.n_embd, shape.n_embd))
        writer.add_tensor(blk + "attn_k.weight", weights(kv_dim, shape.n_embd))
        writer.add_tensor(blk + "attn_v.weight", weights(kv_dim, shape.n_embd))
        writer.add_tensor(blk + "attn_output.weight", weights(shape.n_embd, shape.n_embd))
        writer.add_tensor(blk + "ffn_norm.weight", ones)
        writer.add_tensor(blk + "ffn_gate.weight", weights(shape.n_ff, shape.n_embd))
        writer.add_tensor(blk + "ffn_up.weight", weights(shape.n_ff, shape.n_embd))
        writer.add_tensor(blk + "ffn_down.weight", weights(shape.n_embd, shape.n_ff))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", weights(n_vocab, shape.n_embd))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("out", help="output .gguf (F16)")
    parser.add_argument("--vocab", required=True, help="a llama.cpp vocab GGUF to copy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    write_dense_llama(SHAPES[args.shape], args.vocab, args.out, args.seed)
    print(f"wrote {args.out} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
