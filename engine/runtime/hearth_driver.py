"""The Hearth engine behind the worker: Model, Context and Sampler shaped like engine/llama's.

engine/runtime/engine_state.py and generation.py drive these exactly as they drive llama.cpp's
(prefill in batches, one token per step, KV reuse across turns by `forget_from`, stop at every
token); only the load differs. The tokenizer, chat template and metadata come from a
vocabulary-only llama.cpp load of the same file, so both engines see the same tokens.

`HearthModel(params)` raises `HearthUnavailable` with a one-line reason when this engine cannot
run the model here (no torch, an architecture or tensor type it does not run, no GPU); the
worker then loads the model with llama.cpp and prints the reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from engine.hearth import torch_missing_reason
from engine.llama import driver as llama
from engine.llama.driver import ContextInfo, EngineError
from engine.runtime.generation import Session
from engine.runtime.protocol import ModelParams, SamplingParams
from engine.runtime.to_llama import model_settings

if TYPE_CHECKING:  # torch loads only when the Hearth engine is asked for
    from engine.gguf import ModelInfo
    from engine.hearth.config import ModelConfig
    from engine.hearth.forward import Transformer
    from engine.hearth.ops import TorchOps
    from engine.hearth.weights import GGUFTensors

# KV cache types the plain-torch cache stores (ModelParams.type_k / type_v); kernels' paged
# cache adds engine.hearth.paged_cache.PAGED_FORMATS on a GPU.
_CACHE_DTYPES = ("f16", "f32")
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


class HearthModel(llama.Model):
    """The model's weights in Hearth's forward pass, and llama.cpp's vocabulary for its text."""

    engine_name = "Hearth"  # ModelLoaded.engine, shown in the status bar

    def __init__(self, params: ModelParams):
        if not os.path.isfile(params.path):
            raise EngineError(f"No model file at {params.path}. Choose another file.")
        reason = torch_missing_reason()
        if reason:
            raise HearthUnavailable(reason)
        self.hearth = _load_transformer(params)
        try:
            super().__init__(replace(model_settings(params), vocab_only=True))
        except EngineError:
            self.hearth.tensors.close()
            raise

    # A vocabulary-only llama.cpp model knows no hyperparameters: these come from the header.

    def description(self) -> str:
        info = self.hearth.info
        parts = (info.architecture, info.size_label, info.quant_name)
        return " ".join(filter(None, parts)) + f" (Hearth engine, {self.hearth.device})"

    def n_ctx_train(self) -> int:
        return self.hearth.config.n_ctx_train

    def n_layers(self) -> int:
        return self.hearth.config.n_layer

    def n_swa(self) -> int:
        return self.hearth.config.swa_window

    def n_params(self) -> int:
        return self.hearth.info.parameter_count

    def size_bytes(self) -> int:
        return self.hearth.info.weight_bytes

    def new_context(self, params: ModelParams) -> HearthContext:
        return HearthContext(self, params)

    def new_session(self, ctx: HearthContext) -> HearthSession:
        return HearthSession(model=self, ctx=ctx)

    def close(self) -> None:
        if getattr(self, "_handle", None) is not None:
            super().close()
        hearth = getattr(self, "hearth", None)
        if hearth is not None:
            hearth.tensors.close()
            self.hearth = None


@dataclass
class _Loaded:
    info: ModelInfo
    config: ModelConfig
    tensors: GGUFTensors
    transformer: Transformer
    device: str
    ops: TorchOps


def _load_transformer(params: ModelParams) -> _Loaded:
    import torch

    from engine.gguf import GGUFError, read_model_info
    from engine.hearth.config import UnsupportedModel, model_config
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
    ops = select_ops(device)
    unsupported = sorted({t.type_name for t in info.tensors if not ops.supports(t.ggml_type)})
    if unsupported:
        raise HearthUnavailable(f"tensor types {', '.join(unsupported)} are not supported yet")
    if device == "cpu":
        torch.set_num_threads(params.n_threads or llama._physical_cores())
    tensors = GGUFTensors(params.path, info)
    try:
        transformer = Transformer.load(config, tensors, ops)
    except torch.OutOfMemoryError:
        tensors.close()
        raise EngineError(
            f"Not enough GPU memory for the weights of {os.path.basename(params.path)} "
            f"({info.weight_bytes / 2**30:.1f} GiB). Close other programs that use the GPU, "
            "or load the model with the llama.cpp engine and fewer GPU layers."
        ) from None
    return _Loaded(info, config, tensors, transformer, device, ops)


class HearthContext:
    """A preallocated KV cache and the position where the next token goes."""

    def __init__(self, model: HearthModel, params: ModelParams):
        import torch

        self.model = model
        hearth = model.hearth
        n_ctx = params.n_ctx or hearth.config.n_ctx_train
        try:
            self.cache = _new_cache(hearth, params, n_ctx)
        except torch.OutOfMemoryError:
            raise EngineError(
                f"Not enough GPU memory for a KV cache of {n_ctx} tokens. Try a shorter "
                "context or a smaller cache type (rot4)."
            ) from None
        self.info = ContextInfo(
            n_ctx=n_ctx,
            n_batch=max(1, min(params.n_batch, n_ctx)),
            flash_attn="off",
            backend_sampling=False,
            swa_full=True,  # sliding-window layers keep every position: nothing to lose
        )
        self._chunk = max(1, min(params.n_ubatch, n_ctx))
        self._torch = torch
        self._fixed_shapes = hearth.device != "cpu"
        self.n_past = 0
        self.last_logits = None

    def close(self) -> None:
        self.cache = None
        self.last_logits = None

    def state_bytes(self) -> int:
        return self.cache.nbytes if self.cache is not None else 0

    def clear(self) -> None:
        self.cache.truncate(0)
        self.n_past = 0

    def first_cached_position(self) -> int:
        return 0 if self.n_past > 0 else -1

    def forget_from(self, position: int) -> bool:
        position = min(self.n_past, position)
        if not self.cache.truncate(position):
            return False  # the paged cache cannot drop a tail: the caller starts over
        self.n_past = position
        return True

    def warm_up(self) -> None:
        """One token through every layer and forgotten: on the CPU this dequantizes the weights,
        so the first prompt does not pay for it."""
        bos = self.model.tokenize("", add_special=True)
        self.decode(bos[:1] or [0])
        self.clear()

    def synchronize(self) -> None:
        if self._torch.cuda.is_available() and self.model.hearth.device.startswith("cuda"):
            self._torch.cuda.synchronize()

    def decode(self, tokens: list[int]) -> None:
        """Run `tokens` after what is cached, in chunks of n_ubatch (the prefill)."""
        torch = self._torch
        self._check_room(len(tokens))
        device = self.model.hearth.device
        forward = self.model.hearth.transformer.forward
        with torch.inference_mode():
            for start in range(0, len(tokens), self._chunk):
                chunk = tokens[start : start + self._chunk]
                end = self.n_past + len(chunk)
                positions = torch.arange(self.n_past, end, device=device)
                ids = torch.tensor(chunk, device=device)
                self.last_logits = forward(ids, positions, self.cache, n_keys=end)
                self.n_past = end

    def decode_one(self, token: int) -> None:
        """One decode step. On a GPU it attends over the whole cache, masked by position, so
        every step has the same shapes (what a CUDA graph needs); on the CPU, where no graph is
        captured, only over the filled part."""
        torch = self._torch
        self._check_room(1)
        device = self.model.hearth.device
        n_keys = self.cache.n_ctx if self._fixed_shapes else self.n_past + 1
        with torch.inference_mode():
            self.last_logits = self.model.hearth.transformer.forward(
                torch.tensor([token], device=device),
                torch.tensor([self.n_past], device=device),
                self.cache,
                n_keys=n_keys,
            )
        self.n_past += 1

    def _check_room(self, n: int) -> None:
        if self.n_past + n > self.info.n_ctx:
            raise EngineError(
                "The context is full (no room left in the KV cache). Start a new chat or load "
                "the model with a longer context."
            )


def _new_cache(hearth: _Loaded, params: ModelParams, n_ctx: int):
    """The plain-torch cache for f16/f32, kernels' paged cache for its formats (GPU only)."""
    import torch

    from engine.hearth.kv_cache import TorchKVCache
    from engine.hearth.paged_cache import PAGED_FORMATS, PagedCacheAdapter

    config = hearth.config
    dims = dict(
        n_layer=config.n_layer,
        n_head_kv=config.n_head_kv,
        head_dim=config.head_dim,
        n_ctx=n_ctx,
        device=hearth.device,
    )
    kinds = (params.type_k, params.type_v)
    if all(kind in _CACHE_DTYPES for kind in kinds):
        dtype = torch.float16 if kinds == ("f16", "f16") else torch.float32
        return TorchKVCache(**dims, dtype=dtype)
    known = (*_CACHE_DTYPES, *PAGED_FORMATS)
    unknown = [kind for kind in kinds if kind not in known]
    if unknown:
        raise EngineError(
            f"The Hearth engine has no {unknown[0]} KV cache (it holds {', '.join(known)}; the "
            "last three need a GPU). Choose one of those, or the llama.cpp engine."
        )
    if hearth.ops.name != "kernels":
        raise EngineError(
            f"The Hearth engine's {'/'.join(kinds)} KV cache runs on kernels/ on a GPU, which "
            "is not available here. Choose f16."
        )
    return PagedCacheAdapter(**dims, k_format=params.type_k, v_format=params.type_v)


class HearthSampler:
    """engine.llama.driver.Sampler's interface over engine.hearth.sampler.TorchSampler."""

    def __init__(self, model: HearthModel, sampling: SamplingParams):
        from engine.hearth.sampler import TorchSampler

        self._sampler = TorchSampler(sampling, model.hearth.device)

    def attach(self, ctx) -> bool:
        return False  # sampling already runs where the logits are

    def reset(self) -> None:
        self._sampler.reset()

    def sample(self, ctx: HearthContext) -> int:
        return self._sampler.sample(ctx.last_logits)

    def close(self) -> None:
        self._sampler = None


class HearthSession(Session):
    """generation.Session with the Hearth sampler."""

    def sampler_for(self, sampling: SamplingParams) -> HearthSampler:
        if self._sampler is not None and self._sampler_params == sampling:
            self._sampler.reset()
            return self._sampler
        self._sampler = HearthSampler(self.model, sampling)
        self._sampler_params = sampling
        return self._sampler
