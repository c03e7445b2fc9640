"""What the engine worker does with each command: the loaded model, its context and generation.

Runs on the worker's main thread. Every failure becomes an event with a message the user can act
on; only a fault in llama.cpp itself (abort, segfault) ends the process, and the client reports
that.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from engine.chat.context_fit import ContextOverflow, fit_conversation
from engine.enums import EngineState, Overflow, StopReason
from engine.llama import driver as llama
from engine.llama.log import BufferAllocation
from engine.runtime import protocol as p
from engine.runtime.generation import Session, Stopped, generate
from engine.runtime.to_llama import context_settings, model_settings


class Engine:
    def __init__(self, send: Callable[[Any], None], *, flush: Callable[[], None], faults):
        self._send = send
        self._flush = flush
        self._faults = faults
        self._stop = threading.Event()
        self._session: Session | None = None
        self._weights: _Weights | None = None  # how the loaded weights came to be there
        self._state = EngineState.NO_MODEL
        self._template_note = ""
        from engine.llama.log import LlamaLog

        self._log = LlamaLog()  # before the backends load, so their lines go through it too
        llama.init_backend()

    # -- called from the reader thread --------------------------------------------------------

    def request_stop(self) -> None:
        self._stop.set()

    def status(self) -> p.Status:
        session = self._session
        return p.Status(
            state=self._state,
            model_path=session.model.params.path if session else None,
            n_ctx=session.ctx.info.n_ctx if session else 0,
            n_tokens_cached=len(session.cached) if session else 0,
        )

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
        else:
            self._send(p.CommandFailed(command=type(command).__name__, message="Unknown command."))

    def failure_event(self, command: Any, message: str) -> Any:
        """The event that tells the GUI a command failed, in the form it waits for."""
        self._state = EngineState.IDLE if self._session else EngineState.NO_MODEL
        if isinstance(command, p.Generate):
            return p.GenerationFailed(request_id=command.request_id, message=message)
        if isinstance(command, p.Load):
            return p.LoadFailed(path=command.params.path, message=message)
        return p.CommandFailed(command=type(command).__name__, message=message)

    def load(self, params: p.ModelParams) -> None:
        """Load `params`. When only context settings changed (context length, KV cache types,
        flash attention, batch sizes) the weights already in memory are kept and only the
        context is made anew: applying a new context length takes a fraction of a second
        instead of reading gigabytes of weights again."""
        session, self._session = self._session, None
        self._state = EngineState.LOADING
        if session is not None and _same_weights(session.model.params, params, self._weights):
            session.close_context()
            model, weights = session.model, self._weights
            model.params = params
            kept = True
        else:
            if session is not None:
                session.close()  # return the old model's memory before taking more
            model = weights = None
            kept = False
        if params.backend_sampling and _software_vulkan_device():
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
                refused = _refused_by_header(params.path) if self._faults.header_check else None
                if refused:
                    raise llama.EngineError(refused)
                used_before = _device_used()
                model, engine_note = _open_model(params)
                weights = _Weights(
                    file=_file_identity(params.path),
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
        load_seconds = time.perf_counter() - started
        used_after = _device_used()
        allocations = weights.allocations + self._log.take_allocations()
        self._weights = weights
        self._session = model.new_session(ctx) if hearth else Session(model=model, ctx=ctx)
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
                n_gpu_layers=_layers_on_gpu(params.n_gpu_layers, model.n_layers()),
                flash_attn=self._flash_attn_state(params.flash_attn),
                chat_template=self._template_note,
                chat_template_problem=template_problem,
                load_seconds=load_seconds,
                n_vocab=model.n_vocab,
                allocations=tuple(p.BufferAllocation(**asdict(a)) for a in allocations),
                runs_on=_devices_holding(allocations),
                tensors_in_ram=weights.tensors_in_ram,
                device_used_delta=tuple(
                    p.DeviceDelta(device=name, used_bytes=used_after[name] - used)
                    for name, used in weights.device_used_before.items()
                    if name in used_after
                ),
                weights_kept=kept,
                own_chat_template=bool(template),
                **_format_choices(model, bool(template)),
                type_k=params.type_k,
                type_v=params.type_v,
                engine=getattr(model, "engine_name", "llama.cpp"),
                engine_note=weights.engine_note,
            )
        )

    def _flash_attn_state(self, asked: str) -> str:
        if asked in ("on", "off"):
            return asked
        resolved = self._log.flash_attn_resolved
        return "auto" if resolved is None else ("on" if resolved else "off")

    def unload(self, *, quiet: bool = False) -> None:
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
        self._stop.clear()
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
            self._state = EngineState.IDLE if self._session else EngineState.NO_MODEL

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
        n_ctx = session.ctx.info.n_ctx
        reply_room = command.reply_room or min(command.max_tokens, n_ctx // 4)
        rendered: dict[int, list[int]] = {}  # the last fitting's tokens, by message count

        def count(messages: list) -> int:
            rendered[len(messages)] = self._chat_tokens(session, messages, command.chat_format)
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
        self, session: Session, messages: list[p.ChatMessage], chat_format: str = ""
    ) -> list[int]:
        """`messages` with the model's chat template (or the chosen format) applied, as tokens."""
        from engine.chat import ChatTemplateError, format_chat_prompt

        model = session.model
        if chat_format == p.PLAIN_COMPLETION:
            # A base model continues text: the conversation is one document, no roles.
            return model.tokenize("".join(m.content for m in messages), add_special=True)
        try:
            text, how = format_chat_prompt(
                None if chat_format else model.chat_template(),
                [{"role": m.role, "content": m.content} for m in messages],
                architecture=model.meta("general.architecture"),
                model_name=model.meta("general.name"),
                bos_token=model.bos_text(),
                eos_token=model.eos_text(),
                add_generation_prompt=True,
                builtin=chat_format or None,
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
            process_rss_bytes=_rss_bytes(),
            devices=devices,
        )


@dataclass(frozen=True)
class _Weights:
    """What loading the weights took, kept for as long as they stay loaded: a context made
    anew on them reports the whole model's buffers and memory, not only its own."""

    file: tuple[int, int]
    device_used_before: dict[str, int]
    allocations: tuple[BufferAllocation, ...]
    tensors_in_ram: tuple[str, ...]
    engine_asked: str = "llama"  # ModelParams.engine of the load
    engine_note: str = ""  # why llama.cpp runs a model that asked for the Hearth engine


def _open_model(params: p.ModelParams) -> tuple[llama.Model, str]:
    """The model on the engine that `params.engine` names, and a note: llama.cpp runs it, with
    the reason in one line, when the Hearth engine cannot (no torch, an architecture or tensor
    type it does not run, no GPU)."""
    if params.engine != "hearth":
        return llama.Model(model_settings(params)), ""
    from engine.runtime.hearth_driver import HearthModel, HearthUnavailable

    try:
        return HearthModel(params), ""
    except HearthUnavailable as exc:
        note = f"Hearth engine unavailable, using llama.cpp: {exc}"
        print(f"hearth worker: {note}", flush=True)
        return llama.Model(model_settings(params)), note


def _file_identity(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


# Model-level settings: the weights loaded with them can serve any context settings.
_WEIGHT_FIELDS = ("path", "n_gpu_layers", "tensor_split", "cpu_tensors", "use_mmap")


def _same_weights(old: p.ModelParams, new: p.ModelParams, weights: _Weights | None) -> bool:
    if weights is None or _file_identity(new.path) != weights.file:
        return False  # never loaded through here, or the file was replaced since
    if weights.engine_asked != new.engine:
        return False
    return all(getattr(old, name) == getattr(new, name) for name in _WEIGHT_FIELDS)


def _no_stats(received_at: float) -> p.GenerationStats:
    return p.GenerationStats(
        n_prompt_tokens=0,
        n_prompt_tokens_reused=0,
        n_generated=0,
        prefill_seconds=0.0,
        time_to_first_token=time.perf_counter() - received_at,
        decode_seconds=0.0,
    )


def _layers_on_gpu(asked: int, n_layers: int) -> int:
    if not llama.supports_gpu_offload():
        return 0  # a CPU build takes the request and runs everything on the CPU
    return n_layers if asked < 0 else min(asked, n_layers)


def _devices_holding(allocations: tuple[BufferAllocation, ...]) -> tuple[str, ...]:
    """The devices that hold weights or KV cache, GPUs first, each with its description."""
    names: list[str] = []
    for a in allocations:
        if a.kind in ("model", "KV") and a.bytes > 0:
            # "CPU_Mapped", "CUDA_Host", "CPU_REPACK": host memory, all of it the CPU's.
            name = "CPU" if a.device.startswith("CPU") or a.device.endswith("_Host") else a.device
            if name not in names:
                names.append(name)
    try:
        from engine.llama.devices import list_engine_devices

        described = {d.name: d.description for d in list_engine_devices()}
    except Exception:
        described = {}
    gpus = [n for n in names if n != "CPU"]
    return tuple(
        [f"{n}: {described[n]}" if described.get(n) else n for n in gpus]
        + (["CPU"] if "CPU" in names else [])
    )


def software_vulkan(devices) -> bool:
    """Whether llama.cpp's Vulkan backend has a software rasteriser among its devices (Mesa's
    llvmpipe/lavapipe, SwiftShader): only there when GGML_VK_VISIBLE_DEVICES names one."""
    markers = ("llvmpipe", "lavapipe", "swiftshader")
    return any(
        d.backend.lower() == "vulkan" and any(m in d.description.lower() for m in markers)
        for d in devices
    )


def _software_vulkan_device() -> bool:
    try:
        from engine.llama.devices import list_engine_devices

        return software_vulkan(list_engine_devices())
    except Exception:  # no device list: keep the engine's default
        return False


def _device_used() -> dict[str, int]:
    """Memory in use per GPU now, as the driver reports it (the CPU device is left out: its
    "memory" is the host's, moved by everything else running)."""
    try:
        from engine.llama.devices import list_engine_devices

        return {
            d.name: d.total_bytes - d.free_bytes
            for d in list_engine_devices()
            if d.type != "cpu" and d.total_bytes > 0
        }
    except Exception as exc:  # a nicety: the load must not fail for want of it
        print(f"hearth worker: device memory unavailable: {exc}", flush=True)
        return {}


def _rss_bytes() -> int:
    try:
        import psutil

        return psutil.Process().memory_info().rss
    except Exception:
        return 0


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


def _refused_by_header(path: str) -> str | None:
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


def _format_choices(model, has_template: bool) -> dict:
    """For a model without a chat template: the built-in formats a person may pick from, and
    the one that fits best (the GUI process never loads llama.cpp, so the worker tells it)."""
    if has_template:
        return {}
    from engine.chat.builtin import builtin_choice, builtin_template_names

    name, _why = builtin_choice(model.meta("general.architecture"), model.meta("general.name"))
    return {"builtin_formats": tuple(builtin_template_names()), "suggested_format": name}
