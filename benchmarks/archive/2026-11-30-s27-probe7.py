"""Probe 7 of a token's experts split between the CPU and the bus: the GPU's picks copied by
the copy engine (not read in place) into device slots while ggml computes the CPU's picks on
the host, one layer after another with the host waiting for each (what a decode step cut at
each layer in RAM would do between its graph pieces). Per layer, us:

- copies: the 8 - c picks' 12 planes each (Qwen3-30B-A3B: gate and up Q4_K, down Q6_K, the
  engine's plane sizes), one cuMemcpyHtoDAsync per plane and pick, or one cuMemcpyBatchAsync;
- ggml: c picks called directly (15 threads), its output copied to the device;
- both in one layer's time: copies issued, then ggml, then the stream waited for;
- a graph piece of 10 small kernels replayed and waited for (the layer's GPU work between).

    python benchmarks/archive/2026-11-30-s27-probe7.py OUT.json
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
from engine.hearth.expert_offload import _driver, pinned_copy
from engine.hearth.ggml_cpu import GgmlCpu

K, N_EXPERT, N_EMBD, STEP_LAYERS, HOST_LAYERS = 8, 128, 2048, 21, 4
# one expert's plane bytes: gate and up (Q4_K, 768 x 2048: d, dmin, scales, qs), down (Q6_K,
# 2048 x 768: ql, qh, scales, d)
GATE = (12288, 12288, 73728, 786432)
PLANES = GATE + GATE + (786432, 393216, 98304, 12288)
out_path = Path(sys.argv[1])
out: dict = {}


def save(key, value):
    out[key] = value
    out_path.write_text(json.dumps(out, indent=1))
    print(f"{key}: {value}", flush=True)


dev = torch.device("cuda")
torch.zeros(1, device=dev)
driver = _driver()
version = ctypes.c_int()
driver.cuDriverGetVersion(ctypes.byref(version))
save("driver_version", version.value)
save("torch_cuda", torch.version.cuda)
host = [
    [pinned_copy(torch.randint(0, 255, (N_EXPERT * n,), dtype=torch.uint8)) for n in PLANES]
    for _ in range(HOST_LAYERS)
]
slots = [torch.empty(K * n, dtype=torch.uint8, device=dev) for n in PLANES]
stream = torch.cuda.current_stream(dev)
handle = ctypes.c_void_p(stream.cuda_stream)
driver.cuMemcpyHtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t,
                                        ctypes.c_void_p]  # fmt: skip


class Attrs(ctypes.Structure):
    _fields_ = [("order", ctypes.c_int), ("src_type", ctypes.c_int), ("src_id", ctypes.c_int),
                ("dst_type", ctypes.c_int), ("dst_id", ctypes.c_int), ("flags", ctypes.c_uint)]  # fmt: skip


batch = getattr(driver, "cuMemcpyBatchAsync", None)
save("has_batch", batch is not None)
attrs = Attrs(1, 0, 0, 0, 0, 0)  # CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
zero = (ctypes.c_size_t * 1)(0)
fail = ctypes.c_size_t()
MAX = 12 * K
dsts, srcs, sizes = (ctypes.c_uint64 * MAX)(), (ctypes.c_uint64 * MAX)(), (ctypes.c_size_t * MAX)()


def copies(layer: int, picks, how: str) -> None:
    n = 0
    for slot, e in enumerate(picks):
        for p, size in enumerate(PLANES):
            dst = slots[p].data_ptr() + slot * size
            src = host[layer][p].data_ptr() + int(e) * size
            if how == "each":
                status = driver.cuMemcpyHtoDAsync_v2(dst, src, size, handle)
                assert status == 0, status
            else:
                dsts[n], srcs[n], sizes[n] = dst, src, size
            n += 1
    if how == "batch" and n:
        status = batch(dsts, srcs, sizes, ctypes.c_size_t(n), ctypes.byref(attrs), zero,
                       ctypes.c_size_t(1), ctypes.byref(fail), handle)  # fmt: skip
        assert status == 0, (status, fail.value)


if batch is not None:
    try:
        copies(0, [1, 2], "batch")
        torch.cuda.synchronize()
        assert torch.equal(slots[3][:786432].cpu(), host[0][3][786432 : 2 * 786432])
        save("batch_ok", True)
    except Exception as exc:  # noqa: BLE001
        save("batch_ok", repr(exc))
        batch = None

Path("/tmp/cpu-experts").mkdir(exist_ok=True)
path = experts_file(Path("/tmp/cpu-experts"), HOST_LAYERS)
cpu = GgmlCpu(15)
layers = [CpuExperts(*gguf_experts(path, i), activation="silu", cpu=cpu, repack=True)
          for i in range(HOST_LAYERS)]  # fmt: skip
every = np.arange(128 * K).reshape(128, K) % N_EXPERT
for layer in layers:
    layer.run(np.zeros((128, N_EMBD), np.float32), every, np.ones((128, K), np.float32))
rng = np.random.default_rng(0)
x = rng.standard_normal((1, N_EMBD)).astype(np.float32) * 0.02
cpu_out = torch.empty(N_EMBD, dtype=torch.float32, pin_memory=True)
dev_out = torch.empty(N_EMBD, dtype=torch.float32, device=dev)
a = torch.randn(N_EMBD, device=dev)
piece = torch.cuda.CUDAGraph()
s = torch.cuda.Stream(dev)
s.wait_stream(stream)
with torch.cuda.stream(s):
    b = a * 1.0
with torch.cuda.graph(piece):
    b = a * 1.0
    for _ in range(9):
        b = b * 1.0001
torch.cuda.synchronize()


def layer_time(c: int, how: str | None, with_piece: bool, steps: int = 8) -> float:
    total = 0.0
    for step in range(steps + 1):
        picks = [rng.choice(N_EXPERT, K, replace=False) for _ in range(STEP_LAYERS)]
        torch.cuda.synchronize()
        started = time.perf_counter()
        for i in range(STEP_LAYERS):
            ids = picks[i]
            if with_piece:
                piece.replay()
                stream.synchronize()
            if how is not None and c < K:
                copies(i % HOST_LAYERS, ids[c:], how)
            if c:
                y = layers[i % HOST_LAYERS].run(x, ids[None, :c], np.full((1, c), 0.1, np.float32))
                cpu_out.numpy()[:] = y[0]
                dev_out.copy_(cpu_out, non_blocking=True)
            stream.synchronize()
        if step:
            total += time.perf_counter() - started
    return total / (steps * STEP_LAYERS) * 1e6


save("piece alone", layer_time(0, None, True))
modes = ["each"] + (["batch"] if batch is not None else [])
for how in modes:
    for n in (4, 5, 8):
        c = K - n
        # copies only: c picks skipped on the CPU side
        total = 0.0
        for step in range(9):
            picks = [rng.choice(N_EXPERT, K, replace=False) for _ in range(STEP_LAYERS)]
            torch.cuda.synchronize()
            started = time.perf_counter()
            for i in range(STEP_LAYERS):
                copies(i % HOST_LAYERS, picks[i][c:], how)
                stream.synchronize()
            if step:
                total += time.perf_counter() - started
        save(f"copies {how} {n} picks", total / (8 * STEP_LAYERS) * 1e6)
for c in (3, 4):
    save(f"ggml {c} picks", layer_time(c, None, False))
for how in modes:
    for c in (2, 3, 4):
        save(f"both {how} c={c}", layer_time(c, how, False))
        save(f"both {how} c={c} with piece", layer_time(c, how, True))
