"""A probe, not the engine's kernel: kivi4 K / rot4 V sealed pages of one decode query group
read by a Gluon kernel laid out by hand, beside the engine's split kernel on the same cache.

    python3 2026-12-02-s42-gluon-split.py --kv-heads 4 --depth 32768

The engine's split kernel (kernels/decode_attention.py) puts a page's [16 query rows, 64
positions] score tile on two warps; Qwen3-30B-A3B's 8 query heads a KV head fill half of the
16 rows the MMA needs, and the probabilities cross between the warps through shared memory at
every page. Here the tiles are transposed: scores^T [positions, queries] = K q^T, so the 8
queries are the MMA's N (m16n8k16: no padded rows), and 4 warps each own 16 positions of a
page with their own online softmax and their own [D, queries] accumulator, merged once after
the loop. The queries stay in registers as the B operand; the key bytes are read straight
into the A operand's layout; each warp's V tile goes through shared memory to come back
transposed as the A operand of acc^T += V^T p^T. Each page's bytes, scales and mins come
through cp.async, 3 pages in flight. --warp-parts writes each warp's softmax as a part of its
own (the reduce merges 4 times the parts) instead of merging the warps in the kernel;
--rotate (with it) rotates each part's rows back from V's rotated space, as the engine's split
kernel does.

What it leaves out (the engine's kernel has them): the open page, the position mask (a decode
query sees every sealed page whole without a window), the K/V write. It writes m, l and acc
for the check against torch (the parts merged there).
"""

from __future__ import annotations

import argparse
import dataclasses
import math

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

from benchmarks.kernels.timing import L2_DEFEAT_BYTES, kernel_durations, time_calls
from kernels import kv_formats
from kernels.kv_cache import PagedKVCache
from kernels.kv_formats import KVCacheSpec
from kernels.nibbles import _ROT4_ASM

W = gl.constexpr(4)  # warps a program, each 16 positions of a page
# the block's barrier: thread_barrier in Triton 3.6's Gluon, barrier in 3.8's
_barrier = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier
MMA = gl.constexpr(
    gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[W, 1, 1], instr_shape=[1, 16, 8])
)
OP_A = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2))
OP_B = gl.constexpr(gl.DotOperandLayout(operand_index=1, parent=MMA, k_width=2))
STAGES = gl.constexpr(3)  # pages in flight through cp.async
# V's bytes [W, 16 rows, 4 groups, 16 bytes]: each thread a group of a row (32 dims, one scale)
V4 = gl.constexpr(
    gl.BlockedLayout(
        size_per_thread=[1, 1, 1, 16],
        threads_per_warp=[1, 8, 4, 1],
        warps_per_cta=[W, 1, 1, 1],
        order=[3, 2, 1, 0],
    )
)
# key bytes two at a time: a u16 [W, 16, D/4] whose halves, split into their nibbles and joined,
# are OP_A's [W, 16, D/2] (its first register basis, the pair, is the u16's two bytes)
K_WORDS = gl.constexpr(
    gl.DistributedLinearLayout(
        reg_bases=[[0, 8, 0], [0, 0, 4], [0, 0, 8], [0, 0, 16]],
        lane_bases=[[0, 0, 1], [0, 0, 2], [0, 1, 0], [0, 2, 0], [0, 4, 0]],
        warp_bases=[[1, 0, 0], [2, 0, 0]],
        block_bases=[],
        shape=[4, 16, 32],
    )
)
# the query's rows, 8 values (16 bytes) a thread, for W copies of it; the output rows likewise
Q_ROWS = gl.constexpr(gl.BlockedLayout([1, 1, 8], [1, 2, 16], [W, 1, 1], [2, 1, 0]))
OUT_ROWS = gl.constexpr(gl.BlockedLayout([1, 4], [2, 16], [W, 1], [1, 0]))
# the copies' layouts: 16 bytes a thread where a row allows
K_COPY = gl.constexpr(gl.BlockedLayout([1, 1, 8], [1, 8, 4], [W, 1, 1], [2, 1, 0]))
KS_COPY = gl.constexpr(gl.BlockedLayout([1, 1, 4], [1, 1, 32], [W, 1, 1], [2, 1, 0]))
VS_COPY = gl.constexpr(gl.BlockedLayout([1, 1, 4], [1, 32, 1], [W, 1, 1], [2, 1, 0]))
# a stage's buffers (their first dimension, the stage, left out)
PLAIN3 = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[2, 1, 0]))
PLAIN4 = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[3, 2, 1, 0]))
# key words: rows of 64 bytes, each 16-byte chunk XORed by the row pair, so that ldmatrix's 8
# rows of a matrix fall in distinct banks
K_SMEM = gl.constexpr(gl.SwizzledSharedLayout(vec=8, per_phase=2, max_phase=4, order=[2, 1, 0]))
# a butterfly stage of the Hadamard transform across lanes: (x + partner, partner - x) by the
# lane's bit, the partner's value by a shuffle (the rows of an MMA tile are lane // 4)
_LANE_BUTTERFLY = [
    gl.constexpr(f"""
{{
.reg .b32 lane, bit;
.reg .f32 other;
.reg .pred hi;
shfl.sync.bfly.b32 other, $1, {4 << k}, 0x1f, 0xffffffff;
mov.u32 lane, %laneid;
and.b32 bit, lane, {4 << k};
setp.ne.u32 hi, bit, 0;
@hi sub.f32 $0, other, $1;
@!hi add.f32 $0, $1, other;
}}
""")
    for k in range(3)
]
_BUTTERFLY_0 = _LANE_BUTTERFLY[0]
_BUTTERFLY_1 = _LANE_BUTTERFLY[1]
_BUTTERFLY_2 = _LANE_BUTTERFLY[2]
V_SMEM = gl.constexpr(gl.SwizzledSharedLayout(vec=8, per_phase=1, max_phase=8, order=[2, 1, 0]))
_PAIR_ASM = gl.constexpr("""
{
.reg .b32 w, lo, hi, magic, sixteenth, bias;
mov.b32 magic, 0x64006400;
mov.b32 sixteenth, 0x2C002C00;
mov.b32 bias, 0xD400D400;
cvt.u32.u16 w, $4;
prmt.b32 w, w, 0, 0x4140;
lop3.b32 lo, w, 0x000F000F, 0x64006400, 0xEA;
lop3.b32 hi, w, 0x00F000F0, 0x64006400, 0xEA;
sub.f16x2 lo, lo, magic;
fma.rn.f16x2 hi, hi, sixteenth, bias;
mov.b32 {$0, $1}, lo;
mov.b32 {$2, $3}, hi;
}
""")


@gluon.jit
def _index3(N0: gl.constexpr, N1: gl.constexpr, N2: gl.constexpr, L: gl.constexpr):
    a = gl.arange(0, N0, layout=gl.SliceLayout(1, gl.SliceLayout(2, L)))
    b = gl.arange(0, N1, layout=gl.SliceLayout(0, gl.SliceLayout(2, L)))
    c = gl.arange(0, N2, layout=gl.SliceLayout(0, gl.SliceLayout(1, L)))
    a = gl.expand_dims(gl.expand_dims(a, 1), 2)
    b = gl.expand_dims(gl.expand_dims(b, 0), 2)
    c = gl.expand_dims(gl.expand_dims(c, 0), 1)
    return a, b, c


@gluon.jit
def _v_offsets():
    """Byte offsets [W, 16, 4, 16] of warp w's rows w*16.. of a page, in V4."""
    L3: gl.constexpr = gl.SliceLayout(3, V4)
    w, t, g = _index3(W, 16, 4, L3)
    b = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, V4))))
    b = gl.expand_dims(gl.expand_dims(gl.expand_dims(b, 0), 1), 2)
    return gl.expand_dims((w * 16 + t) * 64 + g * 16, 3) + b


@gluon.jit
def _codes(b):
    return gl.inline_asm_elementwise(
        _ROT4_ASM, "=r,=r,=r,=r,r", [b], dtype=(gl.float16, gl.float16), is_pure=True, pack=4
    )


@gluon.jit
def _key_codes(words, D: gl.constexpr):
    """Key words (u16, K_WORDS) -> the codes of the even and odd channels as f16 [W, 16, D/2]
    in OP_A's layout."""
    e0, e1, o0, o1 = gl.inline_asm_elementwise(
        _PAIR_ASM, "=h,=h,=h,=h,h", [words],
        dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=1,
    )  # fmt: skip
    shape: gl.constexpr = [W, 16, D // 2]
    even = gl.convert_layout(gl.reshape(gl.join(e0, e1), shape), OP_A, assert_trivial=True)
    odd = gl.convert_layout(gl.reshape(gl.join(o0, o1), shape), OP_A, assert_trivial=True)
    return even, odd


@gluon.jit
def _in_thread_stage(x, BIT: gl.constexpr, G: gl.constexpr, H: gl.constexpr):
    """A butterfly stage over bit BIT (3, 4 or 5) of dims i of x [W, H, G] in MMA's layout,
    where that bit is a register's."""
    y = gl.reshape(x, [W, H >> (BIT + 1), 2, 1 << BIT, G])
    a, b = gl.split(gl.permute(y, (0, 1, 3, 4, 2)))
    y = gl.permute(gl.join(a + b, a - b), (0, 1, 4, 2, 3))
    return gl.convert_layout(gl.reshape(y, [W, H, G]), MMA, assert_trivial=True)


@gluon.jit
def _rotate_back(even, odd, signs_ptr, G: gl.constexpr, D: gl.constexpr):
    """R^T of acc^T's rows: H_D, then signs / sqrt(D) (signs_ptr); D's bit 0 is even/odd, bits
    1-3 the lanes' (i bits 0-2), bits 4-6 registers'."""
    even, odd = even + odd, even - odd
    even = gl.inline_asm_elementwise(_BUTTERFLY_0, "=f,f", [even], dtype=gl.float32,
                                     is_pure=True, pack=1)  # fmt: skip
    odd = gl.inline_asm_elementwise(_BUTTERFLY_0, "=f,f", [odd], dtype=gl.float32,
                                    is_pure=True, pack=1)  # fmt: skip
    even = gl.inline_asm_elementwise(_BUTTERFLY_1, "=f,f", [even], dtype=gl.float32,
                                     is_pure=True, pack=1)  # fmt: skip
    odd = gl.inline_asm_elementwise(_BUTTERFLY_1, "=f,f", [odd], dtype=gl.float32,
                                    is_pure=True, pack=1)  # fmt: skip
    even = gl.inline_asm_elementwise(_BUTTERFLY_2, "=f,f", [even], dtype=gl.float32,
                                     is_pure=True, pack=1)  # fmt: skip
    odd = gl.inline_asm_elementwise(_BUTTERFLY_2, "=f,f", [odd], dtype=gl.float32,
                                    is_pure=True, pack=1)  # fmt: skip
    for bit in gl.static_range(3, 6):
        even = _in_thread_stage(even, bit, G, D // 2)
        odd = _in_thread_stage(odd, bit, G, D // 2)
    w, i, g = _index3(W, D // 2, G, MMA)
    at = signs_ptr + 2 * i + w * 0 + g * 0
    return even * gl.load(at), odd * gl.load(at + 1)


@gluon.jit
def _copy_page(page, live, head, stage, kbuf, ksbuf, kmbuf, vbuf, vsbuf, vmbuf, k_at, ks_at, v_at,
               vs_at, kq_ptr, ks_ptr, km_ptr, vq_ptr, vs_ptr, HKV: gl.constexpr, D: gl.constexpr,
               P: gl.constexpr, KG: gl.constexpr):  # fmt: skip
    """A page's bytes, scales and mins into stage `stage` of the buffers, by cp.async; none
    where not `live` (past the split's pages: the group stays, empty)."""
    base = gl.maximum(page, 0) * HKV + head  # -1: a page not grown
    words = kq_ptr.to(gl.pointer_type(gl.uint16), bitcast=True)
    cp.async_copy_global_to_shared(
        kbuf.index(stage), words + base * (P * D // 4) + k_at, (k_at >= 0) & live
    )
    group = base * (P // KG) * D + ks_at
    cp.async_copy_global_to_shared(ksbuf.index(stage), ks_ptr + group, (ks_at >= 0) & live)
    cp.async_copy_global_to_shared(kmbuf.index(stage), km_ptr + group, (ks_at >= 0) & live)
    cp.async_copy_global_to_shared(
        vbuf.index(stage), vq_ptr + base * (P * D // 2) + v_at, (v_at >= 0) & live
    )
    rows = base * P * 8 + vs_at
    cp.async_copy_global_to_shared(vsbuf.index(stage), vs_ptr + rows, (vs_at >= 0) & live)
    cp.async_copy_global_to_shared(vmbuf.index(stage), vs_ptr + rows + 4, (vs_at >= 0) & live)
    cp.commit_group()


@gluon.jit
def split_transposed_kernel(q_ptr, kq_ptr, ks_ptr, km_ptr, vq_ptr, vs_ptr, table_ptr, n_pages,
                            pages_per_split, m_ptr, l_ptr, acc_ptr, signs_ptr, HKV: gl.constexpr,
                            G: gl.constexpr, D: gl.constexpr, P: gl.constexpr,
                            KG: gl.constexpr, WARP_PARTS: gl.constexpr = False,
                            ROTATE: gl.constexpr = False):  # fmt: skip
    T: gl.constexpr = P // W
    gl.static_assert(T == 16)
    head = gl.program_id(0)
    split = gl.program_id(1)
    n_splits = gl.num_programs(1)
    first = split * pages_per_split
    last = gl.minimum(first + pages_per_split, n_pages)
    # q^T, already scaled by qk_scale * log2(e): [W, D/2, G] even and odd dims (B operand)
    # (loaded first, converted after the first pages' copies are out)
    wq, gq, jq = _index3(W, G, D, Q_ROWS)
    q = gl.load(q_ptr + (head * G + gq) * D + jq + wq * 0)  # [W, G, D]

    # where each copy reads within a page
    wk, tk, jk = _index3(W, T, D // 4, K_COPY)
    k_at = (wk * T + tk) * (D // 4) + jk
    ws, _, cs = _index3(W, 1, D, KS_COPY)
    ks_at = ((ws * T) // KG) * D + cs  # warp w's positions are in group w*T // KG
    v_at = _v_offsets()
    wv, tv, cv = _index3(W, T, 4, VS_COPY)
    vs_at = (wv * T + tv) * 8 + cv
    kbuf = gl.allocate_shared_memory(gl.uint16, [STAGES, W, T, D // 4], K_SMEM)
    ksbuf = gl.allocate_shared_memory(gl.float16, [STAGES, W, 1, D], PLAIN3)
    kmbuf = gl.allocate_shared_memory(gl.float16, [STAGES, W, 1, D], PLAIN3)
    vbuf = gl.allocate_shared_memory(gl.uint8, [STAGES, W, T, 4, 16], PLAIN4)
    vsbuf = gl.allocate_shared_memory(gl.float16, [STAGES, W, T, 4], PLAIN3)
    vmbuf = gl.allocate_shared_memory(gl.float16, [STAGES, W, T, 4], PLAIN3)
    v_even_smem = gl.allocate_shared_memory(gl.float16, [W, T, D // 2], V_SMEM)
    v_odd_smem = gl.allocate_shared_memory(gl.float16, [W, T, D // 2], V_SMEM)

    m_i = gl.full([W, G], float("-inf"), gl.float32, gl.SliceLayout(1, MMA))
    l_i = gl.zeros([W, G], gl.float32, gl.SliceLayout(1, MMA))
    acc_even = gl.zeros([W, D // 2, G], gl.float32, MMA)
    acc_odd = gl.zeros([W, D // 2, G], gl.float32, MMA)

    # copies past the split's pages read its last again (an empty split: the table's last)
    end = gl.minimum(gl.maximum(last - 1, first), n_pages - 1)
    ahead = gl.load(table_ptr + gl.minimum(first + STAGES - 1, end))
    for st in gl.static_range(STAGES - 1):
        page = gl.load(table_ptr + gl.minimum(first + st, end))
        _copy_page(page, first + st < last, head, st, kbuf, ksbuf, kmbuf, vbuf, vsbuf, vmbuf,
                   k_at, ks_at, v_at, vs_at, kq_ptr, ks_ptr, km_ptr, vq_ptr, vs_ptr, HKV, D, P,
                   KG)  # fmt: skip
    q_even, q_odd = gl.split(gl.reshape(q, [W, G, D // 2, 2]))
    q_even = gl.convert_layout(gl.permute(q_even, (0, 2, 1)), OP_B)
    q_odd = gl.convert_layout(gl.permute(q_odd, (0, 2, 1)), OP_B)
    for pg in range(first, last):
        it = pg - first
        _copy_page(ahead, pg + STAGES - 1 < last, head, (it + STAGES - 1) % STAGES, kbuf,
                   ksbuf, kmbuf, vbuf, vsbuf, vmbuf, k_at, ks_at, v_at, vs_at, kq_ptr, ks_ptr,
                   km_ptr, vq_ptr, vs_ptr, HKV, D, P, KG)  # fmt: skip
        ahead = gl.load(table_ptr + gl.minimum(pg + STAGES, end))
        cp.wait_group(STAGES - 1)
        _barrier()
        stage = it % STAGES

        c_even, c_odd = _key_codes(kbuf.index(stage).load(K_WORDS), D)
        ks = ksbuf.index(stage)
        km = kmbuf.index(stage)
        k_even = c_even * ks.slice(0, D // 2, 2).load(OP_A) + km.slice(0, D // 2, 2).load(OP_A)
        k_odd = c_odd * ks.slice(D // 2, D // 2, 2).load(OP_A) + km.slice(D // 2, D // 2, 2).load(
            OP_A
        )
        s = mma_v2(k_even, q_even, gl.zeros([W, T, G], gl.float32, MMA))
        s = mma_v2(k_odd, q_odd, s)  # scores^T [W, 16 positions, G]
        m_new = gl.maximum(m_i, gl.max(s, axis=1))
        alpha = gl.exp2(m_i - m_new)
        p = gl.exp2(s - gl.expand_dims(m_new, 1))
        l_i = l_i * alpha + gl.sum(p, axis=1)
        m_i = m_new

        v_even, v_odd = _codes(vbuf.index(stage).load(V4))
        vsc = gl.expand_dims(vsbuf.index(stage).load(gl.SliceLayout(3, V4)), 3)
        vmn = gl.expand_dims(vmbuf.index(stage).load(gl.SliceLayout(3, V4)), 3)
        v_even_smem.store(gl.reshape(v_even * vsc + vmn, [W, T, D // 2]))
        v_odd_smem.store(gl.reshape(v_odd * vsc + vmn, [W, T, D // 2]))
        _barrier()
        vt_even = v_even_smem.permute((0, 2, 1)).load(OP_A)  # V^T [W, D/2, 16]
        vt_odd = v_odd_smem.permute((0, 2, 1)).load(OP_A)
        pt = gl.convert_layout(p.to(gl.float16), OP_B)  # p^T as [W, K 16, N G]
        scale = gl.expand_dims(alpha, 1)
        acc_even = mma_v2(vt_even, pt, acc_even * scale)
        acc_odd = mma_v2(vt_odd, pt, acc_odd * scale)
        _barrier()  # this stage and the V tiles read before they are written again
    cp.wait_group(0)

    if WARP_PARTS:  # each warp's softmax a part of its own, for the reduce to merge
        part = (head * n_splits + split) * W
        wm = gl.arange(0, W, layout=gl.SliceLayout(1, gl.SliceLayout(1, MMA)))
        gm = gl.arange(0, G, layout=gl.SliceLayout(0, gl.SliceLayout(1, MMA)))
        rows = (part + gl.expand_dims(wm, 1)) * G + gl.expand_dims(gm, 0)
        gl.store(m_ptr + rows, m_i)
        gl.store(l_ptr + rows, l_i)
        if ROTATE:  # V's rows back from the rotated space
            acc_even, acc_odd = _rotate_back(acc_even, acc_odd, signs_ptr, G, D)
        both = gl.join(acc_even, acc_odd)  # [W, D/2, G, 2]: dims 2i and 2i + 1 side by side
        wa, ia, ga = _index3(W, D // 2, G, gl.SliceLayout(3, both.type.layout))
        at = ((part + wa) * G + ga) * D + 2 * ia
        pair = gl.arange(
            0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, both.type.layout)))
        )
        gl.store(
            acc_ptr
            + gl.expand_dims(at, 3)
            + gl.expand_dims(gl.expand_dims(gl.expand_dims(pair, 0), 1), 2),
            both,
        )
    else:  # the warps' softmaxes merged
        m_all = gl.max(m_i, axis=0)
        m_safe = gl.where(m_all == float("-inf"), 0.0, m_all)
        weight = gl.exp2(m_i - gl.expand_dims(m_safe, 0))
        l_all = gl.sum(l_i * weight, axis=0)
        w3 = gl.expand_dims(weight, 1)
        out_even = gl.sum(acc_even * w3, axis=0)  # [D/2, G]
        out_odd = gl.sum(acc_odd * w3, axis=0)
        part = head * n_splits + split
        g1 = gl.arange(0, G, layout=gl.SliceLayout(0, gl.SliceLayout(1, MMA)))
        gl.store(m_ptr + part * G + g1, m_all)
        gl.store(l_ptr + part * G + g1, l_all)
        out = gl.reshape(gl.permute(gl.join(out_even, out_odd), (1, 0, 2)), [G, D])
        out = gl.convert_layout(out, OUT_ROWS)
        g2 = gl.expand_dims(gl.arange(0, G, layout=gl.SliceLayout(1, OUT_ROWS)), 1)
        j2 = gl.expand_dims(gl.arange(0, D, layout=gl.SliceLayout(0, OUT_ROWS)), 0)
        gl.store(acc_ptr + (part * G + g2) * D + j2, out)


LAUNCHED: list = []  # the last launch's compiled kernel (its registers and shared memory)


def cache_at(kv_heads: int, capacity: int, depth: int):
    torch.cuda.empty_cache()
    probe = KVCacheSpec(1, kv_heads, 128, "kivi4", "rot4", max_tokens=capacity)
    layers = max(1, min(16, math.ceil(L2_DEFEAT_BYTES / (probe.bytes_per_token * depth))))
    spec = KVCacheSpec(layers, kv_heads, 128, "kivi4", "rot4", max_tokens=capacity)
    cache = PagedKVCache(spec, device="cuda")
    seq = cache.new_sequence()
    cache.grow(seq, depth)
    for layer in range(layers):
        for start in range(0, depth, 8192):
            n = min(8192, depth - start)
            k = torch.randn(n, kv_heads, 128, dtype=torch.float16, device="cuda")
            v = torch.randn(n, kv_heads, 128, dtype=torch.float16, device="cuda")
            cache.write(layer, seq, start, k, v)
    return cache, seq, layers


def reference(cache, seq, layer, q_scaled, n_sealed, kv_heads, group):
    """Per KV head: (m, l, acc) of the query rows over the sealed pages, in torch float32
    (exp2 of the scaled scores, V in its rotated space)."""
    table = cache.block_table(seq)[:n_sealed].long()
    k_planes, v_planes = cache._k[layer], cache._v[layer]
    b = k_planes["q"][table]  # [pages, H, 64, 64]
    codes = torch.stack(((b & 15), (b >> 4)), dim=-1).reshape(*b.shape[:-1], 128).float()
    order = torch.tensor([(c % 2) * 64 + c // 2 for c in range(128)], device=b.device)
    scale = k_planes["scale"][table][..., order].float()  # [pages, H, 2, 128]
    low = k_planes["min"][table][..., order].float()
    codes = codes.reshape(*codes.shape[:2], 2, 32, 128)
    keys = (codes * scale[:, :, :, None] + low[:, :, :, None]).reshape(-1, kv_heads, 64, 128)
    vb = v_planes["q"][table]
    vcodes = torch.stack(((vb & 15), (vb >> 4)), dim=-1).reshape(*vb.shape[:-1], 4, 32).float()
    vs = v_planes["scale"][table].float()[..., None]  # [pages, H, 64, 4, 1]
    vm = v_planes["min"][table].float()[..., None]
    values = (vcodes * vs + vm).reshape(-1, kv_heads, 64, 128)
    out = []
    for h in range(kv_heads):
        k = keys[:, h].reshape(-1, 128)
        v = values[:, h].reshape(-1, 128)
        s = q_scaled[h * group : (h + 1) * group].float() @ k.T
        m = s.max(dim=1).values
        p = torch.exp2(s - m[:, None])
        out.append((m, p.sum(dim=1), p @ v))
    return out


def merged(m, total, acc):
    """Splits merged: m, l [H, S, G], acc [H, S, G, D] -> [H, G, D] normalized."""
    top = m.max(dim=1, keepdim=True).values
    w = torch.exp2(m - top)
    return (acc * w[..., None]).sum(1) / (total * w).sum(1)[..., None]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--capacity", type=int, default=32832)
    parser.add_argument("--depth", type=int, default=32768)
    parser.add_argument("--splits", type=int, default=132)
    parser.add_argument("--ncu", action="store_true")
    parser.add_argument("--warp-parts", action="store_true", help="a part a warp, unmerged")
    parser.add_argument("--rotate", action="store_true", help="(with --warp-parts) V's back")
    args = parser.parse_args()
    group = args.heads // args.kv_heads
    cache, seq, layers = cache_at(args.kv_heads, args.capacity, args.depth)
    q = torch.randn(1, args.heads, 128, dtype=torch.float16, device="cuda")
    n_sealed = (args.depth - 1) // 64  # the open page is the last one
    q_scaled = (q[0].float() / math.sqrt(128) * 1.4426950408889634).half()
    splits = args.splits
    per = triton.cdiv(n_sealed, splits)
    parts = splits * (W.value if args.warp_parts else 1)
    outs = [
        (
            torch.empty(args.kv_heads, parts, group, device="cuda"),
            torch.empty(args.kv_heads, parts, group, device="cuda"),
            torch.empty(args.kv_heads, parts, group, 128, device="cuda"),
        )
        for _ in range(layers)
    ]
    table = cache.block_table(seq)
    hadamard = torch.tensor(kv_formats.hadamard(128), dtype=torch.float32, device="cuda")

    def run_gluon() -> None:
        for layer in range(layers):
            kp, vp = cache._k[layer], cache._v[layer]
            m, total, acc = outs[layer]
            LAUNCHED[:] = [split_transposed_kernel[(args.kv_heads, splits)](
                q_scaled, kp["q"], kp["scale"], kp["min"], vp["q"], vp["scale"], table,
                n_sealed, per, m, total, acc, cache._signs, HKV=args.kv_heads, G=group, D=128, P=64,
                KG=32, WARP_PARTS=args.warp_parts, ROTATE=args.rotate,
                num_warps=W,
            )]  # fmt: skip

    run_gluon()
    torch.cuda.synchronize()
    if args.ncu:  # only the launches, for Nsight Compute's kernel filter
        for _ in range(3):
            run_gluon()
        torch.cuda.synchronize()
        return
    compiled = LAUNCHED[-1]
    print(f"compiled: {compiled.n_regs} registers, {compiled.n_spills} spills, shared "
          f"{compiled.metadata.shared} B")  # fmt: skip
    for layer in range(min(2, layers)):
        want = reference(cache, seq, layer, q_scaled, n_sealed, args.kv_heads, group)
        got = merged(*outs[layer])
        for h, (_, l_ref, acc_ref) in enumerate(want):
            ref = acc_ref / l_ref[:, None]
            if args.rotate:  # R^T: H, then signs / sqrt(D), as the engine's split kernel does
                ref = (ref @ hadamard) * cache._signs[None, :]
            err = ((got[h] - ref).norm() / ref.norm()).item()
            print(f"layer {layer} head {h}: relative error {err:.2e}")
    gluon_us = time_calls(run_gluon, repeats=30) / layers * 1e6

    def run_engine() -> None:
        for layer in range(layers):
            cache.attend(layer, q, [seq])

    run_engine()
    engine_us = time_calls(run_engine, repeats=30) / layers * 1e6
    times = kernel_durations(run_gluon) | kernel_durations(run_engine)
    # the engine's kernels launched plainly, so that the profiler's split time is its own (a
    # dependent launch's includes its wait for the launch before)
    cache.tuning = dataclasses.replace(cache.tuning, chain_launches=False, overlap_reduce=False)
    plain = kernel_durations(run_engine)
    print(f"depth {args.depth}, {args.kv_heads} KV heads, {layers} layers, {splits} splits of "
          f"{per} pages, {parts} parts a head")  # fmt: skip
    print(f"gluon split alone: layer {gluon_us:.2f} us, kernel "
          f"{times.get('split_transposed_kernel', 0.0):.2f} us")  # fmt: skip
    print(f"engine split + reduce: layer {engine_us:.2f} us, split kernel "
          f"{times.get('decode_split_kernel', 0.0):.2f} us, reduce "
          f"{times.get('decode_reduce_kernel', 0.0):.2f} us")  # fmt: skip
    print(f"engine launched plainly: split kernel {plain.get('decode_split_kernel', 0.0):.2f} "
          f"us, reduce {plain.get('decode_reduce_kernel', 0.0):.2f} us")  # fmt: skip


if __name__ == "__main__":
    main()
