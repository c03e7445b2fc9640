"""Steps of a batch through a batch cache, for the tests that compare a batch with each of its
sequences decoded alone (test_batch_cache.py on torch, test_batch_kernels.py on kernels/)."""

from __future__ import annotations

import numpy as np
import torch


def forward_rows(model, cache, seqs, tokens, positions, logit_rows):
    """One forward pass over rows of several sequences; the logits of `logit_rows`."""
    rows = cache.rows(seqs, positions)
    return model.forward(torch.tensor(tokens), torch.tensor(positions), rows, n_keys=0,
                         logit_rows=torch.tensor(logit_rows))  # fmt: skip


def decode_together(model, cache, prompts, steps) -> tuple[list[int], list[np.ndarray]]:
    """Every prompt in one forward pass (each prompt's rows together, one logit row per prompt),
    then every sequence one token a step at its own position: (the sequences, each one's
    logits [1 + steps, vocab])."""
    seqs = [cache.new_sequence() for _ in prompts]
    tokens, positions, row_seqs, last = [], [], [], []
    for seq, prompt in zip(seqs, prompts, strict=True):
        start = cache.grow(seq, len(prompt))
        tokens += prompt
        positions += list(range(start, start + len(prompt)))
        row_seqs += [seq] * len(prompt)
        last.append(len(tokens) - 1)
    got = [[row] for row in forward_rows(model, cache, row_seqs, tokens, positions, last)]
    for step in range(len(steps[0])):
        pos = [cache.grow(seq, 1) for seq in seqs]
        out = forward_rows(
            model, cache, seqs, [s[step] for s in steps], pos, list(range(len(seqs)))
        )
        for i, row in enumerate(out):
            got[i].append(row)
    return seqs, [torch.stack(rows).numpy() for rows in got]
