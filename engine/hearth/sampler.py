"""llama.cpp's sampler chain in torch: penalties, top-k, top-p, min-p, temperature, then a draw.

The same settings mean the same thing on both engines (SamplingParams, engine/runtime/
protocol.py), following src/llama-sampler.cpp:
- repeat penalty over the last `repeat_last_n` tokens generated in this reply (llama.cpp's chain
  only sees the tokens it picked): a logit l of such a token becomes l / penalty if l > 0, else
  l * penalty;
- temperature <= 0: the first token with the highest logit (greedy), nothing else applies;
- top-k keeps the k highest logits; top-p, on the softmax of what is left, keeps the most likely
  tokens until their sum first reaches p; min-p keeps tokens whose probability is at least
  min_p times the best one's; all three at temperature 1, since the temperature comes after them;
- the draw is from softmax(logits / temperature), with a generator seeded by `seed` at every
  reset (each reply starts from the seed, as llama.cpp's dist sampler does), or by a fresh random
  seed when `seed` is LLAMA_DEFAULT_SEED.

The candidates are never shrunk: filtered-out tokens get -inf, so every step has the shape of
the vocabulary and the work stays on the logits' device; only the chosen token id comes back.
The random streams differ from llama.cpp's (std::mt19937 there), so a seeded reply is
reproducible on this engine but not token-for-token equal to llama.cpp's.
"""

from __future__ import annotations

import math
import random
from collections import deque
from typing import Protocol

import torch

DEFAULT_SEED = 0xFFFFFFFF  # LLAMA_DEFAULT_SEED: a random seed per reply


class SamplingParams(Protocol):
    """The fields of engine.runtime.protocol.SamplingParams this sampler reads (this package
    sits below engine.runtime and does not import it)."""

    temperature: float
    top_k: int
    top_p: float
    min_p: float
    repeat_penalty: float
    repeat_last_n: int
    seed: int


class TorchSampler:
    def __init__(self, params: SamplingParams, device: torch.device | str = "cpu"):
        self.params = params
        self.device = torch.device(device)
        self._history: deque[int] = deque(maxlen=max(params.repeat_last_n, 0) or None)
        self._generator = torch.Generator(device=self.device)
        self.reset()

    @property
    def penalizes(self) -> bool:
        return self.params.repeat_penalty != 1.0 and self.params.repeat_last_n > 0

    def reset(self) -> None:
        """A new reply: no penalty history, the generator back at the seed."""
        self._history.clear()
        seed = self.params.seed & 0xFFFFFFFF
        if seed == DEFAULT_SEED:
            seed = random.SystemRandom().getrandbits(32)
        self._generator.manual_seed(seed)

    @property
    def plain_greedy(self) -> bool:
        """Greedy with no repeat penalty: the pick is the logits' argmax, whatever came before."""
        return self.params.temperature <= 0 and not self.penalizes

    def accept(self, token: int) -> None:
        """Record a generated token for the repeat penalty."""
        if self.penalizes:
            self._history.append(token)

    def filtered_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """The chain up to the draw: logits / temperature, -inf where a filter removed a token.
        With temperature <= 0, only the greedy token keeps its logit."""
        sp = self.params
        logits = logits.float().clone()
        if self.penalizes and self._history:
            ids = torch.tensor(sorted(set(self._history)), device=logits.device)
            picked = logits[ids]
            logits[ids] = torch.where(
                picked <= 0, picked * sp.repeat_penalty, picked / sp.repeat_penalty
            )
        if sp.temperature <= 0:
            best = torch.argmax(logits)
            out = torch.full_like(logits, -math.inf)
            out[best] = logits[best]
            return out
        keep = torch.ones_like(logits, dtype=torch.bool)
        if 0 < sp.top_k < logits.numel():
            keep = torch.zeros_like(keep)
            keep[torch.topk(logits, sp.top_k).indices] = True
        if 0 < sp.top_p < 1:
            keep &= _top_p_mask(logits.masked_fill(~keep, -math.inf), sp.top_p)
        if sp.min_p > 0:
            best = logits.masked_fill(~keep, -math.inf).max()
            keep &= logits >= best + math.log(sp.min_p)
        return (logits / sp.temperature).masked_fill(~keep, -math.inf)

    def sample(self, logits: torch.Tensor, greedy: int | None = None) -> int:
        """Pick the next token from a row of logits and record it. `greedy`: the logits'
        argmax already computed (inside the decode step's CUDA graph), used when the settings
        are greedy."""
        if self.params.temperature <= 0 and not (self.penalizes and self._history):
            token = int(greedy if greedy is not None else torch.argmax(logits))
        else:
            filtered = self.filtered_logits(logits)
            if self.params.temperature <= 0:
                token = int(torch.argmax(filtered))
            else:
                probs = torch.softmax(filtered, dim=-1)
                token = int(torch.multinomial(probs, 1, generator=self._generator))
        self.accept(token)
        return token


def _top_p_mask(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the most likely tokens until their probabilities first sum to at least p."""
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, descending=True, stable=True)
    running = torch.cumsum(sorted_probs, dim=-1)
    # keep a token while the better ones sum to less than p; the first always (min_keep = 1)
    keep_sorted = torch.cat((running.new_zeros(1), running[:-1])) < p
    keep = torch.zeros_like(keep_sorted)
    keep[order] = keep_sorted
    return keep
