"""Another machine's model as the chat's engine: the reply streams from an OpenAI-compatible
server (engine/remote/openai_client.py) on a thread of its own, and comes back as the same
signals the local engine's bridge gives (token_text, generation_done, generation_failed), so the
chat's reply code serves both.

The stats line shows the server's token counts where it gives them and the time to the first
text as seen here; a server without `usage` gets a line without tok/s.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from engine.remote.endpoints import RemoteChoice
from engine.remote.openai_client import Endpoint, RemoteDone, RemoteError, chat_body, stream_chat
from engine.runtime import protocol as p

# Request ids of their own, far from the local engine's, so one never answers the other's reply.
FIRST_REQUEST_ID = 1 << 30


class RemoteEngine(QObject):
    token_text = Signal(int, str, int)  # request_id, text, number of tokens (unknown: 0)
    generation_done = Signal(object)  # p.GenerationDone
    generation_failed = Signal(object)  # p.GenerationFailed
    changed = Signal()  # chosen, back to the local engine, or a reply started or ended
    _piece = Signal(int, object)  # from the streaming thread: text, RemoteDone or RemoteError

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.choice: RemoteChoice | None = None
        self.active = False
        self._api_key = ""
        self._next_request_id = FIRST_REQUEST_ID
        self._request_id: int | None = None
        self._stop = threading.Event()
        self._piece.connect(self._on_piece)

    # -- which engine ---------------------------------------------------------------------------

    def use(self, choice: RemoteChoice, api_key: str = "") -> None:
        """Reply from `choice`'s model from now on."""
        self.choice, self._api_key, self.active = choice, api_key, True
        self.changed.emit()

    def use_local(self) -> None:
        self.active = False
        self.changed.emit()

    @property
    def model_name(self) -> str:
        return self.choice.model if self.choice else ""

    @property
    def label(self) -> str:
        """“model on host”, as the chat header shows the engine."""
        if self.choice is None:
            return ""
        return f"{self.choice.model} on {Endpoint(self.choice.base_url).host}"

    # -- a reply --------------------------------------------------------------------------------

    @property
    def generating(self) -> bool:
        return self._request_id is not None

    def generate(
        self,
        messages: Sequence[p.ChatMessage],
        *,
        sampling: p.SamplingParams,
        max_tokens: int,
        tools: list[dict[str, Any]] | None = None,
    ) -> int | None:
        """Start a reply; its request id, or None when no server is chosen or one is running."""
        if self.choice is None or self.generating:
            return None
        request_id = self._next_request_id
        self._next_request_id += 1
        self._request_id = request_id
        self._stop = threading.Event()
        endpoint = Endpoint(self.choice.base_url, self._api_key)
        body = chat_body(self.choice.model, messages, sampling, max_tokens, tools)
        threading.Thread(
            target=self._stream,
            args=(request_id, endpoint, body, self._stop),
            name="hearth-remote-reply",
            daemon=True,  # a server that never answers must not keep the app from quitting
        ).start()
        self.changed.emit()
        return request_id

    def stop(self) -> None:
        self._stop.set()

    def _stream(self, request_id: int, endpoint: Endpoint, body: dict, stop: threading.Event):
        try:
            for piece in stream_chat(endpoint, body, stop):
                self._piece.emit(request_id, piece)
        except RemoteError as exc:
            self._piece.emit(request_id, exc)
        except Exception as exc:
            self._piece.emit(request_id, RemoteError(f"The remote reply failed: {exc}"))

    @Slot(int, object)
    def _on_piece(self, request_id: int, piece: object) -> None:
        if request_id != self._request_id:
            return  # a reply already ended (stopped, or the chat switched away)
        if isinstance(piece, str):
            self.token_text.emit(request_id, piece, 0)
            return
        self._request_id = None
        if isinstance(piece, RemoteDone):
            self.generation_done.emit(
                p.GenerationDone(
                    request_id=request_id, stop_reason=piece.stop_reason, stats=piece.stats
                )
            )
        else:
            self.generation_failed.emit(
                p.GenerationFailed(request_id=request_id, message=str(piece))
            )
        self.changed.emit()
