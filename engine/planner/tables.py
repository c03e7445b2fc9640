"""Prefix sums over a model's layers, so that a placement is costed in O(devices), not O(layers).

llama.cpp places layers in contiguous ranges (the first ones on the CPU, then each GPU's share,
src/llama-model.cpp load_tensors, `i_gpu_start`), so every per-device total is a range sum.
KV bytes are linear in the number of cells once the cell count is a multiple of 256: a row of
r bytes times 256k cells is a multiple of every buffer alignment used here, so padding only
depends on the per-tensor CUDA row padding, a per-layer constant.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from engine.enums import KV_TYPES
from engine.planner.backends import BackendProfile
from engine.planner.kv_cache import pad_to, row_bytes
from engine.planner.profile import ModelProfile


def _prefix(values: list[int]) -> tuple[int, ...]:
    return (0, *accumulate(values))


@dataclass(frozen=True)
class WeightTables:
    dense: tuple[int, ...]  # prefix sums, len n_layer + 1
    experts: tuple[int, ...]
    largest_dense_prefix: tuple[int, ...]  # max over layers [0, i)
    largest_expert_prefix: tuple[int, ...]
    largest_expert_suffix: tuple[int, ...]  # max over layers [i, n)

    def dense_sum(self, lo: int, hi: int) -> int:
        return self.dense[hi] - self.dense[lo]

    def experts_sum(self, lo: int, hi: int) -> int:
        return self.experts[hi] - self.experts[lo]


@dataclass(frozen=True)
class KVTables:
    """Per cell-count coefficients: bytes = cells_full * full + cells_swa * swa + fixed."""

    full: tuple[int, ...]
    swa: tuple[int, ...]
    fixed: tuple[int, ...]
    has_full: tuple[int, ...]  # prefix counts of layers with a full-attention cache
    has_swa: tuple[int, ...]

    def bytes(self, lo: int, hi: int, cells: tuple[int, int]) -> int:
        return (
            cells[0] * (self.full[hi] - self.full[lo])
            + cells[1] * (self.swa[hi] - self.swa[lo])
            + self.fixed[hi]
            - self.fixed[lo]
        )

    def kinds(self, lo: int, hi: int) -> tuple[bool, bool]:
        return self.has_full[hi] > self.has_full[lo], self.has_swa[hi] > self.has_swa[lo]


def weight_tables(profile: ModelProfile, backend: BackendProfile) -> WeightTables:
    key = ("wt", backend.alignment, backend.row_padding)
    cached = profile._cache.get(key)
    if cached is None:
        layers = profile.layer_weights(backend)
        dense = [w.dense for w in layers]
        dense[0:1] = [dense[0] + profile.first_layer_extra_bytes(backend)] if dense else []
        big_d = [w.largest_dense for w in layers]
        big_e = [w.largest_expert for w in layers]
        cached = WeightTables(
            dense=_prefix(dense),
            experts=_prefix([w.experts for w in layers]),
            largest_dense_prefix=(0, *accumulate(big_d, max)),
            largest_expert_prefix=(0, *accumulate(big_e, max)),
            largest_expert_suffix=(*reversed(tuple(accumulate(reversed(big_e), max))), 0),
        )
        profile._cache[key] = cached
    return cached


def kv_tables(
    profile: ModelProfile, type_k: str, type_v: str, v_trans: bool, backend: BackendProfile
) -> KVTables:
    key = ("kv", type_k, type_v, v_trans, backend.alignment, backend.row_padding)
    cached = profile._cache.get(key)
    if cached is None:
        v_max = max((layer.v_width for layer in profile.kv_layers), default=0)
        full, swa, fixed, has_full, has_swa = [], [], [], [], []
        for layer in profile.kv_layers:
            per_cell, constant = 0, layer.state_bytes
            if layer.has_kv:
                widths = [(type_k, layer.k_width)]
                if layer.v_width:
                    widths.append((type_v, v_max if v_trans else layer.v_width))
                for kv_type, width in widths:
                    per_cell += row_bytes(kv_type, width)
                    constant += _row_padding(kv_type, width, backend)
            full.append(0 if layer.swa else per_cell)
            swa.append(per_cell if layer.swa else 0)
            fixed.append(constant)
            has_full.append(int(layer.has_kv and not layer.swa))
            has_swa.append(int(layer.has_kv and layer.swa))
        cached = KVTables(
            _prefix(full), _prefix(swa), _prefix(fixed), _prefix(has_full), _prefix(has_swa)
        )
        profile._cache[key] = cached
    return cached


def _row_padding(kv_type: str, width: int, backend: BackendProfile) -> int:
    if not backend.row_padding or kv_type == "f16" or width % backend.row_padding == 0:
        return 0
    return pad_to(
        row_bytes(kv_type, backend.row_padding - width % backend.row_padding), backend.alignment
    )


def warm_tables(profile: ModelProfile, backends) -> None:
    """Build the tables a search will ask for, so that the first plan is as fast as the next."""
    for backend in backends:
        weight_tables(profile, backend)
        profile.input_bytes(backend)
        profile.output_bytes(backend)
        profile.output_matrix_bytes(backend)
        for kv_type in KV_TYPES:
            for v_trans in (False, True):
                kv_tables(profile, kv_type, kv_type, v_trans, backend)
