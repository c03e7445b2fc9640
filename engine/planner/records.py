"""What goes into the planner (PlanRequest) and what comes out (Plan), as frozen dataclasses."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from engine.enums import KV_TYPES
from engine.planner.settings import LoadSettings

PREFERENCES = ("quality", "context", "speed")
FITS = "fits"
DOES_NOT_FIT = "does_not_fit"
HIGH = "high"
LOW = "low"


@dataclass(frozen=True)
class DeviceBudget:
    """One GPU the plan may use, in llama.cpp's device order."""

    id: str
    name: str
    backend: str  # "cuda", "rocm", "metal", "vulkan"
    budget_bytes: int  # what the plan may take on it (free memory minus the safety margin)
    bandwidth_gbps: float | None = None
    compute_capability: str | None = None  # NVIDIA's "8.9": whether the Hearth engine runs
    # A helper machine's device (engine/planner/remote.py): its "host:port", and the link to it
    rpc_server: str | None = None
    link_latency_s: float | None = None
    link_bytes_per_s: float | None = None


@dataclass(frozen=True)
class PlanRequest:
    gpus: tuple[DeviceBudget, ...] = ()  # none: run on the CPU
    host_budget_bytes: int | None = None  # RAM the plan may take; None: not checked
    host_bandwidth_gbps: float | None = None
    target_ctx: int | None = None  # None: the model's training context
    min_ctx: int = 2048
    preference: str = "quality"  # "quality", "context" or "speed"
    kv_types: tuple[str, ...] = KV_TYPES
    flash_attn: str = "auto"  # "on", "off" or "auto" (the planner picks)
    n_ubatch: int = 512
    n_batch: int = 2048
    n_parallel: int = 1  # sequences decoded together, the context shared among them
    allow_cpu_layers: bool = True  # layers in host memory when the GPU is too small
    allow_cpu_experts: bool = True  # MoE experts in host memory
    # quality and context plans stay above this speed when something does; None: 10 tokens/s for
    # quality (faster than reading), 2 for context (the person asked for length over speed)
    min_tokens_per_second: float | None = None
    swa_full: bool = False  # True: sliding-window layers keep the whole context (llama default)
    # Reserve logits for one token per batch (n_outputs_max = 1), as the engine worker does.
    lean_outputs: bool = True
    # The Hearth engine's K/V pairs that hurt this model (its own KV check, engine/session/
    # kv_quality.py): Best fit does not pick them. llama.cpp's types are left out of kv_types.
    hearth_pairs_left_out: tuple[tuple[str, str], ...] = ()


DEFAULT_MIN_TOKENS_PER_SECOND = {"quality": 10.0, "context": 2.0, "speed": 0.0}


def min_tokens_per_second(request: PlanRequest) -> float:
    if request.min_tokens_per_second is not None:
        return request.min_tokens_per_second
    return DEFAULT_MIN_TOKENS_PER_SECOND.get(request.preference, 0.0)


@dataclass(frozen=True)
class DeviceUsage:
    """Predicted memory on one device (a GPU, or "host" for system RAM)."""

    id: str
    name: str
    budget_bytes: int | None
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    overhead_bytes: int
    projector_bytes: int = 0  # a vision projector's weights and compute (planner/vision.py)

    @property
    def total_bytes(self) -> int:
        return (
            self.weights_bytes + self.kv_bytes + self.compute_bytes + self.overhead_bytes
            + self.projector_bytes
        )  # fmt: skip

    @property
    def free_bytes(self) -> int | None:
        return None if self.budget_bytes is None else self.budget_bytes - self.total_bytes

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["total_bytes"] = self.total_bytes
        data["free_bytes"] = self.free_bytes
        return data


@dataclass(frozen=True)
class Choice:
    source: str  # the model file (path or hf:// spec)
    quant: str
    n_ctx: int
    type_k: str
    type_v: str
    flash_attn: bool
    n_gpu_layers: int  # llama.cpp's count: the output layer is one
    n_layers: int  # repeating layers in the model
    n_cpu_expert_layers: int = 0  # of the offloaded layers, how many keep experts in RAM
    gpu_layer_counts: tuple[int, ...] = ()
    engine: str = "llama"  # "llama" (llama.cpp) or "hearth" (the Hearth engine, one GPU)
    # the Hearth engine with experts in RAM: experts each of those layers caches on the GPU
    expert_cache_slots: int = 0
    n_expert: int = 0  # experts per MoE layer (0: not said)
    # ... or (no cache) picks of a token there computed by the CPU: the model's n_expert_used
    # (every pick), fewer (a split: the others copied to the GPU), 0 (the GPU reads them in place)
    expert_cpu_picks: int = 0
    n_expert_used: int = 0  # picks a token per MoE layer (0: not said)

    @property
    def offload_summary(self) -> str:
        total = self.n_layers + 1
        text = f"{min(self.n_gpu_layers, total)}/{total} layers on GPU"
        if self.n_cpu_expert_layers:
            text += f", experts of {self.n_cpu_expert_layers} layers in RAM"
        if self.expert_cache_slots:
            of = f" of {self.n_expert}" if self.n_expert else ""
            text += f" ({self.expert_cache_slots}{of} cached on the GPU per layer)"
        elif self.n_cpu_expert_layers and self.engine == "hearth":
            text += f" ({cpu_share_text(self.expert_cpu_picks, self.n_expert_used)})"
        return text

    @property
    def experts_in_ram_text(self) -> str:
        return experts_in_ram_text(
            self.n_cpu_expert_layers,
            self.n_layers,
            self.expert_cache_slots,
            self.n_expert,
            hearth=self.engine == "hearth",
            cpu_picks=self.expert_cpu_picks,
            n_expert_used=self.n_expert_used,
        )


def experts_in_ram_text(
    n_ram: int, n_layers: int, slots: int = 0, n_expert: int = 0, *, hearth: bool = False,
    cpu_picks: int = 0, n_expert_used: int = 0,
) -> str:  # fmt: skip
    """ "experts in RAM: N of M layers", with how the Hearth engine reads them (", S of E
    experts per layer cached on the GPU", ", read by the GPU over PCIe" or ", computed by the
    CPU": cpu_share_text), or "" when no expert is in RAM."""
    if not n_ram:
        return ""
    text = f"experts in RAM: {n_ram} of {n_layers} layers"
    if slots:
        of = f" of {n_expert}" if n_expert else ""
        text += f", {slots}{of} experts per layer cached on the GPU"
    elif hearth:
        text += f", {cpu_share_text(cpu_picks, n_expert_used)}"
    return text


def cpu_share_text(cpu_picks: int, n_expert_used: int = 0) -> str:
    """Who computes a token's picks of a layer in RAM (no cache): the GPU reading them in place
    (cpu_picks 0), the CPU (all of them), or a split (some of the n_expert_used by the CPU, the
    others copied to the GPU)."""
    if 0 < cpu_picks < n_expert_used:
        return (
            f"{cpu_picks} of a token's {n_expert_used} picks computed by the CPU, the others "
            "copied to the GPU"
        )
    return "computed by the CPU" if cpu_picks else "read by the GPU over PCIe"


@dataclass(frozen=True)
class Alternative:
    """A nearby option, for a plan that does not fit or to show what else is possible."""

    kind: str  # smaller_quant, shorter_context, cpu_offload, more_memory (does not fit);
    # larger_quant, longer_context, larger_kv, all_on_gpu (what a better plan would need)
    summary: str
    choice: Choice | None = None
    shortfall_bytes: int = 0  # how much more memory it would need (0: it fits)


@dataclass(frozen=True)
class Plan:
    status: str  # FITS or DOES_NOT_FIT
    confidence: str  # HIGH or LOW
    choice: Choice | None
    settings: LoadSettings | None
    devices: tuple[DeviceUsage, ...]  # the GPUs, then "host"
    tokens_per_second: float | None
    reasons: tuple[str, ...] = ()
    alternatives: tuple[Alternative, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def impossible(cls, reason: str) -> Plan:
        """No estimate at all can be made (as opposed to one that does not fit)."""
        return cls(
            status=DOES_NOT_FIT,
            confidence=LOW,
            choice=None,
            settings=None,
            devices=(),
            tokens_per_second=None,
            reasons=(reason,),
        )

    @property
    def fits(self) -> bool:
        return self.status == FITS

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "confidence": self.confidence,
            "choice": dataclasses.asdict(self.choice) if self.choice else None,
            "settings": self.settings.to_dict() if self.settings else None,
            "devices": [d.to_dict() for d in self.devices],
            "tokens_per_second": self.tokens_per_second,
            "reasons": list(self.reasons),
            "alternatives": [
                {
                    "kind": a.kind,
                    "summary": a.summary,
                    "choice": dataclasses.asdict(a.choice) if a.choice else None,
                    "shortfall_bytes": a.shortfall_bytes,
                }
                for a in self.alternatives
            ],
            "notes": list(self.notes),
        }
