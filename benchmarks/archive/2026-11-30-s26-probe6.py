"""Prepared in session 26, not run yet (no device time was left). Session 26's sixth probe:
do in-place reads of write-combined pinned memory (not snooped by the CPU's caches) go on while
ggml computes, where cacheable pinned memory's stall (probes 2-4)? The in-place sum (4 picks'
bytes) alone and beside ggml's host nodes (4 picks, 15 threads), over registered cacheable pages
(pinned_copy, today) and over cuMemHostAlloc's write-combined pages. Each result is written to
OUT as soon as it is measured.

    python benchmarks/archive/2026-11-30-s26-probe6.py OUT.json
"""

import ctypes
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.cpu_experts import experts_file
from engine.hearth.cpu_experts import CpuExperts, gguf_experts
from engine.hearth.expert_offload import (
    ExpertsOnCpu,
    _DeviceArray,
    _driver,
    device_view,
    pinned_copy,
)
from engine.hearth.ggml_cpu import GgmlCpu

K, N_EXPERT, N_EMBD, PICK = 8, 128, 2048, 3_063_808
STEP_LAYERS, C = 21, 4
WRITECOMBINED_DEVICEMAP_PORTABLE = 0x04 | 0x02 | 0x01
out_path = Path(sys.argv[1])
out: dict = {}


def save(key, value):
    out[key] = value
    out_path.write_text(json.dumps(out, indent=1))
    print(f"{key}: {value}", flush=True)


dev = torch.device("cuda")
torch.zeros(1, device=dev)
torch.cuda.synchronize()
words_all = STEP_LAYERS * K * PICK // 4
nbytes = words_all * 4
views = {
    "registered_cacheable": device_view(pinned_copy(torch.ones(words_all, dtype=torch.int32)), dev)
}
driver = _driver()
pointer = ctypes.c_void_p()
status = driver.cuMemHostAlloc(ctypes.byref(pointer), ctypes.c_size_t(nbytes),
                               ctypes.c_uint(WRITECOMBINED_DEVICEMAP_PORTABLE))  # fmt: skip
save("cuMemHostAlloc_status", status)
if status == 0:
    ctypes.memset(pointer, 1, nbytes)
    address = ctypes.c_uint64()
    driver.cuMemHostGetDevicePointer_v2(ctypes.byref(address), pointer, ctypes.c_uint(0))
    keep = torch.empty(0)
    raw = torch.as_tensor(_DeviceArray(address.value, nbytes, keep), device=dev)
    views["write_combined"] = raw.view(torch.int32)
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
x = torch.randn(1, N_EMBD, device=dev, dtype=torch.float16) * 0.02
side = torch.cuda.Stream(dev)
sink = torch.zeros(STEP_LAYERS, device=dev)
ids = torch.zeros(STEP_LAYERS, K, dtype=torch.int32, device=dev)
w = torch.full((STEP_LAYERS, K), 1.0 / K, device=dev)


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


def timed(view, with_cpu: bool, replays: int = 8) -> float:
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


for name in reversed(list(views)):  # write-combined first: the one this probe is for
    save(f"{name} alone", timed(views[name], False))
    save(f"{name} beside ggml", timed(views[name], True))
save("ggml alone", timed(None, True))
