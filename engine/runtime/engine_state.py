"""What the engine worker does with each command: the loaded model, its context and generation.

Runs on the worker's main thread. Every failure becomes an event with a message the user can act
on; only a fault in llama.cpp itself (abort, segfault) ends the process, and the client reports
that.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from engine.chat.context_fit import ContextOverflow, fit_conversation
from engine.enums import EngineState, Overflow, StopReason
from engine.llama import driver as llama
from engine.llama.params import ContextSettings
from engine.runtime import protocol as p
from engine.runtime.batched_decode import BatchedDecoder
from engine.runtime.device_facts import (
    device_used,
    devices_holding,
    layers_on_gpu,
    rss_bytes,
    software_vulkan_device,
)
from engine.runtime.generation import Session, Stopped, generate
from engine.runtime.model_open import (
    LoadedWeights,
    file_identity,
    open_model,
    refused_by_header,
    same_weights,
    with_llama_kv,
)
from engine.runtime.speculative.setup import open_speculation
from engine.runtime.to_llama import context_settings

EMBEDDING_CONTEXT = 2048  # tokens per embedding input, at most


class Engine:
    def __init__(self, send: Callable[[Any], None], *, flush: Callable[[], None], faults):
        self._send = send
        self._flush = flush
        self._faults = faults
        self._stop = threading.Event()
        self._session: Session | None = None
        self._batched: BatchedDecoder | None = None  # when loaded with n_parallel > 1
        self._embedder: llama.Context | None = None  # made at the first Embed
        self._threads = 0  # the loaded context's CPU threads (0: physical cores)
        self._current_request: int | None = None  # the single-sequence path's generation
        self._weights: LoadedWeights | None = None  # how the loaded weights came to be there
        self._state = EngineState.NO_MODEL
        self._template_note = ""
        from engine.llama.log import process_log

        self._log = process_log()  # before the backends load, so their lines go through it too
        llama.init_backend()

    # -- called from the reader thread --------------------------------------------------------

    def request_stop(self, request_id: int | None = None) -> None:
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
            hearth = hasattr(model, "new_context")  # the Hearth engine (runtime/hearth_driver.py)
            if hearth:
                ctx = model.new_context(params)
            else:
                params = with_llama_kv(params)
                ctx = llama.Context(model, context_settings(params))
            ctx.warm_up()
        except llama.EngineError as exc:
            for handle in (ctx, model):
                if handle is not None:
                    handle.close()
            self._weights = None
            self._state = EngineState.NO_MODEL
            self._send(
                p.LoadFailed(path=params.path, message=str(exc), details=self._log.take_errors())
            )
            return
        speculation, speculative_note = open_speculation(params, model, ctx)  # a draft: loaded too
        load_seconds = time.perf_counter() - started
        used_after = device_used()
        allocations = weights.allocations + self._log.take_allocations()
        self._weights = weights
        self._session = model.new_session(ctx) if hearth else Session(model=model, ctx=ctx)
        self._threads = params.n_threads
        if speculation is not None:
            self._session.speculation = speculation
        if params.n_parallel > 1 and not hearth:  # batching is llama.cpp's (Hearth's own: not yet)
            self._batched = BatchedDecoder(model, ctx, params.n_parallel, self._send)
        self._state = EngineState.IDLE
        template = model.chat_template()
        self._template_note, template_problem = _check_template(model)
        self._send(
            p.ModelLoaded(
                path=params.path,
                description=model.description(),
                n_ctx=ctx.info.n_ctx,
                n_ctx_train=model.n_ctx_train(),
                n_params=model.n_params(),
                size_bytes=model.size_bytes(),
                n_layers=model.n_layers(),
                n_gpu_layers=layers_on_gpu(params.n_gpu_layers, model.n_layers()),
                flash_attn=self._flash_attn_state(params.flash_attn),
                chat_template=self._template_note,
                chat_template_problem=template_problem,
                load_seconds=load_seconds,
                n_vocab=model.n_vocab,
                allocations=tuple(p.BufferAllocation(**asdict(a)) for a in allocations),
                runs_on=devices_holding(allocations),
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
                **_format_choices(model, bool(template)),
                type_k=params.type_k,
                type_v=params.type_v,
                engine=getattr(model, "engine_name", "llama.cpp"),
                engine_note=weights.engine_note,
                speculative=speculation.drafter.name if speculation else "off",
                speculative_note=speculative_note,
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
        if not isinstance(session.model, llama.Model):
            self._send(p.GenerationFailed(request_id=rid, message="Embeddings need the llama.cpp "
                                          "engine; load the model with it."))  # fmt: skip
            return
        try:
            if self._embedder is None:
                n_ctx = min(EMBEDDING_CONTEXT, session.model.n_ctx_train() or EMBEDDING_CONTEXT)
                threads = self._threads
                self._embedder = llama.Context(
                    session.model,
                    ContextSettings(n_ctx=n_ctx, n_batch=n_ctx, n_threads=threads,
                                    embeddings=True),
                )  # fmt: skip
            vectors, n_tokens = [], 0
            for text in command.inputs:
                tokens = session.model.tokenize(text, add_special=True)
                n_tokens += len(tokens)
                vectors.append(tuple(self._embedder.embed(tokens)))
        except llama.EngineError as exc:
            self._send(p.GenerationFailed(request_id=rid, message=str(exc)))
            return
        self._send(p.Embedded(request_id=rid, vectors=tuple(vectors), n_tokens=n_tokens))

    def unload(self, *, quiet: bool = False) -> None:
        self._close_batched()
        session, self._session = self._session, None
        self._weights = None
        if session is not None:
            session.close()
        self._state = EngineState.NO_MODEL
        if not quiet:
            self._send(p.Unloaded())

    def generate(self, command: p.Generate, received_at: float) -> None:
        session = self._session
        rid = command.request_id
        if session is None:
            self._send(p.GenerationFailed(request_id=rid, message="No model is loaded; load one."))
            return
        if self._batched is not None:
            self._submit_batched(command, received_at)
            return
        self._stop.clear()
        self._current_request = rid
        self._state = EngineState.GENERATING
        try:
            prompt = self._prompt_tokens(session, command)
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
            )
        except Stopped:
            self._send(
                p.GenerationDone(
                    request_id=rid, stop_reason=StopReason.STOPPED, stats=_no_stats(received_at)
                )
            )
        except ContextOverflow as exc:
            self._send(p.GenerationFailed(request_id=rid, message=str(exc), context_full=True))
        except (llama.EngineError, ValueError) as exc:
            self._send(p.GenerationFailed(request_id=rid, message=str(exc)))
        else:
            self._send(
                p.GenerationDone(
                    request_id=rid, stop_reason=outcome.stop_reason, stats=outcome.stats
                )
            )
        finally:
            self._current_request = None
            self._state = EngineState.IDLE if self._session else EngineState.NO_MODEL

    def _submit_batched(self, command: p.Generate, received_at: float) -> None:
        try:
            prompt = self._prompt_tokens(self._session, command)
            self._batched.submit(command, received_at, prompt)
        except ContextOverflow as exc:
            self._send(
                p.GenerationFailed(
                    request_id=command.request_id, message=str(exc), context_full=True
                )
            )
            return
        except (llama.EngineError, ValueError) as exc:
            self._send(p.GenerationFailed(request_id=command.request_id, message=str(exc)))
            return
        self._state = EngineState.GENERATING

    def _prompt_tokens(self, session: Session, command: p.Generate) -> list[int]:
        model = session.model
        if command.prompt_tokens:
            bad = [t for t in command.prompt_tokens if not 0 <= t < model.n_vocab]
            if bad:
                raise ValueError(f"Token id {bad[0]} is outside the vocabulary.")
            return list(command.prompt_tokens)
        if command.prompt is not None:
            return model.tokenize(command.prompt, add_special=True)
        if not command.messages:
            raise ValueError("Nothing to answer: the conversation is empty.")
        # With several sequences, a conversation has its sequence's share of the cache.
        n_ctx = self._batched.n_ctx_per_sequence if self._batched else session.ctx.info.n_ctx
        reply_room = command.reply_room or min(command.max_tokens, n_ctx // 4)
        rendered: dict[int, list[int]] = {}  # the last fitting's tokens, by message count

        def count(messages: list) -> int:
            rendered[len(messages)] = self._chat_tokens(
                session, messages, command.chat_format, command.tools_json,
                continue_last=command.continue_last,
            )  # fmt: skip
            return len(rendered[len(messages)])

        fitted = fit_conversation(
            list(command.messages),
            count,
            n_ctx - reply_room,
            drop_oldest=command.overflow == Overflow.DROP_OLDEST,
        )
        if fitted.dropped:
            self._send(
                p.PromptFitted(
                    request_id=command.request_id,
                    n_prompt_tokens=fitted.n_tokens,
                    messages_dropped=fitted.dropped,
                )
            )
        return rendered[len(fitted.messages)]

    def _chat_tokens(
        self,
        session: Session,
        messages: list[p.ChatMessage],
        chat_format: str = "",
        tools_json: str = "",
        *,
        continue_last: bool = False,
    ) -> list[int]:
        """`messages` with the model's chat template (or the chosen format) applied, and the
        tools offered, as tokens. `continue_last`: the last message is a reply to go on with:
        the others are rendered up to the opening of a reply, and its text follows as it is."""
        from engine.chat import ChatTemplateError, format_chat_prompt

        model = session.model
        if continue_last and len(messages) > 1 and messages[-1].role == "assistant":
            opened = self._chat_tokens(session, messages[:-1], chat_format, tools_json)
            return opened + model.tokenize(
                messages[-1].content, add_special=False, parse_special=False
            )
        if chat_format == p.PLAIN_COMPLETION:
            # A base model continues text: the conversation is one document, no roles.
            return model.tokenize("".join(m.content for m in messages), add_special=True)
        try:
            text, how = format_chat_prompt(
                None if chat_format else model.chat_template(),
                [_message_for_template(m) for m in messages],
                architecture=model.meta("general.architecture"),
                model_name=model.meta("general.name"),
                bos_token=model.bos_text(),
                eos_token=model.eos_text(),
                add_generation_prompt=True,
                builtin=chat_format or None,
                variables={"tools": json.loads(tools_json)} if tools_json else None,
            )
        except ChatTemplateError as exc:
            raise ValueError(str(exc)) from None
        if how != self._template_note:
            # Said once per change: a model whose own template failed falls back silently
            # otherwise, and a template that tried something unsafe is worth knowing about.
            print(f"hearth worker: chat template: {how}", flush=True)
            self._template_note = how
            self._send(p.ChatTemplateChanged(template=how))
        bos = model.bos_text()
        if model.adds_bos() and bos and text.startswith(bos):
            text = text[len(bos) :]  # the tokenizer adds BOS itself: never two
        return model.tokenize(text, add_special=True, parse_special=True)

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


def _message_for_template(m: p.ChatMessage) -> dict[str, Any]:
    """A message as chat templates take it: tool calls as data, not JSON text."""
    message: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls_json:
        message["tool_calls"] = json.loads(m.tool_calls_json)
    if m.tool_call_id:
        message["tool_call_id"] = m.tool_call_id
    if m.name:
        message["name"] = m.name
    return message


def _no_stats(received_at: float) -> p.GenerationStats:
    return p.GenerationStats(
        n_prompt_tokens=0,
        n_prompt_tokens_reused=0,
        n_generated=0,
        prefill_seconds=0.0,
        time_to_first_token=time.perf_counter() - received_at,
        decode_seconds=0.0,
    )


def _check_template(model: llama.Model) -> tuple[str, str]:
    """The format chats will be written in, and why the model's own template was refused ("" if
    it was not): said at the load, where the person sees it, not only in the worker's log."""
    from engine.chat import ChatTemplateError, check_model_template

    try:
        checked = check_model_template(
            model.chat_template(),
            architecture=model.meta("general.architecture"),
            model_name=model.meta("general.name"),
            bos_token=model.bos_text(),
            eos_token=model.eos_text(),
        )
    except ChatTemplateError as exc:
        return "none that works", str(exc)
    if checked.refused is None:
        return checked.template, ""
    print(f"hearth worker: chat template: {checked.template}", flush=True)
    return checked.template, f"{checked.refused} Chats are written in {checked.template} instead."


def _format_choices(model, has_template: bool) -> dict:
    """For a model without a chat template: the built-in formats a person may pick from, and
    the one that fits best (the GUI process never loads llama.cpp, so the worker tells it)."""
    if has_template:
        return {}
    from engine.chat.builtin import builtin_choice, builtin_template_names

    name, _why = builtin_choice(model.meta("general.architecture"), model.meta("general.name"))
    return {"builtin_formats": tuple(builtin_template_names()), "suggested_format": name}
