"""Which engine opens a model, and whether a reload can keep the weights already loaded.

The worker's Engine (engine_state.py) asks here: `open_model` gives the Hearth engine's model
where ModelParams.engine asks for it and it can run, else llama.cpp's with one line saying why;
`with_llama_kv` maps Hearth's KV formats when llama.cpp runs instead; `same_weights` says whether
new parameters differ only in context settings (the loaded weights then serve them);
`refused_by_header` keeps a file llama.cpp would abort on away from it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from engine.enums import Engine
from engine.llama.log import BufferAllocation
from engine.runtime import protocol as p
from engine.runtime.engine_api import Model
from engine.runtime.llama_engine import LlamaModel


@dataclass(frozen=True)
class LoadedWeights:
    """What loading the weights took, kept for as long as they stay loaded: a context made
    anew on them reports the whole model's buffers and memory, not only its own."""

    file: tuple[int, int]
    device_used_before: dict[str, int]
    allocations: tuple[BufferAllocation, ...]
    tensors_in_ram: tuple[str, ...]
    engine_asked: str = Engine.LLAMA  # ModelParams.engine of the load
    engine_note: str = ""  # why llama.cpp runs a model that asked for the Hearth engine


def open_model(params: p.ModelParams) -> tuple[Model, str]:
    """The model on the engine that `params.engine` names, and a note: llama.cpp runs it, with
    the reason in one line, when the Hearth engine cannot (no torch, an architecture or tensor
    type it does not run, no GPU)."""
    if params.engine != Engine.HEARTH:
        return LlamaModel(params), ""
    if params.rpc_servers:
        note = "Hearth engine unavailable, using llama.cpp: helper machines are llama.cpp's"
        print(f"hearth worker: {note}", flush=True)
        return LlamaModel(params), note
    if params.mmproj_path:
        note = (
            "Hearth engine hands this vision model to llama.cpp: images run through "
            "llama.cpp's multimodal library (mtmd)"
        )
        print(f"hearth worker: {note}", flush=True)
        return LlamaModel(params), note
    from engine.runtime.hearth_driver import HearthModel
    from engine.runtime.hearth_load import HearthUnavailable

    try:
        return HearthModel(params), ""
    except HearthUnavailable as exc:
        note = f"Hearth engine unavailable, using llama.cpp: {exc}"
        print(f"hearth worker: {note}", flush=True)
        return LlamaModel(params), note


# A Hearth load that fell back to llama.cpp still names Hearth's KV formats; llama.cpp holds
# these instead: rot4/kivi4/rot2 (5, 5 and 3 bits a value) as q4_0 (4.5 bits: no more memory
# than planned for them), q8 (8.1 bits) as q8_0 (8.5).
_LLAMA_KV_FOR = {"q8": "q8_0", "rot4": "q4_0", "kivi4": "q4_0", "rot2": "q4_0"}


def with_llama_kv(params: p.ModelParams) -> p.ModelParams:
    """`params` with KV types llama.cpp has, saying so when one changed."""
    k = _LLAMA_KV_FOR.get(params.type_k, params.type_k)
    v = _LLAMA_KV_FOR.get(params.type_v, params.type_v)
    if (k, v) == (params.type_k, params.type_v):
        return params
    asked = f"{params.type_k}/{params.type_v}"
    print(f"hearth worker: llama.cpp holds the KV cache as {k}/{v} (asked: {asked})", flush=True)
    return replace(params, type_k=k, type_v=v)


def file_identity(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


# Model-level settings: the weights loaded with them can serve any context settings.
_WEIGHT_FIELDS = (
    "path", "n_gpu_layers", "tensor_split", "cpu_tensors", "use_mmap", "rpc_servers",
    "hearth_ram_expert_layers", "hearth_expert_cache_slots", "hearth_expert_cpu_picks",
    "mmproj_path",
)  # fmt: skip


def same_weights(old: p.ModelParams, new: p.ModelParams, weights: LoadedWeights | None) -> bool:
    if weights is None or file_identity(new.path) != weights.file:
        return False  # never loaded through here, or the file was replaced since
    if weights.engine_asked != new.engine:
        return False
    return all(getattr(old, name) == getattr(new, name) for name in _WEIGHT_FIELDS)


def refused_by_header(path: str) -> str | None:
    """Why llama.cpp must not be given this file (engine.gguf.load_check: it would abort on it),
    for every client of the worker. A header this reader cannot read is left to llama.cpp,
    which has the last word on what it loads."""
    from engine.gguf import GGUFError, read_model_info
    from engine.gguf.load_check import load_problem

    try:
        problem = load_problem(read_model_info(path))
    except (GGUFError, OSError):
        return None
    return f"{os.path.basename(path)} cannot be loaded: {problem}" if problem else None
