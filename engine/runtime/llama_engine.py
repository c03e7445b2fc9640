"""llama.cpp behind the engine seam (engine_api.py): its model, context and sampler chain.

These extend engine/llama's bindings with what the seam asks for (the wire protocol's settings,
step outputs, the engine's capabilities), so the llama.cpp-only paths (batched decoding, the
speculative loop, MTP) keep using the bindings' own calls on the same objects.
"""

from __future__ import annotations

from dataclasses import replace

from engine.enums import Engine
from engine.llama import driver as llama
from engine.llama.batch import SequenceBatch
from engine.llama.sampler import Sampler
from engine.runtime.engine_api import LAST_ROW, Capabilities, StepOutput
from engine.runtime.protocol import ModelParams, SamplingParams
from engine.runtime.to_llama import context_settings, model_settings, sampler_settings


class LlamaModel(llama.Model):
    engine = Engine.LLAMA
    capabilities = Capabilities(embeddings=True, batching=True, speculative=True, grammar=True)

    def __init__(self, params: ModelParams):
        super().__init__(model_settings(params))
        self.params = params
        if self.is_reranker():  # its output is a relevance score (through Embed): no replies
            self.capabilities = replace(self.capabilities, chat=False, rerank=True)

    def new_context(self, params: ModelParams) -> LlamaContext:
        return LlamaContext(self, context_settings(params))


class LlamaContext(llama.Context):
    check_batch: SequenceBatch | None = None  # the speculative check's batch, grown as needed

    def decode(self, tokens: list[int]) -> StepOutput:
        super().decode(tokens)
        return LAST_ROW

    def step(self, token: int) -> StepOutput:
        self.decode_one(token)
        return LAST_ROW

    def check(self, tokens: list[int], position: int) -> list[StepOutput]:
        """One llama_decode of `tokens` at positions position.., with logits (or, sampling in
        the graph, a draw) at every row; the rows stay readable until the next decode."""
        batch = self.check_batch
        if batch is None or batch.capacity < len(tokens):
            if batch is not None:
                batch.close()
            batch = self.check_batch = SequenceBatch(len(tokens))
        batch.clear()
        for offset, token in enumerate(tokens):
            batch.add(token, position + offset, 0, output=True)
        if batch.decode(self) != 0:
            raise llama.EngineError(llama.decode_failure(1))
        return [StepOutput(row=row) for row in range(len(tokens))]

    def close(self) -> None:
        if self.check_batch is not None:
            self.check_batch.close()
            self.check_batch = None
        super().close()

    def new_sampler(self, sampling: SamplingParams) -> LlamaSampler:
        """The sampler chain for `sampling`, in this context's graph where it samples there
        (llama.cpp's backend sampling: only the chosen token comes back)."""
        sampler = LlamaSampler(self, sampling)
        if self.info.backend_sampling:
            sampler.chain.attach(self)
        return sampler


class LlamaSampler:
    """llama.cpp's sampler chain, reading the logits its context keeps."""

    def __init__(self, ctx: LlamaContext, sampling: SamplingParams):
        self.chain = Sampler(ctx.model, sampler_settings(sampling))
        self._ctx = ctx
        self.plain_greedy = False  # llama.cpp decodes one step at a time either way

    @property
    def in_graph(self) -> bool:
        return self.chain.in_graph

    def sample(self, out: StepOutput) -> int:
        return self.chain.sample(self._ctx, out.row)

    def reset(self) -> None:
        self.chain.reset()

    def close(self) -> None:
        self.chain.close()
