"""Experts in system RAM, a token's picks split: the copy engine brings some to the GPU while
ggml computes the others on the CPU.

Reading a layer's picks in place over the bus is held by the link (about 510 us a layer of 8
Qwen3-30B-A3B picks on the H200's host), and the CPU placement by ggml (about 475 us). Both at
once in one step did not help: the GPU's in-place reads stall while ggml computes, whatever the
pages. Copies by the copy engine do go on beside ggml, in large requests
(docs/decisions/2026-11-30-experts-split-between-cpu-and-bus.md). So a decode step of one
token, for each layer in RAM:

    GPU   ... router -> x, ids, weights into pinned host buffers (kernels/step_to_host.py)
          | pause (graph_pieces.cut)
    host  a copier thread, waiting for the GPU beside the stepping thread, reads the ids,
          copies the last k - c picks, one copy each, into the device slots
          (cuMemcpyHtoDAsync into the step's stream) and launches the step's next piece;
          ggml computes the first c picks on the stepping thread meanwhile, writes their sum
          to pinned memory and raises a flag there (with `early_copies`, the stepping thread
          first issues the first of the copies itself, and the copier launches after it)
    GPU   the slots laid out tensor by tensor (kernels/expert_unpack.py), the expert GEMV over
          them with the picks' weights, plus ggml's sum once its flag is up
          (kernels/host_published.py) ...

So the next piece is queued while ggml computes, and its launch (40-70 us of the driver's
time on an H200 host) is off the step's path: the GPU goes on the moment the copies are in and
waits for ggml's sum only where it adds it.

In host memory each expert's tensors lie side by side (`whole`), so a pick is one 3 MB copy
(twelve copies of its planes ran at about 60% of the link). The slots are shared by every
layer in RAM (StagingArea): layers run one after another, and each layer's host step runs
only once the GPU has finished the one before. Either half of the pause can be the longer
(5 of Qwen3-30B-A3B's 8 picks copy in about 270 us at an H200 host's 55 GB/s; ggml's 3 took
230 us on one host, 320-360 on another), so both threads wait for the GPU themselves and
each starts its half at once, neither waiting to be woken by the other (a thread woken by
another starts late: docs/decisions/2026-11-30-experts-copier-waits.md). c and early_copies
are chosen on the machine by timing the decode step (engine/hearth/split_tuning.py).

Steps of more than one token (prefill chunks, batches, a speculative check) and steps inside a
graph captured whole read every pick in place (`in_place`), as that placement does. So host
memory holds the layer three times: in the GEMV's planes (read in place), side by side
(copied), and ggml's repacked copy.
"""

from __future__ import annotations

import ctypes
import functools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from engine.hearth.expert_offload import (
    _driver,
    _with_tensors,
    expert_rows,
    pinned_copy,
)
from engine.hearth.graph_pieces import Handoff, can_cut, cut

ROW_ALIGN = 16  # bytes: each tensor's start in a staged row
PLANE_ALIGN = 256  # bytes: each tensor's slots in the planes buffer
EARLY_COPIES_TIMEOUT_S = 60.0  # the copier's wait for the stepping thread's copies, at most


def expert_sizes(host) -> tuple[int, ...]:
    """Bytes one expert takes in each of the prepared experts' tensors (expert_rows order)."""
    return tuple(rows * t.stride(0) * t.element_size() for t, rows in expert_rows(host))


def _aligned_offsets(sizes, scale: int, align: int) -> tuple[list[int], int]:
    offsets, at = [], 0
    for size in sizes:
        offsets.append(at)
        at += -(-size * scale // align) * align
    return offsets, at


class StagingArea:
    """Device slots for n_slots experts of one layout, shared by the layers in RAM that have it:
    `staged` [n_slots, row] bytes (where the copies land, an expert a row) and `planes` (every
    tensor's slots, where the unpack puts them and the GEMV reads them)."""

    def __init__(self, sizes: tuple[int, ...], n_slots: int, device: torch.device):
        from kernels.expert_unpack import UnpackTable

        self.sizes, self.n_slots, self.device = sizes, n_slots, device
        self.src_offsets, self.row = _aligned_offsets(sizes, 1, ROW_ALIGN)
        dst, total = _aligned_offsets(sizes, n_slots, PLANE_ALIGN)
        self.staged = torch.zeros(n_slots, self.row, dtype=torch.uint8, device=device)
        self.planes = torch.zeros(total, dtype=torch.uint8, device=device)
        self.table = UnpackTable.of(sizes, self.src_offsets, dst, device)
        self._copier: _Copier | None = None
        self._early_issued = threading.Event()  # the stepping thread's copies are issued
        self._early_issued.set()
        self._early_stream: int | None = None
        # the copier's time (for measurements): from the device's wait to the copies issued,
        # and launching the next piece
        self.issue_s = 0.0
        self.launch_s = 0.0

    @property
    def nbytes(self) -> int:
        return self.staged.numel() + self.planes.numel()

    def slot_experts(self, host):
        """`host`'s prepared experts as n_slots experts over the planes buffer."""
        views = {}
        for (t, rows), size, dst in zip(
            expert_rows(host), self.sizes, self.table.dst_offsets, strict=True
        ):
            region = self.planes[dst : dst + self.n_slots * size]
            views[id(t)] = region.view(t.dtype).view(self.n_slots * rows, *t.shape[1:])
        return _with_tensors(host, lambda t, rows: views[id(t)])

    def unpack(self, n: int) -> None:
        """The first n staged experts into the planes: one launch on a GPU."""
        if self.device.type == "cuda":
            from kernels.expert_unpack import unpack_slots

            unpack_slots(self.staged, self.planes, self.table, n)
        else:
            from kernels.expert_unpack import unpack_slots_torch

            unpack_slots_torch(self.staged, self.planes, self.table, n)

    def copy_in_when_done(self, whole: torch.Tensor, picks: Callable[[], list[int]],
                          handoff: Handoff, early: int = 0) -> None:  # fmt: skip
        """Experts (host ids) of `whole` [n_expert, row] into slots 0.. in the current stream,
        on the area's copier thread: it waits for the device's work before the pause
        (handoff.wait), asks `picks()` for the experts (it may read what that work wrote),
        issues their copies (the driver takes 12-15 us a copy) and launches the step's next
        piece (handoff.launch_next), while the caller goes on. `copies_issued` waits for all
        that and raises what the wait, picks(), a copy or the launch raised.

        early: the first that many picks are the stepping thread's to copy (copy_early, once
        it too has seen the device's work): the copier copies the others into the slots after
        them and launches the next piece only once the stepping thread's copies are in the
        stream (the piece reads every slot)."""
        stream = self._stream()
        self._early_stream = stream
        if self._copier is None:
            self._copier = _Copier(self._bind_thread())
        if early:
            self._early_issued.clear()

        def job() -> None:
            handoff.wait()
            woke = time.perf_counter()
            self._issue(whole, picks()[early:], stream, first_slot=early)
            issued = time.perf_counter()
            if not self._early_issued.wait(EARLY_COPIES_TIMEOUT_S):
                raise RuntimeError(
                    "the stepping thread never issued its expert copies: the step is lost; "
                    "reload the model"
                )
            handoff.launch_next()
            self.issue_s += issued - woke
            self.launch_s += time.perf_counter() - issued

        self._copier.submit(job)

    def copy_early(self, whole: torch.Tensor, experts: list[int]) -> None:
        """On the stepping thread, after copy_in_when_done(..., early=len(experts)) and the
        device's wait: those experts into slots 0.. in the same stream. The copier's launch
        waits for this call, so it always lets the copier go on, even when a copy fails."""
        try:
            self._issue(whole, experts, self._early_stream)
        finally:
            self._early_issued.set()

    def release_early(self) -> None:
        """Let the copier launch without the stepping thread's copies (a host step that
        failed before copy_early): the piece then reads stale slots, and the step raises."""
        self._early_issued.set()

    def copies_issued(self) -> None:
        """Wait until copy_in_when_done's copies and launch are in the stream (raises what
        they raised)."""
        if self._copier is not None:
            self._copier.wait()

    def _stream(self) -> int | None:
        """The device's current stream (its CUstream handle); None on the CPU."""
        if self.device.type != "cuda":
            return None
        return torch.cuda.current_stream(self.device).cuda_stream

    def _bind_thread(self) -> Callable[[], None]:
        """What makes the device current on the copier thread (a thread's CUDA calls need its
        context); nothing on the CPU."""
        if self.device.type != "cuda":
            return lambda: None
        index = self.device.index  # the number as this thread has it ("cuda": the current)
        index = torch.cuda.current_device() if index is None else index
        return lambda: torch.cuda.set_device(index)

    def _issue(self, whole: torch.Tensor, experts: list[int], stream: int | None,
               first_slot: int = 0) -> None:  # fmt: skip
        if stream is None:
            for slot, expert in enumerate(experts, first_slot):
                self.staged[slot].copy_(whole[int(expert)])
            return
        copy, row, dst, src = _copy_function(), self.row, self.staged.data_ptr(), whole.data_ptr()
        for slot, expert in enumerate(experts, first_slot):
            status = copy(dst + slot * row, src + expert * row, row, ctypes.c_void_p(stream))
            if status != 0:
                raise RuntimeError(f"copying an expert to the GPU failed (CUDA error {status})")


class _Copier:
    """A daemon thread running one job at a time for the stepping thread, after `bind` (on a
    GPU: the device's context made current on the thread: a thread's CUDA calls need one).
    ctypes releases the GIL in a call, so copies are issued while the stepping thread is
    inside ggml. What a job raises is raised by the next wait()."""

    def __init__(self, bind):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._done = threading.Event()
        self._done.set()
        self._error: BaseException | None = None
        threading.Thread(target=self._loop, args=(bind,), name="hearth-expert-copies",
                         daemon=True).start()  # fmt: skip

    def _loop(self, bind) -> None:
        try:
            bind()
            broken = None
        except BaseException as exc:  # every job then fails with it
            broken = exc
        while True:
            fn, args = self._jobs.get()
            try:
                if broken is not None:
                    raise broken
                fn(*args)
            except BaseException as exc:  # handed to the stepping thread by wait()
                self._error = exc
            self._done.set()

    def submit(self, fn, *args) -> None:
        self.wait()
        self._done.clear()
        self._jobs.put((fn, args))

    def wait(self) -> None:
        self._done.wait()
        error, self._error = self._error, None
        if error is not None:
            raise error


@functools.cache
def _copy_function():
    copy = _driver().cuMemcpyHtoDAsync_v2
    # CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
    copy.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    copy.restype = ctypes.c_int
    return copy


def whole_experts(host, area: StagingArea, pin: bool) -> torch.Tensor:
    """`host`'s experts with each one's tensors side by side: [n_expert, area.row] bytes, in
    pinned memory for a GPU's copies."""
    tensors = expert_rows(host)
    n_expert = host.n_expert
    whole = torch.zeros(n_expert, area.row, dtype=torch.uint8)
    for (t, _rows), size, at in zip(tensors, area.sizes, area.src_offsets, strict=True):
        whole[:, at : at + size] = t.contiguous().view(torch.uint8).reshape(n_expert, size)
    return pinned_copy(whole) if pin else whole


@dataclass
class _Mailbox:
    """One step's host buffers (pinned on a GPU) and the device's copy of ggml's sum."""

    x: torch.Tensor  # [1, n_embd] float32: what ggml reads
    ids: torch.Tensor  # [1, k] int32
    weights: torch.Tensor  # [1, k] float32
    out: torch.Tensor  # [1, n_embd] float32, ggml's sum, read by the device where it is
    flag: torch.Tensor  # [1] int32: 1 once `out` is written (kernels/host_published.py)
    slot_ids: torch.Tensor  # [1, k - c]: 0.., the GPU's picks in their slots

    @property
    def raised(self):
        """The flag as the host writes it: a numpy view (a store, not a torch call)."""
        return self.flag.numpy()

    @classmethod
    def make(cls, x: torch.Tensor, k: int, c: int) -> _Mailbox:
        n_embd, device = x.shape[1], x.device
        pin = device.type == "cuda"

        def host(width: int, dtype: torch.dtype) -> torch.Tensor:
            return torch.zeros(1, width, dtype=dtype, pin_memory=pin)

        slot_ids = torch.arange(k - c, dtype=torch.int32, device=device).view(1, -1)
        return cls(host(n_embd, torch.float32), host(k, torch.int32), host(k, torch.float32),
                   host(n_embd, torch.float32), host(1, torch.int32).view(1),
                   slot_ids)  # fmt: skip


@dataclass(eq=False)
class StagedExperts:
    """One layer's routed experts in host memory, a one-token step's first `cpu_picks` picks
    by ggml and the others copied into `area`'s slots (module docstring). in_place: the
    prepared experts read over the bus (every other step); slots: the same experts' layout
    over area's slots; cpu: ggml's experts (cpu_experts.CpuExperts).

    cpu_picks may change between captures (engine/hearth/split_tuning.py tries several on
    this machine): each capture, or eager step, keeps the share it was made with, its own
    host buffers and its slots (area has room for the most). early_copies (of the GPU's
    picks, copied by the stepping thread before ggml rather than by the copier) is read at
    every step."""

    in_place: object
    slots: object
    whole: torch.Tensor
    area: StagingArea
    cpu: object
    cpu_picks: int
    # called with the slots just rewritten (TorchOps forgets what it dequantized from them)
    rewritten: Callable[[list[int]], None] = field(default=lambda slots: None, repr=False)
    early_copies: int = 0
    # the host steps run, and their time in parts (for measurements): the stepping thread's
    # early copies, ggml, waiting for the copier after it, the whole step
    steps: int = 0
    early_s: float = 0.0
    ggml_s: float = 0.0
    issue_wait_s: float = 0.0
    host_s: float = 0.0
    _boxes: dict[int, _Mailbox] = field(default_factory=dict, repr=False)

    @property
    def n_expert(self) -> int:
        return self.in_place.n_expert

    def run(self, moe_ffn_selected, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor,
            slots_ffn=None):  # fmt: skip
        """The picked experts' weighted sum [T, n_embd] in x's dtype. `moe_ffn_selected`: the
        ops' own, for experts on the device (x, experts, ids, weights); `slots_ffn`: the same
        for the slots, where the ops have a faster one (KernelsOps: the slots' fixed grouping
        and the norm's 8-bit x)."""
        n_tokens, k = ids.shape
        c = self.cpu_picks
        if n_tokens != 1 or not can_cut(x.device):
            return moe_ffn_selected(x, self.in_place, ids, weights)
        if not 0 < c < k or k - c > self.area.n_slots:
            raise ValueError(f"{c} of {k} picks on the CPU: {self.area.n_slots} slots at most")
        box = self._boxes.get(c)
        if box is None:  # made at the first (eager) step of a share, before any capture
            with torch.inference_mode(False):  # the host step writes it, in the mode or not
                box = self._boxes[c] = _Mailbox.make(x, k, c)
        self._publish(box, x, ids, weights)
        cut(functools.partial(self._host_step, c), x.device,
            functools.partial(self._start_copies, c))  # fmt: skip
        self.area.unpack(k - c)
        on_gpu = (slots_ffn or moe_ffn_selected)(x, self.slots, box.slot_ids, weights[:, c:])
        if x.device.type == "cuda":
            from kernels.host_published import add_published

            return add_published(on_gpu, box.out, box.flag)
        from kernels.host_published import add_published_torch

        return add_published_torch(on_gpu, box.out, box.flag)

    @staticmethod
    def _publish(box: _Mailbox, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor):
        """x (as float32), ids and weights into the host's buffers before the pause: on a
        GPU one launch writing them over the bus (kernels/step_to_host.py)."""
        args = (x.contiguous(), ids.contiguous(), weights.contiguous(), box.x, box.ids,
                box.weights)  # fmt: skip
        if x.device.type == "cuda":
            from kernels.step_to_host import write_to_host

            write_to_host(*args)
        else:
            from kernels.step_to_host import write_to_host_torch

            write_to_host_torch(*args)

    def _start_copies(self, c: int, handoff: Handoff) -> None:
        """Before the pause's wait: the copier waits for the GPU too, then reads the picks,
        issues the GPU's copies (but the stepping thread's early ones) and launches the next
        piece (StagingArea.copy_in_when_done)."""
        early = self._early(c)
        self.area.copy_in_when_done(self.whole, functools.partial(self._gpu_picks, c), handoff,
                                    early)  # fmt: skip

    def _early(self, c: int) -> int:
        k = self._boxes[c].ids.shape[1]
        return min(self.early_copies, k - c)

    def _picks(self, c: int) -> list[int]:
        """The step's picks (host ids), checked: a copy and ggml read host memory by them."""
        ids = self._boxes[c].ids.numpy()[0].tolist()  # a list: min and max of 8 beat numpy's
        if min(ids) < 0 or max(ids) >= self.n_expert:
            raise RuntimeError(f"expert ids {ids} outside 0..{self.n_expert - 1}")
        return ids

    def _gpu_picks(self, c: int) -> list[int]:
        """On the copier thread: the GPU's share of the picks; none where they are outside
        the layer (the stepping thread's own check raises for them)."""
        try:
            return self._picks(c)[c:]
        except RuntimeError:
            return []

    def _host_step(self, c: int) -> None:
        """The stepping thread's early copies, then ggml over the CPU's picks while the copier
        issues the others, its sum published to the device (written, then the flag raised:
        always, so that a piece launched never waits for it in vain)."""
        from kernels.host_published import TIMED_OUT

        started = time.perf_counter()
        box, early = self._boxes[c], self._early(c)
        flag = box.raised
        timed_out = flag[0] == TIMED_OUT
        flag[0] = 0  # the device lowered it too, after its last read
        copied = started
        try:
            if timed_out:
                raise RuntimeError(
                    "the GPU stopped waiting for the CPU's share of the experts (several "
                    "seconds without it): the tokens since are wrong; reload the model"
                )
            picks = self._picks(c)
            if early:
                self.area.copy_early(self.whole, picks[c : c + early])
            copied = time.perf_counter()
            self.cpu.run_at(1, c, box.x.data_ptr(), box.ids.data_ptr(), box.weights.data_ptr(),
                            box.out.data_ptr())  # fmt: skip
        finally:
            if early:
                self.area.release_early()
            flag[0] = 1
        computed = time.perf_counter()
        self.area.copies_issued()
        issued = time.perf_counter()
        self.rewritten(list(range(box.slot_ids.shape[1])))
        self.steps += 1
        done = time.perf_counter()
        self.early_s += copied - started
        self.ggml_s += computed - copied
        self.issue_wait_s += issued - computed
        self.host_s += done - started
