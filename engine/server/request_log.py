"""The live request log: one record per finished request, for the Server page and the console.

Listeners are called on the server's event loop thread; they must not block (the window's
bridge re-emits each record as a Qt signal).
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestRecord:
    number: int
    started_at: float  # Unix time
    client: str
    route: str
    model: str
    status: int  # HTTP status; 499: the client went away first
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    first_token_seconds: float
    stream: bool
    note: str = ""  # the error message or stop reason
    # the engine's own decode time (after the first token): never the time a request waited
    # in the server's queue or for the worker
    decode_seconds: float = 0.0
    key: str = ""  # the name of the API key it came with ("" without named keys)
    # prompt tokens whose KV came from the cache (a chat's earlier turn, or a prefix shared
    # with other requests), not computed: prompt_tokens - this is the prefill work done
    prompt_tokens_reused: int = 0

    @property
    def prompt_tokens_computed(self) -> int:
        return self.prompt_tokens - self.prompt_tokens_reused

    @property
    def tokens_per_second(self) -> float:
        return (
            (self.completion_tokens - 1) / self.decode_seconds
            if self.completion_tokens > 1 and self.decode_seconds > 0
            else 0.0
        )

    def line(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.started_at))
        speed = f"{self.tokens_per_second:.1f} tok/s" if self.tokens_per_second else "-"
        return (
            f"{when} {self.client}{f' [{self.key}]' if self.key else ''} {self.route} "
            f"{self.status} prompt={self.prompt_tokens} "
            + (f"(computed {self.prompt_tokens_computed}) " if self.prompt_tokens_reused else "")
            + f"out={self.completion_tokens} {self.seconds:.2f}s {speed}"
            + (f" ({self.note})" if self.note else "")
        )


Listener = Callable[[RequestRecord], None]


class RequestLog:
    def __init__(self, keep: int = 500):
        self._records: collections.deque[RequestRecord] = collections.deque(maxlen=keep)
        self._listeners: list[Listener] = []
        self._numbers = itertools.count(1)
        self._per_key: collections.Counter[str] = collections.Counter()

    def next_number(self) -> int:
        return next(self._numbers)

    def add(self, record: RequestRecord) -> None:
        self._records.append(record)
        self._per_key[record.key] += 1
        for listener in list(self._listeners):
            listener(record)

    def records(self) -> list[RequestRecord]:
        return list(self._records)

    def counts_by_key(self) -> dict[str, int]:
        """Requests per API key name since the server started ("" for those without one)."""
        return dict(self._per_key)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        self._listeners = [x for x in self._listeners if x is not listener]
