"""Session 26's fourth probe: the GPU's reads of pinned host memory in place (SM loads over
PCIe) stop while ggml computes on the CPU, at any thread count, where copies by the copy
engine go on (probe 3). Do the host pages' size and allocator matter? The same in-place sums
over three kinds of pinned memory: registered 4 KiB pages (expert_offload.pinned_copy, as
today), registered 2 MiB pages (an anonymous mapping with MADV_HUGEPAGE), and torch's
cudaHostAlloc; each alone and forked beside ggml's host nodes (c = 4 picks, 15 threads).

    python benchmarks/archive/2026-11-30-s26-probe4.py OUT.json
"""

import ctypes
import json
import mmap
import sys
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.cpu_experts import experts_file
from engine.hearth.cpu_experts import CpuExperts, gguf_experts
from engine.hearth.expert_offload import (
    _CU_MEMHOSTREGISTER_PORTABLE_DEVICEMAP,
    ExpertsOnCpu,
    _driver,
    device_view,
    pinned_copy,
)
from engine.hearth.ggml_cpu import GgmlCpu

K, N_EXPERT, N_EMBD, PICK = 8, 128, 2048, 3_063_808
STEP_LAYERS, C = 21, 4
HUGE = 2 << 20
dev = torch.device("cuda")
Path("/tmp/cpu-experts").mkdir(exist_ok=True)
path = experts_file(Path("/tmp/cpu-experts"), 4)
cpu = GgmlCpu(15)
layers = [
    CpuExperts(*gguf_experts(path, i), activation="silu", cpu=cpu, repack=True) for i in range(4)
]
every = np.arange(128 * K).reshape(128, K) % N_EXPERT
for layer in layers:
    layer.run(np.zeros((128, N_EMBD), np.float32), every, np.ones((128, K), np.float32))
rng = np.random.default_rng(0)
eoc = [ExpertsOnCpu(layer) for layer in layers]
words_all = STEP_LAYERS * K * PICK // 4
x = torch.randn(1, N_EMBD, device=dev, dtype=torch.float16) * 0.02
side = torch.cuda.Stream(dev)
sink = torch.zeros(STEP_LAYERS, device=dev)
ids = torch.zeros(STEP_LAYERS, K, dtype=torch.int32, device=dev)
w = torch.full((STEP_LAYERS, K), 1.0 / K, device=dev)


def huge_pinned(n_words: int) -> tuple[torch.Tensor, object]:
    size = -(-n_words * 4 // HUGE) * HUGE
    mm = mmap.mmap(-1, size + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    start = -base % HUGE
    mm.madvise(mmap.MADV_HUGEPAGE, start, size)
    raw = torch.frombuffer(mm, dtype=torch.uint8)[start : start + size]
    raw.fill_(1)
    status = _driver().cuMemHostRegister_v2(
        ctypes.c_void_p(raw.data_ptr()),
        ctypes.c_size_t(size),
        ctypes.c_uint(_CU_MEMHOSTREGISTER_PORTABLE_DEVICEMAP),
    )
    assert status == 0, status
    return raw.view(torch.int32)[:n_words], mm


def anon_huge_kb() -> int:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages"):
            return int(line.split()[1])
    return -1


out = {"thp": Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()}
before = anon_huge_kb()
sources = {"registered_4k": pinned_copy(torch.ones(words_all, dtype=torch.int32))}
out["anon_huge_kb_after_4k"] = anon_huge_kb() - before
torch.cuda.synchronize()
sources["registered_2m"], keep = huge_pinned(words_all)
out["anon_huge_kb_after_2m"] = anon_huge_kb() - before
sources["cuda_host_alloc"] = torch.ones(words_all, dtype=torch.int32, pin_memory=True)
views = {name: device_view(t, dev) for name, t in sources.items()}


def fresh():
    picks = np.stack([rng.choice(N_EXPERT, K, replace=False) for _ in range(STEP_LAYERS)])
    ids.copy_(torch.from_numpy(picks))


def step(view, with_cpu: bool):
    main = torch.cuda.current_stream(dev)
    for i in range(STEP_LAYERS):
        if with_cpu:
            side.wait_stream(main)
            with torch.cuda.stream(side):
                eoc[i % 4].run(x, ids[i : i + 1, :C], w[i : i + 1, :C])
        if view is not None:
            words = (K - C) * PICK // 4
            at = i * K * PICK // 4
            sink[i] = view[at : at + words].sum()
        if with_cpu:
            main.wait_stream(side)


def timed(view, with_cpu: bool, replays: int = 16) -> float:
    fresh()
    step(view, with_cpu)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(view, with_cpu)
    g.replay()
    torch.cuda.synchronize()
    seconds = 0.0
    for _ in range(replays):
        fresh()
        torch.cuda.synchronize()
        started = time.perf_counter()
        g.replay()
        torch.cuda.synchronize()
        seconds += time.perf_counter() - started
    return seconds / (replays * STEP_LAYERS) * 1e6


out["ggml alone"] = timed(None, True)
print(out, flush=True)
for name, view in views.items():
    for with_cpu in (False, True):
        key = f"{name} {'beside ggml' if with_cpu else 'alone'}"
        out[key] = timed(view, with_cpu)
        print(f"{key}: {out[key]:.1f} us a layer", flush=True)
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
