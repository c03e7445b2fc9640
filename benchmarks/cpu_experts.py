"""The CPU experts' decode rate (engine/hearth/cpu_experts.py): a Qwen3-30B-A3B-shaped layer's
routed experts (128 of 768 x 2048, top-8; gate and up Q4_K, down Q6_K, as Q4_K_M's "more bits"
layers store them) computed by ggml's CPU kernels over the mapped file, per token, at several
thread counts; the bytes a token reads and the rate that makes; and llama.cpp's own figure
beside it (--llama).

    python -m benchmarks.cpu_experts [--layers 4] [--threads 1,2,4] [--tokens 32] [--rounds 5]
        [--llama [--vocab GGUF]] [--poll N] [--device cuda] [--dir /tmp/cpu-experts]
        [--json PATH]

1. A file of --layers layers' experts (testkit/synthetic_moe.write_experts_gguf: random blocks,
   1.57 GB for 4 layers), written to --dir if missing, and read once into the page cache.
2. Ours, per thread count: every layer's CpuExperts on one GgmlCpu (--poll: its pool's polling
   level, ggml's default 50); a 128-token call per layer (every expert's pages touched) and 8
   decode steps to warm up. A round is --tokens decode steps, each running every layer on one
   token with 8 distinct experts drawn at random (an even router: no expert reused from the
   CPU's caches, which a layer's 392 MB dwarf), timed whole. Per layer-token: the time, the
   bytes the 8 experts take (24.5 MB), their rate in GB/s. Once: a decode call's own cost
   beside ggml's compute (run() with a CPU that computes nothing: checks and copies).
   --device cuda: the same steps again with x, ids and weights on the GPU and the sum copied
   back there (the engine seam, expert_offload.ExpertsOnCpu: "hearth_from_cuda"); the
   difference is the host round trip a layer computed on the CPU costs a GPU step.
3. --llama: llama.cpp (llama-cpp-python's Llama, n_gpu_layers=0, the same thread counts) on two
   whole Qwen3-30B-A3B-shaped Q4_K_M files of random blocks (benchmarks/hearth_speed_files.py,
   the starter model's vocabulary) of 2 and 6 layers, each loaded once: 64 prompt tokens and 8
   decode steps to warm up; a round is --tokens decode steps of random tokens (llama-bench's
   tg). The difference of the two files' per-token times over 4 layers is llama.cpp's time a
   layer (its experts, attention and router; the embedding and output cancel); its bytes a
   layer are the 6-layer file's layers' attention, router and norm weights and 8 experts' less
   the 2-layer file's (their own tensor types: Q4_K_M gives some layers Q6_K ffn_down), over 4.
   Ours again on the 6-layer file's layers ("hearth_on_llama_file"): the same expert bytes
   llama.cpp reads; and with them repacked as llama.cpp repacks them ("hearth_repacked":
   CpuExperts(repack=True), Q4_K as q4_K_8x8 where the CPU has AVX2). --vocab: the files'
   tokenizer (default: the starter model's).
4. --rounds rounds, each ours then llama.cpp's two files, per thread count: on a shared machine
   the rounds see different loads; the figure is the best round (the median beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine.hearth.cpu_experts import CpuExperts, gguf_experts
from engine.hearth.ggml_cpu import GgmlCpu
from testkit.synthetic_gguf import SHAPES
from testkit.synthetic_moe import write_experts_gguf

QWEN3 = SHAPES["qwen3-30b-a3b"]
TYPES = {"gate": "Q4_K", "up": "Q4_K", "down": "Q6_K"}
K = QWEN3.n_expert_used
LLAMA_LAYERS = (2, 6)


def experts_file(folder: Path, n_layer: int) -> Path:
    path = folder / f"qwen3-30b-a3b-experts-{n_layer}.gguf"
    if not path.exists():
        started = time.perf_counter()
        write_experts_gguf(path.with_suffix(".tmp"), QWEN3, n_layer, TYPES)
        path.with_suffix(".tmp").rename(path)
        print(f"wrote {path} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    with open(path, "rb") as f:  # into the page cache: the runs then read RAM, not the disk
        while f.read(1 << 24):
            pass
    return path


def decode_steps(layers, n_tokens: int, rng, device: str | None = None) -> float:
    """Seconds for n_tokens decode steps over every layer (module docstring, step 2). With a
    torch `device`, each call starts from x, ids and weights on it and ends with the sum
    back there: the engine seam's ExpertsOnCpu.run, host copies and synchronisations
    included."""
    x = rng.standard_normal((1, QWEN3.n_embd)).astype(np.float32) * 0.02
    weights = np.full((1, K), 1.0 / K, np.float32)
    routes = [
        [np.array([rng.choice(QWEN3.n_expert, K, replace=False)]) for _ in layers]
        for _ in range(n_tokens)
    ]
    sync = None
    if device is not None:
        import torch

        from engine.hearth.expert_offload import ExpertsOnCpu

        layers = [ExpertsOnCpu(layer) for layer in layers]
        x, weights = torch.from_numpy(x).to(device), torch.from_numpy(weights).to(device)
        routes = [[torch.from_numpy(ids).to(device) for ids in step] for step in routes]
        sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else None
    if sync:
        sync()
    started = time.perf_counter()
    for step in routes:
        for layer, ids in zip(layers, step, strict=True):
            layer.run(x, ids, weights)
    if sync:
        sync()
    return time.perf_counter() - started


class _NoCompute:
    """A GgmlCpu that computes nothing: what is left of a run() is its own cost."""

    def __init__(self):
        self.lock = threading.RLock()

    def compute(self, graph: int) -> None:
        pass


def setup_seconds(path: Path, rng, n_calls: int = 2000) -> float:
    """A decode call's cost beside ggml's compute: checks, the inputs' and output's copies."""
    layer = CpuExperts(*gguf_experts(path, 0), activation="silu", cpu=_NoCompute())
    x = rng.standard_normal((1, QWEN3.n_embd)).astype(np.float32)
    ids = np.array([rng.choice(QWEN3.n_expert, K, replace=False)])
    weights = np.full((1, K), 1.0 / K, np.float32)
    layer.run(x, ids, weights)
    started = time.perf_counter()
    for _ in range(n_calls):
        layer.run(x, ids, weights)
    seconds = (time.perf_counter() - started) / n_calls
    layer.close()
    return seconds


class HearthRun:
    """Every layer's CpuExperts on one GgmlCpu of `threads`, warmed up (module docstring)."""

    def __init__(self, path: Path, n_layer: int, threads: int, poll: int | None, repack=False):
        self.cpu = GgmlCpu(threads, poll)
        self.layers = [
            CpuExperts(*gguf_experts(path, i), activation="silu", cpu=self.cpu, repack=repack)
            for i in range(n_layer)
        ]
        self.bytes_per_layer_token = K * statistics.mean(x.expert_nbytes for x in self.layers)
        self.rng = np.random.default_rng(threads)
        every = np.arange(128 * K).reshape(128, K) % QWEN3.n_expert
        for layer in self.layers:
            x = np.zeros((128, QWEN3.n_embd), np.float32)
            layer.run(x, every, np.ones((128, K), np.float32))
        decode_steps(self.layers, 8, self.rng)

    def layer_seconds(self, n_tokens: int, device: str | None = None) -> float:
        """Seconds a layer-token, over n_tokens decode steps (from `device`: decode_steps)."""
        seconds = decode_steps(self.layers, n_tokens, self.rng, device)
        return seconds / (n_tokens * len(self.layers))

    def close(self) -> None:
        for layer in self.layers:
            layer.close()
        self.cpu.close()


def layer_bytes_per_token(path: Path, layer: int) -> int:
    """What llama.cpp's decode reads of one layer per token: its attention and router weights
    and norms whole, 8 of 128 experts."""
    from engine.gguf import read_model_info

    total = 0
    for t in read_model_info(path).tensors:
        if t.layer != layer:
            continue
        share = K / QWEN3.n_expert if "_exps." in t.name else 1.0
        total += int(t.n_bytes * share)
    return total


def llama_files(folder: Path, vocab: str | None) -> dict[int, Path]:
    from benchmarks.hearth_speed_files import write_random_quantized
    from engine.starter_model import starter_model_path

    vocab = vocab or starter_model_path()
    if vocab is None:
        raise SystemExit("--llama needs --vocab (any GGUF with a tokenizer) or the starter model")
    files = {}
    for n in LLAMA_LAYERS:
        path = folder / f"qwen3-30b-a3b-random-{n}-layers-q4_k_m.gguf"
        if not path.exists():
            seconds = write_random_quantized(
                str(path), replace(QWEN3, n_layer=n), "Q4_K_M", str(vocab)
            )
            print(f"wrote {path} in {seconds:.0f} s", file=sys.stderr)
        files[n] = path
    return files


class LlamaRun:
    """llama.cpp on one file: loaded with `threads`, 64 prompt tokens evaluated (which touches
    most experts' pages), 8 decode steps to warm up."""

    def __init__(self, path: Path, threads: int):
        from llama_cpp import Llama

        self.llm = Llama(
            str(path), n_gpu_layers=0, n_threads=threads, n_threads_batch=threads, n_ctx=1024,
            n_batch=64, verbose=False,
        )  # fmt: skip
        self.rng = random.Random(threads)
        self.llm.eval([self.rng.randrange(self.llm.n_vocab()) for _ in range(64)])
        self.token_seconds(8)

    def token_seconds(self, n_tokens: int) -> float:
        """Seconds a decode step of a random token (llama-bench's tg), over n_tokens."""
        vocab = self.llm.n_vocab()
        started = time.perf_counter()
        for _ in range(n_tokens):
            self.llm.eval([self.rng.randrange(vocab)])
        return (time.perf_counter() - started) / n_tokens

    def close(self) -> None:
        self.llm.close()


def measure(path: Path, n_layer: int, threads: int, args, llama: dict[int, Path] | None) -> dict:
    """args.rounds rounds, each timing our layers of `path`, then (with `llama`) ours on the
    layers of llama.cpp's 6-layer file (the same bytes it reads) and llama.cpp on its two
    files: on a shared machine the rounds see different loads, and the best of each is the
    figure (the median beside it)."""
    few, many = LLAMA_LAYERS
    runs = {"experts": HearthRun(path, n_layer, threads, args.poll)}
    # each timed row: (its run, where its inputs start)
    ours = {"hearth": (runs["experts"], None)}
    if args.device:
        ours[f"hearth_from_{args.device}"] = (runs["experts"], args.device)
    llamas = {}
    if llama:
        runs["mapped"] = HearthRun(llama[many], many, threads, args.poll)
        runs["repacked"] = HearthRun(llama[many], many, threads, args.poll, repack=True)
        ours["hearth_on_llama_file"] = (runs["mapped"], None)
        ours["hearth_repacked"] = (runs["repacked"], None)
        llamas = {n: LlamaRun(p, threads) for n, p in llama.items()}
    times: dict[str, list[float]] = {**{k: [] for k in ours}, **{str(n): [] for n in llamas}}
    for _ in range(args.rounds):
        for name, (run, device) in ours.items():
            times[name].append(run.layer_seconds(args.tokens, device))
        for n, run in llamas.items():
            times[str(n)].append(run.token_seconds(args.tokens))
    row = {"threads": threads, "rounds_us": {k: [t * 1e6 for t in v] for k, v in times.items()}}
    for name, (run, _) in ours.items():
        row[name] = rates(min(times[name]), statistics.median(times[name]),
                          run.bytes_per_layer_token)  # fmt: skip
    for run in runs.values():
        run.close()
    for run in llamas.values():
        run.close()
    if llamas:
        marginal = sum(layer_bytes_per_token(llama[many], i) for i in range(many))
        marginal -= sum(layer_bytes_per_token(llama[few], i) for i in range(few))
        best = (min(times[str(many)]) - min(times[str(few)])) / (many - few)
        median = statistics.median(times[str(many)]) - statistics.median(times[str(few)])
        row["llama"] = rates(best, median / (many - few), marginal / (many - few))
    return row


def rates(best: float, median: float, nbytes: float) -> dict:
    return {
        "us_per_layer_token": best * 1e6,
        "median_us_per_layer_token": median * 1e6,
        "bytes_per_layer_token": nbytes,
        "gbps": nbytes / best / 1e9,
        "median_gbps": nbytes / median / 1e9 if median > 0 else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--threads", default="1,2,4")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--poll",
        type=int,
        help="the thread pool's polling level (0-100; no effect where ggml computes with OpenMP)",
    )
    parser.add_argument("--device", help="also time calls from and back to this torch device")
    parser.add_argument("--llama", action="store_true", help="llama.cpp's figure beside ours")
    parser.add_argument("--vocab", help="--llama: a GGUF whose tokenizer the files take")
    parser.add_argument("--dir", default="/tmp/cpu-experts")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args(argv)
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    threads = [int(t) for t in args.threads.split(",")]
    result: dict = {"cpus": os.cpu_count(), "layers": args.layers, "tokens": args.tokens}
    path = experts_file(folder, args.layers)
    llama = llama_files(folder, args.vocab) if args.llama else None
    result["call_setup_us"] = setup_seconds(path, np.random.default_rng(0)) * 1e6
    print(f"a decode call's own cost beside ggml's compute: {result['call_setup_us']:.0f} us")
    result["rows"] = []
    for n in threads:
        row = measure(path, args.layers, n, args, llama)
        result["rows"].append(row)
        for engine in [name for name in row if name.startswith("hearth")] + ["llama"]:
            if engine in row:
                r = row[engine]
                print(
                    f"{engine:20} {n:2} threads: {r['us_per_layer_token']:7.0f} us a layer-token "
                    f"(median {r['median_us_per_layer_token']:7.0f}), "
                    f"{r['bytes_per_layer_token'] / 1e6:.1f} MB, {r['gbps']:5.2f} GB/s"
                )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
