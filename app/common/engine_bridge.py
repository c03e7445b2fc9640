"""The GUI's side of the engine worker: an EngineClient whose events become Qt signals.

Events arrive on EngineClient's reader thread. That thread only appends them to a deque and, when
the deque was empty, posts one queued "wake" to the GUI thread; it never waits on the GUI, so the
worker's pipe is always drained and decode never stalls behind a repaint.

The GUI thread drains the deque at most once per FLUSH_INTERVAL_MS. Consecutive TokenText events of
one request are joined into one `token_text` signal, so the chat view repaints about 30 times a
second whether the model makes 20 or 2,000 tokens a second. Every other event is emitted in order,
after the text that came before it.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from engine.enums import EngineState, Overflow
from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed

FLUSH_INTERVAL_MS = 33  # about 30 repaints a second at most


ClientFactory = Callable[..., Any]  # (on_event, *, env) -> an EngineClient-like object


class EngineBridge(QObject):
    """Owns one EngineClient. Call it from the GUI thread; its signals fire on the GUI thread."""

    ready = Signal(object)  # p.Ready
    model_loaded = Signal(object)  # p.ModelLoaded
    load_failed = Signal(object)  # p.LoadFailed
    unloaded = Signal()
    token_text = Signal(int, str, int)  # request_id, text, number of tokens
    generation_done = Signal(object)  # p.GenerationDone
    generation_failed = Signal(object)  # p.GenerationFailed
    prompt_fitted = Signal(object)  # p.PromptFitted: the oldest turns were left out
    command_failed = Signal(object)  # p.CommandFailed
    engine_crashed = Signal(object)  # EngineCrashed
    status_received = Signal(object)  # p.Status
    memory_report = Signal(object)  # p.MemoryReport
    chat_template_changed = Signal(object)  # p.ChatTemplateChanged
    state_changed = Signal(str)

    _wake = Signal()  # posted from the reader thread; queued to the GUI thread

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        env: dict[str, str] | None = None,
        client_factory: ClientFactory = EngineClient,
        flush_interval_ms: int = FLUSH_INTERVAL_MS,
    ):
        super().__init__(parent)
        self._client_factory = client_factory
        self._env = env
        self._flush_interval_s = flush_interval_ms / 1000
        self._pending: collections.deque[tuple[int, Any]] = collections.deque()
        self._pending_lock = threading.Lock()
        self._wake_posted = False
        self._last_drain = 0.0
        self._drain_timer = QTimer(self)
        self._drain_timer.setSingleShot(True)
        self._drain_timer.timeout.connect(self._drain)
        self._wake.connect(self._on_wake, Qt.ConnectionType.QueuedConnection)

        self._closed = False
        # Events of a client that was replaced (a reload after a crash) are dropped by epoch.
        self._epoch = 0
        self._client = self._new_client()
        self._state = EngineState.STOPPED
        self._loading_params: p.ModelParams | None = None
        self._model: p.ModelLoaded | None = None
        self._last_good_params: p.ModelParams | None = None
        self._crashed_while_loading: p.ModelParams | None = None
        self._request_id: int | None = None
        self.flush_count = 0  # token_text emissions, for tests and diagnostics

    # -- what the GUI reads ---------------------------------------------------------------------

    @property
    def state(self) -> str:
        return self._state

    @property
    def model(self) -> p.ModelLoaded | None:
        """The loaded model, or None while none is loaded."""
        return self._model

    @property
    def loading_params(self) -> p.ModelParams | None:
        """The model being loaded now, if a load is under way."""
        return self._loading_params if self._state == EngineState.LOADING else None

    @property
    def client(self) -> Any:
        """The engine client, for the API server that shares the worker (it listens beside the
        bridge and tells its requests by their ids). It is replaced when the engine restarts."""
        return self._client

    @property
    def crashed_while_loading(self) -> p.ModelParams | None:
        """The model whose loading crashed the engine, if that is how it crashed."""
        return self._crashed_while_loading

    def engine_last_lines(self) -> tuple[str, ...]:
        """The last lines the engine printed (llama.cpp's log): why a load failed, in its words."""
        return tuple(self._client.last_lines())

    def reload_params(self) -> p.ModelParams | None:
        """What "Reload" loads: the last model that loaded fine, else the last one asked for.

        After a crash during loading, loading the same file again would crash again, so the
        last model that loaded successfully wins.
        """
        return self._last_good_params or self._loading_params

    # -- commands -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker if it is not running."""
        if self._client.alive:
            return
        self._client.start()
        self._set_state(EngineState.STARTING)

    def load(self, params: p.ModelParams) -> None:
        """Replace the loaded model (if any) with `params.path`; starts the worker if needed."""
        self.start()
        if self._state == EngineState.GENERATING:
            self._send(self._client.stop)
            self._request_id = None  # its GenerationDone still comes; it ends nothing now
        if self._model is not None or self._state == EngineState.LOADING:
            # Free the old model first, so two models never sit in VRAM together.
            self._send(self._client.unload)
            self._model = None
        self._loading_params = params
        self._crashed_while_loading = None
        if self._send(self._client.load, params):
            self._set_state(EngineState.LOADING)

    def generate(
        self,
        messages: Sequence[p.ChatMessage],
        *,
        sampling: p.SamplingParams | None = None,
        max_tokens: int = 512,
        overflow: str = Overflow.STOP,
        reply_room: int = 0,
        chat_format: str = "",
        continue_last: bool = False,
        tools_json: str = "",
    ) -> int | None:
        """Start a reply to `messages` (or, with `continue_last`, go on with the last, a reply
        cut short); its request id, or None when the engine is not ready."""
        if self._state != EngineState.IDLE:
            return None
        try:
            request_id = self._client.generate(
                messages=tuple(messages),
                sampling=sampling,
                max_tokens=max_tokens,
                overflow=overflow,
                reply_room=reply_room,
                chat_format=chat_format,
                **({"continue_last": True} if continue_last else {}),
                **({"tools_json": tools_json} if tools_json else {}),
            )
        except OSError:
            return None  # the worker died; its EngineCrashed is on the way
        self._request_id = request_id
        self._set_state(EngineState.GENERATING)
        return request_id

    def stop(self) -> None:
        """Stop the window's own reply (API requests on the same worker go on)."""
        if self._state == EngineState.GENERATING:
            self._send(self._client.stop, self._request_id)

    def unload(self) -> None:
        """Free the model (and its VRAM); the worker keeps running."""
        if self._model is None and self._state != EngineState.LOADING:
            return
        if self._state == EngineState.GENERATING:
            self._send(self._client.stop)
        self._send(self._client.unload)
        self._model = None
        self._loading_params = None
        self._request_id = None
        self._set_state(EngineState.NO_MODEL)

    def set_worker_env(self, env: dict[str, str] | None) -> None:
        """The worker's environment from the next (re)start on; None: the GUI's own."""
        self._env = env

    def reload(self) -> bool:
        """Restart the worker (after a crash) and load `reload_params()` again.

        Returns False when there is no model to load.
        """
        self.restart()
        params = self.reload_params()
        if params is None:
            self.start()
            return False
        self.load(params)
        return True

    def restart(self) -> None:
        """A fresh worker with no model (the old one is killed, whatever it was doing)."""
        self._client.kill()
        self._client = self._new_client()
        self._model = None
        self._request_id = None
        self._set_state(EngineState.STOPPED)
        self.start()

    def request_status(self) -> None:
        self._send(self._client.request_status)

    def request_memory_report(self) -> None:
        self._send(self._client.request_memory_report)

    def shutdown(self) -> None:
        """Stop the worker (it frees the model) and drop any events still on their way."""
        self._closed = True
        self._drain_timer.stop()
        self._client.close()
        self._model = None
        self._set_state(EngineState.STOPPED)

    def _send(self, command: Callable[..., None], *args: Any) -> bool:
        try:
            command(*args)
        except OSError:
            # A dead worker: its EngineCrashed (read on the reader thread) tells the user.
            return False
        return True

    def _new_client(self) -> Any:
        self._epoch += 1
        epoch = self._epoch
        return self._client_factory(lambda event: self._receive(epoch, event), env=self._env)

    # -- reader thread -> GUI thread ------------------------------------------------------------

    def _receive(self, epoch: int, event: Any) -> None:
        """Runs on the reader thread: queue the event, wake the GUI thread once, return."""
        if self._closed:
            return
        with self._pending_lock:
            self._pending.append((epoch, event))
            post = not self._wake_posted
            self._wake_posted = True
        if post:
            # RuntimeError: the bridge was deleted while the worker was still talking.
            with contextlib.suppress(RuntimeError):
                self._wake.emit()

    def _on_wake(self) -> None:
        due_in = self._last_drain + self._flush_interval_s - time.monotonic()
        if due_in <= 0:
            self._drain()
        elif not self._drain_timer.isActive():
            self._drain_timer.start(max(1, round(due_in * 1000)))

    def _drain(self) -> None:
        with self._pending_lock:
            events = list(self._pending)
            self._pending.clear()
            self._wake_posted = False
        self._last_drain = time.monotonic()
        text_request: int | None = None
        text_parts: list[str] = []
        text_tokens = 0
        for epoch, event in events:
            if self._closed:
                return
            if epoch != self._epoch:
                continue
            if isinstance(event, p.TokenText):
                if text_request is not None and event.request_id != text_request:
                    self._emit_text(text_request, text_parts, text_tokens)
                    text_parts, text_tokens = [], 0
                text_request = event.request_id
                text_parts.append(event.text)
                text_tokens += event.n_tokens
                continue
            if text_request is not None:
                self._emit_text(text_request, text_parts, text_tokens)
                text_request, text_parts, text_tokens = None, [], 0
            self._dispatch(event)
        if text_request is not None and not self._closed:
            self._emit_text(text_request, text_parts, text_tokens)

    def _emit_text(self, request_id: int, parts: list[str], n_tokens: int) -> None:
        self.flush_count += 1
        self.token_text.emit(request_id, "".join(parts), n_tokens)

    def _dispatch(self, event: Any) -> None:
        if isinstance(event, p.Ready):
            if self._state == EngineState.STARTING:
                self._set_state(EngineState.NO_MODEL)
            self.ready.emit(event)
        elif isinstance(event, p.ModelLoaded):
            if not self._matches_pending_load(event.path):
                return  # a load that was replaced by a newer one before it finished
            self._model = event
            self._last_good_params = self._loading_params
            self._set_state(EngineState.IDLE)
            self.model_loaded.emit(event)
        elif isinstance(event, p.LoadFailed):
            if not self._matches_pending_load(event.path):
                return
            self._loading_params = None
            self._set_state(EngineState.NO_MODEL)
            self.load_failed.emit(event)
        elif isinstance(event, p.Unloaded):
            self.unloaded.emit()
        elif isinstance(event, p.GenerationDone | p.GenerationFailed):
            if event.request_id == self._request_id and self._state == EngineState.GENERATING:
                self._request_id = None
                self._set_state(EngineState.IDLE if self._model else EngineState.NO_MODEL)
            if isinstance(event, p.GenerationDone):
                self.generation_done.emit(event)
            else:
                self.generation_failed.emit(event)
        elif isinstance(event, p.PromptFitted):
            self.prompt_fitted.emit(event)
        elif isinstance(event, p.CommandFailed):
            if event.command == "Generate" and self._state == EngineState.GENERATING:
                self._request_id = None
                self._set_state(EngineState.IDLE if self._model else EngineState.NO_MODEL)
            self.command_failed.emit(event)
        elif isinstance(event, EngineCrashed):
            if self._state == EngineState.LOADING:
                self._crashed_while_loading = self._loading_params
            self._model = None
            self._request_id = None
            self._set_state(EngineState.CRASHED)
            self.engine_crashed.emit(event)
        elif isinstance(event, p.Status):
            self.status_received.emit(event)
        elif isinstance(event, p.MemoryReport):
            self.memory_report.emit(event)
        elif isinstance(event, p.ChatTemplateChanged):
            self.chat_template_changed.emit(event)

    def _matches_pending_load(self, path: str) -> bool:
        params = self._loading_params
        return params is not None and _same_file(params.path, path)

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b
