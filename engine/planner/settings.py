"""LoadSettings: everything the engine worker needs to load a model the way a plan says.

The fields map one to one onto llama.cpp's parameters (include/llama.h):

    n_gpu_layers            llama_model_params.n_gpu_layers (the output layer counts as one)
    tensor_split            llama_model_params.tensor_split, a float array of
                            llama_max_devices() entries: the per-GPU layer counts here
    tensor_buft_overrides   llama_model_params.tensor_buft_overrides, a NULL-terminated array of
                            {pattern, buft}; "CPU" means ggml_backend_cpu_buffer_type() (or
                            ggml_backend_dev_buffer_type(ggml_backend_dev_by_type(CPU)))
    n_ctx, n_batch, n_ubatch, type_k, type_v, flash_attn
                            llama_context_params fields of those names (flash_attn_type)
    swa_full                llama_context_params.swa_full (llama.cpp's default is true)
    n_outputs_max           llama_context_params.n_outputs_max (0: n_batch)
    use_mmap                llama_model_params.load_mode (MMAP when true, NONE when false)
    rpc_servers             helper machines (llama.cpp's RPC backend): their devices are
                            registered and put first in llama_model_params.devices

`model_params()` gives the engine's ModelParams (engine/llama/driver.py sets the C
fields from it). The worker always reserves logits for one output per batch (n_outputs_max = 1),
which is why plans model lean outputs by default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from engine.runtime.protocol import ModelParams


def expert_override_pattern(layers: list[int] | tuple[int, ...]) -> str:
    """One regex for the MoE expert tensors of `layers`, in llama.cpp's own form (common/fit.cpp:
    blk\\.N\\.ffn_(up|down|gate_up|gate)_(ch|)exps), all layers in one alternation so the
    loader runs one std::regex per tensor instead of one per layer."""
    numbers = "|".join(str(il) for il in sorted(layers))
    return rf"blk\.({numbers})\.ffn_(up|down|gate_up|gate)_(ch|)exps"


@dataclass(frozen=True)
class LoadSettings:
    path: str
    n_ctx: int
    n_gpu_layers: int
    flash_attn: str  # "on" or "off": the plan decides; "auto" would let llama.cpp change it
    type_k: str = "f16"
    type_v: str = "f16"
    n_batch: int = 2048
    n_ubatch: int = 512
    tensor_split: tuple[float, ...] = ()  # empty: one GPU (or llama.cpp's split by free memory)
    tensor_buft_overrides: tuple[tuple[str, str], ...] = ()  # (regex, buffer type name)
    swa_full: bool = False
    n_outputs_max: int = 0
    use_mmap: bool = True
    engine: str = "llama"  # ModelParams.engine: "llama" or "hearth"
    rpc_servers: tuple[str, ...] = ()  # helper machines ("host:port"), their devices first
    # the Hearth engine only: the last N layers' MoE experts in RAM, with a device cache of
    # this many experts each (engine/hearth/expert_offload.py)
    ram_expert_layers: int = 0
    expert_cache_slots: int = 0
    expert_cpu_picks: int = 0  # n_expert_used: the CPU computes every pick there; 0: none

    def model_params(self) -> ModelParams:
        return ModelParams(
            path=self.path,
            n_ctx=self.n_ctx,
            n_gpu_layers=self.n_gpu_layers,
            flash_attn=self.flash_attn,
            type_k=self.type_k,
            type_v=self.type_v,
            n_batch=self.n_batch,
            n_ubatch=self.n_ubatch,
            use_mmap=self.use_mmap,
            tensor_split=tuple(self.tensor_split),
            cpu_tensors=tuple(p for p, buft in self.tensor_buft_overrides if buft == "CPU"),
            swa_full=self.swa_full,
            engine=self.engine,
            rpc_servers=tuple(self.rpc_servers),
            hearth_ram_expert_layers=self.ram_expert_layers,
            hearth_expert_cache_slots=self.expert_cache_slots,
            hearth_expert_cpu_picks=self.expert_cpu_picks,
        )

    def extra_params(self) -> dict[str, Any]:
        """The settings ModelParams does not carry (yet)."""
        return {
            "tensor_split": list(self.tensor_split),
            "tensor_buft_overrides": [list(pair) for pair in self.tensor_buft_overrides],
            "swa_full": self.swa_full,
            "n_outputs_max": self.n_outputs_max,
        }

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["tensor_split"] = list(self.tensor_split)
        data["tensor_buft_overrides"] = [list(pair) for pair in self.tensor_buft_overrides]
        return data
