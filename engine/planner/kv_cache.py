"""KV cache sizes, per layer and per device, as llama.cpp allocates them.

- Cells: llama_context pads n_ctx to a multiple of 256 (src/llama-context.cpp,
  `cparams.n_ctx = GGML_PAD(cparams.n_ctx, 256)`), and with one sequence the cache has that many
  cells.
- Sliding-window layers (src/llama-kv-cache-iswa.cpp) get their own cache of
  GGML_PAD(min(n_ctx, n_swa + n_ubatch), 256) cells, unless `swa_full` is set, in which case
  they get n_ctx cells like the others. llama_context_default_params() sets swa_full = true, so
  the window only saves memory when the loader turns it off (LoadSettings.swa_full).
- Per layer (src/llama-kv-cache.cpp, llama_kv_cache::llama_kv_cache): K is a
  [n_embd_k_gqa, cells] tensor of type_k; V is [n_embd_v_gqa, cells] of type_v, except that
  without flash attention V is stored transposed and every layer uses the widest V
  (n_embd_v_gqa_max, [TAG_V_CACHE_VARIABLE]). MLA caches have no V.
- Bytes per row: f16 2 per value; q8_0 34 per 32 values; q4_0 18 per 32 (ggml-common.h).
- Placement: with offload_kqv (the default) each layer's K and V live on that layer's device.
  Each device gets one buffer: sum(pad(alloc_size, alignment)).
"""

from __future__ import annotations

from engine.planner.backends import BackendProfile
from engine.planner.profile import KVLayer

_BLOCK = {"f16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18), "f32": (1, 4)}
CTX_PAD = 256


def pad_to(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def row_bytes(kv_type: str, width: int) -> int:
    block, size = _BLOCK[kv_type]
    return width // block * size


def type_fits_width(kv_type: str, width: int) -> bool:
    """Quantized caches need rows that are whole blocks of 32 values."""
    return width % _BLOCK[kv_type][0] == 0


def cells(n_ctx: int, swa_window: int, n_ubatch: int, swa_full: bool) -> tuple[int, int]:
    """(cells of the full-attention cache, cells of the sliding-window cache)."""
    full = pad_to(max(1, n_ctx), CTX_PAD)
    if swa_full or not swa_window:
        return full, full
    return full, pad_to(min(full, swa_window + n_ubatch), CTX_PAD)


def _tensor_bytes(kv_type: str, width: int, n_cells: int, backend: BackendProfile) -> int:
    size = row_bytes(kv_type, width) * n_cells
    if backend.row_padding and kv_type != "f16" and width % backend.row_padding:
        size += row_bytes(kv_type, backend.row_padding - width % backend.row_padding)
    return pad_to(size, backend.alignment)


def layer_bytes(
    layer: KVLayer,
    n_cells: tuple[int, int],
    type_k: str,
    type_v: str,
    v_width_max: int | None,
    backend: BackendProfile,
) -> int:
    """K, V (and recurrent state) of one layer on `backend`. `v_width_max` is given when V is
    stored transposed (no flash attention)."""
    total = layer.state_bytes
    if not layer.has_kv:
        return total
    n = n_cells[1] if layer.swa else n_cells[0]
    total += _tensor_bytes(type_k, layer.k_width, n, backend)
    if layer.v_width:
        width = v_width_max if v_width_max is not None else layer.v_width
        total += _tensor_bytes(type_v, width, n, backend)
    return total


def bytes_per_cell(layer: KVLayer, type_k: str, type_v: str, v_width_max: int | None) -> int:
    """K + V bytes one cached token takes in this layer (no padding; for rates and speed)."""
    if not layer.has_kv:
        return 0
    width = v_width_max if v_width_max is not None else layer.v_width
    return row_bytes(type_k, layer.k_width) + (row_bytes(type_v, width) if layer.v_width else 0)
