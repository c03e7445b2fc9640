"""Stops that arrive before their request has begun.

A Stop is read on the worker's reader thread the moment it arrives, but the request it names
may still wait behind another command, or be having its prompt rendered and tokenized. The
decode loops honour stops of the generations they run; a stop for one not running yet would be
lost, and the request would then run to its end for a client long gone. Every stop is noted
here, and a request asks before it starts to decode (after its tokenization too) whether it was
stopped already.
"""

from __future__ import annotations

import collections
import threading

KEPT = 1024  # request ids remembered; ids only grow, so older ones never come back


class EarlyStops:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: collections.OrderedDict[int, None] = collections.OrderedDict()

    def note(self, request_id: int | None) -> None:
        """A Stop arrived for `request_id` (None: every request: nothing to keep)."""
        if request_id is None:
            return
        with self._lock:
            self._ids[request_id] = None
            while len(self._ids) > KEPT:
                self._ids.popitem(last=False)

    def take(self, request_id: int) -> bool:
        """Whether `request_id` was stopped already (and forget it)."""
        with self._lock:
            if request_id not in self._ids:
                return False
            del self._ids[request_id]
            return True
