"""How far each of the Hearth engine's KV formats moves a model's next-token distributions from
its f16 cache's: the Hearth half of the built-in KV check (engine/session/kv_quality.py).

    hearth_kv_divergence(path, tokens, [("q8", "q8"), ("rot4", "rot4")])
        -> {("f16", "f16"): Divergence(0.0, 1.0, n), ("q8", "q8"): Divergence(...), ...}

The engine's forward pass runs on the CPU (TorchOps) with the plain cache, and every K and V
row goes through the format's reference round trip (kernels/kv_formats.py: quantized, then
dequantized, exactly what the kernels' attention reads back) on its way into the cache. All
formats run in lockstep, chunk by chunk, over one set of weights. kivi4 is not offered: its
cache keeps the newest page of K exact, which a row-by-row round trip cannot.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.llama.divergence import Divergence, DivergenceSum, log_softmax

Pair = tuple[str, str]
F16: Pair = ("f16", "f16")
ROUND_TRIP_FORMATS = ("f16", "q8", "rot4", "rot2")


def _codec(fmt: str):
    import torch

    from kernels.kv_formats import reference_roundtrip

    def codec(rows: torch.Tensor) -> torch.Tensor:
        out = reference_roundtrip(fmt, rows.detach().float().cpu().numpy())
        return torch.from_numpy(out).to(rows.device)

    return codec


def hearth_kv_divergence(
    path: str, tokens: Sequence[int], pairs: Sequence[Pair], *, chunk: int = 128, threads: int = 0
) -> dict[Pair, Divergence]:
    """`threads`: torch's CPU threads for the check (0: torch's own choice)."""
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
    tensors = GGUFTensors(path, info)
    try:
        model = Transformer.load(config, tensors, TorchOps("cpu"))
        caches = {
            (k, v): TorchKVCache(
                n_layer=config.n_layer,
                n_head_kv=config.n_head_kv,
                head_dim=config.head_dim,
                n_ctx=len(tokens),
                dtype=torch.float32,  # the round trip already rounded
                k_codec=None if k == "f16" else _codec(k),
                v_codec=None if v == "f16" else _codec(v),
            )
            for k, v in wanted
        }
        sums = {pair: DivergenceSum() for pair in wanted}
        with torch.inference_mode():
            for start in range(0, len(tokens), chunk):
                ids = list(tokens[start : start + chunk])
                positions = torch.arange(start, start + len(ids))
                base = None
                for pair, cache in caches.items():
                    logits = model.forward(
                        torch.tensor(ids), positions, cache, n_keys=start + len(ids),
                        all_logits=True,
                    )  # fmt: skip
                    logp = log_softmax(np.asarray(logits.float()))
                    base = logp if base is None else base  # f16 comes first
                    sums[pair].add(logp, base)
        return {pair: s.result() for pair, s in sums.items()}
    finally:
        tensors.close()
