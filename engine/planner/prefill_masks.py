"""The bytes of a Hearth prefill chunk's attention masks (kernels/prefill_masks.py), for the
memory model (hearth_memory.prefill_workspace): the masks kept through the chunk's layers, and
what making one needs beside them."""

from __future__ import annotations

from typing import Protocol

from engine.hearth.cache_layout import PAGE_SIZE as PAGE
from engine.hearth.config import ModelConfig


class HearthConfig(Protocol):
    """What the masks depend on of hearth_memory.HearthConfig (not imported: that module
    imports this one)."""

    n_ctx: int
    type_k: str


# kernels/prefill_masks.py MASK_ALIGNMENT (not imported: that module imports torch; a test
# holds the two equal): a prefill mask's rows are padded to this many elements
MASK_ALIGNMENT = 16


def _mask_columns(cfg: ModelConfig, config: HearthConfig, rows: int) -> int:
    """Keys a chunk's mask covers, padded: the context's, and with kivi4 keys the scratch's
    rows after them (the chunk and a page: its own pages' exact keys, kernels/prefill_masks.py
    own_pages_exact)."""
    keys = config.n_ctx + (rows + PAGE if config.type_k == "kivi4" else 0)
    return -(-keys // MASK_ALIGNMENT) * MASK_ALIGNMENT


def _mask_windows(cfg: ModelConfig) -> int:
    """Distinct windows among the layers: one mask each (Gemma 3: global and local)."""
    return len({cfg.swa_window if cfg.is_swa(i) else 0 for i in range(cfg.n_layer)})


def prefill_masks(cfg: ModelConfig, config: HearthConfig, rows: int) -> int:
    """A prefill chunk's attention masks for `rows` queries over n_ctx positions, made at the
    chunk's first layer and kept through all of them (engine/hearth/forward.py; kernels/
    prefill_masks.py): one per distinct window, each additive in f16 (the
    GPU's compute dtype), [n_rep * rows, columns] (repeated for the query heads of a KV head;
    rows padded to MASK_ALIGNMENT), which SDPA's memory-efficient kernel reads as it is."""
    return _mask_windows(cfg) * 2 * cfg.n_rep * rows * _mask_columns(cfg, config, rows)


def mask_making(cfg: ModelConfig, config: HearthConfig, rows: int) -> int:
    """Beside the masks while one is made (kernels/prefill_masks.py chunk_mask: once a
    chunk, before its layer's gather): the slot ids (int64) and the boolean [rows, n_ctx] of
    what each query sees; a window's second comparison another boolean of that size; kivi4
    keys: the own-page test (slot ids and their pages, int64, and a boolean) and the boolean
    with the scratch's columns concatenated."""
    n = config.n_ctx
    booleans = 2 if cfg.swa_window else 1
    if config.type_k == "kivi4":
        return 2 * rows * (n + rows + PAGE) + 24 * n
    return booleans * rows * n + 8 * n
