"""How long Hearth's GGUF reader takes on the header of a model with a 128k-entry vocabulary.

Writes (with the `gguf` package) a Llama-3-8B-shaped header: 291 tensor infos, the usual
metadata, and a 128,256-token vocabulary with its merges. The vocabulary is copied from
llama.cpp's ggml-vocab-llama-bpe.gguf when that file is here (it ships in llama-cpp-python's
source distribution), and generated otherwise. The weights are not written: the file is
extended to its full size as a sparse file, so the reader's "data inside the file" check sees a
real size without gigabytes on disk.

    .venv/bin/python benchmarks/bench_gguf_header.py [--vocab PATH] [--repeat N]

Target: under 200 ms per header.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.gguf import read_model_info
from engine.gguf.ggml_types import GGML_TYPES

DEFAULT_VOCAB = Path(
    "/tmp/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf"
)
TARGET_MS = 200.0
N_LAYER, N_EMBD, N_FF, N_HEAD, N_HEAD_KV, N_VOCAB = 32, 4096, 14336, 32, 8, 128_256


def add_vocabulary(w: GGUFWriter, vocab: Path | None) -> str:
    if vocab is not None and vocab.is_file():
        fields = GGUFReader(vocab).fields  # a trusted file from llama.cpp's own source tree
        w.add_tokenizer_model(fields["tokenizer.ggml.model"].contents())
        w.add_tokenizer_pre(fields["tokenizer.ggml.pre"].contents())
        w.add_token_list(fields["tokenizer.ggml.tokens"].contents())
        w.add_token_types(fields["tokenizer.ggml.token_type"].contents())
        w.add_token_merges(fields["tokenizer.ggml.merges"].contents())
        w.add_bos_token_id(fields["tokenizer.ggml.bos_token_id"].contents())
        w.add_eos_token_id(fields["tokenizer.ggml.eos_token_id"].contents())
        return f"copied from {vocab.name}"
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"tok{i}" for i in range(N_VOCAB)])
    w.add_token_types([1] * N_VOCAB)
    w.add_token_merges([f"m{i} n{i}" for i in range(280_147)])
    w.add_bos_token_id(128_000)
    w.add_eos_token_id(128_001)
    return "synthetic (tok0..tok128255, 280,147 merges)"


def tensor_plan() -> list[tuple[str, tuple[int, ...], GGMLQuantizationType]]:
    q4k, q6k, f32 = GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q6_K, GGMLQuantizationType.F32
    kv = N_EMBD // N_HEAD * N_HEAD_KV
    plan = [("token_embd.weight", (N_EMBD, N_VOCAB), q4k)]
    for i in range(N_LAYER):
        plan += [
            (f"blk.{i}.attn_norm.weight", (N_EMBD,), f32),
            (f"blk.{i}.attn_q.weight", (N_EMBD, N_EMBD), q4k),
            (f"blk.{i}.attn_k.weight", (N_EMBD, kv), q4k),
            (f"blk.{i}.attn_v.weight", (N_EMBD, kv), q6k),
            (f"blk.{i}.attn_output.weight", (N_EMBD, N_EMBD), q4k),
            (f"blk.{i}.ffn_norm.weight", (N_EMBD,), f32),
            (f"blk.{i}.ffn_gate.weight", (N_EMBD, N_FF), q4k),
            (f"blk.{i}.ffn_up.weight", (N_EMBD, N_FF), q4k),
            (f"blk.{i}.ffn_down.weight", (N_FF, N_EMBD), q6k),
        ]
    plan += [("output_norm.weight", (N_EMBD,), f32), ("output.weight", (N_EMBD, N_VOCAB), q6k)]
    return plan


def write_header(path: Path, vocab: Path | None) -> str:
    w = GGUFWriter(path, "llama")
    w.add_name("Llama-3-8B shaped header (benchmark)")
    w.add_block_count(N_LAYER)
    w.add_context_length(8192)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_freq_base(500000.0)
    w.add_file_type(15)
    vocab_note = add_vocabulary(w, vocab)
    data_bytes = 0
    for name, shape, qtype in tensor_plan():
        gt = GGML_TYPES[int(qtype)]
        n_bytes = int(np.prod(shape)) // gt.block_size * gt.type_size
        # gguf wants numpy order (rows last) for the shape of a raw tensor
        w.add_tensor_info(name, tuple(reversed(shape)), np.dtype(np.float32), n_bytes, qtype)
        data_bytes += -(-n_bytes // 32) * 32
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    header_end = path.stat().st_size
    os.truncate(path, -(-header_end // 32) * 32 + data_bytes)  # sparse: no weights on disk
    return vocab_note


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=Path, default=DEFAULT_VOCAB)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as tmp:
        path = Path(tmp) / "llama3-8b-header.gguf"
        vocab_note = write_header(path, args.vocab)
        info = read_model_info(path)  # warm-up, and the page cache
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            read_model_info(path)
            times.append((time.perf_counter() - started) * 1000)
        tracemalloc.start()
        read_model_info(path)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()

    median = statistics.median(times)
    print(
        f"header: {info.header_bytes / 2**20:.2f} MiB, {len(info.tensors)} tensor infos, "
        f"{len(info.metadata)} keys; vocabulary {info.vocab_size} tokens ({vocab_note}), "
        f"{info.metadata['tokenizer.ggml.merges'].length} merges"
    )
    print(f"model: {info.name}, {info.quant_name}, {info.weight_bytes / 2**30:.2f} GiB of weights")
    print(
        f"parse time over {args.repeat} runs: min {min(times):.1f} ms, "
        f"median {median:.1f} ms, max {max(times):.1f} ms"
    )
    print(f"peak traced memory while parsing: {peak / 2**20:.1f} MiB")
    verdict = "PASS" if median < TARGET_MS else "FAIL"
    print(f"{verdict}: median {median:.1f} ms against the {TARGET_MS:.0f} ms target")
    return 0 if median < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
