"""The Responses API's memory: each response's conversation, kept while the server runs so that
a request can continue it with `previous_response_id`, and the response itself for GET.

Bounded by count and by size; when full, the least recently used goes first (a response read
as a previous one counts as used). Nothing is written to disk.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from engine.server.chat_request import Turn

MAX_RESPONSES = 256
MAX_CHARS = 32 * 1024 * 1024


@dataclass(frozen=True)
class StoredResponse:
    turns: tuple[Turn, ...]  # the conversation, this response's output last (no instructions)
    body: dict[str, Any]  # the response object as it was sent
    size: int


class ResponseStore:
    def __init__(self, max_responses: int = MAX_RESPONSES, max_chars: int = MAX_CHARS):
        self.max_responses, self.max_chars = max_responses, max_chars
        self._kept: OrderedDict[str, StoredResponse] = OrderedDict()
        self._chars = 0

    def __len__(self) -> int:
        return len(self._kept)

    def put(self, response_id: str, turns: tuple[Turn, ...], body: dict[str, Any]) -> None:
        size = len(json.dumps(body)) + sum(
            len(t.content) + sum(len(json.dumps(c)) for c in t.calls) for t in turns
        )
        if size > self.max_chars:
            return  # larger than the whole store: not kept, and nothing else is dropped for it
        self._drop(response_id)
        self._kept[response_id] = StoredResponse(turns, body, size)
        self._chars += size
        while len(self._kept) > self.max_responses or self._chars > self.max_chars:
            self._drop(next(iter(self._kept)))

    def get(self, response_id: str) -> StoredResponse | None:
        stored = self._kept.get(response_id)
        if stored is not None:
            self._kept.move_to_end(response_id)
        return stored

    def _drop(self, response_id: str) -> None:
        stored = self._kept.pop(response_id, None)
        if stored is not None:
            self._chars -= stored.size
