"""Which KV cache the Hearth engine builds for a K/V pair: the one rule that the driver (which
builds it), the planner (which counts its memory) and the benchmarks (which calibrate both) read.

Pure (no torch), so the planner can ask in the window's process.

- On a GPU with kernels/, every pair goes to kernels' paged cache (f16/f16 too: its decode
  attention reads only the filled pages and writes K/V in one launch), pages of PAGE_SIZE
  positions.
- Elsewhere (the CPU, tests), f16/f16 and f32 pairs go to the plain torch cache; the quantized
  formats need the kernels, and are refused with the reason.

    layout = cache_layout("rot4", "rot4", kernels_on_gpu=True)    # CacheLayout(paged=True, ...)
    engine_cache_layout("f16", "f16", ops_name="kernels", device="cuda")   # what the driver builds
    PLANNED_OPS, PLANNED_DEVICE                                  # what the planner assumes

tests/engine/hearth/test_one_cache_fact.py builds the driver's cache for every pair the Model
page offers and checks its allocations against the planner's count of them.
"""

from __future__ import annotations

from dataclasses import dataclass

PLAIN_FORMATS = ("f16", "f32")  # the plain torch cache's element types
PAGED_FORMATS = ("q8", "rot4", "rot2", "kivi4")  # kernels/kv_formats.py, on a GPU only
PAGE_SIZE = 64  # positions per page of the paged cache


class CacheUnavailable(ValueError):
    """This K/V pair cannot be held here; the message says why and what to choose."""


@dataclass(frozen=True)
class CacheLayout:
    paged: bool
    type_k: str
    type_v: str

    @property
    def plain_element_bytes(self) -> int:
        """Bytes a value takes in the plain cache: f16 only when both are f16."""
        return 2 if (self.type_k, self.type_v) == ("f16", "f16") else 4


# The Hearth engine runs where the planner plans it (engine/planner/hearth_plan.py refuses other
# devices): on a GPU, with kernels/ (engine/hearth/ops.py select_ops picks them there).
PLANNED_OPS, PLANNED_DEVICE = "kernels", "cuda"


def engine_cache_layout(type_k: str, type_v: str, *, ops_name: str, device: str) -> CacheLayout:
    """The cache the driver builds for a model loaded with `ops_name` ("kernels" or "torch",
    engine/hearth/ops.py) on `device`: the one rule the driver, the planner (with PLANNED_OPS
    and PLANNED_DEVICE) and the benchmarks all call."""
    kernels_on_gpu = ops_name == "kernels" and not str(device).startswith("cpu")
    return cache_layout(type_k, type_v, kernels_on_gpu=kernels_on_gpu)


def cache_layout(type_k: str, type_v: str, *, kernels_on_gpu: bool) -> CacheLayout:
    """The cache for `type_k`/`type_v`; raises CacheUnavailable with the reason."""
    known = (*PLAIN_FORMATS, *PAGED_FORMATS)
    unknown = [kind for kind in (type_k, type_v) if kind not in known]
    if unknown:
        raise CacheUnavailable(
            f"The Hearth engine has no {unknown[0]} KV cache (it holds {', '.join(known)}; all "
            f"but {' and '.join(PLAIN_FORMATS)} need a GPU). Choose one of those, or the "
            "llama.cpp engine."
        )
    plain = type_k in PLAIN_FORMATS and type_v in PLAIN_FORMATS
    if kernels_on_gpu and "f32" not in (type_k, type_v):
        return CacheLayout(paged=True, type_k=type_k, type_v=type_v)
    if plain:
        return CacheLayout(paged=False, type_k=type_k, type_v=type_v)
    if not kernels_on_gpu:
        raise CacheUnavailable(
            f"The Hearth engine's {type_k}/{type_v} KV cache runs on kernels/ on a GPU, which "
            "is not available here. Choose f16."
        )
    raise CacheUnavailable(
        f"The Hearth engine cannot mix an f32 KV cache with {type_k}/{type_v}. Choose f16 for "
        "the other one, or f32 for both."
    )
