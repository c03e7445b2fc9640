"""Loading a GGUF into the Hearth engine (hearth_driver.py's HearthModel and HearthContext): the
device, the checks that turn a model this engine cannot run here into `HearthUnavailable`
with its reason, the placement of experts kept in RAM, the weights, and the KV cache the
driver makes for a K/V pair.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.hardware.cpu_probe import physical_cores
from engine.llama.driver import EngineError
from engine.runtime.protocol import ModelParams

if TYPE_CHECKING:  # torch loads only when the Hearth engine is asked for
    from engine.gguf import ModelInfo
    from engine.hearth.config import ModelConfig
    from engine.hearth.forward import Transformer
    from engine.hearth.ops import TorchOps
    from engine.hearth.weights import GGUFTensors

DEVICE_ENV = "HEARTH_ENGINE_DEVICE"  # "cpu" runs the engine on the CPU (tests, development)


class HearthUnavailable(Exception):
    """The Hearth engine cannot run this model here; the message is one line saying why."""


def choose_device() -> str:
    forced = os.environ.get(DEVICE_ENV)
    if forced:
        return forced
    import torch

    if torch.cuda.is_available():
        return "cuda"
    raise HearthUnavailable(
        "no CUDA or ROCm GPU visible to PyTorch, where llama.cpp is the faster engine "
        f"(set {DEVICE_ENV}=cpu to run the Hearth engine on the CPU anyway)"
    )


@dataclass
class LoadedTransformer:
    """The model's weights in Hearth's forward pass, with the file's tensors and header, on
    `device` through `ops`."""

    info: ModelInfo
    config: ModelConfig
    tensors: GGUFTensors
    transformer: Transformer
    device: str
    ops: TorchOps


def load_transformer(params: ModelParams) -> LoadedTransformer:
    import torch

    from engine.gguf import GGUFError, read_model_info
    from engine.hearth.capabilities import moe_device_reason
    from engine.hearth.config import UnsupportedModel, model_config
    from engine.hearth.expert_offload import ExpertPlacement
    from engine.hearth.forward import Transformer
    from engine.hearth.ops import select_ops
    from engine.hearth.weights import GGUFTensors

    try:
        info = read_model_info(params.path)
        config = model_config(info)
    except GGUFError as exc:
        raise HearthUnavailable(f"the file's header could not be read: {exc}") from None
    except UnsupportedModel as exc:
        raise HearthUnavailable(str(exc)) from None
    device = choose_device()
    if reason := moe_device_reason(info, config, device):
        raise HearthUnavailable(reason)
    ops = select_ops(device)
    unsupported = sorted({t.type_name for t in info.tensors if not ops.supports(t.ggml_type)})
    if unsupported:
        raise HearthUnavailable(f"tensor types {', '.join(unsupported)} are not supported yet")
    if device == "cpu":
        torch.set_num_threads(params.n_threads or physical_cores())
    if config.moe is None:
        placement = ExpertPlacement()  # a dense model has no experts to keep in RAM
    else:
        try:
            placement = expert_placement(params, config.moe.n_expert_used)
            placement.check(config.moe.n_expert, config.moe.n_expert_used)
        except ValueError as exc:
            raise EngineError(f"{exc}; plan the load again (Best fit).") from None
    tensors = GGUFTensors(params.path, info)
    try:
        transformer = Transformer.load(config, tensors, ops, experts=placement)
    except torch.OutOfMemoryError:
        tensors.close()
        raise EngineError(
            f"Not enough GPU memory for the weights of {os.path.basename(params.path)} "
            f"({info.weight_bytes / 2**30:.1f} GiB). Close other programs that use the GPU, "
            "or load the model with the llama.cpp engine and fewer GPU layers."
        ) from None
    return LoadedTransformer(info, config, tensors, transformer, device, ops)


def expert_placement(params: ModelParams, n_expert_used: int):
    """The params' experts in RAM as expert_offload.ExpertPlacement: read in place or cached,
    computed by the CPU (hearth_expert_cpu_picks n_expert_used: every pick of a token; 0:
    none), or split (between: a one-token step's first that many picks by the CPU while the
    others are copied to the GPU, engine/hearth/staged_experts.py)."""
    from engine.hearth.expert_offload import ExpertPlacement

    picks = params.hearth_expert_cpu_picks
    if not 0 <= picks <= n_expert_used:
        raise ValueError(
            f"{picks} of {n_expert_used} picks on the CPU: between 0 (the GPU reads them) and "
            f"{n_expert_used} (the CPU computes them all)"
        )
    return ExpertPlacement(
        params.hearth_ram_expert_layers,
        params.hearth_expert_cache_slots,
        on_cpu=picks == n_expert_used,
        split_picks=picks if 0 < picks < n_expert_used else 0,
    )


def make_kv_cache(hearth: LoadedTransformer, params: ModelParams, n_ctx: int):
    """The cache engine/hearth/cache_layout.py names for this pair on this device."""
    from engine.hearth.cache_layout import CacheUnavailable, engine_cache_layout
    from engine.hearth.caches import new_kv_cache

    try:
        layout = engine_cache_layout(
            params.type_k, params.type_v, ops_name=hearth.ops.name, device=hearth.device
        )
    except CacheUnavailable as exc:
        raise EngineError(str(exc)) from None
    config = hearth.config
    return new_kv_cache(
        layout,
        n_layer=config.n_layer,
        n_head_kv=config.n_head_kv,
        head_dim=config.head_dim,
        n_ctx=n_ctx,
        device=hearth.device,
    )
