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
- the draw is from softmax(logits / temperature), each reply's draws from its `seed` (each
  reply starts from the seed, as llama.cpp's dist sampler does), or from a fresh random seed
  when `seed` is LLAMA_DEFAULT_SEED.

Every row of a batch is sampled at once (`sample_rows`: a batch decode step's rows, each with
its own settings; TorchSampler is its one-row caller): the penalty, then the top-k candidates
(the k most likely of each row, k the largest any row asks for; the whole vocabulary sorted
only where a row turns top-k off), top-p and min-p as masks over them, and the draw as the
argmax of the candidates' logits / temperature plus Gumbel noise, which picks a token with
softmax's probabilities. The noise is a hash of (seed, draw number, token id) computed on the
device, so a row's draw needs no generator object and no wait for the host: a batch can launch
its next step with the tokens still on the device (engine/runtime/hearth_batch.py). The same
seed gives the same reply on the one-sequence path and in a batch; the random streams differ
from llama.cpp's (std::mt19937 there), so a seeded reply is reproducible on this engine but not
token-for-token equal to llama.cpp's.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass
from typing import Protocol

import torch

from engine.hearth.host_values import on_device

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


@dataclass(frozen=True)
class RowDraw:
    """One row's settings for `sample_rows`: the chain's, the tokens the repeat penalty looks
    at (the last repeat_last_n generated), the reply's seed and this draw's number in it."""

    temperature: float
    top_k: int
    top_p: float
    min_p: float
    repeat_penalty: float = 1.0
    history: tuple[int, ...] = ()
    seed: int = 0
    draw: int = 0


def sample_rows(logits: torch.Tensor, rows: list[RowDraw]) -> torch.Tensor:
    """The token of each row of `logits` [R, vocab] by its settings, as a tensor [R] on the
    logits' device (nothing waits for the device here)."""
    x = _penalized(logits, rows)
    greedy = x.argmax(dim=-1)
    if all(r.temperature <= 0 for r in rows):
        return greedy
    vals, ids, keep = _candidates(x, rows)
    device = logits.device
    temperature = on_device([max(r.temperature, 1e-6) for r in rows], device, torch.float32)
    noise = _gumbel(_row_keys(rows, device), ids)
    scores = (vals / temperature[:, None] + noise).masked_fill(~keep, -math.inf)
    drawn = ids.gather(1, scores.argmax(dim=-1, keepdim=True))[:, 0]
    is_greedy = on_device([r.temperature <= 0 for r in rows], device, torch.bool)
    return torch.where(is_greedy, greedy, drawn)


def _penalized(logits: torch.Tensor, rows: list[RowDraw]) -> torch.Tensor:
    """The logits in float32, each row's penalized tokens (llama.cpp's repeat penalty: l / p
    if l > 0, else l * p) changed."""
    x = logits.float()
    rows_with = [(i, r) for i, r in enumerate(rows) if r.repeat_penalty != 1.0 and r.history]
    if not rows_with:
        return x
    x = x.clone()
    for i, r in rows_with:  # a few rows at most: the batch launches none of these ahead
        ids = on_device(sorted(set(r.history)), x.device)
        picked = x[i, ids]
        x[i, ids] = torch.where(picked <= 0, picked * r.repeat_penalty, picked / r.repeat_penalty)
    return x


def _candidates(x: torch.Tensor, rows: list[RowDraw]):
    """(values, token ids, kept) [R, K]: each row's K most likely tokens, most likely first,
    and the mask its top-k, top-p and min-p leave (all three at temperature 1, as llama.cpp's
    chain applies them before the temperature)."""
    n_vocab = x.shape[-1]
    device = x.device
    # a greedy row takes its argmax elsewhere: one candidate, whatever its top-k
    ks = [1 if r.temperature <= 0 else r.top_k if 0 < r.top_k < n_vocab else n_vocab for r in rows]
    vals, ids = torch.topk(x, max(ks), dim=-1)
    ranks = torch.arange(vals.shape[-1], device=device)
    keep = ranks[None, :] < on_device(ks, device)[:, None]
    if any(0 < r.top_p < 1 for r in rows):
        # keep a token while the better ones sum to less than p; the first always
        p = on_device([r.top_p if 0 < r.top_p < 1 else 2.0 for r in rows], device, torch.float32)
        probs = torch.softmax(vals.masked_fill(~keep, -math.inf), dim=-1)
        keep &= (torch.cumsum(probs, dim=-1) - probs) < p[:, None]
    if any(r.min_p > 0 for r in rows):
        floor = on_device(
            [math.log(r.min_p) if r.min_p > 0 else -math.inf for r in rows], device, torch.float32
        )
        keep &= vals >= vals[:, :1] + floor[:, None]
    return vals, ids, keep


_M32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2^32 for x in [0, 2^32), in int64 without overflow."""
    return (x * (c & 0xFFFF) + ((x * (c >> 16)) & 0xFFFF) * 0x10000) & _M32


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (lowbias32): every input bit moves about half the output bits."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def _row_keys(rows: list[RowDraw], device) -> torch.Tensor:
    """Each row's key for its draw: its seed and draw number, hashed."""
    seeds = on_device([r.seed & _M32 for r in rows], device)
    draws = on_device([r.draw & _M32 for r in rows], device)
    return _mix(_mix(seeds ^ 0x9E3779B9) ^ draws)


def _gumbel(keys: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Gumbel noise [R, K] for the candidates `ids` of rows with `keys`: -log(-log(u)), u
    uniform in (0, 1) from the hash of (key, token id), 24 bits of it."""
    h = _mix(keys[:, None] ^ _mul32(ids.to(torch.int64), 0x85EBCA6B))
    u = ((h >> 8).to(torch.float32) + 0.5) / float(1 << 24)
    return -torch.log(-torch.log(u))


class TorchSampler:
    def __init__(self, params: SamplingParams):
        """Its draws happen on the device of the logits it is given (sample_rows)."""
        self.params = params
        self._history: deque[int] = deque(maxlen=max(params.repeat_last_n, 0) or None)
        self.reset()

    @property
    def penalizes(self) -> bool:
        return self.params.repeat_penalty != 1.0 and self.params.repeat_last_n > 0

    def reset(self) -> None:
        """A new reply: no penalty history, the draws back at the seed's first."""
        self._history.clear()
        seed = self.params.seed & 0xFFFFFFFF
        if seed == DEFAULT_SEED:
            seed = random.SystemRandom().getrandbits(32)
        self._seed, self._draws = seed, 0

    @property
    def plain_greedy(self) -> bool:
        """Greedy with no repeat penalty: the pick is the logits' argmax, whatever came before."""
        return self.params.temperature <= 0 and not self.penalizes

    def accept(self, token: int) -> None:
        """Record a generated token for the repeat penalty."""
        if self.penalizes:
            self._history.append(token)

    def next_draw(self) -> RowDraw:
        """This reply's next draw for `sample_rows` (the draw number advances)."""
        row = self._row(self._draws)
        self._draws += 1
        return row

    def _row(self, draw: int) -> RowDraw:
        sp = self.params
        return RowDraw(
            temperature=sp.temperature, top_k=sp.top_k, top_p=sp.top_p, min_p=sp.min_p,
            repeat_penalty=sp.repeat_penalty if self.penalizes else 1.0,
            history=tuple(self._history), seed=self._seed, draw=draw,
        )  # fmt: skip

    def filtered_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """The chain up to the draw: logits / temperature, -inf where a filter removed a token.
        With temperature <= 0, only the greedy token keeps its logit."""
        row = self._row(self._draws)
        x = _penalized(logits[None], [row])
        out = torch.full_like(x, -math.inf)
        if row.temperature <= 0:
            best = x.argmax(dim=-1, keepdim=True)
            return out.scatter_(1, best, x.gather(1, best))[0]
        vals, ids, keep = _candidates(x, [row])
        return out.scatter_(1, ids, (vals / row.temperature).masked_fill(~keep, -math.inf))[0]

    def sample(self, logits: torch.Tensor, greedy: int | None = None) -> int:
        """Pick the next token from a row of logits and record it. `greedy`: the logits'
        argmax already computed (inside the decode step's CUDA graph), used when the settings
        are greedy."""
        if self.params.temperature <= 0 and not (self.penalizes and self._history):
            token = int(greedy if greedy is not None else torch.argmax(logits))
            self._draws += 1
        else:
            token = int(sample_rows(logits[None], [self.next_draw()])[0])
        self.accept(token)
        return token
