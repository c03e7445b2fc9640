"""Experts in system RAM: a layer's routed experts kept in pinned host memory, and read by the
GPU one of two ways.

    placement = ExpertPlacement(ram_layers=12, cache_slots=40)  # the last 12 layers, 40 slots
    experts = ops.prepare_experts_in_ram(gate, up, down, activation, biases, n_slots=40)
    y = ops.moe_ffn_selected(x, experts, ids, weights)  # RamExperts.run: the misses, then GEMV
    # n_slots=0: the prepared experts over pinned memory; moe_ffn runs them as any others

- In place (cache_slots 0): the expert GEMV reads the picked experts' bytes straight from
  pinned host memory over the bus (`device_view`: a CUDA tensor over the pinned pages, as
  vLLM's and SGLang's CPU offload do), every token; nothing is copied or decided on the host,
  so the decode step is still one CUDA graph.
- A cache (cache_slots S): the picked experts not cached are copied into S device slots
  first (RamExperts below); a skewed router's favourites then stay on the GPU, but every
  layer in RAM reads its routing back to the host, so the step runs eagerly.

Why both (docs/decisions/0020-experts-in-ram.md has the arithmetic): attention, the router,
shared experts and the layers whose experts fit stay on the GPU as before; a layer in RAM keeps
every expert as the ops prepared it (kernels' planes, or the file's blocks for plain torch) in
pinned host memory (pinned_copy). Read in place, the GEMV gets device views of those tensors.
With a cache, a device copy of `n_slots` experts in the same layout (expert_slots) lets the
expert GEMV run unchanged on the slots: the step's expert ids become slot ids. Which expert a
slot holds is ExpertSlots' bookkeeping (least recently used out), pure Python, table-tested.

With a cache a step reads its ids back to the host (one synchronisation per layer in RAM: which
experts are missing is only known there), copies each missing expert's rows on a side stream
that the compute stream then waits for, and launches the GEMV on the slots. More distinct
experts than slots (a prefill chunk) go in batches of `n_slots` experts: each batch's pairs
keep their routing weight, the others' are zero (and point at a slot of the batch, so every
slot read holds a real expert), and the batches' outputs are summed in float32. The
synchronisation makes such a decode step impossible to capture in a CUDA graph: the driver runs
the model eagerly (Transformer.routes_on_host).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class ExpertPlacement:
    """Where a MoE model's routed experts live: every layer's on the device (the default), or
    the last `ram_layers` layers' in host memory, each with `cache_slots` experts on the device
    (llama.cpp's --n-cpu-moe counts layers from the end the same way). `on_cpu`: those layers'
    experts are computed by the CPU from the file's mapped blocks instead (ExpertsOnCpu, as
    llama.cpp's --n-cpu-moe does), with `cpu_threads` threads (None: the physical cores, less
    one on a GPU): every pick of a token in those layers. `split_picks` c (0 < c < k): a
    one-token step's first c picks by the CPU and the others copied to the GPU
    (engine/hearth/staged_experts.py)."""

    ram_layers: int = 0
    cache_slots: int = 0
    on_cpu: bool = False
    cpu_threads: int | None = None
    split_picks: int = 0

    def in_ram(self, layer: int, n_layer: int) -> bool:
        return layer >= n_layer - self.ram_layers

    def check(self, n_expert: int, n_expert_used: int) -> None:
        """A cache must hold one token's experts at least (0 slots: read in place), and the
        CPU computing a layer's experts needs no cache: ValueError otherwise."""
        slots, split = self.cache_slots, self.split_picks
        if split and (self.on_cpu or slots or not 0 < split < n_expert_used):
            raise ValueError(
                f"{split} of {n_expert_used} picks a token on the CPU, the others copied: "
                f"between 1 and {n_expert_used - 1}, with no cache and not every pick on the CPU"
            )
        if self.on_cpu and slots:
            raise ValueError(
                f"experts computed on the CPU take no device cache ({slots} slots asked)"
            )
        if self.ram_layers and slots and not n_expert_used <= slots <= n_expert:
            raise ValueError(
                f"an expert cache of {slots} slots: a layer in RAM needs 0 (read in place) or "
                f"between {n_expert_used} (the experts one token uses) and {n_expert} slots"
            )


class ExpertSlots:
    """Which expert each of `n_slots` device slots holds. Slot s starts with expert s (the cache
    is filled with the first experts when it is made); a step's experts are found or loaded
    into the least recently used slots that the step does not need itself."""

    def __init__(self, n_slots: int, n_expert: int):
        if not 0 < n_slots <= n_expert:
            raise ValueError(f"{n_slots} slots for {n_expert} experts")
        self.n_slots, self.n_expert = n_slots, n_expert
        self.expert_in = list(range(n_slots))
        self.slot_of = {e: e for e in range(n_slots)}
        self._recency: OrderedDict[int, None] = OrderedDict.fromkeys(range(n_slots))
        self.hits = 0  # distinct experts a step found in a slot
        self.misses = 0  # distinct experts a step had to copy in

    def assign(self, needed: Sequence[int]) -> tuple[dict[int, int], list[tuple[int, int]]]:
        """({expert: slot} for the distinct experts `needed` (at most n_slots of them), the
        (expert, slot) copies to make first). Needed experts become the most recently used."""
        if len(needed) > self.n_slots:
            raise ValueError(f"{len(needed)} experts for {self.n_slots} slots")
        missing = [e for e in needed if e not in self.slot_of]
        kept = {self.slot_of[e] for e in needed if e in self.slot_of}
        victims = iter([s for s in self._recency if s not in kept])
        loads = []
        for expert in missing:
            slot = next(victims)
            del self.slot_of[self.expert_in[slot]]
            self.expert_in[slot] = expert
            self.slot_of[expert] = slot
            loads.append((expert, slot))
        for expert in needed:
            self._recency.move_to_end(self.slot_of[expert])
        self.hits += len(needed) - len(missing)
        self.misses += len(missing)
        return {e: self.slot_of[e] for e in needed}, loads


def batches(needed: Sequence[int], size: int) -> list[list[int]]:
    """`needed` in consecutive batches of at most `size`."""
    return [list(needed[i : i + size]) for i in range(0, len(needed), size)]


def expert_rows(experts) -> list[tuple[torch.Tensor, int]]:
    """Every tensor of prepared experts (ops.ExpertWeights: the blocks as stored, [n_expert,
    ...]; or ops.PackedExperts: kernels' planes, [n_expert n_out, ...]) that holds one block of
    rows per expert, with the rows one expert takes: what copying an expert copies."""
    parts = (experts.gate, experts.up, experts.down)
    if hasattr(experts.gate, "packed"):
        found = [(plane, w.n_out) for w in parts for plane in w.packed.planes.values()]
        biases = tuple(w.bias for w in parts)
    else:
        found = [(w.data, 1) for w in parts]
        biases = (experts.gate_bias, experts.up_bias, experts.down_bias)
    return found + [(b, 1) for b in biases if b is not None]


def _with_tensors(experts, replace: Callable[[torch.Tensor, int], torch.Tensor]):
    """The same prepared experts with every expert_rows tensor t replaced by replace(t, rows
    per expert), and their expert count set from the result."""
    parts = (experts.gate, experts.up, experts.down)
    if hasattr(experts.gate, "packed"):

        def packed(w):
            planes = {name: replace(p, w.n_out) for name, p in w.packed.planes.items()}
            rows = next(iter(planes.values())).shape[0]
            packed = dataclasses.replace(w.packed, planes=planes, n_out=rows)
            bias = None if w.bias is None else replace(w.bias, 1)
            return dataclasses.replace(w, packed=packed, n_expert=rows // w.n_out, bias=bias)

        return dataclasses.replace(experts, gate=packed(parts[0]), up=packed(parts[1]),
                                   down=packed(parts[2]))  # fmt: skip

    def stored(w):
        data = replace(w.data, 1)
        return dataclasses.replace(w, data=data, n_expert=data.shape[0])

    def bias(b):
        return None if b is None else replace(b, 1)

    return dataclasses.replace(
        experts, gate=stored(parts[0]), up=stored(parts[1]), down=stored(parts[2]),
        gate_bias=bias(experts.gate_bias), up_bias=bias(experts.up_bias),
        down_bias=bias(experts.down_bias),
    )  # fmt: skip


def expert_slots(host, n_slots: int, device: torch.device):
    """The device cache for `host` (prepared experts in host memory): its first n_slots
    experts, copied to `device` (never a view of host, even on the CPU)."""
    return _with_tensors(host, lambda t, rows: t[: n_slots * rows].to(device, copy=True))


def read_in_place(host, device: torch.device):
    """`host` with every expert tensor a device view of its pinned memory (device_view), for
    a GPU to read over the bus; on the CPU the host experts themselves."""
    if device.type != "cuda":
        return host
    return marked_in_host_memory(_with_tensors(host, lambda t, rows: device_view(t, device)))


def marked_in_host_memory(experts):
    """The kernels' prepared experts with each ExpertWeight marked as read over the bus
    (kernels.ExpertWeight.in_host_memory: its kernel choice); torch's as they are."""
    if not hasattr(experts.gate, "packed"):
        return experts
    parts = {name: getattr(experts, name) for name in ("gate", "up", "down")}
    return dataclasses.replace(experts, **{
        name: dataclasses.replace(w, in_host_memory=True) for name, w in parts.items()
    })  # fmt: skip


def in_host_memory(t: torch.Tensor, pin: bool) -> torch.Tensor:
    """t in host memory: pinned (a copy, pinned_copy) for a GPU's asynchronous copies and
    in-place reads; on the CPU a copy too, never the file's mapping itself."""
    t = t.cpu()
    return pinned_copy(t) if pin else t.clone()


@dataclass
class RamExperts:
    """One layer's routed experts in host memory with a device cache of slots (module
    docstring). `host` and `cache` are the same kind of prepared experts (ops.ExpertWeights or
    ops.PackedExperts), n_expert and n_slots experts; `rows` pairs each host tensor with its
    cache tensor and the rows one expert takes in both (the copy unit)."""

    host: object
    cache: object
    slots: ExpertSlots
    rows: list[tuple[torch.Tensor, torch.Tensor, int]]
    # called with the slots just rewritten (TorchOps forgets what it dequantized from them)
    rewritten: Callable[[list[int]], None] = field(default=lambda slots: None, repr=False)
    bytes_copied: int = 0
    _stream: object = field(default=None, repr=False)

    @classmethod
    def of(cls, host, cache, rewritten: Callable[[list[int]], None]) -> RamExperts:
        """From host experts and their device cache (expert_slots), slot s holding expert s."""
        rows = [
            (h, c, r) for (h, r), (c, _) in zip(expert_rows(host), expert_rows(cache), strict=True)
        ]
        return cls(host, cache, ExpertSlots(cache.n_expert, host.n_expert), rows, rewritten)

    @property
    def n_expert(self) -> int:
        return self.slots.n_expert

    @property
    def expert_nbytes(self) -> int:
        """Bytes one expert copy moves (all its rows, biases included)."""
        return sum(r * t.stride(0) * t.element_size() for t, _, r in self.rows)

    def run(self, moe_ffn, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor):
        """moe_ffn(x, self.cache, slot_ids, weights) with the picked experts in their slots
        (module docstring); `moe_ffn` is the ops' own, for experts on the device."""
        picked = ids.cpu()  # the synchronisation: which experts this step needs
        needed = torch.unique(picked).tolist()
        if len(needed) <= self.slots.n_slots:
            return moe_ffn(x, self.cache, self._slot_ids(picked, needed, x.device), weights)
        total = None
        for batch in batches(needed, self.slots.n_slots):
            chosen = torch.isin(picked, torch.tensor(batch))
            slot_ids = self._slot_ids(picked, batch, x.device, chosen)
            part = moe_ffn(x, self.cache, slot_ids, weights * chosen.to(weights.device))
            total = part.float() if total is None else total + part.float()
        return total.to(x.dtype)

    def _slot_ids(self, picked, batch: list[int], device, chosen=None) -> torch.Tensor:
        """The slot of each (token, expert) pair, the batch's experts loaded first; pairs not
        `chosen` point at the batch's first slot (their weight is zero)."""
        where, loads = self.slots.assign(batch)
        self._copy(loads)
        table = torch.zeros(self.n_expert, dtype=torch.int64)
        table[torch.tensor(list(where))] = torch.tensor(list(where.values()))
        slot_ids = table[picked]
        if chosen is not None:
            slot_ids = torch.where(chosen, slot_ids, where[batch[0]])
        return slot_ids.to(device)

    def _copy(self, loads: list[tuple[int, int]]) -> None:
        """Each (expert, slot)'s rows from host memory into the slot: on a GPU on a side stream
        that waits for the work queued before (an earlier batch may still read the slots) and
        that the compute stream then waits for."""
        if not loads:
            return
        device = self.rows[0][1].device
        if device.type != "cuda":
            self._copy_rows(loads)
        else:
            if self._stream is None:
                self._stream = torch.cuda.Stream(device)
            compute = torch.cuda.current_stream(device)
            self._stream.wait_stream(compute)
            with torch.cuda.stream(self._stream):
                self._copy_rows(loads)
            compute.wait_stream(self._stream)
        self.bytes_copied += len(loads) * self.expert_nbytes
        self.rewritten([slot for _, slot in loads])

    def _copy_rows(self, loads: list[tuple[int, int]]) -> None:
        for expert, slot in loads:
            for host, cache, r in self.rows:
                cache[slot * r : (slot + 1) * r].copy_(
                    host[expert * r : (expert + 1) * r], non_blocking=True
                )


# Steps of at most this many tokens (decode, a batch's step, a speculative check) hand the CPU's
# share to a host function in the step's stream (capturable in a CUDA graph); longer ones (a
# prefill chunk) read their routing back and, where the GPU can read the layer in place, give
# it every pick: a chunk's picks cover most experts, which the GPU reads once each over the bus
# where ggml would compute every (token, expert) pair on the CPU.
HOST_CALL_MAX_TOKENS = 16


class _HostCall:
    """One token count's host buffers for a layer's CPU experts (pinned on a GPU: the step's
    copies to and from them are asynchronous and capturable) and the host function that runs
    ggml over them. The function calls no CUDA (a host node must not): it copies nothing but
    host memory and runs ggml's graph. A failure is kept in `error` and the output filled with
    NaN, so that a captured step that failed shows it in its logits. `calls` and `seconds`
    count the function's runs and their time (for measurements: what ggml costs inside the
    step)."""

    def __init__(self, experts, n_tokens: int, k: int, pin: bool):
        def buffer(width: int, dtype: torch.dtype) -> torch.Tensor:
            return torch.empty((n_tokens, width), dtype=dtype, pin_memory=pin)

        self.x = buffer(experts.n_embd, torch.float32)
        self.ids = buffer(k, torch.int32)
        self.weights = buffer(k, torch.float32)
        self.out = buffer(experts.n_embd, torch.float32)
        self.error: BaseException | None = None
        self.calls, self.seconds = 0, 0.0
        at = (self.x.data_ptr(), self.ids.data_ptr(), self.weights.data_ptr(), self.out.data_ptr())

        def compute(_user_data) -> None:
            started = time.perf_counter()
            try:
                experts.run_at(n_tokens, k, *at)
            except BaseException as exc:  # nothing may escape into the driver's thread
                self.error = exc
                self.out.fill_(float("nan"))
            self.calls += 1
            self.seconds += time.perf_counter() - started

        self.compute = compute
        self.host_fn = _HOST_FN(compute) if pin else None  # kept alive with the graphs using it


@dataclass
class ExpertsOnCpu:
    """One layer's routed experts computed on the CPU by ggml's kernels over the file's mapped
    blocks, or ggml's repacked copy of them (engine/hearth/cpu_experts.py), every pick of each
    token.

    A step of up to HOST_CALL_MAX_TOKENS tokens on a GPU reads nothing back to the host: it
    copies x, the picks and their weights into pinned buffers (_HostCall), queues a host
    function (cuLaunchHostFunc) that runs ggml on them, and copies the sum back, all in the
    current stream, so a CUDA graph captures the step whole (the host function as a host
    node). On the CPU the same buffers are filled and the function called directly. A longer
    step (a prefill chunk) copies its inputs to the host and waits for ggml's sum."""

    experts: object  # cpu_experts.CpuExperts
    _calls: dict = field(default_factory=dict, repr=False)

    @property
    def n_expert(self) -> int:
        return self.experts.n_expert

    def host_time(self) -> tuple[int, float]:
        """(calls, seconds) of this layer's host functions so far."""
        calls = list(self._calls.values())
        return sum(c.calls for c in calls), sum(c.seconds for c in calls)

    def errors(self) -> list[BaseException]:
        """What the host functions raised (a captured step cannot raise it itself)."""
        return [call.error for call in self._calls.values() if call.error is not None]

    def run(self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """The picked experts' weighted sum [T, n_embd] in x's dtype."""
        if ids.shape[0] > HOST_CALL_MAX_TOKENS:
            return self._run_waiting(x, ids, weights)
        return self._queue_cpu(x, ids, weights).to(x.dtype)

    def _queue_cpu(self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor):
        """ggml's sum over (ids, weights) as float32 on x's device, queued in the current
        stream on a GPU (module docstring: nothing waits on the host), done at once on the
        CPU."""
        n_tokens, k = ids.shape
        on_gpu = x.device.type == "cuda"
        call = self._calls.get((n_tokens, k))
        if call is None:  # made at the first (eager) step, before any capture
            call = self._calls[(n_tokens, k)] = _HostCall(self.experts, n_tokens, k, on_gpu)
        call.x.copy_(x.float(), non_blocking=True)
        call.ids.copy_(ids.to(torch.int32), non_blocking=True)
        call.weights.copy_(weights.float(), non_blocking=True)
        if not on_gpu:
            call.compute(None)
            return call.out.clone()
        free_main_thread_openmp()  # this thread queues the step; the driver's computes it
        launch_host_function(call.host_fn, x.device)
        return call.out.to(x.device, non_blocking=True)

    def _run_waiting(self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor):
        """Every pick on the CPU, the inputs read back to the host first (a prefill chunk)."""
        out = self.experts.run(
            x.detach().float().cpu().numpy(), ids.cpu().numpy(), weights.float().cpu().numpy()
        )
        return torch.from_numpy(out).to(device=x.device, dtype=x.dtype)


def experts_on_cpu(gate, up, down, activation: str, biases, cpu) -> ExpertsOnCpu:
    """ExpertsOnCpu over QuantExperts as mapped from the file (GGUFTensors.experts with no
    device: torch tensors over the mapping), biases [n_expert, N] or None, on `cpu` (a
    cpu_experts.GgmlCpu); the matrices ggml runs repacked are copied into its repack buffer,
    the others read where they are mapped.
    ValueError for experts not in host memory or a layout ggml refuses."""
    from engine.hearth.cpu_experts import CpuExperts, ExpertTensor

    tensors = []
    for w in (gate, up, down):
        if w.data.device.type != "cpu" or not w.data.is_contiguous():
            raise ValueError(f"{w.name}: the CPU computes experts from contiguous host memory")
        address = w.data.data_ptr()
        tensors.append(
            ExpertTensor(w.name, w.ggml_type, w.n_expert, w.rows, w.cols, address, w.data)
        )
        if w.nbytes != tensors[-1].nbytes:
            raise ValueError(f"{w.name}: {w.nbytes} bytes, {tensors[-1].nbytes} expected")
    host_biases = tuple(None if b is None else b.detach().float().cpu().numpy() for b in biases)
    # repacked as llama.cpp repacks its CPU weights: 1.6-1.7x faster than the mapped blocks at one
    # thread (docs/decisions/0020-experts-in-ram.md), for a copy of the repacked matrices
    return ExpertsOnCpu(
        CpuExperts(*tensors, host_biases, activation=activation, cpu=cpu, repack=True)
    )


# Whether free_main_thread_openmp frees anything (benchmarks/moe_offload.py --keep-openmp-threads
# sets it False to measure the step without it)
FREE_MAIN_THREAD_OPENMP = True


def free_main_thread_openmp() -> None:
    """Free the calling (the stepping) thread's OpenMP team before a step whose host nodes run
    ggml on the driver's thread. ggml computes with libgomp, torch too, through the same
    library (ggml_cpu._openmp), and each calling thread keeps a team: torch's CPU threads and
    any ggml call made on this thread (a prefill chunk's) stay docked here, so with the
    driver thread's own team libgomp counts more threads than CPUs and stops spinning at
    barriers, sleeping and waking every ggml thread at each of a graph's barriers (12-18
    voluntary context switches a call where there were none, benchmarks/cpu_experts_openmp.py).
    Freed, the driver thread's team is libgomp's only one. Cheap when there is nothing to free
    (one call into libgomp); the stepping thread's next parallel region, torch's or ggml's,
    makes its team again."""
    if FREE_MAIN_THREAD_OPENMP:
        from engine.hearth.ggml_cpu import release_openmp_threads

        release_openmp_threads()


PAGE = 4096
_CU_MEMHOSTREGISTER_PORTABLE_DEVICEMAP = 0x1 | 0x2


@functools.cache
def _driver():
    driver = ctypes.CDLL("libcuda.so.1")
    # CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
    driver.cuLaunchHostFunc.argtypes = [ctypes.c_void_p, _HOST_FN, ctypes.c_void_p]
    driver.cuLaunchHostFunc.restype = ctypes.c_int
    return driver


# void CUDA_CB (*CUhostFn)(void *userData)
_HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def launch_host_function(host_fn, device: torch.device) -> None:
    """Queue `host_fn` (a _HOST_FN) in the device's current stream (cuLaunchHostFunc): it runs
    on a driver thread once the work queued before it is done, and the work queued after it
    waits for it; while the stream is captured it becomes the CUDA graph's host node. It must
    call no CUDA function. It takes the GIL to run (ctypes), so a thread that holds the GIL
    while it waits on this stream would never see it finish: torch's waits (synchronize,
    reading a tensor, a graph's replay) release the GIL."""
    stream = torch.cuda.current_stream(device).cuda_stream
    status = _driver().cuLaunchHostFunc(ctypes.c_void_p(stream), host_fn, None)
    if status != 0:
        raise RuntimeError(f"cuLaunchHostFunc failed ({status})")


def pinned_copy(t: torch.Tensor) -> torch.Tensor:
    """t copied into page-locked host memory of its own size in whole pages, registered with
    the driver (cuMemHostRegister) and unregistered when the copy is freed. torch's
    pin_memory() rounds every allocation up to a power of two (a 100 MB plane takes 128 MB:
    +36% over a Qwen3-30B-A3B layer's experts). The buffer starts on a page of its own, so no
    two registrations share a page; where the driver refuses, torch's pin_memory() instead.
    The driver API, not the runtime's, so that a refusal leaves no error for torch's next
    launch check to find."""
    import weakref

    nbytes = t.numel() * t.element_size()
    if nbytes == 0:
        return t.clone()
    size = -(-nbytes // PAGE) * PAGE
    buffer = torch.empty(size + PAGE, dtype=torch.uint8)
    start = -buffer.data_ptr() % PAGE
    region = buffer[start : start + size]
    address = region.data_ptr()
    torch.cuda.synchronize()  # the device's context is current on this thread
    driver = _driver()
    status = driver.cuMemHostRegister_v2(
        ctypes.c_void_p(address), ctypes.c_size_t(size),
        ctypes.c_uint(_CU_MEMHOSTREGISTER_PORTABLE_DEVICEMAP),
    )  # fmt: skip
    if status != 0:
        return t.contiguous().pin_memory()
    out = region[:nbytes].view(t.dtype).view(t.shape)
    out.copy_(t)
    finalizer = weakref.finalize(out, driver.cuMemHostUnregister, ctypes.c_void_p(address))
    finalizer.atexit = False  # at exit the context goes with the process
    return out


class _DeviceArray:
    """__cuda_array_interface__ over `nbytes` bytes at a device address; keeps `owner` (the
    pinned host tensor behind the address) alive as long as a tensor made from it."""

    def __init__(self, address: int, nbytes: int, owner: torch.Tensor):
        self.owner = owner
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (address, False),
            "version": 3,
        }


def device_view(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CUDA tensor over a pinned host tensor's own memory (no copy): kernels reading it read
    host memory over the bus. The address is the driver's (cuMemHostGetDevicePointer; with
    unified addressing the host's own)."""
    if host.device.type != "cpu" or not host.is_contiguous():
        raise ValueError("only a contiguous tensor in pinned host memory can be read in place")
    with torch.cuda.device(device):
        torch.cuda.synchronize()  # the device's context is current on this thread
        driver = _driver()
        address = ctypes.c_uint64()
        status = driver.cuMemHostGetDevicePointer_v2(
            ctypes.byref(address), ctypes.c_void_p(host.data_ptr()), ctypes.c_uint(0)
        )
        if status != 0:  # not page-locked (pinned_copy made it), or no mapping on this GPU
            raise RuntimeError(f"cuMemHostGetDevicePointer failed ({status})")
        nbytes = host.numel() * host.element_size()
        raw = torch.as_tensor(_DeviceArray(address.value, nbytes, host), device=device)
    return raw.view(host.dtype).view(host.shape)


def offload_stats(layers) -> dict[str, int]:
    """Hits, misses and bytes copied over the layers' RamExperts (for benchmarks and logs)."""
    found = [layer.moe.experts for layer in layers if layer.moe is not None]
    ram = [e for e in found if isinstance(e, RamExperts)]
    return {
        "layers_cached": len(ram),
        "hits": sum(e.slots.hits for e in ram),
        "misses": sum(e.slots.misses for e in ram),
        "bytes_copied": sum(e.bytes_copied for e in ram),
    }
