"""Decode attention over the paged cache at Llama-3-8B's shape (32 query heads, 8 KV heads of
128) and 4k / 32k / 128k positions, per K/V format; one layer's attention per figure. A sweep
of launch shapes (programs per SM, warps, stages) at one depth, and a sliding window (Gemma 3's
layers read only the last `window` positions whatever the depth)."""

from __future__ import annotations

import dataclasses
import math

import torch

from benchmarks.kernels.timing import L2_DEFEAT_BYTES, time_calls
from kernels.decode_launch import ROTATED_K, AttentionTuning, prepare_queries
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec
from kernels.rope import apply_rope
from kernels.rope_tables import Rope

HEADS, KV_HEADS, HEAD_DIM, LAYERS = 32, 8, 128, 32
# AttentionTuning's flags that are off until a GPU has timed them (--flag of
# python -m benchmarks.kernels; attention_flags.py gives each one's verdict), and q_prepared:
# the queries come prepared (rotated, scaled, f16) as the RoPE kernel leaves them with the
# cache's query_preparation (rot4 and rot2 K; attend(..., prepared=True)), so the attention's
# time leaves that work out: measure_rope_q times it inside the RoPE kernel
FLAGS = (
    "rotate_q_once", "sum_after_loop", "fused_reduce", "flat_v", "q_prepared", "mask_tail",
    "chain_launches", "flat_kivi_k",
)  # fmt: skip
ROTATED_K_ONLY = ("rotate_q_once", "q_prepared")
FLAG_LABELS = {
    "rotate_q_once": "q once", "sum_after_loop": "sum after loop", "fused_reduce": "fused reduce",
    "flat_v": "flat V", "q_prepared": "q prepared", "mask_tail": "mask tail",
    "chain_launches": "chained launches", "flat_kivi_k": "flat kivi4 K",
}  # fmt: skip


def default_flags(k_format: str | None = None, v_format: str | None = None) -> dict:
    """Each flag's value in the default AttentionTuning (q_prepared: False); with a K/V pair,
    mask_tail resolved for it (MASK_TAIL_PAIRS), else as stored (None: by pair)."""
    default = {**dataclasses.asdict(AttentionTuning()), "q_prepared": False}
    if k_format is not None:
        default["mask_tail"] = AttentionTuning().masks_tail(k_format, v_format)
    return default


def flags_changed(tuning: dict) -> list[str]:
    """The FLAGS a row's tuning (a JSON row's "tuning") sets otherwise than the default
    AttentionTuning (flat_v is on by default since session 9: its rows then say "no flat V")."""
    default = default_flags()
    return [f for f in FLAGS if tuning.get(f, default[f]) != default[f]]


def flags_label(tuning: dict) -> str:
    """The changed flags as the tables print them."""
    return "".join(
        f"  {'' if tuning.get(f) else 'no '}{FLAG_LABELS[f]}" for f in flags_changed(tuning)
    )


ROT4_V_ONLY = ("flat_v",)
KIVI4_K_ONLY = ("flat_kivi_k",)
FORMAT_PAIRS = [("f16", "f16"), ("q8", "q8"), ("rot4", "rot4"), ("q8", "rot4"), ("rot2", "rot4")]
CHUNK = 8192


def _filled_cache(
    k_format: str, v_format: str, context: int, page_size: int = 64
) -> tuple[PagedKVCache, int, int]:
    """A cache of `context` random positions in as many layers as the L2 cannot hold."""
    torch.cuda.empty_cache()  # the last measurement's cache is garbage by now
    probe = KVCacheSpec(1, KV_HEADS, HEAD_DIM, k_format, v_format, max_tokens=context)
    layers = max(1, min(16, math.ceil(L2_DEFEAT_BYTES / (probe.bytes_per_token * context))))
    spec = KVCacheSpec(
        layers, KV_HEADS, HEAD_DIM, k_format, v_format, page_size=page_size, max_tokens=context
    )
    cache = PagedKVCache(spec, device="cuda")
    seq = cache.new_sequence()
    cache.grow(seq, context)
    for layer in range(layers):
        for start in range(0, context, CHUNK):
            n = min(CHUNK, context - start)
            k = torch.randn(n, KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
            v = torch.randn(n, KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
            cache.write(layer, seq, start, k, v)
    return cache, seq, layers


def measure(
    k_format: str,
    v_format: str,
    context: int,
    copy_bw: float,
    tunings=(None,),
    window: int = 0,
    page_size: int = 64,
    base: AttentionTuning | None = None,
) -> list[dict]:
    """One figure per tuning (None: the cache's default; an AttentionTuning; or a dict of
    FLAGS, q_prepared among them), all over the same cache. base: the tuning that None
    stands for and that the flags change (None: the cache's default)."""
    cache, seq, layers = _filled_cache(k_format, v_format, context, page_size)
    layer_bytes = cache.spec.bytes_per_token * min(context, window or context)
    q = torch.randn(1, HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
    ready = None
    if k_format in ROTATED_K:  # what apply_rope(..., prepare=) leaves (RoPE aside)
        prep = cache.query_preparation()
        ready = prepare_queries(q, prep.signs, prep.qk_scale, prep.halves, False)

    def run(prepared: bool) -> None:
        for layer in range(layers):
            cache.attend(layer, ready if prepared else q, [seq], window=window, prepared=prepared)

    rows = []
    default = base or cache.tuning
    for entry in tunings:
        tuning, prepared = _variant(entry, default)
        cache.tuning = tuning or default
        try:
            seconds = time_calls(lambda prepared=prepared: run(prepared)) / layers
        except Exception as error:  # one launch shape failing must not hide the others
            print(f"attention {k_format}/{v_format} {entry}: failed: {error!r}"[:300])
            continue
        rows.append({
            "k": k_format, "v": v_format, "context": context, "window": window,
            "tuning": {**dataclasses.asdict(cache.tuning), "q_prepared": prepared},
            "page_size": page_size,
            "us_per_layer": seconds * 1e6,
            "ms_per_token_32_layers": seconds * LAYERS * 1e3,
            "gb_s": layer_bytes / seconds / 1e9, "of_copy": layer_bytes / seconds / copy_bw,
            "bytes_per_token_layer": cache.spec.bytes_per_token,
        })  # fmt: skip
    return rows


def _variant(entry, base: AttentionTuning | None = None) -> tuple[AttentionTuning | None, bool]:
    """measure's entries as (tuning or None for the default, q prepared); a dict's flags
    change base (or AttentionTuning())."""
    if isinstance(entry, dict):
        fields = {k: v for k, v in entry.items() if k != "q_prepared"}
        tuning = dataclasses.replace(base or AttentionTuning(), **fields) if fields else None
        return tuning, bool(entry.get("q_prepared"))
    return entry, False


def measure_rope_q(repeats: int = LAYERS) -> dict:
    """RoPE on one token's queries (32 heads of 128), plain and with the rot4 cache's query
    preparation (the rotation, scale and cast that attend(..., prepared=True) then skips):
    `repeats` launches in one graph (a step's layers), per launch."""
    spec = KVCacheSpec(1, KV_HEADS, HEAD_DIM, "rot4", "rot4", max_tokens=64)
    prep = PagedKVCache(spec, device="cuda").query_preparation()
    rope = Rope.from_gguf_params(HEAD_DIM, HEAD_DIM, 500000.0, layout="normal")
    q = torch.randn(1, HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
    position = torch.tensor([4000], dtype=torch.int32, device="cuda")
    figures = {}
    for name, prepare in (("plain", None), ("prepared", prep)):

        def run(prepare=prepare) -> None:
            for _ in range(repeats):
                apply_rope(q, position, rope, prepare=prepare)

        figures[f"us_{name}"] = time_calls(run) / repeats * 1e6
    return figures


def sweep_tunings() -> list[AttentionTuning]:
    """The default first (warps by format pair); 4 warps with the default's other settings;
    session 6's launch (4 programs an SM, 3 stages, no overlapped reduce); and one change at
    a time from the second (programs per SM 0: as many as fit)."""
    default = AttentionTuning(num_warps=4)
    return [
        AttentionTuning(),
        default,
        AttentionTuning(4, 4, 3, overlap_reduce=False),
        dataclasses.replace(default, overlap_reduce=False),
        dataclasses.replace(default, num_stages=3),
        dataclasses.replace(default, num_stages=7),
        dataclasses.replace(default, num_warps=2),
        dataclasses.replace(default, num_warps=2, num_stages=7),
        dataclasses.replace(default, programs_per_sm=4),
        AttentionTuning(rotate_q_once=True),
        dataclasses.replace(default, rotate_q_once=True),
        AttentionTuning(sum_after_loop=True),
        dataclasses.replace(default, sum_after_loop=True),
        dataclasses.replace(default, rotate_q_once=True, sum_after_loop=True),
        AttentionTuning(sum_after_loop=True, max_registers=200),
        AttentionTuning(rotate_q_once=True, sum_after_loop=True, max_registers=200),
    ]


def flag_comparison(k_format: str, flags: list[str], v_format: str = "rot4") -> tuple:
    """Tunings that time AttentionTuning flags against the default over one cache (each set
    the other way than the default): the default first, then each flag that applies to this
    K format (rotate_q_once: rotated K only) and, with several, all of them together, each
    followed by the default again (the defaults' differences are the run's spread, what a
    gain must beat: attention_flags.py)."""
    applies = [f for f in flags if f not in ROTATED_K_ONLY or k_format in ROTATED_K]
    applies = [f for f in applies if f not in ROT4_V_ONLY or v_format == "rot4"]
    applies = [f for f in applies if f not in KIVI4_K_ONLY or k_format == "kivi4"]
    # each flag set the other way than the default (flat_v: off since session 9; mask_tail:
    # the other way than its default for this pair)
    default = default_flags(k_format, v_format)
    changed = {f: not default[f] for f in applies}
    tunings: list = [None]
    for flag in applies:
        tunings += [{flag: changed[flag]}, None]
    if len(applies) > 1:
        tunings += [changed, None]
    return tuple(tunings)


def launch_label(tuning: dict) -> str:
    """programs per SM (fit: as many as fit) / warps / stages, and whether the reduce overlaps."""
    per_sm = tuning["programs_per_sm"] or "fit"
    warps = tuning["num_warps"] or "auto"
    label = f"{per_sm}/{warps}/{tuning['num_stages']}"
    label += "" if tuning.get("overlap_reduce", False) else " serial reduce"
    label += "".join(f" {FLAG_LABELS[f]}" for f in FLAGS if tuning.get(f, False))
    return label + (f" max {tuning['max_registers']} regs" if tuning.get("max_registers") else "")


def measure_write(k_format: str, v_format: str) -> dict:
    """One decode step's write (1 position, all KV heads) and a 4096-token prefill write."""
    spec = KVCacheSpec(1, KV_HEADS, HEAD_DIM, k_format, v_format, max_tokens=8192)
    cache = PagedKVCache(spec, device="cuda")
    seq = cache.new_sequence()
    cache.grow(seq, 8192)
    one = torch.randn(1, KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
    many = torch.randn(4096, KV_HEADS, HEAD_DIM, dtype=torch.float16, device="cuda")
    step = time_calls(lambda: cache.write(0, seq, 100, one, one))
    prefill = time_calls(lambda: cache.write(0, seq, 0, many, many))
    return {"k": k_format, "v": v_format, "us_one_token": step * 1e6, "us_4096": prefill * 1e6}
