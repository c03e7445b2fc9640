"""The seam between the forward pass and what computes it: kernels/ on a GPU, plain torch else.

The forward pass (engine/hearth/forward.py) calls only these operations:

    w = ops.prepare(quant_weight)        once per matrix, at load
    y = ops.matmul(x, w, shared)         x: [T, n_in] -> y: [T, n_out]
    s = ops.shared_input(x, [w1, w2])    what matmuls of the same x share (8-bit x), or None
    s = ops.empty_shared(readers, rows)  empty 8-bit buffers that the kernel producing the
                                         readers' x fills (the decode attention's reduce), or None
    x = ops.embed_rows(quant_weight, ids)  rows of a (quantized) embedding table, on the host
    x = ops.gather_rows(w, ids)          rows of a prepared matrix, on its device (ids there)
    y = ops.rms_norm(x, weight, eps)     over the last axis
    y, h = ops.add_rms_norm(a, h, weight, eps, bias=None)
                                         h = h + a (+ bias); y = rms_norm(h) (one kernel)
    y, h, s = ops.rms_norm_for(readers, x, weight, eps, residual=h, dtype=None, bias=None)
                                         the same (h None without a residual), plus what the
                                         matmuls `readers` of y share (as shared_input)
    y = ops.gated_ffn_activation(gate, up, kind)   silu(gate) * up or gelu_tanh(gate) * up
    y, s = ops.gated_ffn_activation_for(readers, gate, up, kind)   the same, plus `s`
    r = ops.rope_positions(positions, table)      once per forward: what `rope` needs
    q = ops.rope(x, r, table)            x: [T, H, D]; "normal" pairs or "neox" halves
    q = ops.write_rotating(cache, layer, r, table, q, k, v, biases, norms, eps)
                                         Q, K, V [T, heads, D] out of the GEMV: biased, normed,
                                         rotated, K and V written, in the cache's one launch;
                                         the rotated q, or None for a prefill chunk and where
                                         the cache has no such launch (then rope_heads and
                                         cache.write)
    e = ops.prepare_experts(gate, up, down, activation, biases)   once per MoE layer, at load
    e = ops.prepare_experts_in_ram(gate, up, down, activation, biases, n_slots)
                                         the same kept in host memory, n_slots of them cached
                                         on the device, or (0) read in place over the bus
                                         (engine/hearth/expert_offload.py)
    e = ops.prepare_experts_on_cpu(gate, up, down, activation, biases, n_threads)
                                         the same computed by the CPU (ggml's kernels) from
                                         the file's mapped blocks (engine/hearth/cpu_experts.py)
    y = ops.moe_ffn(x, e, logits, rule, bias)  the routed experts' feed-forward (below)
    y = ops.moe_ffn_from_router(x, router, e, rule, bias)   the same from the router matrix
    f, y, h, s = ops.norm_and_moe_ffn(readers, a, h, weight, eps, moe, rule, bias, scores)
                                         rms_norm_for(..., residual=h, bias=bias), then
                                         moe_ffn_from_router on y (KernelsOps: the norm in the
                                         router's launch where it can; with `scores`, the
                                         picks made beside wo, their weights in the norm's)
    folded = ops.fold_router(layer, rule)   once per MoE layer, at load: the router folded
                                         with the FFN norm and wo (KernelsOps, where the layer
                                         can route a one-token step so), else None
    a, scores = ops.matmul_and_scores(x, wo, shared, folded, h, k)
                                         a one-token step's wo and its layer's top-k picks:
                                         the router's scores in a launch before wo's, the
                                         picks in wo's (kernels/router_beside_wo.py)

`moe_ffn` and the experts' preparation are engine/hearth/moe_ops.py (mixins of both classes);
KernelsOps' routing before the FFN norm is engine/hearth/moe_before_norm.py.

`select_ops(device)` picks `KernelsOps` (kernels/, Triton) on a GPU where kernels/ can run: the
blocks stay as stored in VRAM and are dequantized in registers by the GEMV. Elsewhere it picks
`TorchOps`, plain torch: the CPU path. TorchOps dequantizes a matrix with the `gguf` package's
numpy dequantizers (the oracle kernels/ is tested against) the first time it is used and keeps
the result, trading RAM (4 bytes a weight) for speed: dequantizing every weight at every step
took 1.2 s (numpy) to 8.5 s (torch) per token for the 135M starter model on this shared 2-core
machine. On the CPU KernelsOps runs only under TRITON_INTERPRET=1, for the tests.
"""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from engine.hearth.expert_offload import ExpertsOnCpu, RamExperts
from engine.hearth.host_dequant import DEQUANTIZABLE, dequantize
from engine.hearth.moe_ops import KernelsMoeOps, PackedExperts, TorchMoeOps, swiglu_oai
from engine.hearth.rope import RopeTable, rope_angles
from engine.hearth.staged_experts import StagedExperts
from engine.hearth.weights import QuantWeight


@dataclass
class PreparedWeight:
    """A matrix ready for `matmul`: the stored blocks and, once used, their dequantization."""

    source: QuantWeight
    dense: torch.Tensor | None = field(default=None, repr=False)


class TorchOps(TorchMoeOps):
    """Plain torch (see the module docstring)."""

    name = "torch"
    # True while a forward computes every row of its matrices as a one-row (decode step's)
    # product would, instead of by the faster many-row product: a speculative check then gives
    # each drafted position the logits plain decoding gives it, bit for bit (verify.py)
    rows_as_one = False

    def __init__(self, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32):
        self.device = torch.device(device)
        self.dtype = dtype
        # the matrices' inputs and outputs; the residual stream stays in `dtype`
        self.activation_dtype = dtype
        self._experts: OrderedDict[tuple[int, int], torch.Tensor] = OrderedDict()
        self._experts_bytes = 0
        self._ggml_cpus: dict[int, object] = {}  # prepare_experts_on_cpu's thread pools
        self._staging: dict[tuple, object] = {}  # prepare_experts_staged's slots, by layout
        # each RoPE table's inverse frequencies on the device (the table keeps them on the
        # CPU); copied at a table's first use, which is eager, never inside a graph's capture
        self._inv_freqs: dict[RopeTable, torch.Tensor] = {}

    def supports(self, ggml_type: int) -> bool:
        return ggml_type in DEQUANTIZABLE

    def finish_load(self) -> None:
        """The weights are on the device: whatever the operations still set up before their
        first launch is done when this returns (nothing, here)."""

    def prepare(self, w: QuantWeight) -> PreparedWeight:
        if not self.supports(w.ggml_type):
            raise ValueError(f"{w.name}: ggml type {w.type_name} is not supported")
        return PreparedWeight(w)

    def prepare_joined(self, weights: list[QuantWeight]):
        """One matrix whose rows are the given matrices' rows in order (one GEMV instead of
        several at decode), or None when their types or row lengths differ."""
        first = weights[0]
        if any(w.ggml_type != first.ggml_type or w.cols != first.cols for w in weights):
            return None
        data = torch.cat([w.data.to(self.device) for w in weights])
        rows = sum(w.rows for w in weights)
        name = "+".join(w.name for w in weights)
        return self.prepare(QuantWeight(name, first.ggml_type, rows, first.cols, data))

    def gather_rows(self, w: PreparedWeight, ids: torch.Tensor) -> torch.Tensor:
        """Rows `ids` [T] (a device tensor) of a prepared matrix as float32 [T, n_in]."""
        if w.dense is None:
            w.dense = torch.from_numpy(dequantize(w.source)).to(self.device, self.dtype)
        return w.dense.index_select(0, ids).float()

    def shared_input(self, x: torch.Tensor, weights: list) -> object | None:
        """Whatever several matmuls of the same x can share (see KernelsOps); here nothing."""
        return None

    def empty_shared(self, readers: list, rows: int) -> object | None:
        """Buffers for x in 8 bits that x's producer fills (see KernelsOps); here none."""
        return None

    def matmul(self, x: torch.Tensor, w: PreparedWeight, shared: object | None = None):
        if w.dense is None:
            w.dense = torch.from_numpy(dequantize(w.source)).to(self.device, self.dtype)
        if self.rows_as_one and x.dim() == 2 and x.shape[0] > 1:
            return rows_as_one_product(x.to(w.dense.dtype), w.dense).to(x.dtype)
        return (x.to(w.dense.dtype) @ w.dense.T).to(x.dtype)

    def embed_rows(self, w: QuantWeight, ids: torch.Tensor) -> torch.Tensor:
        rows = dequantize(w, ids.cpu().numpy())
        return torch.from_numpy(rows).to(self.device, self.dtype)

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
        return (normed * weight).to(x.dtype)

    def gated_ffn_activation(self, gate: torch.Tensor, up: torch.Tensor, kind: str) -> torch.Tensor:
        if kind == "silu":
            return F.silu(gate) * up
        if kind == "gelu_tanh":
            return F.gelu(gate, approximate="tanh") * up
        if kind == "swiglu_oai":
            return swiglu_oai(gate, up)
        raise ValueError(f"unknown activation {kind!r}")

    def add_rms_norm(self, a: torch.Tensor, h: torch.Tensor, weight: torch.Tensor, eps: float,
                     bias=None):  # fmt: skip
        """(rms_norm(h + a), h + a): the residual add and the next norm; `bias` (the matrix
        that made a's) added to a first."""
        h = h + (a if bias is None else a + bias)
        return self.rms_norm(h, weight, eps), h

    def rms_norm_for(self, readers: list, x, weight, eps: float, residual=None, dtype=None,
                     bias=None):  # fmt: skip
        """(y, h, shared): rms_norm(x) (after x + bias when a bias is given, and h = x +
        residual when a residual is; h None otherwise) in `dtype` (default x's), and what the
        matmuls `readers` of y will share (shared_input; KernelsOps makes it in the same
        launch)."""
        if residual is None:
            y, h = self.rms_norm(x if bias is None else x + bias, weight, eps), None
        else:
            y, h = self.add_rms_norm(x, residual, weight, eps, bias=bias)
        y = y if dtype is None else y.to(dtype)
        return y, h, self.shared_input(y, readers)

    def gated_ffn_activation_for(self, readers: list, gate, up, kind: str):
        """(gated_ffn_activation(gate, up, kind), what the matmuls `readers` of it share)."""
        y = self.gated_ffn_activation(gate, up, kind)
        return y, self.shared_input(y, readers)

    def rope_positions(self, positions: torch.Tensor, table: RopeTable):
        """cos and sin [T, n_rot/2] of the positions' angles."""
        inv_freq = self._inv_freqs.get(table)
        if inv_freq is None:
            inv_freq = self._inv_freqs[table] = table.inv_freq.to(positions.device)
        return rope_angles(positions, inv_freq, table.attn_factor)

    def rope_heads(self, y: torch.Tensor, angles, table: RopeTable, n_q: int, n_k: int, *,
                   bias=None, norms=None, eps: float = 0.0) -> torch.Tensor:  # fmt: skip
        """Q, K (and V, if y has them) side by side out of one matrix, y [T, H, D] with heads
        0..n_q-1 Q's and the next n_k K's: a new [T, H, D] in y's dtype with `bias` [H D]
        added, Q's and K's heads RMS-normed by norms = (q_norm, k_norm) [D] where the model
        has them (Qwen3), then rotated; the heads past them (V's) only get their bias.
        KernelsOps does it in one launch."""
        if bias is not None:
            y = (y + bias.view(1, *y.shape[1:])).to(y.dtype)
        q, k, rest = y.split([n_q, n_k, y.shape[1] - n_q - n_k], dim=1)
        if norms is not None:
            q, k = self.rms_norm(q, norms[0], eps), self.rms_norm(k, norms[1], eps)
        qk = self.rope(torch.cat([q, k], dim=1), angles, table)
        return torch.cat([qk, rest], dim=1) if rest.shape[1] else qk

    def write_rotating(self, cache, layer: int, angles, table: RopeTable, q, k, v, biases,
                       norms, eps: float):  # fmt: skip
        """Q, K and V [T, heads, D] as the GEMV made them, written and rotated by the cache in
        one launch (KernelsOps, a cache with `write_rotating`): the rotated q; here None."""
        return None

    def write_and_attend(self, cache, layer: int, angles, table: RopeTable, q, k, v, biases,
                         options: dict):  # fmt: skip
        """A decode step's Q, K and V [1, heads, D] as the GEMV made them (no head norms):
        written, rotated and attended in the attention's one launch (KernelsOps, a cache with
        `attend_writing`), the attention's output; here None (write, then attend)."""
        return None

    def rope(self, x: torch.Tensor, angles, table: RopeTable):
        """Rotate x [T, H, D] by `angles` (from rope_positions)."""
        cos, sin = angles
        cos, sin = cos[:, None, :], sin[:, None, :]
        if table.layout == "neox":
            half = x.shape[-1] // 2
            a, b = x[..., :half], x[..., half:]
            return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


def rows_as_one_product(x: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    """x [T, n_in] @ dense.T, each row by the very call a decode step makes for one row (a
    fresh [1, n_in] tensor @ dense.T), so the same kernel and summation order: BLAS sums a
    many-row product in another order (MKL, measured: no row equal), and cuBLAS picks its
    kernels by shape, so a batched call is no promise either."""
    return torch.cat([x[t : t + 1].clone() @ dense.T for t in range(x.shape[0])])


class KernelsOps(KernelsMoeOps, TorchOps):
    """kernels/ where it has a kernel, plain torch for the rest.

    Matrices become kernels.PackedWeight (the file's blocks split once into planes of their
    fields, the same bytes). One row of x, and up to kernels.gemv.DP4A_MAX_ROWS rows of a Q4_K
    or Q6_K matrix (a small batch's decode step), go through the fused-dequantization GEMV
    (the integer one, x in 8 bits, for Q4_K and Q6_K); more rows (a larger batch's
    decode step, a prefill chunk) dequantize the matrix on the device (kernels/dequant.py) for
    one f16 product through torch's GEMM, keeping nothing (`_matmul_path` decides;
    docs/decisions/0022-batch-rows-by-dequantized-gemm.md has the figures).
    A type kernels/ does not pack falls back to TorchOps (dequantized once, kept). RMSNorm (with
    the residual add fused), SwiGLU and RoPE are kernels; GELU stays in torch. A mixture of
    experts' routed experts go through the expert GEMV (prepare_experts, moe_ffn).
    """

    name = "kernels"
    # The norm before a mixture of experts writes its output in 8 bits too (for the expert
    # GEMV, which reads x in 8 bits) at up to this many rows: moe_ffn passes it on where the
    # step is one launch of the expert GEMV, which 16 rows are at up to 16 experts a token
    # (kernels.moe_routing.MAX_PAIRS, 256 pairs); more rows go in slices, each quantizing its
    # own x, or through the grouped GEMM (x in f16).
    MOE_X_8BIT_MAX_ROWS = 16

    def __init__(self, device: torch.device | str, dtype: torch.dtype = torch.float32):
        super().__init__(device, dtype)
        import kernels

        kernels.require()
        self._k = kernels
        # a split's slots' grouping, by (picks, slots): KernelsMoeOps._slot_routing
        self._slot_routings: dict[tuple[int, int], object] = {}
        if self.device.type == "cuda":  # Triton's one-time setup, while the weights load
            from kernels.compiler_warmup import warm_compiler_in_background

            warm_compiler_in_background()
        # the GEMM's operand type for prefill: f16 on the tensor cores; the CPU (Triton's
        # interpreter, for the tests) keeps float32
        self._gemm_dtype = torch.float16 if self.device.type == "cuda" else torch.float32
        # f16 between the matrices on a GPU: every K, V and query then reaches the f16 KV
        # cache and attention without a cast (three launches a layer fewer), and the GEMVs
        # read half the activation bytes; the residual stream and the logits stay float32
        self.activation_dtype = self._gemm_dtype
        self._ropes: dict[RopeTable, object] = {}
        # gemv's chained integer GEMV on sm_90+, gemv's default: a programmatic dependent
        # launch that starts while the kernel before it ends and loads its first weights before
        # it waits for x (docs/kernels.md); HEARTH_GEMV_CHAINED=0 turns it off
        from kernels.act_quant import has_griddepcontrol

        self.chained_gemv = has_griddepcontrol(self.device) and (
            os.environ.get("HEARTH_GEMV_CHAINED", "1") != "0"
        )
        # the (format, rows) the dequantizing MMA takes: kernels.dequant_mma.ROWS_WON (from its
        # GPU sweep) on a GPU, none on the CPU (Triton's interpreter, where the dequantized
        # GEMM is the fast path), or HEARTH_DEQUANT_MMA_ROWS="Q4_K:9-64,Q6_K:9-64" to measure
        # the engine with other rows
        import kernels.dequant_mma

        forced = os.environ.get("HEARTH_DEQUANT_MMA_ROWS")
        measured = kernels.dequant_mma.ROWS_WON if self.device.type == "cuda" else {}
        self.dequant_mma_rows = (
            measured if forced is None else kernels.dequant_mma.parse_rows(forced)
        )

    def finish_load(self) -> None:
        """Wait for Triton's one-time setup started with these operations (kernels/
        compiler_warmup.py), if it is still running: the load then ends ready to launch, and
        the first token does not compute Triton's cache key a second time beside it."""
        if self.device.type == "cuda":
            from kernels.compiler_warmup import wait_for_warmup

            wait_for_warmup()

    def prepare(self, w: QuantWeight):
        try:
            return self._k.PackedWeight.from_gguf(
                w.data, w.ggml_type, (w.rows, w.cols), device=self.device
            )
        except self._k.UnsupportedTensor:
            return super().prepare(w)

    def gather_rows(self, w, ids: torch.Tensor) -> torch.Tensor:
        """Rows `ids` of a PackedWeight, dequantized on the device: float32 [T, n_in]."""
        if isinstance(w, PreparedWeight):
            return super().gather_rows(w, ids)
        from kernels.dequant import gather_rows

        return gather_rows(w, ids, torch.float32)

    def shared_input(self, x: torch.Tensor, weights: list) -> object | None:
        """x in 8 bits, once, for the integer GEMVs (Q4_K, Q6_K at one row) that read it:
        Q+K and V of a Q4_K_M layer then pay one quantization launch, not two."""
        rows = x.reshape(-1, x.shape[-1]).shape[0]
        return self._k.quantize_activation(x) if self._integer_readers(rows, weights) > 1 else None

    def empty_shared(self, readers: list, rows: int) -> object | None:
        """Empty 8-bit buffers for a one-row x that an integer GEMV of `readers` reads, for the
        kernel that produces x to fill in its own launch (the decode attention's reduce, for
        the attention output's matrix); None where no reader takes x in 8 bits."""
        if rows != 1 or not self._integer_readers(rows, readers):
            return None
        return self._k.empty_quantized(rows, readers[0].n_in, self.device)

    def _gemv_config(self, w, rows: int):
        """gemv's default config, which is the chained integer GEMV (a programmatic dependent
        launch) at one row; without `chained_gemv` (before sm_90, or HEARTH_GEMV_CHAINED=0) the
        same tiles launched plainly."""
        from kernels.gemv import default_config

        config = default_config(w.fmt.name, rows)
        if config.path == "dp4a" and config.chained and not self.chained_gemv:
            return dataclasses.replace(config, chained=False, early_next=False)
        return config

    def _integer_readers(self, rows: int, weights: list) -> int:
        """How many of `weights` take x in 8 bits at `rows` input rows (the integer GEMV)."""
        from kernels.gemv import default_config

        rows = 1 if self.rows_as_one else rows

        def in_8_bits(w) -> bool:
            if isinstance(w, RamExperts):  # through their device slots, x as it is
                return False
            if isinstance(w, ExpertsOnCpu):  # ggml's kernels take x as it is, on the host
                return False
            if isinstance(w, PackedExperts | StagedExperts):  # the expert GEMV, one launch
                return rows <= self.MOE_X_8BIT_MAX_ROWS
            if isinstance(w, PreparedWeight):
                return False
            if rows > 1 and self._matmul_path(rows, w) != "gemv":  # the MMA takes x in f16
                return False
            return default_config(w.fmt.name, rows).path == "dp4a"

        return sum(in_8_bits(w) for w in weights)

    def rms_norm_for(self, readers: list, x, weight, eps: float, residual=None, dtype=None,
                     bias=None):  # fmt: skip
        """The norm writes y in 8 bits too, in the same launch, when an integer GEMV reads y
        (even one: the quantization launch it would make is saved); a bias is added in it."""
        rows = x.reshape(-1, x.shape[-1]).shape[0]
        if not self._integer_readers(rows, readers):
            return super().rms_norm_for(readers, x, weight, eps, residual, dtype, bias)
        return self._k.rms_norm_quantized(x, weight, eps, residual, out_dtype=dtype, bias=bias)

    def gated_ffn_activation_for(self, readers: list, gate, up, kind: str):
        """SwiGLU writes its output in 8 bits too, in the same launch, for an integer GEMV."""
        rows = gate.reshape(-1, gate.shape[-1]).shape[0]
        if kind != "silu" or not self._integer_readers(rows, readers):
            return super().gated_ffn_activation_for(readers, gate, up, kind)
        return self._k.swiglu_quantized(gate, up)

    def _matmul_path(self, rows: int, w) -> str:
        """How `rows` rows of x meet the PackedWeight w: "gemv" for one row, and for the few
        rows the integer GEMV takes (kernels.gemv.DP4A_MAX_ROWS, Q4_K and Q6_K); else
        "dequant" (the matrix in f16 for torch's GEMM), a batch's decode step as a prefill
        chunk. Measured on an H200 at the 8B shapes (docs/decisions/0022-batch-rows-by-
        dequantized-gemm.md): the dequantized GEMM takes 13-99 us a matrix at 2 to 64 rows,
        the float GEMV 17-138 us at 2 rows and up to 557 us at 64 in slices of 16.
        "dequant_mma" (the blocks dequantized in registers for the tensor cores) at the
        (format, rows) `dequant_mma_rows` lists, the integer GEMV's few rows included:
        kernels.dequant_mma.ROWS_WON on a GPU, where its sweep measured it fastest (decision
        0022's follow-up)."""
        import kernels.dequant_mma
        import kernels.gemv

        if rows == 1:
            return "gemv"
        if kernels.dequant_mma.takes(w.fmt.name, rows, self.dequant_mma_rows):
            return "dequant_mma"
        few = rows <= kernels.gemv.DP4A_MAX_ROWS  # (no config built for a prefill chunk's rows)
        if few and self._gemv_config(w, rows).path == "dp4a":
            return "gemv"
        return "dequant"

    def matmul(self, x: torch.Tensor, w, shared: object | None = None) -> torch.Tensor:
        if isinstance(w, PreparedWeight):
            return super().matmul(x, w)
        rows = x.reshape(-1, x.shape[-1]).shape[0]
        if self.rows_as_one:  # every row as a decode step's GEMV computes it (TorchOps says why)
            config = dataclasses.replace(self._gemv_config(w, 1), rows_alike=True)
            return self._k.quant_matmul(x, w, config, quantized=shared)
        path = self._matmul_path(rows, w)
        if path == "gemv":
            return self._k.quant_matmul(x, w, self._gemv_config(w, rows), quantized=shared)
        if path == "dequant_mma":
            from kernels.dequant_mma import dequant_mma

            return dequant_mma(x, w)
        from kernels.dequant import dequantize

        try:
            dense = dequantize(w, self._gemm_dtype)
        except self._k.UnsupportedTensor:  # a re-layout this module does not know: slow path
            dense = w.dequantize().to(self._gemm_dtype)
        return (x.to(self._gemm_dtype) @ dense.T).to(x.dtype)

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return self._k.rms_norm(x, weight, eps)

    def add_rms_norm(self, a: torch.Tensor, h: torch.Tensor, weight: torch.Tensor, eps: float,
                     bias=None):  # fmt: skip
        return self._k.rms_norm(a, weight, eps, residual=h, bias=bias)

    def rope_positions(self, positions: torch.Tensor, table: RopeTable) -> torch.Tensor:
        return positions.to(torch.int32)  # the kernel computes its angles (in float32, as ggml)

    def rope(self, x: torch.Tensor, positions: torch.Tensor, table: RopeTable) -> torch.Tensor:
        return self._k.apply_rope(x, positions, self._rope_for(table))

    def rope_heads(self, y, angles, table: RopeTable, n_q: int, n_k: int, *, bias=None,
                   norms=None, eps: float = 0.0) -> torch.Tensor:  # fmt: skip
        """TorchOps.rope_heads in one launch (kernels/rope.py's fused bias and head norms)."""
        from kernels.rope import QKNorms

        qk_norms = None if norms is None else QKNorms(norms[0], norms[1], n_q, eps)
        return self._k.apply_rope(
            y, angles, self._rope_for(table), bias=bias, norms=qk_norms, n_rotated=n_q + n_k
        )

    def write_rotating(self, cache, layer: int, angles, table: RopeTable, q, k, v, biases,
                       norms, eps: float):  # fmt: skip
        """kernels' KV write with RoPE (kernels/kv_write.py): the biases, Q's and K's head norms
        and RoPE in the launch that stores K and V, a launch a layer fewer than rope_heads and
        cache.write; `angles` are the positions (rope_positions). Taken for a decode step's
        one row and a speculative check's rows (`rows_as_one`: each row written as its step
        writes it); None for a prefill chunk and where the cache has no such write (the plain
        cache, a batch's caches): then RoPE's own launch and the write. On an H200
        (docs/decisions/2026-11-29-rope-in-the-kv-write.md) Qwen3's decode step spent 110.8 us
        in its 48 writes against 164.8 in RoPE's launches and the plain writes, and 4096
        positions took 201.8 us in the one launch against 137.5 in the two."""
        write = getattr(cache, "write_rotating", None)
        if write is None or (q.shape[0] > 1 and not self.rows_as_one):
            return None
        from kernels.rope import QKNorms

        qk_norms = None if norms is None else QKNorms(norms[0], norms[1], q.shape[1], eps)
        return write(layer, angles, q, k, v, self._rope_for(table), biases=biases, norms=qk_norms)

    def write_and_attend(self, cache, layer: int, angles, table: RopeTable, q, k, v, biases,
                         options: dict):  # fmt: skip
        """kernels' decode attention that writes the step's row itself (the cache's
        `attend_writing`: kernels/decode_attention.py's WRITE): write_rotating's launch folded
        into the attention's, the same bits, a launch a layer fewer. One row only (a
        speculative check's rows go through write_rotating, each as a step writes it); None
        where the cache has no such call or refuses (then write_rotating and attend)."""
        attend = getattr(cache, "attend_writing", None)
        if attend is None or q.shape[0] != 1:
            return None
        rope = self._rope_for(table)
        return attend(layer, angles, q, k, v, rope, biases=biases, **options)

    def _rope_for(self, table: RopeTable):
        rope = self._ropes.get(table)
        if rope is None:
            from kernels.rope_tables import Rope

            rope = Rope(
                table.head_dim,
                table.n_rot,
                table.layout == "neox",
                table.inv_freq.numpy(),
                float(table.attn_factor),
            )
            self._ropes[table] = rope
        return rope

    def gated_ffn_activation(self, gate, up, kind: str) -> torch.Tensor:
        if kind == "silu":
            return self._k.swiglu(gate, up)
        return super().gated_ffn_activation(gate, up, kind)


def select_ops(device: torch.device | str, *, kernels: bool | None = None) -> TorchOps:
    """The operations for `device`: kernels/ where it can run (asked for, or by default on a
    GPU), plain torch otherwise. `kernels=True` on the CPU needs TRITON_INTERPRET=1 (tests)."""
    device = torch.device(device)
    if kernels is None:
        kernels = device.type != "cpu"
    if kernels:
        import kernels as kernels_package

        if kernels_package.available()[0]:
            return KernelsOps(device)
    return TorchOps(device)
