"""Session 26's probe of a split placement (some picks on the CPU while the GPU reads the others
in place): what ggml's experts cost per pick and per call on this host, what a host node adds
in a CUDA graph, and whether the CPU and reads of pinned memory over PCIe slow each other.

    python benchmarks/archive/2026-11-30-s26-probe.py OUT.json

Experts of 4 Qwen3-30B-A3B layers (benchmarks.cpu_experts' file, random blocks); 21 "layers"
a step cycle through them, each with its own random picks (refreshed between replays, so the
host's caches hold none of them). The GPU's in-place reads are stood in for by a torch sum over
a device view of pinned memory of the same bytes as the GPU's picks (3.06 MB a pick).
"""

import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.cpu_experts import experts_file
from engine.hearth.cpu_experts import CpuExperts, gguf_experts
from engine.hearth.expert_offload import ExpertsOnCpu, device_view, pinned_copy
from engine.hearth.ggml_cpu import GgmlCpu

K, N_EXPERT, N_EMBD, PICK = 8, 128, 2048, 3_063_808  # bytes a pick: 2 Q4_K + 1 Q6_K
STEP_LAYERS, THREADS = 21, 15
out = {}
Path("/tmp/cpu-experts").mkdir(exist_ok=True)
path = experts_file(Path("/tmp/cpu-experts"), 4)
cpu = GgmlCpu(THREADS)
layers = [
    CpuExperts(*gguf_experts(path, i), activation="silu", cpu=cpu, repack=True) for i in range(4)
]
rng = np.random.default_rng(0)
every = np.arange(128 * K).reshape(128, K) % N_EXPERT
for layer in layers:
    layer.run(np.zeros((128, N_EMBD), np.float32), every, np.ones((128, K), np.float32))


def ggml_us(c: int, steps: int = 32) -> float:
    x = rng.standard_normal((1, N_EMBD)).astype(np.float32) * 0.02
    w = np.full((1, c), 1.0 / c, np.float32)
    routes = [
        [np.array([rng.choice(N_EXPERT, c, replace=False)]) for _ in range(STEP_LAYERS)]
        for _ in range(steps)
    ]
    started = time.perf_counter()
    for step in routes:
        for i, ids in enumerate(step):
            layers[i % 4].run(x, ids, w)
    return (time.perf_counter() - started) / (steps * STEP_LAYERS) * 1e6


# 1. ggml alone, per layer-token, by picks
for c in (1, 2, 8):
    ggml_us(c, 4)
out["ggml_us"] = {c: min(ggml_us(c) for _ in range(3)) for c in (1, 2, 3, 4, 5, 6, 8)}
print("ggml alone", out["ggml_us"], flush=True)

# 2. the same while another thread copies pinned memory to the GPU without pause
dev = torch.device("cuda")
src = torch.empty(1 << 28, dtype=torch.uint8, pin_memory=True)
dst = torch.empty(1 << 28, dtype=torch.uint8, device=dev)
stop = threading.Event()
copied = [0]


def pump():
    s = torch.cuda.Stream(dev)
    with torch.cuda.stream(s):
        while not stop.is_set():
            dst.copy_(src, non_blocking=True)
            s.synchronize()
            copied[0] += src.numel()


def copy_rate(seconds: float = 1.0) -> float:
    copied[0] = 0
    started = time.perf_counter()
    time.sleep(seconds)
    return copied[0] / (time.perf_counter() - started) / 1e9


t = threading.Thread(target=pump)
t.start()
time.sleep(0.2)
out["copy_alone_gbps"] = copy_rate()
under = {}
for c in (2, 4, 8):
    copied[0] = 0
    started = time.perf_counter()
    us = min(ggml_us(c) for _ in range(3))
    under[c] = (us, copied[0] / (time.perf_counter() - started) / 1e9)
out["ggml_us_beside_copies"] = under
stop.set()
t.join()
print("copies alone", out["copy_alone_gbps"], "ggml beside copies (us, GB/s)", under, flush=True)

# 3. host nodes in a graph: 21 layers a step, c picks each on the CPU; with the GPU's 8 - c
#    picks stood in for by a sum over pinned memory, alone, and both forked in one graph
eoc = [ExpertsOnCpu(layer) for layer in layers]
host = pinned_copy(torch.randint(0, 255, (STEP_LAYERS * K * PICK // 4,), dtype=torch.int32))
view = device_view(host, dev)
x = torch.randn(1, N_EMBD, device=dev, dtype=torch.float16) * 0.02
side = torch.cuda.Stream(dev)
sink = torch.zeros(STEP_LAYERS, device=dev)


def step(c: int, mode: str, ids: torch.Tensor, w: torch.Tensor):
    main = torch.cuda.current_stream(dev)
    total = None
    for i in range(STEP_LAYERS):
        y = None
        if mode in ("cpu", "both") and c:
            side.wait_stream(main)
            with torch.cuda.stream(side):
                y = eoc[i % 4].run(x, ids[i : i + 1, :c], w[i : i + 1, :c])
        if mode in ("gpu", "both") and c < K:
            words = (K - c) * PICK // 4
            at = i * K * PICK // 4
            sink[i] = view[at : at + words].sum()
        if y is not None:
            main.wait_stream(side)
            total = y if total is None else total + y
    return total


def graph_us(c: int, mode: str, replays: int = 24) -> dict:
    ids = torch.zeros(STEP_LAYERS, K, dtype=torch.int32, device=dev)
    w = torch.full((STEP_LAYERS, K), 1.0 / K, device=dev)

    def fresh():
        picks = np.stack([rng.choice(N_EXPERT, K, replace=False) for _ in range(STEP_LAYERS)])
        ids.copy_(torch.from_numpy(picks))

    fresh()
    step(c, mode, ids, w)  # eager once: the host buffers made before the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(c, mode, ids, w)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    before = sum(e.host_time()[1] for e in eoc)
    seconds = 0.0
    for _ in range(replays):
        fresh()
        torch.cuda.synchronize()
        started = time.perf_counter()
        g.replay()
        torch.cuda.synchronize()
        seconds += time.perf_counter() - started
    in_ggml = sum(e.host_time()[1] for e in eoc) - before
    n = replays * STEP_LAYERS
    return {"us_layer": seconds / n * 1e6, "ggml_us_layer": in_ggml / n * 1e6}


graphs = {}
for c in (0, 1, 2, 3, 4, 5, 6, 8):
    row = {}
    for mode in ("cpu", "gpu", "both"):
        if (mode == "cpu" and c == 0) or (mode == "gpu" and c == K):
            continue
        row[mode] = graph_us(c, mode)
    graphs[c] = row
    print("graph c =", c, row, flush=True)
out["graph"] = graphs
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
