"""Which context and which batch decoder a model loaded for several sequences gets.

The worker's batching plug point: with n_parallel > 1 and an engine that declares
`Capabilities.batching`, every request goes through a batch decoder (submit, step while busy,
stops from the reader thread, the same events per request). llama.cpp's is
engine/runtime/batched_decode.py over its own context; the Hearth engine's is
engine/runtime/hearth_batch.py over a context of its own (the batch cache), which is why the
context is chosen here too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.enums import Engine
from engine.runtime.batched_decode import BatchedDecoder
from engine.runtime.engine_api import Context, Model
from engine.runtime.protocol import ModelParams


def _hearth_batch(model: Model, params: ModelParams) -> bool:
    return model.engine == Engine.HEARTH and params.n_parallel > 1 and model.capabilities.batching


def new_context(model: Model, params: ModelParams) -> Context:
    """model.new_context(params); for the Hearth engine with n_parallel > 1, its batch cache."""
    if _hearth_batch(model, params):
        from engine.runtime.hearth_batch_context import HearthBatchContext  # torch: Hearth only

        return HearthBatchContext(model, params)
    return model.new_context(params)


def batch_decoder(model: Model, ctx: Context, n_parallel: int, send: Callable[[Any], None]):
    """The engine's batch decoder over `ctx` (from new_context)."""
    if model.engine == Engine.HEARTH:
        from engine.runtime.hearth_batch import HearthBatchedDecoder

        return HearthBatchedDecoder(model, ctx, n_parallel, send)
    return BatchedDecoder(model, ctx, n_parallel, send)
