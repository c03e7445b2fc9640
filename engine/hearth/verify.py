"""Checking drafted tokens: several positions in one forward, each computed as a decode step.

Speculative decoding feeds the last sampled token and k drafts through the model at once and
keeps the drafts while the model's choice at each position equals them. Greedy replies must be
the same text with and without it, token for token, so every row of the check must get the
logits plain decoding would give that position, bit for bit, not merely close ones: a
near-tie decided by the last bit of a sum is a different reply. A many-row forward computes its
rows otherwise (a GEMM's summation order is not a GEMV's; attention over several queries is
another kernel), so here every operation whose arithmetic depends on the row count computes
each row as a one-row call does:

- the matrices: `ops.rows_as_one` (ops.py): on kernels/, the decode step's GEMV config with
  `rows_alike` (kernels/gemv.py: each row its own program, the split plan of one row), and the
  8-bit activations a one-row GEMV reads (each weight still read once for all rows: that is
  the check's gain); on plain torch (the CPU, and types kernels/ does not pack), T one-row
  products;
- attention: each row as a decode step at its position attends (`cache.attend_rows`), over
  the keys that step reads (the whole cache where steps have fixed shapes, else the filled
  part): the paged cache's decode kernel once for all rows, the sequence given once per row
  and each row's keys split as a lone step's; the plain cache row by row. The K/V of every
  row are written first and masked by position, as in decode;
- norms, RoPE, activations and the embedding are row by row already; where the cache rotates
  Q and K in its write (`write_rotating`), the check writes through that launch as a step does
  (a program per head of each row, whatever the row count: kernels/kv_write.py).

Mixtures of experts route each row through its own experts in kernels that group rows by
expert, so the Hearth engine declares speculation for dense models only (hearth_driver.py).

kivi4 keys are quantized a page at a time once the page fills (kernels/kv_kivi.py): a check
that filled a page would let its earlier rows read the sealed page where decode steps read the
exact open rows, and a rollback into it would reopen dequantized rows. So a check stops before
the slot that seals a page (`cache.rows_checkable`).

    logits = check_logits(transformer, cache, tokens, start, fixed_shapes=...)   # [T, vocab]
"""

from __future__ import annotations

import contextlib

import torch

from engine.hearth.forward import Transformer


class _RowByRowAttention:
    """The cache's write as it is; its attention as decode steps attend, each row at its
    position over n_keys[t] slots (cache.attend_rows)."""

    def __init__(self, cache, n_keys: list[int]):
        self.cache, self.n_keys = cache, n_keys

    def write(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        self.cache.write(layer, positions, k, v)

    @property
    def write_rotating(self):
        """The cache's write with RoPE (the launch a decode step takes), where it has one."""
        return getattr(self.cache, "write_rotating", None)

    def attend(self, layer, q, positions, n_keys, **options):
        return self.cache.attend_rows(layer, q, positions, self.n_keys, **options)


@contextlib.contextmanager
def rows_as_one(ops):
    """The ops compute every row of a matrix product as a one-row product (ops.py)."""
    ops.rows_as_one = True
    try:
        yield
    finally:
        ops.rows_as_one = False


def check_logits(
    model: Transformer, cache, tokens: list[int], start: int, *, fixed_shapes: bool
) -> torch.Tensor:
    """Run `tokens` at positions start.. (writing their K/V) with every row computed as a
    decode step computes it; the logits of every row [T, vocab]. `fixed_shapes`: decode steps
    attend over the whole cache (a GPU's captured step), else over the filled positions."""
    device = model.ops.device
    n = len(tokens)
    positions = torch.arange(start, start + n, device=device)
    n_keys = [cache.n_ctx if fixed_shapes else start + t + 1 for t in range(n)]
    h = model.embed(torch.tensor(tokens, device=device))
    return check_forward_embedded(model, cache, h, positions, n_keys)


def check_forward_embedded(
    model: Transformer, cache, h: torch.Tensor, positions: torch.Tensor, n_keys=None
) -> torch.Tensor:
    """`check_logits` from the embedded rows h [T, n_embd] at device `positions` [T], each row
    attending over n_keys[t] slots (default: the whole cache, as a captured decode step does).
    Nothing here reads the device from the host: check_graph.py captures it."""
    n_keys = n_keys or [cache.n_ctx] * h.shape[0]
    with rows_as_one(model.ops):
        return model.forward_embedded(
            h, positions, _RowByRowAttention(cache, n_keys), n_keys=max(n_keys), all_logits=True
        )


def greedy_tokens(logits: torch.Tensor) -> list[int]:
    """Each row's argmax, taken as a decode step takes it (the first of equal maxima: an
    argmax does no arithmetic, so one launch over the rows picks what one a row picks), read
    back in one copy."""
    return [int(t) for t in torch.argmax(logits, dim=-1).tolist()]
