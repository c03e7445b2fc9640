"""ggml's CPU experts called from a thread of their own, as a CUDA host node calls them (the
driver's thread, through a ctypes callback), with the calling process's main thread keeping its
OpenMP team ("kept": torch's CPU threads and a main-thread ggml call's, docked in the libgomp
both use) or having freed it first ("freed": expert_offload.free_main_thread_openmp, what the
decode step does now). Why it matters: libgomp counts every team's threads, and past the CPUs'
number it stops spinning at barriers, so each of a ggml graph's barriers sleeps and wakes its
threads (engine/hearth/ggml_cpu.release_openmp_threads).

    python -m benchmarks.cpu_experts_openmp [--threads N] [--tokens 24] [--rounds 5]
        [--dir /tmp/cpu-experts]

On a machine other jobs load, `chrt -f 1 python -m ...` (real-time priority) keeps them off the
process's cores, as an idle machine would: without it the spinning team (freed) stalls at each
barrier whose other thread the scheduler took away.

A Qwen3-30B-A3B-shaped layer's experts (benchmarks/cpu_experts.py's file of 4 layers, repacked
as the engine repacks them), 8 distinct random experts a token. A round, per mode: a new
thread made with pthread_create (not Python's: a thread Python has never seen, as the
driver's), which runs 4 untimed decode steps (its OpenMP team made) and then --tokens timed
ones over the 4 layers. Per mode: the best and median round's time a layer-token, the process's
voluntary context switches per call over the timed steps (futex sleeps at the barriers show
here), and its threads at the end of the round.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.cpu_experts import HearthRun, experts_file
from engine.hearth.ggml_cpu import release_openmp_threads
from testkit.synthetic_gguf import SHAPES

QWEN3 = SHAPES["qwen3-30b-a3b"]
K = QWEN3.n_expert_used
N_LAYER = 4
_START = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)  # void *(*)(void *)


def voluntary_switches() -> int:
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                total += sum(int(line.split()[1]) for line in f
                             if line.startswith("voluntary_ctxt_switches"))  # fmt: skip
        except FileNotFoundError:
            pass
    return total


def torch_team() -> None:
    """A parallel torch op on this thread: its OpenMP team made (or kept) at every core."""
    torch.set_num_threads(os.cpu_count() or 1)
    (torch.ones(1 << 22) + 1).sum()


def foreign_round(run: HearthRun, n_tokens: int, rng) -> tuple[float, float, int]:
    """(seconds a layer-token, voluntary switches a call, threads at the end) of n_tokens
    decode steps run by a pthread of its own (module docstring)."""
    steps = [
        [np.array([rng.choice(QWEN3.n_expert, K, replace=False)], np.int32) for _ in run.layers]
        for _ in range(4 + n_tokens)
    ]
    x = np.asarray(rng.standard_normal((1, QWEN3.n_embd)) * 0.02, np.float32)
    weights = np.full((1, K), 1.0 / K, np.float32)
    out = np.empty((1, QWEN3.n_embd), np.float32)
    result = {}

    def body(_arg):
        for i, step in enumerate(steps):
            if i == 4:
                result["switches"] = voluntary_switches()
                result["started"] = time.perf_counter()
            for layer, ids in zip(run.layers, step, strict=True):
                layer.run_at(1, K, x.ctypes.data, ids.ctypes.data, weights.ctypes.data,
                             out.ctypes.data)  # fmt: skip
        result["seconds"] = time.perf_counter() - result["started"]
        result["switches"] = voluntary_switches() - result["switches"]
        result["threads"] = len(os.listdir("/proc/self/task"))
        return None

    start = _START(body)
    libc = ctypes.CDLL(None)
    thread = ctypes.c_ulong()
    if libc.pthread_create(ctypes.byref(thread), None, start, None) != 0:
        raise OSError("pthread_create failed")
    libc.pthread_join(thread, None)  # ctypes drops the GIL: the thread's callback takes it
    calls = n_tokens * len(run.layers)
    return result["seconds"] / calls, result["switches"] / calls, result["threads"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default="/tmp/cpu-experts")
    args = parser.parse_args(argv)
    path = experts_file(Path(args.dir), N_LAYER)
    run = HearthRun(path, N_LAYER, args.threads, None, repack=True)  # main-thread calls first
    rng = np.random.default_rng(0)
    rows: dict[str, list[tuple[float, float, int]]] = {"kept": [], "freed": []}
    for _ in range(args.rounds):
        torch_team()
        rows["kept"].append(foreign_round(run, args.tokens, rng))
        release_openmp_threads()
        rows["freed"].append(foreign_round(run, args.tokens, rng))
    for mode, results in rows.items():
        times = [r[0] * 1e6 for r in results]
        print(
            f"{mode:5} main-thread OpenMP team, {args.threads} ggml threads: "
            f"{min(times):7.0f} us a layer-token (median {statistics.median(times):7.0f}), "
            f"{statistics.median(r[1] for r in results):5.1f} voluntary switches a call, "
            f"{max(r[2] for r in results)} threads",
            flush=True,
        )
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    run.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
