"""Turn a stream of token bytes into text that is safe to show, and find stop strings in it.

Two things make this more than `bytes.decode` per token:
- A multi-byte UTF-8 character can be split across tokens (byte-fallback vocabularies emit
  emoji and CJK characters a byte at a time). An incremental decoder holds the incomplete tail
  back until the rest arrives, so no replacement character is ever shown for a split character.
- A stop string can span tokens. Text that could still turn out to be the start of a stop string
  is held back until it is either completed (the stream ends there) or ruled out (released).
"""

from __future__ import annotations

import codecs


class StreamingDetokenizer:
    def __init__(self, stop_strings: tuple[str, ...] = ()):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = tuple(s for s in stop_strings if s)
        self._held = ""  # decoded text not yet released, because it may begin a stop string
        self.stopped = False  # a stop string was found; nothing more will be released

    def feed(self, piece: bytes) -> str:
        """Add one token's bytes; return the text that can be shown now (maybe empty)."""
        if self.stopped:
            return ""
        self._held += self._decoder.decode(piece)
        return self._release()

    def finish(self) -> str:
        """The stream ended: release what is held (an unfinished character becomes U+FFFD)."""
        if self.stopped:
            return ""
        held = self._held + self._decoder.decode(b"", final=True)
        self._held = ""
        first = self._first_match(held)
        if first >= 0:
            self.stopped = True
            return held[:first]
        return held

    def _release(self) -> str:
        held = self._held
        if not self._stops:
            self._held = ""
            return held
        first = self._first_match(held)
        # A stop string that has begun but is not complete may still end before `first`,
        # and the earliest match is the one that counts: hold from where it could begin.
        maybe = len(held) - _longest_stop_prefix_suffix(held, self._stops)
        if first >= 0 and first <= maybe:
            self.stopped = True
            self._held = ""
            return held[:first]
        self._held = held[maybe:]
        return held[:maybe]

    def _first_match(self, text: str) -> int:
        return min((i for i in (text.find(s) for s in self._stops) if i >= 0), default=-1)


def _longest_stop_prefix_suffix(text: str, stops: tuple[str, ...]) -> int:
    """Length of the longest end of `text` that is a proper prefix of some stop string."""
    best = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:n]):
                best = n
                break
    return best
