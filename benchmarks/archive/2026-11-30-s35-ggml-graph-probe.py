"""Session 35's probe: what a split's ggml call costs by the graph's shape, on the host the GPU
sits in. The split (engine/hearth/staged_experts.py) runs ggml over c of a token's 8 picks
each pause; ggml's time is the longer half of the pause at c = 4, and about 59 us of it is a
fixed cost a call (session 26's probe). The graph main builds has, at c picks, 2 + 1 + 1 + 1 +
(c - 1) nodes (gate, up, SwiGLU, down, the weights' product, the slots' adds), each one a
barrier of ggml's 15 threads. Variants, each timed by run_at over addresses as the engine calls
it (x, ids and weights in, the sum out):

    main          as built (engine/hearth/cpu_experts.py)
    numpy-sum     the graph ends at the down's slots; numpy weights and sums them
    merged        gate and up as one repacked [2 n_ff] tensor, ggml_swiglu over it, numpy sum
    merged-ggml   merged, the product and the adds kept in ggml

    python benchmarks/archive/2026-11-30-s35-ggml-graph-probe.py OUT.json [THREADS]

It ran on commit 97e04e5 and reads that tree's CpuExperts internals (its _Graph, its bindings
of ggml_mul, ggml_add, ggml_view_2d and ggml_cont): check that commit out to run it again.

Experts of 4 Qwen3-30B-A3B layers (benchmarks.cpu_experts' file, random blocks); 20 "layers" a
step cycle through them, each with its own random picks.
"""

import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch  # noqa: F401 (imported first, as in the engine: ggml binds torch's libgomp)

from benchmarks.cpu_experts import experts_file
from engine.hearth.cpu_experts import CpuExperts, ExpertTensor, _Graph, gguf_experts
from engine.hearth.ggml_cpu import GGML_TYPE_F32, GGML_TYPE_I32, GgmlCpu, _library_dir, ggml

N_EXPERT, N_EMBD, STEP_LAYERS = 128, 2048, 20
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 15

lib = ggml()
lib.swiglu = ctypes.CDLL(str(_library_dir() / "libggml-base.so")).ggml_swiglu
lib.swiglu.restype, lib.swiglu.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_void_p]


class NumpySum(CpuExperts):
    """The graph ends at the down's [n_embd, k, T] slots; run_at weights and sums them."""

    def gate_up(self, ctx, x, ids):
        gate_w, up_w, _ = self._weights
        gate = lib.mul_mat_id(ctx, gate_w, x, ids)
        up = lib.mul_mat_id(ctx, up_w, x, ids)
        return lib.swiglu_split(ctx, gate, up)

    def _build_in(self, ctx, n_tokens, k):
        x = lib.new_tensor_3d(ctx, GGML_TYPE_F32, N_EMBD, 1, n_tokens)
        ids = lib.new_tensor_2d(ctx, GGML_TYPE_I32, k, n_tokens)
        h = self.gate_up(ctx, x, ids)
        y = lib.mul_mat_id(ctx, self._weights[2], h, ids)
        graph = lib.new_graph(ctx)
        lib.build_forward_expand(graph, y)
        ybuf = (ctypes.c_float * (n_tokens * k * N_EMBD)).from_address(lib.get_data(y))
        g = _Graph(ctx, graph, lib.get_data(x), lib.get_data(ids), 0, lib.get_data(y))
        g.slots = np.frombuffer(ybuf, np.float32).reshape(n_tokens, k, N_EMBD)
        g.w = np.zeros((n_tokens, 1, k), np.float32)
        g.sum = np.zeros((n_tokens, 1, N_EMBD), np.float32)
        g.w_at, g.sum_at = g.w.ctypes.data, g.sum.ctypes.data
        return g

    def run_at(self, n_tokens, k, x, ids, weights, out):
        with self.cpu.lock:
            g = self._graph(n_tokens, k)
            ctypes.memmove(g.x, x, n_tokens * N_EMBD * 4)
            ctypes.memmove(g.ids, ids, n_tokens * k * 4)
            ctypes.memmove(g.w_at, weights, n_tokens * k * 4)
            self.cpu.compute(g.graph)
            np.matmul(g.w, g.slots, out=g.sum)
            ctypes.memmove(out, g.sum_at, n_tokens * N_EMBD * 4)


def merged_tensor(layer: CpuExperts) -> int:
    """gate and up of each expert side by side as one [n_embd, 2 n_ff, n_expert] tensor,
    repacked as CpuExperts repacks."""
    gate, up, _ = layer.tensors
    g = np.asarray(gate.owner).reshape(N_EXPERT, -1)
    u = np.asarray(up.owner).reshape(N_EXPERT, -1)
    both = np.ascontiguousarray(np.concatenate([g, u], axis=1))
    layer._merged_bytes = both
    t = ExpertTensor.of_array("gate_up", gate.ggml_type, (N_EXPERT, 2 * gate.n_out, gate.n_in),
                              both)  # fmt: skip
    tensor = layer._repacked(t)
    assert tensor, "the merged tensor was not repacked"
    return tensor


class Merged(NumpySum):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.gate_up_w = merged_tensor(self)

    def gate_up(self, ctx, x, ids):
        return lib.swiglu(ctx, lib.mul_mat_id(ctx, self.gate_up_w, x, ids))


class MergedGgmlSum(CpuExperts):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.gate_up_w = merged_tensor(self)

    def _build_in(self, ctx, n_tokens, k):
        x = lib.new_tensor_3d(ctx, GGML_TYPE_F32, N_EMBD, 1, n_tokens)
        ids = lib.new_tensor_2d(ctx, GGML_TYPE_I32, k, n_tokens)
        weights = lib.new_tensor_3d(ctx, GGML_TYPE_F32, 1, k, n_tokens)
        h = lib.swiglu(ctx, lib.mul_mat_id(ctx, self.gate_up_w, x, ids))
        y = lib.mul(ctx, lib.mul_mat_id(ctx, self._weights[2], h, ids), weights)
        row, slot_stride = N_EMBD * 4, N_EMBD * k * 4
        out = lib.view_2d(ctx, y, N_EMBD, n_tokens, slot_stride, 0)
        for j in range(1, k):
            out = lib.add(ctx, out, lib.view_2d(ctx, y, N_EMBD, n_tokens, slot_stride, j * row))
        if not lib.is_contiguous(out):
            out = lib.cont(ctx, out)
        graph = lib.new_graph(ctx)
        lib.build_forward_expand(graph, out)
        return _Graph(ctx, graph, lib.get_data(x), lib.get_data(ids), lib.get_data(weights),
                      lib.get_data(out))  # fmt: skip


VARIANTS = {"main": CpuExperts, "numpy-sum": NumpySum, "merged": Merged,
            "merged-ggml": MergedGgmlSum}  # fmt: skip
out: dict = {"threads": THREADS}
Path("/tmp/cpu-experts").mkdir(exist_ok=True)
path = experts_file(Path("/tmp/cpu-experts"), 4)
cpu = GgmlCpu(THREADS)
built = time.perf_counter()
layers = {
    name: [cls(*gguf_experts(path, i), activation="silu", cpu=cpu, repack=True) for i in range(4)]
    for name, cls in VARIANTS.items()
}
out["build_s"] = time.perf_counter() - built
rng = np.random.default_rng(0)
x = (rng.standard_normal((1, N_EMBD)) * 0.02).astype(np.float32)
res = np.zeros((1, N_EMBD), np.float32)

# the same sums, every variant
for c in (3, 4, 8):
    ids = np.array([rng.choice(N_EXPERT, c, replace=False)], np.int32)
    w = rng.random((1, c)).astype(np.float32)
    ref = None
    for name, ls in layers.items():
        ls[1].run_at(1, c, x.ctypes.data, ids.ctypes.data, w.ctypes.data, res.ctypes.data)
        if ref is None:
            ref = res.copy()
        err = float(np.abs(res - ref).max() / np.abs(ref).max())
        out.setdefault("relative_difference_to_main", {}).setdefault(str(c), {})[name] = err
print("differences", out["relative_difference_to_main"], flush=True)


def per_call_us(ls, c, steps=24):
    routes = [[np.array([rng.choice(N_EXPERT, c, replace=False)], np.int32)
               for _ in range(STEP_LAYERS)] for _ in range(steps)]  # fmt: skip
    w = np.full((1, c), 1.0 / c, np.float32)
    xa, wa, ra = x.ctypes.data, w.ctypes.data, res.ctypes.data
    started = time.perf_counter()
    for step in routes:
        for i, ids in enumerate(step):
            ls[i % 4].run_at(1, c, xa, ids.ctypes.data, wa, ra)
    return (time.perf_counter() - started) / (steps * STEP_LAYERS) * 1e6


for ls in layers.values():
    per_call_us(ls, 4, 4)
for c in (3, 4, 5):
    rounds: dict[str, list[float]] = {name: [] for name in layers}
    for _ in range(7):
        for name, ls in layers.items():
            rounds[name].append(per_call_us(ls, c))
    out.setdefault("us_a_call", {})[str(c)] = {
        name: {"median": statistics.median(v), "min": min(v), "rounds": v}
        for name, v in rounds.items()
    }
    print(c, {name: round(statistics.median(v), 1) for name, v in rounds.items()}, flush=True)

# numpy's weighted sum alone, at 4 slots
slots = rng.standard_normal((1, 4, N_EMBD)).astype(np.float32)
w4 = np.ones((1, 1, 4), np.float32)
s = np.zeros((1, 1, N_EMBD), np.float32)
started = time.perf_counter()
for _ in range(10000):
    np.matmul(w4, slots, out=s)
out["numpy_sum_us"] = (time.perf_counter() - started) / 10000 * 1e6
print("numpy sum", out["numpy_sum_us"], flush=True)
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
