"""Compile the decode attention and the KV write for sm_90 on a machine without a GPU.

    python -m testkit.sm90_compile [K/V ...]

Each K/V pair (all the engine offers when none is named) as PagedKVCache launches it on a
Hopper GPU at Llama 3 8B's shape (32 query heads on 8 KV heads of 128, pages of 64, one
token, positions read on the device, chained launches): the split kernel with the default
AttentionTuning (and writing a step's row, for K other than kivi4), the reduce, and the KV
write, compiled by Triton's bundled ptxas. Triton's
interpreter (the CPU tests) never compiles, so a kernel that only the compiler rejects
passes there; this is the cheap check before a device run, and CI's (tests/kernels/
test_attention_compiles.py). Prints each kernel's warps and shared memory.
"""

from __future__ import annotations

import argparse
import time

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernels.decode_attention import decode_reduce_kernel, decode_split_kernel
from kernels.decode_launch import (
    REDUCE_D_CHUNK,
    REDUCE_MAX_CHUNK,
    AttentionTuning,
    reduce_warps_for,
)
from kernels.kv_cache import write_warps
from kernels.kv_formats import K_ONLY_FORMATS, KV_FORMATS, KVCacheSpec, kivi_group
from kernels.kv_planes import allocate_planes, plane_pointers
from kernels.kv_tiles import FORMAT_CODES
from kernels.kv_write import kv_write_kernel

TARGET = GPUTarget("cuda", 90, 32)
# Llama 3 8B: query heads, KV heads, head dim; the engine's page size
HQ, HKV, D, PAGE = 32, 8, 128, 64
# each format's q, scale and min planes (kv_planes.allocate_planes; q in place of an absent plane)
PLANES = {
    "f16": ("*fp16", "*fp16", "*fp16"),
    "q8": ("*i8", "*fp16", "*i8"),
    "rot4": ("*u8", "*fp16", "*fp16"),
    "rot2": ("*u8", "*fp16", "*fp16"),
    "kivi4": ("*u8", "*fp16", "*fp16"),
}
POINTERS = {
    "q_ptr": "*fp16", "acc_ptr": "*fp32", "m_ptr": "*fp32", "l_ptr": "*fp32",
    "block_table_ptr": "*i32", "lengths_ptr": "*i32", "positions_ptr": "*i32",
    "signs_ptr": "*fp32", "sinks_ptr": "*fp32", "k_open_ptr": "*fp16", "open_ptr": "*fp16",
    "open_page_ptr": "*i32", "open_slots_ptr": "*i32", "out_ptr": "*fp16", "k_ptr": "*fp16",
    "v_ptr": "*fp16", "inv_freq_ptr": "*fp32", "qk_scale": "fp32", "mscale": "fp32",
    "xq_ptr": "*i32", "xd_ptr": "*fp32", "xs_ptr": "*i32", "q_out_ptr": "*fp16",
    "q_bias_ptr": "*fp32", "k_bias_ptr": "*fp32", "v_bias_ptr": "*fp32", "q_norm_ptr": "*fp32",
    "k_norm_ptr": "*fp32", "eps": "fp32",
}  # fmt: skip
ALL_PAIRS = [(k, v) for k in KV_FORMATS for v in KV_FORMATS if v not in K_ONLY_FORMATS]


def _compile(fn, consts: dict, types: dict, options: dict, unaligned: tuple = ()):
    # compile-time parameters left out take their defaults, as a launch gives them
    defaults = {p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}
    consts = {**defaults, **consts}
    signature = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
    # pointers as Triton's launch specializes them: 16-byte aligned but those in `unaligned`
    aligned = [
        i for i, a in enumerate(fn.arg_names) if signature[a][0] == "*" and a not in unaligned
    ]
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    src = ASTSource(fn, signature, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=TARGET, options=options)


def _unaligned_mins(k_format: str, v_format: str) -> tuple:
    """The min planes Triton's launch does not see 16-byte aligned, as the cache allocates them
    (kv_planes: rot4's and rot2's start 8 bytes into a row's run of scales and mins)."""
    unaligned = []
    for role, fmt in (("k", k_format), ("v", v_format)):
        spec = KVCacheSpec(1, 1, D, k_format, v_format, max_tokens=PAGE)
        low = plane_pointers(allocate_planes(fmt, 1, spec, "cpu"))[2]
        if low.data_ptr() % 16:
            unaligned.append(f"{role}m_ptr")
    return tuple(unaligned)


def _planes(k_format: str, v_format: str) -> dict:
    types = dict(POINTERS)
    for role, fmt in (("k", k_format), ("v", v_format)):
        for name, t in zip("qsm", PLANES[fmt], strict=True):
            types[f"{role}{name}_ptr"] = t
    return types


def compile_split(k_format: str, v_format: str, tuning: AttentionTuning | None = None,
                  write: bool = False):  # fmt: skip
    """The split kernel as PagedKVCache.attend launches it for one token (CUDA graph: positions
    on the device) with chained launches on a Hopper GPU; `write`: writing the step's row
    itself (a step_row), Q and K rotated in it."""
    tuning = tuning or AttentionTuning()
    consts = dict(
        HQ=HQ, HKV=HKV, G=HQ // HKV, T=1, G_PAD=16, D=D, LOG2D=D.bit_length() - 1, P=PAGE,
        K_FMT=FORMAT_CODES[k_format], V_FMT=FORMAT_CODES[v_format], POSITIONS=True, ASM=True,
        KG=kivi_group(PAGE), LAUNCH_DEPENDENTS=tuning.overlap_reduce,
        MASK_TAIL=tuning.masks_tail(k_format, v_format), WAIT_PRIOR=tuning.chain_launches,
    )  # fmt: skip
    if write:
        consts.update(WRITE=True, ROPE=True, N_ROT=D, NEOX=False)
    options = {"num_warps": tuning.warps(k_format, v_format), "num_stages": tuning.num_stages}
    unaligned = _unaligned_mins(k_format, v_format)
    return _compile(decode_split_kernel, consts, _planes(k_format, v_format), options, unaligned)


def compile_reduce(tuning: AttentionTuning | None = None, sinks: bool = False,
                   quantize: bool = False):  # fmt: skip
    """The reduce as launch_decode launches it after the split kernel (overlapped, chained);
    `sinks`: with gpt-oss's attention sinks; `quantize`: writing its output in 8 bits too."""
    tuning = tuning or AttentionTuning()
    consts = dict(
        HQ=HQ, D=D, DC=REDUCE_D_CHUNK, CHUNK=REDUCE_MAX_CHUNK, HAS_SINKS=sinks,
        WAIT_PRIMARY=tuning.overlap_reduce, LAUNCH_NEXT=tuning.chain_launches, QUANTIZE=quantize,
    )  # fmt: skip
    options = {
        "num_warps": tuning.reduce_warps or reduce_warps_for(REDUCE_MAX_CHUNK, REDUCE_D_CHUNK)
    }
    return _compile(decode_reduce_kernel, consts, POINTERS, options)


def compile_write(k_format: str, v_format: str, queries: bool = True, slot_per_row=False):
    """The KV write of one decode token (positions on the device; kivi4 straight into the open
    page): with `queries`, as a step launches it, Q's and K's heads normed (Qwen3) and rotated
    in it, chained after the Q/K/V GEMV; else a plain write of rows (a batch's rows), with
    `slot_per_row` each row into its own sequence's kivi4 open page (PagedKVCache.write_rows)."""
    consts = dict(
        HQ=HQ if queries else 0, HKV=HKV, KV_HEADS=1 if queries else triton.next_power_of_2(HKV),
        D=D, LOG2D=D.bit_length() - 1, P=PAGE, K_FMT=FORMAT_CODES[k_format],
        V_FMT=FORMAT_CODES[v_format], ROPE=queries, N_ROT=D, NEOX=False, POSITIONS=True,
        Q_BIAS=False, K_BIAS=False, V_BIAS=False, HAS_NORM=queries,
        KIVI_DIRECT=k_format == "kivi4", LAUNCH_DEPENDENTS=True, WAIT_PRIOR=queries,
        SLOT_PER_ROW=slot_per_row,
    )  # fmt: skip
    options = {"num_warps": write_warps(consts["KV_HEADS"], D)}
    types = _planes(k_format, v_format)
    if slot_per_row:
        types["slot"] = "*i32"
    return _compile(kv_write_kernel, consts, types, options, _unaligned_mins(k_format, v_format))


def _usage(kernel) -> str:
    return f"{kernel.metadata.num_warps} warps, shared {kernel.metadata.shared} B"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="*", help="K/V pairs, e.g. rot4/rot4 (default: all)")
    args = parser.parse_args(argv)
    pairs = [tuple(p.split("/")) for p in args.pairs] or ALL_PAIRS
    failed = 0
    jobs = [(f"split {k}/{v}", compile_split, (k, v)) for k, v in pairs]
    jobs += [(f"split writing {k}/{v}", compile_split, (k, v, None, True)) for k, v in pairs]
    jobs += [(f"write {k}/{v}", compile_write, (k, v)) for k, v in pairs]
    jobs += [(f"plain write {k}/{v}", compile_write, (k, v, False)) for k, v in pairs[:1]]
    jobs += [
        (f"batch write {k}/{v}", compile_write, (k, v, False, True))
        for k, v in pairs if k == "kivi4"
    ]  # fmt: skip
    jobs += [("reduce", compile_reduce, ())]
    jobs += [("reduce with sinks", compile_reduce, (None, True))]
    jobs += [("reduce in 8 bits too", compile_reduce, (None, False, True))]
    for name, build, build_args in jobs:
        start = time.perf_counter()
        try:
            kernel = build(*build_args)
        except Exception as error:  # report every kernel, then fail
            failed += 1
            print(f"{name}: FAILED {type(error).__name__}: {error}", flush=True)
            cause = error.__cause__
            while cause is not None:
                print(f"  caused by {type(cause).__name__}: {cause}", flush=True)
                cause = cause.__cause__
            continue
        took = time.perf_counter() - start
        print(f"{name}: compiled in {took:.1f} s ({_usage(kernel)})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
