"""A model file's bytes onto a CUDA/ROCm GPU at the speed of the disk or the bus, not of
pageable copies, with the reads running ahead of the loader.

`torch.from_numpy(mapped_slice).to("cuda")` copies from pageable memory: the driver stages it
through its own small pinned buffer, synchronously, after the kernel has faulted in every 4 KiB
page of the mapping (about 3-4 GB/s on the H100 machine). Here the file is read with
`os.preadv` (no page faults) by a few reader threads into a ring of pinned slots, and the
loader's thread sends each filled slot to the GPU as an asynchronous copy on its current stream.

The loader may say up front which byte ranges it will ask for, in its order (`plan`): the
readers then start at once and stay up to a ring's worth of slots ahead of it, so the disk (a
cold page cache) or the memory copies (a warm one) never wait while the loader's thread
allocates tensors, splits blocks into planes or launches kernels; with several readers the
disk sees several requests in flight. Memory stays bounded by the ring (`n_slots` x
`chunk_bytes` of pinned host memory); nothing holds a copy of the whole file.

    with FileUploader(path, device, plan=[(offset, n_bytes), ...]) as upload:
        blocks = upload.read(offset, n_bytes)   # a uint8 tensor on `device`
    # leaving the block waits for the last copy and gives the pinned memory back

Asking for a planned range drops the planned ranges before it that were not asked for (read
ahead, never copied); a range outside the plan, or one dropped so, is still read exactly, on
the loader's thread through pageable memory, leaving the read-ahead as it is. Without a plan
every range asked for goes through the ring as it is asked for. The copies run on the stream
that is current when `read` is called, so work queued after them on that stream (the loader's
re-layout into kernel planes, say) sees the bytes; a slot is refilled only after its copy has
left it (an event the reader waits on), so the loader's thread never waits for a copy.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import torch

CHUNK_BYTES = 8 * 2**20
# the plan's first bytes handed to the kernel's read-ahead (posix_fadvise WILLNEED) as the
# uploader starts: the disk reads them while the readers wait for their first pinned slots,
# whose allocation makes the process's CUDA context (0.3-0.4 s on the H200 host, about 0.5 GB
# of a cold disk's reads); a warm page cache answers at once
ADVISE_BYTES = 512 * 2**20
N_READERS = max(2, min(8, (os.cpu_count() or 2) // 2))  # page-cache copies: ~3 GB/s a thread
N_SLOTS = 2 * N_READERS  # a slot being filled by each reader, and as many filled and waiting


@dataclass
class _Piece:
    """Up to one slot's worth of one range."""

    range_index: int
    offset: int  # in the file
    n_bytes: int
    got: int | None = None  # bytes read, once the reader is done
    error: Exception | None = None  # the reader's, raised by `read`
    dropped: bool = False  # skipped by the loader: read, never copied


class FileUploader:
    """Reads byte ranges of one file onto one GPU through pinned, reused slots."""

    def __init__(
        self,
        path: str,
        device: torch.device | str,
        *,
        plan: list[tuple[int, int]] | None = None,
        chunk_bytes: int = CHUNK_BYTES,
        n_slots: int = N_SLOTS,
        n_readers: int = N_READERS,
    ):
        self.device = torch.device(device)
        # On the CPU (tests) the same path runs with plain buffers and synchronous copies.
        self._gpu = self.device.type == "cuda"
        self._fd = os.open(path, os.O_RDONLY)
        self._chunk = chunk_bytes
        self._n_slots = max(1, n_slots)
        self._buffers: list[torch.Tensor | None] = [None] * self._n_slots
        self._copied: list[torch.cuda.Event | None] = [None] * self._n_slots
        self._ranges: list[tuple[int, int]] = []
        self._first_piece: list[int] = []  # index of each range's first piece
        self._pieces: list[_Piece] = []
        self._next_read = 0  # the next piece a reader takes
        self._released = 0  # pieces before this one have left their slots (in order)
        self._next_range = 0  # the next range `read` expects
        self._closed = False
        self._changed = threading.Condition()
        self._planned = plan is not None
        self.reads_aside = 0  # ranges read outside the plan (a loader whose plan was off)
        for offset, n_bytes in plan or []:
            self._add_range(offset, n_bytes)
        self.advice: threading.Thread | None = None
        if plan:
            self.advice = threading.Thread(target=_advise, args=(path, list(plan), ADVISE_BYTES),
                                           name="hearth-upload-advice", daemon=True)  # fmt: skip
            self.advice.start()
        self._readers = [
            threading.Thread(target=self._reader, name=f"hearth-upload-{i}", daemon=True)
            for i in range(max(1, n_readers))
        ]
        for thread in self._readers:
            thread.start()

    def _add_range(self, offset: int, n_bytes: int) -> None:
        """Append a range and its pieces (called with the lock held, or before the readers)."""
        index = len(self._ranges)
        self._ranges.append((offset, n_bytes))
        self._first_piece.append(len(self._pieces))
        for start in range(0, n_bytes, self._chunk):
            size = min(self._chunk, n_bytes - start)
            self._pieces.append(_Piece(index, offset + start, size))

    def read(self, offset: int, n_bytes: int) -> torch.Tensor:
        """Bytes [offset, offset + n_bytes) of the file as a uint8 tensor on the device."""
        with self._changed:
            index = self._find(offset, n_bytes)
            if index is not None:
                first = self._first_piece[index]
                following = index + 1 < len(self._ranges)
                last = self._first_piece[index + 1] if following else len(self._pieces)
                for piece in self._pieces[self._released : first]:
                    piece.dropped = True
                self._next_range = index + 1
        if index is None:
            return self._read_aside(offset, n_bytes)
        out = torch.empty(n_bytes, dtype=torch.uint8, device=self.device)
        for i in range(self._released, last):
            self._take(i, out, offset)
        return out

    def _find(self, offset: int, n_bytes: int) -> int | None:
        """The index of the range from `_next_range` on that is exactly (offset, n_bytes);
        without a plan, the range appended for the readers; else None (lock held)."""
        for i in range(self._next_range, len(self._ranges)):
            if self._ranges[i] == (offset, n_bytes):
                return i
        if self._planned:
            return None
        self._add_range(offset, n_bytes)
        self._changed.notify_all()
        return len(self._ranges) - 1

    def _read_aside(self, offset: int, n_bytes: int) -> torch.Tensor:
        """A range the plan did not hold (or held earlier and was passed): read here into
        pageable memory and copied synchronously, leaving the ring's read-ahead as it is."""
        self.reads_aside += 1
        host = torch.empty(n_bytes, dtype=torch.uint8)
        got = _read_into(self._fd, memoryview(host.numpy()), offset)
        if got != n_bytes:
            raise OSError(f"the model file ended early: {got} of {n_bytes} bytes at {offset}")
        return host.to(self.device)

    def _take(self, i: int, out: torch.Tensor, offset: int) -> None:
        """Wait for piece i; copy it into `out` (unless dropped); give its slot back."""
        piece = self._pieces[i]
        with self._changed:
            while piece.got is None and piece.error is None:
                self._changed.wait()
        if piece.error is not None and not piece.dropped:
            raise piece.error
        if piece.got != piece.n_bytes and not piece.dropped:
            raise OSError(
                f"the model file ended early: {piece.got} of {piece.n_bytes} bytes at "
                f"{piece.offset}"
            )
        slot = i % self._n_slots
        if not piece.dropped:
            at = piece.offset - offset
            source = self._buffers[slot][: piece.n_bytes]
            out[at : at + piece.n_bytes].copy_(source, non_blocking=self._gpu)
            if self._gpu:
                event = torch.cuda.Event()
                event.record()
                self._copied[slot] = event
        with self._changed:
            self._released = i + 1
            self._changed.notify_all()

    def _reader(self) -> None:
        while True:
            with self._changed:
                while not self._closed and (
                    self._next_read >= len(self._pieces)
                    or self._next_read >= self._released + self._n_slots
                ):
                    self._changed.wait()
                if self._closed:
                    return
                i = self._next_read
                self._next_read += 1
                piece = self._pieces[i]
                slot = i % self._n_slots
                copied, self._copied[slot] = self._copied[slot], None
            try:
                if copied is not None:
                    copied.synchronize()  # the slot's last copy has left it
                piece.got = self._read_piece(slot, piece)
            except Exception as exc:  # any: `read` raises it, the loader never waits forever
                piece.error = exc
            with self._changed:
                self._changed.notify_all()

    def _read_piece(self, slot: int, piece: _Piece) -> int:
        if piece.dropped:  # skipped before it was read: nothing to copy
            return piece.n_bytes
        buffer = self._buffers[slot]
        if buffer is None:
            # made by the reader, so pinning the ring overlaps the first reads
            buffer = torch.empty(self._chunk, dtype=torch.uint8, pin_memory=self._gpu)
            self._buffers[slot] = buffer
        return _read_into(self._fd, memoryview(buffer.numpy())[: piece.n_bytes], piece.offset)

    def close(self) -> None:
        """Stop the readers, wait for the copies still in flight, then free the pinned slots
        and the file."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        for thread in self._readers:
            thread.join()
        for event in self._copied:
            if event is not None:
                event.synchronize()
        self._copied = [None] * self._n_slots
        self._buffers = [None] * self._n_slots
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FileUploader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_into(fd: int, view: memoryview, offset: int) -> int:
    """Read up to len(view) bytes at `offset`; the count read (short only at the file's end)."""
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
        if n == 0:
            break
        got += n
    return got


def _advise(path: str, ranges: list[tuple[int, int]], budget: int) -> None:
    """Ask the kernel to read the first `budget` bytes of `ranges`, in order, into the page
    cache now (on its own descriptor: the uploader may close its own meanwhile). Where the
    system has no such advice, or refuses it, the readers read as they would anyway."""
    if not hasattr(os, "posix_fadvise"):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        for offset, n_bytes in ranges:
            if budget <= 0:
                break
            take = min(n_bytes, budget)
            os.posix_fadvise(fd, offset, take, os.POSIX_FADV_WILLNEED)
            budget -= take
    except OSError:
        pass
    finally:
        os.close(fd)
