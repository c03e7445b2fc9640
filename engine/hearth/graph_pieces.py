"""A decode step captured as CUDA graph pieces with host work between them.

Some work in a step must run on the host after the GPU has reached a point and before it goes
on: a layer whose experts live in host memory copies the token's picked experts to the device
and computes others with ggml, and only the step's own router says which (staged_experts.py).
That code calls `cut(host_step, device)` where the step must pause:

- run eagerly (no capture), cut waits for the device's current stream and runs host_step;
- inside `capture(fn, device)`, cut ends the graph being captured and starts the next, and
  host_step is kept to run between the two at every replay.

`cut(host_step, device, before_wait)` also starts work before the host waits: a host step
with work that needs only the device to be done (issuing copies) hands it to a thread that
waits for the device itself, so it starts the moment the device is done, beside the stepping
thread's own work rather than after it.

    pieces, result = capture(lambda: model_step(...), device)   # result: fn's, as captured
    replay(pieces, device)   # each piece, waited for and followed by its host step

The pieces share one memory pool and always replay in the order captured, so a tensor made in
one piece and read in the next keeps its memory (CUDA graphs' rule for graphs sharing a pool).
Between pieces the host waits for the stream (a few microseconds) and runs Python: a cut
belongs where the host has work worth that (hundreds of microseconds a layer in RAM), not in a
step that runs on the GPU alone. A graph captured whole (torch.cuda.graph, as the prefill's
and the batch's are) cannot be cut: `can_cut` says so, and the callers take another path there.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

_capturing = threading.local()  # .recorder: the _Recorder of this thread's capture, if any


@dataclass(frozen=True)
class Piece:
    graph: torch.cuda.CUDAGraph
    host_step: Callable[[], None] | None  # run after the graph, once its stream is waited for
    before_wait: Callable[[], None] | None = None  # run before the host waits for the graph


class _Recorder:
    def __init__(self, pool):
        self.pool = pool
        self.pieces: list[Piece] = []
        self.graph = self._begin()

    def _begin(self) -> torch.cuda.CUDAGraph:
        graph = torch.cuda.CUDAGraph()
        graph.capture_begin(pool=self.pool)
        return graph

    def cut(self, host_step: Callable[[], None], before_wait: Callable[[], None] | None) -> None:
        self.graph.capture_end()
        self.pieces.append(Piece(self.graph, host_step, before_wait))
        self.graph = self._begin()

    def finish(self) -> list[Piece]:
        self.graph.capture_end()
        self.pieces.append(Piece(self.graph, None))
        return self.pieces


def can_cut(device: torch.device) -> bool:
    """Whether cut() can run here: on the CPU, on a GPU stream not being captured, or inside
    capture()."""
    if device.type != "cuda" or getattr(_capturing, "recorder", None) is not None:
        return True
    return not torch.cuda.is_current_stream_capturing()


def cut(
    host_step: Callable[[], None],
    device: torch.device,
    before_wait: Callable[[], None] | None = None,
) -> None:
    """Pause the step here for host_step (the module docstring); before_wait, if any, runs
    before the host waits for the device's current stream."""
    recorder = getattr(_capturing, "recorder", None)
    if recorder is not None:
        recorder.cut(host_step, before_wait)
        return
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        raise RuntimeError("a graph captured whole cannot pause for host work (can_cut)")
    if before_wait is not None:
        before_wait()
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
    host_step()


def capture(
    fn: Callable[[], object], device: torch.device, pool=None
) -> tuple[list[Piece], object]:
    """fn() captured on a side stream, as pieces split at its cuts; (pieces, fn's result).
    Run fn eagerly first (twice, as any capture): its kernels compiled, its buffers made."""
    torch.cuda.synchronize(device)
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        recorder = _Recorder(pool if pool is not None else torch.cuda.graph_pool_handle())
        _capturing.recorder = recorder
        try:
            result = fn()
        except BaseException:
            with contextlib.suppress(RuntimeError):  # end it, or the stream stays captured
                recorder.graph.capture_end()
            raise
        finally:
            _capturing.recorder = None
        pieces = recorder.finish()
    torch.cuda.current_stream(device).wait_stream(stream)
    return pieces, result


@dataclass
class Waits:
    """The host's waits for pieces before their host steps: how many, how long (seconds)."""

    count: int = 0
    seconds: float = 0.0


def replay(pieces: list[Piece], device: torch.device, waits: Waits | None = None) -> None:
    """Each piece in order, its host step after it once the stream has done it. The last piece
    is left running: the caller waits for it as for any graph."""
    for piece in pieces:
        piece.graph.replay()
        if piece.host_step is not None:
            if piece.before_wait is not None:
                piece.before_wait()
            started = time.perf_counter()
            torch.cuda.current_stream(device).synchronize()
            if waits is not None:
                waits.count += 1
                waits.seconds += time.perf_counter() - started
            piece.host_step()
