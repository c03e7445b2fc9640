"""What a batch decoder keeps of its requests between steps, on either engine: those waiting for
room, those running, and the stops the reader thread has asked for since the last step.

    queue.request_stop(request_id)      from the reader thread (None: every request)
    stop_all, ids = queue.take_stops()  from the main thread, once a step
"""

from __future__ import annotations

import collections
import threading
from typing import Generic, TypeVar

Request = TypeVar("Request")


class RequestQueue(Generic[Request]):
    def __init__(self) -> None:
        self._waiting: collections.deque[Request] = collections.deque()
        self._running: list[Request] = []
        self._stop_ids: set[int] = set()
        self._stop_all = False
        self._lock = threading.Lock()

    # -- from the reader thread ---------------------------------------------------------------

    def request_stop(self, request_id: int | None) -> None:
        with self._lock:
            if request_id is None:
                self._stop_all = True
            else:
                self._stop_ids.add(request_id)

    def counts(self) -> tuple[int, int]:
        """(running, waiting)."""
        return len(self._running), len(self._waiting)

    # -- from the main thread -----------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return bool(self._running or self._waiting)

    def take_stops(self) -> tuple[bool, set[int]]:
        """(whether every request is to stop, the ids asked for) since the last call."""
        with self._lock:
            stop_all, ids = self._stop_all, set(self._stop_ids)
            self._stop_all = False
            self._stop_ids.clear()
        return stop_all, ids
