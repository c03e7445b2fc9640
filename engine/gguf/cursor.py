"""A bounded, forward-reading cursor over a ByteSource.

The cursor keeps the bytes fetched so far (always a prefix of the file) and fetches more only
when a read needs them: the first request is `source.first_read` bytes, each later one twice
the previous, up to `source.max_read`, and never past the header cap. So the bytes fetched
stay within the header plus one request.

Every read is checked against the bytes left (the smaller of the file size and the header cap)
before anything is fetched or allocated, so a hostile length can cost an error message but
never memory or time. A deadline is checked on every fetch and every few thousand elements.
"""

from __future__ import annotations

import struct
import time

from engine.gguf.errors import GGUFDeadlineError, GGUFError, GGUFSourceError
from engine.gguf.source import MIB, ByteSource

MAX_HEADER_BYTES = 64 * MIB  # hard cap on what a header may take (and on what we fetch)


def _size(n: int) -> str:
    if n % MIB == 0:
        return f"{n // MIB} MiB"
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self._end - time.monotonic()

    def check(self, field: str, offset: int) -> None:
        if time.monotonic() > self._end:
            raise GGUFDeadlineError(
                field, offset, f"reading the header took longer than {self.seconds:g} s"
            )


class Cursor:
    def __init__(
        self,
        source: ByteSource,
        deadline: Deadline,
        *,
        header_cap: int = MAX_HEADER_BYTES,
    ) -> None:
        self.source = source
        self.deadline = deadline
        self.header_cap = header_cap
        self.pos = 0
        self.buf = bytearray()
        self.fetched = 0  # bytes received from the source
        self.requests = 0
        self.limit = header_cap  # until the first read tells us the file size
        self._next_request = max(1, source.first_read)
        self._fetch(0, 1)
        size = source.size
        if size is None or size < 0:
            raise GGUFSourceError("file", 0, "the source did not report the file size")
        self.file_size = size
        # Reads may not go past this: the end of the file, or the header cap if that comes first.
        self.limit = min(size, header_cap)
        self.set_byte_order("<")

    # -- fetching ---------------------------------------------------------------------------

    def _fetch(self, start: int, need_end: int) -> None:
        """Extend the buffer (which ends at `start`) to cover at least `need_end`."""
        self.deadline.check("file", start)
        want = max(need_end - start, self._next_request)
        want = min(want, max(self.limit - start, need_end - start))
        timeout = max(0.001, self.deadline.remaining())
        chunk = self.source.read(start, want, timeout)
        self.requests += 1
        self.fetched += len(chunk)
        if len(chunk) > want:
            raise GGUFSourceError("file", start, f"source returned {len(chunk)} bytes for {want}")
        self.buf += chunk
        self._next_request = min(self._next_request * 2, max(1, self.source.max_read))

    def ensure(self, end: int, field: str, offset: int) -> None:
        """Make bytes [0, end) available, or raise naming `field` at `offset`."""
        if end <= len(self.buf):
            return
        if end > self.limit:
            self._raise_past_limit(end, field, offset)
        while len(self.buf) < end:
            have = len(self.buf)
            self._fetch(have, end)
            if len(self.buf) == have:
                raise GGUFSourceError(
                    field, offset, f"the source ended at byte {have}, before its reported size"
                )

    def _raise_past_limit(self, end: int, field: str, offset: int) -> None:
        if end > self.header_cap and self.file_size >= end:
            raise GGUFError(
                field,
                offset,
                f"the header would extend past {_size(self.header_cap)}, "
                "the most Hearth reads of a header",
            )
        raise GGUFError(
            field,
            offset,
            f"needs bytes up to {end}, but the file ends at byte {self.file_size} (truncated?)",
        )

    def bytes_left(self, at: int) -> int:
        return max(0, self.limit - at)

    def left_phrase(self, at: int) -> str:
        """'only N bytes are left ...', saying whether the file or the header cap ends first."""
        n = self.bytes_left(at)
        if self.limit < self.file_size:
            return f"only {n} bytes are left under the {_size(self.header_cap)} header cap"
        return f"only {n} bytes are left in the file"

    # -- primitives -------------------------------------------------------------------------

    def set_byte_order(self, order: str) -> None:
        self.byte_order = order
        self.u32 = struct.Struct(order + "I")
        self.i32 = struct.Struct(order + "i")
        self.u64 = struct.Struct(order + "Q")
        self.i64 = struct.Struct(order + "q")

    def take(self, n: int, field: str) -> bytes:
        start = self.pos
        end = start + n
        if end > len(self.buf):
            self.ensure(end, field, start)
        self.pos = end
        return bytes(self.buf[start:end])

    def unpack(self, st: struct.Struct, field: str) -> int:
        start = self.pos
        end = start + st.size
        if end > len(self.buf):
            self.ensure(end, field, start)
        self.pos = end
        return st.unpack_from(self.buf, start)[0]

    def read_u32(self, field: str) -> int:
        return self.unpack(self.u32, field)

    def read_i32(self, field: str) -> int:
        return self.unpack(self.i32, field)

    def read_u64(self, field: str) -> int:
        return self.unpack(self.u64, field)

    def read_i64(self, field: str) -> int:
        return self.unpack(self.i64, field)

    def read_string_bytes(self, field: str, max_len: int) -> tuple[bytes, int]:
        """A GGUF string (u64 length + bytes); its length is checked before anything is read.

        Returns the raw bytes and the offset of the length field.
        """
        start = self.pos
        length = self.read_u64(f"{field} length")
        if length > max_len:
            raise GGUFError(
                f"{field} length", start, f"{length} bytes is over the limit of {max_len}"
            )
        if length > self.bytes_left(self.pos):
            self.pos = start
            raise GGUFError(
                f"{field} length", start, f"{length} bytes, but {self.left_phrase(start + 8)}"
            )
        return self.take(length, field), start

    def read_name(self, field: str, max_len: int, noun: str) -> tuple[str, int]:
        """A metadata key or tensor name: a GGUF string that must be non-empty UTF-8 (`noun`
        says which, in the messages). Returns the name and the offset it starts at."""
        offset = self.pos
        self.deadline.check(field, offset)
        raw, _ = self.read_string_bytes(field, max_len)
        if not raw:  # stricter than llama.cpp for tensor names, which it lets through empty
            raise GGUFError(field, offset, f"the {noun} is empty")
        try:
            return raw.decode("utf-8"), offset
        except UnicodeDecodeError:
            raise GGUFError(field, offset, f"the {noun} is not UTF-8") from None

    def skip_strings(self, count: int, field: str, max_len: int, index_every: int) -> list[int]:
        """Walk `count` strings without building them; returns the offset of every
        `index_every`-th one so that single items can be looked up later.

        This is the hot loop of the whole reader (a 128k vocabulary plus 280k merges), so the
        checks are inlined: each length is checked against the cap and the bytes left before
        the cursor moves past it.
        """
        buf = self.buf
        pos = self.pos
        limit = self.limit
        unpack = self.u64.unpack_from
        index: list[int] = []
        done = 0
        while done < count:
            index.append(pos)
            self.deadline.check(field, pos)
            block_end = min(count, done + index_every)
            for i in range(done, block_end):
                if pos + 8 > len(buf):
                    self.ensure(pos + 8, f"{field} element #{i} length", pos)
                    buf = self.buf
                length = unpack(buf, pos)[0]
                if length > max_len or length > limit - pos - 8:
                    self.pos = pos
                    self._bad_element_length(field, i, pos, length, max_len)
                pos += 8 + length
            done = block_end
        self.ensure(pos, field, pos)
        self.pos = pos
        return index

    def _bad_element_length(self, field: str, i: int, pos: int, length: int, cap: int) -> None:
        if length > cap:
            detail = f"{length} bytes is over the limit of {cap}"
        else:
            detail = f"{length} bytes, but {self.left_phrase(pos + 8)}"
        raise GGUFError(f"{field} element #{i} length", pos, detail)

    def string_at(self, index: list[int], every: int, item: int, max_len: int) -> bytes:
        """Item `item` of a string array walked by skip_strings (already validated)."""
        pos = index[item // every]
        unpack = self.u64.unpack_from
        for _ in range(item % every):
            pos += 8 + unpack(self.buf, pos)[0]
        length = unpack(self.buf, pos)[0]
        return bytes(self.buf[pos + 8 : pos + 8 + min(length, max_len)])
