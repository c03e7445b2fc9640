"""How far each of the Hearth engine's KV formats moves a model's next-token distributions from
its f16 cache's: the Hearth half of the built-in KV check (engine/session/kv_quality.py).

    hearth_kv_divergence(path, tokens, [("q8", "q8"), ("rot4", "rot4")])
        -> {("f16", "f16"): Divergence(0.0, 1.0, n), ("q8", "q8"): Divergence(...), ...}

The engine's forward pass runs with plain torch (TorchOps) and the plain cache, and every K and V
row goes through the format's reference round trip (kernels/kv_formats.py: quantized, then
dequantized, exactly what the kernels' attention reads back) on its way into the cache. All
formats run in lockstep over one set of weights. kivi4 is not offered: its cache keeps the
newest page of K exact, which a row-by-row round trip cannot.

Where: on a GPU when torch has one with room for the check beside what runs there already
(`check_device`: the engine worker may hold most of it), the whole text in one prefill pass
per format; else on the CPU, in chunks of 128 tokens (a chunk's logits over the vocabulary are
the memory). The divergence of each position is computed where the logits are, in float32 (a
log-probability's rounding, about 2e-6 nats, is far below the 0.05 that hurts a model), against
the f16 cache's log-probabilities made once per chunk: in float64, and each format's comparison
making the reference's again, that was a third of the check on the CPU for Gemma 3 270M's
262,144-token vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.llama.divergence import Divergence, DivergenceSum

Pair = tuple[str, str]
F16: Pair = ("f16", "f16")
ROUND_TRIP_FORMATS = ("f16", "q8", "rot4", "rot2")
CPU_CHUNK = 128  # tokens per forward pass on the CPU
GPU_SPARE = 1024**3  # left free on the GPU beside the check


def _codec(fmt: str):
    import torch

    from kernels.kv_formats import reference_roundtrip

    def codec(rows: torch.Tensor) -> torch.Tensor:
        out = reference_roundtrip(fmt, rows.detach().float().cpu().numpy())
        return torch.from_numpy(out).to(rows.device)

    return codec


def check_bytes(info, n_tokens: int) -> int:
    """Device memory the check takes on a GPU: every weight dequantized to float32 beside its
    stored copy, and over the whole text four float32 arrays the size of its logits (the f16
    cache's log-probabilities, a format's logits, its log-probabilities, the comparison's)."""
    values = sum(t.n_elements for t in info.tensors)
    stored = sum(t.n_bytes for t in info.tensors)
    return 4 * values + stored + 4 * 4 * n_tokens * (info.vocab_size or 0)


def check_device(info, n_tokens: int) -> str:
    """ "cuda" where torch sees a GPU with check_bytes free and GPU_SPARE more, else "cpu"."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    try:
        free, _total = torch.cuda.mem_get_info()
    except RuntimeError:  # a driver that refuses a second process's context: the CPU
        return "cpu"
    return "cuda" if free >= check_bytes(info, n_tokens) + GPU_SPARE else "cpu"


def _compare(logp, base, into: DivergenceSum) -> None:
    """KL(p_base || p) and top-1 agreement of each row of log-probabilities [T, vocab]."""
    kl = (base.exp() * (base - logp)).sum(-1)
    same = logp.argmax(-1) == base.argmax(-1)
    into.extend(kl.tolist(), same.tolist())


def hearth_kv_divergence(
    path: str,
    tokens: Sequence[int],
    pairs: Sequence[Pair],
    *,
    chunk: int | None = None,
    threads: int = 0,
    device: str | None = None,
) -> dict[Pair, Divergence]:
    """`threads`: torch's CPU threads (0: torch's own choice); `device`: "cpu" or "cuda"
    (None: check_device); `chunk`: tokens per forward pass (None: the whole text on a GPU,
    CPU_CHUNK on the CPU)."""
    import torch

    if threads:
        torch.set_num_threads(threads)

    from engine.gguf import read_model_info
    from engine.hearth.config import model_config
    from engine.hearth.forward import Transformer
    from engine.hearth.kv_cache import TorchKVCache
    from engine.hearth.ops import TorchOps
    from engine.hearth.weights import GGUFTensors

    wanted = [F16, *[p for p in pairs if p != F16]]
    unknown = [f for pair in wanted for f in pair if f not in ROUND_TRIP_FORMATS]
    if unknown:
        raise ValueError(f"no round trip for the {unknown[0]} format in the KV check")
    info = read_model_info(path)
    config = model_config(info)
    device = device or check_device(info, len(tokens))
    chunk = chunk or (len(tokens) if device != "cpu" else CPU_CHUNK)
    tensors = GGUFTensors(path, info)
    try:
        model = Transformer.load(config, tensors, TorchOps(device))
        caches = {
            (k, v): TorchKVCache(
                n_layer=config.n_layer,
                n_head_kv=config.n_head_kv,
                head_dim=config.head_dim,
                n_ctx=len(tokens),
                device=device,
                dtype=torch.float32,  # the round trip already rounded
                k_codec=None if k == "f16" else _codec(k),
                v_codec=None if v == "f16" else _codec(v),
            )
            for k, v in wanted
        }
        sums = {pair: DivergenceSum() for pair in wanted}
        with torch.inference_mode():
            for start in range(0, len(tokens), chunk):
                ids = torch.tensor(list(tokens[start : start + chunk]), device=device)
                positions = torch.arange(start, start + len(ids), device=device)
                base = None
                for pair, cache in caches.items():
                    logits = model.forward(
                        ids, positions, cache, n_keys=start + len(ids), all_logits=True
                    )
                    logp = torch.log_softmax(logits.float(), dim=-1)
                    del logits
                    base = logp if base is None else base  # f16 comes first
                    _compare(logp, base, sums[pair])
        return {pair: s.result() for pair, s in sums.items()}
    finally:
        tensors.close()
