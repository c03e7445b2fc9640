"""The mixture-of-experts half of engine/hearth/ops.py's seam: the experts' preparation at load
and `moe_ffn`, as mixins of TorchOps (TorchMoeOps) and KernelsOps (KernelsMoeOps).

`moe_ffn_from_router(x, router, e, rule, bias)` is `moe_ffn(x, e, ops.matmul(x, router), rule,
bias)`, what a layer calls: on kernels/, the router's GEMV and the selection in one launch.

`moe_ffn` is the mixture-of-experts seam: x [T, n_embd]; `e` holds the layer's expert matrices
as stored (QuantExperts [n_expert, N, K]: gate and up [n_expert, n_ff_exp, n_embd], down
[n_expert, n_embd, n_ff_exp]) with optional biases [n_expert, N]; logits [T, n_expert] are the
router's output (plus `bias` [n_expert] where the model has one), and `rule` (the model's
config.MoeConfig) says how they pick the experts: ids [T, k] each token goes through, with
weights [T, k] (engine/hearth/routing.py); the result [T, n_embd] in x's dtype is, for each
token t,

    sum_j weights[t, j] * (act(x_t Wgate[e]^T + bg[e], x_t Wup[e]^T + bu[e]) Wdown[e]^T + bd[e])
    with e = ids[t, j], act = silu(g) * u, or gpt-oss's swiglu_oai (engine/hearth/config.py)

Only the selected experts' weights are read. TorchOps dequantizes them: grouped by expert for
many rows (each selected expert once; this asks the device which experts were chosen, so it is
not for a CUDA graph), or for a few rows (decode) by gathering each row's expert blocks on the
device and dequantizing them there, which a CUDA graph can capture. KernelsOps runs the expert
GEMV (kernels/moe_*, docs/kernels-moe.md): the experts uploaded once as kernels.ExpertWeight,
the experts picked and each step's pairs grouped by expert on the device in one launch
(kernels.moe_routing.select_and_route; through `moe_ffn_from_router`, with the router's own
GEMV in that launch: route_from_router), gate and up in one launch with the activation, down
(h rounded to 8 bits in its own programs) with the routing-weighted sum over the slots; nothing
is read back, so a decode step is captured whole; rows of more (token, slot) pairs than one
launch takes (kernels.moe_routing.MAX_PAIRS, 256), a prefill chunk, go through the same kernels
in slices of tokens. A chunk of more than MOE_GEMM_MIN_TOKENS tokens (a prefill chunk) goes
instead through the grouped GEMM (kernels/moe_grouped_gemm.py): the pairs aligned to expert
blocks on the device, each expert's blocks dequantized in registers into f16 tiles for the
tensor cores, one launch for gate+up and one for down over the whole chunk, nothing read back
to the host (docs/decisions/0021-moe-prefill-by-dequantized-bmm.md: why not dequantized
experts and bmm).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.hardware.cpu_probe import physical_cores
from engine.hearth.config import SWIGLU_OAI_ALPHA, SWIGLU_OAI_LIMIT
from engine.hearth.expert_offload import (
    ExpertsOnCpu,
    RamExperts,
    expert_slots,
    experts_on_cpu,
    in_host_memory,
    pinned_copy,
    read_in_place,
)
from engine.hearth.host_dequant import dequantize
from engine.hearth.moe_before_norm import RoutingBeforeNorm
from engine.hearth.routing import select_experts
from engine.hearth.split_tuning import staging_slots
from engine.hearth.staged_experts import StagedExperts, StagingArea, expert_sizes, whole_experts
from engine.hearth.weights import QuantExperts, QuantWeight
from kernels.dequant_torch import MXFP4_TYPE, dequantize_mxfp4


@dataclass
class ExpertWeights:
    """One layer's routed experts for `moe_ffn` (see the module docstring): the matrices as
    stored on the ops' device, biases [n_expert, N] float32 or None."""

    gate: QuantExperts
    up: QuantExperts
    down: QuantExperts
    activation: str  # "silu" or "swiglu_oai"
    gate_bias: torch.Tensor | None = None
    up_bias: torch.Tensor | None = None
    down_bias: torch.Tensor | None = None

    @property
    def n_expert(self) -> int:
        return self.gate.n_expert


@dataclass
class PackedExperts:
    """One layer's routed experts in the expert GEMV's layout (KernelsOps): kernels.ExpertWeight
    gate, up and down (the file's blocks split into planes, each with its bias where the model
    has one), and the gated activation as kernels.GluActivation."""

    gate: object
    up: object
    down: object
    activation: object

    @property
    def n_expert(self) -> int:
        return self.gate.n_expert


def swiglu_oai(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """gpt-oss's clamped SwiGLU (ggml_swiglu_oai): g * sigmoid(alpha g) * (u + 1), with
    g = min(gate, limit) and u = clamp(up, -limit, limit)."""
    g = gate.clamp(max=SWIGLU_OAI_LIMIT)
    u = up.clamp(-SWIGLU_OAI_LIMIT, SWIGLU_OAI_LIMIT)
    return g * torch.sigmoid(SWIGLU_OAI_ALPHA * g) * (u + 1)


# an expert tensor as stored, or a function reading it (onto the device) when it is needed
ExpertsSource = QuantExperts | Callable[[], QuantExperts]


def _read(source: ExpertsSource) -> QuantExperts:
    return source() if callable(source) else source


class TorchMoeOps:
    """TorchOps' mixture-of-experts operations (see the module docstring); the class using it
    provides device, supports, gated_ffn_activation, the CPU's dequantized-expert cache
    (_experts, _experts_bytes) and the CPU experts' thread pools by thread count
    (_ggml_cpus)."""

    # moe_ffn: up to this many (token, expert) pairs gather their experts' blocks on the device
    # (graph-safe, each pair's expert dequantized on its own); more group the rows by expert
    MOE_GATHER_MAX_PAIRS = 16
    # dequantized experts kept on the CPU (least recently used dropped past this many bytes)
    EXPERT_CACHE_BYTES = 1 << 30

    def prepare_experts(
        self,
        gate: ExpertsSource,
        up: ExpertsSource,
        down: ExpertsSource,
        activation: str,
        biases: tuple = (None, None, None),
    ) -> ExpertWeights:
        """One layer's experts on the device (blocks as stored), for `moe_ffn`; `biases` for
        gate, up and down, [n_expert, N] float32 or None. Each of gate, up and down is a
        QuantExperts, or a function reading one (ExpertsSource)."""
        gate, up, down = (_read(w) for w in (gate, up, down))
        for w in (gate, up, down):
            if not self.supports(w.ggml_type):
                raise ValueError(f"{w.name}: ggml type {w.type_name} is not supported")
        on = [b if b is None else b.to(self.device) for b in biases]
        return ExpertWeights(gate, up, down, activation, *on)

    def prepare_experts_in_ram(
        self,
        gate: QuantExperts,
        up: QuantExperts,
        down: QuantExperts,
        activation: str,
        biases: tuple = (None, None, None),
        n_slots: int = 0,
    ) -> RamExperts | ExpertWeights | PackedExperts:
        """One layer's experts in host memory (pinned when the device is a GPU) and a cache of
        `n_slots` of them on the device, for `moe_ffn`; with n_slots 0, read in place over the
        bus (engine/hearth/expert_offload.py)."""
        host = self._host_experts(gate, up, down, activation, biases)
        if n_slots == 0:
            return read_in_place(host, self.device)
        cache = expert_slots(host, n_slots, self.device)
        return RamExperts.of(host, cache, self._forget_slots(cache))

    def prepare_experts_on_cpu(
        self,
        gate: QuantExperts,
        up: QuantExperts,
        down: QuantExperts,
        activation: str,
        biases: tuple = (None, None, None),
        n_threads: int | None = None,
    ) -> ExpertsOnCpu:
        """One layer's experts computed by the CPU (ggml's kernels, n_threads of them; None:
        the physical cores, llama.cpp's default, less one on a GPU, whose stepping thread
        spins on a core of its own while the driver's thread runs ggml) from the blocks as
        mapped from the file, or ggml's repacked copy of those it runs repacked, for `moe_ffn`
        (expert_offload.ExpertsOnCpu). Every layer asking for the same thread count shares
        one thread pool."""
        return experts_on_cpu(gate, up, down, activation, biases, self._ggml_cpu(n_threads))

    def prepare_experts_staged(
        self,
        gate: QuantExperts,
        up: QuantExperts,
        down: QuantExperts,
        activation: str,
        biases: tuple,
        n_expert_used: int,
        cpu_picks: int,
        n_threads: int | None = None,
    ) -> StagedExperts:
        """One layer's experts in host memory with a one-token step's picks split: the first
        `cpu_picks` of the n_expert_used by ggml (n_threads as prepare_experts_on_cpu), the
        others copied to device slots shared by every such layer (engine/hearth/
        staged_experts.py; room for the shares split_tuning tries around cpu_picks); other
        steps read them in place."""
        if not 0 < cpu_picks < n_expert_used:
            raise ValueError(
                f"{cpu_picks} of {n_expert_used} picks on the CPU: a split needs between 1 and "
                f"{n_expert_used - 1}"
            )
        host = self._host_experts(gate, up, down, activation, biases)
        sizes = expert_sizes(host)
        n_slots = staging_slots(n_expert_used, cpu_picks)
        area = self._staging.get((sizes, n_slots))
        if area is None:
            area = self._staging[(sizes, n_slots)] = StagingArea(sizes, n_slots, self.device)
        cpu = experts_on_cpu(gate, up, down, activation, biases, self._ggml_cpu(n_threads))
        slots = area.slot_experts(host)
        whole = whole_experts(host, area, pin=self.device.type == "cuda")
        return StagedExperts(
            read_in_place(host, self.device), slots, whole, area, cpu.experts, cpu_picks,
            self._forget_slots(slots),
        )  # fmt: skip

    def _ggml_cpu(self, n_threads: int | None):
        from engine.hearth.ggml_cpu import GgmlCpu

        cores = physical_cores()
        n = n_threads or (max(1, cores - 1) if self.device.type == "cuda" else cores)
        if n not in self._ggml_cpus:
            self._ggml_cpus[n] = GgmlCpu(n)
        return self._ggml_cpus[n]

    def _host_experts(self, gate, up, down, activation, biases) -> ExpertWeights:
        """The experts as stored, copied into host memory (pinned for a GPU)."""
        pin = self.device.type == "cuda"
        on = [in_host_memory(w.data, pin) for w in (gate, up, down)]
        parts = [dataclasses.replace(w, data=d) for w, d in zip((gate, up, down), on, strict=True)]
        host_biases = (None if b is None else in_host_memory(b.float(), pin) for b in biases)
        return ExpertWeights(*parts, activation, *host_biases)

    def _forget_slots(self, cache):
        """What RamExperts calls after rewriting slots: the dequantized copies of those slots
        that _dense_expert keeps on the CPU are stale."""

        def forget(slots: list[int]) -> None:
            if not isinstance(cache, ExpertWeights):
                return
            for w in (cache.gate, cache.up, cache.down):
                for slot in slots:
                    dropped = self._experts.pop((id(w.data), slot), None)
                    if dropped is not None:
                        self._experts_bytes -= dropped.numel() * dropped.element_size()

        return forget

    def moe_ffn_from_router(self, x: torch.Tensor, router, experts, rule, bias=None,
                            quantized=None):  # fmt: skip
        """moe_ffn of the router's logits (router: the prepared [n_expert, n_embd] matrix)."""
        return self.moe_ffn(x, experts, self.matmul(x, router), rule, bias, quantized)

    # a one-token step of a layer with a folded router computes its scores before wo and picks
    # its experts beside wo (KernelsOps; kernels/router_beside_wo.py); False: from the norm's
    # output, as every step (benchmarks compare the two)
    scores_beside_wo = True

    def fold_router(self, layer, rule) -> object | None:
        """The layer's router folded for scores before its output projection and picks beside
        it (KernelsOps, where kernels/moe_one_token_rule.py lets the layer), else None: plain
        torch routes from the norm's output."""
        return None

    def norm_and_moe_ffn(self, readers: list, a: torch.Tensor, h: torch.Tensor, weight, eps: float,
                         moe, rule, bias=None, scores=None):  # fmt: skip
        """(f, y, h, shared): rms_norm_for(readers, a, weight, eps, residual=h, bias=bias),
        then moe_ffn_from_router on its y with the layer's MoeBlock `moe` (f: the routed
        experts' output). KernelsOps takes the norm into the router's launch where it can, or
        with `scores` (from matmul_and_scores) routes the experts by them."""
        if scores is not None:
            raise ValueError("routing by scores beside wo is KernelsOps' (fold_router)")
        y, h, shared = self.rms_norm_for(readers, a, weight, eps, residual=h, bias=bias)
        f = self.moe_ffn_from_router(y, moe.router, moe.experts, rule, moe.router_bias, shared)
        return f, y, h, shared

    def moe_ffn(self, x: torch.Tensor, experts, logits: torch.Tensor, rule, bias=None,
                quantized=None):  # fmt: skip
        """The routed experts' feed-forward (see the module docstring); `quantized`: x in 8
        bits where the norm that made x wrote it too (KernelsOps: see its moe_ffn)."""
        logits = logits.float() if bias is None else logits.float() + bias
        ids, weights = select_experts(
            logits, rule.n_expert_used, gating=rule.gating, normalize=rule.normalize
        )
        return self.moe_ffn_selected(x, experts, ids, weights)

    def moe_ffn_selected(self, x: torch.Tensor, experts, ids: torch.Tensor, weights: torch.Tensor):
        """moe_ffn for experts already picked: ids [T, k], weights [T, k]."""
        if isinstance(experts, RamExperts):
            return experts.run(self.moe_ffn_selected, x, ids, weights)
        if isinstance(experts, ExpertsOnCpu):
            return experts.run(x, ids, weights)
        if isinstance(experts, StagedExperts):
            return experts.run(self.moe_ffn_selected, x, ids, weights)
        n_pairs = ids.numel()
        if n_pairs <= self.MOE_GATHER_MAX_PAIRS and self.device.type != "cpu":
            return self._moe_gathered(x, experts, ids, weights)
        return self._moe_grouped(x, experts, ids, weights)

    def _moe_grouped(self, x, experts: ExpertWeights, ids, weights) -> torch.Tensor:
        """Rows grouped by expert: each selected expert's matrices dequantized once."""
        out = torch.zeros(x.shape[0], experts.down.rows, dtype=torch.float32, device=x.device)
        for e in torch.unique(ids).tolist():
            rows, slot = (ids == e).nonzero(as_tuple=True)
            xe = x.index_select(0, rows).float()
            g = xe @ self._dense_expert(experts.gate, e).T
            u = xe @ self._dense_expert(experts.up, e).T
            if experts.gate_bias is not None:
                g = g + experts.gate_bias[e]
            if experts.up_bias is not None:
                u = u + experts.up_bias[e]
            y = self.gated_ffn_activation(g, u, experts.activation)
            y = y @ self._dense_expert(experts.down, e).T
            if experts.down_bias is not None:
                y = y + experts.down_bias[e]
            out.index_add_(0, rows, y * weights[rows, slot].float()[:, None])
        return out.to(x.dtype)

    def _moe_gathered(self, x, experts: ExpertWeights, ids, weights) -> torch.Tensor:
        """Each (token, expert) pair's matrices gathered and dequantized on the device: no
        value is read back to the host, so a CUDA graph can capture it."""
        n_tokens, k = ids.shape
        flat = ids.reshape(-1)
        xs = x.float().repeat_interleave(k, dim=0)  # row t*k + j is token t, for expert ids[t, j]

        def product(w: QuantExperts, inputs: torch.Tensor, bias) -> torch.Tensor:
            dense = _gathered_experts(w, flat)  # [pairs, rows, cols]
            y = torch.bmm(dense, inputs[:, :, None])[:, :, 0]
            return y if bias is None else y + bias.index_select(0, flat)

        g = product(experts.gate, xs, experts.gate_bias)
        u = product(experts.up, xs, experts.up_bias)
        y = product(
            experts.down, self.gated_ffn_activation(g, u, experts.activation), experts.down_bias
        )
        y = y * weights.reshape(-1, 1).float()
        return y.view(n_tokens, k, -1).sum(dim=1).to(x.dtype)

    def _dense_expert(self, w: QuantExperts, e: int) -> torch.Tensor:
        """Expert e of `w` as float32 [rows, cols] on the device; on the CPU kept (least recently
        used first out, past EXPERT_CACHE_BYTES)."""
        key = (id(w.data), e)
        dense = self._experts.get(key)
        if dense is not None:
            self._experts.move_to_end(key)
            return dense
        dense = _dequantize_on_device(w.expert(e))
        if self.device.type == "cpu":
            self._experts[key] = dense
            self._experts_bytes += dense.numel() * dense.element_size()
            while self._experts_bytes > self.EXPERT_CACHE_BYTES and len(self._experts) > 1:
                _, dropped = self._experts.popitem(last=False)
                self._experts_bytes -= dropped.numel() * dropped.element_size()
        return dense


def _dequantize_on_device(w: QuantWeight) -> torch.Tensor:
    """float32 [rows, cols] where w's blocks are: the device's torch dequantizer where kernels/
    has the format, else gguf's numpy one through the host."""
    if w.ggml_type == MXFP4_TYPE:
        return dequantize_mxfp4(w.data, w.cols)
    if w.is_float:
        return w.data.float()
    from kernels.dequant import dequantize as dequantize_packed
    from kernels.errors import UnsupportedTensor
    from kernels.packed_weight import PackedWeight

    try:
        packed = PackedWeight.from_gguf(w.data, w.ggml_type, (w.rows, w.cols), device=w.data.device)
        return dequantize_packed(packed, torch.float32)
    except UnsupportedTensor:
        return torch.from_numpy(dequantize(w)).to(w.data.device)


def _gathered_experts(w: QuantExperts, ids: torch.Tensor) -> torch.Tensor:
    """float32 [len(ids), rows, cols]: expert ids[i]'s matrix for each i, gathered on the
    device as blocks and dequantized there (see TorchOps._moe_gathered)."""
    blocks = w.data.index_select(0, ids)
    n = ids.numel()
    rows = QuantWeight(w.name, w.ggml_type, n * w.rows, w.cols, blocks.reshape(n * w.rows, -1))
    return _dequantize_on_device(rows).view(n, w.rows, w.cols)


class KernelsMoeOps(RoutingBeforeNorm):
    """KernelsOps' mixture-of-experts operations: the expert GEMV, and the grouped GEMM for
    chunks of more pairs (see the module docstring)."""

    # moe_ffn: chunks of more tokens than this go through the grouped GEMM. Measured on an
    # H200 (benchmarks/kernels/moe_prefill.py; docs/decisions/2026-11-29-grouped-gemm-weights-
    # as-m.md): at 64 tokens the grouped GEMM equals the expert GEMV in slices for
    # Qwen3-30B-A3B (536 against 544 us a layer) and beats it for gpt-oss-20b (489 against
    # 1,050), at 512 it is 5.6x and 7.7x; the GEMV costs 8.5-16 us a token, the GEMM ~0.5 ms a
    # layer at 64 and grows slowly. A batch's decode step of up to 64 rows (batch_graph's
    # buckets up to 64) stays on the GEMV.
    MOE_GEMM_MIN_TOKENS = 64

    def prepare_experts(
        self,
        gate: ExpertsSource,
        up: ExpertsSource,
        down: ExpertsSource,
        activation: str,
        biases: tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None] = (
            None,
            None,
            None,
        ),
    ) -> PackedExperts:
        """The layer's experts as kernels.ExpertWeight on the device, once, at load (the blocks
        split into the GEMV's planes: the same bytes; the file's copy is dropped after). Given
        functions reading them (ExpertsSource), each tensor is read once the one before it is
        in planes, so the device holds one file copy at a time, not three. A block
        type or row length the expert GEMV does not read is refused (ValueError, with the
        kernels' reason): capabilities.model_unsupported_reason refuses such files first."""
        return self._pack_experts(gate, up, down, activation, biases, self.device)

    def _pack_experts(self, gate, up, down, activation, biases, device) -> PackedExperts:
        from kernels.moe_gemv import GluActivation

        if activation not in ("silu", "swiglu_oai"):
            raise ValueError(f"experts with activation {activation!r} have no expert GEMV")
        # each read in _pack_one's frame: its file copy dropped before the next is read
        made = [
            self._pack_one(source, bias, device)
            for source, bias in zip((gate, up, down), biases, strict=True)
        ]
        act = GluActivation(activation, SWIGLU_OAI_ALPHA, SWIGLU_OAI_LIMIT)
        return PackedExperts(*made, act)

    def _pack_one(self, source: ExpertsSource, bias, device):
        from kernels.moe_gemv import ExpertWeight

        w = _read(source)
        try:
            return ExpertWeight.from_gguf(
                w.data, w.ggml_type, (w.n_expert, w.rows, w.cols), device, bias=bias
            )
        except self._k.UnsupportedTensor as exc:
            raise ValueError(f"{w.name} ({w.type_name}): {exc}") from None

    def _host_experts(self, gate, up, down, activation, biases) -> PackedExperts:
        """The experts in the expert GEMV's planes, in host memory (pinned for a GPU)."""
        packed = self._pack_experts(gate, up, down, activation, biases, torch.device("cpu"))
        if self.device.type != "cuda":
            return packed

        def pinned(w):
            planes = {name: pinned_copy(plane) for name, plane in w.packed.planes.items()}
            bias = None if w.bias is None else pinned_copy(w.bias)
            return dataclasses.replace(
                w, packed=dataclasses.replace(w.packed, planes=planes), bias=bias
            )

        return PackedExperts(
            pinned(packed.gate), pinned(packed.up), pinned(packed.down), packed.activation
        )

    def moe_ffn(self, x: torch.Tensor, experts, logits: torch.Tensor, rule, bias=None,
                quantized=None):  # fmt: skip
        """The expert GEMV (see the module docstring): select_and_route, expert_gate_up and
        expert_down per slice of at most MAX_PAIRS (token, slot) pairs; past
        MOE_GEMM_MIN_TOKENS tokens, select_experts and the grouped GEMM. The ids come from a
        top-k over the router's n_expert logits, so each is in range (the kernels do not
        check). `quantized`: x in 8 bits from the norm's launch (rms_norm_for with the experts
        among its readers), used where the step is one slice: a quantization launch fewer."""
        n_tokens, k = x.shape[0], rule.n_expert_used
        if isinstance(experts, (ExpertWeights, RamExperts, ExpertsOnCpu, StagedExperts)):
            return super().moe_ffn(x, experts, logits, rule, bias)  # picks, then _selected
        if n_tokens > self.MOE_GEMM_MIN_TOKENS:
            logits = logits.float() if bias is None else logits.float() + bias
            ids, weights = select_experts(logits, k, gating=rule.gating, normalize=rule.normalize)
            return self._moe_gemm(x, experts, ids, weights)
        from kernels.moe_routing import select_and_route

        def route(rows: slice):
            return select_and_route(
                logits[rows], k, softmax_all=rule.gating == "softmax",
                normalize=rule.normalize, bias=bias,
            )  # fmt: skip

        return self._expert_gemv(x, experts, k, route, quantized)

    def moe_ffn_from_router(self, x: torch.Tensor, router, experts, rule, bias=None,
                            quantized=None):  # fmt: skip
        """moe_ffn of the router's logits; where the experts take the expert GEMV and the
        router is a float matrix (kernels.moe_router.ROUTER_FORMATS: llama.cpp keeps
        ffn_gate_inp unquantized), each slice's routing comes from route_from_router: the
        router's GEMV, the selection and the grouping in one launch. Else (other experts, another
        router format, or past MOE_GEMM_MIN_TOKENS tokens: the grouped GEMM's chunks) the GEMV,
        then moe_ffn."""
        from kernels.moe_router import ROUTER_FORMATS, route_from_router

        k = rule.n_expert_used
        fmt = getattr(router, "fmt", None)  # a kernels.PackedWeight's (TorchOps' has none)
        if (
            not isinstance(experts, PackedExperts)
            or getattr(fmt, "name", None) not in ROUTER_FORMATS
            or x.shape[0] > self.MOE_GEMM_MIN_TOKENS
        ):
            return super().moe_ffn_from_router(x, router, experts, rule, bias, quantized)

        def route(rows: slice):
            routing, _ = route_from_router(
                x[rows], router, k, softmax_all=rule.gating == "softmax",
                normalize=rule.normalize, bias=bias,
            )  # fmt: skip
            return routing

        return self._expert_gemv(x, experts, k, route, quantized)

    def fold_router(self, layer, rule):
        """The layer's router folded for routing before its FFN norm where its experts are in
        the expert GEMV's planes and the layer can (moe_before_norm's _fold), else None."""
        if not isinstance(layer.moe.experts, PackedExperts):
            return None
        return self._fold(layer, rule)

    def norm_and_moe_ffn(self, readers: list, a: torch.Tensor, h: torch.Tensor, weight, eps: float,
                         moe, rule, bias=None, scores=None):  # fmt: skip
        """The FFN norm in the router's launch (norm_and_route: one launch a layer fewer) where
        the experts take the expert GEMV in one slice with x in 8 bits, the router is a float
        matrix and the norm would write its y in 8 bits (rms_norm_for's condition); else the
        norm, then moe_ffn_from_router. With `scores` (matmul_and_scores' picks, one token):
        _moe_ffn_beside."""
        from kernels.moe_router import ROUTER_FORMATS
        from kernels.moe_routing import MAX_PAIRS

        if scores is not None:
            return self._moe_ffn_beside(a, h, weight, eps, moe, rule, bias, scores)
        k, rows = rule.n_expert_used, a.shape[0]
        fmt = getattr(moe.router, "fmt", None)
        if (
            a.dim() != 2
            or h is None
            or not isinstance(moe.experts, PackedExperts | StagedExperts)
            or getattr(fmt, "name", None) not in ROUTER_FORMATS
            or rows > min(self.MOE_GEMM_MIN_TOKENS, MAX_PAIRS // k)
            or a.shape[1] % 32
            or not self._integer_readers(rows, readers)
        ):
            return super().norm_and_moe_ffn(readers, a, h, weight, eps, moe, rule, bias)
        r = self._k.norm_and_route(
            a, h, weight, eps, moe.router, k, softmax_all=rule.gating == "softmax",
            normalize=rule.normalize, bias=moe.router_bias, attn_bias=bias,
        )  # fmt: skip
        if isinstance(moe.experts, StagedExperts):  # its routing, the slots' GEMV on y
            ids, weights = r.routing.ids, r.routing.weights

            def slots_ffn(x, slots, slot_ids, slot_weights):
                routing = self._slot_routing(slot_ids, slot_weights, slots.n_expert)
                return self._expert_gemv(x, slots, k, lambda _rows: routing, r.quantized)

            f = moe.experts.run(self.moe_ffn_selected, r.y, ids, weights, slots_ffn)
        else:
            f = self._expert_gemv(r.y, moe.experts, k, lambda _rows: r.routing, r.quantized)
        return f, r.y, r.h, r.quantized

    def _slot_routing(self, slot_ids: torch.Tensor, slot_weights: torch.Tensor, n_slots: int):
        """The routing of a split's slots (staged_experts: pick c + j in slot j, ids 0..n-1 at
        every step and layer, of the area's n_slots): grouped once per pick count, by
        route_experts at the first (eager) step, and thereafter that grouping with this step's
        weights, no launch."""
        from kernels.moe_routing import route_experts

        n = slot_ids.shape[1]
        made = self._slot_routings.get((n, n_slots))
        if made is None:
            made = self._slot_routings[(n, n_slots)] = route_experts(slot_ids, None, n_slots)
        return dataclasses.replace(made, weights=slot_weights)

    def _expert_gemv(self, x: torch.Tensor, experts, k: int, route, quantized) -> torch.Tensor:
        """expert_gate_up and expert_down per slice of at most MAX_PAIRS (token, slot) pairs,
        route(rows) giving each slice's ExpertRouting; `quantized` (x in 8 bits) used where
        the step is one slice."""
        from kernels.moe_gemv import expert_down, expert_gate_up
        from kernels.moe_routing import MAX_PAIRS

        x = x.contiguous()
        n_tokens = x.shape[0]
        step = max(1, MAX_PAIRS // k)
        whole = quantized if n_tokens <= step else None
        parts = []
        for start in range(0, n_tokens, step):
            rows = slice(start, min(n_tokens, start + step))
            routing = route(rows)
            h = expert_gate_up(x[rows], experts.gate, experts.up, routing, experts.activation,
                               quantized=whole, then=experts.down)  # fmt: skip
            parts.append(expert_down(h, experts.down, routing))
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def moe_ffn_selected(self, x: torch.Tensor, experts, ids: torch.Tensor, weights: torch.Tensor):
        """moe_ffn for experts already picked (ids [T, k], weights [T, k]): experts in host
        memory through their device slots, or computed on the CPU, as TorchOps does; the rest
        through route_experts and the expert GEMV, or past MOE_GEMM_MIN_TOKENS tokens the
        grouped GEMM."""
        if isinstance(experts, (ExpertWeights, RamExperts, ExpertsOnCpu, StagedExperts)):
            return super().moe_ffn_selected(x, experts, ids, weights)
        if ids.shape[0] > self.MOE_GEMM_MIN_TOKENS:
            return self._moe_gemm(x, experts, ids, weights)
        from kernels.moe_gemv import expert_down, expert_gate_up
        from kernels.moe_routing import MAX_PAIRS, route_experts

        x = x.contiguous()
        n_tokens, k = ids.shape
        step = max(1, MAX_PAIRS // k)
        parts = []
        for start in range(0, n_tokens, step):
            rows = slice(start, min(n_tokens, start + step))
            routing = route_experts(ids[rows], weights[rows], experts.n_expert)
            h = expert_gate_up(x[rows], experts.gate, experts.up, routing, experts.activation)
            parts.append(expert_down(h, experts.down, routing))
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def _moe_gemm(self, x: torch.Tensor, experts: PackedExperts, ids, weights) -> torch.Tensor:
        """A chunk through the grouped GEMM (kernels.moe_grouped_gemm.grouped_moe)."""
        from kernels.moe_grouped_gemm import grouped_moe

        return grouped_moe(
            x, experts.gate, experts.up, experts.down, experts.activation, ids, weights
        )
