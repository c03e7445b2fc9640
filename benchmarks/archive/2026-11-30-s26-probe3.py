"""Session 26's third probe: the forked host node (ggml, c picks) and in-place reads (8 - c
picks' bytes) at several ggml thread counts: does a CPU that reads host memory less hard leave
the GPU's reads over PCIe their rate?

    python benchmarks/archive/2026-11-30-s26-probe3.py OUT.json
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
    _HOST_FN,
    ExpertsOnCpu,
    _driver,
    device_view,
    pinned_copy,
)
from engine.hearth.ggml_cpu import GgmlCpu

K, N_EXPERT, N_EMBD, PICK = 8, 128, 2048, 3_063_808
STEP_LAYERS = 21
C = 4
dev = torch.device("cuda")
Path("/tmp/cpu-experts").mkdir(exist_ok=True)
path = experts_file(Path("/tmp/cpu-experts"), 4)
rng = np.random.default_rng(0)
eoc = []


def use_threads(n: int) -> None:
    cpu = GgmlCpu(n)
    layers = [
        CpuExperts(*gguf_experts(path, i), activation="silu", cpu=cpu, repack=True)
        for i in range(4)
    ]
    every = np.arange(128 * K).reshape(128, K) % N_EXPERT
    for layer in layers:
        layer.run(np.zeros((128, N_EMBD), np.float32), every, np.ones((128, K), np.float32))
    eoc[:] = [ExpertsOnCpu(layer) for layer in layers]


host = pinned_copy(torch.randint(0, 255, (STEP_LAYERS * K * PICK // 4,), dtype=torch.int32))
view = device_view(host, dev)
staged = torch.empty(K * PICK // 4, dtype=torch.int32, device=dev)
# pinned by torch (a copy from it can be captured): the same size as `host`
dma_source = torch.empty(host.numel(), dtype=torch.int32, pin_memory=True)
x = torch.randn(1, N_EMBD, device=dev, dtype=torch.float16) * 0.02
side = torch.cuda.Stream(dev)
sink = torch.zeros(STEP_LAYERS, device=dev)
libc = ctypes.CDLL("libc.so.6")
USLEEP = ctypes.cast(libc.usleep, _HOST_FN)  # void (*)(void *): usleep(user data)
ids = torch.zeros(STEP_LAYERS, K, dtype=torch.int32, device=dev)
w = torch.full((STEP_LAYERS, K), 1.0 / K, device=dev)
SLEEP_US = {"usleep": 300}
GPU_CYCLES = 250 * 1980  # about 250 us at the H200's clock


def fresh():
    picks = np.stack([rng.choice(N_EXPERT, K, replace=False) for _ in range(STEP_LAYERS)])
    ids.copy_(torch.from_numpy(picks))


def step(cpu_kind: str | None, gpu_kind: str | None):
    main = torch.cuda.current_stream(dev)
    for i in range(STEP_LAYERS):
        forked = False
        if cpu_kind:
            side.wait_stream(main)
            forked = True
            with torch.cuda.stream(side):
                if cpu_kind == "ggml":
                    eoc[i % 4].run(x, ids[i : i + 1, :C], w[i : i + 1, :C])
                else:
                    stream = torch.cuda.current_stream(dev).cuda_stream
                    _driver().cuLaunchHostFunc(
                        ctypes.c_void_p(stream), USLEEP, ctypes.c_void_p(SLEEP_US[cpu_kind])
                    )
        if gpu_kind == "pinned":
            words = (K - C) * PICK // 4
            at = i * K * PICK // 4
            sink[i] = view[at : at + words].sum()
        elif gpu_kind == "copy":  # the same bytes by the copy engine (DMA), not SM loads
            words = (K - C) * PICK // 4
            at = i * K * PICK // 4
            staged[:words].copy_(dma_source[at : at + words], non_blocking=True)
        elif gpu_kind == "sleep":
            torch.cuda._sleep(GPU_CYCLES)
        if forked:
            main.wait_stream(side)


def timed(cpu_kind, gpu_kind, graph: bool, replays: int = 16) -> float:
    fresh()
    step(cpu_kind, gpu_kind)
    torch.cuda.synchronize()
    g = None
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step(cpu_kind, gpu_kind)
        g.replay()
        torch.cuda.synchronize()
    seconds = 0.0
    for _ in range(replays):
        fresh()
        torch.cuda.synchronize()
        started = time.perf_counter()
        if g is None:
            step(cpu_kind, gpu_kind)
        else:
            g.replay()
        torch.cuda.synchronize()
        seconds += time.perf_counter() - started
    return seconds / (replays * STEP_LAYERS) * 1e6


out = {}
for threads in (15, 8, 4, 12):
    use_threads(threads)
    for c in (2, 3, 4):
        globals()["C"] = c
        for cpu_kind, gpu_kind in (
            ("ggml", None),
            (None, "pinned"),
            ("ggml", "pinned"),
            (None, "copy"),
            ("ggml", "copy"),
        ):
            name = f"threads={threads} c={c} cpu={cpu_kind} gpu={gpu_kind}"
            out[name] = timed(cpu_kind, gpu_kind, True)
            print(f"{name}: {out[name]:.1f} us a layer", flush=True)
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
