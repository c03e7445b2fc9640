"""The Hearth forward pass: llama, qwen2, qwen3, gemma3 and MoE decoders over a KV cache.

    model = Transformer.load(config, tensors, ops)
    logits = model.forward(tokens, positions, cache, n_keys=...)   # [vocab] of the last token

One layer, as llama.cpp builds it (models/llama.cpp, qwen2.cpp, qwen3.cpp, gemma3.cpp; the
differences are switched by ModelConfig, see engine/hearth/config.py):

    x  = rms_norm(h) ; q, k, v = x Wq (+bq), x Wk (+bk), x Wv (+bv)
    q, k = rms_norm per head (qwen3, gemma3) ; rope(q), rope(k)   ; cache <- k, v
    a  = attention(q, cache) Wo ; a = rms_norm(a) (gemma3) ; h = h + a
    x  = rms_norm(h) ; f = (act(x Wgate) * x Wup) Wdown ; f = rms_norm(f) (gemma3) ; h = h + f

A mixture-of-experts layer (qwen2moe, qwen3moe, gpt-oss, llama with experts) replaces the
feed-forward with its router and experts (ops.moe_ffn picks them by engine/hearth/routing.py's
rules and runs them; qwen2moe adds its gated shared expert), and gpt-oss adds its attention
sinks and biases.

then logits = rms_norm(h) Wout, soft-capped for gemma3 when the file says so. The embedding is
scaled by sqrt(n_embd) for gemma3. Only the rows whose logits are asked for go through the
output matrix (a 262k-entry vocabulary makes that the largest matrix of a small model).

Everything the step needs is a tensor argument (the embedded rows, positions) or preallocated
(the cache), so on a GPU one decode step is captured in a CUDA graph (decode_graph.py), and so
is a prompt chunk (prefill_graph.py); `n_keys` is the only Python number that varies, and a
decode step passes the cache's full length to keep it fixed (a chunk, a rounded-up count).

Fewer, larger launches for decode, where each kernel is a few microseconds: matrices that take
the same input and share a block type are joined at load (Q, K and V; gate and up), so one GEMV
reads them all; each residual add is fused into the norm that follows it; RoPE turns Q and K in
one launch, which also adds their biases (V's too where V is joined with them) and norms each
head (Qwen3's q_norm and k_norm), and where the cache writes with RoPE (kernels' paged cache)
that launch is the K/V write's too, or for a decode step the attention's own
(engine/hearth/attention_block.py); a mixture of experts' norm writes x in 8 bits for the
expert GEMV in its own launch.

A prefill chunk's layers all attend from the chunk's positions over the same slots, so its
attention mask (additive, repeated for the query heads of a KV head: [G*T, n_keys], the
prefill's largest buffer at long contexts) is made once, at the first layer, and passed to the
rest (one per sliding window): a layer's attention is then the gather and SDPA alone, with no
per-layer mask to build, convert or free (kernels/grouped_attention.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from engine.hearth.attention_block import attend, attention, joined_heads, project
from engine.hearth.config import HOST_ROWS_KEPT, ModelConfig
from engine.hearth.expert_offload import ExpertPlacement, RamExperts
from engine.hearth.host_dequant import dequantize
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.moe_ops import ExpertWeights
from engine.hearth.ops import PreparedWeight, TorchOps
from engine.hearth.rope import RopeTable, inverse_frequencies
from engine.hearth.weights import GGUFTensors, QuantWeight


@dataclass
class Projection:
    """One prepared matrix whose output columns are one or more named projections, in order."""

    weight: PreparedWeight
    parts: tuple[str, ...]  # e.g. ("q", "k", "v"), or ("v",)
    sizes: tuple[int, ...]  # output columns of each part


@dataclass
class MoeBlock:
    """A layer's router and routed experts (its shared expert, if any, is the Layer's
    feed-forward: ffn_in and w_down)."""

    router: PreparedWeight  # [n_expert, n_embd]
    experts: ExpertWeights  # or ops.PackedExperts, or expert_offload.RamExperts (in RAM)
    router_bias: torch.Tensor | None = None  # [n_expert]
    shared_gate: torch.Tensor | None = None  # [n_embd]: sigmoid(x . g) scales the shared expert
    # the router folded with the FFN norm's weight and wo (kernels/router_beside_wo.py): a
    # one-token step computes its scores before wo and picks its experts in wo's launch; None
    # where the layer routes otherwise
    folded: object | None = None


@dataclass
class Layer:
    attn_norm: torch.Tensor
    attn_in: list[Projection]  # q, k, v
    wo: PreparedWeight
    ffn_norm: torch.Tensor
    ffn_in: list[Projection]  # gate, up (a MoE layer's shared expert; empty without one)
    w_down: PreparedWeight | None
    moe: MoeBlock | None = None
    attn_sinks: torch.Tensor | None = None  # [n_head]
    bq: torch.Tensor | None = None
    bk: torch.Tensor | None = None
    bv: torch.Tensor | None = None
    bo: torch.Tensor | None = None
    q_norm: torch.Tensor | None = None
    k_norm: torch.Tensor | None = None
    post_attn_norm: torch.Tensor | None = None
    post_ffn_norm: torch.Tensor | None = None

    @property
    def joined_bias(self) -> torch.Tensor | None:
        """Q's and K's biases end to end (and V's where it is joined with them: see
        attention_block.joined_heads), for the one launch that adds them before RoPE; made once."""
        if self.bq is None:
            return None
        cached = self.__dict__.get("_joined_bias")
        if cached is None:
            with_v = joined_heads(self) == "qkv"
            parts = (self.bq, self.bk, self.bv) if with_v else (self.bq, self.bk)
            cached = self.__dict__["_joined_bias"] = torch.cat(parts).float().contiguous()
        return cached

    def matrices(self) -> list[PreparedWeight]:
        """The layer's 2-D matrices (not the experts)."""
        dense = [p.weight for p in (*self.attn_in, *self.ffn_in)] + [self.wo]
        extra = [self.w_down] if self.w_down is not None else []
        return dense + extra + ([self.moe.router] if self.moe is not None else [])


def _projections(
    ops: TorchOps, weights: list[QuantWeight], parts: tuple[str, ...], join: bool
) -> list[Projection]:
    """Consecutive matrices of the same block type joined into one (see the module docstring);
    e.g. Q4_K_M's Q and K (Q4_K) joined and V alone where it is Q6_K."""
    groups: list[list[int]] = []
    for i, w in enumerate(weights):
        if join and groups and weights[groups[-1][-1]].ggml_type == w.ggml_type:
            groups[-1].append(i)
        else:
            groups.append([i])
    out = []
    for group in groups:
        members = [weights[i] for i in group]
        joined = ops.prepare_joined(members) if len(group) > 1 else None
        if joined is None and len(group) > 1:  # row lengths differ: keep them apart
            out += _projections(ops, members, tuple(parts[i] for i in group), join=False)
            continue
        weight = joined if joined is not None else ops.prepare(members[0])
        out.append(
            Projection(weight, tuple(parts[i] for i in group), tuple(w.rows for w in members))
        )
    return out


ON_DEVICE = ExpertPlacement()  # every layer's experts on the device


def _upload_order(
    config: ModelConfig, experts: ExpertPlacement, output_name: str, table_on_device: bool
) -> list[str]:
    """The tensors Transformer.load puts on the device, in the order it asks for them (its
    Layer fields' order), for the uploader's read-ahead; norms and biases are read apart."""
    moe = config.moe
    suffix = "_shexp" if moe is not None else ""
    names = []
    for i in range(config.n_layer):
        p = f"blk.{i}."
        names += [p + f"attn_{n}.weight" for n in ("q", "k", "v", "output")]
        if moe is None or moe.n_ff_shexp > 0:
            names += [p + f"ffn_{n}{suffix}.weight" for n in ("gate", "up", "down")]
        if moe is not None:
            if not experts.in_ram(i, config.n_layer):
                names += [p + f"ffn_{n}_exps.weight" for n in ("gate", "up", "down")]
            names.append(p + "ffn_gate_inp.weight")
    return names + [output_name] + (["token_embd.weight"] if table_on_device else [])


class Transformer:
    HOST_ROWS_KEPT = HOST_ROWS_KEPT  # 64 MiB at 4096 values a row

    def __init__(
        self,
        config: ModelConfig,
        ops: TorchOps,
        embedding: QuantWeight,
        layers: list[Layer],
        output_norm: torch.Tensor,
        output: PreparedWeight,
        rope: RopeTable,
        rope_swa: RopeTable,
        output_is_embedding: bool = False,
    ):
        self.config, self.ops = config, ops
        self.embedding, self.layers = embedding, layers
        self.output_norm, self.output = output_norm, output
        self.rope, self.rope_swa = rope, rope_swa
        self.output_is_embedding = output_is_embedding
        self._host_rows: dict[int, torch.Tensor] = {}
        self._device_table = None

    @classmethod
    def load(
        cls,
        config: ModelConfig,
        tensors: GGUFTensors,
        ops: TorchOps,
        *,
        join: bool = True,
        experts: ExpertPlacement = ON_DEVICE,
    ) -> Transformer:
        """Take the model's tensors from the file (quantized blocks as stored) onto ops.device;
        `join` joins the matrices that share an input and a block type (see the docstring);
        `experts` says which layers keep their routed experts in host memory, with how big a
        device cache (engine/hearth/expert_offload.py)."""
        device = ops.device
        if config.moe is not None:
            experts.check(config.moe.n_expert, config.moe.n_expert_used)

        def matrices(prefix: str, names: tuple[str, ...], parts: tuple[str, ...]):
            weights = [tensors.matrix(prefix + n, device) for n in names]
            return _projections(ops, weights, parts, join)

        def vector(name: str) -> torch.Tensor | None:
            found = tensors.optional_vector(name)
            return None if found is None else found.to(device)

        def moe_block(p: str, in_ram: bool) -> MoeBlock:
            def matrices(kind: str):  # a layer in RAM reads them from the mapped file
                return tensors.experts(f"{p}ffn_{kind}_exps.weight", None if in_ram else device)

            def bias(kind: str):
                return tensors.optional_float_tensor(f"{p}ffn_{kind}_exps.bias")

            biases = (bias("gate"), bias("up"), bias("down"))
            if not in_ram:  # each read once the one before is packed: one file copy at a time
                readers = [functools.partial(matrices, kind) for kind in ("gate", "up", "down")]
                routed = ops.prepare_experts(*readers, config.activation, biases)
            else:
                parts = (matrices("gate"), matrices("up"), matrices("down"))
                if experts.on_cpu:
                    routed = ops.prepare_experts_on_cpu(
                        *parts, config.activation, biases, experts.cpu_threads
                    )
                elif experts.split_picks:
                    routed = ops.prepare_experts_staged(
                        *parts, config.activation, biases, config.moe.n_expert_used,
                        experts.split_picks, experts.cpu_threads,
                    )  # fmt: skip
                else:
                    routed = ops.prepare_experts_in_ram(
                        *parts, config.activation, biases, experts.cache_slots
                    )
            router = tensors.matrix(p + "ffn_gate_inp.weight", device)
            # ids are a top-k over the router's rows, and the expert GEMV reads expert `id`'s
            # blocks unchecked: one row per expert keeps every id inside the tensors
            if router.rows != routed.n_expert:
                raise ValueError(
                    f"{router.name} has {router.rows} rows for {routed.n_expert} experts"
                )
            return MoeBlock(
                router=ops.prepare(router),
                experts=routed,
                router_bias=vector(p + "ffn_gate_inp.bias"),
                shared_gate=vector(p + "ffn_gate_inp_shexp.weight"),
            )

        moe = config.moe
        # the dense feed-forward, or a MoE layer's shared expert
        ffn_suffix = "_shexp" if moe is not None else ""
        has_ffn = moe is None or moe.n_ff_shexp > 0
        output_name = "output.weight" if "output.weight" in tensors else "token_embd.weight"
        table_on_device = ops.name == "kernels" and device.type != "cpu"
        table_on_device = table_on_device and output_name != "token_embd.weight"
        tensors.plan_uploads(_upload_order(config, experts, output_name, table_on_device), device)
        try:
            layers = []
            for i in range(config.n_layer):
                p = f"blk.{i}."
                attn = ("attn_q.weight", "attn_k.weight", "attn_v.weight")
                ffn = (f"ffn_gate{ffn_suffix}.weight", f"ffn_up{ffn_suffix}.weight")
                down = f"{p}ffn_down{ffn_suffix}.weight"
                layers.append(
                    Layer(
                        attn_norm=vector(p + "attn_norm.weight"),
                        attn_in=matrices(p, attn, ("q", "k", "v")),
                        wo=ops.prepare(tensors.matrix(p + "attn_output.weight", device)),
                        ffn_norm=vector(p + config.ffn_norm_tensor),
                        ffn_in=matrices(p, ffn, ("gate", "up")) if has_ffn else [],
                        w_down=ops.prepare(tensors.matrix(down, device)) if has_ffn else None,
                        moe=(
                            moe_block(p, experts.in_ram(i, config.n_layer))
                            if moe is not None
                            else None
                        ),
                        attn_sinks=vector(p + "attn_sinks.weight") if config.attn_sinks else None,
                        bq=vector(p + "attn_q.bias"),
                        bk=vector(p + "attn_k.bias"),
                        bv=vector(p + "attn_v.bias"),
                        bo=vector(p + "attn_output.bias"),
                        q_norm=vector(p + "attn_q_norm.weight"),
                        k_norm=vector(p + "attn_k_norm.weight"),
                        post_attn_norm=(
                            vector(p + "post_attention_norm.weight") if config.post_norms else None
                        ),
                        post_ffn_norm=vector(p + "post_ffw_norm.weight")
                        if config.post_norms
                        else None,
                    )
                )
                if moe is not None:
                    layers[-1].moe.folded = ops.fold_router(layers[-1], moe)
            # The embedding is kept as mapped from the file: the CPU path dequantizes the rows it
            # reads; on a GPU, device_embedding() puts its blocks there once (the decode graph and
            # the prefill read their rows on the device). A tied output matrix is the same tensor.
            embedding = tensors.matrix("token_embd.weight")
            rope = config.rope
            factors = tensors.optional_vector("rope_freqs.weight")

            def table(base: float, scale: float) -> RopeTable:
                inv_freq = inverse_frequencies(rope.n_rot, base, scale, factors, rope.yarn)
                return RopeTable(inv_freq, rope.attn_factor, rope.layout, config.head_dim)

            model = cls(
                config,
                ops,
                embedding,
                layers,
                output_norm=vector("output_norm.weight"),
                output=ops.prepare(tensors.matrix(output_name, device)),
                rope=table(rope.freq_base, rope.freq_scale),
                rope_swa=table(rope.freq_base_swa, rope.freq_scale_swa),
                output_is_embedding=output_name == "token_embd.weight",
            )
            if table_on_device:  # read with the rest, not by the first prompt's pageable copy
                model._device_table = ops.prepare(tensors.matrix("token_embd.weight", device))
        finally:
            # the last copies have landed (or a failure stops the readers); the pinned
            # slots go back
            tensors.finish_uploads()
        ops.finish_load()
        return model

    @property
    def routes_on_host(self) -> bool:
        """Some layer keeps its experts in RAM behind a device cache: a step then reads the
        routing back to the host, so it cannot be captured in a CUDA graph. Experts read in
        place can, and so can experts the CPU computes (a decode step hands them to a host
        function in the stream: expert_offload.ExpertsOnCpu)."""
        return any(
            layer.moe is not None and isinstance(layer.moe.experts, RamExperts)
            for layer in self.layers
        )

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """The tokens' embedding rows [T, n_embd] on ops.device. On a GPU they come from the
        device's table (the one the CUDA-graph decode step reads anyway), dequantized there:
        dequantizing a 512-token prompt's rows on the host with numpy and copying them over
        left the GPU idle for about 10 ms at the start of every prefill chunk (H100,
        benchmarks/prefill_profile.py). Elsewhere (the CPU; plain torch, which would dequantize
        the whole table) the rows are dequantized on the host."""
        if self.ops.name == "kernels" and self.ops.device.type != "cpu":
            return self.embed_on_device(self.device_embedding(), tokens.to(self.ops.device))
        return self.ops.embed_rows(self.embedding, tokens)

    def embed_host(self, token: int) -> torch.Tensor:
        """One token's embedding row [1, n_embd], float32 in host memory (a decode step's
        input). Rows are kept once made, up to `HOST_ROWS_KEPT`: replies repeat tokens."""
        row = self._host_rows.get(token)
        if row is None:
            row = torch.from_numpy(dequantize(self.embedding, np.array([token]))).float()
            if len(self._host_rows) < self.HOST_ROWS_KEPT:
                self._host_rows[token] = row
        return row

    def device_embedding(self):
        """The embedding table on ops.device, as stored (for a CUDA graph's input, which must
        come from the device): the output matrix itself when the model ties them."""
        if self._device_table is None:
            if self.output_is_embedding:
                self._device_table = self.output
            else:
                self._device_table = self.ops.prepare(self.embedding.to(self.ops.device))
        return self._device_table

    def embed_on_device(self, table, tokens: torch.Tensor) -> torch.Tensor:
        """Rows of `table` (from device_embedding) for device token ids [T]: [T, n_embd]."""
        return self.ops.gather_rows(table, tokens)

    def forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        cache: TorchKVCache,
        *,
        n_keys: int,
        all_logits: bool = False,
        logit_rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Run `tokens` [T] at `positions` [T] (on ops.device), writing their K and V into the
        cache; attention reads cache slots 0..n_keys-1. Returns the logits of the last token
        [vocab], or of every token [T, vocab] with `all_logits`, or of the rows `logit_rows`
        [R, vocab] (a batch's: engine/hearth/batch_cache.py)."""
        logits = self.forward_embedded(
            self.embed(tokens), positions, cache, n_keys=n_keys, all_logits=all_logits,
            logit_rows=logit_rows,
        )  # fmt: skip
        return logits if all_logits or logit_rows is not None else logits[0]

    def forward_embedded(
        self,
        h: torch.Tensor,
        positions: torch.Tensor,
        cache: TorchKVCache,
        *,
        n_keys: int,
        all_logits: bool = False,
        logit_rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`forward` from the embedded rows h [T, n_embd]; logits [T or 1, vocab] (or of
        `logit_rows`, [R, vocab]). Everything here runs on the device, so a CUDA graph can
        capture it (decode_graph.py)."""
        cfg, ops = self.config, self.ops
        if cfg.embed_scale != 1.0:
            h = h * cfg.embed_scale
        angles = ops.rope_positions(positions, self.rope)
        angles_swa = ops.rope_positions(positions, self.rope_swa) if cfg.swa_window else None
        # Each norm's (and SwiGLU's) output comes with what the matrices reading it share: on a
        # GPU, the output in 8 bits from the same launch, for the integer GEMVs.
        first = self.layers[0]
        x, _, shared = ops.rms_norm_for(
            _readers(first.attn_in), h, first.attn_norm, cfg.rms_eps, dtype=ops.activation_dtype
        )
        # the chunk's attention masks: every layer attends from these positions over n_keys
        # slots, so the cache makes each mask (one per window) at the first layer that asks
        # and the others take it from here; dropped before the output rows
        masks: dict = {}
        for i, layer in enumerate(self.layers):
            swa = cfg.is_swa(i)
            rope = (angles_swa, self.rope_swa) if swa else (angles, self.rope)
            # a one-token step's router scores between the attention and wo, its picks in wo's
            # launch, where the layer folded its router
            folded = layer.moe.folded if layer.moe is not None and x.shape[0] == 1 else None
            scores = None
            if folded is not None and ops.scores_beside_wo:
                pre, out8 = attend(self, layer, i, x, shared, positions, cache, n_keys, swa, rope,
                                   masks)  # fmt: skip
                a, scores = ops.matmul_and_scores(
                    pre, layer.wo, out8, folded, h, cfg.moe.n_expert_used
                )
            else:
                a = attention(self, layer, i, x, shared, positions, cache, n_keys, swa, rope, masks)
            # the attention output's bias in the norm's launch, where no norm comes between
            bias = layer.bo if layer.post_attn_norm is None else None
            if layer.moe is None:
                x, h, shared = ops.rms_norm_for(
                    _ffn_readers(layer), a, layer.ffn_norm, cfg.rms_eps, residual=h, bias=bias
                )
                f = self._dense_feed_forward(layer, x, shared)
            else:  # the norm and the routed experts, the norm in the router's launch if it can
                f, x, h, shared = ops.norm_and_moe_ffn(
                    _ffn_readers(layer), a, h, layer.ffn_norm, cfg.rms_eps, layer.moe, cfg.moe,
                    bias=bias, scores=scores,
                )  # fmt: skip
                f = self._with_shared_expert(layer, x, shared, f)
            last = i + 1 == len(self.layers)
            following = self.layers[i + 1] if not last else None
            next_norm = self.output_norm if last else following.attn_norm
            readers = [self.output] if last else _readers(following.attn_in)
            x, h, shared = ops.rms_norm_for(readers, f, next_norm, cfg.rms_eps, residual=h)
        masks.clear()
        if logit_rows is not None:
            x, shared = x.index_select(0, logit_rows), None
        elif not all_logits and x.shape[0] > 1:
            x, shared = x[-1:], None
        logits = ops.matmul(x.to(self.ops.dtype), self.output, shared)  # float32 logits
        if cfg.final_softcap:
            logits = torch.tanh(logits / cfg.final_softcap) * cfg.final_softcap
        return logits

    def _with_shared_expert(self, layer: Layer, x: torch.Tensor, shared, f: torch.Tensor):
        """The routed experts' output f plus the layer's shared expert on x, where it has one."""
        moe = layer.moe
        if layer.w_down is not None:  # the shared expert
            s = self._dense_feed_forward(layer, x, shared)
            if moe.shared_gate is not None:
                s = s * torch.sigmoid(x.float() @ moe.shared_gate)[:, None].to(s.dtype)
            f = f + s
        return f

    def _dense_feed_forward(self, layer: Layer, x: torch.Tensor, shared) -> torch.Tensor:
        cfg, ops = self.config, self.ops
        y = project(ops, x, layer.ffn_in, shared)
        gated, shared_down = ops.gated_ffn_activation_for(
            [layer.w_down], y["gate"], y["up"], cfg.activation
        )
        f = ops.matmul(gated, layer.w_down, shared_down)
        if layer.post_ffn_norm is not None:
            f = ops.rms_norm(f, layer.post_ffn_norm, cfg.rms_eps)
        return f


def _readers(projections: list[Projection]) -> list:
    """The matrices that read one input."""
    return [p.weight for p in projections]


def _ffn_readers(layer: Layer) -> list:
    """The matrices that read the feed-forward's input: the dense (or shared expert's) gate
    and up, and the routed experts (whose GEMV takes the input in 8 bits too)."""
    experts = [layer.moe.experts] if layer.moe is not None else []
    return _readers(layer.ffn_in) + experts
