"""What the engine worker does with each command: the loaded model, its context and generation.

Runs on the worker's main thread. Every failure becomes an event with a message the user can act
on; only a fault in an engine itself (llama.cpp's abort, a segfault, a GPU out-of-memory) ends
the process, and the client reports that. Either engine is driven through the seam
(engine_api.py); what an engine does not declare in its Capabilities is refused with a reason.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from engine.chat.context_fit import ContextOverflow
from engine.enums import Engine, EngineState, StopReason, WorkLimit
from engine.llama import driver as llama
from engine.llama.batch import pooled_outputs
from engine.llama.params import ContextSettings
from engine.llama.sampler import GrammarTooSlow
from engine.runtime import hearth_prewarm
from engine.runtime import protocol as p
from engine.runtime.batching import batch_decoder, new_context
from engine.runtime.decode_gauge import DecodeGauge, bandwidth_where_it_runs
from engine.runtime.device_facts import (
    device_used,
    devices_holding,
    layers_on_gpu,
    rss_bytes,
    software_vulkan_device,
)
from engine.runtime.early_stops import EarlyStops
from engine.runtime.embedding_run import EmbeddingStopped, embed_inputs
from engine.runtime.engine_api import refusal
from engine.runtime.generation import Session, Stopped, generate
from engine.runtime.model_open import (
    LoadedWeights,
    file_identity,
    open_model,
    refused_by_header,
    same_weights,
    with_llama_kv,
)
from engine.runtime.prompt_bounds import PromptTooCostly, TokenizeBudget, TokenizerBusy
from engine.runtime.prompt_tokens import PromptBuilder
from engine.runtime.speculative.setup import open_speculation

EMBEDDING_CONTEXT = 2048  # tokens per embedding input, at most; and per batch of inputs
EMBEDDING_SEQUENCES = 8  # inputs embedded together in one llama_decode, at most
RERANKER_CANNOT_CHAT = (
    "This model is a reranker: it scores documents against a query (POST /v1/rerank) and "
    "cannot write replies. Load a chat model to chat."
)


class WorkerEngine:
    """The worker's engine state: the loaded model, its session, and what each command does."""

    def __init__(self, send: Callable[[Any], None], *, flush: Callable[[], None], faults):
        self._send = send
        self._flush = flush
        self._faults = faults
        self._stop = threading.Event()
        self._session: Session | None = None
        self._batched = None  # engine/runtime/batching.py's decoder, with n_parallel > 1
        self._embedder: llama.Context | None = None  # made at the first Embed
        self._prompts: PromptBuilder | None = None  # the loaded model's prompt builder
        self._threads = 0  # the loaded context's CPU threads (0: the engine's default)
        self._current_request: int | None = None  # the single-sequence path's generation
        self._weights: LoadedWeights | None = None  # how the loaded weights came to be there
        self._gauge: DecodeGauge | None = None  # each reply's speed-of-light bound
        self._state = EngineState.NO_MODEL
        self._early_stops = EarlyStops()  # stops for requests not begun yet (early_stops.py)
        from engine.llama.log import process_log

        self._log = process_log()  # before the backends load, so their lines go through it too
        llama.init_backend()

    # -- called from the reader thread --------------------------------------------------------

    def request_stop(self, request_id: int | None = None) -> None:
        self._early_stops.note(request_id)
        batched = self._batched
        if batched is not None:
            batched.request_stop(request_id)
        if request_id is None or request_id == self._current_request:
            self._stop.set()

    def status(self) -> p.Status:
        session, batched = self._session, self._batched
        active, waiting = (
            batched.counts() if batched else (int(self._state == EngineState.GENERATING), 0)
        )
        cached = batched.cached_tokens() if batched else len(session.cached) if session else 0
        return p.Status(
            state=self._state,
            model_path=session.model.params.path if session else None,
            n_ctx=session.ctx.info.n_ctx if session else 0,
            n_tokens_cached=cached,
            n_active_sequences=active,
            n_waiting=waiting,
        )

    @property
    def busy(self) -> bool:
        """Generations are running in the batched decoder: call `step` between commands."""
        return self._batched is not None and self._batched.busy

    def step(self) -> None:
        batched = self._batched
        if batched is None:
            return
        self._state = EngineState.GENERATING
        try:
            batched.step()
        except llama.EngineError as exc:
            batched.fail_everything(str(exc))
        if not batched.busy:
            self._state = EngineState.IDLE

    # -- called from the main thread ----------------------------------------------------------

    def announce_ready(self) -> None:
        self._send(
            p.Ready(
                pid=os.getpid(),
                llama_system_info=llama.system_info(),
                gpu_offload_supported=llama.supports_gpu_offload(),
            )
        )

    def handle(self, command: Any, *, received_at: float) -> None:
        if isinstance(command, p.Load):
            self.load(command.params)
        elif isinstance(command, p.Generate):
            self.generate(command, received_at)
        elif isinstance(command, p.Unload):
            self.unload()
        elif isinstance(command, p.GetMemoryReport):
            self._send(self.memory_report())
        elif isinstance(command, p.Embed):
            self.embed(command)
        else:
            self._send(p.CommandFailed(command=type(command).__name__, message="Unknown command."))

    def failure_event(self, command: Any, message: str) -> Any:
        """The event that tells the GUI a command failed, in the form it waits for."""
        self._state = EngineState.IDLE if self._session else EngineState.NO_MODEL
        if isinstance(command, p.Generate | p.Embed):
            return p.GenerationFailed(request_id=command.request_id, message=message)
        if isinstance(command, p.Load):
            return p.LoadFailed(path=command.params.path, message=message)
        return p.CommandFailed(command=type(command).__name__, message=message)

    def load(self, params: p.ModelParams) -> None:
        """Load `params`. When only context settings changed (context length, KV cache types,
        flash attention, batch sizes) the weights already in memory are kept and only the
        context is made anew: applying a new context length takes a fraction of a second
        instead of reading gigabytes of weights again."""
        self._close_batched()
        session, self._session = self._session, None
        self._state = EngineState.LOADING
        # no Hearth import starts beside llama.cpp's work (hearth_prewarm.py: the GIL); a
        # Hearth load resumes and waits for them (hearth_driver.py)
        hearth_prewarm.pause()
        if session is not None and same_weights(session.model.params, params, self._weights):
            session.close_context()
            model, weights = session.model, self._weights
            model.params = params
            kept = True
        else:
            if session is not None:
                session.close()  # return the old model's memory before taking more
            model = weights = None
            kept = False
        if params.backend_sampling and software_vulkan_device():
            # Mesa's lavapipe crashed inside its own driver in about half of the runs with the
            # sampler chain in the graph (docs/backends.md); sampling on the CPU costs little
            # on a device that is a CPU anyway.
            print("hearth worker: software Vulkan device: sampling on the CPU", flush=True)
            params = replace(params, backend_sampling=False)
        started = time.perf_counter()
        rss_before = rss_bytes()
        self._log.take_allocations()
        self._log.take_overridden()
        self._log.flash_attn_resolved = None
        self._log.take_errors()
        ctx = None
        try:
            if model is None:
                refused = refused_by_header(params.path) if self._faults.header_check else None
                if refused:
                    raise llama.EngineError(refused)
                used_before = device_used()
                model, engine_note = open_model(params)
                weights = LoadedWeights(
                    file=file_identity(params.path),
                    device_used_before=used_before,
                    allocations=self._log.take_allocations(),
                    tensors_in_ram=self._log.take_overridden(),
                    engine_asked=params.engine,
                    engine_note=engine_note,
                )
            if model.engine == Engine.LLAMA:
                params = with_llama_kv(params)  # a Hearth load that fell back keeps its plan
            ctx = new_context(model, params)
            ctx.warm_up()
        except llama.EngineError as exc:
            for handle in (ctx, model):
                if handle is not None:
                    handle.close()
            self._weights = None
            self._state = EngineState.NO_MODEL
            hearth_prewarm.resume()
            self._send(
                p.LoadFailed(path=params.path, message=str(exc), details=self._log.take_errors())
            )
            return
        speculation, speculative_note = open_speculation(params, model, ctx)  # a draft: loaded too
        load_seconds = time.perf_counter() - started
        used_after = device_used()
        allocations = weights.allocations + self._log.take_allocations()
        self._weights = weights
        self._session = Session(model=model, ctx=ctx, speculation=speculation)
        if speculation is None and params.speculative.method == "auto":  # the engine's choice
            self._session.speculation_off_reason = speculative_note
        self._threads = params.n_threads
        if params.n_parallel > 1 and model.capabilities.batching:
            self._batched = batch_decoder(model, ctx, params.n_parallel, self._send)
        self._state = EngineState.IDLE
        template = model.chat_template()
        self._prompts = prompts = PromptBuilder(model, self._send)
        runs_on = devices_holding(allocations)
        n_gpu_layers = layers_on_gpu(params.n_gpu_layers, model.n_layers())
        bandwidth, bandwidth_source = bandwidth_where_it_runs(
            model.engine, model.description(), runs_on, n_gpu_layers, model.n_layers()
        )
        self._gauge = DecodeGauge.of(params.path, params.type_k, params.type_v, bandwidth)
        self._send(
            p.ModelLoaded(
                path=params.path,
                description=model.description(),
                n_ctx=ctx.info.n_ctx,
                n_ctx_train=model.n_ctx_train(),
                n_params=model.n_params(),
                size_bytes=model.size_bytes(),
                n_layers=model.n_layers(),
                n_gpu_layers=n_gpu_layers,
                flash_attn=self._flash_attn_state(params.flash_attn),
                chat_template=prompts.template_note,
                chat_template_problem=prompts.template_problem,
                load_seconds=load_seconds,
                n_vocab=model.n_vocab,
                allocations=tuple(p.BufferAllocation(**asdict(a)) for a in allocations),
                runs_on=runs_on,
                tensors_in_ram=weights.tensors_in_ram,
                device_used_delta=tuple(
                    p.DeviceDelta(device=name, used_bytes=used_after[name] - used)
                    for name, used in weights.device_used_before.items()
                    if name in used_after
                ),
                weights_kept=kept,
                n_parallel=max(1, params.n_parallel) if self._batched else 1,
                template_takes_tools=bool(template and "tools" in template),
                own_chat_template=bool(template),
                **prompts.format_choices(),
                type_k=params.type_k,
                type_v=params.type_v,
                engine=model.engine,
                engine_note=weights.engine_note,
                speculative=speculation.drafter.name if speculation else "off",
                speculative_note=speculative_note,
                bandwidth_gbps=bandwidth,
                bandwidth_source=bandwidth_source,
                process_rss_delta=rss_bytes() - rss_before,
                vision=model.capabilities.vision,
                image_tokens=_image_tokens(params.mmproj_path) if model.capabilities.vision else 0,
            )
        )

    def _flash_attn_state(self, asked: str) -> str:
        if asked in ("on", "off"):
            return asked
        resolved = self._log.flash_attn_resolved
        return "auto" if resolved is None else ("on" if resolved else "off")

    def _close_batched(self) -> None:
        batched, self._batched = self._batched, None
        if batched is not None:
            batched.close()  # its generations end as "stopped" before the context goes
        embedder, self._embedder = self._embedder, None
        if embedder is not None:
            embedder.close()

    def embed(self, command: p.Embed) -> None:
        """Embeddings in a small context of their own beside the chat's (made at the first
        request), so they never disturb a conversation's cache."""
        session, rid = self._session, command.request_id
        if session is None:
            self._send(p.GenerationFailed(request_id=rid, message="No model is loaded; load one."))
            return
        refused = refusal(session.model.engine, session.model.capabilities, "embeddings")
        if refused:
            self._send(p.GenerationFailed(request_id=rid, message=refused))
            return
        try:
            if self._embedder is None:
                n_ctx = min(EMBEDDING_CONTEXT, session.model.n_ctx_train() or EMBEDDING_CONTEXT)
                threads = self._threads
                self._embedder = llama.Context(
                    session.model,
                    ContextSettings(n_ctx=n_ctx, n_batch=n_ctx, n_threads=threads,
                                    embeddings=True, n_parallel=EMBEDDING_SEQUENCES),
                )  # fmt: skip
            model = session.model
            if command.query and not model.capabilities.rerank:
                raise llama.EngineError(
                    "This model is not a reranker (its pooling type is not 'rank'). Load a "
                    "reranker GGUF (a cross-encoder such as bge-reranker) to rerank."
                )
            if model.capabilities.rerank and not command.query:
                raise llama.EngineError(
                    "This model is a reranker: its output is a relevance score, not an "
                    "embedding. Rerank with POST /v1/rerank, or load an embedding model."
                )
            query = command.query
            budget, tokenizer = TokenizeBudget(), self._prompts.tokenizer
            embedder = self._embedder
            vectors, n_tokens = embed_inputs(
                (lambda text: model.rerank_tokens(query, text))
                if query
                else (lambda text: tokenizer.tokenize(text, budget, add_special=True)),
                lambda token_lists: pooled_outputs(embedder, token_lists),
                command.inputs,
                stopped=lambda: self._early_stops.take(rid),
                batch_tokens=embedder.info.n_batch,
                batch_inputs=EMBEDDING_SEQUENCES,
            )
        except EmbeddingStopped:
            self._send(p.GenerationDone(request_id=rid, stop_reason=StopReason.STOPPED,
                                        stats=_no_stats(time.perf_counter())))  # fmt: skip
            return
        except (llama.EngineError, ValueError, TokenizerBusy) as exc:
            self._send(failure(rid, exc))
            return
        self._send(p.Embedded(request_id=rid, vectors=tuple(vectors), n_tokens=n_tokens))

    def unload(self, *, quiet: bool = False) -> None:
        self._close_batched()
        session, self._session = self._session, None
        if self._prompts is not None:
            self._prompts.tokenizer.close()  # abandoned calls read the vocabulary: wait for them
        self._prompts = None
        self._weights = None
        if session is not None:
            session.close()
        self._state = EngineState.NO_MODEL
        hearth_prewarm.resume()
        if not quiet:
            self._send(p.Unloaded())

    def generate(self, command: p.Generate, received_at: float) -> None:
        session = self._session
        rid = command.request_id
        if session is None:
            self._send(p.GenerationFailed(request_id=rid, message="No model is loaded; load one."))
            return
        if not session.model.capabilities.chat:
            self._send(p.GenerationFailed(request_id=rid, message=RERANKER_CANNOT_CHAT))
            return
        if self._batched is not None:
            self._submit_batched(command, received_at)
            return
        self._stop.clear()
        self._current_request = rid
        if self._early_stops.take(rid):  # stopped while it waited: it ends at once
            self._stop.set()
        self._state = EngineState.GENERATING
        media = None
        try:
            grammar_refused = command.sampling.grammar and refusal(
                session.model.engine, session.model.capabilities, "grammar"
            )
            if grammar_refused:
                raise ValueError(grammar_refused)
            prompt, media = self._prompts.prompt(command, session.ctx.info.n_ctx)
            outcome = generate(
                session,
                prompt,
                command.sampling,
                max_tokens=command.max_tokens,
                stop_strings=command.stop,
                ignore_eos=command.ignore_eos,
                emit=self._emitter(rid),
                should_stop=self._stop.is_set,
                started_at=received_at,
                speculate=command.speculate,
                media=media,
            )
        except Stopped:
            self._send(
                p.GenerationDone(
                    request_id=rid, stop_reason=StopReason.STOPPED, stats=_no_stats(received_at)
                )
            )
        except (ContextOverflow, llama.EngineError, ValueError, TokenizerBusy) as exc:
            self._send(failure(rid, exc))
        else:
            stats = outcome.stats
            if self._gauge is not None:
                bound = self._gauge.bound(stats.n_prompt_tokens, stats.n_generated)
                stats = replace(stats, bound_tokens_per_second=bound)
            self._send(
                p.GenerationDone(request_id=rid, stop_reason=outcome.stop_reason, stats=stats)
            )
        finally:
            if media is not None:
                media.close()
            self._current_request = None
            self._state = EngineState.IDLE if self._session else EngineState.NO_MODEL

    def _submit_batched(self, command: p.Generate, received_at: float) -> None:
        try:
            prompt = self._prompts.tokens(command, self._batched.n_ctx_per_sequence)
            self._batched.submit(command, received_at, prompt)
            if self._early_stops.take(command.request_id):  # stopped while it was tokenized
                self._batched.request_stop(command.request_id)
        except (ContextOverflow, llama.EngineError, ValueError, TokenizerBusy) as exc:
            self._send(failure(command.request_id, exc))
            return
        self._state = EngineState.GENERATING

    def _emitter(self, request_id: int) -> Callable[[str], None]:
        send = self._send
        abort_after = self._faults.abort_after_tokens
        if abort_after is None:
            return lambda text: send(p.TokenText(request_id=request_id, text=text))

        count = 0

        def emit_then_maybe_abort(text: str) -> None:
            nonlocal count
            send(p.TokenText(request_id=request_id, text=text))
            count += 1
            if count >= abort_after:
                self._flush()
                print("hearth worker: fault injection: aborting mid-generation", flush=True)
                os.abort()

        return emit_then_maybe_abort

    def memory_report(self) -> p.MemoryReport:
        session = self._session
        devices: tuple[p.DeviceMemory, ...] = ()
        try:
            from engine.llama.devices import list_engine_devices

            devices = tuple(
                p.DeviceMemory(
                    name=d.name,
                    description=d.description,
                    free_bytes=d.free_bytes,
                    total_bytes=d.total_bytes,
                )
                for d in list_engine_devices()
            )
        except Exception as exc:  # the device list is a nicety; the report must still go out
            print(f"hearth worker: device list unavailable: {exc}", flush=True)
        return p.MemoryReport(
            model_bytes=session.model.size_bytes() if session else 0,
            context_bytes=session.ctx.state_bytes() if session else 0,
            process_rss_bytes=rss_bytes(),
            devices=devices,
        )


def failure(request_id: int, exc: Exception) -> p.GenerationFailed:
    """The event for a request that failed with `exc`, saying which bound it went over."""
    over_limit = WorkLimit.NONE
    if isinstance(exc, PromptTooCostly):
        over_limit = WorkLimit.PROMPT
    elif isinstance(exc, GrammarTooSlow):
        over_limit = WorkLimit.GRAMMAR
    elif isinstance(exc, TokenizerBusy):
        over_limit = WorkLimit.BUSY
    return p.GenerationFailed(
        request_id=request_id,
        message=str(exc),
        context_full=isinstance(exc, ContextOverflow),
        over_limit=over_limit,
    )


def _image_tokens(mmproj_path: str) -> int:
    """The context one image takes at most, as the projector's header says (0: unknown)."""
    from engine.gguf import GGUFError, read_model_info
    from engine.gguf.projector import projector_info

    try:
        return projector_info(read_model_info(mmproj_path)).image_tokens
    except (GGUFError, OSError, ValueError):
        return 0


def _no_stats(received_at: float) -> p.GenerationStats:
    return p.GenerationStats(
        n_prompt_tokens=0,
        n_prompt_tokens_reused=0,
        n_generated=0,
        prefill_seconds=0.0,
        time_to_first_token=time.perf_counter() - received_at,
        decode_seconds=0.0,
    )
