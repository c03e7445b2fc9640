"""The Hearth engine's weights on the GPU for one model (engine/planner/hearth_memory.py's weights
and experts items): every allocation of the packed matrices, joined where the engine joins
them, the vectors, the load's largest raw copies, and the experts of the last layers kept in
pinned host memory (with the device caches of their experts and the driver's mapping).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from engine.gguf import ModelInfo, TensorInfo
from engine.gguf.ggml_types import GGML_TYPES
from engine.hearth.config import ModelConfig, model_config
from engine.hearth.split_tuning import staging_slots
from kernels.ggml_formats import FORMATS
from kernels.moe_one_token_rule import folded_bytes, routes_beside_wo


class HearthConfig(Protocol):
    """What the experts in RAM depend on of hearth_memory.HearthConfig (not imported: that
    module imports this one)."""

    ram_expert_layers: int
    expert_cache_slots: int
    expert_cpu_picks: int


_PAGE = 4096  # a pinned host buffer: whole pages, plus one to align its start
_PACKED = {f.ggml_type: f for f in FORMATS.values()}
_EMBEDDING = "token_embd.weight"

# Matrices that take the same input, joined at load where block type and row length match
# (engine/hearth/forward.py _projections), in this order.
_JOINED = (("attn_q", "attn_k", "attn_v"), ("ffn_gate", "ffn_up"))


def _plane_allocations(ggml_type: int, n_out: int, n_in: int) -> list[int]:
    """The GPU allocations one (joined) matrix keeps: its packed planes, or raw + float32."""
    fmt = _PACKED.get(ggml_type)
    if fmt is None:
        raw = n_out * (GGML_TYPES[ggml_type].row_bytes(n_in))
        return [raw, 4 * n_out * n_in]
    blocks = n_in // fmt.block_size
    return [n_out * blocks * length for _name, _offset, length, _dtype in fmt.fields]


def _matrix_allocations(t: TensorInfo) -> list[int]:
    return _plane_allocations(t.ggml_type, t.n_elements // t.shape[0], t.shape[0])


def _gpu_tensors(info: ModelInfo) -> list[TensorInfo]:
    """The tensors the engine puts on the GPU: all of them (the embedding as the decode graph's
    and the prefill's table, forward.Transformer.device_embedding; it is also the output matrix
    of a model without `output.weight`)."""
    return list(info.tensors)


def matrix_groups(info: ModelInfo) -> list[list[TensorInfo]]:
    """The GPU's matrices as the engine prepares them: runs of Q/K/V and gate/up that share a
    block type and row length joined into one, every other matrix alone."""
    by_name = {t.name: t for t in info.tensors}
    groups: list[list[TensorInfo]] = []
    joined: set[str] = set()
    for layer in range(info.n_layer or 0):
        for names in _JOINED:
            run: list[TensorInfo] = []
            for name in names:
                t = by_name.get(f"blk.{layer}.{name}.weight")
                if t is None:
                    continue
                joined.add(t.name)
                if run and (run[-1].ggml_type, run[-1].shape[0]) == (t.ggml_type, t.shape[0]):
                    run.append(t)
                else:
                    groups += [run] if run else []
                    run = [t]
            groups += [run] if run else []
    groups += [[t] for t in _gpu_tensors(info) if len(t.shape) >= 2 and t.name not in joined]
    return groups


@dataclass(frozen=True)
class HearthProfile:
    """What the estimate needs from one file, worked out once (a slider re-plans on every move)."""

    info: ModelInfo
    config: ModelConfig
    weight_allocations: tuple[int, ...]  # every weight allocation on the GPU
    load_transient: tuple[int, ...]  # the largest group's raw copies while it is being joined
    largest_matrix: int  # values of the largest (joined) matrix: a prefill GEMM dequantizes it
    embedding_bytes: int  # token_embd, in host memory
    values_on_gpu: int  # values of every tensor the GPU holds (float32 each on the CPU path)
    # per layer, its routed experts' tensors (weights and biases; empty for a dense layer)
    layer_experts: tuple[tuple[TensorInfo, ...], ...] = ()
    largest_matrix_type: int = FORMATS["Q4_K"].ggml_type  # its ggml type
    # per layer, the allocations of its router folded for a one-token step's routing beside
    # wo (kernels/router_beside_wo.py) while its experts are on the GPU; empty where it keeps
    # the router's launch (and for a dense layer)
    layer_folded: tuple[tuple[int, ...], ...] = ()

    @property
    def expert_bytes(self) -> int:
        """Bytes of one expert (gate, up, down and biases) of the largest MoE layer: what one
        miss copies."""
        n_expert = self.config.moe.n_expert if self.config.moe else 1
        return max((sum(t.n_bytes for t in ts) for ts in self.layer_experts), default=0) // max(
            1, n_expert
        )

    @property
    def all_expert_bytes(self) -> int:
        return sum(t.n_bytes for ts in self.layer_experts for t in ts)

    @classmethod
    def of(cls, info: ModelInfo) -> HearthProfile:
        """Raises engine.hearth.config.UnsupportedModel for a file the engine does not run."""
        config = model_config(info)
        sizes: list[int] = []
        transient: list[int] = []
        largest, largest_type = 0, FORMATS["Q4_K"].ggml_type
        for group in matrix_groups(info):
            n_out = sum(t.n_elements // t.shape[0] for t in group)
            sizes += _plane_allocations(group[0].ggml_type, n_out, group[0].shape[0])
            raws = [t.n_bytes for t in group]
            raws += [sum(raws)] if len(group) > 1 else []  # torch.cat of the members
            if sum(raws) > sum(transient):
                transient = raws
            # the output matrix runs one row (the GEMV); experts are never dequantized
            values = n_out * group[0].shape[0]
            if group[0].layer is not None and len(group[0].shape) == 2 and values > largest:
                largest, largest_type = values, group[0].ggml_type
        # a MoE layer's expert tensors are each a group of their own: read onto the GPU one at
        # a time, each made into planes before the next is read (moe_ops.prepare_experts)
        on_gpu = _gpu_tensors(info)
        sizes += [4 * t.n_elements for t in on_gpu if len(t.shape) < 2]  # float32 vectors
        folded = tuple(_folded_router(info, config, i) for i in range(info.n_layer or 0))
        sizes += [size for layer in folded for size in layer]
        embedding = info.tensor(_EMBEDDING)
        return cls(
            info=info,
            config=config,
            weight_allocations=tuple(sizes),
            load_transient=tuple(transient),
            largest_matrix=largest,
            embedding_bytes=embedding.n_bytes if embedding is not None else 0,
            values_on_gpu=sum(t.n_elements for t in on_gpu),
            layer_experts=tuple(_expert_tensors(info, i) for i in range(info.n_layer or 0)),
            largest_matrix_type=largest_type,
            layer_folded=folded,
        )


def _folded_router(info: ModelInfo, config: ModelConfig, layer: int) -> tuple[int, ...]:
    """Layer `layer`'s folded router allocations where kernels/moe_one_token_rule.py lets it
    route beside wo with its experts on the GPU (the engine folds it then, at load), else ()."""
    moe = config.moe
    p = f"blk.{layer}."
    wo, router = info.tensor(p + "attn_output.weight"), info.tensor(p + "ffn_gate_inp.weight")
    if moe is None or wo is None or router is None:
        return ()
    takes = routes_beside_wo(
        wo_format=GGML_TYPES[wo.ggml_type].name, router_format=GGML_TYPES[router.ggml_type].name,
        n_expert_used=moe.n_expert_used, n_ff_exp=moe.n_ff_exp,
        router_bias=info.tensor(p + "ffn_gate_inp.bias") is not None,
        expert_bias=any(t.name.endswith(".bias") for t in _expert_tensors(info, layer)),
        norm_after_attention=config.post_norms, experts_on_device=True,
    )  # fmt: skip
    n_in = wo.shape[0]  # GGUF's ne[0]: the row length
    return tuple(folded_bytes(moe.n_expert, config.n_embd, n_in)) if takes else ()


def _expert_tensors(info: ModelInfo, layer: int) -> tuple[TensorInfo, ...]:
    names = [f"blk.{layer}.ffn_{kind}_exps.{part}" for kind in ("gate", "up", "down")
             for part in ("weight", "bias")]  # fmt: skip
    return tuple(t for name in names if (t := info.tensor(name)) is not None)


def _cache_allocations(t: TensorInfo, n_slots: int) -> list[int]:
    """The GPU allocations of an expert tensor's cache of n_slots experts: a weight's planes
    with n_slots experts' rows, a bias float32."""
    if t.name.endswith(".bias"):
        return [4 * t.n_elements // t.shape[-1] * n_slots]
    return _plane_allocations(t.ggml_type, t.shape[1] * n_slots, t.shape[0])


def weight_allocations(profile: HearthProfile, config: HearthConfig) -> list[int]:
    """The weights' GPU allocations with the last config.ram_expert_layers layers' experts
    in RAM: theirs taken out, their caches of config.expert_cache_slots experts put in."""
    n = len(profile.layer_experts)
    ram = range(max(0, n - config.ram_expert_layers), n) if config.ram_expert_layers else ()
    if not ram:
        return list(profile.weight_allocations)
    removed: Counter[int] = Counter()
    caches: list[int] = []
    for layer in ram:
        if layer < len(profile.layer_folded):  # its router not folded: its experts are in RAM
            removed.update(profile.layer_folded[layer])
        for t in profile.layer_experts[layer]:
            removed.update(_matrix_allocations(t))  # as HearthProfile.of counted it
            caches += [s for s in _cache_allocations(t, config.expert_cache_slots) if s]
    kept = Counter(profile.weight_allocations) - removed
    return list(kept.elements()) + caches + split_staging(profile, config)


def _ram_expert_layers(profile: HearthProfile, config: HearthConfig) -> list:
    n = len(profile.layer_experts)
    return profile.layer_experts[max(0, n - config.ram_expert_layers) :]


def split_picks(profile: HearthProfile, config: HearthConfig) -> int:
    """c where a token's picks of a layer in RAM are split (0 < c < k: c by the CPU, the others
    copied to the GPU: engine/hearth/staged_experts.py), else 0."""
    moe = profile.config.moe
    picks = config.expert_cpu_picks
    return picks if moe is not None and 0 < picks < moe.n_expert_used else 0


def _expert_row(ts) -> int:
    """One expert's bytes of a layer's expert tensors, side by side (a split's row)."""
    n_expert = max(1, ts[0].shape[-1]) if ts else 1
    return sum(
        (4 * t.n_elements if t.name.endswith(".bias") else t.n_bytes) // n_expert for t in ts
    )


def split_staging(profile: HearthProfile, config: HearthConfig) -> list[int]:
    """A split's device slots (experts of the largest layer in RAM, as copied and as laid out
    tensor by tensor: as many as the shares the decode graph tries need, k - c + 1 where c >
    1, engine/hearth/split_tuning.py), one area for every such layer; [] without a split."""
    c = split_picks(profile, config)
    if not c or not config.ram_expert_layers:
        return []
    slots = staging_slots(profile.config.moe.n_expert_used, c)
    row = max(_expert_row(ts) for ts in _ram_expert_layers(profile, config))
    return [slots * row, slots * row]


def pinned_expert_bytes(profile: HearthProfile, config: HearthConfig) -> int:
    """The experts in RAM that the GPU reads any picks of (in place, or through a cache):
    pinned, each plane (a weight's, as on the GPU) or float32 bias its own page-locked buffer
    of whole pages plus one page (engine/hearth/expert_offload.py pinned_copy). None where the
    CPU computes every pick; with a split, also each layer's experts side by side, one buffer."""
    picks = config.expert_cpu_picks
    if not config.ram_expert_layers or (picks and not split_picks(profile, config)):
        return 0
    layers = _ram_expert_layers(profile, config)
    sizes = [
        size
        for ts in layers
        for t in ts
        for size in ([4 * t.n_elements] if t.name.endswith(".bias") else _matrix_allocations(t))
    ]
    if picks:
        sizes += [_expert_row(ts) * ts[0].shape[-1] for ts in layers if ts]
    return sum(-(-size // _PAGE) * _PAGE + _PAGE for size in sizes if size)


def host_expert_bytes(profile: HearthProfile, config: HearthConfig) -> int:
    """The experts kept in RAM: the last ram_expert_layers layers'. The pinned planes the GPU
    reads (pinned_expert_bytes) and, where the CPU computes any pick (ggml), the file's
    expert tensors: ggml's repacked copy of those it repacks, the mapped pages of the others,
    which must stay in RAM to be read at its rate (engine/hearth/cpu_experts.py). A split
    keeps all three: the planes (read in place by prefill chunks), the experts side by side
    (copied) and ggml's."""
    if not config.ram_expert_layers:
        return 0
    total = pinned_expert_bytes(profile, config)
    if config.expert_cpu_picks:
        total += sum(t.n_bytes for ts in _ram_expert_layers(profile, config) for t in ts)
    return total


def pinned_mapping(host_bytes: int) -> int:
    """Device memory the driver keeps to map `host_bytes` of registered host memory for the
    GPU: 8 bytes for each 4 KiB page. Measured (docs/measurements/2026-11-29-s16-call-3/qwen3):
    the CUDA context of Qwen3-30B-A3B's loads with 13.2, 15.3 and 16.3 GiB of experts pinned
    was 28, 32 and 34 MiB above the loads without (2.1 MiB a GiB)."""
    return host_bytes // _PAGE * 8
