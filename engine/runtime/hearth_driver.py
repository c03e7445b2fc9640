"""The Hearth engine behind the engine seam (engine_api.py): its Model, Context and Sampler.

engine/runtime/engine_state.py and generation.py drive these exactly as they drive llama.cpp's
(prefill in batches, one token per step, KV reuse across turns by `forget_from`, stop at every
token); only the load differs. The tokenizer, chat template and metadata come from a
vocabulary-only llama.cpp load of the same file (`HearthModel.vocabulary`), so both engines see
the same tokens.

`HearthModel(params)` raises `HearthUnavailable` with a one-line reason when this engine cannot
run the model here (no torch, an architecture or tensor type it does not run, no GPU); the
worker then loads the model with llama.cpp and prints the reason.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import replace

from engine.enums import Engine
from engine.hearth import torch_missing_reason
from engine.llama import driver as llama
from engine.llama.driver import ContextInfo, EngineError
from engine.runtime import hearth_prewarm
from engine.runtime.engine_api import Capabilities, StepOutput, vision_refusal
from engine.runtime.hearth_load import (
    HearthUnavailable,
    LoadedTransformer,
    load_transformer,
    make_kv_cache,
)
from engine.runtime.kernel_compiles import CompileRecord, announced_warm_up, compile_key
from engine.runtime.protocol import ModelParams, SamplingParams
from engine.runtime.to_llama import model_settings
from engine.runtime.torch_beside_llama import torch_import_problem

GRAPH_ENV = "HEARTH_CUDA_GRAPH"  # "0": decode without the CUDA graph (measurements, debugging)
OUT_OF_MEMORY_EXIT = 3  # the worker's exit status after a GPU out-of-memory mid-generation


class HearthModel:
    """The model's weights in Hearth's forward pass, and llama.cpp's vocabulary for its text."""

    engine = Engine.HEARTH
    # several sequences decoded together (n_parallel > 1: engine/runtime/batching.py);
    # speculative decoding for dense models (checks: HearthContext.check)
    capabilities = Capabilities(batching=True)
    media_marker = ""  # images go to llama.cpp (model_open.py hands vision models over)

    def __init__(self, params: ModelParams):
        if not os.path.isfile(params.path):
            raise EngineError(f"No model file at {params.path}. Choose another file.")
        hearth_prewarm.wait()  # torch and kernels/ half-imported by the warm-up: wait for it
        reason = torch_missing_reason() or torch_import_problem()
        if reason:
            raise HearthUnavailable(reason)
        self.params = params
        self.hearth = load_transformer(params)
        try:
            self.vocabulary = llama.Model(replace(model_settings(params), vocab_only=True))
        except EngineError:
            self.hearth.tensors.close()
            raise
        self.n_vocab = self.vocabulary.n_vocab
        if self.hearth.config.moe is None:  # MoE rows meet in grouped kernels (verify.py)
            self.capabilities = replace(self.capabilities, speculative=True)

    # The vocabulary and metadata: llama.cpp's, from the same file.

    def meta(self, key: str) -> str | None:
        return self.vocabulary.meta(key)

    def chat_template(self) -> str | None:
        return self.vocabulary.chat_template()

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool = True) -> list[int]:
        return self.vocabulary.tokenize(text, add_special=add_special, parse_special=parse_special)

    def token_bytes(self, token: int, *, special: bool = False) -> bytes:
        return self.vocabulary.token_bytes(token, special=special)

    def token_text(self, token: int) -> str:
        return self.vocabulary.token_text(token)

    def is_end_of_generation(self, token: int) -> bool:
        return self.vocabulary.is_end_of_generation(token)

    def adds_bos(self) -> bool:
        return self.vocabulary.adds_bos()

    def bos_text(self) -> str:
        return self.vocabulary.bos_text()

    def eos_text(self) -> str:
        return self.vocabulary.eos_text()

    def special_tokens(self) -> tuple[int, ...]:
        return self.vocabulary.special_tokens()

    def special_token_texts(self) -> tuple[str, ...]:
        return self.vocabulary.special_token_texts()

    # What a draft model's vocabulary is checked against (speculative/draft_model.py).

    def vocab_type(self) -> int:
        return self.vocabulary.vocab_type()

    def token_source_text(self, token: int) -> bytes:
        return self.vocabulary.token_source_text(token)

    def is_recurrent(self) -> bool:
        return False  # decoders with a KV cache only: rejected drafts can always be dropped

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

    def media_prompt(self, text: str, images: list[bytes]):
        raise EngineError(vision_refusal(self.capabilities))

    def close(self) -> None:
        self.vocabulary.close()
        if self.hearth is not None:
            self.hearth.tensors.close()
            self.hearth = None


class HearthContext:
    """A preallocated KV cache and the position where the next token goes."""

    def __init__(self, model: HearthModel, params: ModelParams):
        import torch

        self.model = model
        hearth = model.hearth
        n_ctx = params.n_ctx or hearth.config.n_ctx_train
        try:
            self.cache = make_kv_cache(hearth, params, n_ctx)
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
        # the decode step as one CUDA graph (engine/hearth/decode_graph.py), captured on first use
        # (not with experts in RAM behind a cache: a step reads its routing back to pick the
        # experts to copy; experts the CPU computes are a host function inside the graph)
        self._use_graph = (
            hearth.device.startswith("cuda")
            and os.environ.get(GRAPH_ENV) != "0"
            and not hearth.transformer.routes_on_host
        )
        self._graph = None
        self._check_graphs: dict = {}  # checks of n tokens as CUDA graphs (check_graph.py)
        self._prefill_graphs = None  # prefill chunks as CUDA graphs (prefill_graph.py)
        # plain greedy sampling: the graph may launch each next step before the host reads
        # this one's token (set by new_sampler; decode_graph.py says how)
        self.launch_ahead = False
        self.n_past = 0
        self._kv_pair = f"{params.type_k}/{params.type_v}"

    def close(self) -> None:
        self._graph = None
        self._check_graphs = {}
        self._prefill_graphs = None
        self.cache = None

    def new_sampler(self, sampling: SamplingParams) -> HearthSampler:
        sampler = HearthSampler(self.model, sampling)
        self.launch_ahead = sampler.plain_greedy
        return sampler

    def state_bytes(self) -> int:
        return self.cache.nbytes if self.cache is not None else 0

    def _history_changes(self) -> None:
        if self._graph is not None:
            self._graph.forget_ahead()

    def clear(self) -> None:
        self._history_changes()
        self.cache.truncate(0)
        self.n_past = 0

    def first_cached_position(self) -> int:
        return 0 if self.n_past > 0 else -1

    def forget_from(self, position: int) -> bool:
        self._history_changes()
        position = min(self.n_past, position)
        if not self.cache.truncate(position):
            return False  # the paged cache cannot drop a tail: the caller starts over
        self.n_past = position
        return True

    def warm_up(self) -> None:
        """One token through every layer and forgotten: on the CPU this dequantizes the weights,
        so the first prompt does not pay for it. On a GPU also two short prompts (17 and 32
        tokens: a row count Triton specializes as a multiple of 16 and one it does not), which
        compile the prefill's kernels and set up cuBLAS and SDPA under the load's progress:
        otherwise the first prompt after a load waited about 7 s for them (H100, 8B,
        benchmarks/prefill_profile.py's first run). The first warm-up of a model shape on a GPU
        compiles the kernels too: it says so first, with an estimate (kernel_compiles.py)."""
        if not self._fixed_shapes:
            self._warm_up()
            return
        gpu = self._torch.cuda.get_device_name(self.model.hearth.device)
        key = compile_key(gpu, _shape(self.model.hearth, self._kv_pair))
        announced_warm_up(CompileRecord.default(), key, gpu, self._warm_up, _say)

    def _warm_up(self) -> None:
        bos = self.model.tokenize("", add_special=True)
        first = bos[:1] or [0]
        self.decode(first)
        self.clear()
        if self._fixed_shapes:
            # 17 rows as they are, eagerly (the row count Triton does not specialize as a
            # multiple of 16: a chunk that prefill_graph.rows_run cannot pad), then 32 as the
            # prompts will run (with prefill graphs: that shape's first, eager chunk)
            for n, forward in ((17, self._eager_forward()), (32, None)):
                if n <= self.info.n_ctx:
                    self._prompt(first * n, forward)
                    self.clear()
        if self._use_graph:
            with worker_ends_when_out_of_memory("capturing the decode step"):
                self._capture()

    def synchronize(self) -> None:
        if self._torch.cuda.is_available() and self.model.hearth.device.startswith("cuda"):
            self._torch.cuda.synchronize()

    def decode(self, tokens: list[int]) -> StepOutput:
        """Run `tokens` after what is cached, in chunks of n_ubatch (the prefill); the output
        is the last token's logits."""
        return self._prompt(tokens)

    def _prompt(self, tokens: list[int], forward=None) -> StepOutput:
        """`decode`, each chunk through forward(ids, start) (None: _prefill_forward's)."""
        torch = self._torch
        self._check_room(len(tokens))
        device = self.model.hearth.device
        self._history_changes()
        logits = None
        with torch.inference_mode(), worker_ends_when_out_of_memory("the prompt"):
            forward = forward or self._prefill_forward()
            for start in range(0, len(tokens), self._chunk):
                chunk = tokens[start : start + self._chunk]
                logits = forward(torch.tensor(chunk, device=device), self.n_past)
                self.n_past += len(chunk)
        return StepOutput(logits=logits)

    def _prefill_forward(self):
        """forward(ids, start) of one prompt chunk at positions start..: replayed from CUDA
        graphs where decode steps are captured too and the model's chunks can be
        (prefill_graph.py), else the forward pass launched eagerly."""
        from engine.hearth.prefill_graph import PrefillGraphs, prefill_graphs_wanted

        transformer = self.model.hearth.transformer
        wanted = self._use_graph and prefill_graphs_wanted()
        if (
            wanted
            and self._prefill_graphs is None
            and PrefillGraphs.can_capture(transformer, self.cache)
        ):
            self._prefill_graphs = PrefillGraphs(transformer, self.cache, max_rows=self._chunk)
        if self._prefill_graphs is not None:
            return self._prefill_graphs.forward
        return self._eager_forward()

    def _eager_forward(self):
        """forward(ids, start) of one prompt chunk, launched eagerly."""
        torch = self._torch
        transformer = self.model.hearth.transformer

        def forward(ids, start: int):
            end = start + ids.shape[0]
            positions = torch.arange(start, end, device=ids.device)
            return transformer.forward(ids, positions, self.cache, n_keys=end)

        return forward

    def step(self, token: int) -> StepOutput:
        """One decode step: on a GPU a replay of the captured graph (over the whole cache,
        masked by position, so every step has the same shapes); on the CPU, where no graph is
        captured, attention reads only the filled part."""
        self._check_room(1)
        with worker_ends_when_out_of_memory("decoding"):
            if self._use_graph:
                if self._graph is None:
                    self._capture()
                logits, greedy = self._graph.step(
                    token, self.n_past, launch_ahead=self.launch_ahead
                )
                out = StepOutput(logits=logits, greedy=greedy)
            else:
                out = StepOutput(logits=self._decode_eagerly(token))
        self.n_past += 1
        return out

    def check(self, tokens: list[int], position: int) -> list[StepOutput]:
        """A speculative check: `tokens` (the last sampled token, then drafts) at positions
        position.. in one forward, each row's logits and greedy pick computed as a decode step
        computes them (engine/hearth/verify.py), so greedy replies are the same with and
        without speculation. Checks fewer rows than given where the cache would round the
        later ones otherwise (kivi4 keys near a page's end); the caller keeps what comes back
        and drops the rest with forget_from."""
        from engine.hearth.verify import check_logits, greedy_tokens

        if position != self.n_past:
            raise EngineError(
                f"A speculative check at position {position} does not follow the "
                f"{self.n_past} cached positions. Turn speculative decoding off and report this."
            )
        tokens = tokens[: max(1, self.cache.rows_checkable(self.n_past))]
        self._check_room(len(tokens))
        self._history_changes()
        hearth = self.model.hearth
        with self._torch.inference_mode(), worker_ends_when_out_of_memory("checking drafts"):
            graph = self._check_graph(len(tokens), self.n_past)
            if graph is not None:
                logits, greedy = graph.run(tokens, self.n_past)
            else:
                logits = check_logits(
                    hearth.transformer, self.cache, tokens, self.n_past,
                    fixed_shapes=self._fixed_shapes,
                )  # fmt: skip
                greedy = greedy_tokens(logits)
        self.n_past += len(tokens)
        return [
            StepOutput(logits=row, greedy=pick) for row, pick in zip(logits, greedy, strict=True)
        ]

    def prepare_checks(self, n_tokens: int) -> None:
        """Capture the check graphs that checks of up to n_tokens tokens replay (one per
        check_graph.bucket size), now (at the load) rather than at a reply's first check of
        each size. Capturing writes K and V past what is cached, which nothing reads."""
        from engine.hearth.check_graph import bucket, capturable

        if not self._use_graph or not capturable(self.cache):
            return
        sizes = sorted({bucket(n) for n in range(1, n_tokens + 1)})
        with (
            self._torch.inference_mode(),
            worker_ends_when_out_of_memory("capturing speculative checks"),
        ):
            for size in sizes:
                if self.n_past + size <= self.info.n_ctx:
                    self._captured_check(size, self.n_past)

    def _check_graph(self, n: int, position: int):
        """The captured check that takes n tokens at `position` where decode steps are
        captured too (None: the check runs eagerly, as on the CPU, with kivi4 keys, or where
        the context has no room left for the padding rows of the next size up)."""
        from engine.hearth.check_graph import bucket, capturable

        if not self._use_graph or not capturable(self.cache):
            return None
        size = bucket(n)
        if position + size > self.info.n_ctx:
            return None
        return self._captured_check(size, position)

    def _captured_check(self, size: int, position: int):
        from engine.hearth.check_graph import CheckGraph

        graph = self._check_graphs.get(size)
        if graph is None:
            hearth = self.model.hearth
            graph = CheckGraph(hearth.transformer, self.cache, size, position=position)
            self._check_graphs[size] = graph
        return graph

    def _decode_eagerly(self, token: int):
        torch = self._torch
        device = self.model.hearth.device
        n_keys = self.cache.n_ctx if self._fixed_shapes else self.n_past + 1
        with torch.inference_mode():
            return self.model.hearth.transformer.forward(
                torch.tensor([token], device=device),
                torch.tensor([self.n_past], device=device),
                self.cache,
                n_keys=n_keys,
            )

    def _capture(self) -> None:
        from engine.hearth.decode_graph import DecodeGraph

        self._graph = DecodeGraph(self.model.hearth.transformer, self.cache, position=self.n_past)
        if self._graph.split_tuning is not None:
            _say(self._graph.split_tuning.text())

    def _check_room(self, n: int) -> None:
        if self.n_past + n > self.info.n_ctx:
            raise EngineError(
                "The context is full (no room left in the KV cache). Start a new chat or load "
                "the model with a longer context."
            )


def _shape(hearth: LoadedTransformer, kv_pair: str) -> str:
    """What Triton specializes the engine's kernels on, for kernel_compiles.py's key."""
    c = hearth.config
    types = ",".join(sorted({t.type_name for t in hearth.info.tensors}))
    dims = f"{c.n_embd} {c.n_head}/{c.n_head_kv}x{c.head_dim} ff {c.n_ff} vocab {c.n_vocab}"
    moe = f" moe {c.moe.n_expert}/{c.moe.n_expert_used}" if c.moe else ""
    return f"{c.architecture} {dims}{moe} {types} kv {kv_pair}"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def worker_ends_when_out_of_memory(doing: str):
    """A GPU out-of-memory while computing ends the worker process with one line saying so:
    torch may have left the graph pool or the cache half-written, and the GUI offers a
    smaller plan when a worker dies (as it does when llama.cpp aborts)."""
    import torch

    try:
        yield
    except torch.OutOfMemoryError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else "CUDA out of memory"
        print(
            f"hearth worker: error: the GPU ran out of memory while {doing} ({first_line}). "
            "Load the model again with a shorter context or a smaller KV cache type (rot4), "
            "or close other programs that use the GPU.",
            file=sys.stderr,
            flush=True,
        )
        os._exit(OUT_OF_MEMORY_EXIT)


class HearthSampler:
    """The seam's Sampler over engine.hearth.sampler.TorchSampler (llama.cpp's chain in torch)."""

    def __init__(self, model: HearthModel, sampling: SamplingParams):
        from engine.hearth.sampler import TorchSampler

        self._sampler = TorchSampler(sampling)

    in_graph = False  # it samples from the logits the step hands back

    @property
    def plain_greedy(self) -> bool:
        """The argmax and nothing else: the token the decode graph already picked."""
        return self._sampler.plain_greedy

    def reset(self) -> None:
        self._sampler.reset()

    def sample(self, out: StepOutput) -> int:
        return self._sampler.sample(out.logits, greedy=out.greedy)

    # a batch's rows are drawn together (engine.hearth.sampler.sample_rows), then each taken

    @property
    def penalizes(self) -> bool:
        """A repeat penalty: each draw needs the tokens before it on the host."""
        return self._sampler.penalizes

    def next_draw(self):
        return self._sampler.next_draw()

    def accept(self, token: int) -> None:
        self._sampler.accept(token)

    def close(self) -> None:
        self._sampler = None
