"""KL divergence and top-1 agreement of log-probabilities against a reference's, accumulated
chunk by chunk (numpy only): what the built-in KV check reports for llama.cpp's cache types
(kv_divergence.py) and the Hearth engine's formats (engine/hearth/kv_divergence.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Divergence:
    mean_kl: float
    same_top1: float
    positions: int


@dataclass
class DivergenceSum:
    """Running sums of one cache type's log-probabilities against the f16 cache's."""

    kl: list[float] = field(default_factory=list)
    same: list[bool] = field(default_factory=list)

    def add(self, logp: np.ndarray, base: np.ndarray) -> None:
        """logp, base: log-probabilities [positions, vocab] (float64)."""
        self.kl.extend((np.exp(base) * (base - logp)).sum(-1).tolist())
        self.same.extend((logp.argmax(-1) == base.argmax(-1)).tolist())

    def extend(self, kl: list[float], same: list[bool]) -> None:
        """Rows compared elsewhere (engine/hearth/kv_divergence.py, in torch where the logits
        are): each position's KL and whether its most likely token is the reference's."""
        self.kl.extend(kl)
        self.same.extend(same)

    def result(self) -> Divergence:
        n = len(self.kl)
        return Divergence(float(np.mean(self.kl)) if n else 0.0,
                          float(np.mean(self.same)) if n else 1.0, n)  # fmt: skip


def log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x -= x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))
