"""The speculative sampling rule (Leviathan et al. 2023; Chen et al. 2023), as a pure function.

Draft token x was proposed with probability q(x); the model gives p. Keep x with probability
min(1, p(x) / q(x)); otherwise draw the replacement from the residual max(0, p - q), normalised.
Whatever q is, the token that comes out is distributed exactly as p: speculation changes the
speed, never the distribution.

Hearth's drafters propose their most likely token, so q is one-hot at x: keep x with probability
p(x), otherwise draw from p with x removed. That is the same law as "draw y from p; keep x if
y == x, else emit y" - which is what the decode loop does with llama.cpp's own sampler chain
(its penalties, top-k/top-p/min-p, temperature and seeded draw), one draw per emitted token, as
plain decoding draws. tests/engine/runtime/speculative/test_acceptance.py checks both forms
statistically against p.
"""

from __future__ import annotations

import numpy as np


def accept_or_replace(
    p: np.ndarray, q: np.ndarray, drafted: int, rng: np.random.Generator
) -> tuple[bool, int]:
    """One position of the rule: (kept, token). `p` and `q` are probability vectors over the
    vocabulary, `drafted` was drawn from `q`."""
    q_x = q[drafted]
    if q_x <= 0:
        raise ValueError("the drafted token has zero probability under the draft distribution")
    if rng.random() < min(1.0, p[drafted] / q_x):
        return True, drafted
    residual = np.maximum(p - q, 0.0)
    total = residual.sum()
    if total <= 0:  # p == q: the rule always keeps; reached only through rounding
        return True, drafted
    return False, int(rng.choice(len(p), p=residual / total))


def verify_drafts(
    target: list[np.ndarray],
    draft: list[np.ndarray],
    drafted: list[int],
    rng: np.random.Generator,
) -> list[int]:
    """The tokens a speculative step emits: the kept drafts, then a replacement for the first
    rejected one, or, when all are kept, one more token drawn from the model's distribution
    after the last draft (`target` has len(drafted) + 1 rows)."""
    if len(target) != len(drafted) + 1 or len(draft) != len(drafted):
        raise ValueError("target needs one row more than there are drafts, draft one per draft")
    out: list[int] = []
    for p, q, x in zip(target[:-1], draft, drafted, strict=True):
        kept, token = accept_or_replace(p, q, x, rng)
        out.append(token)
        if not kept:
            return out
    out.append(int(rng.choice(len(target[-1]), p=target[-1])))
    return out


def one_hot(n: int, token: int) -> np.ndarray:
    q = np.zeros(n)
    q[token] = 1.0
    return q
