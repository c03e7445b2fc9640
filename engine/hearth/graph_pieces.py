"""A decode step captured as CUDA graph pieces with host work between them.

Some work in a step must run on the host after the GPU has reached a point and before it goes
on: a layer whose experts live in host memory copies the token's picked experts to the device
and computes others with ggml, and only the step's own router says which (staged_experts.py).
That code calls `cut(host_step, device)` where the step must pause:

- run eagerly (no capture), cut waits for the device's work so far and runs host_step;
- inside `capture(fn, device)`, cut ends the graph being captured and starts the next, and
  host_step is kept to run between the two at every replay.

`cut(host_step, device, before_wait)` also starts work before the host waits: a host step
with work that needs only the device's work before the cut (issuing copies) hands it to a
thread, so it starts the moment the device is done, beside the stepping thread's own work
rather than after it. before_wait gets a `Handoff`: `wait()` waits for the device's work
before the cut (an event recorded there, so work queued after the cut is not waited for) and
`launch_next()` queues the piece after the cut. Whoever calls launch_next queues its own
device work first (the copies), and host_step returns only once launch_next has been called:
the next piece is then queued before the host step ends, while the stepping thread still
computes, and a piece that needs the host step's result waits for it on the device
(kernels/host_published.py). Without before_wait, the stepping thread launches the next piece
after the host step.

    pieces, result = capture(lambda: model_step(...), device)   # result: fn's, as captured
    replay(pieces, device)   # each piece, waited for and followed by its host step

The pieces share one memory pool and always replay in the order captured, so a tensor made in
one piece and read in the next keeps its memory (CUDA graphs' rule for graphs sharing a pool).
Between pieces the host waits for the device (a few microseconds) and runs Python: a cut
belongs where the host has work worth that (hundreds of microseconds a layer in RAM), not in a
step that runs on the GPU alone. A graph captured whole (torch.cuda.graph, as the prefill's
and the batch's are) cannot be cut: `can_cut` says so, and the callers take another path there.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

_capturing = threading.local()  # .recorder: the _Recorder of this thread's capture, if any


class Handoff:
    """What a cut's before_wait gets (the module docstring): wait() for the device's work
    before the cut, launch_next() to queue the piece after it (eagerly: nothing to queue)."""

    def __init__(self, wait: Callable[[], None], launch: Callable[[], None]):
        self.wait = wait
        self._launch = launch
        self.launched = threading.Event()

    def launch_next(self) -> None:
        self._launch()
        self.launched.set()


@dataclass(frozen=True)
class Piece:
    graph: torch.cuda.CUDAGraph
    host_step: Callable[[], None] | None  # run after the graph, once the device has done it
    before_wait: Callable[[Handoff], None] | None = None  # run before the host waits for it
    ended: torch.cuda.Event = field(default_factory=torch.cuda.Event)  # recorded after it


class _Recorder:
    def __init__(self, pool):
        self.pool = pool
        self.pieces: list[Piece] = []
        self.graph = self._begin()

    def _begin(self) -> torch.cuda.CUDAGraph:
        graph = torch.cuda.CUDAGraph()
        graph.capture_begin(pool=self.pool)
        return graph

    def cut(self, host_step: Callable[[], None], before_wait: Callable[[Handoff], None] | None
            ) -> None:  # fmt: skip
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
    before_wait: Callable[[Handoff], None] | None = None,
) -> None:
    """Pause the step here for host_step (the module docstring); before_wait, if any, runs
    before the host waits for the device's work so far."""
    recorder = getattr(_capturing, "recorder", None)
    if recorder is not None:
        recorder.cut(host_step, before_wait)
        return
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        raise RuntimeError("a graph captured whole cannot pause for host work (can_cut)")
    wait = lambda: None  # noqa: E731 (the CPU: nothing runs behind the host's back)
    if device.type == "cuda":
        reached = torch.cuda.Event()
        reached.record(torch.cuda.current_stream(device))
        wait = reached.synchronize
    if before_wait is not None:
        before_wait(Handoff(wait, lambda: None))  # the code after the cut is the next piece
    wait()
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
    """Each piece in order, its host step after it once the device has done it; a piece after
    a before_wait launched by whoever that handed it to (the module docstring). Returns once
    the last piece is queued, leaving it running: the caller waits for it as for any graph."""
    stream = torch.cuda.current_stream(device)

    def launch(piece: Piece) -> None:
        with torch.cuda.stream(stream):  # the caller's stream, on whichever thread launches
            piece.graph.replay()
            piece.ended.record(stream)

    launch(pieces[0])
    for piece, following in itertools.pairwise(pieces):
        handoff = None
        if piece.before_wait is not None:
            handoff = Handoff(piece.ended.synchronize, functools.partial(launch, following))
            piece.before_wait(handoff)
        started = time.perf_counter()
        piece.ended.synchronize()
        if waits is not None:
            waits.count += 1
            waits.seconds += time.perf_counter() - started
        piece.host_step()
        if handoff is None:
            launch(following)
        elif not handoff.launched.is_set():
            raise RuntimeError("a host step returned before the piece after it was launched")
