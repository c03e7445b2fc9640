"""A layer's routed experts computed on the CPU, from the GGUF's expert tensors as stored (the
file's mapped bytes, nothing dequantized), by ggml's own CPU kernels: the placement of
docs/decisions/0020-experts-in-ram.md that reads system RAM at the CPU's memory bandwidth, as
llama.cpp's --n-cpu-moe does.

    cpu = GgmlCpu(n_threads=4)  # engine/hearth/ggml_cpu.py
    experts = CpuExperts(*gguf_experts(path, layer), activation="silu", cpu=cpu, repack=True)
    y = experts.run(x, ids, weights)  # x [T, n_embd] float32, ids/weights [T, k] -> [T, n_embd]

For each token t, with e = ids[t, j] (the same sum as engine/hearth/moe_ops.py's `moe_ffn`):

    y[t] = sum_j weights[t, j] (Wdown[e] act(Wgate[e] x[t] + bg[e], Wup[e] x[t] + bu[e]) + bd[e])

The graph is llama.cpp's (src/llama-graph.cpp, build_moe_ffn) up to the down's k slots:
ggml_mul_mat_id over the [n_in, n_out, n_expert] tensors, gate and up as one repacked
[n_in, 2 n_ff, n_expert] tensor and ggml_swiglu over its halves where they allow it (silu, no
biases, one block type: llama.cpp's gate_up_exps form), else each with ggml_add_id for
gpt-oss's expert biases and ggml_swiglu_split (silu(g) u) or ggml_swiglu_oai. numpy then
weights the slots and sums them (one np.matmul): every node of a graph is a barrier of ggml's
threads, and this form has 3 where llama.cpp's has 4 + k (15 us less a call of 3-5 picks at 15
threads, docs/decisions/2026-11-30-ggml-experts-in-three-nodes.md).

ggml's CPU mul_mat rounds its input to the weights' dot-product partner format first (q8_K
for k-quants, q8_0 for MXFP4 and the legacy quants), exactly as llama.cpp does: the results
match llama.cpp's CPU experts, and differ from a float reference by that rounding
(tests/engine/hearth/test_cpu_experts.py bounds it).

ggml is reached through its public C API only (engine/hearth/ggml_cpu.py binds it); no field
of a ggml tensor is read or written from Python. A weight tensor's data pointer is set the way
llama.cpp sets its mapped weights': a CPU buffer over the mapped bytes
(ggml_backend_cpu_buffer_from_ptr) and ggml_backend_tensor_alloc at the tensor's address; with
`repack`, the way it sets the weights it repacks: a buffer of ggml's CPU_REPACK type and
ggml_backend_tensor_set, which rearranges the blocks (Q4_K into q4_K_8x8 on AVX2, say) for
wider kernels: 1.6-1.7x faster at one thread here (docs/decisions/0020-experts-in-ram.md), for a
copy of those matrices in RAM. Inputs and outputs live in the graph's own context, reached
with ggml_get_data.

Every input ggml would assert on (and so abort the process: ggml_abort) is checked here first
and refused with ValueError: block types outside SUPPORTED_TYPES, rows that are not whole
blocks, unaligned data, shapes that do not chain, expert ids out of range.

Costs: a layer keeps one ggml context with its weight tensors; one graph per token count is
built at its first use and kept (GRAPHS_KEPT, least recently used dropped), so a call is the
inputs' copies, one ggml_backend_graph_compute on the calling thread's OpenMP team (kept by
libgomp for that thread's next call: engine/hearth/ggml_cpu.py), the weighted sum and the
output's copy. Merging gate and up needs both side by side once, at construction (a
transient array of their bytes before the repack copies them). ctypes
releases the GIL for the compute, so another Python thread (the GPU's) runs meanwhile.
"""

from __future__ import annotations

import ctypes
import os
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from engine.gguf.ggml_types import GGML_TYPES, GGML_TYPES_BY_NAME
from engine.hearth.ggml_cpu import (
    GGML_TYPE_F32,
    GGML_TYPE_I32,
    GgmlCpu,
    InitParams,
    ggml,
    repack_buffer_type,
)
from engine.hearth.host_pages import collapse_to_huge_pages, prefer_huge_pages

# Block types ggml's CPU multiplies (ggml-cpu.c type_traits_cpu: a vec_dot for each) that the
# tests check against kernels/moe_reference.py (whose dequantizer, gguf's, reads these): the
# float formats, the legacy quants, Q4_K to Q6_K, MXFP4. Others ggml reads too (Q2_K, Q3_K,
# the i-quants) stay refused until a reference covers them.
SUPPORTED_TYPES = frozenset(
    GGML_TYPES_BY_NAME[name].id
    for name in ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K",
                 "Q6_K", "MXFP4")
)  # fmt: skip
ACTIVATIONS = ("silu", "swiglu_oai")
TENSOR_ALIGNMENT = 32  # ggml-impl.h: a buffer's base and its tensors' data
GRAPHS_KEPT = 4


@dataclass(frozen=True)
class ExpertTensor:
    """One [n_expert, n_out, n_in] expert tensor as stored (ggml's ne = [n_in, n_out,
    n_expert]): `nbytes` bytes of `ggml_type` blocks at `address`, which `owner` (a mapped
    file's array, say) keeps alive."""

    name: str
    ggml_type: int
    n_expert: int
    n_out: int
    n_in: int
    address: int
    owner: object = field(repr=False, compare=False)

    @classmethod
    def of_array(cls, name: str, ggml_type: int, shape: tuple[int, int, int], data) -> ExpertTensor:
        """Over a contiguous numpy array's bytes (a memmap of the file, or any buffer)."""
        array = np.asarray(data)
        if not array.flags.c_contiguous:
            raise ValueError(f"{name}: the bytes must be contiguous")
        tensor = cls(name, ggml_type, *shape, array.ctypes.data, array)
        if array.nbytes != tensor.nbytes:
            raise ValueError(f"{name}: {array.nbytes} bytes, {tensor.nbytes} expected")
        return tensor

    @property
    def type_name(self) -> str:
        known = GGML_TYPES.get(self.ggml_type)
        return known.name if known else f"type {self.ggml_type}"

    @property
    def row_bytes(self) -> int:
        return GGML_TYPES[self.ggml_type].row_bytes(self.n_in)

    @property
    def nbytes(self) -> int:
        return self.n_expert * self.n_out * self.row_bytes

    @property
    def expert_nbytes(self) -> int:
        return self.n_out * self.row_bytes

    def check(self) -> None:
        """ValueError where ggml would refuse (abort on) these bytes."""
        if self.ggml_type not in SUPPORTED_TYPES:
            raise ValueError(
                f"{self.name}: {self.type_name} experts have no CPU path here "
                f"(supported: {', '.join(GGML_TYPES[t].name for t in sorted(SUPPORTED_TYPES))})"
            )
        block = GGML_TYPES[self.ggml_type].block_size
        if self.n_in % block:
            raise ValueError(f"{self.name}: rows of {self.n_in} are not whole {block}-blocks")
        if self.address % TENSOR_ALIGNMENT:
            raise ValueError(
                f"{self.name}: data at an address not {TENSOR_ALIGNMENT}-byte aligned (a GGUF "
                "mapped whole keeps its tensors aligned)"
            )


def gguf_experts(path: str | os.PathLike[str], layer: int):
    """(gate, up, down, biases) of `layer` in a GGUF: ExpertTensors over the file mapped
    read-only, biases (gate, up, down) float32 [n_expert, n_out] or None (gpt-oss has them)."""
    from engine.gguf import read_model_info

    info = read_model_info(path)
    by_name = {t.name: t for t in info.tensors}
    mapped = np.memmap(path, dtype=np.uint8, mode="r")

    def raw(name):
        t = by_name[name]
        start = info.data_offset + t.offset
        return t, mapped[start : start + t.n_bytes]

    parts, biases = [], []
    for role in ("gate", "up", "down"):
        name = f"blk.{layer}.ffn_{role}_exps.weight"
        if name not in by_name:
            raise ValueError(f"{path}: no {name} (not a mixture-of-experts layer)")
        t, data = raw(name)
        n_in, n_out, n_expert = t.shape
        parts.append(ExpertTensor.of_array(name, t.ggml_type, (n_expert, n_out, n_in), data))
        bias = f"blk.{layer}.ffn_{role}_exps.bias"
        if bias in by_name:
            bt, bdata = raw(bias)
            if bt.ggml_type != GGML_TYPE_F32:
                raise ValueError(f"{bias}: {bt.type_name}, float32 expected")
            biases.append(bdata.view(np.float32).reshape(tuple(reversed(bt.shape))))
        else:
            biases.append(None)
    return parts[0], parts[1], parts[2], tuple(biases)


@dataclass
class _Graph:
    """One token count's graph and its context: where to write x and ids; the routing
    weights, the down's k slots (over ggml's memory) and their weighted sum, as numpy arrays."""

    context: int
    graph: int
    x: int
    ids: int
    weights: np.ndarray  # [T, 1, k] float32
    slots: np.ndarray  # [T, k, n_embd] float32, ggml's output
    total: np.ndarray  # [T, 1, n_embd] float32
    # weights' and total's addresses, kept: ndarray.ctypes.data costs a microsecond a call
    weights_at: int
    total_at: int

    @classmethod
    def of(cls, context: int, graph: int, x: int, ids: int, slots: int, n_tokens: int, k: int,
           n_embd: int) -> _Graph:  # fmt: skip
        floats = (ctypes.c_float * (n_tokens * k * n_embd)).from_address(slots)
        weights = np.zeros((n_tokens, 1, k), np.float32)
        total = np.zeros((n_tokens, 1, n_embd), np.float32)
        return cls(context, graph, x, ids, weights,
                   np.frombuffer(floats, np.float32).reshape(n_tokens, k, n_embd), total,
                   weights.ctypes.data, total.ctypes.data)  # fmt: skip


def _host_bytes(w: ExpertTensor) -> np.ndarray:
    """w's bytes as a uint8 array over its memory (w.owner keeps it alive)."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * w.nbytes).from_address(w.address))


class CpuExperts:
    """One layer's routed experts on ggml's CPU backend (module docstring). `biases` (gate,
    up, down): float32 [n_expert, n_out] arrays or None; swiglu_oai takes gpt-oss's alpha and
    limit. `repack`: each matrix whose mul_mat_id ggml's CPU device runs on a repacked copy
    (repack_buffer_type; ggml_backend_dev_supports_op says which) is copied into one, as
    llama.cpp does (a second copy of those bytes in RAM); the others, and all without
    `repack`, are read as mapped. `repacked` says which were."""

    def __init__(self, gate: ExpertTensor, up: ExpertTensor, down: ExpertTensor,
                 biases=(None, None, None), *, activation: str, cpu: GgmlCpu,
                 alpha: float = 1.702, limit: float = 7.0, repack: bool = False):  # fmt: skip
        if activation not in ACTIVATIONS:
            raise ValueError(f"experts with activation {activation!r} have no CPU path here")
        for w in (gate, up, down):
            w.check()
        n_expert, n_ff, n_embd = gate.n_expert, gate.n_out, gate.n_in
        if (up.n_expert, up.n_out, up.n_in) != (n_expert, n_ff, n_embd) or (
            down.n_expert, down.n_out, down.n_in) != (n_expert, n_embd, n_ff):  # fmt: skip
            raise ValueError(
                f"expert shapes do not chain: gate {gate.n_expert}x{gate.n_out}x{gate.n_in}, "
                f"up {up.n_expert}x{up.n_out}x{up.n_in}, down "
                f"{down.n_expert}x{down.n_out}x{down.n_in}"
            )
        self.n_expert, self.n_ff, self.n_embd = n_expert, n_ff, n_embd
        self.activation, self.alpha, self.limit = activation, alpha, limit
        self.cpu = cpu
        self.tensors = (gate, up, down)
        self.biases = tuple(
            None if b is None else _bias_array(b, n_expert, n, role)
            for b, n, role in zip(biases, (n_ff, n_ff, n_embd), ("gate", "up", "down"), strict=True)
        )
        lib = ggml()
        self._context = lib.init(InitParams(lib.tensor_overhead() * 12, None, True))
        self._buffers: list[int] = []
        self._graphs: OrderedDict[tuple[int, int], _Graph] = OrderedDict()
        self._finalizer = weakref.finalize(
            self, _free_layer, lib, self._context, self._buffers, self._graphs
        )
        # gate and up as one repacked tensor (module docstring), or None: each its own
        self._gate_up = self._merged_gate_up() if repack and self._merges_gate_up() else None
        # gate, up, down as the graph reads them: None where in _gate_up, else repacked or
        # mapped
        self._weights: list[int | None] = []
        repacked = []
        for w in self.tensors:
            if self._gate_up is not None and w is not down:
                self._weights.append(None)
                repacked.append(True)
                continue
            tensor = self._repacked(w) if repack else None
            repacked.append(tensor is not None)
            shape = (w.n_in, w.n_out, w.n_expert)
            self._weights.append(tensor or self._mapped(w.ggml_type, shape, w.address, w.nbytes))
        self.repacked = tuple(repacked)
        self._bias_tensors = [self._mapped_bias(b) for b in self.biases]

    def _merges_gate_up(self) -> bool:
        """Whether gate and up can be one tensor under ggml_swiglu: silu, no biases, one type."""
        gate, up, _ = self.tensors
        no_biases = self.biases[0] is None and self.biases[1] is None
        return self.activation == "silu" and no_biases and gate.ggml_type == up.ggml_type

    def _merged_gate_up(self) -> int | None:
        """Each expert's gate rows then its up rows as one [n_embd, 2 n_ff, n_expert] tensor
        in a repack buffer; None where the repack has no layout for it (each then its own)."""
        gate, up, _ = self.tensors
        both = np.empty((self.n_expert, 2, gate.expert_nbytes), np.uint8)
        both[:, 0] = _host_bytes(gate).reshape(self.n_expert, -1)
        both[:, 1] = _host_bytes(up).reshape(self.n_expert, -1)
        merged = ExpertTensor.of_array(
            f"{gate.name} + {up.name}", gate.ggml_type, (self.n_expert, 2 * self.n_ff, self.n_embd),
            both,
        )  # fmt: skip
        return self._repacked(merged)

    def _repacked(self, w: ExpertTensor) -> int | None:
        """`w` set into a buffer of ggml's repack type, if ggml's CPU device would run this
        layer's mul_mat_id on it (the check comes first: setting a tensor the repack has no
        layout for dereferences a null trait in ggml); else None, nothing kept."""
        found = repack_buffer_type()
        if found is None:
            return None
        device, buffer_type = found
        lib = ggml()
        tensor = lib.new_tensor_3d(self._context, w.ggml_type, w.n_in, w.n_out, w.n_expert)
        size = lib.backend_buft_get_alloc_size(buffer_type, tensor)
        buffer = lib.backend_buft_alloc_buffer(buffer_type, size)
        if not buffer:
            return None
        base = lib.backend_buffer_get_base(buffer)
        status = lib.backend_tensor_alloc(buffer, tensor, base)
        if status != 0 or not self._runs_repacked(device, tensor, w):
            lib.backend_buffer_free(buffer)  # the tensor stays unused in the context
            return None
        self._buffers.append(buffer)
        prefer_huge_pages(base, size)  # before the repack's writes make its pages
        lib.backend_tensor_set(tensor, w.address, 0, w.nbytes)
        collapse_to_huge_pages(base, size)  # those the writes did not get (host_pages.py)
        return tensor

    @staticmethod
    def _runs_repacked(device: int, tensor: int, w: ExpertTensor) -> bool:
        """Whether the CPU device supports a mul_mat_id of `tensor` (in its repack buffer) by
        float32 rows, as _build makes it."""
        lib = ggml()
        probe = lib.init(InitParams(lib.tensor_overhead() * 4 + 4096, None, True))
        try:
            x = lib.new_tensor_3d(probe, GGML_TYPE_F32, w.n_in, 1, 1)
            ids = lib.new_tensor_2d(probe, GGML_TYPE_I32, 1, 1)
            return bool(lib.backend_dev_supports_op(device, lib.mul_mat_id(probe, tensor, x, ids)))
        finally:
            lib.free(probe)

    @property
    def expert_nbytes(self) -> int:
        """Bytes one expert's three matrices take (biases aside): what a pick reads."""
        return sum(w.expert_nbytes for w in self.tensors)

    def _mapped(self, ggml_type: int, ne: tuple[int, ...], address: int, nbytes: int) -> int:
        """A tensor of the layer's context over `nbytes` at `address`, through a CPU buffer
        of its own over those bytes."""
        lib = ggml()
        if address % TENSOR_ALIGNMENT:
            raise ValueError(f"data at {address:#x} is not {TENSOR_ALIGNMENT}-byte aligned")
        make = (lib.new_tensor_1d, lib.new_tensor_2d, lib.new_tensor_3d)[len(ne) - 1]
        tensor = make(self._context, ggml_type, *ne)
        if not tensor or lib.nbytes(tensor) != nbytes:
            raise ValueError(f"ggml sizes a {ne} tensor of type {ggml_type} differently")
        buffer = lib.backend_cpu_buffer_from_ptr(address, nbytes)
        if not buffer:
            raise RuntimeError("ggml_backend_cpu_buffer_from_ptr failed")
        self._buffers.append(buffer)
        status = lib.backend_tensor_alloc(buffer, tensor, address)
        if status != 0 or lib.get_data(tensor) != address:
            raise RuntimeError(f"ggml_backend_tensor_alloc failed (status {status})")
        return tensor

    def _mapped_bias(self, bias: np.ndarray | None) -> int | None:
        """A [n_expert, n_out] float32 bias as a ggml tensor (ne [n_out, n_expert])."""
        if bias is None:
            return None
        return self._mapped(GGML_TYPE_F32, bias.shape[::-1], bias.ctypes.data, bias.nbytes)

    def run(self, x: np.ndarray, ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """x [T, n_embd] float32, ids [T, k] (each in 0..n_expert-1), weights [T, k] ->
        [T, n_embd] float32 (module docstring). Blocks until ggml is done; the GIL is released
        meanwhile."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        ids = np.ascontiguousarray(ids, dtype=np.int32)
        weights = np.ascontiguousarray(weights, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.n_embd:
            raise ValueError(f"x of shape {x.shape}, [T, {self.n_embd}] expected")
        if ids.ndim != 2 or ids.shape[0] != x.shape[0] or weights.shape != ids.shape:
            raise ValueError(f"ids {ids.shape} and weights {weights.shape} for {x.shape[0]} tokens")
        if ids.size and (ids.min() < 0 or ids.max() >= self.n_expert):
            raise ValueError(f"expert ids outside 0..{self.n_expert - 1}")
        n_tokens, k = ids.shape
        if n_tokens == 0:
            return np.zeros((0, self.n_embd), np.float32)
        out = np.empty((n_tokens, self.n_embd), np.float32)
        self.run_at(n_tokens, k, x.ctypes.data, ids.ctypes.data, weights.ctypes.data,
                    out.ctypes.data)  # fmt: skip
        return out

    def run_at(self, n_tokens: int, k: int, x: int, ids: int, weights: int, out: int) -> None:
        """`run` over buffers at host addresses, unchecked: x float32 [n_tokens, n_embd], ids
        int32 and weights float32 [n_tokens, k], out float32 [n_tokens, n_embd] (written).
        What a CUDA host function calls (expert_offload.ExpertsOnCpu): no CUDA; the ids must be
        in range (a top-k over the router's n_expert rows is)."""
        with self.cpu.lock:  # the graph's buffers are the layer's: one call at a time
            graph = self._graph(n_tokens, k)
            ctypes.memmove(graph.x, x, n_tokens * self.n_embd * 4)
            ctypes.memmove(graph.ids, ids, n_tokens * k * 4)
            ctypes.memmove(graph.weights_at, weights, n_tokens * k * 4)
            self.cpu.compute(graph.graph)
            np.matmul(graph.weights, graph.slots, out=graph.total)  # weighted, summed
            ctypes.memmove(out, graph.total_at, n_tokens * self.n_embd * 4)

    def _graph(self, n_tokens: int, k: int) -> _Graph:
        key = (n_tokens, k)
        graph = self._graphs.get(key)
        if graph is not None:
            self._graphs.move_to_end(key)
            return graph
        graph = self._build(n_tokens, k)
        self._graphs[key] = graph
        if len(self._graphs) > GRAPHS_KEPT:
            _, dropped = self._graphs.popitem(last=False)
            ggml().free(dropped.context)
        return graph

    def _build(self, n_tokens: int, k: int) -> _Graph:
        """llama.cpp's build_moe_ffn over this layer's tensors, for n_tokens tokens of k
        experts each, in a context that holds every intermediate (no_alloc off)."""
        lib = ggml()
        n_embd, n_ff = self.n_embd, self.n_ff
        floats = n_tokens * (n_embd + k + 5 * n_ff * k + 2 * n_embd * k)
        n_tensors = 12
        size = floats * 4 + n_tensors * (lib.tensor_overhead() + 64) + lib.graph_overhead()
        ctx = lib.init(InitParams(size + (1 << 16), None, False))
        if not ctx:
            raise MemoryError(f"ggml_init of {size} bytes failed")
        try:
            return self._build_in(ctx, n_tokens, k)
        except BaseException:
            lib.free(ctx)
            raise

    def _build_in(self, ctx: int, n_tokens: int, k: int) -> _Graph:
        lib = ggml()
        gate_w, up_w, down_w = self._weights
        bias_g, bias_u, bias_d = self._bias_tensors
        x = lib.new_tensor_3d(ctx, GGML_TYPE_F32, self.n_embd, 1, n_tokens)
        ids = lib.new_tensor_2d(ctx, GGML_TYPE_I32, k, n_tokens)
        if self._gate_up is not None:
            h = lib.swiglu(ctx, lib.mul_mat_id(ctx, self._gate_up, x, ids))  # [n_ff, k, T]
        else:
            gate = lib.mul_mat_id(ctx, gate_w, x, ids)  # [n_ff, k, T]
            up = lib.mul_mat_id(ctx, up_w, x, ids)
            if bias_g is not None:
                gate = lib.add_id(ctx, gate, bias_g, ids)
            if bias_u is not None:
                up = lib.add_id(ctx, up, bias_u, ids)
            if self.activation == "silu":
                h = lib.swiglu_split(ctx, gate, up)
            else:
                h = lib.swiglu_oai(ctx, gate, up, self.alpha, self.limit)
        y = lib.mul_mat_id(ctx, down_w, h, ids)  # [n_embd, k, T]
        if bias_d is not None:
            y = lib.add_id(ctx, y, bias_d, ids)
        graph = lib.new_graph(ctx)
        lib.build_forward_expand(graph, y)
        for name, t in (("x", x), ("ids", ids), ("slots", y)):
            if not t or not lib.get_data(t):
                raise RuntimeError(f"ggml left the graph's {name} without memory")
        if not lib.is_contiguous(y):
            raise RuntimeError("ggml made the down's slots non-contiguous")
        return _Graph.of(ctx, graph, lib.get_data(x), lib.get_data(ids), lib.get_data(y),
                         n_tokens, k, self.n_embd)  # fmt: skip

    def close(self) -> None:
        """Free the layer's ggml contexts and buffers now (garbage collection does it too)."""
        self._finalizer()


def _free_layer(lib, context: int, buffers: list[int], graphs: OrderedDict) -> None:
    for graph in graphs.values():
        lib.free(graph.context)
    graphs.clear()
    for buffer in buffers:
        lib.backend_buffer_free(buffer)
    lib.free(context)


def _bias_array(bias, n_expert: int, n_out: int, role: str) -> np.ndarray:
    """A bias as float32 [n_expert, n_out], contiguous and aligned for ggml (copied if not)."""
    array = np.asarray(bias, dtype=np.float32)
    if array.shape != (n_expert, n_out):
        raise ValueError(f"{role} bias of shape {array.shape}, ({n_expert}, {n_out}) expected")
    if not array.flags.c_contiguous or array.ctypes.data % TENSOR_ALIGNMENT:
        aligned = np.empty(array.size + TENSOR_ALIGNMENT // 4, np.float32)
        start = (-aligned.ctypes.data % TENSOR_ALIGNMENT) // 4
        out = aligned[start : start + array.size].reshape(array.shape)
        out[...] = array
        return out
    return array
