"""Byte sources: anything the header reader can ask for a byte range.

A source answers `read(offset, length, timeout)` with at most `length` bytes (fewer only at the
end of the file) and knows the file's total `size` once its first read is done. `first_read`
and `max_read` tell the reader how much to ask for at first and at most per request; it asks
for more only when the header needs it. Local files, in-memory buffers and remote files on the
Hub (engine.gguf.remote) are all sources.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

from engine.gguf.errors import GGUFSourceError

KIB = 1024
MIB = 1024 * KIB


@runtime_checkable
class ByteSource(Protocol):
    name: str
    first_read: int
    max_read: int

    @property
    def size(self) -> int | None:
        """Total bytes in the file; None until the first read has learned it."""
        ...

    def read(self, offset: int, length: int, timeout: float | None = None) -> bytes: ...

    def close(self) -> None: ...


class LocalFileSource:
    """A file on disk, read with ordinary positioned reads.

    Local reads are cheap, so the chunks stay small: what the reader holds beyond the header
    is at most one chunk.
    """

    first_read = 1 * MIB
    max_read = 1 * MIB

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.name = os.fspath(path)
        # Check before opening: opening a FIFO would block until a writer turns up.
        if not os.path.isfile(path):
            detail = "is not a regular file" if os.path.exists(path) else "does not exist"
            raise GGUFSourceError("file", 0, f"{self.name!r} {detail}")
        try:
            self._file = open(path, "rb")  # noqa: SIM115 - closed by close()
            self._size = os.fstat(self._file.fileno()).st_size
        except OSError as exc:
            raise GGUFSourceError("file", 0, f"cannot open {self.name!r}: {exc.strerror}") from exc

    @property
    def size(self) -> int:
        return self._size

    def read(self, offset: int, length: int, timeout: float | None = None) -> bytes:
        try:
            self._file.seek(offset)
            return self._file.read(length)
        except OSError as exc:
            raise GGUFSourceError("file", offset, f"read failed: {exc.strerror}") from exc

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> LocalFileSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class BytesSource:
    """An in-memory file: tests, fuzzing, and headers that were fetched some other way."""

    def __init__(
        self,
        data: bytes | bytearray | memoryview,
        name: str = "<bytes>",
        *,
        first_read: int = 1 * MIB,
        max_read: int = 16 * MIB,
    ) -> None:
        self._data = bytes(data)
        self.name = name
        self.first_read = first_read
        self.max_read = max_read
        self.bytes_read = 0
        self.reads: list[tuple[int, int]] = []

    @property
    def size(self) -> int:
        return len(self._data)

    def read(self, offset: int, length: int, timeout: float | None = None) -> bytes:
        chunk = self._data[offset : offset + length]
        self.bytes_read += len(chunk)
        self.reads.append((offset, len(chunk)))
        return chunk

    def close(self) -> None:
        pass
