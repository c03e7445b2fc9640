"""A stand-in for EngineClient: records commands, and lets a test play the worker's events from
any thread (as EngineClient's reader thread would)."""

from __future__ import annotations

from typing import Any, ClassVar

from engine.runtime import protocol as p
from engine.runtime.client import EngineCrashed


class FakeEngineClient:
    instances: ClassVar[list[FakeEngineClient]] = []  # reset by the `fake_clients` fixture

    def __init__(self, on_event, *, env: dict[str, str] | None = None):
        self.on_event = on_event
        self.env = env
        self.commands: list[tuple[str, Any]] = []
        self.fitting: list[dict[str, Any]] = []
        self.alive = False
        self.starts = 0
        self._next_request_id = 1
        self._last_lines: tuple[str, ...] = ()
        self.listeners: list = []  # the API server's, as EngineClient keeps them
        FakeEngineClient.instances.append(self)

    # -- EngineClient's interface ---------------------------------------------------------------

    def start(self) -> None:
        self.alive = True
        self.starts += 1
        # The real worker says at once what it can do; a CPU build here, so plans use the CPU.
        self.emit(p.Ready(pid=0, llama_system_info="fake engine", gpu_offload_supported=False))

    def loads(self) -> list[p.ModelParams]:
        return [arg for name, arg in self.commands if name == "load"]

    def load(self, params: p.ModelParams) -> None:
        self._command("load", params)

    def generate(
        self, *, messages=(), prompt=None, sampling=None, max_tokens=512, stop=(), **fitting
    ):
        request_id = self._next_request_id
        self._next_request_id += 1
        self._command("generate", (request_id, tuple(messages), sampling, max_tokens))
        self.continued = fitting.pop("continue_last", False)  # the last Generate's
        self.fitting.append(fitting)  # overflow policy and reply room, as sent
        return request_id

    def stop(self, request_id: int | None = None) -> None:
        self._command("stop", request_id)

    def unload(self) -> None:
        self._command("unload", None)

    def request_status(self) -> None:
        self._command("status", None)

    def request_memory_report(self) -> None:
        self._command("memory", None)

    def close(self, timeout: float = 5.0) -> None:
        self.alive = False
        self.commands.append(("close", None))

    def kill(self) -> None:
        self.alive = False
        self.commands.append(("kill", None))

    def last_lines(self) -> tuple[str, ...]:
        return self._last_lines

    def add_listener(self, listener) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener) -> None:
        self.listeners.remove(listener)

    def _command(self, name: str, arg: Any) -> None:
        if not self.alive:
            raise BrokenPipeError("the engine process is not running")
        self.commands.append((name, arg))

    # -- playing the worker ---------------------------------------------------------------------

    def names(self) -> list[str]:
        return [name for name, _ in self.commands]

    def emit(self, event: Any) -> None:
        self.on_event(event)
        for listener in list(self.listeners):
            listener(event)

    def emit_loaded(self, path: str, n_ctx: int = 4096) -> p.ModelLoaded:
        event = model_loaded(path, n_ctx)
        self.emit(event)
        return event

    def crash(self, lines: tuple[str, ...] = ("GGML_ASSERT failed", "Aborted")) -> None:
        self.alive = False
        self._last_lines = lines
        self.emit(EngineCrashed(exit_code=-6, last_lines=lines))


def model_loaded(path: str, n_ctx: int = 4096) -> p.ModelLoaded:
    return p.ModelLoaded(
        path=str(path),
        description="llama 135M Q4_1",
        n_ctx=n_ctx,
        n_ctx_train=8192,
        n_params=134_515_008,
        size_bytes=99_000_000,
        n_layers=30,
        n_gpu_layers=0,
        flash_attn="off",
        chat_template="model",
        load_seconds=0.4,
    )


def done(request_id: int, n_generated: int = 10, stop_reason: str = "eos") -> p.GenerationDone:
    return p.GenerationDone(
        request_id=request_id,
        stop_reason=stop_reason,
        stats=p.GenerationStats(
            n_prompt_tokens=20,
            n_prompt_tokens_reused=0,
            n_generated=n_generated,
            prefill_seconds=0.05,
            time_to_first_token=0.12,
            decode_seconds=(n_generated - 1) / 42.0,
        ),
    )
