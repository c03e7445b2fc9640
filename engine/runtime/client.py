"""Drive the engine worker process: start it, send commands, receive its events.

The worker runs llama.cpp in a child process so that an abort (GPU out-of-memory during compute),
a segfault on a hostile file or a driver fault ends that process and never the GUI. This class is
Qt-free: the GUI's bridge passes a callback that re-emits each event as a Qt signal, the CLI uses
`EventQueue`.

Events arrive on a reader thread, in order. When the process dies without being asked to, the
callback receives `EngineCrashed` with the exit status and the last lines the engine printed.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.child_process import module_command
from engine.hearth.allocator import with_expandable_segments
from engine.runtime import protocol as p
from engine.runtime.engine_output import EngineOutput
from engine.runtime.helper_loss import lost_helper_message, lost_helpers

STDERR_READ_BYTES = 64 * 1024


@dataclass(frozen=True)
class EngineCrashed:
    """The worker process ended without being asked to.

    `cause_lines`: the first lines where llama.cpp stated an error (an abort's reason comes
    before a long backtrace); `last_lines`: the tail of what it printed. Both escaped."""

    exit_code: int | None
    last_lines: tuple[str, ...]
    cause_lines: tuple[str, ...] = ()
    # helper machines (llama.cpp RPC) the loaded model used that no longer answer: the cause
    lost_helpers: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        return self.message_for(gpu=True)

    def message_for(self, *, gpu: bool) -> str:
        """What happened and what to do; `gpu`: whether the model may run on a GPU here (on a
        machine without one, GPU layers are no advice)."""
        if self.lost_helpers:
            return lost_helper_message(self.lost_helpers)
        code = self.exit_code
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        lighter = "fewer GPU layers" if gpu else "a smaller model file"
        return (
            f"The engine process {how}. The app is fine; reload the model to go on. "
            f"If it happens again, try a shorter context or {lighter}."
        )


EventCallback = Callable[[Any], None]


class EngineClient:
    """One engine worker process. Methods are safe to call from any thread."""

    def __init__(self, on_event: EventCallback, *, env: dict[str, str] | None = None):
        self._on_event = on_event
        self._listeners: tuple[EventCallback, ...] = ()
        self._env = env
        self._proc: subprocess.Popen | None = None
        self._send_lock = threading.Lock()
        self._stderr = EngineOutput()
        self._stderr_done = threading.Event()
        self._closing = False
        self._next_request_id = 1
        self._helpers: tuple[str, ...] = ()  # the helper machines the last load asked for

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker; its `Ready` event follows once llama.cpp is initialised."""
        if self.alive:
            return
        self._closing = False
        self._stderr.clear()
        self._stderr_done.clear()
        env = dict(os.environ if self._env is None else self._env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # On an abort ggml attaches gdb to its own process for a backtrace where gdb is
        # installed: with CUDA's libraries loaded, and debuginfod asking the network for their
        # symbols, that can hold the dying worker for minutes before the window hears of it.
        # The line that says why comes before the backtrace and is all the person is shown.
        env.setdefault("GGML_NO_BACKTRACE", "1")
        # the Hearth engine's torch allocator: expandable segments, so that a prefill's
        # transient buffers do not leave segments beside its peak (engine/hearth/allocator.py)
        env = with_expandable_segments(env)
        proc = subprocess.Popen(
            module_command("engine.runtime.worker"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            bufsize=0,
        )
        self._proc = proc
        threading.Thread(target=self._read_stderr, args=(proc,), daemon=True).start()
        threading.Thread(target=self._read_events, args=(proc,), daemon=True).start()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def last_lines(self) -> tuple[str, ...]:
        return self._stderr.last_lines()

    def cause_lines(self) -> tuple[str, ...]:
        return self._stderr.cause_lines()

    def close(self, timeout: float = 5.0) -> None:
        """Ask the worker to exit (it frees the model), and kill it if it does not."""
        proc = self._proc
        if proc is None:
            return
        self._closing = True
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                self._send(p.Shutdown())
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._proc = None

    def kill(self) -> None:
        """End the worker at once (a hung driver call, say); no EngineCrashed is reported."""
        proc = self._proc
        if proc is not None:
            self._closing = True
            proc.kill()
            proc.wait()
            self._proc = None

    def abort_hung(self) -> None:
        """End a worker stuck inside one C call (it answers no Stop), reported to every listener
        as the crash it is (`EngineCrashed`), so the window and the server react as to one."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def add_listener(self, callback: EventCallback) -> None:
        """Also pass every event to `callback` (the API server beside the window): it is
        called on the reader thread and must not block. Request ids tell whose events are
        whose."""
        self._listeners = (*self._listeners, callback)

    def remove_listener(self, callback: EventCallback) -> None:
        self._listeners = tuple(c for c in self._listeners if c is not callback)

    def _deliver(self, event: Any) -> None:
        self._on_event(event)
        for listener in self._listeners:
            listener(event)

    # -- commands -------------------------------------------------------------------------------

    def load(self, params: p.ModelParams) -> None:
        self._helpers = tuple(params.rpc_servers)
        self._send(p.Load(params=params))

    def generate(
        self,
        *,
        messages: list[p.ChatMessage] | tuple[p.ChatMessage, ...] = (),
        prompt: str | None = None,
        prompt_tokens: tuple[int, ...] = (),
        sampling: p.SamplingParams | None = None,
        max_tokens: int = 512,
        stop: tuple[str, ...] = (),
        ignore_eos: bool = False,
        top_logprobs: int = -1,
        tools_json: str = "",
        overflow: str = "stop",
        reply_room: int = 0,
        chat_format: str = "",
        speculate: bool = True,
        continue_last: bool = False,
    ) -> int:
        """Start a generation; returns its request id (carried by its TokenText events)."""
        with self._send_lock:  # ids stay unique with the window and the server both asking
            request_id = self._next_request_id
            self._next_request_id += 1
        self._send(
            p.Generate(
                request_id=request_id,
                messages=tuple(messages),
                prompt=prompt,
                prompt_tokens=tuple(prompt_tokens),
                sampling=sampling or p.SamplingParams(),
                max_tokens=max_tokens,
                stop=tuple(stop),
                ignore_eos=ignore_eos,
                top_logprobs=top_logprobs,
                tools_json=tools_json,
                overflow=overflow,
                reply_room=reply_room,
                chat_format=chat_format,
                speculate=speculate,
                continue_last=continue_last,
            )
        )
        return request_id

    def embed(self, inputs: tuple[str, ...], query: str = "") -> int:
        """Ask for the pooled embedding of each input (with a query: a reranker's score of each
        input against it); returns the request id of its Embedded (or GenerationFailed)
        event."""
        with self._send_lock:
            request_id = self._next_request_id
            self._next_request_id += 1
        self._send(p.Embed(request_id=request_id, inputs=tuple(inputs), query=query))
        return request_id

    def stop(self, request_id: int | None = None) -> None:
        """Stop generation `request_id`, or every generation in progress."""
        self._send(p.Stop(request_id=request_id))

    def unload(self) -> None:
        self._send(p.Unload())

    def request_status(self) -> None:
        self._send(p.GetStatus())

    def request_memory_report(self) -> None:
        self._send(p.GetMemoryReport())

    def _send(self, msg: Any) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            raise BrokenPipeError(self._why_not_running(proc))
        frame = p.encode(msg)
        with self._send_lock:
            proc.stdin.write(frame)
            proc.stdin.flush()

    def _why_not_running(self, proc: subprocess.Popen | None) -> str:
        """What to say when a request finds no engine: how it ended and the last thing it
        printed, where it ran and died (not started: no cause to give)."""
        if proc is None or proc.poll() is None:
            return "the engine process is not running; start or reload it"
        self._stderr_done.wait(2.0)
        said = self._stderr.cause_lines() or self._stderr.last_lines()[-3:]
        cause = f": {' / '.join(said)}" if said else ""
        return f"the engine process exited (code {proc.returncode}){cause}; start or reload it"

    # -- reader threads -------------------------------------------------------------------------

    def _read_events(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        protocol_error: str | None = None
        while True:
            try:
                msg = p.read_frame(proc.stdout)
            except p.ProtocolError as exc:
                protocol_error = f"engine sent a bad message: {exc}"
                proc.kill()
                break
            except (OSError, ValueError):
                break
            if msg is None:
                break
            self._deliver(msg)
        exit_code = proc.wait()
        self._stderr_done.wait(2.0)  # let the last lines the engine printed arrive
        # A process killed and replaced (restarted) is not reported as the new one's crash.
        if not self._closing and proc is self._proc:
            lines = self._stderr.last_lines()
            if protocol_error:
                lines = (*lines, protocol_error)
            self._deliver(
                EngineCrashed(
                    exit_code=exit_code,
                    last_lines=lines,
                    cause_lines=self._stderr.cause_lines(),
                    lost_helpers=lost_helpers(self._helpers) if self._helpers else (),
                )
            )

    def _read_stderr(self, proc: subprocess.Popen) -> None:
        assert proc.stderr is not None
        try:
            # Bounded reads: a line of a hostile file's text cannot grow without end.
            for raw in iter(lambda: proc.stderr.readline(STDERR_READ_BYTES), b""):
                self._stderr.add(raw)
        except (OSError, ValueError):
            pass
        finally:
            self._stderr_done.set()


class EventQueue:
    """A callback that collects events for a thread that waits on them (the CLI, tests)."""

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()

    def __call__(self, event: Any) -> None:
        self._queue.put(event)

    def get(self, timeout: float | None = None) -> Any:
        """The next event; raises TimeoutError after `timeout` seconds."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no event from the engine within {timeout} s") from None

    def wait_for(self, *types: type, timeout: float | None = None) -> Any:
        """Skip events until one of `types` (or EngineCrashed) arrives; return it."""
        while True:
            event = self.get(timeout)
            if isinstance(event, (*types, EngineCrashed)):
                return event
