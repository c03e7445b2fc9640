"""llama.cpp behind the engine seam (engine_api.py): its model, context and sampler chain.

These extend engine/llama's bindings with what the seam asks for (the wire protocol's settings,
step outputs, the engine's capabilities), so the llama.cpp-only paths (batched decoding, the
speculative loop, MTP) keep using the bindings' own calls on the same objects.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from engine.enums import Engine
from engine.llama import driver as llama
from engine.llama.batch import SequenceBatch
from engine.llama.sampler import Sampler
from engine.runtime.engine_api import LAST_ROW, Capabilities, StepOutput, vision_refusal
from engine.runtime.protocol import ModelParams, SamplingParams
from engine.runtime.to_llama import context_settings, model_settings, sampler_settings

if TYPE_CHECKING:
    from engine.llama import vision


def _vision():
    """llama.cpp's multimodal library (mtmd), imported when a projector is opened or an image
    decoded: a build without it still runs every text model."""
    try:
        from engine.llama import vision
    except OSError as exc:  # the ctypes loader's FileNotFoundError: no libmtmd in this build
        raise llama.EngineError(
            f"This llama.cpp build has no multimodal library (mtmd): {exc}. Text works; to "
            "read images, reinstall the engine (python installers/build_engine.py)."
        ) from exc
    return vision


class LlamaModel(llama.Model):
    engine = Engine.LLAMA
    capabilities = Capabilities(embeddings=True, batching=True, speculative=True, grammar=True)

    media_marker = ""

    def __init__(self, params: ModelParams):
        super().__init__(model_settings(params))
        self.params = params
        self.projector: vision.Projector | None = None
        if self.is_reranker():  # its output is a relevance score (through Embed): no replies
            self.capabilities = replace(self.capabilities, chat=False, rerank=True)
        if params.mmproj_path:
            self._open_projector(params)

    def _open_projector(self, params: ModelParams) -> None:
        """The vision projector beside the weights. Images are decoded into sequence 0 one
        request at a time, so batching is off while it is loaded (said once, in the log)."""
        try:
            self.projector = _vision().Projector(
                self, params.mmproj_path, n_threads=params.n_threads,
                use_gpu=params.n_gpu_layers != 0,
            )  # fmt: skip
        except llama.EngineError:
            super().close()
            raise
        self.media_marker = self.projector.marker
        self.capabilities = replace(self.capabilities, vision=True, batching=False)
        if params.n_parallel > 1:
            print("hearth worker: a vision projector is loaded: requests are decoded one at "
                  "a time", flush=True)  # fmt: skip

    def new_context(self, params: ModelParams) -> LlamaContext:
        return LlamaContext(self, context_settings(params))

    def media_prompt(self, text: str, images: list[bytes]) -> LlamaMediaPrompt:
        if self.projector is None:
            raise llama.EngineError(vision_refusal(self.capabilities))
        return LlamaMediaPrompt(self.projector.tokenize(text, images))

    def close(self) -> None:
        if self.projector is not None:
            self.projector.close()
            self.projector = None
        super().close()


class LlamaContext(llama.Context):
    check_batch: SequenceBatch | None = None  # the speculative check's batch, grown as needed

    def decode(self, tokens: list[int]) -> StepOutput:
        super().decode(tokens)
        return LAST_ROW

    def step(self, token: int) -> StepOutput:
        self.decode_one(token)
        return LAST_ROW

    def prepare_checks(self, n_tokens: int) -> None:
        """Nothing: llama.cpp builds a check's graph at its decode (setup.py prices that)."""

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


class LlamaMediaPrompt:
    """A prompt with images, cut by mtmd into text and image chunks (engine_api.MediaPrompt)."""

    def __init__(self, chunks: vision.Chunks):
        self.chunks = chunks
        self.tokens: list[int] = []
        self._starts: list[int] = []  # where each chunk's tokens begin in `tokens`
        for part in chunks.parts:
            self._starts.append(len(self.tokens))
            self.tokens.extend(part.tokens)

    def resume_point(self, n_cached: int) -> int:
        """`n_cached`, or the start of the image it falls inside (an image is decoded whole);
        0 for M-RoPE models, whose image positions are not one per token."""
        if self.chunks.projector.uses_mrope:
            return 0
        image = _vision().IMAGE
        for start, part in zip(self._starts, self.chunks.parts, strict=True):
            if start <= n_cached < start + len(part.tokens):
                return start if part.kind == image else n_cached
        return n_cached

    def decode_from(self, ctx: LlamaContext, start: int) -> StepOutput:
        vision = _vision()
        for index, (first, part) in enumerate(zip(self._starts, self.chunks.parts, strict=True)):
            end = first + len(part.tokens)
            if end <= start or not part.tokens:
                continue
            if part.kind == vision.IMAGE:
                self.chunks.eval_image(index, ctx, vision.next_position(ctx), ctx.info.n_batch)
            else:
                llama.Context.decode(ctx, list(part.tokens[max(0, start - first) :]))
        return LAST_ROW

    def close(self) -> None:
        self.chunks.close()
